//! What intake answered, by kind: counted as it answers, read by the
//! status line and published as `dripfeed_relay_intake_answers_total`
//! (by status and reason) when `/metrics` is read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

/// A 202 naming the webhook, `{"id":"…","status":"…"}` (the OpenAPI
/// document's `Accepted`; keys in the order serde_json writes them). Written
/// straight rather than through a JSON value: the id is digits and the
/// status one of a few fixed words, so nothing needs escaping, and the
/// body every accepted webhook gets is one allocation of its exact length
/// (a longer one would cost `Bytes` a second), not nine.
pub(super) fn accepted_202(status: &'static str, id: u64) -> Response {
    use std::fmt::Write;
    let digits = id.checked_ilog10().map_or(1, |d| d as usize + 1);
    let mut body = String::with_capacity(21 + digits + status.len());
    let _ = write!(body, r#"{{"id":"{id}","status":"{status}"}}"#);
    let mut resp = Response::new(axum::body::Body::from(body));
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Answers by kind since start.
#[derive(Default)]
pub(crate) struct Answers {
    /// 202, queued.
    pub queued: AtomicU64,
    /// 202, deferred to the dead-letter file (overflow `dead-letter`).
    pub deferred: AtomicU64,
    /// 503: a destination's queue, or the set's bound, is full.
    pub full_503: AtomicU64,
    /// 503: the byte budget is spent.
    pub bytes_503: AtomicU64,
    /// 503: shutting down.
    pub closed_503: AtomicU64,
    /// 429: a tenant over its quota.
    pub quota_429: AtomicU64,
    /// 503: the tenant store is down (failing closed).
    pub store_503: AtomicU64,
    /// 503: the journal is full or failing.
    pub journal_503: AtomicU64,
    /// 413: a body over the limit.
    pub too_large_413: AtomicU64,
    /// 401: no key, or one not known or expired.
    pub unauthorized_401: AtomicU64,
    /// 403: a tenant naming a destination it may not post to.
    pub forbidden_403: AtomicU64,
    /// 503: the dead-letter file takes no lines (failing or full).
    pub dead_letter_503: AtomicU64,
    /// 202, a repeat of an accepted Idempotency-Key.
    pub duplicate: AtomicU64,
    /// Every answer but a 202, by status and reason (a few dozen pairs,
    /// all fixed in the code).
    others: Mutex<HashMap<(u16, &'static str), u64>>,
}

impl Answers {
    /// Counts one answer of a kind.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a count.
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Counts `resp` by its status and [`Reason`](crate::domain::problem::Reason)
    /// (`none` without one). A 202 is counted where it is made, by kind.
    pub(crate) fn count(&self, resp: &Response) {
        let status = resp.status().as_u16();
        if status == 202 {
            return;
        }
        let reason = resp
            .extensions()
            .get::<crate::domain::problem::Reason>()
            .map_or("none", |r| r.0);
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        *others.entry((status, reason)).or_default() += 1;
    }

    /// Every answer counted: status, reason, count.
    pub(crate) fn all(&self) -> Vec<(u16, &'static str, u64)> {
        let mut all = vec![
            (202, "queued", Answers::get(&self.queued)),
            (202, "deferred", Answers::get(&self.deferred)),
            (202, "duplicate", Answers::get(&self.duplicate)),
        ];
        let others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        all.extend(others.iter().map(|(&(s, r), &n)| (s, r, n)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_by_status_and_reason() {
        let a = Answers::default();
        Answers::bump(&a.queued);
        let refusal = |kind| {
            crate::domain::problem::problem(
                StatusCode::SERVICE_UNAVAILABLE,
                kind,
                String::new(),
                Vec::new(),
            )
        };
        a.count(&refusal("overloaded"));
        a.count(&refusal("overloaded"));
        a.count(&accepted_202("queued", 1));
        a.count(&Response::new(axum::body::Body::empty()));
        let mut all = a.all();
        all.sort();
        assert_eq!(
            all,
            [
                (200, "none", 1),
                (202, "deferred", 0),
                (202, "duplicate", 0),
                (202, "queued", 1),
                (503, "overloaded", 2)
            ]
        );
    }

    #[tokio::test]
    async fn the_202_body_is_the_json_serde_would_write() {
        let resp = accepted_202("queued", 18_446_744_073_709_551_615);
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        let want = serde_json::json!({"status": "queued", "id": "18446744073709551615"});
        assert_eq!(bytes, serde_json::to_vec(&want).unwrap());
        for id in [0, 9, 10, 12_345, u64::MAX] {
            let resp = accepted_202("duplicate", id);
            let bytes = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
            let want = serde_json::json!({"status": "duplicate", "id": id.to_string()});
            assert_eq!(bytes, serde_json::to_vec(&want).unwrap(), "{id}");
        }
    }
}
