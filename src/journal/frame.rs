//! The journal's record format, as pure functions over bytes.
//!
//! A segment file starts with an 8-byte magic that names its format, then
//! records back to back. Segments are written in the keyed format:
//!
//! ```text
//! magic "dripjnl\x03" | key copies (40 bytes, see below)
//! sync: FE D7 1F 5A | crc: u32 LE | len: u32 LE | kind: u8 | id: u64 LE | payload: len - 9 bytes
//! ```
//!
//! `len` counts the body (kind, id, payload) and `crc` is the CRC-32 (IEEE)
//! of the directory's 16-byte secret key, `len` and the body:
//! `CRC-32(key ‖ len ‖ body)`. A record cut short by a crash, a garbled
//! length or garbled bytes all fail the check. The sync word starts every
//! record, so a reader that meets a bad record can look for the next one
//! ([`scan`](super::scan)) instead of giving up on the rest of the file.
//! The key is in the segment's header, twice, each copy with its own
//! CRC-32 ([`key`](super::key)); every segment of a directory has the same.
//!
//! # Why the checksum is keyed
//!
//! Payloads come from clients (the webhook relay journals request bodies
//! verbatim), and the search for the next record after damage looks at
//! every sync word, payloads included. With a public checksum a client
//! could put a whole valid record in its body (an `End` for another
//! client's job, which would then be lost although it was answered, or an
//! `Admit` with an id of its choosing) and wait for damage before it to
//! make recovery take it. Records are only ever read where a record is
//! expected, so this needs damage; but once damaged, the forgery would be
//! trusted.
//!
//! With the key mixed in, a client that cannot read the journal's files
//! cannot compute a record's checksum. CRC-32 is linear, so the keyed
//! checksum is the public CRC of the record XOR a 32-bit mask that depends
//! on the key and the record's length only: a forgery is a guess of that
//! mask, right once in 2^32 tries, and nothing the journal answers tells
//! a client whether a guess was right (checksums never leave the files).
//! Someone who can read the files has the key too; against them no
//! checksum helps. The write path costs what it did: one CRC over the
//! record, started from the key's precomputed state.
//!
//! The first format (magic `dripjnl\x01`, written by dripfeed before the
//! sync word) is still read, with its unkeyed checksum:
//!
//! ```text
//! len: u32 LE | crc: u32 LE | kind: u8 | id: u64 LE | payload: len - 9 bytes
//! ```
//!
//! where `crc` covers the body only. Its records are copied forward into
//! keyed segments as the journal runs; until then a damaged segment of the
//! first format is searched as before, without the key's protection. The
//! magic `dripjnl\x02` (the sync word with an unkeyed checksum) was never
//! released and is not read: such a file is foreign.

use super::key::Key;

/// The word every keyed record starts with. `0xFE` never occurs in UTF-8,
/// so text payloads cannot hold it.
pub(crate) const SYNC: [u8; 4] = [0xFE, 0xD7, 0x1F, 0x5A];
/// Bytes before a record's body: sync, crc and len.
pub(crate) const HEADER: usize = 12;
/// A body's fixed part: kind and id.
const FIXED: usize = 9;
/// A record's bytes beyond its payload.
pub(crate) const OVERHEAD: usize = HEADER + FIXED;
/// The first format's bytes before a body: len and crc.
const HEADER_V1: usize = 8;

/// How a segment's records are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format<'k> {
    /// `dripjnl\x01`: no sync word, the checksum covers the body.
    V1,
    /// `dripjnl\x03`: sync word, the checksum covers this key, the length
    /// and the body.
    Keyed(&'k Key),
}

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A job was admitted; the payload is the job's encoding.
    Admit = 1,
    /// A job ended (delivered, failed for good, dead-lettered, refused…).
    End = 2,
    /// A job failed an attempt and waits for another: the payload is the
    /// attempts it has made (`u32` LE) and when the next is due (`u64` LE,
    /// ms since the Unix epoch), then the job's encoding. It takes
    /// the place of the job's `Admit` (or earlier `Retried`) record, so a
    /// restart goes on counting from there instead of from the first
    /// attempt ([`retried`]). A job submitted with attempts made before
    /// (`Submission::attempts_made`) is admitted with one in place of its
    /// `Admit`.
    Retried = 4,
    /// The `Retried` record of two development snapshots, read and never
    /// written: one wrote the attempts made only (`u32` LE, then the job),
    /// the next the head `Retried` has now ([`legacy_job_of`]).
    Counted = 3,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Admit),
            2 => Some(Kind::End),
            3 => Some(Kind::Counted),
            4 => Some(Kind::Retried),
            _ => None,
        }
    }
}

/// What a `Retried` record says of its job's attempts: how many it made,
/// and when the next is due.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tried {
    /// Attempts made.
    pub(crate) made: u32,
    /// When the next is due, ms since the Unix epoch (0: at once).
    pub(crate) due_ms: u64,
}

/// A job-holding record's payload: what its job tried and its encoding.
/// `None` for a `Retried` payload too short to hold its head.
pub(crate) fn job_of(kind: Kind, payload: &[u8]) -> Option<(Tried, &[u8])> {
    match kind {
        Kind::Admit => Some((Tried::default(), payload)),
        Kind::Retried => {
            let (head, job) = payload.split_first_chunk::<RETRY_HEAD>()?;
            Some((tried_of(head), job))
        }
        Kind::Counted => legacy_job_of(payload),
        Kind::End => None,
    }
}

fn tried_of(head: &[u8; RETRY_HEAD]) -> Tried {
    let (made, due) = head.split_at(4);
    let mut m = [0; 4];
    m.copy_from_slice(made);
    let mut d = [0; 8];
    d.copy_from_slice(due);
    Tried {
        made: u32::from_le_bytes(m),
        due_ms: u64::from_le_bytes(d),
    }
}

/// Due times a [`Kind::Counted`] record with the whole head can hold: the
/// snapshot that wrote one ran from November 2026, and a due time is at
/// most a retry policy's cap later (before 2100 here).
const PLAUSIBLE_DUE_MS: std::ops::RangeInclusive<u64> = 1_790_000_000_000..=4_102_444_800_000;

/// A [`Kind::Counted`] record's job. Its head is the whole one when what
/// would be its due time is a time that snapshot wrote (or 0, at once);
/// else it is the attempts only and the job follows them, due at once.
/// A job whose first eight bytes read as such a time is the one case
/// taken wrongly (the relay's never: its jobs start with their
/// destination's tag, `FF 'D' 'S' 'T'`).
fn legacy_job_of(payload: &[u8]) -> Option<(Tried, &[u8])> {
    if let Some((head, job)) = payload.split_first_chunk::<RETRY_HEAD>() {
        let tried = tried_of(head);
        if tried.due_ms == 0 || PLAUSIBLE_DUE_MS.contains(&tried.due_ms) {
            return Some((tried, job));
        }
    }
    let (made, job) = payload.split_first_chunk::<4>()?;
    let made = u32::from_le_bytes(*made);
    Some((Tried { made, due_ms: 0 }, job))
}

/// Bytes of a `Retried` payload's head, ahead of its job: the attempts
/// made (`u32` LE), then when the next is due (`u64` LE, ms since the Unix
/// epoch).
pub(crate) const RETRY_HEAD: usize = 12;

/// A `Retried` payload's head; the job follows.
pub(crate) fn retried(tried: Tried, out: &mut Vec<u8>) {
    out.extend_from_slice(&tried.made.to_le_bytes());
    out.extend_from_slice(&tried.due_ms.to_le_bytes());
}

/// A record read back from a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) kind: Kind,
    pub(crate) id: u64,
    pub(crate) payload: &'a [u8],
    /// Where the record starts in the segment, and its length with header.
    pub(crate) at: usize,
    pub(crate) len: usize,
}

/// Appends one record checksummed with `key` to `out`; returns its length
/// with header.
pub(crate) fn encode(out: &mut Vec<u8>, key: &Key, kind: Kind, id: u64, payload: &[u8]) -> usize {
    out.reserve(OVERHEAD + payload.len());
    encode_with(out, key, kind, id, |out| out.extend_from_slice(payload))
}

/// Appends one record checksummed with `key` whose payload `write` appends
/// in place (no copy); returns its length with header.
pub(crate) fn encode_with(
    out: &mut Vec<u8>,
    key: &Key,
    kind: Kind,
    id: u64,
    write: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let start = out.len();
    out.extend_from_slice(&SYNC);
    out.extend_from_slice(&[0; 8]); // crc, len
    out.push(kind as u8);
    out.extend_from_slice(&id.to_le_bytes());
    write(out);
    let body = out.len() - start - HEADER;
    let len = u32::try_from(body).unwrap_or(u32::MAX);
    out[start + 8..start + HEADER].copy_from_slice(&len.to_le_bytes());
    let mut sum = key.hasher();
    sum.update(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&sum.finalize().to_le_bytes());
    HEADER + body
}

/// The record of `format` starting at `at`, if a whole and valid one does
/// (length within `max_body` of payload, known kind, checksum right).
pub(crate) fn read_at<'a>(
    bytes: &'a [u8],
    at: usize,
    max_body: usize,
    format: Format<'_>,
) -> Option<Record<'a>> {
    let mut unlimited = usize::MAX;
    read_charged(bytes, at, max_body, format, &mut unlimited)
}

/// Like [`read_at`], but the bytes a checksum covers are taken from
/// `budget`; a record whose checksum would cost more than is left is not
/// read, and `budget` drops to 0. Cheap checks come first: a wrong sync
/// word, length or kind costs nothing.
pub(crate) fn read_charged<'a>(
    bytes: &'a [u8],
    at: usize,
    max_body: usize,
    format: Format<'_>,
    budget: &mut usize,
) -> Option<Record<'a>> {
    let (header, body_len, crc, body_at) = match format {
        Format::Keyed(_) => {
            let h = bytes.get(at..at.checked_add(HEADER)?)?;
            if h[..4] != SYNC {
                return None;
            }
            (h, le32(&h[8..12]), le32(&h[4..8]), at + HEADER)
        }
        Format::V1 => {
            let h = bytes.get(at..at.checked_add(HEADER_V1)?)?;
            (h, le32(&h[..4]), le32(&h[4..8]), at + HEADER_V1)
        }
    };
    let body_len = body_len as usize;
    // A `Retried` record's payload is its job's and the head before it.
    if !(FIXED..=max_body.saturating_add(FIXED + RETRY_HEAD)).contains(&body_len) {
        return None;
    }
    let body = bytes.get(body_at..body_at.checked_add(body_len)?)?;
    let kind = Kind::from_byte(body[0])?;
    let Some(left) = budget.checked_sub(body_len) else {
        *budget = 0;
        return None;
    };
    *budget = left;
    let sum = match format {
        Format::Keyed(key) => {
            let mut h = key.hasher();
            h.update(&header[8..12]);
            h.update(body);
            h.finalize()
        }
        Format::V1 => crc32fast::hash(body),
    };
    if sum != crc {
        return None;
    }
    let mut id = [0; 8];
    id.copy_from_slice(&body[1..FIXED]);
    Some(Record {
        kind,
        id: u64::from_le_bytes(id),
        payload: &body[FIXED..],
        at,
        len: body_at - at + body_len,
    })
}

fn le32(b: &[u8]) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[..4]);
    u32::from_le_bytes(w)
}

/// Test helpers: a segment's bytes in either format.
#[cfg(test)]
pub(crate) mod build {
    use super::*;
    use crate::journal::key::{self, KEY_LEN};

    /// The key the test segments are written with.
    pub(crate) fn test_key() -> Key {
        Key::new(*b"sixteen byte key")
    }

    /// A keyed segment holding `records`, under [`test_key`].
    pub(crate) fn segment(records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        segment_with(&test_key(), records)
    }

    /// A keyed segment holding `records`, under `key`.
    pub(crate) fn segment_with(key: &Key, records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        let mut out = key::head(key).to_vec();
        for (kind, id, payload) in records {
            encode(&mut out, key, *kind, *id, payload);
        }
        out
    }

    /// A record as a client that knows the layout but not the key would
    /// forge it: the checksum is plain CRC-32 of length and body.
    pub(crate) fn forged(kind: Kind, id: u64) -> Vec<u8> {
        let mut body = vec![kind as u8];
        body.extend_from_slice(&id.to_le_bytes());
        let len = (body.len() as u32).to_le_bytes();
        let mut out = SYNC.to_vec();
        out.extend_from_slice(&crc32fast::hash(&[&len[..], &body].concat()).to_le_bytes());
        out.extend_from_slice(&len);
        out.extend_from_slice(&body);
        out
    }

    /// A first-format segment holding `records`, as dripfeed wrote them
    /// before the sync word.
    pub(crate) fn segment_v1(records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        let mut out = key::MAGIC_V1.to_vec();
        for (kind, id, payload) in records {
            let mut body = vec![*kind as u8];
            body.extend_from_slice(&id.to_le_bytes());
            body.extend_from_slice(payload);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            out.extend_from_slice(&body);
        }
        out
    }

    /// A key other than [`test_key`].
    pub(crate) fn other_key() -> Key {
        Key::new([0x5A; KEY_LEN])
    }
}

#[cfg(test)]
mod tests {
    use super::build::{forged, other_key, segment, segment_v1, segment_with, test_key};
    use super::*;
    use crate::journal::key::HEAD;

    #[test]
    fn a_record_reads_back_as_written_in_both_formats() {
        let key = test_key();
        for (bytes, format, at) in [
            (
                segment(&[(Kind::Admit, 7, b"hello")]),
                Format::Keyed(&key),
                HEAD,
            ),
            (segment_v1(&[(Kind::Admit, 7, b"hello")]), Format::V1, 8),
        ] {
            let r = read_at(&bytes, at, 1 << 20, format).expect("a record");
            assert_eq!((r.kind, r.id, r.payload), (Kind::Admit, 7, &b"hello"[..]));
            assert_eq!(r.at + r.len, bytes.len());
        }
        let bytes = segment(&[(Kind::End, 9, b"")]);
        assert_eq!(bytes.len(), HEAD + OVERHEAD, "the sync word adds 4 bytes");
    }

    #[test]
    fn the_checksum_covers_the_key() {
        let (key, other) = (test_key(), other_key());
        let bytes = segment(&[(Kind::End, 3, b"")]);
        assert!(read_at(&bytes, HEAD, 1 << 20, Format::Keyed(&key)).is_some());
        assert_eq!(read_at(&bytes, HEAD, 1 << 20, Format::Keyed(&other)), None);
        // The same record with the public checksum, no key: not a record.
        let mut public = bytes[..HEAD].to_vec();
        public.extend_from_slice(&forged(Kind::End, 3));
        assert_eq!(public.len(), bytes.len());
        assert_eq!(read_at(&public, HEAD, 1 << 20, Format::Keyed(&key)), None);
        let theirs = segment_with(&other, &[(Kind::End, 3, b"")]);
        assert_eq!(read_at(&theirs, HEAD, 1 << 20, Format::Keyed(&key)), None);
    }

    #[test]
    fn the_checksum_covers_the_length() {
        // A length garbled so it still fits inside the file is caught.
        let key = test_key();
        let mut bytes = segment(&[(Kind::Admit, 1, b"abcdef"), (Kind::End, 1, b"")]);
        bytes[HEAD + 8] -= 2; // body two bytes shorter
        assert_eq!(read_at(&bytes, HEAD, 1 << 20, Format::Keyed(&key)), None);
    }

    #[test]
    fn sync_kind_and_bounds_are_checked_before_the_checksum() {
        let key = test_key();
        let f = Format::Keyed(&key);
        let bytes = segment(&[(Kind::Admit, 1, &[7; 100])]);
        let at = HEAD;
        assert!(read_at(&bytes, at, 100, f).is_some());
        assert_eq!(read_at(&bytes, at, 50, f), None, "above the cap");
        assert_eq!(read_at(&bytes, at + 1, 1 << 20, f), None, "no sync");
        let mut kind = bytes.clone();
        kind[at + HEADER] = 9;
        assert_eq!(read_at(&kind, at, 1 << 20, f), None, "unknown kind");
        assert_eq!(read_at(&bytes, bytes.len(), 1 << 20, f), None);
        assert_eq!(read_at(&bytes, usize::MAX, 1 << 20, f), None);
    }

    #[test]
    fn a_retried_record_holds_its_count_then_its_job() {
        let mut payload = Vec::new();
        let tried = Tried {
            made: 3,
            due_ms: 1_796_000_000_000,
        };
        retried(tried, &mut payload);
        payload.extend_from_slice(b"job");
        assert_eq!(job_of(Kind::Retried, &payload), Some((tried, &b"job"[..])));
        let none = Tried::default();
        assert_eq!(job_of(Kind::Admit, b"job"), Some((none, &b"job"[..])));
        assert_eq!(
            job_of(Kind::Retried, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None,
            "too short for its head"
        );
        assert_eq!(job_of(Kind::End, b""), None);
        // Kind 3, as the snapshots before wrote it: with the due time...
        assert_eq!(job_of(Kind::Counted, &payload), Some((tried, &b"job"[..])));
        // ...or the attempts only, then the job (a relay's: its tag first).
        let job = [&[0xFF, b'D', b'S', b'T', 2, 0, 0, 0][..], b"d1{}"].concat();
        let old = [&2u32.to_le_bytes()[..], &job].concat();
        let two = Tried { made: 2, due_ms: 0 };
        assert_eq!(job_of(Kind::Counted, &old), Some((two, &job[..])));
        assert_eq!(
            job_of(Kind::Counted, &[2, 0, 0, 0, 7]),
            Some((two, &[7][..]))
        );
        assert_eq!(job_of(Kind::Counted, &[2, 0]), None, "too short");
        // Its head rides above the job's size bound.
        let key = test_key();
        let bytes = segment(&[(Kind::Retried, 1, &[7; 112])]);
        assert!(read_at(&bytes, HEAD, 100, Format::Keyed(&key)).is_some());
        assert!(read_at(&bytes, HEAD, 99, Format::Keyed(&key)).is_none());
    }
}
