//! Reading a whole segment back, as a pure function over its bytes: every
//! good record, the damaged regions skipped between them, and where a torn
//! tail starts.
//!
//! A bad record is not the end of the file. The reader looks for the next
//! offset where a valid record starts (in the keyed format only where the
//! sync word is; in the first, at every byte) and carries on from there,
//! so one garbled byte costs the record it is in, not the records after it.
//! Bad bytes with a good record after them are *damage* (the segment is set
//! aside and rewritten, see [`repair`](super::repair)); bad bytes with
//! nothing valid after them are a *torn tail*, what a crash in the middle
//! of a write leaves, and are cut.
//!
//! The search takes only records whose checksum is right under the
//! segment's key, so a record a client forged inside its payload is not
//! taken for one (see [`frame`](super::frame)). A garbled copy of the key
//! in the header is damage too (no record lost, but the segment is
//! rewritten); with both copies garbled the segment is read with the
//! directory's key.
//!
//! The search is bounded: each candidate's checksum costs its bytes from a
//! budget of a few times the segment's size, so a payload full of fake
//! sync words cannot make recovery quadratic. Past the budget the rest of
//! the file counts as damaged (kept aside, never cut).

use super::frame::{self, Format, Record, SYNC};
use super::key::{self, Head, Key};

/// A segment read back.
#[derive(Debug)]
pub(crate) struct Scan<'a> {
    /// The good records, in file order.
    pub(crate) records: Vec<Record<'a>>,
    /// Damaged regions: bad bytes that good records follow.
    pub(crate) skipped: Vec<Skipped>,
    /// Where the part worth keeping ends: the file's length, or where a
    /// torn tail starts.
    pub(crate) end: usize,
}

/// A damaged region of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// Its offset in the segment.
    pub(crate) at: usize,
    /// Its length.
    pub(crate) bytes: usize,
    /// Records lost in it, at least: the sync words it holds in the keyed
    /// format (at least one), one in the first; none for a garbled copy of
    /// the key in the header.
    pub(crate) records: u64,
}

impl Scan<'_> {
    /// Records lost in damaged regions.
    pub(crate) fn skipped_records(&self) -> u64 {
        self.skipped.iter().map(|s| s.records).sum()
    }

    /// Bytes in damaged regions.
    pub(crate) fn skipped_bytes(&self) -> u64 {
        self.skipped.iter().map(|s| s.bytes as u64).sum()
    }
}

/// Checksum bytes a scan may spend looking for records after damage, for a
/// segment of `len` bytes.
fn budget(len: usize) -> usize {
    len.saturating_mul(16).saturating_add(1 << 20)
}

/// Reads a segment's bytes (header included); `None` when they do not
/// start with a whole journal header. `dir_key` is the directory's key,
/// used when both copies of the segment's own are garbled.
pub(crate) fn scan<'a>(bytes: &'a [u8], max_body: usize, dir_key: &Key) -> Option<Scan<'a>> {
    let head = key::read_head(bytes)?;
    let mut out = Scan {
        records: Vec::new(),
        skipped: Vec::new(),
        end: bytes.len(),
    };
    // With both copies of its key garbled, a segment read with the
    // directory's key may not be its own: nothing in it is cut.
    let unsure = matches!(head, Head::Keyed { key: None, .. });
    let format = match &head {
        Head::V1 => Format::V1,
        Head::Keyed { key, garbled } => {
            out.skipped
                .extend(garbled.iter().map(|&(at, bytes)| Skipped {
                    at,
                    bytes,
                    records: 0,
                }));
            Format::Keyed(key.as_ref().unwrap_or(dir_key))
        }
    };
    let mut budget = budget(bytes.len());
    let mut at = head.records_at();
    while at < bytes.len() {
        if let Some(r) = frame::read_at(bytes, at, max_body, format) {
            at += r.len;
            out.records.push(r);
            continue;
        }
        match next_record(bytes, at + 1, max_body, format, &mut budget) {
            Some(r) => {
                out.skipped.push(skipped(bytes, at, r.at, format));
                at = r.at;
            }
            None if budget == 0 || unsure => {
                // Gave up looking, or unsure of the key: the rest is kept
                // aside, not cut.
                out.skipped.push(skipped(bytes, at, bytes.len(), format));
                return Some(out);
            }
            None => {
                out.end = at;
                return Some(out);
            }
        }
    }
    Some(out)
}

/// The first valid record at or after `from`, within the budget.
fn next_record<'a>(
    bytes: &'a [u8],
    from: usize,
    max_body: usize,
    format: Format<'_>,
    budget: &mut usize,
) -> Option<Record<'a>> {
    let mut at = from;
    while at < bytes.len() {
        if matches!(format, Format::Keyed(_)) {
            at += find_sync(bytes.get(at..)?)?;
        }
        if let Some(r) = frame::read_charged(bytes, at, max_body, format, budget) {
            return Some(r);
        }
        if *budget == 0 {
            return None;
        }
        at += 1;
    }
    None
}

fn find_sync(bytes: &[u8]) -> Option<usize> {
    bytes.windows(SYNC.len()).position(|w| w == SYNC)
}

fn skipped(bytes: &[u8], at: usize, to: usize, format: Format<'_>) -> Skipped {
    let records = match format {
        Format::Keyed(_) => bytes[at..to]
            .windows(SYNC.len())
            .filter(|w| *w == SYNC)
            .count() as u64,
        Format::V1 => 1,
    };
    Skipped {
        at,
        bytes: to - at,
        records: records.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::frame::Kind;
    use crate::journal::frame::build::{
        forged, other_key, segment, segment_v1, segment_with, test_key,
    };
    use crate::journal::key::HEAD;

    const MAX: usize = 1 << 20;

    fn ids(scan: &Scan<'_>) -> Vec<u64> {
        scan.records.iter().map(|r| r.id).collect()
    }

    /// Builds a segment's bytes in one format.
    type Build = fn(&[(Kind, u64, &[u8])]) -> Vec<u8>;

    fn five(build: Build) -> Vec<u8> {
        build(&[
            (Kind::Admit, 1, b"first"),
            (Kind::Admit, 2, b"second job"),
            (Kind::Admit, 3, b"third"),
            (Kind::End, 1, b""),
            (Kind::Admit, 4, b"fourth"),
        ])
    }

    #[test]
    fn a_whole_segment_reads_back_as_written() {
        for bytes in [five(segment), five(segment_v1)] {
            let s = scan(&bytes, MAX, &test_key()).expect("a segment");
            assert_eq!(ids(&s), [1, 2, 3, 1, 4]);
            assert_eq!((s.end, s.skipped.len()), (bytes.len(), 0));
            assert_eq!(s.records[1].at, s.records[0].at + s.records[0].len);
            assert_eq!(s.records[1].payload, b"second job");
        }
    }

    #[test]
    fn every_flipped_bit_of_a_middle_record_costs_that_record_alone() {
        for (bytes, format) in [(five(segment), "keyed"), (five(segment_v1), "v1")] {
            let whole = scan(&bytes, MAX, &test_key()).expect("a segment");
            let second = whole.records[1];
            for at in second.at..second.at + second.len {
                for bit in 0..8 {
                    let mut bad = bytes.clone();
                    bad[at] ^= 1 << bit;
                    let s = scan(&bad, MAX, &test_key()).expect("a segment");
                    let what = format!("{format} byte {at} bit {bit}");
                    assert_eq!(ids(&s), [1, 3, 1, 4], "{what}");
                    assert_eq!(s.end, bytes.len(), "{what}: nothing cut");
                    let lost = Skipped {
                        at: second.at,
                        bytes: second.len,
                        records: 1,
                    };
                    assert_eq!(s.skipped, [lost], "{what}");
                }
            }
        }
    }

    #[test]
    fn a_tail_cut_at_every_offset_keeps_everything_before_it() {
        for bytes in [five(segment), five(segment_v1)] {
            let whole = scan(&bytes, MAX, &test_key()).expect("a segment");
            let last = whole.records[4];
            for cut in last.at..bytes.len() {
                let s = scan(&bytes[..cut], MAX, &test_key()).expect("a segment");
                assert_eq!(ids(&s), [1, 2, 3, 1], "cut at {cut}");
                assert_eq!((s.end, s.skipped.len()), (last.at, 0), "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_garbled_last_record_is_a_torn_tail() {
        // Nothing valid follows it: indistinguishable from a crash mid-write.
        let mut bytes = five(segment);
        let n = bytes.len();
        bytes[n - 2] ^= 0xFF;
        let s = scan(&bytes, MAX, &test_key()).expect("a segment");
        assert_eq!((ids(&s), s.skipped.len()), (vec![1, 2, 3, 1], 0));
        assert_eq!(s.end, s.records[3].at + s.records[3].len);
    }

    #[test]
    fn garbage_between_records_is_skipped_and_counted() {
        let whole = five(segment);
        let s = scan(&whole, MAX, &test_key()).expect("a segment");
        let at = s.records[2].at;
        let mut bytes = whole[..at].to_vec();
        bytes.extend_from_slice(&[0xAB; 37]);
        bytes.extend_from_slice(&SYNC); // a sync word that starts no record
        bytes.extend_from_slice(&whole[at..]);
        let s = scan(&bytes, MAX, &test_key()).expect("a segment");
        assert_eq!(ids(&s), [1, 2, 3, 1, 4]);
        assert_eq!(
            s.skipped,
            [Skipped {
                at,
                bytes: 41,
                records: 1
            }]
        );
        assert_eq!((s.skipped_records(), s.skipped_bytes()), (1, 41));
    }

    #[test]
    fn zeros_foreign_files_and_huge_lengths_are_not_records() {
        let mut zeros = key::head(&test_key()).to_vec();
        zeros.extend_from_slice(&[0; 64]);
        let s = scan(&zeros, MAX, &test_key()).expect("a segment");
        assert_eq!(
            (s.records.len(), s.end),
            (0, HEAD),
            "a tail of zeros is cut"
        );
        assert!(scan(b"not a journal", MAX, &test_key()).is_none());
        assert!(scan(b"", MAX, &test_key()).is_none());
        let big = segment(&[(Kind::Admit, 1, &[7; 100])]);
        let s = scan(&big, 50, &test_key()).expect("a segment");
        assert_eq!((s.records.len(), s.end), (0, HEAD), "a body above the cap");
    }

    #[test]
    fn fake_sync_words_cannot_make_the_search_unbounded() {
        // After a damaged record, a payload made of headers that each claim
        // a large body: every candidate passes the cheap checks.
        let max = 64 << 10;
        let mut fake = Vec::new();
        while fake.len() < (256 << 10) {
            fake.extend_from_slice(&SYNC);
            fake.extend_from_slice(&[0; 4]); // a wrong crc
            fake.extend_from_slice(&(max as u32).to_le_bytes());
            fake.push(1);
            fake.extend_from_slice(&[0; 3]);
        }
        let mut bytes = segment(&[(Kind::Admit, 1, b"kept")]);
        let good = bytes.len();
        bytes.extend_from_slice(&[0xAB; 8]);
        bytes.extend_from_slice(&fake);
        bytes.extend_from_slice(&segment(&[(Kind::Admit, 2, b"far")])[HEAD..]);
        let s = scan(&bytes, max, &test_key()).expect("a segment");
        assert_eq!(ids(&s), [1]);
        // Gave up: the rest is damage kept aside, not a tail to cut.
        assert_eq!(s.end, bytes.len());
        assert_eq!(s.skipped.len(), 1);
        assert_eq!(
            (s.skipped[0].at, s.skipped[0].at + s.skipped[0].bytes),
            (good, bytes.len())
        );
    }

    /// A segment whose second record's payload embeds `forged` (an `End`
    /// for job 1), the byte just before the forgery garbled: the search
    /// for the next record starts inside that payload.
    fn resync_into(key: &Key, forged: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut hostile = b"{\"body\":\"".to_vec();
        hostile.extend_from_slice(forged);
        hostile.extend_from_slice(b"\"}");
        let bytes = segment_with(
            key,
            &[
                (Kind::Admit, 1, b"the victim"),
                (Kind::Admit, 2, &hostile),
                (Kind::Admit, 3, b"after"),
            ],
        );
        let whole = scan(&bytes, MAX, key).expect("a segment");
        assert_eq!(
            ids(&whole),
            [1, 2, 3],
            "read in order, the forgery is payload"
        );
        let inside = whole.records[1].at + frame::OVERHEAD + 9;
        assert_eq!(bytes[inside..inside + forged.len()], *forged);
        let mut bad = bytes.clone();
        bad[inside - 1] ^= 0x01;
        (bytes, bad)
    }

    #[test]
    fn a_record_forged_inside_a_payload_is_not_taken_after_a_resync() {
        let key = test_key();
        // Built with the public checksum, or with a key other than the
        // segment's: neither passes.
        let with_other = segment_with(&other_key(), &[(Kind::End, 1, b"")]);
        for forgery in [forged(Kind::End, 1), with_other[HEAD..].to_vec()] {
            let (_, bad) = resync_into(&key, &forgery);
            let s = scan(&bad, MAX, &key).expect("a segment");
            assert!(
                !s.records.iter().any(|r| r.kind == Kind::End),
                "the forged End was taken: {:?}",
                s.records
            );
            assert_eq!(ids(&s), [1, 3], "job 1 stays live, job 3 is found");
            assert_eq!(s.end, bad.len(), "nothing cut");
            assert_eq!(s.skipped.len(), 1);
        }
        // The check is the key, not the search: a record made with the key
        // would be found there (which only a holder of the key can make).
        let mut genuine = Vec::new();
        frame::encode(&mut genuine, &key, Kind::End, 1, b"");
        let (_, bad) = resync_into(&key, &genuine);
        let s = scan(&bad, MAX, &key).expect("a segment");
        assert_eq!(ids(&s), [1, 1, 3]);
    }

    #[test]
    fn a_garbled_key_copy_costs_no_record_and_both_fall_back_to_the_directory_key() {
        let key = test_key();
        let bytes = five(segment);
        for at in 8..HEAD {
            let mut bad = bytes.clone();
            bad[at] ^= 0x04;
            let s = scan(&bad, MAX, &other_key()).expect("a segment");
            assert_eq!(ids(&s), [1, 2, 3, 1, 4], "byte {at}");
            assert_eq!(s.skipped.len(), 1, "byte {at}: damage, so rewritten");
            assert_eq!((s.skipped_records(), s.skipped_bytes()), (0, 20));
            assert_eq!(s.end, bytes.len());
        }
        let mut both = bytes.clone();
        both[8] ^= 1;
        both[28] ^= 1;
        let s = scan(&both, MAX, &key).expect("a segment");
        assert_eq!((ids(&s), s.skipped_bytes()), (vec![1, 2, 3, 1, 4], 40));
        // Under a key that is not theirs nothing passes, and the segment
        // is damage kept aside, never cut.
        let s = scan(&both, MAX, &other_key()).expect("a segment");
        assert!(s.records.is_empty());
        let body = (bytes.len() - HEAD) as u64;
        assert_eq!((s.end, s.skipped_bytes()), (bytes.len(), 40 + body));
    }
}
