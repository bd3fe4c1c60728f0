//! The local engine's dead letters: the dead-letter files paged for the
//! admin API, and redriven, by the API or by `--redrive FILE`. A letter
//! goes back only to the destination it came from (a line that names none,
//! from an older relay, to `default` if that is configured); one whose
//! destination is gone stays where it is (the API says so per letter,
//! `--redrive` writes it to `FILE.rest`). Both ways mark what they re-admit
//! in one record ([`crate::dead_letter::marks`]), so a letter is redriven
//! once, whichever way. Files are read off the async runtime.

use std::path::Path;

use super::Local;
use crate::dead_letter::marks::{self, Marks};
use crate::dead_letter::page::{self, Cursor};
use crate::dead_letter::redrive::{self as lines, Rest, Route};
use crate::queue::contract::{Kept, LetterError, LetterPage, LetterQuery, Redrive, Redriven};

/// A page of the dead-letter files of `live`.
pub(crate) async fn page(live: &Path, q: LetterQuery) -> Result<LetterPage, LetterError> {
    let cursor = match q.cursor.as_deref().map(Cursor::parse) {
        Some(Err(_)) => return Err(LetterError::BadCursor),
        Some(Ok(c)) => Some(c),
        None => None,
    };
    let live = live.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        page::read(&live, cursor, q.destination.as_deref(), q.limit)
    })
    .await;
    match read {
        Ok(Ok(p)) => Ok(LetterPage {
            lines: p.lines,
            next: p.next.map(Cursor::text),
            more: p.more,
        }),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidInput => Err(LetterError::BadCursor),
        Ok(Err(e)) => Err(LetterError::Unreadable(format!(
            "the dead-letter files cannot be read: {e}"
        ))),
        Err(_) => Err(LetterError::Unreadable(
            "reading the dead-letter files failed".to_owned(),
        )),
    }
}

/// A line's id and destination, all a redrive matches on.
#[derive(serde::Deserialize)]
struct Probe {
    id: Option<String>,
    destination: Option<String>,
}

fn unreadable(e: impl std::fmt::Display) -> LetterError {
    LetterError::Unreadable(format!(
        "the dead-letter files cannot be read or marked: {e}"
    ))
}

/// The API's redrive: up to `most` unmarked letters `what` names, each to
/// the destination it came from, under its id.
pub(crate) async fn redrive(
    local: &Local,
    what: Redrive,
    most: usize,
) -> Result<Redriven, LetterError> {
    let wanted: Box<dyn Fn(&Probe) -> bool + Send> = match what {
        Redrive::Ids(ids) => Box::new(move |p| p.id.as_ref().is_some_and(|id| ids.contains(id))),
        Redrive::Destination(name) => {
            Box::new(move |p| p.destination.as_deref() == Some(name.as_str()))
        }
    };
    let live = local.dead_letter_file.clone();
    let picked = tokio::task::spawn_blocking(move || {
        let done = marks::load(&live)?;
        marks::pick(&live, &done, most, |line| {
            serde_json::from_str::<Probe>(line).is_ok_and(|p| wanted(&p))
        })
    })
    .await;
    let (picked, more) = match picked {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(unreadable(e)),
        Err(e) => return Err(unreadable(e)),
    };
    let targets = lines::Targets::new(&local.catalog);
    let mut done = Redriven {
        more,
        ..Redriven::default()
    };
    let (mut readmitted, mut settled) = (Vec::new(), Vec::new());
    for line in picked {
        let Some(letter) = lines::parse(&line) else {
            done.kept.push(Kept {
                id: None,
                destination: None,
                reason: "unreadable",
            });
            continue;
        };
        let (id, from) = (letter.id.clone(), letter.destination.clone());
        match local.redrive_letter(letter, &targets).await {
            LetterEnd::Queued => readmitted.push(line),
            LetterEnd::Settled => settled.push(line),
            LetterEnd::Refused => done.refused += 1,
            LetterEnd::Gone => done.kept.push(Kept {
                id,
                destination: from,
                reason: "destination-gone",
            }),
        }
    }
    done.readmitted = readmitted.len() as u64;
    done.settled = settled.len() as u64;
    let live = local.dead_letter_file.clone();
    let marked = tokio::task::spawn_blocking(move || {
        marks::add(&live, readmitted.iter().chain(&settled).map(String::as_str))
    })
    .await;
    match marked {
        Ok(Ok(())) => Ok(done),
        Ok(Err(e)) => Err(unreadable(e)),
        Err(e) => Err(unreadable(e)),
    }
}

/// What became of one dead letter redriven (a webhook, or an event's
/// copy through the events store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LetterEnd {
    /// Queued to its destination again.
    Queued,
    /// An event's copy sent again since it was dead-lettered (a recover, a
    /// resend), or on its way: nothing sent, the letter done with.
    Settled,
    /// Not taken now (a full queue, the byte budget, a store that cannot
    /// write): the letter stays, for a later redrive.
    Refused,
    /// Never to be taken here: its destination is gone (or the line names
    /// none), or the endpoint of that name is another application's now
    /// (not its history to send). The letter stays, kept as
    /// `destination-gone`.
    Gone,
}

impl Local {
    /// Redrives one dead letter, the same whichever way (the API, `--redrive
    /// FILE`): to the destination it came from, under its id; an event's
    /// copy goes back as one, through the events store (its history, its
    /// headers), while the store still holds its event, and never to an
    /// application made again under a deleted one's name.
    async fn redrive_letter(
        &self,
        letter: lines::Letter,
        targets: &lines::Targets<'_>,
    ) -> LetterEnd {
        let from = letter.destination.clone();
        let name = match lines::route(from.as_deref(), targets) {
            Route::To(name) => name,
            Route::Gone | Route::Unnamed => return LetterEnd::Gone,
        };
        let seq = match (
            &letter.event_type,
            letter.id.as_deref().map(str::parse::<u64>),
        ) {
            (Some(_), Some(Ok(seq))) => Some(seq),
            _ => None,
        };
        if let Some(seq) = seq
            && !self.catalog.takes_event(name, None, seq)
        {
            return LetterEnd::Gone;
        }
        let copy = match seq {
            Some(seq) => self.redrive_copy(seq, name).await,
            None => None,
        };
        match copy {
            Some(end) => end,
            None => {
                let Some(job) = lines::job_of(letter, &self.budget) else {
                    return LetterEnd::Refused;
                };
                let admitted = self
                    .set
                    .submit_timeout(name, job, std::time::Duration::ZERO)
                    .await;
                match admitted {
                    Ok(_) => LetterEnd::Queued,
                    Err(_) => LetterEnd::Refused,
                }
            }
        }
    }
}

/// What `--redrive FILE` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct FileRedrive {
    /// Admitted again.
    pub readmitted: u64,
    /// Event copies sent again since they were dead-lettered (a resend, a
    /// recover) or on their way: nothing sent, the line done with.
    pub settled: u64,
    /// Refused: a full queue or byte budget.
    pub refused: u64,
    /// Lines whose destination is gone (or that name none).
    pub gone: u64,
    /// Lines that do not parse.
    pub unreadable: u64,
    /// Lines redriven before (by the API or an earlier `--redrive`):
    /// skipped.
    pub already: u64,
    /// Lines written to `FILE.rest`: every refused, gone and unreadable one.
    pub kept: u64,
}

impl Local {
    /// `--redrive FILE`: every line of `path` not redriven before goes back
    /// to the destination it came from, under its id (an event's copy as
    /// the copy it is, as the API's redrive sends it); the rest go to
    /// `FILE.rest`. Marked in this relay's record of redriven letters (its
    /// `dead_letter_file`'s), as the admin API's redrive is.
    pub(crate) async fn redrive_file(&self, path: &Path) -> Result<FileRedrive, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let done_before: Marks = marks::load(&self.dead_letter_file).map_err(|e| {
            let file = marks::marks_of(&self.dead_letter_file);
            format!("{}: {e}", file.display())
        })?;
        let targets = lines::Targets::new(&self.catalog);
        let mut done = FileRedrive::default();
        let mut rest = Rest::of(path);
        let (mut readmitted, mut settled): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if done_before.contains(line, None) {
                done.already += 1;
                continue;
            }
            let Some(letter) = lines::parse(line) else {
                done.unreadable += 1;
                rest.keep(line)?;
                continue;
            };
            match self.redrive_letter(letter, &targets).await {
                LetterEnd::Queued => readmitted.push(line),
                LetterEnd::Settled => settled.push(line),
                LetterEnd::Refused => {
                    done.refused += 1;
                    rest.keep(line)?;
                }
                LetterEnd::Gone => {
                    done.gone += 1;
                    rest.keep(line)?;
                }
            }
        }
        done.readmitted = readmitted.len() as u64;
        done.settled = settled.len() as u64;
        let lines = readmitted.into_iter().chain(settled);
        marks::add(&self.dead_letter_file, lines).map_err(|e| {
            let file = marks::marks_of(&self.dead_letter_file);
            format!("{}: {e}", file.display())
        })?;
        done.kept = rest.close()?;
        Ok(done)
    }
}
