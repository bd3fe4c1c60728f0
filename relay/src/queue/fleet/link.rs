//! The relay's one way to reach Redis: `redis` is one server's URL, a
//! `redis+sentinel://` URL naming the sentinels that watch the primary
//! (followed through a failover), or the URLs of some of a Redis Cluster's
//! nodes separated by commas (the rest are found from them). Sentinel and
//! Cluster are either-or.

use std::time::Duration;

use dripfeed::global::RedisConnection;

/// How long reaching a cluster at start may take.
const CLUSTER_START: Duration = Duration::from_secs(10);

/// The nodes `url` names: more than one is a cluster. A sentinel URL
/// (whose sentinels are separated by commas) is one.
pub(crate) fn nodes(url: &str) -> Vec<&str> {
    if url.trim().starts_with("redis+sentinel://") {
        return vec![url.trim()];
    }
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

/// A connection to the server (lazy: Redis down at start shows in
/// `/readyz`, not here) or to the cluster (reached now: a cluster that
/// cannot be reached at start is an error).
pub(crate) async fn connect(url: &str) -> Result<RedisConnection, String> {
    match nodes(url)[..] {
        [] => Err("redis: no URL".into()),
        [one] => RedisConnection::open(one).map_err(|e| format!("redis: {e}")),
        ref many => tokio::time::timeout(CLUSTER_START, RedisConnection::cluster(many))
            .await
            .map_err(|_| format!("redis: the cluster was not reached within {CLUSTER_START:?}"))?
            .map_err(|e| format!("redis cluster: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_urls_is_a_cluster() {
        assert_eq!(nodes("redis://a:1/"), vec!["redis://a:1/"]);
        assert_eq!(
            nodes("redis://a:1, redis://b:2,"),
            vec!["redis://a:1", "redis://b:2"]
        );
        assert!(nodes(" , ").is_empty());
        let watched = "redis+sentinel://a:26379,b:26379/hooks";
        assert_eq!(
            nodes(watched),
            vec![watched],
            "one primary, three sentinels"
        );
    }
}
