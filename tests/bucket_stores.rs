//! The one `BucketStore` conformance suite (`support/conformance.rs`), run
//! against each store: the in-memory table, a real `redis-server`, a real
//! 3-master Redis Cluster and a real PostgreSQL, each started on a free
//! loopback port.

use crate::support;

use std::sync::{Arc, Mutex};

use dripfeed::global::{PgBuckets, RedisBuckets, RedisConnection};
use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
use support::conformance::{self, Backend, BoxFuture};

/// The in-memory table: idle keys are evicted when the table is full.
struct Memory {
    tables: Mutex<Vec<(String, Arc<KeyedBuckets<String>>)>>,
}

const MEMORY_KEYS: usize = 64;

impl Backend for Memory {
    fn store<'a>(&'a self, name: &'a str, quota: Quota) -> BoxFuture<'a, Arc<dyn BucketStore>> {
        Box::pin(async move {
            let mut tables = self.tables.lock().unwrap();
            // A second handle on the same name is the same table.
            if let Some((_, t)) = tables.iter().find(|(n, _)| n == name) {
                return t.clone() as Arc<dyn BucketStore>;
            }
            let t = Arc::new(KeyedBuckets::new(MEMORY_KEYS, quota).unwrap());
            tables.push((name.to_owned(), t.clone()));
            t as Arc<dyn BucketStore>
        })
    }

    fn idle_gone<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let table = {
                let tables = self.tables.lock().unwrap();
                tables.iter().find(|(n, _)| n == name).unwrap().1.clone()
            };
            // A full table of new keys: every drained one makes room.
            for i in 0..MEMORY_KEYS {
                BucketStore::try_admit(&*table, &format!("new-{i}"), 1.0)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            match (table.len(), table.evictions()) {
                (len, ev) if len <= MEMORY_KEYS && ev >= 40 => Ok(()),
                (len, ev) => Err(format!("{len} live, {ev} evicted")),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn in_memory_table() {
    let backend = Memory {
        tables: Mutex::new(Vec::new()),
    };
    conformance::run(&backend).await;
}

/// Redis, one server or a cluster: idle buckets expire on their own.
struct Redis {
    conn: RedisConnection,
    ports: Vec<u16>,
}

impl Backend for Redis {
    fn store<'a>(&'a self, name: &'a str, quota: Quota) -> BoxFuture<'a, Arc<dyn BucketStore>> {
        Box::pin(async move {
            Arc::new(RedisBuckets::new(self.conn.clone(), name, quota)) as Arc<dyn BucketStore>
        })
    }

    fn idle_gone<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let pattern = format!("{{{name}:*");
            let left: usize = self
                .ports
                .iter()
                .map(|&p| {
                    support::redis::cli(p, &["--scan", "--pattern", &pattern])
                        .lines()
                        .filter(|k| !k.trim().is_empty())
                        .count()
                })
                .sum();
            if left == 0 {
                Ok(())
            } else {
                Err(format!("{left} keys still held"))
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn redis_server() {
    if !support::redis::available("redis_server") {
        return;
    }
    let redis = support::redis::RedisServer::start();
    let backend = Redis {
        conn: RedisConnection::open(&redis.url()).unwrap(),
        ports: vec![redis.port],
    };
    conformance::run(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn redis_cluster() {
    if !support::redis::available("redis_cluster") {
        return;
    }
    let cluster = support::redis::RedisCluster::start();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let backend = Redis {
        conn: RedisConnection::cluster(&urls).await.unwrap(),
        ports: cluster.nodes.iter().map(|n| n.port).collect(),
    };
    conformance::run(&backend).await;
}

/// PostgreSQL: drained rows are pruned (here on demand).
struct Postgres {
    url: String,
}

impl Postgres {
    async fn buckets(&self, name: &str, quota: Quota) -> PgBuckets {
        let b = PgBuckets::new(PgBuckets::pool(&self.url, 2).unwrap(), name, quota).unwrap();
        b.migrate().await.unwrap();
        b
    }
}

impl Backend for Postgres {
    fn store<'a>(&'a self, name: &'a str, quota: Quota) -> BoxFuture<'a, Arc<dyn BucketStore>> {
        Box::pin(async move { Arc::new(self.buckets(name, quota).await) as Arc<dyn BucketStore> })
    }

    fn idle_gone<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let b = self
                .buckets(name, Quota::per_second(1.0).burst(1.0).unwrap())
                .await;
            let pruned = b.prune(1000).await.map_err(|e| e.to_string())?;
            match b.rows().await.map_err(|e| e.to_string())? {
                0 => Ok(()),
                n => Err(format!("{n} rows left after pruning {pruned}")),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn postgres() {
    if !support::postgres::available("postgres") {
        return;
    }
    let pg = support::postgres::PgServer::start();
    conformance::run(&Postgres { url: pg.url() }).await;
}
