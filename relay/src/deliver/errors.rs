//! Why a delivery attempt failed, in words an operator can act on: its
//! kind (`dns`, `connect`, `tls`, `timeout`, `closed`, `status`,
//! `too_large`, `refused`) and a message (the certificate error rustls gave, the status
//! the receiver answered, …). Each failure is counted
//! (`dripfeed_relay_delivery_errors_total{destination, kind}`), kept as the
//! destination's last error (the admin API shows it) and as the webhook's
//! (`last_error` in its status), and logged at WARN: a destination's first
//! error at once, then at most one line per destination every ten seconds,
//! saying how many it folded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use super::client::Failure;
use crate::domain::job::unix_ms;
use crate::telemetry::DELIVERY_ERRORS;

/// How often a destination's errors are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// What kind of failure an attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The receiver's name did not resolve.
    Dns,
    /// No TCP connection (refused, unreachable, reset).
    Connect,
    /// The TLS handshake failed (the certificate, most often).
    Tls,
    /// No answer within the deliver timeout.
    Timeout,
    /// The connection closed before an answer.
    Closed,
    /// The receiver answered a status that is not 2xx.
    Status,
    /// The receiver answered 413: the body is too large for it.
    TooLarge,
    /// The address guard refused the receiver's address.
    Refused,
}

impl Kind {
    /// Its label and name in words.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Dns => "dns",
            Kind::Connect => "connect",
            Kind::Tls => "tls",
            Kind::Timeout => "timeout",
            Kind::Closed => "closed",
            Kind::Status => "status",
            Kind::TooLarge => "too_large",
            Kind::Refused => "refused",
        }
    }
}

/// One attempt's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptError {
    /// Its kind.
    pub kind: Kind,
    /// What happened, as the stage that failed said it.
    pub message: String,
}

impl AttemptError {
    /// The receiver answered `status` (not 2xx).
    pub(crate) fn status(status: u16) -> AttemptError {
        match status {
            413 => AttemptError {
                kind: Kind::TooLarge,
                message: "the receiver answered 413: the body is too large for it".into(),
            },
            _ => AttemptError {
                kind: Kind::Status,
                message: format!("the receiver answered {status}"),
            },
        }
    }

    /// The address guard refused the receiver's address.
    pub(crate) fn refused(why: &impl std::fmt::Display) -> AttemptError {
        AttemptError {
            kind: Kind::Refused,
            message: why.to_string(),
        }
    }

    /// What a request that got no answer met.
    pub(crate) fn of(failure: &Failure) -> AttemptError {
        let kind = match failure {
            Failure::TimedOut(_) => Kind::Timeout,
            Failure::Http(_) => Kind::Closed,
            Failure::Connect(e) => connect_kind(e.as_ref()),
        };
        // The TLS error alone says what is wrong with the certificate.
        let message = match (kind, tls_error(failure)) {
            (Kind::Tls, Some(tls)) => tls.to_string(),
            _ => failure.to_string(),
        };
        AttemptError { kind, message }
    }

    /// `kind: message`, as the webhook's `last_error`.
    pub(crate) fn text(&self) -> String {
        format!("{}: {}", self.kind.as_str(), self.message)
    }
}

/// The error after `e` in its chain: an I/O error's inner error (which
/// `io::Error::source` skips: hyper-rustls wraps rustls's error in two),
/// else its source.
fn next_in_chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    match e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        Some(inner) => Some(inner),
        None => e.source(),
    }
}

/// The rustls error in `failure`'s chain, if the handshake failed.
fn tls_error(failure: &Failure) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(failure);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = next_in_chain(e);
    }
    None
}

/// A connection's failure, by what its chain says: the guard's refusal, a
/// TLS error, a name that did not resolve (hyper-util's `dns error`), else
/// the TCP connection.
fn connect_kind(e: &(dyn std::error::Error + Send + Sync + 'static)) -> Kind {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut kind = Kind::Connect;
    while let Some(e) = next {
        if e.downcast_ref::<super::guard::Refused>().is_some() {
            return Kind::Refused;
        }
        if e.downcast_ref::<rustls::Error>().is_some() {
            return Kind::Tls;
        }
        if e.to_string().starts_with("dns error") {
            kind = Kind::Dns;
        }
        next = next_in_chain(e);
    }
    kind
}

/// A destination's last error, as the admin API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct LastError {
    /// `dns`, `connect`, `tls`, `timeout`, `closed`, `status`, `too_large`
    /// or `refused`.
    pub kind: &'static str,
    /// What happened (for `tls`, the certificate error).
    pub message: String,
    /// When, ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// Errors it met since the relay started.
    pub count: u64,
}

/// A destination's errors.
struct Book {
    last: LastError,
    /// When it last failed.
    at: Instant,
    /// When its last WARN line was written.
    logged: Instant,
    /// Errors since then, not logged.
    folded: u64,
}

/// Every destination's last error (see the [module](self) docs).
#[derive(Default)]
pub(crate) struct Errors {
    books: Mutex<HashMap<String, Book>>,
}

impl Errors {
    /// Counts (under the series `label`: its name, or `_other`), keeps and
    /// (within the log's pace) logs `error` of `destination`.
    pub(crate) fn record(&self, destination: &str, label: &str, error: &AttemptError) {
        let kind = error.kind.as_str();
        metrics::counter!(DELIVERY_ERRORS, "destination" => label.to_owned(), "kind" => kind)
            .increment(1);
        let now = Instant::now();
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        let last = LastError {
            kind,
            message: error.message.clone(),
            at_unix_ms: unix_ms(),
            count: 1,
        };
        let log = match books.get_mut(destination) {
            None => {
                books.insert(
                    destination.to_owned(),
                    Book {
                        last,
                        at: now,
                        logged: now,
                        folded: 0,
                    },
                );
                Some(0)
            }
            Some(book) => {
                book.at = now;
                book.last = LastError {
                    count: book.last.count + 1,
                    ..last
                };
                if now.duration_since(book.logged) >= LOG_EVERY {
                    book.logged = now;
                    Some(std::mem::take(&mut book.folded))
                } else {
                    book.folded += 1;
                    None
                }
            }
        };
        drop(books);
        match log {
            Some(0) => tracing::warn!(
                destination,
                kind,
                error = %error.message,
                "delivery failed"
            ),
            Some(folded) => tracing::warn!(
                destination,
                kind,
                error = %error.message,
                folded,
                "delivery failed ({folded} more of its failures, of any kind, since its last line)"
            ),
            None => {}
        }
    }

    /// `destination`'s last error, if it met one.
    pub(crate) fn last(&self, destination: &str) -> Option<LastError> {
        let books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        books.get(destination).map(|b| b.last.clone())
    }

    /// The (at most) `k` destinations with the most failed attempts among
    /// those that failed in the last `within`, most first, with their
    /// count since the relay started.
    pub(crate) fn most_failing(&self, k: usize, within: std::time::Duration) -> Vec<(String, u64)> {
        let now = Instant::now();
        let books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<(String, u64)> = books
            .iter()
            .filter(|(_, b)| now.duration_since(b.at) <= within)
            .map(|(name, b)| (name.clone(), b.last.count))
            .collect();
        drop(books);
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// Forgets `destination` (deleted).
    pub(crate) fn forget(&self, destination: &str) {
        let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
        books.remove(destination);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_kept_counted_and_their_lines_folded() {
        let errors = Errors::default();
        let e = AttemptError::status(503);
        assert_eq!(e.text(), "status: the receiver answered 503");
        assert_eq!(AttemptError::status(413).kind, Kind::TooLarge);
        for _ in 0..3 {
            errors.record("a", "a", &e);
        }
        let last = errors.last("a").unwrap();
        assert_eq!((last.kind, last.count), ("status", 3));
        let books = errors.books.lock().unwrap();
        assert_eq!(books["a"].folded, 2, "the first logged, the rest folded");
        drop(books);
        errors.forget("a");
        assert!(errors.last("a").is_none());
        let timeout = AttemptError::of(&Failure::TimedOut(Duration::from_secs(10)));
        assert_eq!(timeout.kind, Kind::Timeout);
    }
}
