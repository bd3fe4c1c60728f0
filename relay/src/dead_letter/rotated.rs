//! The rotated dead-letter files beside the live one: `FILE.1`, `FILE.2`,
//! … numbered in the order they filled (the oldest lowest). A rotated file
//! is never renamed again, overwritten or deleted by the relay; the
//! operator moves one away (to redrive it) to make room.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The rotated files the relay knows of: number → lines.
#[derive(Debug, Default)]
pub(super) struct Rotated {
    files: BTreeMap<u64, u64>,
}

/// The rotated file numbered `n` beside `live`.
pub(super) fn path_of(live: &Path, n: u64) -> PathBuf {
    let mut name = live.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The directory holding `live` (`.` for a bare file name).
pub(super) fn dir_of(live: &Path) -> &Path {
    match live.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Newlines in the file at `path`, and whether it ends with one (or is
/// empty; anything but a regular file counts as empty). Read in blocks: a
/// large file costs time, not memory.
pub(super) fn count_lines(path: &Path) -> std::io::Result<(u64, bool)> {
    let mut file = crate::util::private::read(path)?;
    if !file.metadata()?.is_file() {
        return Ok((0, true));
    }
    let mut buf = vec![0u8; 64 * 1024];
    let (mut lines, mut whole) = (0u64, true);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((lines, whole));
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        whole = buf[n - 1] == b'\n';
    }
}

/// The numbers of the rotated files of `live` there are now, lowest
/// (oldest) first.
pub(super) fn numbers(live: &Path) -> std::io::Result<Vec<u64>> {
    let Some(name) = live.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir_of(live))? {
        let file_name = entry?.file_name();
        if let Some(n) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
        {
            found.push(n);
        }
    }
    found.sort_unstable();
    Ok(found)
}

impl Rotated {
    /// Finds the rotated files of `live` as they are now: those moved away
    /// are forgotten, new ones counted.
    pub(super) fn scan(&mut self, live: &Path) -> std::io::Result<()> {
        let mut found = BTreeMap::new();
        for n in numbers(live)? {
            let lines = match self.files.get(&n) {
                Some(&known) => known,
                None => count_lines(&path_of(live, n))?.0,
            };
            found.insert(n, lines);
        }
        self.files = found;
        Ok(())
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.files.len()
    }

    /// The number the next rotated file takes: one above the highest.
    pub(super) fn next(&self) -> u64 {
        self.files
            .keys()
            .next_back()
            .map_or(1, |n| n.saturating_add(1))
    }

    /// Notes a file rotated as number `n` with `lines` lines.
    pub(super) fn add(&mut self, n: u64, lines: u64) {
        self.files.insert(n, lines);
    }

    /// Lines in them.
    pub(super) fn lines(&self) -> u64 {
        self.files.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_files_are_numbered_beside_the_live_one_oldest_lowest() {
        let dir = std::env::temp_dir().join(format!("dripfeed-rotated-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("dl.jsonl");
        std::fs::write(&live, b"a\n").unwrap();
        std::fs::write(path_of(&live, 1), b"a\nb\n").unwrap();
        std::fs::write(path_of(&live, 3), b"c\n").unwrap();
        std::fs::write(dir.join("dl.jsonl.rest"), b"x\n").unwrap();
        std::fs::write(dir.join("dl.jsonl.2x"), b"x\n").unwrap();
        let mut r = Rotated::default();
        r.scan(&live).unwrap();
        assert_eq!((r.len(), r.next(), r.lines()), (2, 4, 3));
        std::fs::remove_file(path_of(&live, 3)).unwrap();
        r.scan(&live).unwrap();
        assert_eq!((r.len(), r.next(), r.lines()), (1, 2, 2));
        assert_eq!(dir_of(Path::new("dl.jsonl")), Path::new("."));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
