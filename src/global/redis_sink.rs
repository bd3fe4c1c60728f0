//! [`RedisStreamSink`]: dead letters appended to a Redis stream, and a
//! redrive that moves them back into a throttle when it has room.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use redis::Value;
use redis::streams::StreamRangeReply;
use tokio::sync::{Notify, mpsc};

use super::conn::{RedisConnection, RedisError, bounded};
use crate::accounting::dead_letter::{DeadLetterReason, DeadLetterSink, FlushError};
use crate::error::BuildError;
use crate::handle::throttle::Throttle;

/// Letters written per `XADD` pipeline.
const BATCH: usize = 256;
/// The longest a failed write waits before it is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

type Encoder<J> = dyn Fn(&J) -> Vec<u8> + Send + Sync;

/// A [`DeadLetterSink`] that appends each letter to a Redis stream
/// (`XADD <stream> * job <bytes> why <reason>`).
///
/// [`try_offer`](DeadLetterSink::try_offer) never blocks: it encodes the job
/// with your encoder into a bounded in-memory buffer, or hands the job back
/// when the buffer is full. A background task writes the buffer to Redis in
/// pipelined batches, retrying (with backoff, never dropping) while Redis is
/// down. [`redrive`](Self::redrive) moves letters back into a throttle.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::{RedisConnection, RedisStreamSink};
/// use dripfeed::{Delivery, Overflow, Throttle};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// let sink = RedisStreamSink::new(conn, "webhooks:dead", 10_000, |job: &String| job.clone().into_bytes())?;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .capacity(10)
///     .overflow(Overflow::DeadLetter)
///     .dead_letter(sink.clone())
///     .build(|_: &String, _| async { Delivery::Done })?;
/// throttle.try_submit("hello".to_owned())?;
/// // Later, when there is room:
/// let moved = sink.redrive(&throttle, 100, |b| String::from_utf8(b.to_vec()).ok()).await?;
/// assert_eq!(moved.admitted + moved.left + moved.undecodable, moved.read);
/// # Ok(())
/// # }
/// ```
pub struct RedisStreamSink<J> {
    inner: Arc<SinkInner<J>>,
}

impl<J> Clone for RedisStreamSink<J> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct SinkInner<J> {
    tx: mpsc::Sender<Letter>,
    encode: Box<Encoder<J>>,
    conn: RedisConnection,
    stream: String,
    /// Letters offered and not yet written.
    pending: Arc<AtomicU64>,
    written: Arc<Notify>,
    errors: Arc<AtomicU64>,
    flush_timeout: Duration,
}

struct Letter {
    bytes: Vec<u8>,
    why: DeadLetterReason,
}

/// What one [`RedisStreamSink::redrive`] did.
///
/// ```
/// let r = dripfeed::global::Redrive::default();
/// assert_eq!((r.read, r.admitted, r.left, r.undecodable), (0, 0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Redrive {
    /// Letters read from the stream.
    pub read: usize,
    /// Letters the throttle took (queued or deferred); deleted from the stream.
    pub admitted: usize,
    /// Letters left in the stream because the throttle had no room.
    pub left: usize,
    /// Letters the decoder refused; left in the stream.
    pub undecodable: usize,
}

impl<J: Send + 'static> RedisStreamSink<J> {
    /// A sink appending to `stream`, buffering up to `capacity` letters in
    /// memory; `encode` turns a job into the bytes stored. Spawns its writer
    /// on the current tokio runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::global::{RedisConnection, RedisStreamSink};
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/")?;
    /// assert!(RedisStreamSink::new(conn, "dead", 0, |j: &u32| j.to_be_bytes().to_vec()).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(
        conn: RedisConnection,
        stream: impl Into<String>,
        capacity: usize,
        encode: impl Fn(&J) -> Vec<u8> + Send + Sync + 'static,
    ) -> Result<Self, BuildError> {
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity {
                what: "redis dead-letter buffer",
            });
        }
        let max = tokio::sync::Semaphore::MAX_PERMITS;
        if capacity > max {
            return Err(BuildError::CapacityTooLarge {
                capacity: capacity as u64,
                max: max as u64,
            });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let (tx, rx) = mpsc::channel(capacity);
        let inner = Arc::new(SinkInner {
            tx,
            encode: Box::new(encode),
            conn: conn.counted_as("dead_letters"),
            stream: stream.into(),
            pending: Arc::new(AtomicU64::new(0)),
            written: Arc::new(Notify::new()),
            errors: Arc::new(AtomicU64::new(0)),
            flush_timeout: Duration::from_secs(5),
        });
        let writer = Writer {
            conn: inner.conn.clone(),
            stream: inner.stream.clone(),
            pending: inner.pending.clone(),
            written: inner.written.clone(),
            errors: inner.errors.clone(),
        };
        runtime.spawn(writer.run(rx));
        Ok(Self { inner })
    }

    /// Letters offered but not yet in Redis.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisStreamSink};
    /// let sink = RedisStreamSink::new(RedisConnection::open("redis://127.0.0.1:1/")?, "d", 4, |j: &u8| vec![*j])?;
    /// assert_eq!(sink.pending(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending(&self) -> u64 {
        self.inner.pending.load(Ordering::Acquire)
    }

    /// Failed writes so far (each is retried).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisStreamSink};
    /// let sink = RedisStreamSink::new(RedisConnection::open("redis://127.0.0.1:1/")?, "d", 4, |j: &u8| vec![*j])?;
    /// assert_eq!(sink.errors(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn errors(&self) -> u64 {
        self.inner.errors.load(Ordering::Relaxed)
    }

    /// Moves up to `max` letters, oldest first, back into `throttle` while it
    /// has room: each is decoded with `decode` and submitted; only letters
    /// the throttle took are deleted from the stream (`XDEL`), so a refusal
    /// or a crash loses nothing (a crash between submit and delete may
    /// deliver a letter twice: delivery is at least once).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisStreamSink};
    /// # use dripfeed::{Delivery, Throttle};
    /// # let sink = RedisStreamSink::new(RedisConnection::open("redis://127.0.0.1/")?, "d", 4, |j: &u8| vec![*j])?;
    /// # let (throttle, _d) = Throttle::builder().drain_rate(1.0).capacity(1).build(|_: &u8, _| async { Delivery::Done })?;
    /// let r = sink.redrive(&throttle, 10, |b| b.first().copied()).await?;
    /// assert!(r.admitted <= 1, "the throttle has room for one");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn redrive(
        &self,
        throttle: &Throttle<J>,
        max: usize,
        decode: impl Fn(&[u8]) -> Option<J>,
    ) -> Result<Redrive, RedisError> {
        let room = throttle
            .capacity()
            .saturating_sub(throttle.depth())
            .min(max);
        let mut report = Redrive::default();
        if room == 0 {
            return Ok(report);
        }
        let mut conn = self.inner.conn.clone();
        let limit = self.inner.flush_timeout;
        let mut xrange = redis::cmd("XRANGE");
        xrange
            .arg(&self.inner.stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(room);
        let reply: StreamRangeReply = bounded(xrange.query_async(&mut conn), limit).await?;
        report.read = reply.ids.len();
        let mut done = Vec::new();
        let mut full = false;
        for entry in reply.ids {
            let job = match entry.map.get("job") {
                Some(Value::BulkString(bytes)) => decode(bytes),
                _ => None,
            };
            let Some(job) = job else {
                report.undecodable += 1;
                continue;
            };
            if full {
                report.left += 1;
                continue;
            }
            match throttle.try_submit(job) {
                Ok(admitted) if admitted.is_queued() => done.push(entry.id),
                Ok(_) => {
                    // Deferred: it went back to a dead-letter sink; this copy is done.
                    done.push(entry.id);
                    full = true;
                }
                Err(_) => {
                    report.left += 1;
                    full = true;
                }
            }
        }
        report.admitted = done.len();
        if !done.is_empty() {
            let mut xdel = redis::cmd("XDEL");
            xdel.arg(&self.inner.stream).arg(&done);
            let _: u64 = bounded(xdel.query_async(&mut conn), limit).await?;
        }
        Ok(report)
    }
}

#[async_trait]
impl<J: Send + 'static> DeadLetterSink<J> for RedisStreamSink<J> {
    fn try_offer(&self, job: J, why: DeadLetterReason) -> Result<(), J> {
        let Ok(slot) = self.inner.tx.try_reserve() else {
            return Err(job);
        };
        let bytes = (self.inner.encode)(&job);
        self.inner.pending.fetch_add(1, Ordering::AcqRel);
        slot.send(Letter { bytes, why });
        Ok(())
    }

    /// Waits until every offered letter is in Redis, at most 5 s; an error
    /// when some are still only in memory then (Redis down or slow).
    async fn flush(&self) -> Result<(), FlushError> {
        let all_written = async {
            loop {
                let written = self.inner.written.notified();
                tokio::pin!(written);
                written.as_mut().enable();
                if self.pending() == 0 {
                    return;
                }
                written.await;
            }
        };
        if tokio::time::timeout(self.inner.flush_timeout, all_written)
            .await
            .is_err()
        {
            let pending = self.pending();
            tracing::warn!(
                stream = %self.inner.stream,
                pending,
                "dead letters not yet written to redis at flush"
            );
            return Err(FlushError::new(format!(
                "{pending} dead letters not yet written to redis stream {}",
                self.inner.stream
            )));
        }
        Ok(())
    }
}

impl<J> fmt::Debug for RedisStreamSink<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStreamSink")
            .field("stream", &self.inner.stream)
            .field("pending", &self.inner.pending.load(Ordering::Relaxed))
            .finish()
    }
}

/// The background writer: batches from the buffer to `XADD`s.
struct Writer {
    conn: RedisConnection,
    stream: String,
    pending: Arc<AtomicU64>,
    written: Arc<Notify>,
    errors: Arc<AtomicU64>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Letter>) {
        let mut batch = Vec::with_capacity(BATCH);
        while rx.recv_many(&mut batch, BATCH).await > 0 {
            let mut backoff = Duration::from_millis(50);
            while let Err(err) = self.write(&batch).await {
                self.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(stream = %self.stream, error = %err, letters = batch.len(), "dead-letter write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            self.pending.fetch_sub(batch.len() as u64, Ordering::AcqRel);
            batch.clear();
            self.written.notify_waiters();
        }
    }

    async fn write(&mut self, batch: &[Letter]) -> Result<(), RedisError> {
        let mut pipe = redis::pipe();
        for letter in batch {
            pipe.cmd("XADD")
                .arg(&self.stream)
                .arg("*")
                .arg("job")
                .arg(letter.bytes.as_slice())
                .arg("why")
                .arg(letter.why.as_str())
                .ignore();
        }
        bounded(
            pipe.query_async::<()>(&mut self.conn),
            Duration::from_secs(2),
        )
        .await
    }
}
