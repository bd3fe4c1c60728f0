//! The real binary over loopback: started with `--listen 127.0.0.1:0` (and
//! `--allow-destination-cidr 127.0.0.0/8`, for the receivers), its
//! address read from the line it prints (`webhook relay on http://ADDR:`),
//! its environment set on the child only, killed when dropped. Every wait
//! has a deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The binary cargo built for these tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_dripfeed-relay");

/// What every relay [`Relay::start`] starts is given first: free
/// loopback ports for intake and the admin listener, and deliveries allowed to the tests' receivers on
/// 127.0.0.1 (the address guard refuses loopback otherwise).
pub(crate) const LOOPBACK: &[&str] = &[
    "--listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--allow-destination-cidr",
    "127.0.0.0/8",
];

/// How long a relay may take to start listening.
const START: Duration = Duration::from_secs(60);

/// An HTTP client (reqwest on rustls over ring, the system's roots). The
/// TLS settings are made once and shared: reqwest would read and parse
/// the system's roots for every client it builds, which was two fifths of
/// the CPU of a test posting through a fresh client each time.
pub(crate) fn http() -> reqwest::Client {
    static TLS: std::sync::OnceLock<rustls::ClientConfig> = std::sync::OnceLock::new();
    let tls = TLS.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = rustls_platform_verifier::Verifier::new(provider.clone()).expect("the roots");
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS 1.2 and 1.3")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(roots))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        tls
    });
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls.clone())
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client")
}

/// The binary the tests run: the one cargo built, unless
/// `DRIPFEED_RELAY_BIN` names another (an older build, to see a test fail
/// before a change).
pub(crate) fn bin() -> PathBuf {
    std::env::var_os("DRIPFEED_RELAY_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from)
}

/// A command for the binary, with no `DRIPFEED_*` variable of this
/// process leaking into it and `env` set on it.
fn command(args: &[String], env: &[(&str, &str)]) -> Command {
    command_of(&bin(), args, env)
}

/// [`command`] for the binary at `bin`.
fn command_of(bin: &std::path::Path, args: &[String], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin);
    for (var, _) in std::env::vars_os() {
        // STATE_DIRECTORY (systemd's) would move every default path;
        // OTEL_* would turn traces on.
        let name = var.to_string_lossy();
        if name.starts_with("DRIPFEED_") || name.starts_with("OTEL_") || var == "STATE_DIRECTORY" {
            cmd.env_remove(var);
        }
    }
    cmd.args(args).envs(env.iter().copied()).kill_on_drop(true);
    cmd
}

/// A command line split on whitespace (the tests' paths have no spaces).
/// The hex SHA-256 of `key`, as `hash-key` prints it (what
/// `admin_token_sha256` and API keys' digests are given as).
pub(crate) fn digest(key: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn argv(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// `["--a", "b"]` from `&["--a", "b"]`.
pub(crate) fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Lines a child printed, and a wake-up for each new one.
#[derive(Default)]
pub(crate) struct Lines {
    lines: Mutex<Vec<String>>,
    more: Notify,
}

impl Lines {
    /// Collects the lines `from` gives, in a task of their own.
    pub(crate) fn follow(self: &Arc<Self>, from: impl AsyncRead + Unpin + Send + 'static) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(from).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                me.lines.lock().unwrap().push(line);
                me.more.notify_waiters();
            }
            me.more.notify_waiters();
        });
    }

    /// Everything printed so far.
    pub(crate) fn all(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The first line matching `want`, waiting up to `limit` for it.
    pub(crate) async fn find(
        &self,
        limit: Duration,
        want: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let wait = async {
            loop {
                let more = self.more.notified();
                if let Some(l) = self.lines.lock().unwrap().iter().find(|l| want(l)) {
                    return l.clone();
                }
                more.await;
            }
        };
        tokio::time::timeout(limit, wait).await.ok()
    }
}

/// A running relay.
pub(crate) struct Relay {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where its admin listener listens (`/metrics`, `/readyz`, the admin
    /// API), from the line `admin on http://ADDR:` it prints before.
    pub admin: Option<SocketAddr>,
    /// Whether intake speaks TLS.
    pub tls: bool,
    /// Its stdout.
    pub out: Arc<Lines>,
    /// Its stderr.
    pub err: Arc<Lines>,
    /// The copy of the binary it runs, if not the one cargo built.
    _copy: Option<Reachable>,
}

impl Relay {
    /// Starts the binary with the command line `args` (split on
    /// whitespace, after `--listen 127.0.0.1:0`).
    pub(crate) async fn start(args: &str) -> Relay {
        Relay::start_with(&argv(args), &[]).await
    }

    /// Starts the binary with `args` and `env`; panics, showing its output,
    /// if it does not listen within a minute.
    pub(crate) async fn start_with(args: &[String], env: &[(&str, &str)]) -> Relay {
        let mut all = owned(LOOPBACK);
        all.extend_from_slice(args);
        Relay::spawn(&all, env).await
    }

    /// Starts the binary with exactly `args` and `env`.
    pub(crate) async fn spawn(args: &[String], env: &[(&str, &str)]) -> Relay {
        Relay::launch(command(args, env), args).await
    }

    /// Starts the binary as [`start_with`](Self::start_with) does, in the
    /// working directory `dir`.
    pub(crate) async fn start_in(
        dir: &std::path::Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Relay {
        let mut all = owned(LOOPBACK);
        all.extend_from_slice(args);
        let mut cmd = command(&all, env);
        cmd.current_dir(dir);
        Relay::launch(cmd, &all).await
    }

    /// Starts the binary as [`start`](Self::start) does, as `user` (uid,
    /// gid): root ignores file permissions, an unprivileged user does not.
    /// It runs a copy of the binary the user can reach ([`Reachable`]),
    /// removed once the relay is dropped.
    pub(crate) async fn start_as(args: &str, user: (u32, u32)) -> Relay {
        let mut all = owned(LOOPBACK);
        all.extend(argv(args));
        let bin = Reachable::new();
        let mut cmd = command_of(&bin.path, &all, &[]);
        cmd.uid(user.0).gid(user.1);
        let mut relay = Relay::launch(cmd, &all).await;
        relay._copy = Some(bin);
        relay
    }

    /// Starts `cmd` (the binary with `args`) and waits for its address.
    async fn launch(mut cmd: Command, args: &[String]) -> Relay {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the relay");
        let (out, err) = (Arc::new(Lines::default()), Arc::new(Lines::default()));
        out.follow(child.stdout.take().unwrap());
        err.follow(child.stderr.take().unwrap());
        let line = out
            .find(START, |l| {
                l.starts_with("webhook relay on http://")
                    || l.starts_with("webhook relay on https://")
            })
            .await;
        let Some(line) = line else {
            let _ = child.start_kill();
            panic!(
                "the relay did not listen ({args:?}):\nstdout:\n{}\nstderr:\n{}",
                out.all().join("\n"),
                err.all().join("\n")
            );
        };
        let (scheme, rest) = line["webhook relay on ".len()..]
            .split_once("://")
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let addr = rest
            .split(": ")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let admin = out
            .all()
            .iter()
            .find_map(|l| {
                l.strip_prefix("admin on http://")
                    .or_else(|| l.strip_prefix("admin on https://"))
            })
            .and_then(|rest| rest.split(": ").next()?.parse().ok());
        Relay {
            child,
            addr,
            admin,
            tls: scheme == "https",
            out,
            err,
            _copy: None,
        }
    }

    /// `http://ADDR{path}` (`https://` when intake speaks TLS).
    pub(crate) fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("the relay is running")
    }

    /// Sends `signal` (`TERM`, `INT`) with kill(1).
    pub(crate) fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{signal}");
    }

    /// SIGKILL, and the exit.
    pub(crate) async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        let _ = self.child.wait().await;
    }

    /// Waits for the relay to exit, at most `limit`.
    pub(crate) async fn exit(&mut self, limit: Duration) -> ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("waiting for the relay"),
            Err(_) => panic!(
                "the relay did not exit within {limit:?}:\nstdout:\n{}\nstderr:\n{}",
                self.out.all().join("\n"),
                self.err.all().join("\n")
            ),
        }
    }

    /// Its resident memory, KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/statm", self.pid()))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * 4)
    }

    /// `GET /metrics`, parsed.
    pub(crate) async fn metrics(&self) -> Metrics {
        Metrics::parse(&self.metrics_page().await)
    }

    /// `http://ADMIN{path}`: the admin listener.
    pub(crate) fn admin_url(&self, path: &str) -> String {
        let addr = self.admin.expect("the relay printed its admin address");
        format!("http://{addr}{path}")
    }

    /// `GET /metrics` (on the admin listener) as text.
    pub(crate) async fn metrics_page(&self) -> String {
        let resp = http()
            .get(self.admin_url("/metrics"))
            .send()
            .await
            .expect("GET /metrics");
        resp.text().await.expect("the metrics page")
    }

    /// POSTs `body` to `/v1/webhooks/deliver` with `headers`; status and body.
    pub(crate) async fn post(
        &self,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, serde_json::Value) {
        let mut req = http()
            .post(self.url("/v1/webhooks/deliver"))
            .body(body.to_owned());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("the relay answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or_default())
    }

    /// Posts webhook `{"n":N}` for `destination` (`X-Destination`): the
    /// status, and the id a 202 named.
    pub(crate) async fn post_for(&self, destination: &str, n: u64) -> (u16, Option<String>) {
        let headers = [
            ("x-destination", destination),
            ("content-type", "application/json"),
        ];
        let (status, body) = self.post(&headers, &format!("{{\"n\":{n}}}")).await;
        let id = body["id"].as_str().map(str::to_owned);
        (status, id.filter(|_| status == 202))
    }
}

/// Runs the binary with `args` and `env` to its end: exit code, stdout, stderr.
pub(crate) async fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    finish(command(&owned(args), env)).await
}

/// Runs the binary with `args` and `env` in the working directory `dir`
/// to its end: exit code, stdout, stderr.
pub(crate) async fn run_in(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut cmd = command(&owned(args), env);
    cmd.current_dir(dir);
    finish(cmd).await
}

/// Runs the binary with `args` as `user` (uid, gid) to its end: exit
/// code, stdout, stderr. It runs a copy the user can reach ([`Reachable`]).
pub(crate) async fn run_as(args: &[&str], user: (u32, u32)) -> (i32, String, String) {
    let bin = Reachable::new();
    let mut cmd = command_of(&bin.path, &owned(args), &[]);
    cmd.uid(user.0).gid(user.1);
    finish(cmd).await
}

/// A copy of the binary that any user can run: cargo builds it under the
/// checkout, which may sit in a directory only its owner may enter (`/root`,
/// a `mktemp -d` folder), so a relay started as an unprivileged user could
/// not reach it. The copy is in a directory of its own under the temporary
/// directory (mode 0755, the binary 0755), removed when dropped.
pub(crate) struct Reachable {
    _dir: TempDir,
    /// The copy.
    pub path: PathBuf,
}

impl Reachable {
    /// A fresh copy.
    pub(crate) fn new() -> Reachable {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("bin");
        let path = dir.join("dripfeed-relay");
        std::fs::copy(bin(), &path).expect("copying the relay's binary");
        let open = |p: &std::path::Path| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
                .expect("making the copy reachable")
        };
        open(&path);
        open(&dir.0);
        Reachable { _dir: dir, path }
    }
}

/// Runs `cmd` to its end: exit code, stdout, stderr.
async fn finish(mut cmd: Command) -> (i32, String, String) {
    let out = cmd.output();
    let out = tokio::time::timeout(START, out)
        .await
        .expect("the relay ended in time")
        .expect("running the relay");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// A Prometheus text page.
pub(crate) struct Metrics(Vec<(String, HashMap<String, String>, f64)>);

impl Metrics {
    /// Reads `name{labels} value` lines.
    pub(crate) fn parse(page: &str) -> Metrics {
        let mut out = Vec::new();
        for line in page
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim_matches('"').to_owned()))
                .collect();
            out.push((name.to_owned(), labels, value));
        }
        Metrics(out)
    }

    /// The sum over the series of `name` carrying every label of `labels`
    /// (`None` when there is none).
    pub(crate) fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching: Vec<f64> = self
            .0
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).is_some_and(|x| x == v))
            })
            .map(|(_, _, v)| *v)
            .collect();
        (!matching.is_empty()).then(|| matching.iter().sum())
    }

    /// [`find`](Self::find), 0 when there is no such series.
    pub(crate) fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels).unwrap_or(0.0)
    }
}

/// Polls `check` every 20 ms until it holds, at most `limit`; whether it held.
pub(crate) async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A directory of its own, removed when dropped.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory for `tag`.
    pub(crate) fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "dripfeed-relay-it-{tag}-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    /// A path inside it.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A path inside it, as text for a flag.
    pub(crate) fn arg(&self, name: &str) -> String {
        self.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
