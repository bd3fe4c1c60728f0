//! What an endpoint adds to a destination: the application it belongs to
//! (one of the sender's customers), the event types it takes (exact names
//! and `prefix.*` wildcards; none given: every type), an optional filter
//! on the payload (each field given must equal the payload's), whether it
//! is disabled, and a description. A destination without an application
//! is not an endpoint: it takes the webhooks posted to it by name
//! (`X-Destination`) and no event.

use std::sync::Arc;

use serde_json::{Map, Value};

/// A destination's, an application's or a tenant's name: 1 to 64 of
/// `A-Z a-z 0-9 . _ -`.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A name the admin API makes: a [`valid_name`] other than `.` and `..`,
/// which a URL's path cannot carry as a segment (clients resolve them away
/// before sending). One made before this rule, or in the configuration,
/// still loads.
pub(crate) fn path_name(name: &str) -> bool {
    valid_name(name) && name != "." && name != ".."
}

/// The longest event type (and type pattern).
pub(crate) const MAX_TYPE_LEN: usize = 128;
/// The most event types an endpoint lists.
pub(crate) const MAX_TYPES: usize = 256;
/// The most fields a filter names.
pub(crate) const MAX_FILTER_FIELDS: usize = 32;
/// The longest description.
pub(crate) const MAX_DESCRIPTION: usize = 1024;

/// An endpoint's subscription (see the [module](self) docs).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Subscription {
    /// Its application.
    pub application: Arc<str>,
    /// The types it takes: exact names and `prefix.*`; empty: every type.
    pub event_types: Vec<String>,
    /// Its filter as given (each key a field's dotted path).
    pub filter: Option<Map<String, Value>>,
    /// Disabled: it takes no new event (what it holds is still delivered).
    pub disabled: bool,
    /// What it is, for people.
    pub description: Option<String>,
}

impl Subscription {
    /// Whether it takes events of type `kind` (its types, not whether it
    /// is disabled): what the index ([`crate::catalog::subs`]) answers
    /// without a scan.
    #[cfg(test)]
    pub(crate) fn takes_type(&self, kind: &str) -> bool {
        self.event_types.is_empty() || self.event_types.iter().any(|p| matches(p, kind))
    }

    /// Whether `payload` passes its filter: every field it names is there,
    /// equal (dotted paths reach into objects).
    pub(crate) fn takes_payload(&self, payload: &Value) -> bool {
        let Some(filter) = &self.filter else {
            return true;
        };
        filter.iter().all(|(path, want)| {
            let mut at = payload;
            for part in path.split('.') {
                match at.get(part) {
                    Some(next) => at = next,
                    None => return false,
                }
            }
            same(at, want)
        })
    }
}

/// Whether a payload's value is a filter's: numbers by value (`5` is
/// `5.0`), at any depth (in objects and arrays too), anything else as JSON
/// compares it.
fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) if a != b && (a.is_f64() || b.is_f64()) => {
            a.as_f64() == b.as_f64()
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| same(x, y)))
        }
        _ => got == want,
    }
}

/// Whether type pattern `pattern` (an exact type, `prefix.*`, or `*`)
/// takes `kind`.
#[cfg(test)]
pub(crate) fn matches(pattern: &str, kind: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some("") => true,
        Some(prefix) => kind.starts_with(prefix) && kind.len() > prefix.len(),
        None => pattern == kind,
    }
}

/// An event type: 1 to 128 of `A-Z a-z 0-9 . _ - :`, dot-separated parts
/// none empty.
pub(crate) fn check_type(kind: &str) -> Result<(), String> {
    let ok = (1..=MAX_TYPE_LEN).contains(&kind.len())
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'))
        && kind.split('.').all(|part| !part.is_empty());
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{kind:?}: an event type is 1 to {MAX_TYPE_LEN} of A-Z a-z 0-9 . _ - : (no empty part between dots)"
        )),
    }
}

/// A type pattern: an event type, `prefix.*` or `*`.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern == "*" {
        return Ok(());
    }
    let exact = pattern.strip_suffix(".*").unwrap_or(pattern);
    check_type(exact).map_err(|_| {
        format!(
            "{pattern:?}: an event type (1 to {MAX_TYPE_LEN} of A-Z a-z 0-9 . _ - :), a prefix and \
             .* (invoice.*), or *"
        )
    })
}

/// The parts of a subscription given in a destination's fields, checked:
/// each error as `(field, message)`. `None` when it names no application
/// (and nothing else of one).
pub(crate) fn check(
    application: Option<&str>,
    event_types: Option<&[String]>,
    filter: Option<&Map<String, Value>>,
    disabled: Option<bool>,
    description: Option<&str>,
    errors: &mut Vec<(&'static str, String)>,
) -> Option<Subscription> {
    let Some(application) = application else {
        for (field, given) in [
            ("event_types", event_types.is_some()),
            ("filter", filter.is_some()),
            ("disabled", disabled.is_some()),
            ("description", description.is_some()),
        ] {
            if given {
                errors.push((
                    field,
                    "belongs to an endpoint: give its application (or use /v1/applications/{app}/endpoints)".into(),
                ));
            }
        }
        return None;
    };
    let before = errors.len();
    if !valid_name(application) {
        errors.push((
            "application",
            format!("{application:?}: 1 to 64 of A-Z a-z 0-9 . _ -"),
        ));
    }
    let event_types = event_types.map(<[String]>::to_vec).unwrap_or_default();
    if event_types.len() > MAX_TYPES {
        errors.push(("event_types", format!("at most {MAX_TYPES}")));
    }
    for p in &event_types {
        if let Err(e) = check_pattern(p) {
            errors.push(("event_types", e));
        }
    }
    if let Some(f) = filter {
        if f.len() > MAX_FILTER_FIELDS {
            errors.push(("filter", format!("at most {MAX_FILTER_FIELDS} fields")));
        }
        if f.keys()
            .any(|k| k.is_empty() || k.split('.').any(str::is_empty))
        {
            errors.push((
                "filter",
                "a field's path is its names joined by dots, none empty".into(),
            ));
        }
    }
    if description.is_some_and(|d| d.len() > MAX_DESCRIPTION) {
        errors.push(("description", format!("at most {MAX_DESCRIPTION} bytes")));
    }
    (errors.len() == before).then(|| Subscription {
        application: Arc::from(application),
        event_types,
        filter: filter.cloned(),
        disabled: disabled.unwrap_or(false),
        description: description.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_api_makes_are_path_segments() {
        for good in ["acme", "a", ".a", "..a", "...", "a..", &"x".repeat(64)] {
            assert!(valid_name(good) && path_name(good), "{good}");
        }
        for dots in [".", ".."] {
            assert!(valid_name(dots) && !path_name(dots), "{dots}");
        }
        for bad in ["", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(!valid_name(bad) && !path_name(bad), "{bad}");
        }
    }

    #[test]
    fn types_and_wildcards() {
        assert!(matches("invoice.paid", "invoice.paid"));
        assert!(!matches("invoice.paid", "invoice.paid.late"));
        assert!(matches("invoice.*", "invoice.paid"));
        assert!(matches("invoice.*", "invoice.paid.late"));
        assert!(!matches("invoice.*", "invoice"));
        assert!(!matches("invoice.*", "invoices.paid"));
        assert!(matches("*", "anything"));
        assert!(check_pattern("invoice.*").is_ok() && check_pattern("*").is_ok());
        for bad in ["", "a..b", ".a", "a.", "in voice", "a.*.b", "*.a"] {
            assert!(check_pattern(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_filter_compares_fields_by_path() {
        let mut errors = Vec::new();
        let f = json!({"status": "paid", "customer.tier": "gold"});
        let s = check(
            Some("acme"),
            Some(&["invoice.*".into()]),
            f.as_object(),
            None,
            None,
            &mut errors,
        )
        .unwrap();
        assert!(s.takes_payload(&json!({"status": "paid", "customer": {"tier": "gold"}})));
        assert!(!s.takes_payload(&json!({"status": "paid", "customer": {"tier": "silver"}})));
        assert!(!s.takes_payload(&json!({"status": "paid"})));
        // Numbers by value, however they are written.
        let amount = |f: Value| {
            let mut errors = Vec::new();
            check(Some("acme"), None, f.as_object(), None, None, &mut errors).unwrap()
        };
        assert!(amount(json!({"amount": 5})).takes_payload(&json!({"amount": 5.0})));
        assert!(amount(json!({"amount": 5.0})).takes_payload(&json!({"amount": 5})));
        assert!(amount(json!({"amount": -2})).takes_payload(&json!({"amount": -2.0})));
        assert!(!amount(json!({"amount": 5})).takes_payload(&json!({"amount": 5.5})));
        assert!(!amount(json!({"amount": 5})).takes_payload(&json!({"amount": "5"})));
        // ...in objects and arrays too.
        let deep = amount(json!({"o": {"k": 1, "l": [1, 2.0]}}));
        assert!(deep.takes_payload(&json!({"o": {"l": [1.0, 2], "k": 1.0}})));
        assert!(!deep.takes_payload(&json!({"o": {"k": 1.0, "l": [1, 2, 3]}})));
        assert!(!deep.takes_payload(&json!({"o": {"k": 1.0, "l": [1, 2], "m": 0}})));
        assert!(!deep.takes_payload(&json!({"o": {"k": 2, "l": [1, 2]}})));
        assert!(s.takes_type("invoice.paid") && !s.takes_type("user.created"));
        // A field named twice is matched on its last value, as most
        // parsers (JavaScript's, Python's, Go's) read it.
        let twice = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        let tier = r#""customer": {"tier": "gold"}"#;
        assert!(s.takes_payload(&twice(&format!(
            r#"{{"status": "void", "status": "paid", {tier}}}"#
        ))));
        assert!(!s.takes_payload(&twice(&format!(
            r#"{{"status": "paid", "status": "void", {tier}}}"#
        ))));
    }

    #[test]
    fn an_endpoints_fields_need_an_application() {
        let mut errors = Vec::new();
        assert!(
            check(
                None,
                Some(&["a".into()]),
                None,
                Some(true),
                None,
                &mut errors
            )
            .is_none()
        );
        let fields: Vec<_> = errors.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["event_types", "disabled"]);
    }
}
