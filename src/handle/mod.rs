//! The handle and its builder: [`ThrottleBuilder`](crate::ThrottleBuilder)
//! validates a configuration and builds a [`Throttle`](crate::Throttle), the
//! cloneable handle through which jobs are admitted (plain, keyed, durable),
//! limits change and shutdown starts. What the handles and the drain share
//! is the drain's ([`crate::drain::shared`]).

pub(crate) mod builder;
pub(crate) mod durable;
pub(crate) mod keyed;
pub(crate) mod settings;
pub(crate) mod submission;
pub(crate) mod submit;
pub(crate) mod throttle;
