//! What an operator running the relay for real meets, each finding a test
//! through the binary: secrets never dropped by omission nor left
//! readable, limits enforced as promised, delivery errors you can see, a
//! fleet that refuses a Redis that would forget, a reload on SIGHUP, TLS on
//! the listeners, and a service's defaults.

mod durability;
mod errors;
mod files;
mod limits;
mod reload;
mod secrets;
mod tls;
