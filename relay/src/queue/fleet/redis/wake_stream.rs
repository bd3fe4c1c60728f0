//! The fleet's wake stream in Redis (`dripfeed:wake`): a relay that
//! admits work for a destination tells it here, and every relay reads it
//! to wake its drains ([`super::super::wake`]).

use redis::Value;

use dripfeed::global::RedisConnection;

use super::{CALL, array, bounded, text};

/// The stream admissions are told on.
const STREAM: &str = "dripfeed:wake";
/// About how many messages the stream keeps.
const KEPT: u64 = 10_000;
/// The most messages one read of the stream takes.
pub(crate) const READ: usize = 1024;

/// Tells every relay of the fleet that `name` has work (one message on
/// the stream, sent in a task of its own).
pub(crate) fn tell(conn: &RedisConnection, name: &str) {
    let (mut conn, name) = (conn.clone(), name.to_owned());
    tokio::spawn(async move {
        let mut add = redis::cmd("XADD");
        add.arg(STREAM)
            .arg("MAXLEN")
            .arg("~")
            .arg(KEPT)
            .arg("*")
            .arg("d")
            .arg(&name);
        let sent: Result<Value, _> = bounded(add.query_async(&mut conn), CALL).await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, destination = %name, "shared queue: work was not told to the fleet (its scan finds it)");
        }
    });
}

/// The newest message's id on the stream (`0-0` when it has none).
pub(crate) async fn newest(conn: &RedisConnection) -> Option<String> {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(STREAM).arg("+").arg("-").arg("COUNT").arg(1);
    let v: Value = bounded(cmd.query_async(&mut conn.clone()), CALL)
        .await
        .ok()?;
    let first = array(v, 0, "wake stream").ok()?.into_iter().next();
    Some(match first {
        Some(entry) => array(entry, 1, "wake entry").ok()?.first().and_then(text)?,
        None => "0-0".to_owned(),
    })
}

/// The messages after `after`: their ids and destinations.
pub(crate) async fn read(conn: &RedisConnection, after: &str) -> Option<Vec<(String, String)>> {
    let mut cmd = redis::cmd("XREAD");
    cmd.arg("COUNT")
        .arg(READ)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(after);
    let v: Value = bounded(cmd.query_async(&mut conn.clone()), CALL)
        .await
        .ok()?;
    if matches!(v, Value::Nil) {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for stream in array(v, 0, "wake read").ok()? {
        let parts = array(stream, 2, "wake stream").ok()?;
        let Some(Value::Array(entries)) = parts.into_iter().nth(1) else {
            continue;
        };
        for entry in entries {
            let fields = array(entry, 2, "wake entry").ok()?;
            let id = text(&fields[0])?;
            let name = match &fields[1] {
                Value::Array(kv) => kv.get(1).and_then(text),
                _ => None,
            };
            out.extend(name.map(|n| (id, n)));
        }
    }
    Some(out)
}
