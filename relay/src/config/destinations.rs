//! Destinations: the receivers the relay delivers to, and the only ones.
//!
//! They come from `[[destinations]]` in the `--config` file, a
//! `--destinations FILE` (JSON or TOML), `--destination NAME=URL` flags and
//! the `downstream` setting (the destination `default`); all of them add up.
//! A request names one with the destination header; the relay never
//! delivers to a URL a request supplies.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, Origin};
use super::subscription::valid_name;
use super::value::{HttpUrl, Value, quoted};

/// The name `downstream` gives its destination.
pub(crate) const DEFAULT_NAME: &str = "default";

/// The keys a destination table may have.
pub(super) const FIELDS: [&str; 13] = [
    "name",
    "url",
    "rate",
    "ceiling",
    "budget",
    "secret",
    "previous_secret",
    "metrics",
    "application",
    "event_types",
    "filter",
    "disabled",
    "description",
];

/// One configured receiver.
#[derive(Clone, Debug)]
pub(crate) struct Destination {
    /// 1 to 64 of `A-Z a-z 0-9 . _ -`.
    pub name: String,
    /// Where its webhooks are POSTed.
    pub url: HttpUrl,
    /// Its drain rate, if not `drain_rate`.
    pub rate: Option<f64>,
    /// Its highest rate (the AIMD ceiling), if not the set's.
    pub ceiling: Option<f64>,
    /// Its latency budget, if not `latency_budget`.
    pub budget: Option<Duration>,
    /// A Standard Webhooks signing secret: deliveries are signed.
    pub secret: Option<Secret>,
    /// The secret being replaced, while receivers move to `secret`: each
    /// delivery is signed with both (`webhook-signature: v1,NEW v1,OLD`).
    pub previous_secret: Option<Secret>,
    /// Whether it has its own metric series (`None`: as its origin
    /// decides, see [`own_series`](Self::own_series)).
    pub metrics: Option<bool>,
    /// With an application: an endpoint, the events it takes.
    pub endpoint: Option<Arc<super::subscription::Subscription>>,
    /// Where it was configured.
    pub origin: Origin,
}

/// A Standard Webhooks secret (`whsec_` + base64 of the key); never shown.
/// One pointer: a destination's two `Option<Secret>`s cost 16 bytes, not
/// 64, whether it has secrets or not.
#[derive(Clone)]
pub(crate) struct Secret(Arc<SecretParts>);

struct SecretParts {
    key: Arc<[u8]>,
    /// As given (what the registry or the fleet's map keeps).
    text: Box<str>,
}

impl Secret {
    /// Reads `whsec_<base64>` (the prefix is optional; padding optional).
    pub(crate) fn parse(text: &str) -> Result<Secret, String> {
        use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
        const LENIENT: GeneralPurpose = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new()
                .with_decode_padding_mode(DecodePaddingMode::Indifferent)
                .with_decode_allow_trailing_bits(true),
        );
        let b64 = text.strip_prefix("whsec_").unwrap_or(text);
        let key = LENIENT
            .decode(b64)
            .map_err(|e| format!("secret is not base64 after whsec_: {e}"))?;
        if key.is_empty() {
            return Err("secret is empty".into());
        }
        Ok(Secret(Arc::new(SecretParts {
            key: key.into(),
            text: Box::from(text),
        })))
    }

    /// The signing key's bytes.
    pub(crate) fn key(&self) -> Arc<[u8]> {
        self.0.key.clone()
    }

    /// The secret as it was given.
    pub(crate) fn text(&self) -> &str {
        &self.0.text
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

/// The fields of one destination before they are checked, as a file, the
/// admin API's `PUT` body and its registry give them.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Fields {
    /// 1 to 64 of `A-Z a-z 0-9 . _ -` (the API takes it from the path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `http://` or `https://`.
    pub url: Option<String>,
    /// Webhooks/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Webhooks/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<f64>,
    /// A duration, e.g. `"2s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// `whsec_` + base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `whsec_` + base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret: Option<String>,
    /// Its own metric series, or summed into `_other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<bool>,
    /// The application whose endpoint it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// The event types it takes (exact, `prefix.*`); absent: every type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// Equality on the payload's fields (dotted paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// Takes no new event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// What it is, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Its secrets redacted.
impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |s: &Option<String>| s.as_ref().map(|_| "(redacted)");
        f.debug_struct("Fields")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("rate", &self.rate)
            .field("ceiling", &self.ceiling)
            .field("budget", &self.budget)
            .field("secret", &redacted(&self.secret))
            .field("previous_secret", &redacted(&self.previous_secret))
            .field("metrics", &self.metrics)
            .field("application", &self.application)
            .field("event_types", &self.event_types)
            .field("filter", &self.filter)
            .field("disabled", &self.disabled)
            .field("description", &self.description)
            .finish()
    }
}

impl Fields {
    /// The destination, or what is wrong with it as one line (`field:
    /// message`, joined by `; `): how the admin API reports a body.
    pub(crate) fn check_body(self, origin: &Origin) -> Result<Destination, String> {
        let mut errors = Vec::new();
        self.check("destination", origin, &mut errors)
            .ok_or_else(|| {
                errors
                    .iter()
                    .map(|e| {
                        let field = e.key.strip_prefix("destination.").unwrap_or(&e.key);
                        format!("{field}: {}", e.message)
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
    }

    /// Each field given, checked on its own (needing no other field and
    /// nothing stored): what is wrong, as `field: message` joined by `; `.
    /// The admin API checks a body's shape so, before any precondition.
    pub(crate) fn check_each(&self) -> Result<(), String> {
        let errors = self.field_errors().1;
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors
                .iter()
                .map(|(field, e)| format!("{field}: {e}"))
                .collect::<Vec<_>>()
                .join("; ")),
        }
    }

    /// Each field given, read: the values, and what is wrong with each
    /// that does not read.
    #[allow(clippy::type_complexity)]
    fn field_errors(
        &self,
    ) -> (
        (
            Option<HttpUrl>,
            Option<Duration>,
            Option<Secret>,
            Option<Secret>,
            Option<Arc<super::subscription::Subscription>>,
        ),
        Vec<(&'static str, String)>,
    ) {
        let mut errors = Vec::new();
        let url = match self.url.as_deref().map(HttpUrl::from_text) {
            Some(Ok(u)) => Some(u),
            Some(Err(e)) => {
                errors.push(("url", e));
                None
            }
            None => None,
        };
        for (field, rate) in [("rate", self.rate), ("ceiling", self.ceiling)] {
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                errors.push((field, "must be a number above 0".into()));
            }
        }
        let budget = match self.budget.as_deref().map(Duration::from_text) {
            Some(Ok(b)) if b.is_zero() => {
                errors.push(("budget", "must be above 0".into()));
                None
            }
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                errors.push(("budget", e));
                None
            }
            None => None,
        };
        let mut secret_of = |field: &'static str, text: Option<&str>| match text.map(Secret::parse)
        {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                errors.push((field, e));
                None
            }
            None => None,
        };
        let secret = secret_of("secret", self.secret.as_deref());
        let previous_secret = secret_of("previous_secret", self.previous_secret.as_deref());
        let endpoint = super::subscription::check(
            self.application.as_deref(),
            self.event_types.as_deref(),
            self.filter.as_ref(),
            self.disabled,
            self.description.as_deref(),
            &mut errors,
        )
        .map(Arc::new);
        ((url, budget, secret, previous_secret, endpoint), errors)
    }

    /// The destination, or what is wrong with each field (keys `at.field`).
    pub(crate) fn check(
        self,
        at: &str,
        origin: &Origin,
        errors: &mut Vec<ConfigError>,
    ) -> Option<Destination> {
        let before = errors.len();
        let mut fail = |field: &str, msg: String| {
            errors.push(ConfigError::new(
                format!("{at}.{field}"),
                Some(origin.clone()),
                msg,
            ));
        };
        let name = match &self.name {
            Some(n) if valid_name(n) => Some(n.clone()),
            Some(n) => {
                fail("name", format!("{n:?}: 1 to 64 of A-Z a-z 0-9 . _ -"));
                None
            }
            None => {
                fail("name", "missing".into());
                None
            }
        };
        let ((url, budget, secret, previous_secret, endpoint), wrong) = self.field_errors();
        for (field, e) in wrong {
            fail(field, e);
        }
        if self.url.is_none() {
            fail("url", "missing".into());
        }
        if self.previous_secret.is_some() && self.secret.is_none() {
            fail(
                "previous_secret",
                "needs secret beside it (the new one; previous_secret is the one being replaced)"
                    .into(),
            );
        }
        if errors.len() > before {
            return None;
        }
        Some(Destination {
            name: name?,
            url: url?,
            rate: self.rate,
            ceiling: self.ceiling,
            budget,
            secret,
            previous_secret,
            metrics: self.metrics,
            endpoint,
            origin: origin.clone(),
        })
    }
}

/// `[[destinations]]` of a TOML document (the `--config` file or a
/// `--destinations` file): each table checked, errors with their line.
pub(super) fn from_toml(
    value: &toml::Spanned<DeValue<'_>>,
    path: &Path,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<Destination> {
    let Some(items) = value.get_ref().as_array() else {
        let at = Origin::at(path, text, value.span().start);
        let found = value.get_ref().type_str();
        errors.push(ConfigError::new(
            "destinations",
            Some(at),
            format!("expected an array of tables ([[destinations]]), found {found}"),
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("destinations[{i}]");
        let origin = Origin::at(path, text, item.span().start);
        let Some(table) = item.get_ref().as_table() else {
            errors.push(ConfigError::new(at, Some(origin), "expected a table"));
            continue;
        };
        let fields = fields_of(table, &at, path, text, errors);
        out.extend(fields.and_then(|f| f.check(&at, &origin, errors)));
    }
    out
}

/// A TOML table's fields, each read with its line on error.
fn fields_of(
    table: &DeTable<'_>,
    at: &str,
    path: &Path,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Fields> {
    let before = errors.len();
    let mut f = Fields::default();
    for (key, value) in table.iter() {
        let origin = Origin::at(path, text, key.span().start);
        let key = key.get_ref().as_ref();
        let v = value.get_ref();
        let read = match key {
            "name" => String::from_toml(v).map(|s| f.name = Some(s)),
            "url" => String::from_toml(v).map(|s| f.url = Some(s)),
            "rate" => f64::from_toml(v).map(|r| f.rate = Some(r)),
            "ceiling" => f64::from_toml(v).map(|r| f.ceiling = Some(r)),
            "budget" => String::from_toml(v).map(|s| f.budget = Some(s)),
            "secret" => String::from_toml(v).map(|s| f.secret = Some(s)),
            "previous_secret" => String::from_toml(v).map(|s| f.previous_secret = Some(s)),
            "metrics" => bool::from_toml(v).map(|b| f.metrics = Some(b)),
            "application" => String::from_toml(v).map(|s| f.application = Some(s)),
            "event_types" => strings(v).map(|t| f.event_types = Some(t)),
            "filter" => json_of_toml(v).and_then(|j| match j {
                serde_json::Value::Object(m) => {
                    f.filter = Some(m);
                    Ok(())
                }
                _ => Err("a table of fields and the values they must have".into()),
            }),
            "disabled" => bool::from_toml(v).map(|b| f.disabled = Some(b)),
            "description" => String::from_toml(v).map(|s| f.description = Some(s)),
            other => Err(format!(
                "unknown key {other:?} (a destination has {})",
                FIELDS.join(", ")
            )),
        };
        if let Err(e) = read {
            errors.push(ConfigError::new(format!("{at}.{key}"), Some(origin), e));
        }
    }
    (errors.len() == before).then_some(f)
}

/// A `--destinations FILE`: TOML (`[[destinations]]`, for a `.toml` file or
/// text that is not JSON) or JSON (an array of objects, or
/// `{"destinations": [...]}`).
pub(super) fn from_file(
    path: &Path,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<Destination> {
    let toml_named = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if !toml_named {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(_) => return from_json(path, text, errors),
            Err(e) if path.extension().is_some_and(|e| e == "json") => {
                let at = Origin::File {
                    path: path.to_owned(),
                    line: Some(e.line()),
                };
                errors.push(ConfigError::new("destinations", Some(at), e.to_string()));
                return Vec::new();
            }
            Err(_) => {} // not JSON: read as TOML
        }
    }
    let (doc, parse_errors) = DeTable::parse_recoverable(text);
    for e in parse_errors {
        let at = Origin::at(path, text, e.span().map_or(0, |s| s.start));
        errors.push(ConfigError::new(
            "destinations",
            Some(at),
            e.message().to_owned(),
        ));
    }
    let mut out = Vec::new();
    for (key, value) in doc.get_ref().iter() {
        match key.get_ref().as_ref() {
            "destinations" => out.extend(from_toml(value, path, text, errors)),
            other => errors.push(ConfigError::new(
                other,
                Some(Origin::at(path, text, key.span().start)),
                "unknown key: a destinations file holds only [[destinations]] tables",
            )),
        }
    }
    out
}

/// The JSON form of a destinations file.
fn from_json(path: &Path, text: &str, errors: &mut Vec<ConfigError>) -> Vec<Destination> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum File {
        List(Vec<Fields>),
        Object { destinations: Vec<Fields> },
    }
    let origin = Origin::File {
        path: path.to_owned(),
        line: None,
    };
    let list = match serde_json::from_str::<File>(text) {
        Ok(File::List(l)) | Ok(File::Object { destinations: l }) => l,
        Err(_) => {
            // Say which entry is wrong: read them one by one.
            let entries: Vec<serde_json::Value> =
                match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(serde_json::Value::Array(a)) => a,
                    Ok(serde_json::Value::Object(mut o)) => match o.remove("destinations") {
                        Some(serde_json::Value::Array(a)) => a,
                        _ => Vec::new(),
                    },
                    _ => Vec::new(),
                };
            let mut reported = false;
            for (i, entry) in entries.into_iter().enumerate() {
                if let Err(e) = serde_json::from_value::<Fields>(entry) {
                    errors.push(ConfigError::new(
                        format!("destinations[{i}]"),
                        Some(origin.clone()),
                        e.to_string(),
                    ));
                    reported = true;
                }
            }
            if !reported {
                errors.push(ConfigError::new(
                    "destinations",
                    Some(origin),
                    "expected [{\"name\", \"url\", ...}] or {\"destinations\": [...]}",
                ));
            }
            return Vec::new();
        }
    };
    list.into_iter()
        .enumerate()
        .filter_map(|(i, f)| f.check(&format!("destinations[{i}]"), &origin, errors))
        .collect()
}

/// `--destination NAME=URL`.
pub(super) fn from_flag(text: &str, errors: &mut Vec<ConfigError>) -> Option<Destination> {
    let origin = Origin::Flag("--destination".into());
    let Some((name, url)) = text.split_once('=') else {
        errors.push(ConfigError::new(
            "destination",
            Some(origin),
            format!("{text:?}: expected NAME=URL"),
        ));
        return None;
    };
    let fields = Fields {
        name: Some(name.trim().to_owned()),
        url: Some(url.trim().to_owned()),
        ..Fields::default()
    };
    fields.check("destination", &origin, errors)
}

/// The destination `downstream` makes.
pub(super) fn from_downstream(url: &HttpUrl, origin: Origin) -> Destination {
    Destination {
        name: DEFAULT_NAME.to_owned(),
        url: url.clone(),
        rate: None,
        ceiling: None,
        budget: None,
        secret: None,
        previous_secret: None,
        metrics: None,
        endpoint: None,
        origin,
    }
}

/// A JSON value as TOML, inline (a null, which TOML has no word for, as
/// the string "null").
fn toml_inline(v: &serde_json::Value) -> String {
    use serde_json::Value as J;
    match v {
        J::Null => quoted("null"),
        J::Bool(b) => b.to_string(),
        J::Number(n) => n.to_string(),
        J::String(s) => quoted(s),
        J::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        J::Object(o) => format!(
            "{{ {} }}",
            o.iter()
                .map(|(k, v)| format!("{} = {}", quoted(k), toml_inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An array of strings in a TOML table.
fn strings(v: &DeValue<'_>) -> Result<Vec<String>, String> {
    let Some(items) = v.as_array() else {
        return Err(format!(
            "expected an array of strings, found {}",
            v.type_str()
        ));
    };
    items
        .iter()
        .map(|i| String::from_toml(i.get_ref()))
        .collect()
}

/// A TOML value as JSON (a filter's values).
fn json_of_toml(v: &DeValue<'_>) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Integer(_) | DeValue::Float(_) => {
            let n = f64::from_toml(v)?;
            serde_json::Number::from_f64(n).map_or(J::Null, J::Number)
        }
        DeValue::Array(a) => J::Array(
            a.iter()
                .map(|i| json_of_toml(i.get_ref()))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(t) => J::Object(
            t.iter()
                .map(|(k, i)| Ok((k.get_ref().to_string(), json_of_toml(i.get_ref())?)))
                .collect::<Result<_, String>>()?,
        ),
        DeValue::Datetime(d) => J::String(d.to_string()),
    })
}

/// Names configured twice.
pub(super) fn check_unique(all: &[Destination], errors: &mut Vec<ConfigError>) {
    for (i, d) in all.iter().enumerate() {
        if let Some(first) = all[..i].iter().find(|e| e.name == d.name) {
            let why = match d.name.as_str() {
                DEFAULT_NAME => " (downstream is the destination \"default\")".to_owned(),
                _ => String::new(),
            };
            errors.push(ConfigError::new(
                format!("destinations.{}", d.name),
                Some(d.origin.clone()),
                format!("configured twice, first at {}{why}", first.origin),
            ));
        }
    }
}

impl Destination {
    /// The fields it was made from (its secrets included), as a state
    /// file or the fleet's map keeps them. A configured destination's
    /// series are stated (`metrics`: true when its origin gave them), so a
    /// `PATCH` of its rate, which makes it the admin API's, keeps them.
    pub(crate) fn fields(&self) -> Fields {
        Fields {
            name: Some(self.name.clone()),
            url: Some(self.url.as_str().to_owned()),
            rate: self.rate,
            ceiling: self.ceiling,
            budget: self
                .budget
                .map(|b| humantime::format_duration(b).to_string()),
            secret: self.secret.as_ref().map(|s| s.text().to_owned()),
            previous_secret: self.previous_secret.as_ref().map(|s| s.text().to_owned()),
            metrics: self.metrics.or(self.own_series().then_some(true)),
            application: self.endpoint.as_ref().map(|e| e.application.to_string()),
            event_types: self
                .endpoint
                .as_ref()
                .filter(|e| !e.event_types.is_empty())
                .map(|e| e.event_types.clone()),
            filter: self.endpoint.as_ref().and_then(|e| e.filter.clone()),
            disabled: self.endpoint.as_ref().filter(|e| e.disabled).map(|_| true),
            description: self.endpoint.as_ref().and_then(|e| e.description.clone()),
        }
    }

    /// Whether it has its own metric series (label `destination` = its
    /// name) rather than being summed into `_other`: as `metrics` says,
    /// else yes for a destination configured (a file, a flag, a variable)
    /// and no for one made through the admin API (in the fleet too), the
    /// many, so a scrape stays small however many there are.
    pub(crate) fn own_series(&self) -> bool {
        self.metrics
            .unwrap_or(!matches!(self.origin, Origin::Api(_) | Origin::Fleet(_)))
    }

    /// The destination as a `[[destinations]]` table, its secret redacted.
    pub(crate) fn shown(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("name", quoted(&self.name)), ("url", self.url.show())];
        out.extend(self.rate.map(|r| ("rate", r.show())));
        out.extend(self.ceiling.map(|c| ("ceiling", c.show())));
        out.extend(self.budget.map(|b| ("budget", b.show())));
        out.extend(
            self.secret
                .as_ref()
                .map(|_| ("secret", quoted("(redacted)"))),
        );
        out.extend(
            self.previous_secret
                .as_ref()
                .map(|_| ("previous_secret", quoted("(redacted)"))),
        );
        out.extend(self.metrics.map(|m| ("metrics", m.show())));
        if let Some(e) = &self.endpoint {
            out.push(("application", quoted(&e.application)));
            if !e.event_types.is_empty() {
                let types: Vec<String> = e.event_types.iter().map(|t| quoted(t)).collect();
                out.push(("event_types", format!("[{}]", types.join(", "))));
            }
            if let Some(f) = &e.filter {
                out.push(("filter", toml_inline(&serde_json::Value::Object(f.clone()))));
            }
            if e.disabled {
                out.push(("disabled", "true".to_owned()));
            }
            if let Some(d) = &e.description {
                out.push(("description", quoted(d)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_toml_files_read_alike() {
        let json = r#"[{"name": "a", "url": "http://127.0.0.1:1/x", "rate": 5, "budget": "1s"}]"#;
        let toml = "[[destinations]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/x\"\nrate = 5\nbudget = \"1s\"\n";
        let mut errors = Vec::new();
        let j = from_file(Path::new("d.json"), json, &mut errors);
        let t = from_file(Path::new("d.toml"), toml, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(j[0].shown(), t[0].shown());
        assert_eq!(t[0].budget, Some(Duration::from_secs(1)));
        // Without an extension: JSON when it is JSON, else TOML.
        assert_eq!(from_file(Path::new("d"), toml, &mut errors).len(), 1);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn every_bad_field_is_named_with_its_line() {
        let toml = "[[destinations]]\nname = \"ok\"\nurl = \"http://x/\"\n\n[[destinations]]\nname = \"b c\"\nurl = \"ftp://x\"\nrate = -1\ncolour = \"red\"\nsecret = \"whsec_!!\"\n";
        let mut errors = Vec::new();
        let got = from_file(Path::new("d.toml"), toml, &mut errors);
        assert_eq!(got.len(), 1);
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 1, "{shown:?}"); // the unknown key stops that table first
        assert!(
            shown[0].starts_with("d.toml:9: destinations[1].colour: unknown key"),
            "{shown:?}"
        );
        let toml = toml.replace("colour = \"red\"\n", "");
        let mut errors = Vec::new();
        from_file(Path::new("d.toml"), &toml, &mut errors);
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "destinations[1].name",
                "destinations[1].url",
                "destinations[1].rate",
                "destinations[1].secret"
            ]
        );
        assert!(
            errors[0].to_string().starts_with("d.toml:5: "),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn flags_and_duplicates() {
        let mut errors = Vec::new();
        let a = from_flag("a=http://127.0.0.1:9/", &mut errors).unwrap();
        assert!(from_flag("nourl", &mut errors).is_none());
        assert_eq!(errors.len(), 1);
        let url = HttpUrl::from_text("http://127.0.0.1:9/").unwrap();
        let all = vec![
            from_downstream(&url, Origin::Default),
            a.clone(),
            Destination {
                name: "default".into(),
                ..a
            },
        ];
        let mut errors = Vec::new();
        check_unique(&all, &mut errors);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("downstream"), "{}", errors[0]);
    }
}
