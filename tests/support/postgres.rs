//! A throwaway PostgreSQL server: `initdb` into a temporary directory as an
//! unprivileged user, listening on a free loopback port (its unix socket in
//! that directory), stopped and deleted on drop. Under `CI=true` a missing
//! PostgreSQL fails the test; elsewhere the test is skipped with a message.
#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The database user the server is initialised with (trust auth, loopback).
pub(crate) const USER: &str = "dripfeed";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The directory holding `initdb` and `postgres`: the newest Debian
/// `/usr/lib/postgresql/*/bin`, else one on `PATH`.
pub(crate) fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").is_file().then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
    })
}

/// Whether PostgreSQL tests can run here; panics under CI if they cannot.
pub(crate) fn available(test: &str) -> bool {
    if bin_dir().is_some() {
        return true;
    }
    if in_ci() {
        panic!(
            "{test}: initdb/postgres missing but CI=true: install the Debian package postgresql"
        );
    }
    eprintln!("{test}: skipped, PostgreSQL not installed (apt-get install -y postgresql)");
    false
}

/// The uid and gid to run as: ours, or the `postgres` (else `nobody`) user's
/// when we are root, since PostgreSQL refuses to run as root.
fn run_as() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id(&["-u"])? != 0 {
        return None;
    }
    ["postgres", "nobody"]
        .iter()
        .find_map(|user| Some((id(&["-u", user])?, id(&["-g", user])?)))
}

/// One running server.
pub(crate) struct PgServer {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    user: Option<(u32, u32)>,
    child: Option<Child>,
}

impl PgServer {
    /// Initialises a cluster and starts it on a free port; waits until it
    /// accepts connections.
    pub(crate) fn start() -> Self {
        let bin = bin_dir().expect("PostgreSQL binaries (call available() first)");
        let dir = std::env::temp_dir().join(format!(
            "dripfeed-pg-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let user = run_as();
        if let Some((uid, gid)) = user {
            let ok = Command::new("chown")
                .arg(format!("{uid}:{gid}"))
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown {dir:?} to the postgres user");
        }
        let mut s = PgServer {
            port: free_port(),
            dir,
            bin,
            user,
            child: None,
        };
        let out = s
            .command("initdb")
            .args(["-D", &s.data().to_string_lossy(), "-U", USER])
            .args([
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        s.restart();
        s
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.current_dir(&self.dir);
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// `postgres://dripfeed@127.0.0.1:PORT/postgres`
    pub(crate) fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server now (fast shutdown, then SIGKILL after 5 s).
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// (Re)starts the server on the same port and data directory; waits
    /// until it accepts connections.
    pub(crate) fn restart(&mut self) {
        self.stop();
        let child = self
            .command("postgres")
            .args(["-D", &self.data().to_string_lossy()])
            .args(["-p", &self.port.to_string()])
            .args(["-k", &self.dir.to_string_lossy()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=60"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(self.dir.join("server.log")).expect("log file"),
            ))
            .spawn()
            .expect("spawn postgres");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            let ready = ready
                || (!self.bin.join("pg_isready").is_file()
                    && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                    && start.elapsed() > Duration::from_millis(500));
            if ready {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("postgres exited with {status}: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        panic!(
            "postgres on port {} not ready within 20 s: {}",
            self.port,
            self.log()
        );
    }

    /// The server's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        remove(&self.dir);
    }
}

fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// A free loopback port (racy by nature; good enough for tests).
pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}
