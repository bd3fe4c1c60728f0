//! The journal's record format, as pure functions over bytes.
//!
//! A segment file starts with an 8-byte magic, then records back to back:
//!
//! ```text
//! len: u32 LE | crc: u32 LE | kind: u8 | id: u64 LE | payload: len - 9 bytes
//! ```
//!
//! `len` counts the body (kind, id, payload) and `crc` is the CRC-32 (IEEE) of the
//! body, so a record cut short by a crash, or bytes the disk garbled, fail
//! the check: [`parse`] stops there and reports the offset of the first bad
//! byte, and everything before it stands.

/// The first bytes of every segment file.
pub(crate) const MAGIC: &[u8; 8] = b"dripjnl\x01";
/// Bytes before a record's body: `len` and `crc`.
pub(crate) const HEADER: usize = 8;
/// A body's fixed part: kind and id.
const FIXED: usize = 9;
/// A record's bytes beyond its payload.
pub(crate) const OVERHEAD: usize = HEADER + FIXED;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A job was admitted; the payload is the job's encoding.
    Admit = 1,
    /// A job ended (delivered, failed for good, dead-lettered, refused…).
    End = 2,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Admit),
            2 => Some(Kind::End),
            _ => None,
        }
    }
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

/// Appends one record to `out`; returns its length with header.
pub(crate) fn encode(out: &mut Vec<u8>, kind: Kind, id: u64, payload: &[u8]) -> usize {
    out.reserve(OVERHEAD + payload.len());
    encode_with(out, kind, id, |out| out.extend_from_slice(payload))
}

/// Appends one record whose payload `write` appends in place (no copy);
/// returns its length with header.
pub(crate) fn encode_with(
    out: &mut Vec<u8>,
    kind: Kind,
    id: u64,
    write: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    out.push(kind as u8);
    out.extend_from_slice(&id.to_le_bytes());
    write(out);
    let body = out.len() - start - HEADER;
    let len = u32::try_from(body).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32(&out[start + HEADER..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    HEADER + body
}

/// The records of a segment's bytes (magic included), and where the good
/// part ends: `bytes.len()` when the segment is whole, else the offset of
/// the first torn or corrupt record.
pub(crate) fn parse(bytes: &[u8], max_body: usize) -> (Vec<Record<'_>>, usize) {
    let mut records = Vec::new();
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return (records, 0);
    }
    let mut at = MAGIC.len();
    while let Some(record) = read_one(bytes, at, max_body) {
        at += record.len;
        records.push(record);
    }
    (records, at)
}

fn read_one(bytes: &[u8], at: usize, max_body: usize) -> Option<Record<'_>> {
    let header = bytes.get(at..at.checked_add(HEADER)?)?;
    let body_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if !(FIXED..=max_body.saturating_add(FIXED)).contains(&body_len) {
        return None;
    }
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let body = bytes.get(at + HEADER..(at + HEADER).checked_add(body_len)?)?;
    if crc32(body) != crc {
        return None;
    }
    let kind = Kind::from_byte(body[0])?;
    let mut id = [0; 8];
    id.copy_from_slice(&body[1..FIXED]);
    Some(Record {
        kind,
        id: u64::from_le_bytes(id),
        payload: &body[FIXED..],
        at,
        len: HEADER + body_len,
    })
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(bytes);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for (kind, id, payload) in records {
            encode(&mut out, *kind, *id, payload);
        }
        out
    }

    #[test]
    fn records_read_back_as_written() {
        let bytes = segment(&[(Kind::Admit, 7, b"hello"), (Kind::End, 7, b"")]);
        let (records, good) = parse(&bytes, 1 << 20);
        assert_eq!(good, bytes.len());
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[0].kind, records[0].id, records[0].payload),
            (Kind::Admit, 7, &b"hello"[..])
        );
        assert_eq!((records[1].kind, records[1].id), (Kind::End, 7));
        assert_eq!(records[1].at, records[0].at + records[0].len);
    }

    #[test]
    fn a_tail_cut_at_every_offset_keeps_everything_before_it() {
        let bytes = segment(&[(Kind::Admit, 1, b"first"), (Kind::Admit, 2, b"second job")]);
        let (whole, _) = parse(&bytes, 1 << 20);
        let last = whole[1];
        for cut in last.at..bytes.len() {
            let (records, good) = parse(&bytes[..cut], 1 << 20);
            assert_eq!(records.len(), 1, "cut at {cut}");
            assert_eq!(good, last.at, "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_in_a_record_stops_there() {
        let bytes = segment(&[
            (Kind::Admit, 1, b"a"),
            (Kind::Admit, 2, b"bb"),
            (Kind::End, 1, b""),
        ]);
        let (whole, _) = parse(&bytes, 1 << 20);
        let second = whole[1];
        for at in second.at..second.at + second.len {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[at] ^= 1 << bit;
                let (records, good) = parse(&bad, 1 << 20);
                assert_eq!(good, second.at, "byte {at} bit {bit}");
                assert_eq!(records.len(), 1);
            }
        }
    }

    #[test]
    fn zeros_foreign_files_and_huge_lengths_are_not_records() {
        let mut zeros = MAGIC.to_vec();
        zeros.extend_from_slice(&[0; 64]);
        assert_eq!(parse(&zeros, 1 << 20).1, MAGIC.len());
        assert_eq!(parse(b"not a journal", 1 << 20), (vec![], 0));
        let big = segment(&[(Kind::Admit, 1, &[7; 100])]);
        assert_eq!(
            parse(&big, 50).1,
            MAGIC.len(),
            "a body above the cap is corrupt"
        );
    }
}
