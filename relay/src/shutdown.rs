//! Stopping: on SIGINT or SIGTERM the queue stops admitting (intake
//! answers 503 `closed` while the listener still serves), delivers what it
//! holds for `shutdown_grace` and keeps the rest (the queue's `shutdown`),
//! and only then does the listener close. A second signal while draining
//! exits at once (code 130): the journal (or the fleet's queue) keeps every
//! 202.

/// Waits for Ctrl-C or SIGTERM.
pub async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
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
