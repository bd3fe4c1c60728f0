//! The active segment is zeroed ahead of its records, as PostgreSQL fills
//! a WAL segment before it writes in it.
//!
//! A record appended at a file's end changes the file's size, so every
//! `fdatasync` after it also writes the inode (on ext4 a second write, with
//! its own block request). Records written over zeros already on disk leave
//! the size alone: the `fdatasync` writes their pages and nothing else. The
//! writer therefore extends the active segment by a chunk of zeros at a time
//! ([`chunk`]: a sixteenth of a segment, at least 4 KiB, at most 1 MiB),
//! made durable by the same `fdatasync` as the records that needed it, and
//! writes records by position inside it.
//!
//! Only the active segment has such a tail: it is cut when the segment
//! rolls and when the journal closes. After a crash, recovery finds the
//! tail all zeros and cuts it without counting it as torn (see
//! [`unwritten_tail`]); a record torn inside it is still torn. The zeros
//! are not counted in the journal's bytes: at most one chunk beyond them.

use std::fs::File;
use std::io;

/// How far ahead the active segment is zeroed, for segments of
/// `segment_bytes`.
pub(crate) fn chunk(segment_bytes: u64) -> u64 {
    (segment_bytes / 16).clamp(4096, 1 << 20)
}

/// The zeroed length to extend to so that records ending at `end` fit,
/// from `zeroed` now: `zeroed` itself if they fit, otherwise at least a
/// `chunk` further, on a 4 KiB boundary.
pub(crate) fn target(zeroed: u64, end: u64, chunk: u64) -> u64 {
    if end <= zeroed {
        return zeroed;
    }
    end.max(zeroed.saturating_add(chunk)).next_multiple_of(4096)
}

/// Whether the bytes after a segment's last good record are only the
/// zeros written ahead of it (nothing torn).
pub(crate) fn unwritten_tail(tail: &[u8]) -> bool {
    tail.iter().all(|&b| b == 0)
}

/// Zeros written from `from` to `to`.
pub(crate) fn zero(file: &File, from: u64, to: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut at = from;
    while at < to {
        let n = usize::try_from(to - at).map_or(ZEROS.len(), |n| n.min(ZEROS.len()));
        write_at(file, &ZEROS[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// `bytes` written at offset `at` (the file's cursor is not used).
#[cfg(unix)]
pub(crate) fn write_at(file: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, at)
}

/// `bytes` written at offset `at`.
#[cfg(not(unix))]
pub(crate) fn write_at(file: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(at))?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zeroed_end_moves_a_chunk_at_a_time_on_page_boundaries() {
        let c = chunk(16 << 20);
        assert_eq!(c, 1 << 20);
        assert_eq!(chunk(4096), 4096, "small segments: a page");
        assert_eq!(chunk(1 << 40), 1 << 20, "at most 1 MiB");
        assert_eq!(target(48, 48, c), 48, "nothing to write");
        assert_eq!(target(4096, 4000, c), 4096, "fits");
        assert_eq!(
            target(48, 200, c),
            (1 << 20) + 4096,
            "a chunk past, rounded up"
        );
        assert_eq!(
            target(48, 3 << 20, c),
            3 << 20,
            "a batch bigger than a chunk"
        );
        assert_eq!(target(48, (3 << 20) + 1, c), (3 << 20) + 4096);
    }

    #[test]
    fn only_zeros_are_unwritten() {
        assert!(unwritten_tail(&[]));
        assert!(unwritten_tail(&[0; 100]));
        assert!(!unwritten_tail(&[0, 0, 1, 0]));
    }

    #[test]
    fn records_land_by_position_over_the_zeros() {
        let dir = std::env::temp_dir().join(format!("dripfeed-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seg");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        zero(&file, 0, 200_000).unwrap();
        write_at(&file, b"abc", 10).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 200_000);
        assert_eq!(&bytes[10..13], b"abc");
        assert!(unwritten_tail(&bytes[13..]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
