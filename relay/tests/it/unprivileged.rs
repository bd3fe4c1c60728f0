//! An unprivileged user to run the relay as, for permission faults: root
//! ignores file permissions, so a test of an unwritable file or directory
//! runs the child as `nobody` (or a user it creates when there is none).
//! Only when the tests run as root: a user who is not root is one already.

use std::path::Path;
use std::process::Command;

/// A user made for these tests when `nobody` is missing.
const MADE: &str = "dripfeed-test";

/// The uid and gid of `name`, if it exists.
fn ids(name: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, name]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

/// Whether the tests run under CI (`CI=true`): then nothing skips.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether this process runs as root.
fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The (uid, gid) of an unprivileged user to run the relay as: `nobody`,
/// else one `useradd` makes. `None` (the test skips, saying why) when it
/// cannot have one; under `CI=true` it panics instead.
pub(crate) fn user(test: &str) -> Option<(u32, u32)> {
    let found = if root() {
        ids("nobody").or_else(|| {
            let _ = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    MADE,
                ])
                .status();
            ids(MADE)
        })
    } else {
        None
    };
    if found.is_none() {
        let why = "needs root, to run the relay as an unprivileged user (root ignores permissions)";
        assert!(!in_ci(), "{test}: {why}, and CI=true");
        eprintln!("{test}: skipped: {why}");
    }
    found
}

/// Gives `path` to `user` (`chown -R`).
pub(crate) fn give(path: &Path, user: (u32, u32)) {
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.0, user.1))
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chown {}", path.display());
}

/// Sets `path`'s mode (octal, as chmod takes it).
pub(crate) fn mode(path: &Path, mode: &str) {
    let ok = Command::new("chmod")
        .arg(mode)
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chmod {mode} {}", path.display());
}
