//! A disk that fills up, for the dead-letter file: a small tmpfs the test
//! mounts (and unmounts when dropped) and fills with a filler file; where
//! `mount` is not permitted, the file's path made a link to `/dev/full`
//! (every write fails with "no space left") and freed by removing the link.
//! Neither possible: the test skips, saying why (under `CI=true` it fails).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use crate::harness::TempDir;
use crate::unprivileged::in_ci;

/// How the disk is made full.
enum Kind {
    /// A mounted tmpfs; full while the filler file exists.
    Tmpfs,
    /// The file's path links to `/dev/full` while full.
    DevFull,
}

/// A directory on a disk the test can fill and free.
pub(crate) struct FullDisk {
    dir: TempDir,
    kind: Kind,
    /// The file whose writes fail while full (for `/dev/full`).
    file: PathBuf,
}

impl FullDisk {
    /// A directory of `size` (`4m`) for the file `name` in it.
    pub(crate) fn new(test: &str, size: &str, name: &str) -> Option<FullDisk> {
        let dir = TempDir::new(test);
        let file = dir.join(name);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir.0)
            .output()
            .is_ok_and(|o| o.status.success());
        if mounted {
            return Some(FullDisk {
                dir,
                kind: Kind::Tmpfs,
                file,
            });
        }
        if std::fs::metadata("/dev/full").is_ok() {
            eprintln!(
                "{test}: mount not permitted: the dead-letter file links to /dev/full instead"
            );
            return Some(FullDisk {
                dir,
                kind: Kind::DevFull,
                file,
            });
        }
        let why = "neither mount -t tmpfs nor /dev/full is available";
        assert!(!in_ci(), "{test}: {why}, and CI=true");
        eprintln!("{test}: skipped: {why}");
        None
    }

    /// Whether the disk is a tmpfs (every file in it fills up, not only
    /// the one file).
    pub(crate) fn is_tmpfs(&self) -> bool {
        matches!(self.kind, Kind::Tmpfs)
    }

    /// A path in the directory, as text for a flag.
    pub(crate) fn arg(&self, name: &str) -> String {
        self.dir.arg(name)
    }

    /// The file's path, as text for a flag.
    pub(crate) fn file_arg(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    /// Fills the disk: no write to the file can succeed. For `/dev/full`
    /// the file must still be empty.
    pub(crate) fn fill(&self) {
        match self.kind {
            Kind::Tmpfs => {
                let filler = self.dir.join("filler");
                let mut f = std::fs::File::create(&filler).expect("the filler file");
                let block = vec![0xa5u8; 64 * 1024];
                // Until "no space left"; a tmpfs of a few MiB fills quickly.
                while f.write_all(&block).is_ok() {}
                // Whatever fits in the last page too.
                while f.write_all(&block[..512]).is_ok() {}
                while f.write_all(&block[..1]).is_ok() {}
            }
            Kind::DevFull => {
                let len = std::fs::metadata(&self.file).map_or(0, |m| m.len());
                assert_eq!(len, 0, "the file is still empty before /dev/full");
                let _ = std::fs::remove_file(&self.file);
                std::os::unix::fs::symlink("/dev/full", &self.file).expect("a link to /dev/full");
            }
        }
    }

    /// Frees the disk again.
    pub(crate) fn free(&self) {
        match self.kind {
            Kind::Tmpfs => std::fs::remove_file(self.dir.join("filler")).expect("the filler"),
            Kind::DevFull => std::fs::remove_file(&self.file).expect("the link"),
        }
    }
}

impl Drop for FullDisk {
    fn drop(&mut self) {
        if let Kind::Tmpfs = self.kind {
            let unmounted = Command::new("umount")
                .arg(&self.dir.0)
                .status()
                .is_ok_and(|s| s.success());
            if !unmounted {
                // Still busy (a child that did not exit yet): detach it.
                let _ = Command::new("umount").arg("-l").arg(&self.dir.0).status();
            }
        }
    }
}
