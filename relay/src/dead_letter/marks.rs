//! Which dead-letter lines the admin API has redriven: `FILE.redriven`
//! beside the live dead-letter file, one line per redriven line naming its
//! place (the file's inode and the line's byte offset), appended and
//! fsynced before the redrive answers, so a line is never redriven twice
//! (a line without an id included). A rotated file keeps its inode, so its
//! marks hold across a rotation.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::rotated::{dir_of, numbers, path_of};

/// A line's place: its file's inode and its byte offset there.
pub type Place = (u64, u64);

/// `FILE.redriven` for the live file `live`.
pub fn marks_of(live: &Path) -> PathBuf {
    let mut name = live.as_os_str().to_owned();
    name.push(".redriven");
    PathBuf::from(name)
}

/// The places already redriven.
pub fn load(live: &Path) -> std::io::Result<HashSet<Place>> {
    let file = match std::fs::File::open(marks_of(live)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e),
    };
    let mut out = HashSet::new();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Some((ino, off)) = line.split_once(':')
            && let (Ok(ino), Ok(off)) = (ino.parse(), off.parse())
        {
            out.insert((ino, off));
        }
    }
    Ok(out)
}

/// Notes `places` as redriven, synced.
pub fn add(live: &Path, places: &[Place]) -> std::io::Result<()> {
    if places.is_empty() {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(marks_of(live))?;
    let text: String = places.iter().map(|(i, o)| format!("{i}:{o}\n")).collect();
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// Up to `max` lines that `wanted` takes and that are not in `done`, with
/// their places, oldest first; and whether more such lines remain.
pub fn pick(
    live: &Path,
    done: &HashSet<Place>,
    max: usize,
    wanted: impl Fn(&str) -> bool,
) -> std::io::Result<(Vec<(Place, String)>, bool)> {
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
        let file = match std::fs::File::open(&path) {
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
            if done.contains(&place) || !wanted(text) {
                continue;
            }
            if out.len() == max {
                return Ok((out, true));
            }
            out.push((place, text.trim_end().to_owned()));
        }
    }
    Ok((out, false))
}
