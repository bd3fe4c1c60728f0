//! Which dead-letter lines have been redriven: `FILE.redriven` beside the
//! live dead-letter file, one line per redriven line naming it by a hash of
//! its bytes (`h:` and 16 hex digits), appended and fsynced before the
//! redrive answers. The admin API's redrive and `--redrive FILE` share this
//! one record, so a line is redriven once whichever way, and whatever
//! became of its file: rotated, moved aside for `--redrive`, or copied.
//! (Marks an older relay wrote, `INODE:OFFSET`, still count for the line at
//! that place.)

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::rotated::{dir_of, numbers, path_of};

/// A line's place: its file's inode and its byte offset there.
pub(crate) type Place = (u64, u64);

/// The lines redriven so far.
#[derive(Debug, Default)]
pub(crate) struct Marks {
    /// By the hash of their bytes.
    hashes: HashSet<u64>,
    /// By their place (marks an older relay wrote).
    places: HashSet<Place>,
}

impl Marks {
    /// Whether `line` (at `place`, if known) was redriven.
    pub(crate) fn contains(&self, line: &str, place: Option<Place>) -> bool {
        self.hashes.contains(&hash(line)) || place.is_some_and(|p| self.places.contains(&p))
    }
}

/// The hash a line is marked by: FNV-1a over its bytes without the line
/// end, stable across processes and versions.
pub(crate) fn hash(line: &str) -> u64 {
    line.trim_end().bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `FILE.redriven` for the live file `live`.
pub(crate) fn marks_of(live: &Path) -> PathBuf {
    let mut name = live.as_os_str().to_owned();
    name.push(".redriven");
    PathBuf::from(name)
}

/// The lines already redriven.
pub(crate) fn load(live: &Path) -> std::io::Result<Marks> {
    let file = match crate::util::private::read(&marks_of(live)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Marks::default()),
        Err(e) => return Err(e),
    };
    let mut out = Marks::default();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Some(hex) = line.strip_prefix("h:") {
            if let Ok(h) = u64::from_str_radix(hex.trim(), 16) {
                out.hashes.insert(h);
            }
        } else if let Some((ino, off)) = line.split_once(':')
            && let (Ok(ino), Ok(off)) = (ino.parse(), off.parse())
        {
            out.places.insert((ino, off));
        }
    }
    Ok(out)
}

/// Notes `lines` as redriven, synced.
pub(crate) fn add<'a>(
    live: &Path,
    lines: impl IntoIterator<Item = &'a str>,
) -> std::io::Result<()> {
    let text: String = lines
        .into_iter()
        .map(|l| format!("h:{:016x}\n", hash(l)))
        .collect();
    if text.is_empty() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    let mut file = crate::util::private::open(&options, &marks_of(live))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// Up to `max` lines that `wanted` takes and that are not in `done`, oldest
/// first, across the rotated files and the live one; and whether more such
/// lines remain.
pub(crate) fn pick(
    live: &Path,
    done: &Marks,
    max: usize,
    wanted: impl Fn(&str) -> bool,
) -> std::io::Result<(Vec<String>, bool)> {
    let mut paths: Vec<PathBuf> = match dir_of(live).exists() {
        true => numbers(live)?
            .into_iter()
            .map(|n| path_of(live, n))
            .collect(),
        false => Vec::new(),
    };
    paths.push(live.to_path_buf());
    let mut out = Vec::new();
    for path in paths {
        let file = match crate::util::private::read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let inode = file.metadata()?.ino();
        let mut reader = BufReader::new(file);
        let (mut offset, mut line) = (0u64, Vec::new());
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            let place = (inode, offset);
            offset += n as u64;
            let Ok(text) = std::str::from_utf8(&line) else {
                continue;
            };
            if done.contains(text, Some(place)) || !wanted(text) {
                continue;
            }
            if out.len() == max {
                return Ok((out, true));
            }
            out.push(text.trim_end().to_owned());
        }
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_marked_by_its_bytes_wherever_it_is() {
        let dir = std::env::temp_dir().join(format!("dripfeed-marks-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("dl.jsonl");
        std::fs::write(&live, "{\"id\":\"1\"}\n{\"id\":\"2\"}\n").unwrap();
        let (lines, more) = pick(&live, &load(&live).unwrap(), 10, |_| true).unwrap();
        assert_eq!((lines.len(), more), (2, false));
        add(&live, lines[..1].iter().map(String::as_str)).unwrap();
        let marks = load(&live).unwrap();
        assert!(
            marks.contains("{\"id\":\"1\"}\n", None),
            "the line end is not part of it"
        );
        assert!(!marks.contains("{\"id\":\"2\"}", None));
        let (left, _) = pick(&live, &marks, 10, |_| true).unwrap();
        assert_eq!(left, ["{\"id\":\"2\"}"]);
        // An older relay's mark, by place, still counts.
        std::fs::write(
            marks_of(&live),
            format!("{}:{}\n", std::fs::metadata(&live).unwrap().ino(), 11),
        )
        .unwrap();
        let (left, _) = pick(&live, &load(&live).unwrap(), 10, |_| true).unwrap();
        assert_eq!(left, ["{\"id\":\"1\"}"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
