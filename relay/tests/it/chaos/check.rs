//! The chaos run's checker: from the client's answers, the receiver's log
//! and the dead letters, accounts for every webhook.
//!
//! - every request answered 202 is delivered (answered 2xx) or
//!   dead-lettered: none lost;
//! - a key answered 202 more than once (its retries) names one webhook;
//! - a webhook delivered more than once is a duplicate, each caused by a
//!   fault (a delivery under way when its relay was killed or stopped, or
//!   answered while Redis failed over): at most the faults' count times
//!   the deliveries a relay has in flight;
//! - nothing is delivered for a request never answered 202, unless one of
//!   its answers left that open: no answer (the relay died under it),
//!   503 `unreplicated` (queued, the replicas short) or 503 `unanswered`
//!   (Redis did not answer the admission in time: perhaps queued);
//! - in no second does the receiver get more than its bound: the rate + 2
//!   for one relay (its pacing, plus two for the test receiver's own
//!   stalls on a busy machine), 1.1 × the rate + 1 (+ 2) for a fleet (the
//!   shared bucket's burst and the permits each relay leased ahead, as
//!   the book's fleet page says).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::client::{Answer, Answers};
use super::rx::Arrival;

/// What a run saw, counted.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub posted: usize,
    pub accepted: usize,
    pub refused: usize,
    /// Tries answered other than 202 (the client tried again), and not
    /// answered at all.
    pub refused_tries: usize,
    pub unanswered_tries: usize,
    pub delivered: usize,
    pub duplicates: usize,
    /// Each duplicated webhook's arrivals, ms from the start (the first
    /// twenty), to set beside the fault log.
    pub duplicated_at: Vec<Vec<u64>>,
    pub dead_lettered: usize,
    /// Not delivered yet when the run ended, still queued (in the
    /// journal): kept, not lost.
    pub kept: usize,
    pub lost: usize,
    /// Delivered though never answered 202, and of those, left open by an
    /// answer (no answer, `unreplicated`, `unanswered`).
    pub refused_delivered: usize,
    pub refused_open: usize,
    /// Keys answered 202 with two different ids.
    pub split_keys: usize,
    /// The most requests the receiver got in one second.
    pub worst_second: usize,
    /// Which second (from the start) that was, and the requests of each
    /// second around it.
    pub worst_at: u64,
    pub around_worst: Vec<(u64, usize)>,
    /// The faults as they came, ms from the start.
    pub log: Vec<(u64, String)>,
    /// The faults applied, by kind.
    pub faults: Vec<(&'static str, usize)>,
}

impl Tally {
    /// The faults that can each repeat a delivery.
    pub(super) fn repeating_faults(&self) -> usize {
        self.faults
            .iter()
            .filter(|(k, _)| matches!(*k, "kill" | "stop" | "failover" | "full disk"))
            .map(|(_, n)| n)
            .sum()
    }

    /// One line of the run's table.
    pub(super) fn line(&self, engine: &str, secs: u64) -> String {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            "| {engine} | {secs} s | {} | {} | {} ({} tries, {} unanswered) | {} | {} | {} | {} | {} | {} ({} open) | {} | {} |",
            self.posted,
            self.accepted,
            self.refused,
            self.refused_tries,
            self.unanswered_tries,
            self.delivered,
            self.duplicates,
            self.dead_lettered,
            self.kept,
            self.lost,
            self.refused_delivered,
            self.refused_open,
            faults.join(", "),
            self.worst_second,
        )
    }
}

/// The table's head.
pub(super) const HEAD: &str = "| engine | length | posted | 202 | refused | delivered | duplicates | dead-lettered | still queued | lost | delivered unanswered 202 | faults | worst second |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// Counts the run: `answers` by the client, `arrivals` at the receiver
/// (from `start`), `dead` the dead-lettered ids, `kept` those still
/// queued at the end.
pub(super) fn count(
    answers: &Answers,
    arrivals: &[Arrival],
    dead: &HashSet<String>,
    kept: &HashSet<String>,
    start: Instant,
) -> Tally {
    let mut t = Tally {
        posted: answers.len(),
        ..Tally::default()
    };
    let mut accepted: HashSet<&str> = HashSet::new();
    let mut never: HashMap<u64, bool> = HashMap::new();
    for (n, tries) in answers {
        t.refused_tries += tries
            .iter()
            .filter(|a| matches!(a, Answer::Refused(..)))
            .count();
        t.unanswered_tries += tries.iter().filter(|a| matches!(a, Answer::None)).count();
        let ids: HashSet<&str> = tries
            .iter()
            .filter_map(|a| match a {
                Answer::Accepted(id) => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if ids.len() > 1 {
            t.split_keys += 1;
        }
        if ids.is_empty() {
            t.refused += 1;
            let open = tries.iter().any(|a| {
                matches!(a, Answer::None)
                    || matches!(a, Answer::Refused(503, k) if k == "unreplicated" || k == "unanswered")
            });
            never.insert(*n, open);
        }
        accepted.extend(ids);
    }
    t.accepted = accepted.len();
    let mut delivered: HashMap<&str, usize> = HashMap::new();
    let mut per_second: HashMap<u64, usize> = HashMap::new();
    let mut refused_seen: HashSet<u64> = HashSet::new();
    for a in arrivals {
        *per_second
            .entry(a.at.saturating_duration_since(start).as_secs())
            .or_default() += 1;
        if a.ok {
            *delivered.entry(a.id.as_str()).or_default() += 1;
            if let Some(n) = a.n
                && let Some(open) = never.get(&n)
                && refused_seen.insert(n)
            {
                t.refused_delivered += 1;
                if *open {
                    t.refused_open += 1;
                }
            }
        }
    }
    t.delivered = accepted
        .iter()
        .filter(|id| delivered.contains_key(*id))
        .count();
    t.duplicates = delivered.values().filter(|n| **n > 1).map(|n| n - 1).sum();
    let mut at: HashMap<&str, Vec<u64>> = HashMap::new();
    for a in arrivals
        .iter()
        .filter(|a| a.ok && delivered.get(a.id.as_str()).is_some_and(|n| *n > 1))
    {
        let ms = a.at.saturating_duration_since(start).as_millis();
        at.entry(a.id.as_str())
            .or_default()
            .push(u64::try_from(ms).unwrap_or(u64::MAX));
    }
    let mut twice: Vec<Vec<u64>> = at.into_values().collect();
    twice.sort();
    twice.truncate(20);
    t.duplicated_at = twice;
    t.dead_lettered = accepted
        .iter()
        .filter(|id| !delivered.contains_key(*id) && dead.contains(**id))
        .count();
    t.kept = accepted
        .iter()
        .filter(|id| !delivered.contains_key(*id) && !dead.contains(**id) && kept.contains(**id))
        .count();
    t.lost = accepted
        .iter()
        .filter(|id| !delivered.contains_key(*id) && !dead.contains(**id) && !kept.contains(**id))
        .count();
    if let Some((at, n)) = per_second.iter().max_by_key(|(s, n)| (**n, u64::MAX - **s)) {
        t.worst_second = *n;
        t.worst_at = *at;
        t.around_worst = (at.saturating_sub(5)..=at + 5)
            .map(|s| (s, per_second.get(&s).copied().unwrap_or(0)))
            .collect();
    }
    t
}

/// Milliseconds since `start`, for the fault log.
pub(super) fn ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Whether every 202 is delivered or dead-lettered yet.
pub(super) fn settled(answers: &Answers, arrivals: &[Arrival], dead: &HashSet<String>) -> bool {
    let delivered: HashSet<&str> = arrivals
        .iter()
        .filter(|a| a.ok)
        .map(|a| a.id.as_str())
        .collect();
    answers.values().flatten().all(|a| match a {
        Answer::Accepted(id) => delivered.contains(id.as_str()) || dead.contains(id),
        _ => true,
    })
}

/// Asserts what the run must hold; `in_flight` the deliveries the relays
/// have at once, `most` the receiver's bound per second.
pub(super) fn hold(engine: &str, t: &Tally, in_flight: usize, most: usize) {
    assert!(t.accepted > 0, "{engine}: nothing accepted: {t:?}");
    assert_eq!(t.lost, 0, "{engine}: webhooks answered 202 lost: {t:?}");
    assert_eq!(t.split_keys, 0, "{engine}: a key named two webhooks: {t:?}");
    assert_eq!(
        t.refused_delivered, t.refused_open,
        "{engine}: delivered though refused: {t:?}"
    );
    let bound = (t.repeating_faults() * in_flight).max(1);
    assert!(
        t.duplicates <= bound,
        "{engine}: {} duplicates, more than {bound} (faults × in flight); arrivals of the first, ms: {:?}; faults: {:?}; {t:?}",
        t.duplicates,
        t.duplicated_at,
        t.log,
    );
    let near: Vec<&(u64, String)> = t
        .log
        .iter()
        .filter(|(ms, _)| ms / 1000 + 15 >= t.worst_at && ms / 1000 <= t.worst_at + 2)
        .collect();
    assert!(
        t.worst_second <= most,
        "{engine}: {} in second {}, bound {most}; seconds around it {:?}; faults near it {near:?}",
        t.worst_second,
        t.worst_at,
        t.around_worst,
    );
}

/// How long `engine`'s run lasts (`DRIPFEED_CHAOS_SECS`) and the
/// generator of its faults (`DRIPFEED_CHAOS_SEED`, or a new seed),
/// printed; `None`: skipped.
pub(super) fn begin(engine: &str) -> Option<(Duration, fastrand::Rng)> {
    let secs: u64 = std::env::var("DRIPFEED_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s| *s > 0)
        .or_else(|| {
            eprintln!("chaos: skipped (DRIPFEED_CHAOS_SECS unset; scripts/chaos.sh runs it)");
            None
        })?;
    let length = Duration::from_secs(secs);
    let seed = std::env::var("DRIPFEED_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("chaos ({engine}): seed {seed} (DRIPFEED_CHAOS_SEED replays it), {length:?}");
    Some((length, fastrand::Rng::with_seed(seed)))
}
