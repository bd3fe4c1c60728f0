//! A body labelled JSON (`application/json`, or a `+json` type) must be
//! JSON: a receiver could not read it either, so it is refused at intake
//! (400 `bad-json`) rather than delivered and dead-lettered. Other content
//! types are delivered as they came, unread. (Found by schemathesis: the
//! document promised a JSON body and the relay took any bytes as one.)

use axum::http::{HeaderMap, StatusCode, header};

use super::{Refusal, refusal};

/// Whether `headers` label the body JSON.
fn labelled_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let media = value.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
        || media
            .rsplit_once('+')
            .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
}

/// Refuses a body labelled JSON that is not JSON (at most 128 levels deep).
pub(super) fn check(headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
    if !labelled_json(headers) {
        return Ok(());
    }
    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Ok(_) => Ok(()),
        Err(e) => Err(refusal(
            StatusCode::BAD_REQUEST,
            "bad-json",
            format!("the body is labelled JSON but is not: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn typed(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        h
    }

    #[test]
    fn json_bodies_are_checked_and_others_are_not() {
        let json = typed("application/json; charset=utf-8");
        assert!(check(&json, b"{\"a\":[1,2]}").is_ok());
        assert!(check(&json, b"\x00").is_err());
        assert!(check(&json, b"").is_err());
        assert!(check(&typed("application/cloudevents+json"), b"{").is_err());
        assert!(check(&typed("text/plain"), b"{").is_ok());
        assert!(check(&HeaderMap::new(), b"\x00").is_ok());
    }
}
