//! [`RedisQueue`]: one destination's leaky-bucket queue kept in Redis
//! Streams and shared by a fleet, so a node that dies loses nothing: the
//! others deliver what it had taken.
//!
//! The details are on [`RedisQueue`].

use std::time::Duration;

use redis::{Script, Value};

use dripfeed::global::{RedisConnection, RedisError};

use super::queue_status::Keep;
use super::{CALL, array, bounded, count, text};

/// The scripts, made once and shared by every instance (each holds its
/// Lua source: one copy per destination would cost kilobytes each).
static ADMIT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_admit.lua")));
/// The consumer group every relay reads a queue's stream in.
pub(super) const GROUP: &str = "dripfeed";
pub(super) static REDRIVE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_redrive.lua")));
pub(super) static UNSENT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_unsent.lua")));

/// What [`RedisQueue::admit_owned`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Admission {
    /// Queued under `id` (the id the caller gave); `depth` entries are
    /// outstanding with it.
    Added {
        /// The job's id.
        id: String,
        /// Outstanding entries, this one included.
        depth: u64,
    },
    /// The idempotency key was seen: the job admitted then has `id`.
    Repeat {
        /// The first job's id.
        id: String,
    },
    /// Queued under `id`, but fewer replicas than
    /// [`with_replicas`](RedisQueue::with_replicas) asked for confirmed it
    /// in time: it may be lost with the primary, and it may still be
    /// delivered (a sender's retry with the same idempotency key is safe).
    Unconfirmed {
        /// The job's id.
        id: String,
        /// Replicas that confirmed it.
        replicas: u64,
    },
    /// The id given is a job still queued or waiting for a retry (its
    /// status is kept): nothing written; admit again with another id. An
    /// ended job's id may be given again (a redrive keeping its id).
    Taken,
    /// The queue holds its bound: refused, nothing written.
    Full {
        /// Outstanding entries.
        depth: u64,
    },
    /// [`admit_fresh`](RedisQueue::admit_fresh) only: a job with this id
    /// was admitted before (it is held, or ended and its status still
    /// kept); nothing written.
    Seen {
        /// The id given.
        id: String,
    },
    /// The queue was full under [`Overflow::HeadDrop`](dripfeed::Overflow::HeadDrop)
    /// ([`with_overflow`](RedisQueue::with_overflow)): queued under `id`,
    /// and the oldest job no consumer had claimed yet went to the dead
    /// letters (reason `evicted`), in the same script.
    Evicted {
        /// The job's id.
        id: String,
        /// Outstanding entries, this one included.
        depth: u64,
        /// The evicted job's id.
        evicted: String,
    },
    /// The queue was full under [`Overflow::DeadLetter`](dripfeed::Overflow::DeadLetter):
    /// the job went to the dead letters (reason `overflow`), its status
    /// dead-lettered and its idempotency key remembered.
    Deferred {
        /// The job's id.
        id: String,
    },
}

/// Which of an event's copies [`RedisQueue::admit_copy`] admits again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Again {
    /// None: only a copy never admitted (a fan-out, made once).
    Never,
    /// One dead-lettered (or whose status is forgotten): a recover.
    Dead,
    /// Any that has ended, delivered too: a resend.
    Ended,
}

/// Which ids an admission takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Any: an ended job's id may be admitted again (a redrive).
    Any,
    /// Only one never admitted (or whose status is forgotten).
    Fresh,
    /// None: a repeat of this id, to confirm.
    Confirm,
    /// Only one whose status is dead-lettered or forgotten: a dead
    /// letter's job admitted again once its letter is gone.
    Dead,
}

/// What a queue has counted since its keys were made, for the whole
/// fleet: written by the scripts that admit and end its jobs
/// ([`RedisQueue::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QueueCounts {
    /// Jobs admitted (redriven dead letters among them).
    pub accepted: u64,
    /// Admissions refused: the queue was full, or
    /// [`count_refused`](RedisQueue::count_refused) was told of one.
    pub refused: u64,
    /// Jobs delivered.
    pub delivered: u64,
    /// Jobs ended as dead letters.
    pub dead_lettered: u64,
}

/// A job a consumer holds until it [`ack`](RedisQueue::end)s or
/// [`retry`](RedisQueue::retry_failed)s it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// Its entry in the stream now.
    pub stream_id: String,
    /// Its id for good, as given at admission (kept across retries, which
    /// add it again; an entry without one is known by its stream id).
    pub id: String,
    /// Attempts made before this claim.
    pub attempts: u32,
    /// The job's bytes.
    pub job: Vec<u8>,
}

/// One destination's shared queue.
///
/// Everything one destination needs sits under one hash tag
/// (`dripfeed:q:{DEST}:…`), so each operation touches one Redis Cluster
/// slot: the stream of queued jobs, the sorted set of retries by due time,
/// the tenant-scoped idempotency keys, and (with
/// [`with_status`](RedisQueue::with_status)) each job's status by id with
/// the ended ones by end time. Each node is a consumer of the stream's one
/// group.
///
/// - [`admit_owned`](RedisQueue::admit_owned): one script checks the idempotency key,
///   checks the outstanding count (stream + retries) against the bound
///   (latency budget × the destination's fleet rate) and adds the entry:
///   the queue is bounded fleet-wide, and a full queue refuses (tail-drop)
///   with the depth, for an honest `Retry-After`; with
///   [`with_overflow`](RedisQueue::with_overflow) it evicts its oldest
///   unclaimed entry to the dead letters instead (head-drop) or sends the
///   arriving job there (dead-letter), in the same script. Never `MAXLEN`,
///   which would trim unacknowledged work.
/// - [`claim`](RedisQueue::claim): `XREADGROUP`, as many as the node's
///   pacing is about to emit, never the whole stream. A group lost with a
///   Redis restart without persistence (`NOGROUP`) is made again.
/// - [`ack`](RedisQueue::end): acknowledged and deleted, a batch in one
///   round trip; [`retry`](RedisQueue::retry_failed): moved to the retries with
///   its due time, atomically and only if still pending for the group;
///   [`promote_due`](RedisQueue::promote_due): due retries back into the
///   stream, atomically, by whichever node runs it first (never twice).
/// - [`reclaim`](RedisQueue::reclaim_from): `XAUTOCLAIM` of entries pending
///   longer than `idle`, from a consumer that died. Give it at least the
///   local buffer's worth of time at the current rate plus the deliver
///   timeout plus a margin: sooner, and a live node's slow delivery is made
///   twice.
///
/// Every call is one round trip ([`RedisConnection::round_trips`]).
///
#[derive(Clone)]
pub(crate) struct RedisQueue {
    pub(super) conn: std::sync::Arc<Purposes>,
    /// Its keys' common start, `dripfeed:q:{DESTINATION}` (each key is
    /// made from it when used: an idle destination holds one string).
    prefix: Box<str>,
    pub(super) consumer: std::sync::Arc<str>,
    /// Ended statuses kept ([`with_status`](Self::with_status)).
    pub(super) keep: Option<Keep>,
    /// Dead letters kept in Redis, about ([`with_dead_letters`](Self::with_dead_letters)); 0: none.
    pub(super) dead_max: u64,
    /// What a full queue does ([`with_overflow`](Self::with_overflow)).
    overflow: dripfeed::Overflow,
    /// Replicas that must confirm an admission (`WAIT`), and for how long
    /// to wait for them.
    replicas: (u32, Duration),
}

impl std::fmt::Debug for RedisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisQueue")
            .field("prefix", &self.prefix)
            .field("consumer", &self.consumer)
            .finish()
    }
}

/// The connection, once per purpose its round trips are counted under
/// (`dripfeed_redis_round_trips_total{purpose}`), and the admissions'
/// own connections: what every queue of a relay shares.
pub(crate) struct Purposes {
    /// The connections admissions go through when replicas confirm them
    /// (each pair: the script's and the `WAIT`'s, one link), in turn.
    admitters: Vec<(RedisConnection, RedisConnection)>,
    turn: std::sync::atomic::AtomicUsize,
    admit: RedisConnection,
    pub(super) claim: RedisConnection,
    pub(super) ack: RedisConnection,
    pub(super) retry: RedisConnection,
    pub(super) upkeep: RedisConnection,
    wait: RedisConnection,
    pub(super) status: RedisConnection,
    pub(super) dead: RedisConnection,
}

impl Purposes {
    /// The handles of `conn`, each counted by what it is for.
    pub(crate) fn new(conn: &RedisConnection) -> Self {
        Purposes {
            admitters: Vec::new(),
            turn: std::sync::atomic::AtomicUsize::new(0),
            admit: conn.counted_as("queue_admit"),
            claim: conn.counted_as("queue_claim"),
            ack: conn.counted_as("queue_ack"),
            retry: conn.counted_as("queue_retry"),
            upkeep: conn.counted_as("queue_upkeep"),
            wait: conn.counted_as("queue_wait"),
            status: conn.counted_as("queue_status"),
            dead: conn.counted_as("queue_dead_letters"),
        }
    }

    /// These links with admissions going in turn through `connections`
    /// of their own (each from [`RedisConnection::open`], to the same
    /// primary) rather than the shared one, so a `WAIT`
    /// ([`RedisQueue::with_replicas`]) holds up no claim or
    /// acknowledgement.
    pub(crate) fn with_admitters(mut self, connections: &[RedisConnection]) -> Self {
        self.admitters = connections
            .iter()
            .map(|c| (c.counted_as("queue_admit"), c.counted_as("queue_wait")))
            .collect();
        self
    }
}

impl RedisQueue {
    /// The queue of `destination` with links of its own (tests).
    #[cfg(test)]
    pub(crate) fn new(conn: RedisConnection, destination: &str, consumer: &str) -> RedisQueue {
        let links = std::sync::Arc::new(Purposes::new(&conn));
        RedisQueue::sharing(links, destination, consumer.into())
    }

    /// The queue of `destination` (its keys hash-tagged by it), read as
    /// `consumer` (this node's name: unique in the fleet, stable across
    /// its restarts so it takes its own pending entries back first),
    /// through `links` shared with other queues (a relay's many
    /// destinations hold one set of connection handles, not one each).
    pub(crate) fn sharing(
        links: std::sync::Arc<Purposes>,
        destination: &str,
        consumer: std::sync::Arc<str>,
    ) -> RedisQueue {
        RedisQueue {
            conn: links,
            prefix: format!("dripfeed:q:{{{destination}}}").into(),
            consumer,
            keep: None,
            dead_max: 0,
            overflow: dripfeed::Overflow::TailDrop,
            replicas: (0, Duration::ZERO),
        }
    }

    /// This queue keeping every job's status by id, readable from any node
    /// ([`status`](Self::status)): written by the scripts that admit,
    /// retry and end jobs (no round trip of its own), each ended one kept
    /// for `retention` and at most `max` of them (the oldest forgotten
    /// first). A held job's status is always kept (bounded by the queue's
    /// bound).
    pub(crate) fn with_status(mut self, retention: Duration, max: u64) -> Self {
        self.keep = Some(Keep { retention, max });
        self
    }

    /// This queue keeping its dead letters in Redis, about `max` of them
    /// (the oldest trimmed): each is written by the script that ends its
    /// job ([`end`](Self::end) with [`Ending::dead_lettered`](super::queue_status::Ending::dead_lettered)), atomically
    /// with its acknowledgement, and read ([`dead_letters`](Self::dead_letters))
    /// and put back ([`redrive`](Self::redrive)) from any node.
    pub(crate) fn with_dead_letters(mut self, max: u64) -> Self {
        self.dead_max = max;
        self
    }

    /// This queue answering a full queue as `policy` says, as the local
    /// queue's overflow does: [`Overflow::TailDrop`](dripfeed::Overflow::TailDrop)
    /// (the default) refuses the arriving job ([`Admission::Full`]);
    /// [`Overflow::HeadDrop`](dripfeed::Overflow::HeadDrop) takes it and moves
    /// the oldest job no consumer has claimed to the dead letters
    /// ([`Admission::Evicted`]; with every job claimed or waiting for a
    /// retry, [`Admission::Full`]); [`Overflow::DeadLetter`](dripfeed::Overflow::DeadLetter)
    /// moves the arriving job to the dead letters ([`Admission::Deferred`]).
    /// Either way in the admission's one script. Dead letters are kept in
    /// Redis with [`with_dead_letters`](Self::with_dead_letters) (without,
    /// they are only counted).
    pub(crate) fn with_overflow(mut self, policy: dripfeed::Overflow) -> Self {
        self.overflow = policy;
        self
    }

    /// What a full queue does ([`with_overflow`](Self::with_overflow)).
    #[cfg(test)]
    pub(crate) fn overflow(&self) -> dripfeed::Overflow {
        self.overflow
    }

    /// This queue with every admission confirmed by `replicas` replicas of
    /// the primary (`WAIT`, one more round trip, counted as `queue_wait`)
    /// within `timeout` (at most 100 ms, well under the connection's
    /// command timeout); fewer answer [`Admission::Unconfirmed`].
    ///
    /// `WAIT` holds up the connection it is sent on until the replicas
    /// answer, so admissions go in turn through the links' admission
    /// connections ([`Purposes::with_admitters`]) when they have some.
    pub(crate) fn with_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = (replicas, timeout.min(Duration::from_millis(100)));
        self
    }

    /// The connections one admission uses: the script's and the `WAIT`'s.
    fn admitter(&self) -> (&RedisConnection, &RedisConnection) {
        let links = &*self.conn;
        if links.admitters.is_empty() {
            return (&links.admit, &links.wait);
        }
        let n = links
            .turn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (admit, wait) = &links.admitters[n % links.admitters.len()];
        (admit, wait)
    }

    /// The stream's key.
    pub(crate) fn stream_key(&self) -> String {
        format!("{}:s", self.prefix)
    }

    /// The key of the sorted set of retries waiting for their time.
    pub(super) fn retries_key(&self) -> String {
        format!("{}:r", self.prefix)
    }

    /// The key of the hash of statuses by id.
    pub(super) fn statuses_key(&self) -> String {
        format!("{}:st", self.prefix)
    }

    /// The key of the sorted set of ended statuses, by when they ended.
    pub(super) fn ended_key(&self) -> String {
        format!("{}:e", self.prefix)
    }

    /// The key of the dead letters' stream.
    pub(super) fn dead_key(&self) -> String {
        format!("{}:dl", self.prefix)
    }

    /// The key of the queue's counts (a hash).
    pub(super) fn counts_key(&self) -> String {
        format!("{}:n", self.prefix)
    }

    /// `script` with the keys of the scripts that end and move entries:
    /// the stream, retries, statuses, ended, dead letters and counts.
    pub(super) fn script_with_keys(
        &self,
        script: &'static Script,
    ) -> redis::ScriptInvocation<'static> {
        let mut call = script.prepare_invoke();
        call.key(self.stream_key())
            .key(self.retries_key())
            .key(self.statuses_key())
            .key(self.ended_key())
            .key(self.dead_key())
            .key(self.counts_key());
        call
    }

    /// Queues `job` as `id` (unique in the fleet: a stream id is unique
    /// only in its stream) unless the outstanding entries (queued, being
    /// delivered, waiting for a retry) reach `bound`; with `idempotency`
    /// (already scoped by tenant, e.g. `"acme:order-17"`) a key seen within
    /// `remember` answers the first job's id instead. One round trip.
    #[cfg(test)]
    pub(crate) async fn admit(
        &self,
        id: &str,
        job: &[u8],
        idempotency: Option<&str>,
        bound: u64,
        remember: Duration,
    ) -> Result<Admission, RedisError> {
        self.admit_owned(id, job, idempotency, bound, remember, None)
            .await
    }

    /// Queues `job` as `id` as `admit` above says, the job's status (when
    /// kept) naming `owner` (e.g. its tenant).
    pub(crate) async fn admit_owned(
        &self,
        id: &str,
        job: &[u8],
        idempotency: Option<&str>,
        bound: u64,
        remember: Duration,
        owner: Option<&str>,
    ) -> Result<Admission, RedisError> {
        let overflow = self.overflow;
        self.admit_with(
            id,
            job,
            idempotency,
            bound,
            remember,
            owner,
            (Mode::Any, overflow),
        )
        .await
    }

    /// Queues `job` as `id` unless the queue holds `bound`, as
    /// [`admit_owned`](Self::admit_owned) without an idempotency key, but
    /// only if no job with this id was admitted before:
    /// [`Admission::Seen`] then, nothing written. For a caller that chose
    /// the id earlier (an idempotency key's, kept with
    /// [`RedisKeys`](super::keys::RedisKeys)) and may be admitting it a second
    /// time. It tells only with statuses kept
    /// ([`with_status`](Self::with_status)), for as long as they are.
    pub(crate) async fn admit_fresh(
        &self,
        id: &str,
        job: &[u8],
        bound: u64,
        owner: Option<&str>,
    ) -> Result<Admission, RedisError> {
        self.admit_with(
            id,
            job,
            None,
            bound,
            Duration::from_millis(1),
            owner,
            (Mode::Fresh, self.overflow),
        )
        .await
    }

    /// Queues an event's copy `job` as `id` (the event's id: one copy per
    /// endpoint and event), admitting one with this id again as `again`
    /// says ([`Again::Never`]: a fan-out made twice makes each copy once,
    /// as [`admit_fresh`](Self::admit_fresh)). A full queue never refuses a copy: with head-drop it
    /// evicts as any admission does, otherwise the copy goes to the dead
    /// letters (reason `overflow`, [`Admission::Deferred`]), to be
    /// recovered; `dead_letter` sends it there even under head-drop (a
    /// queue whose every entry is claimed, [`Admission::Full`], has no
    /// entry to evict).
    pub(crate) async fn admit_copy(
        &self,
        id: &str,
        job: &[u8],
        bound: u64,
        owner: Option<&str>,
        (again, dead_letter): (Again, bool),
    ) -> Result<Admission, RedisError> {
        let overflow = match self.overflow {
            dripfeed::Overflow::HeadDrop if !dead_letter => dripfeed::Overflow::HeadDrop,
            _ => dripfeed::Overflow::DeadLetter,
        };
        let mode = match again {
            Again::Never => Mode::Fresh,
            Again::Dead => Mode::Dead,
            Again::Ended => Mode::Any,
        };
        let remember = Duration::from_millis(1);
        self.admit_with(id, job, None, bound, remember, owner, (mode, overflow))
            .await
    }

    /// A repeat of the job admitted as `id` (an idempotency key's, found
    /// admitted), confirmed as its admission would be: with
    /// [`with_replicas`](Self::with_replicas), [`Admission::Seen`] once the
    /// replicas asked for have it, else [`Admission::Unconfirmed`]; without,
    /// [`Admission::Seen`] at once. Nothing is admitted. One round trip
    /// (two with replicas).
    pub(crate) async fn confirm(&self, id: &str) -> Result<Admission, RedisError> {
        if self.replicas.0 == 0 {
            return Ok(Admission::Seen { id: id.to_owned() });
        }
        let remember = Duration::from_millis(1);
        let overflow = self.overflow;
        self.admit_with(id, b"", None, 1, remember, None, (Mode::Confirm, overflow))
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn admit_with(
        &self,
        id: &str,
        job: &[u8],
        idempotency: Option<&str>,
        bound: u64,
        remember: Duration,
        owner: Option<&str>,
        (mode, overflow): (Mode, dripfeed::Overflow),
    ) -> Result<Admission, RedisError> {
        let key = format!("{}:i:{}", self.prefix, idempotency.unwrap_or(""));
        let (admitter, waiter) = self.admitter();
        // The script and its WAIT reach one server: should the primary
        // move between them, the WAIT fails rather than ask the new one
        // about a write it never had.
        let mut conn = match self.replicas.0 {
            0 => admitter.clone(),
            _ => admitter.pinned().await?,
        };
        let waiter = conn.counted_like(waiter);
        let mut call = ADMIT.prepare_invoke();
        call.key(self.stream_key())
            .key(self.retries_key())
            .key(key)
            .key(self.statuses_key())
            .key(self.ended_key())
            .key(self.counts_key())
            .key(self.dead_key())
            .arg(bound)
            .arg(job)
            .arg(
                u64::try_from(remember.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            )
            .arg(if idempotency.is_some() { "1" } else { "0" })
            .arg(id)
            .arg(if self.keep.is_some() { "1" } else { "0" })
            .arg(owner.unwrap_or(""))
            .arg(if self.replicas.0 > 0 { "1" } else { "0" })
            .arg(match mode {
                Mode::Any => "0",
                Mode::Fresh => "1",
                Mode::Confirm => "2",
                Mode::Dead => "3",
            })
            .arg(match overflow {
                dripfeed::Overflow::HeadDrop => "h",
                dripfeed::Overflow::DeadLetter => "d",
                // Tail-drop, and any policy the script does not know.
                _ => "t",
            })
            .arg(GROUP)
            .arg(self.dead_max);
        let answer: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let items = array(answer, 3, "queue admit")?;
        let id = text(&items[1]).unwrap_or_default();
        let answer = match text(&items[0]).as_deref() {
            Some("added") => Admission::Added {
                id,
                depth: count(&items[2])?,
            },
            Some("repeat") => Admission::Repeat { id },
            Some("taken") => return Ok(Admission::Taken),
            Some("seen") => Admission::Seen { id },
            Some("evicted") => Admission::Evicted {
                id,
                depth: count(&items[2])?,
                evicted: items.get(3).and_then(text).unwrap_or_default(),
            },
            Some("deferred") => Admission::Deferred { id },
            Some("full") => {
                return Ok(Admission::Full {
                    depth: count(&items[2])?,
                });
            }
            _ => return Err(RedisError::unexpected("queue admit")),
        };
        if self.replicas.0 == 0 {
            return Ok(answer);
        }
        // Added, or a repeat (whose script wrote its key again, so that
        // this WAIT covers the first admission too, made perhaps through
        // another connection): confirmed by the replicas asked for?
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas.0).arg(
            u64::try_from(self.replicas.1.as_millis())
                .unwrap_or(100)
                .max(1),
        );
        let mut conn = waiter.clone();
        // The webhook is in: a WAIT that fails (the primary gone between
        // the two) is no confirmation, not a refusal of what was queued.
        let replicas: u64 = match bounded(wait.query_async(&mut conn), CALL).await {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(error = %e, "shared queue: WAIT failed after the admission; unconfirmed");
                0
            }
        };
        if replicas >= u64::from(self.replicas.0) {
            return Ok(answer);
        }
        match answer {
            Admission::Added { id, .. }
            | Admission::Evicted { id, .. }
            | Admission::Deferred { id }
            | Admission::Repeat { id }
            | Admission::Seen { id } => Ok(Admission::Unconfirmed { id, replicas }),
            other => Ok(other),
        }
    }

    /// The fleet's counts for this queue (one round trip, counted as
    /// `queue_status`): what every node admitted, refused, delivered and
    /// dead-lettered through it.
    pub(crate) async fn counts(&self) -> Result<QueueCounts, RedisError> {
        let mut conn = self.conn.status.clone();
        let mut all = redis::cmd("HGETALL");
        all.arg(self.counts_key());
        let pairs: Vec<(String, u64)> = bounded(all.query_async(&mut conn), CALL).await?;
        let mut c = QueueCounts::default();
        for (field, n) in pairs {
            match field.as_str() {
                "a" => c.accepted = n,
                "f" => c.refused = n,
                "d" => c.delivered = n,
                "x" => c.dead_lettered = n,
                _ => {}
            }
        }
        Ok(c)
    }

    /// Starts the queue's counts again (a destination made again under a
    /// deleted one's name counts from nothing): one round trip.
    pub(crate) async fn reset_counts(&self) -> Result<(), RedisError> {
        let mut conn = self.conn.status.clone();
        let mut del = redis::cmd("DEL");
        del.arg(self.counts_key());
        let _: i64 = bounded(del.query_async(&mut conn), CALL).await?;
        Ok(())
    }

    /// Counts one admission refused for another cause than a full queue
    /// (e.g. a tenant over its quota), in [`counts`](Self::counts): one
    /// round trip, counted as `queue_admit`.
    pub(crate) async fn count_refused(&self) -> Result<(), RedisError> {
        let mut conn = self.conn.admit.clone();
        let mut incr = redis::cmd("HINCRBY");
        incr.arg(self.counts_key()).arg("f").arg(1);
        let _: i64 = bounded(incr.query_async(&mut conn), CALL).await?;
        Ok(())
    }

    /// Entries outstanding: queued, being delivered, waiting for a retry.
    pub(crate) async fn depth(&self) -> Result<u64, RedisError> {
        let mut conn = self.conn.upkeep.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("XLEN").arg(self.stream_key());
        pipe.cmd("ZCARD").arg(self.retries_key());
        let (queued, waiting): (u64, u64) = bounded(pipe.query_async(&mut conn), CALL).await?;
        Ok(queued + waiting)
    }

    /// The [`depth`](Self::depth) of each of `queues`, in one round trip
    /// (one pipeline) unless the links are a cluster's, where each queue's
    /// keys have a slot of their own and a pipeline may not cross slots:
    /// then one round trip each.
    pub(crate) async fn depths(queues: &[&RedisQueue]) -> Result<Vec<u64>, RedisError> {
        let Some(first) = queues.first() else {
            return Ok(Vec::new());
        };
        if first.conn.upkeep.is_cluster() {
            let mut out = Vec::with_capacity(queues.len());
            for q in queues {
                out.push(q.depth().await?);
            }
            return Ok(out);
        }
        let mut pipe = redis::pipe();
        for q in queues {
            pipe.cmd("XLEN").arg(q.stream_key());
            pipe.cmd("ZCARD").arg(q.retries_key());
        }
        let mut conn = first.conn.upkeep.clone();
        let all: Vec<u64> = bounded(pipe.query_async(&mut conn), CALL).await?;
        Ok(all.chunks(2).map(|p| p.iter().sum()).collect())
    }

    /// How many dead letters each of `queues` keeps, in one round trip
    /// as [`depths`](Self::depths) reads (one each on a cluster).
    pub(crate) async fn dead_counts(queues: &[&RedisQueue]) -> Result<Vec<u64>, RedisError> {
        let Some(first) = queues.first() else {
            return Ok(Vec::new());
        };
        let conn = first.conn.dead.clone();
        if first.conn.upkeep.is_cluster() {
            // A pipeline may not cross slots: each its own call, 16 at a time.
            let keys: Vec<String> = queues.iter().map(|q| q.dead_key()).collect();
            let mut out = Vec::with_capacity(keys.len());
            for some in keys.chunks(16) {
                let calls = some.iter().cloned().map(|key| {
                    let mut conn = conn.clone();
                    async move {
                        let mut cmd = redis::cmd("XLEN");
                        cmd.arg(key);
                        bounded(cmd.query_async::<u64>(&mut conn), CALL).await
                    }
                });
                for n in futures_util::future::join_all(calls).await {
                    out.push(n?);
                }
            }
            return Ok(out);
        }
        let mut pipe = redis::pipe();
        for q in queues {
            pipe.cmd("XLEN").arg(q.dead_key());
        }
        bounded(pipe.query_async(&mut conn.clone()), CALL).await
    }
}
