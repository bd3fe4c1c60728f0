//! Dead-letter sinks: a [`DeadLetterSink`] takes jobs that must not be
//! lost: overflow under [`Overflow::DeadLetter`](crate::Overflow::DeadLetter)(crate::Overflow::DeadLetter),
//! expired jobs, failed deliveries and shutdown leftovers. Its offer is
//! synchronous and never blocks, so admission never awaits; a sink that
//! writes to a store buffers in memory up to its own bound and flushes from
//! a task of its own.

use std::fmt;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::error::BuildError;

/// Why a job went to the dead-letter sink.
///
/// ```
/// use dripfeed::DeadLetterReason;
/// assert_eq!(DeadLetterReason::Shutdown.as_str(), "shutdown");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// The queue was full under [`Overflow::DeadLetter`](crate::Overflow::DeadLetter).
    Overflow,
    /// The job was past its deadline when drained.
    Expired,
    /// Its delivery failed for good, after `attempts` attempts.
    Failed {
        /// How many deliveries were tried.
        attempts: u32,
    },
    /// It was still queued when shutdown's deadline passed.
    Shutdown,
}

impl DeadLetterReason {
    /// A short lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::Overflow => "overflow",
            DeadLetterReason::Expired => "expired",
            DeadLetterReason::Failed { .. } => "failed",
            DeadLetterReason::Shutdown => "shutdown",
        }
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where jobs that must not be lost go for later replay.
///
/// `try_offer` is called on the admission path and in the drain task, so it
/// must not block: take the job or hand it back at once. `flush` waits until
/// what was offered is stored durably and says whether it was: it is
/// awaited at the end of shutdown and, with a journal, before a
/// dead-lettered job's record is ended.
///
/// **Changed:** `flush` returns `Result<(), FlushError>` (it returned `()`).
/// This breaks implementations that override it: return `Ok(())` after what
/// yours did, or an error when the jobs could not be stored. A failed flush
/// leaves the dead-lettered jobs in the journal (they are recovered at the
/// next start) and is retried.
///
/// ```
/// use dripfeed::{DeadLetterReason, DeadLetterSink};
/// use std::sync::Mutex;
///
/// struct Memory(Mutex<Vec<String>>);
///
/// #[async_trait::async_trait]
/// impl DeadLetterSink<String> for Memory {
///     fn try_offer(&self, job: String, _why: DeadLetterReason) -> Result<(), String> {
///         match self.0.lock() {
///             Ok(mut jobs) if jobs.len() < 2 => Ok(jobs.push(job)),
///             _ => Err(job),
///         }
///     }
/// }
///
/// let sink = Memory(Mutex::new(Vec::new()));
/// assert!(sink.try_offer("a".into(), DeadLetterReason::Overflow).is_ok());
/// assert!(sink.try_offer("b".into(), DeadLetterReason::Overflow).is_ok());
/// assert_eq!(sink.try_offer("c".into(), DeadLetterReason::Overflow), Err("c".to_string()));
/// ```
#[async_trait]
pub trait DeadLetterSink<J>: Send + Sync + 'static {
    /// Takes `job`, or hands it back when full or closed. Never blocks.
    fn try_offer(&self, job: J, why: DeadLetterReason) -> Result<(), J>;

    /// [`try_offer`](Self::try_offer) for a job the queue was full for
    /// under [`Overflow::DeadLetter`](crate::Overflow::DeadLetter), with
    /// the id its admission answers ([`Admitted::id`](crate::Admitted::id)):
    /// the sink has it before the caller does, so a sink that records jobs
    /// by id can name this one. By default, `try_offer`.
    ///
    /// ```
    /// use dripfeed::{DeadLetterReason, DeadLetterSink};
    /// use std::sync::Mutex;
    ///
    /// /// Keeps each job with the id it was admitted as (0: none given).
    /// struct ById(Mutex<Vec<(u64, String)>>);
    ///
    /// #[async_trait::async_trait]
    /// impl DeadLetterSink<String> for ById {
    ///     fn try_offer(&self, job: String, why: DeadLetterReason) -> Result<(), String> {
    ///         self.try_offer_admitted(0, job, why)
    ///     }
    ///     fn try_offer_admitted(&self, id: u64, job: String, _why: DeadLetterReason) -> Result<(), String> {
    ///         self.0.lock().map_err(|_| job.clone())?.push((id, job));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sink = ById(Mutex::new(Vec::new()));
    /// sink.try_offer_admitted(7, "late".into(), DeadLetterReason::Overflow).unwrap();
    /// assert_eq!(sink.0.lock().unwrap()[0], (7, "late".to_string()));
    /// ```
    fn try_offer_admitted(&self, id: u64, job: J, why: DeadLetterReason) -> Result<(), J> {
        let _ = id;
        self.try_offer(job, why)
    }

    /// Waits until what was offered is stored durably; an error says it
    /// could not be (a full disk, a store that is down). Called at
    /// shutdown, and with a journal after jobs were offered: only after an
    /// `Ok` are their journal records ended, so on an error they stay there
    /// and the flush is tried again (after a backoff, at the next offer,
    /// and at shutdown).
    async fn flush(&self) -> Result<(), FlushError> {
        Ok(())
    }
}

/// A dead-letter sink could not store what it was offered, from
/// [`DeadLetterSink::flush`].
///
/// ```
/// use dripfeed::FlushError;
/// use std::io;
/// let e = FlushError::new("dead-letter file full");
/// assert_eq!(e.to_string(), "dead-letter flush failed: dead-letter file full");
/// assert_eq!(e.kind(), None);
/// let e = FlushError::from(io::Error::new(io::ErrorKind::StorageFull, "no space left"));
/// assert_eq!(e.kind(), Some(io::ErrorKind::StorageFull));
/// assert_eq!(e.message(), "no space left");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushError {
    message: String,
    kind: Option<std::io::ErrorKind>,
}

impl FlushError {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        FlushError {
            message: message.into(),
            kind: None,
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The I/O error's kind, when the failure was one.
    pub fn kind(&self) -> Option<std::io::ErrorKind> {
        self.kind
    }
}

impl From<std::io::Error> for FlushError {
    fn from(e: std::io::Error) -> Self {
        FlushError {
            message: e.to_string(),
            kind: Some(e.kind()),
        }
    }
}

impl fmt::Display for FlushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dead-letter flush failed: {}", self.message)
    }
}

impl std::error::Error for FlushError {}

/// A job in the dead-letter channel, with the reason it is there.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{ChannelSink, DeadLetter, DeadLetterReason, DeadLetterSink};
/// let (sink, mut letters) = ChannelSink::new(4).unwrap();
/// sink.try_offer("order-7", DeadLetterReason::Expired).unwrap();
/// let letter: DeadLetter<&str> = letters.recv().await.unwrap();
/// assert_eq!(letter, DeadLetter { job: "order-7", why: DeadLetterReason::Expired });
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter<J> {
    /// The job.
    pub job: J,
    /// Why it was dead-lettered.
    pub why: DeadLetterReason,
}

/// An in-process dead-letter sink over a bounded tokio channel.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{ChannelSink, DeadLetterReason, DeadLetterSink};
/// let (sink, mut letters) = ChannelSink::new(1).unwrap();
/// assert!(sink.try_offer(7u32, DeadLetterReason::Overflow).is_ok());
/// assert_eq!(sink.try_offer(8, DeadLetterReason::Overflow), Err(8), "full: handed back");
/// let letter = letters.recv().await.unwrap();
/// assert_eq!((letter.job, letter.why), (7, DeadLetterReason::Overflow));
/// # }
/// ```
pub struct ChannelSink<J> {
    tx: mpsc::Sender<DeadLetter<J>>,
}

impl<J: Send + 'static> ChannelSink<J> {
    /// A sink that holds up to `capacity` letters until the receiver takes them.
    pub fn new(capacity: usize) -> Result<(Self, mpsc::Receiver<DeadLetter<J>>), BuildError> {
        // tokio's channel panics at 0 and above `Semaphore::MAX_PERMITS`.
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity {
                what: "dead-letter channel capacity",
            });
        }
        let max = tokio::sync::Semaphore::MAX_PERMITS;
        if capacity > max {
            return Err(BuildError::CapacityTooLarge {
                capacity: capacity as u64,
                max: max as u64,
            });
        }
        let (tx, rx) = mpsc::channel(capacity);
        Ok((ChannelSink { tx }, rx))
    }
}

#[async_trait]
impl<J: Send + 'static> DeadLetterSink<J> for ChannelSink<J> {
    fn try_offer(&self, job: J, why: DeadLetterReason) -> Result<(), J> {
        self.tx
            .try_send(DeadLetter { job, why })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(l) | mpsc::error::TrySendError::Closed(l) => l.job,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_sink_validates_and_hands_back_when_closed() {
        assert!(matches!(
            ChannelSink::<u8>::new(0),
            Err(BuildError::ZeroCapacity { .. })
        ));
        assert!(matches!(
            ChannelSink::<u8>::new(usize::MAX),
            Err(BuildError::CapacityTooLarge { .. })
        ));
        let Ok((sink, rx)) = ChannelSink::new(4) else {
            panic!("valid capacity")
        };
        drop(rx);
        assert_eq!(
            sink.try_offer(1u8, DeadLetterReason::Failed { attempts: 1 }),
            Err(1)
        );
    }
}
