//! Signals and stopping. SIGINT, SIGTERM and SIGHUP are caught from the
//! first line of `main` ([`catch`]), before the runtime is built: each is
//! written to a socket pair and read once the relay serves, so none comes
//! to its default action (a `systemctl reload` right after the start used
//! to end the process).
//!
//! On SIGINT or SIGTERM the queue stops admitting (intake answers 503
//! `closed` while the listener still serves), delivers what it holds for
//! `shutdown_grace` and keeps the rest (the queue's `shutdown`: deliveries
//! still running at the end of the grace are stopped and their webhooks
//! kept for the next start, or left to the fleet), and then the
//! listeners close: the process exits within the grace and a second. A
//! second signal while draining exits at once (code 130): the journal (or
//! the fleet's queue) keeps every 202. SIGHUP reloads the configuration
//! ([`crate::serve::reload`]).

use std::io::Read;
use std::os::unix::net::UnixStream as StdStream;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

/// The signals caught from `main`'s first line, not read yet.
pub(crate) struct Caught {
    /// SIGINT and SIGTERM: a byte each.
    stops: StdStream,
    /// SIGHUP: a byte each.
    hangups: StdStream,
}

/// Catches SIGINT, SIGTERM and SIGHUP from now on (call first thing in
/// `main`): each arrival is kept until it is read.
pub(crate) fn catch() -> std::io::Result<Caught> {
    let (stops, stop_writes) = StdStream::pair()?;
    let (hangups, hangup_writes) = StdStream::pair()?;
    signal_hook::low_level::pipe::register(SIGINT, stop_writes.try_clone()?)?;
    signal_hook::low_level::pipe::register(SIGTERM, stop_writes)?;
    signal_hook::low_level::pipe::register(SIGHUP, hangup_writes)?;
    Ok(Caught { stops, hangups })
}

/// SIGINT and SIGTERM, read from [`listen`] on.
static STOPS: std::sync::OnceLock<tokio::sync::Mutex<UnixStream>> = std::sync::OnceLock::new();

impl Caught {
    /// For a command that does not serve: SIGINT or SIGTERM ends it (code
    /// 130), SIGHUP is ignored.
    pub(crate) fn for_command(self) {
        let Caught { mut stops, .. } = self;
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            if stops.read(&mut byte).is_ok_and(|n| n > 0) {
                std::process::exit(130);
            }
        });
    }
}

/// From now on (inside the runtime) SIGINT and SIGTERM stop the relay
/// through [`signal`], one that came before included; the SIGHUPs come
/// through the answer.
pub(crate) fn listen(caught: Caught) -> std::io::Result<Hangups> {
    let Caught { stops, hangups } = caught;
    stops.set_nonblocking(true)?;
    hangups.set_nonblocking(true)?;
    let _ = STOPS.set(tokio::sync::Mutex::new(UnixStream::from_std(stops)?));
    Ok(Hangups(UnixStream::from_std(hangups)?))
}

/// SIGHUPs, as they come.
pub(crate) struct Hangups(UnixStream);

impl Hangups {
    /// The next SIGHUP (several that came together count as one); `None`
    /// once none can come.
    pub(crate) async fn recv(&mut self) -> Option<()> {
        let mut bytes = [0u8; 64];
        match self.0.read(&mut bytes).await {
            Ok(n) if n > 0 => Some(()),
            _ => None,
        }
    }
}

/// Waits for Ctrl-C or SIGTERM (one that came since [`catch`] counts).
/// Several that came together are one: a second is one that comes after.
pub(crate) async fn signal() {
    let Some(stops) = STOPS.get() else {
        return std::future::pending().await;
    };
    let mut stops = stops.lock().await;
    let mut bytes = [0u8; 64];
    if !stops.read(&mut bytes).await.is_ok_and(|n| n > 0) {
        std::future::pending::<()>().await;
    }
    // What came with it (Ctrl-C pressed twice while starting, SIGINT and
    // SIGTERM from a supervisor) is the same stop.
    while stops.try_read(&mut bytes).is_ok_and(|n| n > 0) {}
}

/// Runs `drain` unless a second signal comes first: then exits with code 130.
pub(crate) async fn or_quit<T>(drain: impl std::future::Future<Output = T>) -> T {
    tokio::select! {
        done = drain => done,
        () = signal() => {
            say!("second signal: exiting now; what was accepted is kept for the next start");
            std::process::exit(130);
        }
    }
}
