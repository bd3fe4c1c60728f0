//! What an operator running the relay for real meets, each finding a test
//! through the binary: secrets never dropped by omission nor left
//! readable, limits enforced as promised, delivery errors you can see, a
//! fleet that refuses a Redis that would forget, a reload on SIGHUP, TLS on
//! the listeners, and a service's defaults.

mod defaults;
mod durability;
mod errors;
mod files;
mod first_day;
mod health;
mod limits;
mod reload;
mod secrets;
mod tls;

/// A file's or directory's permission bits.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}
