//! The two documents as the code generates them, from the routes of both
//! listeners (here, above intake and admin, which use
//! [`crate::openapi::finish`]): what `dripfeed-relay openapi
//! intake|admin` prints and the checked-in copies are held to.

use crate::openapi::{Listener, of};

/// The document of `listener`, as text.
pub(crate) fn generate(listener: Listener) -> String {
    match listener {
        Listener::Intake => of(crate::intake::routes(), listener),
        Listener::Admin => of(crate::admin::routes(), listener),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::renamed;

    #[test]
    fn a_renamed_header_is_renamed_in_the_document() {
        let doc = generate(Listener::Intake);
        let text = renamed(
            &doc,
            &[("X-Destination", "X-Hook-Target"), ("X-Tenant", "X-Org")],
        );
        assert!(text.contains("\"name\": \"X-Hook-Target\""), "{text}");
        assert!(text.contains("\"name\": \"X-Org\""));
        assert!(!text.contains("\"name\": \"X-Destination\""));
        assert!(
            text.contains("\"name\": \"Idempotency-Key\""),
            "others stay"
        );
    }

    /// Each checked-in document is what the code generates.
    #[test]
    fn the_checked_in_documents_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let update = std::env::var_os("UPDATE_OPENAPI").is_some_and(|v| v == "1");
        for listener in [Listener::Intake, Listener::Admin] {
            let path = dir.join(listener.file());
            let now = generate(listener);
            if update {
                std::fs::write(&path, &now).unwrap();
                continue;
            }
            let had = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                had == now,
                "relay/{} differs from the document the code generates: run \
                 `UPDATE_OPENAPI=1 cargo test -p dripfeed-relay openapi` (or \
                 `dripfeed-relay openapi {} > relay/{}`) and commit it",
                listener.file(),
                match listener {
                    Listener::Intake => "intake",
                    Listener::Admin => "admin",
                },
                listener.file(),
            );
        }
    }

    /// Each operation has an id of its own in its document (OpenAPI
    /// requires it; generated clients name a function each, and two
    /// operations called `list` made one of them vanish from the SDK).
    #[test]
    fn operation_ids_are_unique() {
        for listener in [Listener::Intake, Listener::Admin] {
            let doc: serde_json::Value = serde_json::from_str(&generate(listener)).unwrap();
            let mut seen = std::collections::HashMap::new();
            for (path, ops) in doc["paths"].as_object().unwrap() {
                for (method, op) in ops.as_object().unwrap() {
                    let Some(id) = op["operationId"].as_str() else {
                        continue;
                    };
                    if let Some(other) = seen.insert(id.to_owned(), format!("{method} {path}")) {
                        panic!("operationId {id} names both {other} and {method} {path}");
                    }
                }
            }
        }
    }

    /// Every status the issue names is in the documents where it applies.
    #[test]
    fn deliver_documents_every_refusal() {
        let doc: serde_json::Value = serde_json::from_str(&generate(Listener::Intake)).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let deliver = &doc["paths"]["/v1/webhooks/deliver"]["post"]["responses"];
        for status in [
            "202", "400", "401", "403", "404", "408", "409", "413", "422", "429", "503",
        ] {
            assert!(deliver.get(status).is_some(), "{status} missing");
        }
        for header in ["Retry-After", "RateLimit", "RateLimit-Policy"] {
            assert!(deliver["429"]["headers"].get(header).is_some(), "{header}");
        }
    }
}
