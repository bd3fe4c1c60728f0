//! How the relay makes the files that hold webhook bodies, tenants, keys
//! or secrets (dead letters and their rotated and companion files, webhook
//! statuses, idempotency keys, the state file): owner-only, `0600`, and
//! their directories `0700`, whatever the process's umask.

use std::fs::{DirBuilder, OpenOptions};
use std::path::Path;

/// Options that make a file owner-only (`0600`) when they create it.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// `dir` made if missing (with its parents), owner-only (`0700`).
pub fn dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_owner_only_whatever_the_umask() {
        let root = std::env::temp_dir().join(format!("dripfeed-private-{}", fastrand::u64(..)));
        let dir = root.join("a/b");
        super::dir(&dir).unwrap();
        let file = dir.join("f");
        let mut f = super::options()
            .create(true)
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(b"x").unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
        let _ = std::fs::remove_dir_all(&root);
    }
}
