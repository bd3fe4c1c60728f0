//! The journal directory's secret key, and the segment header that holds it.
//!
//! Every record's checksum mixes in the key (see [`frame`](super::frame)),
//! so a client that sends a payload shaped like a record cannot make it
//! pass for one: it does not know the key. The key is drawn from the OS
//! when a directory gets its first keyed segment and reused after that
//! (recovery takes it from the newest segment that holds one), so every
//! segment of a directory carries the same key.
//!
//! A keyed segment's header, after its 8-byte magic, holds the key twice,
//! each copy followed by the CRC-32 of its 16 bytes:
//!
//! ```text
//! magic "dripjnl\x03" | key: 16 bytes | crc32(key): u32 LE | key: 16 bytes | crc32(key): u32 LE
//! ```
//!
//! A garbled byte in one copy costs nothing (the other is read, and the
//! segment is rewritten with a whole header); if both are garbled the
//! segment is read with the directory's key (from its other segments).

use std::hash::{BuildHasher, RandomState};
use std::io::Read;

/// The first bytes of every segment written now (the key follows).
pub(crate) const MAGIC: &[u8; 8] = b"dripjnl\x03";
/// The first bytes of a segment in the first format (read, never written).
pub(crate) const MAGIC_V1: &[u8; 8] = b"dripjnl\x01";

/// A key's length in bytes.
pub(crate) const KEY_LEN: usize = 16;
/// One copy of the key in a header: the key and its CRC-32.
const COPY: usize = KEY_LEN + 4;
/// A keyed segment's header: magic and two copies of the key.
pub(crate) const HEAD: usize = MAGIC.len() + 2 * COPY;

/// A journal directory's secret key, ready to start record checksums.
#[derive(Clone)]
pub(crate) struct Key {
    bytes: [u8; KEY_LEN],
    /// CRC-32's state after the key: each record's checksum goes on from
    /// a copy of it, so the key costs nothing per record.
    start: crc32fast::Hasher,
}

impl Key {
    /// The key made of `bytes`.
    pub(crate) fn new(bytes: [u8; KEY_LEN]) -> Key {
        let mut start = crc32fast::Hasher::new();
        start.update(&bytes);
        Key { bytes, start }
    }

    /// A fresh key from the OS: `/dev/urandom`, or where there is none,
    /// std's `RandomState` (whose keys the OS seeds) hashing the word's
    /// index.
    pub(crate) fn generate() -> Key {
        let mut bytes = [0; KEY_LEN];
        let urandom =
            std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if urandom.is_err() {
            for (i, word) in bytes.chunks_mut(8).enumerate() {
                let drawn = RandomState::new().hash_one(i).to_le_bytes();
                word.copy_from_slice(&drawn[..word.len()]);
            }
        }
        Key::new(bytes)
    }

    /// A checksum already holding the key: the record's bytes go on it.
    pub(crate) fn hasher(&self) -> crc32fast::Hasher {
        self.start.clone()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)") // a secret: never in a log
    }
}

/// A keyed segment's header holding `key`.
pub(crate) fn head(key: &Key) -> [u8; HEAD] {
    let mut out = [0; HEAD];
    out[..MAGIC.len()].copy_from_slice(MAGIC);
    let check = crc32fast::hash(&key.bytes).to_le_bytes();
    for copy in out[MAGIC.len()..].chunks_exact_mut(COPY) {
        copy[..KEY_LEN].copy_from_slice(&key.bytes);
        copy[KEY_LEN..].copy_from_slice(&check);
    }
    out
}

/// What a segment's first bytes say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Head {
    /// The first format (`dripjnl\x01`): no key, records from byte 8.
    V1,
    /// A keyed segment: its key (`None` when both copies are garbled) and
    /// its garbled copies' places, `(offset, length)`. Records from
    /// byte [`HEAD`].
    Keyed {
        key: Option<Key>,
        garbled: Vec<(usize, usize)>,
    },
}

impl Head {
    /// Where the segment's first record starts.
    pub(crate) fn records_at(&self) -> usize {
        match self {
            Head::V1 => MAGIC_V1.len(),
            Head::Keyed { .. } => HEAD,
        }
    }
}

/// The header `bytes` start with; `None` when they start with no journal
/// magic, or with a keyed one and too few bytes for the header.
pub(crate) fn read_head(bytes: &[u8]) -> Option<Head> {
    let magic = bytes.get(..MAGIC.len())?;
    if magic == MAGIC_V1 {
        return Some(Head::V1);
    }
    if magic != MAGIC {
        return None;
    }
    let copies = bytes.get(MAGIC.len()..HEAD)?;
    let mut key = None;
    let mut garbled = Vec::new();
    for (i, copy) in copies.chunks_exact(COPY).enumerate() {
        let (k, check) = copy.split_at(KEY_LEN);
        let mut bytes = [0; KEY_LEN];
        bytes.copy_from_slice(k);
        if crc32fast::hash(&bytes).to_le_bytes()[..] == *check {
            key.get_or_insert_with(|| Key::new(bytes));
        } else {
            garbled.push((MAGIC.len() + i * COPY, COPY));
        }
    }
    Some(Head::Keyed { key, garbled })
}

/// Whether `bytes` are a segment created and never written: shorter than
/// its header, and the start of one (a crash right at creation).
pub(crate) fn unwritten(bytes: &[u8]) -> bool {
    let starts = |magic: &[u8]| magic.starts_with(bytes) || bytes.starts_with(magic);
    (bytes.len() < MAGIC_V1.len() && starts(MAGIC_V1)) || (bytes.len() < HEAD && starts(MAGIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_its_key_even_with_one_copy_garbled() {
        let key = Key::new([7; KEY_LEN]);
        let h = head(&key);
        assert_eq!(&h[..8], b"dripjnl\x03");
        let clean = Head::Keyed {
            key: Some(key.clone()),
            garbled: vec![],
        };
        assert_eq!(read_head(&h), Some(clean));
        for at in MAGIC.len()..HEAD {
            let mut bad = h;
            bad[at] ^= 0x20;
            let first = at < MAGIC.len() + COPY;
            let place = if first {
                MAGIC.len()
            } else {
                MAGIC.len() + COPY
            };
            let want = Head::Keyed {
                key: Some(key.clone()),
                garbled: vec![(place, COPY)],
            };
            assert_eq!(read_head(&bad), Some(want), "byte {at}");
        }
        let mut both = h;
        both[MAGIC.len()] ^= 1;
        both[MAGIC.len() + COPY] ^= 1;
        let Some(Head::Keyed { key: None, garbled }) = read_head(&both) else {
            panic!("both copies garbled");
        };
        assert_eq!(garbled.len(), 2);
    }

    #[test]
    fn short_and_foreign_headers() {
        let h = head(&Key::new([1; KEY_LEN]));
        assert_eq!(read_head(&h[..HEAD - 1]), None, "a header cut short");
        assert_eq!(
            read_head(b"dripjnl\x02 an unkeyed draft, never released"),
            None
        );
        assert_eq!(read_head(b"not a journal at all"), None);
        assert_eq!(read_head(MAGIC_V1), Some(Head::V1));
        for cut in 0..HEAD {
            assert!(unwritten(&h[..cut]), "cut at {cut}");
        }
        assert!(!unwritten(&h), "a whole header");
        assert!(unwritten(&MAGIC_V1[..3]));
        assert!(!unwritten(b"dripjnl\x02"));
        assert!(!unwritten(b"other"));
    }

    #[test]
    fn keys_are_drawn_afresh_and_never_printed() {
        let (a, b) = (Key::generate(), Key::generate());
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Key(..)");
    }
}
