//! Stopping: on SIGINT or SIGTERM the queue stops admitting (intake
//! answers 503 `closed` while the listener still serves), delivers what it
//! holds for `shutdown_grace` and keeps the rest (the queue's `shutdown`),
//! and only then does the listener close. A second signal while draining
//! exits at once (code 130): the journal (or the fleet's queue) keeps every
//! 202.

/// SIGINT and SIGTERM, listened to from [`listen`] on: one that comes
/// while the relay is still starting is kept, and stops it once it serves
/// (without this the default action ended the process at once, before
/// its handler was in place).
#[cfg(unix)]
static STOPS: std::sync::OnceLock<tokio::sync::Mutex<Stops>> = std::sync::OnceLock::new();

#[cfg(unix)]
struct Stops {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

/// Starts listening for SIGINT and SIGTERM (call once, early, inside the
/// runtime); `Err` if the signals cannot be handled.
pub fn listen() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let stops = Stops {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        };
        let _ = STOPS.set(tokio::sync::Mutex::new(stops));
    }
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM (one that came since [`listen`] counts).
pub async fn signal() {
    #[cfg(unix)]
    if let Some(stops) = STOPS.get() {
        let mut stops = stops.lock().await;
        let Stops {
            interrupt,
            terminate,
        } = &mut *stops;
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs `drain` unless a second signal comes first: then exits with code 130.
pub async fn or_quit<T>(drain: impl std::future::Future<Output = T>) -> T {
    tokio::select! {
        done = drain => done,
        () = signal() => {
            println!("second signal: exiting now; what was accepted is kept for the next start");
            std::process::exit(130);
        }
    }
}
