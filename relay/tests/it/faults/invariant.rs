//! The invariant and its table: every webhook answered 202 is delivered
//! (its receiver answered 2xx in time), or in the dead-letter file, or
//! still in the journal, never nowhere; and the relay's resident memory
//! stays within 1.25 × `--max-queue-bytes` + 64 MiB.

use std::collections::HashSet;

use super::scenario::MAX_QUEUE_BYTES;

/// The resident memory a relay may reach, KiB.
pub(super) const RSS_BOUND_KIB: u64 = (MAX_QUEUE_BYTES * 5 / 4 + (64 << 20)) / 1024;

/// One fault's line of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// The fault.
    pub fault: &'static str,
    /// Webhooks answered 202.
    pub accepted: usize,
    /// Of those, delivered.
    pub delivered: usize,
    /// Of those, in the dead-letter file.
    pub dead_lettered: usize,
    /// Of those, still in the journal.
    pub kept: usize,
    /// Of those, none of the three.
    pub lost: usize,
    /// The relay's peak resident memory, KiB.
    pub rss_kib: u64,
    /// What else the run saw (answers, skips), for the log.
    pub note: String,
}

impl Row {
    /// Counts `accepted` against what was delivered, dead-lettered and kept.
    pub(crate) fn count(
        fault: &'static str,
        accepted: &[String],
        delivered: &HashSet<String>,
        dead_lettered: &HashSet<String>,
        kept: &HashSet<String>,
        rss_kib: u64,
    ) -> Row {
        let accepted: HashSet<&String> = accepted.iter().collect();
        let of = |set: &HashSet<String>| accepted.iter().filter(|id| set.contains(**id)).count();
        let lost = accepted
            .iter()
            .filter(|id| {
                !delivered.contains(**id) && !dead_lettered.contains(**id) && !kept.contains(**id)
            })
            .count();
        Row {
            fault,
            accepted: accepted.len(),
            delivered: of(delivered),
            dead_lettered: of(dead_lettered),
            kept: of(kept),
            lost,
            rss_kib,
            note: String::new(),
        }
    }

    /// The row with `note`.
    pub(crate) fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }

    /// A fault that could not run here (and why).
    pub(crate) fn skipped(fault: &'static str, why: &str) -> Row {
        Row {
            fault,
            accepted: 0,
            delivered: 0,
            dead_lettered: 0,
            kept: 0,
            lost: 0,
            rss_kib: 0,
            note: format!("skipped: {why}"),
        }
    }

    /// A fault whose run panicked (its message is printed where it did).
    pub(crate) fn panicked(fault: &'static str) -> Row {
        Row {
            lost: usize::MAX,
            ..Row::skipped(fault, "")
        }
        .note("its run panicked (see above)")
    }

    /// Whether it keeps the invariant (and did something to keep it on).
    pub(crate) fn holds(&self) -> bool {
        self.lost == 0 && self.rss_kib <= RSS_BOUND_KIB
    }
}

/// The table, one line per fault, then each row's note.
pub(super) fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "| {:<29} | {:>8} | {:>9} | {:>13} | {:>4} | {:>4} | {:>7} |\n",
        "fault", "accepted", "delivered", "dead-lettered", "kept", "lost", "RSS MiB"
    );
    let widths = [29, 8, 9, 13, 4, 4, 7];
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
    out.push_str(&format!("|{}|\n", rule.join("|")));
    for r in rows {
        out.push_str(&format!(
            "| {:<29} | {:>8} | {:>9} | {:>13} | {:>4} | {:>4} | {:>7.1} |\n",
            r.fault,
            r.accepted,
            r.delivered,
            r.dead_lettered,
            r.kept,
            match r.lost {
                usize::MAX => "run panicked".to_owned(),
                lost => lost.to_string(),
            },
            r.rss_kib as f64 / 1024.0
        ));
    }
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        out.push_str(&format!("{}: {}\n", r.fault, r.note));
    }
    out
}
