//! A destination's idle connections: HTTP/1.1 senders (hyper's
//! `client::conn`) kept for the next delivery, newest first, at most a
//! bound of them. Each destination's [`Endpoint`](super::endpoint::Endpoint)
//! holds its own, so taking one is a lock and a pop (no pool key to hash,
//! as a shared pool needs).
//!
//! A sender is put back when its answer's head came; one whose connection
//! is still busy (its body being read) is put back when it is ready, by a
//! small task, within [`READY_WAIT`], or dropped (its connection closes).
//! One taken whose connection has closed meanwhile (the receiver's idle
//! timeout) is dropped and the next one taken.

use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

/// What a pooled connection sends.
pub type Sender = SendRequest<Full<Bytes>>;

/// How long a sender put back busy may take to be ready before its
/// connection is given up.
pub const READY_WAIT: Duration = Duration::from_secs(5);

/// One destination's idle connections.
#[derive(Debug, Default)]
pub struct Idle {
    senders: Mutex<Vec<Sender>>,
}

impl Idle {
    /// An open, ready connection, if one is idle.
    pub fn take(&self) -> Option<Sender> {
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(sender) = senders.pop() {
            if sender.is_ready() && !sender.is_closed() {
                return Some(sender);
            }
            // Closed (or, unexpectedly, busy): its connection is let go.
        }
        None
    }

    /// Keeps `sender` for the next delivery if it is open and there is
    /// room for it among `most`; a busy one once it is ready (see the
    /// module docs).
    pub fn give_back(self: &std::sync::Arc<Self>, mut sender: Sender, most: usize) {
        if sender.is_closed() {
            return;
        }
        if sender.is_ready() {
            self.keep(sender, most);
            return;
        }
        let idle = self.clone();
        tokio::spawn(async move {
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, sender.ready()).await {
                idle.keep(sender, most);
            }
        });
    }

    fn keep(&self, sender: Sender, most: usize) {
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        if senders.len() < most {
            senders.push(sender);
        }
    }

    /// How many are idle.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.senders.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
