//! A throwaway `redis-server` (or a 3-master cluster) on free loopback
//! ports, killed on drop. Under `CI=true` a missing `redis-server` fails
//! the test; elsewhere the test is skipped with a message.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One running server.
pub(crate) struct RedisServer {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    extra: Vec<String>,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn have(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether Redis tests can run here; panics under CI if they cannot.
pub(crate) fn available(test: &str) -> bool {
    if have("redis-server") && have("redis-cli") {
        return true;
    }
    if in_ci() {
        panic!("{test}: redis-server/redis-cli missing but CI=true: install redis-server");
    }
    eprintln!("{test}: skipped, redis-server not installed (apt-get install -y redis-server)");
    false
}

/// A free loopback port (racy by nature; good enough for tests).
pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// A free port whose cluster bus port (+10000) is free too.
pub(crate) fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let port = fastrand::u16(20000..30000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok()
        {
            return port;
        }
    }
    panic!("no free port pair for a cluster node");
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dripfeed-redis-{tag}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers: an
    /// append-only file fsynced every second, no eviction (what a fleet
    /// relay accepts by default).
    pub(crate) fn start() -> Self {
        Self::start_with(free_port(), Vec::new(), "single")
    }

    /// Starts a server that keeps nothing through a restart (no
    /// append-only file, no snapshot).
    pub(crate) fn start_forgetful() -> Self {
        let none = ["--appendonly", "no"];
        Self::start_with(free_port(), none.map(String::from).to_vec(), "forgetful")
    }

    /// Starts a server that fsyncs every write to its append-only file
    /// (`appendfsync always`) before it answers, so a [`restart`](Self::restart)
    /// after a [`kill`](Self::kill) comes back with every write it confirmed.
    pub(crate) fn start_durable() -> Self {
        let aof = ["--appendonly", "yes", "--appendfsync", "always"];
        Self::start_with(free_port(), aof.map(String::from).to_vec(), "aof")
    }

    /// Starts a server on `port` (one a test kept free for it).
    pub(crate) fn start_on(port: u16) -> Self {
        Self::start_with(port, Vec::new(), "on-port")
    }

    /// A free loopback port, for a server started later.
    pub(crate) fn free_port() -> u16 {
        free_port()
    }

    /// Starts a server with `args` besides the usual ones (later ones win).
    pub(crate) fn start_with_args(args: &[&str]) -> Self {
        let extra = args.iter().map(|a| a.to_string()).collect();
        Self::start_with(free_port(), extra, "custom")
    }

    /// Starts a replica of `primary` (it syncs in the background).
    pub(crate) fn start_replica_of(primary: &RedisServer) -> Self {
        let of = ["--replicaof", "127.0.0.1", &primary.port.to_string()].map(String::from);
        Self::start_with(free_port(), of.to_vec(), "replica")
    }

    fn start_with(port: u16, extra: Vec<String>, tag: &str) -> Self {
        let mut s = RedisServer {
            port,
            dir: temp_dir(tag),
            child: None,
            extra,
        };
        s.restart();
        s
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Restarts the server as a replica of the server on `primary`.
    pub(crate) fn restart_replica_of(&mut self, primary: u16) {
        if let Some(at) = self.extra.iter().position(|a| a == "--replicaof") {
            self.extra.drain(at..(at + 3).min(self.extra.len()));
        }
        self.extra.extend([
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            primary.to_string(),
        ]);
        self.restart();
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// (Re)starts the server on the same port and waits until it answers.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
            ])
            .args(["--dir", &self.dir.to_string_lossy()])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        wait_ping(self.port);
    }

    /// Runs `redis-cli` against this server; returns stdout.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_ping(port: u16) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if cli(port, &["PING"]).trim() == "PONG" {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server on port {port} did not answer within 10 s");
}

/// A 3-master Redis Cluster without replicas.
pub(crate) struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub(crate) fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let port = free_cluster_port();
                RedisServer::start_with(
                    port,
                    vec![
                        "--cluster-enabled".into(),
                        "yes".into(),
                        "--cluster-config-file".into(),
                        format!("nodes-{port}.conf"),
                        "--cluster-node-timeout".into(),
                        "2000".into(),
                    ],
                    "cluster",
                )
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            let ok = cluster
                .nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            if ok {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("cluster did not reach cluster_state:ok within 15 s");
    }

    pub(crate) fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }
}

/// The name three sentinels watch the primary under.
pub(crate) const WATCHED: &str = "hooks";

/// A primary with two replicas and three sentinels watching them (quorum
/// 2, a primary taken as down after 1 s), on free loopback ports. Each
/// server fsyncs every write (`appendfsync always`), and a primary with
/// no replica in sync refuses writes (`min-replicas-to-write 1`), as the
/// book's fleet page promises its settings.
pub(crate) struct SentinelSet {
    /// The first primary, then its replicas.
    pub servers: Vec<RedisServer>,
    sentinels: Vec<(u16, Child)>,
    dir: PathBuf,
}

impl SentinelSet {
    pub(crate) fn start() -> Self {
        let always = [
            "--appendfsync",
            "always",
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "5",
        ];
        let primary =
            RedisServer::start_with(free_port(), always.map(String::from).to_vec(), "primary");
        let mut servers = vec![primary];
        for _ in 0..2 {
            let mut of = vec![
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                servers[0].port.to_string(),
            ];
            of.extend(always.map(String::from));
            servers.push(RedisServer::start_with(free_port(), of, "replica"));
        }
        let dir = temp_dir("sentinel");
        let mut set = SentinelSet {
            servers,
            sentinels: Vec::new(),
            dir,
        };
        for _ in 0..3 {
            let port = free_port();
            let conf = set.dir.join(format!("sentinel-{port}.conf"));
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {WATCHED} 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds {WATCHED} 1000\n\
                 sentinel failover-timeout {WATCHED} 4000\n\
                 sentinel parallel-syncs {WATCHED} 2\n",
                set.dir.display(),
                set.servers[0].port
            );
            std::fs::write(&conf, text).expect("write a sentinel's config");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server --sentinel");
            set.sentinels.push((port, child));
            wait_ping(port);
        }
        // Each sentinel knows the two others and both replicas, so a
        // failover can be agreed on.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let ready = set.sentinels.iter().all(|(port, _)| {
                let info = cli(*port, &["SENTINEL", "MASTER", WATCHED]);
                let field = |name: &str| {
                    let lines: Vec<&str> = info.lines().collect();
                    lines
                        .iter()
                        .position(|l| *l == name)
                        .and_then(|i| lines.get(i + 1))
                        .map(|v| v.trim().to_owned())
                };
                field("num-other-sentinels").as_deref() == Some("2")
                    && field("num-slaves").as_deref() == Some("2")
            });
            let info = set.servers[0].cli(&["INFO", "replication"]);
            let synced =
                info.contains("connected_slaves:2") && info.matches("state=online").count() == 2;
            if ready && synced {
                return set;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the sentinels did not find each other and both replicas (in sync) within 30 s");
    }

    /// `redis+sentinel://` naming the three sentinels.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(p, _)| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+sentinel://{}/{WATCHED}", hosts.join(","))
    }

    /// The primary's port as the first sentinel that answers names it.
    pub(crate) fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|(p, _)| {
            let out = cli(*p, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", WATCHED]);
            out.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// The server now primary.
    pub(crate) fn primary(&mut self) -> &mut RedisServer {
        let port = self.primary_port().expect("the sentinels name a primary");
        self.servers
            .iter_mut()
            .find(|s| s.port == port)
            .expect("the primary is one of the set")
    }

    /// Kills the primary (SIGKILL) and waits until the sentinels name
    /// another that says it is one; returns the old primary's port.
    pub(crate) fn fail_over(&mut self) -> u16 {
        let old = self.primary_port().expect("a primary");
        self.primary().kill();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(now) = self.primary_port().filter(|p| *p != old)
                && cli(now, &["ROLE"]).lines().next() == Some("master")
            {
                return old;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no failover within 60 s");
    }

    /// Starts the server on `port` again as a replica of the primary the
    /// sentinels name now, as an operator (or the server's config file,
    /// which the sentinels rewrite) would: restarted as a primary with
    /// its old data it would take writes until the sentinels turn it.
    pub(crate) fn bring_back(&mut self, port: u16) {
        let primary = self.primary_port();
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.port == port)
            .expect("one of the set");
        match primary.filter(|p| *p != port) {
            Some(p) => server.restart_replica_of(p),
            None => server.restart(),
        }
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for (_, child) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
