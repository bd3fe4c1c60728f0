//! The journal's record format, as pure functions over bytes.
//!
//! A segment file starts with an 8-byte magic that names its format, then
//! records back to back. Segments are written in the second format:
//!
//! ```text
//! magic "dripjnl\x02"
//! sync: FE D7 1F 5A | crc: u32 LE | len: u32 LE | kind: u8 | id: u64 LE | payload: len - 9 bytes
//! ```
//!
//! `len` counts the body (kind, id, payload) and `crc` is the CRC-32 (IEEE)
//! of `len` and the body, so a record cut short by a crash, a garbled
//! length or garbled bytes all fail the check. The sync word starts every
//! record, so a reader that meets a bad record can look for the next one
//! ([`scan`](super::scan)) instead of giving up on the rest of the file.
//!
//! The first format (magic `dripjnl\x01`, written by dripfeed before the
//! sync word) is still read:
//!
//! ```text
//! len: u32 LE | crc: u32 LE | kind: u8 | id: u64 LE | payload: len - 9 bytes
//! ```
//!
//! where `crc` covers the body only.

/// The first bytes of every segment written now.
pub(crate) const MAGIC: &[u8; 8] = b"dripjnl\x02";
/// The first bytes of a segment in the first format (read, never written).
pub(crate) const MAGIC_V1: &[u8; 8] = b"dripjnl\x01";
/// The word every record of the second format starts with. `0xFE` never
/// occurs in UTF-8, so text payloads cannot hold it.
pub(crate) const SYNC: [u8; 4] = [0xFE, 0xD7, 0x1F, 0x5A];
/// Bytes before a record's body: sync, crc and len.
pub(crate) const HEADER: usize = 12;
/// A body's fixed part: kind and id.
const FIXED: usize = 9;
/// A record's bytes beyond its payload.
pub(crate) const OVERHEAD: usize = HEADER + FIXED;
/// The first format's bytes before a body: len and crc.
const HEADER_V1: usize = 8;

/// A segment's format, named by its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `dripjnl\x01`: no sync word, the checksum covers the body.
    V1,
    /// `dripjnl\x02`: sync word, the checksum covers length and body.
    V2,
}

impl Format {
    /// The format a segment's first bytes name, if any.
    pub(crate) fn of(bytes: &[u8]) -> Option<Format> {
        match bytes.get(..MAGIC.len())? {
            m if m == MAGIC => Some(Format::V2),
            m if m == MAGIC_V1 => Some(Format::V1),
            _ => None,
        }
    }
}

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
    out.extend_from_slice(&SYNC);
    out.extend_from_slice(&[0; 8]); // crc, len
    out.push(kind as u8);
    out.extend_from_slice(&id.to_le_bytes());
    write(out);
    let body = out.len() - start - HEADER;
    let len = u32::try_from(body).unwrap_or(u32::MAX);
    out[start + 8..start + HEADER].copy_from_slice(&len.to_le_bytes());
    let crc = crc32(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    HEADER + body
}

/// The record of `format` starting at `at`, if a whole and valid one does
/// (length within `max_body` of payload, known kind, checksum right).
pub(crate) fn read_at(
    bytes: &[u8],
    at: usize,
    max_body: usize,
    format: Format,
) -> Option<Record<'_>> {
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
    format: Format,
    budget: &mut usize,
) -> Option<Record<'a>> {
    let (header, body_len, crc, body_at) = match format {
        Format::V2 => {
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
    if !(FIXED..=max_body.saturating_add(FIXED)).contains(&body_len) {
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
        Format::V2 => crc32_of(&[&header[8..12], body]),
        Format::V1 => crc32(body),
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

fn crc32(bytes: &[u8]) -> u32 {
    crc32_of(&[bytes])
}

fn crc32_of(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// Test helpers: a segment's bytes in either format.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// A second-format segment holding `records`.
    pub(crate) fn segment(records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for (kind, id, payload) in records {
            encode(&mut out, *kind, *id, payload);
        }
        out
    }

    /// A first-format segment holding `records`, as dripfeed wrote them
    /// before the sync word.
    pub(crate) fn segment_v1(records: &[(Kind, u64, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC_V1.to_vec();
        for (kind, id, payload) in records {
            let mut body = vec![*kind as u8];
            body.extend_from_slice(&id.to_le_bytes());
            body.extend_from_slice(payload);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&crc32(&body).to_le_bytes());
            out.extend_from_slice(&body);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::build::{segment, segment_v1};
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_in_both_formats() {
        for (bytes, format) in [
            (segment(&[(Kind::Admit, 7, b"hello")]), Format::V2),
            (segment_v1(&[(Kind::Admit, 7, b"hello")]), Format::V1),
        ] {
            assert_eq!(Format::of(&bytes), Some(format));
            let r = read_at(&bytes, MAGIC.len(), 1 << 20, format).expect("a record");
            assert_eq!((r.kind, r.id, r.payload), (Kind::Admit, 7, &b"hello"[..]));
            assert_eq!(r.at + r.len, bytes.len());
        }
        let bytes = segment(&[(Kind::End, 9, b"")]);
        assert_eq!(
            bytes.len(),
            MAGIC.len() + OVERHEAD,
            "the sync word adds 4 bytes"
        );
    }

    #[test]
    fn the_checksum_covers_the_length() {
        // A length garbled so it still fits inside the file is caught.
        let mut bytes = segment(&[(Kind::Admit, 1, b"abcdef"), (Kind::End, 1, b"")]);
        let at = MAGIC.len();
        bytes[at + 8] -= 2; // body two bytes shorter
        assert_eq!(read_at(&bytes, at, 1 << 20, Format::V2), None);
    }

    #[test]
    fn sync_kind_and_bounds_are_checked_before_the_checksum() {
        let bytes = segment(&[(Kind::Admit, 1, &[7; 100])]);
        let at = MAGIC.len();
        assert!(read_at(&bytes, at, 100, Format::V2).is_some());
        assert_eq!(read_at(&bytes, at, 50, Format::V2), None, "above the cap");
        assert_eq!(
            read_at(&bytes, at + 1, 1 << 20, Format::V2),
            None,
            "no sync"
        );
        let mut kind = bytes.clone();
        kind[at + HEADER] = 3;
        assert_eq!(
            read_at(&kind, at, 1 << 20, Format::V2),
            None,
            "unknown kind"
        );
        assert_eq!(read_at(&bytes, bytes.len(), 1 << 20, Format::V2), None);
        assert_eq!(read_at(&bytes, usize::MAX, 1 << 20, Format::V2), None);
        assert_eq!(Format::of(b"not a journal"), None);
        assert_eq!(Format::of(b"dripjnl"), None);
    }
}
