//! Where the relay keeps its files: one data directory holding the journal
//! (with the registry, the webhook statuses and the idempotency keys
//! beside it) and the dead letters, unless each is given on its own.
//!
//! The data directory is `data_dir`, else `$STATE_DIRECTORY` (what
//! systemd's `StateDirectory=` sets), else `./dripfeed-data`; every path is
//! made absolute against the working directory once, at start, so a log
//! line names the file an operator will find. A relay upgraded from the
//! old defaults (`./relay-journal`, `./dead-letter.jsonl`) never strands
//! what they hold: with no `data_dir` given it keeps using them, or, when
//! the new place holds data too, refuses to start naming both.
//!
//! [`resolve`] is pure: the working directory, the environment and
//! whether a path holds data are given to it ([`Places`]).

use std::path::{Path, PathBuf};

use super::settings::Settings;

/// The journal's directory under the data directory.
pub(crate) const JOURNAL: &str = "journal";
/// The dead-letter file under the data directory.
pub(crate) const DEAD_LETTERS: &str = "dead-letter.jsonl";
/// The data directory's default, under the working directory.
pub(crate) const DEFAULT_DIR: &str = "dripfeed-data";
/// The journal's default before the data directory (working directory).
pub(crate) const OLD_JOURNAL: &str = "relay-journal";
/// The dead-letter file's default before the data directory.
pub(crate) const OLD_DEAD_LETTERS: &str = "dead-letter.jsonl";

/// What [`resolve`] knows of the process and its disk.
#[derive(Clone, Debug)]
pub(crate) struct Places {
    /// The working directory relative paths are taken from.
    pub cwd: PathBuf,
    /// `$STATE_DIRECTORY` (systemd sets one or several, `:`-separated).
    pub state_directory: Option<String>,
    /// Whether a path holds data ([`holds_data`] for the disk's).
    pub holds: fn(&Path) -> bool,
    /// Whether two paths name one file ([`same_file`] for the disk's).
    pub same: fn(&Path, &Path) -> bool,
    /// Whether a path is a symbolic link ([`is_link`] for the disk's).
    pub link: fn(&Path) -> bool,
}

impl Places {
    /// The process's: its working directory (`/` if unreadable), its
    /// `$STATE_DIRECTORY` and the disk.
    pub(crate) fn of_process() -> Places {
        Places {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            state_directory: std::env::var("STATE_DIRECTORY").ok(),
            holds: holds_data,
            same: same_file,
            link: is_link,
        }
    }
}

/// Whether `path` itself (not its directories) is a symbolic link.
pub(crate) fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `a` and `b` name one file: equal, or equal once their
/// directories' links are followed (systemd's `/var/lib/NAME` is a link to
/// `/var/lib/private/NAME` with `DynamicUser=`).
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| {
        let dir = p.parent().and_then(|d| std::fs::canonicalize(d).ok())?;
        Some(dir.join(p.file_name()?))
    };
    a == b || matches!((real(a), real(b)), (Some(x), Some(y)) if x == y)
}

/// A directory with an entry besides lock files, or a file that is not
/// empty (the relay makes its dead-letter file, empty, at start).
pub(crate) fn holds_data(path: &Path) -> bool {
    match std::fs::read_dir(path) {
        Ok(entries) => entries
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().ends_with(".lock")),
        Err(_) => std::fs::metadata(path).is_ok_and(|m| m.len() > 0),
    }
}

/// Where the relay's files are, every path absolute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Paths {
    /// The data directory (made, owner-only, when something in it is used).
    pub data_dir: PathBuf,
    /// The journal's directory (also the registry's, statuses' and
    /// idempotency keys' unless `state_dir` says otherwise).
    pub journal_dir: PathBuf,
    /// The live dead-letter file.
    pub dead_letter_file: PathBuf,
    /// The admin API's registry's directory; `None` without a journal
    /// and without `state_dir`.
    pub state_dir: Option<PathBuf>,
    /// Set when the old defaults were kept: what to tell the operator.
    pub old_layout: Option<String>,
}

/// The paths `s` gives in `places`, or why the relay must not start.
pub(crate) fn resolve(s: &Settings, places: &Places) -> Result<Paths, String> {
    let abs = |p: &Path| places.cwd.join(p);
    let data_dir = match (&s.data_dir, places.state_directory.as_deref()) {
        (Some(dir), _) => abs(dir),
        (None, Some(state)) if !state.is_empty() => {
            abs(Path::new(state.split(':').next().unwrap_or(state)))
        }
        (None, _) => abs(Path::new(DEFAULT_DIR)),
    };
    let mut journal_dir = s
        .journal_dir
        .as_deref()
        .map_or_else(|| data_dir.join(JOURNAL), abs);
    let mut dead_letter_file = s
        .dead_letter_file
        .as_deref()
        .map_or_else(|| data_dir.join(DEAD_LETTERS), abs);
    let mut old_layout = None;
    if s.data_dir.is_none() {
        // The old defaults, for the paths not given: (the journal's?, old
        // path, new path).
        let old: Vec<(bool, PathBuf, PathBuf)> = [
            (s.journal_dir.is_none() && !s.no_journal)
                .then(|| (true, abs(Path::new(OLD_JOURNAL)), journal_dir.clone())),
            s.dead_letter_file.is_none().then(|| {
                let old = abs(Path::new(OLD_DEAD_LETTERS));
                (false, old, dead_letter_file.clone())
            }),
        ]
        .into_iter()
        .flatten()
        // The working directory may be the data directory (systemd's
        // WorkingDirectory=%S/NAME): then the old path is the new one.
        .filter(|(_, o, n)| !(places.same)(o, n))
        .collect();
        let old_held: Vec<&PathBuf> = old
            .iter()
            .filter(|(_, o, _)| (places.holds)(o))
            .map(|(_, o, _)| o)
            .collect();
        if !old_held.is_empty() {
            let new_held: Vec<&PathBuf> = old
                .iter()
                .filter(|(_, _, n)| (places.holds)(n))
                .map(|(_, _, n)| n)
                .collect();
            let list = |v: &[&PathBuf]| {
                v.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            };
            if !new_held.is_empty() {
                return Err(format!(
                    "both the old default paths ({}) and the data directory's ({}) hold data: \
                     give --data-dir (or --journal-dir and --dead-letter-file) to say which \
                     to use, or move one away (see the README's upgrade notes)",
                    list(&old_held),
                    list(&new_held)
                ));
            }
            for (journal, o, _) in &old {
                match journal {
                    true => journal_dir = o.clone(),
                    false => dead_letter_file = o.clone(),
                }
            }
            old_layout = Some(format!(
                "{} holds data from before --data-dir: the relay keeps the old paths; \
                 to move to {}, stop the relay and move {} to {} and {}* beside it \
                 (or give --journal-dir and --dead-letter-file to keep these)",
                list(&old_held),
                data_dir.display(),
                abs(Path::new(OLD_JOURNAL)).display(),
                data_dir.join(JOURNAL).display(),
                abs(Path::new(OLD_DEAD_LETTERS)).display(),
            ));
        }
    }
    // The directory the relay makes in the data directory is its own: a
    // link there was planted (a directory given by its path may be one).
    if s.journal_dir.is_none() && !s.no_journal && (places.link)(&journal_dir) {
        return Err(format!(
            "{}: a symbolic link where the journal's directory is kept: refused (it is never \
             followed); remove it, or give --journal-dir the directory it points to",
            journal_dir.display()
        ));
    }
    let state_dir = match (&s.state_dir, s.no_journal) {
        (Some(dir), _) => Some(abs(dir)),
        (None, false) => Some(journal_dir.clone()),
        (None, true) => None,
    };
    Ok(Paths {
        data_dir,
        journal_dir,
        dead_letter_file,
        state_dir,
        old_layout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_with;

    /// The settings of `argv` (with a destination).
    fn settings(argv: &[&str]) -> Settings {
        let mut all = vec!["--downstream", "http://127.0.0.1:9/"];
        all.extend_from_slice(argv);
        load_with(&all, &[], None).unwrap().settings
    }

    fn places(state: Option<&str>, holds: fn(&Path) -> bool) -> Places {
        Places {
            cwd: "/srv/app".into(),
            state_directory: state.map(str::to_owned),
            holds,
            same: |a, b| a == b,
            link: |p| p.ends_with("planted/journal"),
        }
    }

    #[test]
    fn a_link_where_the_journal_would_be_made_is_refused() {
        let s = settings(&["--data-dir", "planted"]);
        let e = resolve(&s, &places(None, |_| false)).unwrap_err();
        assert!(
            e.contains("/srv/app/planted/journal: a symbolic link"),
            "{e}"
        );
        // Given by its path, a link is the operator's: followed.
        let s = settings(&["--data-dir", "planted", "--journal-dir", "planted/journal"]);
        assert!(resolve(&s, &places(None, |_| false)).is_ok());
        let s = settings(&["--data-dir", "planted", "--no-journal"]);
        assert!(resolve(&s, &places(None, |_| false)).is_ok());
    }

    #[test]
    fn one_data_directory_absolute() {
        let p = resolve(&settings(&[]), &places(None, |_| false)).unwrap();
        assert_eq!(p.journal_dir, Path::new("/srv/app/dripfeed-data/journal"));
        assert_eq!(
            p.dead_letter_file,
            Path::new("/srv/app/dripfeed-data/dead-letter.jsonl")
        );
        assert_eq!(p.state_dir.as_deref(), Some(p.journal_dir.as_path()));
        assert_eq!(p.old_layout, None);
        // systemd's, its first directory.
        let p = resolve(&settings(&[]), &places(Some("/var/lib/r:/x"), |_| false)).unwrap();
        assert_eq!(p.journal_dir, Path::new("/var/lib/r/journal"));
        // Given ones win, each on its own, made absolute.
        let s = settings(&["--data-dir", "d", "--dead-letter-file", "/dl/x.jsonl"]);
        let p = resolve(&s, &places(Some("/var/lib/r"), |_| false)).unwrap();
        assert_eq!(p.journal_dir, Path::new("/srv/app/d/journal"));
        assert_eq!(p.dead_letter_file, Path::new("/dl/x.jsonl"));
        let p = resolve(&settings(&["--no-journal"]), &places(None, |_| false)).unwrap();
        assert_eq!(p.state_dir, None);
    }

    #[test]
    fn the_old_defaults_are_kept_when_they_hold_data_or_refused_beside_new_data() {
        let old_only = |p: &Path| p.starts_with("/srv/app/relay-journal");
        let p = resolve(&settings(&[]), &places(None, old_only)).unwrap();
        assert_eq!(p.journal_dir, Path::new("/srv/app/relay-journal"));
        assert_eq!(p.dead_letter_file, Path::new("/srv/app/dead-letter.jsonl"));
        assert!(p.old_layout.is_some_and(|n| n.contains("relay-journal")));
        let both = |p: &Path| p.ends_with("relay-journal") || p.ends_with("dripfeed-data/journal");
        let e = resolve(&settings(&[]), &places(None, both)).unwrap_err();
        assert!(
            e.contains("/srv/app/relay-journal") && e.contains("/srv/app/dripfeed-data/journal"),
            "{e}"
        );
        // A data directory given, or the paths given: the old ones are not looked at.
        for argv in [
            &["--data-dir", "/d"][..],
            &["--journal-dir", "j", "--dead-letter-file", "dl"][..],
        ] {
            let p = resolve(&settings(argv), &places(None, both)).unwrap();
            assert_eq!(p.old_layout, None, "{argv:?}");
        }
    }

    #[test]
    fn a_working_directory_that_is_the_data_directory_is_not_an_old_layout() {
        // systemd: WorkingDirectory=%S/NAME and StateDirectory=NAME.
        // Its dead letters are the new ones, not an old layout's (before,
        // the first dead letter made the next start refuse).
        let mut p = places(Some("/srv/app"), |p| p.ends_with("dead-letter.jsonl"));
        let resolved = resolve(&settings(&[]), &p).unwrap();
        assert_eq!(resolved.old_layout, None);
        assert_eq!(resolved.journal_dir, Path::new("/srv/app/journal"));
        assert_eq!(
            resolved.dead_letter_file,
            Path::new("/srv/app/dead-letter.jsonl")
        );
        // The same file under another name (a link) too.
        p.state_directory = Some("/var/lib/app".into());
        p.same = |a, b| a.file_name() == b.file_name();
        let resolved = resolve(&settings(&[]), &p).unwrap();
        assert_eq!(resolved.old_layout, None);
        assert_eq!(
            resolved.dead_letter_file,
            Path::new("/var/lib/app/dead-letter.jsonl")
        );
    }

    #[test]
    fn data_is_a_directory_with_more_than_locks_or_a_file_not_empty() {
        let dir = std::env::temp_dir().join(format!("dripfeed-paths-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!holds_data(&dir));
        std::fs::write(dir.join("state.lock"), b"").unwrap();
        assert!(!holds_data(&dir), "a lock alone");
        std::fs::write(dir.join("dl.jsonl"), b"").unwrap();
        assert!(holds_data(&dir));
        assert!(!holds_data(&dir.join("dl.jsonl")), "an empty file");
        std::fs::write(dir.join("dl.jsonl"), b"{}\n").unwrap();
        assert!(holds_data(&dir.join("dl.jsonl")));
        assert!(!holds_data(&dir.join("missing")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
