//! The live set: which jobs are admitted and not ended, where their
//! records are (an `Admit`, or a `Retried` that took its place or
//! admitted it with its earlier attempts), and
//! each segment's counts (what reclaiming space and coming back after the
//! directory was lost both go by).

use std::collections::{BTreeMap, HashMap};

use super::key::HEAD;

/// What the journal knows about one segment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    /// Bytes in the file.
    pub(crate) len: u64,
    /// Jobs admitted here and not ended.
    pub(crate) live: u64,
    /// Their records' bytes.
    pub(crate) live_bytes: u64,
}

impl Seg {
    /// A segment just created: its header and nothing else.
    pub(crate) const EMPTY: Seg = Seg {
        len: HEAD as u64,
        live: 0,
        live_bytes: 0,
    };
}

/// Where a live job's record is (its `Admit`, or its latest `Retried`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Live {
    pub(crate) seg: u64,
    pub(crate) len: u32,
}

/// The live set: jobs admitted and not ended, and the segments' counts.
#[derive(Debug, Default)]
pub(crate) struct LiveSet {
    pub(crate) segs: BTreeMap<u64, Seg>,
    pub(crate) jobs: HashMap<u64, Live>,
}

impl LiveSet {
    /// A job's record was written in `seg` (a copy, or a retry's record,
    /// replaces the old one).
    pub(crate) fn admit(&mut self, id: u64, seg: u64, len: usize) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if let Some(old) = self.jobs.insert(id, Live { seg, len }) {
            self.forget(old);
        }
        let s = self.segs.entry(seg).or_default();
        s.live += 1;
        s.live_bytes += u64::from(len);
    }

    /// A job ended; `false` if it was not live.
    pub(crate) fn end(&mut self, id: u64) -> bool {
        match self.jobs.remove(&id) {
            Some(old) => {
                self.forget(old);
                true
            }
            None => false,
        }
    }

    fn forget(&mut self, old: Live) {
        if let Some(s) = self.segs.get_mut(&old.seg) {
            s.live = s.live.saturating_sub(1);
            s.live_bytes = s.live_bytes.saturating_sub(u64::from(old.len));
        }
    }

    /// Segment `seq` was just created (see [`create`](super::segments::create)).
    pub(crate) fn started(&mut self, seq: u64) {
        self.segs.insert(seq, Seg::EMPTY);
    }

    /// Bytes in every segment.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.segs.values().map(|s| s.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_set_follows_copies_and_ends() {
        let mut live = LiveSet::default();
        live.admit(1, 1, 30);
        live.admit(2, 1, 40);
        live.admit(1, 2, 30); // compacted into segment 2
        assert_eq!(
            live.segs[&1],
            Seg {
                len: 0,
                live: 1,
                live_bytes: 40
            }
        );
        assert_eq!(live.segs[&2].live, 1);
        assert!(live.end(1));
        assert!(!live.end(1), "ended twice");
        assert_eq!((live.segs[&2].live, live.segs[&2].live_bytes), (0, 0));
    }
}
