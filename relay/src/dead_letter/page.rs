//! A page of dead-letter lines, oldest first: the rotated files (`FILE.1`,
//! `FILE.2`, … lowest first) then the live one, from a cursor. The cursor
//! names a file by its inode (a rotation renames the live file, keeping its
//! inode, so a cursor stays good across one) and a byte offset in it, so a
//! reader that comes back later goes on where it stopped; a cursor whose
//! file was moved away starts again at the oldest file there is. A line
//! not yet ended with its newline (being written) is left for the next
//! page.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::rotated::{dir_of, numbers, path_of};

/// The most bytes of lines one page holds (at least one line).
const PAGE_BYTES: usize = 4 << 20;

/// One dead-letter line as the admin API shows it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub(crate) struct DeadLetter {
    /// Why it was dead-lettered: `failed`, `expired`, `evicted`, `overflow`, `shutdown`, ….
    pub reason: String,
    /// The webhook's id (absent if it was never tried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its destination.
    pub destination: String,
    /// Attempts made.
    pub attempts: u32,
    /// The receiver's last status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u32>,
    /// Why no request was sent (the address guard's refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tenant that sent it.
    #[serde(default)]
    pub tenant: Option<String>,
    /// An event's copy: the event's type (its id is the event's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Its content type.
    #[serde(default)]
    pub content_type: Option<String>,
    /// When the relay received it, ms since the Unix epoch.
    pub received_unix_ms: u64,
    /// Its body, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Its body in base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

/// A place in the dead-letter files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    inode: u64,
    offset: u64,
}

/// A cursor that does not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadCursor;

impl Cursor {
    /// Its opaque text.
    pub(crate) fn text(self) -> String {
        let raw = format!("{}:{}", self.inode, self.offset);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// Reads [`text`](Self::text)'s output back.
    pub(crate) fn parse(text: &str) -> Result<Cursor, BadCursor> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| BadCursor)?;
        let raw = std::str::from_utf8(&raw).map_err(|_| BadCursor)?;
        let (inode, offset) = raw.split_once(':').ok_or(BadCursor)?;
        Ok(Cursor {
            inode: inode.parse().map_err(|_| BadCursor)?,
            offset: offset.parse().map_err(|_| BadCursor)?,
        })
    }
}

/// A page.
pub(crate) struct Page {
    /// The lines, oldest first.
    pub lines: Vec<DeadLetter>,
    /// Where the next page starts (`None`: no file yet).
    pub next: Option<Cursor>,
    /// Whether the page stopped at its limit (more may follow at once).
    pub more: bool,
}

/// The dead-letter files of `live`, oldest first, that exist now.
fn files(live: &Path) -> std::io::Result<Vec<PathBuf>> {
    let numbers = match dir_of(live).exists() {
        true => numbers(live)?,
        false => Vec::new(),
    };
    let mut all: Vec<PathBuf> = numbers.into_iter().map(|n| path_of(live, n)).collect();
    all.push(live.to_path_buf());
    Ok(all.into_iter().filter(|p| p.is_file()).collect())
}

/// Up to `limit` lines of `destination` (all when `None`) after `from`;
/// a cursor that is not at a line's start (the relay never gives one) is
/// an `InvalidInput` error.
pub(crate) fn read(
    live: &Path,
    from: Option<Cursor>,
    destination: Option<&str>,
    limit: usize,
) -> std::io::Result<Page> {
    let mut found: Vec<(PathBuf, u64)> = Vec::new();
    for path in files(live)? {
        // A file moved away since the listing is skipped.
        if let Ok(meta) = std::fs::metadata(&path) {
            found.push((path, meta.ino()));
        }
    }
    // Start at the cursor's file and offset, or at the oldest file.
    let (start, mut offset) = match from {
        Some(c) => match found.iter().position(|(_, ino)| *ino == c.inode) {
            Some(i) => (i, c.offset),
            None => (0, 0),
        },
        None => (0, 0),
    };
    let mut page = Page {
        lines: Vec::new(),
        next: None,
        more: false,
    };
    let mut bytes = 0usize;
    // The page holds all it may: a line that follows says there is more.
    let mut full = limit == 0;
    for (path, inode) in found.iter().skip(start) {
        let file = match crate::util::private::read(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut reader = BufReader::new(file);
        let len = reader.get_ref().metadata()?.len();
        if offset > len {
            // Past the file's end: never given (a file cut short in place
            // is read again from a cursor of its new length).
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a cursor past the file's end",
            ));
        }
        if offset > 0 {
            // A cursor the relay gave is at a line's start: after a newline
            // (one past the file's end reads nothing, as before).
            reader.seek(SeekFrom::Start(offset - 1))?;
            let mut before = [0u8; 1];
            std::io::Read::read_exact(&mut reader, &mut before)?;
            if before[0] != b'\n' {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a cursor inside a line",
                ));
            }
        }
        reader.seek(SeekFrom::Start(offset))?;
        let mut line = Vec::new();
        loop {
            page.next = Some(Cursor {
                inode: *inode,
                offset,
            });
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                break; // the end, or a line still being written
            }
            let Ok(letter) = serde_json::from_slice::<DeadLetter>(&line) else {
                offset += n as u64;
                continue; // not a dead-letter line: skipped, as redrive does
            };
            if destination.is_some_and(|d| d != letter.destination) {
                offset += n as u64;
                continue;
            }
            if full {
                // One more follows: the next page starts at it.
                page.more = true;
                return Ok(page);
            }
            offset += n as u64;
            bytes += n;
            page.lines.push(letter);
            full = page.lines.len() >= limit || bytes >= PAGE_BYTES;
        }
        offset = 0;
    }
    Ok(page)
}

/// Which of the copies `wanted` (id, destination) have a line in the live
/// file `live` already: a restart asks before writing the letters of
/// copies its events store still awaited (the relay stopped between a
/// letter's line and the store's note of it). A file that cannot be read
/// has none.
pub(crate) fn written(
    live: &Path,
    wanted: &std::collections::HashSet<(String, String)>,
) -> std::collections::HashSet<(String, String)> {
    /// The fields a line is looked up by.
    #[derive(Deserialize)]
    struct Named {
        id: Option<String>,
        destination: String,
    }
    let mut found = std::collections::HashSet::new();
    let Ok(file) = crate::util::private::read(live) else {
        return found;
    };
    for line in BufReader::new(file).split(b'\n') {
        let Ok(line) = line else { break };
        if let Ok(Named {
            id: Some(id),
            destination,
        }) = serde_json::from_slice::<Named>(&line)
        {
            let copy = (id, destination);
            if wanted.contains(&copy) {
                found.insert(copy);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: u32, dest: &str) -> String {
        format!(
            "{{\"reason\":\"failed\",\"id\":\"{n}\",\"destination\":\"{dest}\",\"attempts\":1,\"tenant\":null,\"content_type\":null,\"received_unix_ms\":1,\"body\":\"x\"}}\n"
        )
    }

    #[test]
    fn written_finds_the_copies_that_have_a_line() {
        let dir = std::env::temp_dir().join(format!("dripfeed-written-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("dl.jsonl");
        std::fs::write(&live, line(1, "a") + &line(2, "b") + "{\"partial\":").unwrap();
        let copy = |id: &str, d: &str| (id.to_owned(), d.to_owned());
        let wanted = [copy("1", "a"), copy("2", "a"), copy("3", "b")]
            .into_iter()
            .collect();
        let found = written(&live, &wanted);
        assert_eq!(found, [copy("1", "a")].into_iter().collect());
        assert!(written(&dir.join("none.jsonl"), &wanted).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pages_go_through_the_rotated_files_then_the_live_one() {
        let dir = std::env::temp_dir().join(format!("dripfeed-page-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join("dl.jsonl");
        std::fs::write(path_of(&live, 1), line(1, "a") + &line(2, "b")).unwrap();
        std::fs::write(&live, line(3, "a") + &line(4, "a") + "{\"partial\":").unwrap();
        let first = read(&live, None, None, 3).unwrap();
        let ids: Vec<_> = first.lines.iter().map(|l| l.id.clone().unwrap()).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        assert!(first.more);
        let next = Cursor::parse(&first.next.unwrap().text()).unwrap();
        // A cursor one byte into a line is not one the relay gave.
        let inside = Cursor {
            offset: next.offset + 1,
            ..next
        };
        let err = read(&live, Some(inside), None, 3).err().expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        // Nor one past the file's end (it would hide the lines to come).
        let past = Cursor {
            offset: 1_000_000_000,
            ..next
        };
        let err = read(&live, Some(past), None, 3).err().expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let second = read(&live, Some(next), None, 3).unwrap();
        assert_eq!(second.lines.len(), 1);
        assert!(!second.more, "the partial line waits");
        let only_a = read(&live, None, Some("a"), 10).unwrap();
        assert_eq!(only_a.lines.len(), 3);
        // A page that ends on the last line says there is no more.
        let all = read(&live, None, None, 4).unwrap();
        assert_eq!((all.lines.len(), all.more), (4, false));
        let exactly_a = read(&live, None, Some("a"), 3).unwrap();
        assert_eq!((exactly_a.lines.len(), exactly_a.more), (3, false));
        let then_a = read(&live, None, Some("a"), 2).unwrap();
        assert_eq!((then_a.lines.len(), then_a.more), (2, true));
        let rest = read(&live, then_a.next, Some("a"), 2).unwrap();
        let ids: Vec<_> = rest.lines.iter().map(|l| l.id.clone().unwrap()).collect();
        assert_eq!((ids, rest.more), (vec!["4".to_owned()], false));
        assert!(Cursor::parse("not a cursor").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
