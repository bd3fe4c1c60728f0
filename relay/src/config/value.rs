//! The types a setting can have, and how each is read from text (a flag,
//! an environment variable) and from a TOML value, and shown again.
//!
//! Reading from text and from TOML go through one trait so a setting's type
//! says once what it accepts: `drain_rate = 200`, `--drain-rate 200` and
//! `DRIPFEED_DRAIN_RATE=200` are the same number. A duration is a string in
//! every source (`"2s"`, `"150ms"`), as `humantime` writes it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toml::de::DeValue;

/// A type a setting can have.
pub(crate) trait Value: Sized + Clone + Send + Sync + 'static {
    /// What the type accepts, for error messages ("a number").
    const KIND: &'static str;
    /// A switch: on the command line `--name` alone means `true`.
    const SWITCH: bool = false;
    /// Read from a flag's or a variable's text.
    fn from_text(text: &str) -> Result<Self, String>;
    /// Read from a TOML value (strings are read as text unless the type says otherwise).
    fn from_toml(value: &DeValue<'_>) -> Result<Self, String> {
        match value {
            DeValue::String(s) => Self::from_text(s),
            other => Err(expected(Self::KIND, other)),
        }
    }
    /// The value as a TOML literal, secrets and passwords redacted.
    fn show(&self) -> String;
    /// A list flag given again (`repeat` in the settings table): the items
    /// of both; any other setting keeps the later value.
    fn join_repeated(self, more: Self) -> Self {
        more
    }
}

/// "expected a number, found a string".
pub(crate) fn expected(kind: &str, found: &DeValue<'_>) -> String {
    format!("expected {kind}, found {}", found.type_str())
}

/// A TOML basic string for `s` (JSON's escapes are TOML's).
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// For clap: a flag's text read as the setting's type.
pub(crate) fn parse_text<T: Value>(text: &str) -> Result<T, String> {
    T::from_text(text)
}

/// An integer literal of any radix, as TOML wrote it.
fn toml_integer<T: TryFrom<i128>>(value: &DeValue<'_>, kind: &str) -> Result<T, String> {
    match value {
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("expected {kind}, found {}", i.as_str())),
        other => Err(expected(kind, other)),
    }
}

impl Value for f64 {
    const KIND: &'static str = "a number";
    fn from_text(text: &str) -> Result<Self, String> {
        text.trim()
            .parse::<f64>()
            .map_err(|_| format!("expected {}, found {text:?}", Self::KIND))
    }
    fn from_toml(value: &DeValue<'_>) -> Result<Self, String> {
        match value {
            DeValue::Float(f) => Self::from_text(f.as_str()),
            DeValue::Integer(_) => toml_integer::<i64>(value, Self::KIND).map(|n| n as f64),
            other => Err(expected(Self::KIND, other)),
        }
    }
    fn show(&self) -> String {
        format!("{self}")
    }
}

macro_rules! whole_numbers {
    ($($t:ty),+) => {$(
        impl Value for $t {
            const KIND: &'static str = "a whole number";
            fn from_text(text: &str) -> Result<Self, String> {
                text.trim()
                    .parse::<$t>()
                    .map_err(|_| format!("expected {}, found {text:?}", Self::KIND))
            }
            fn from_toml(value: &DeValue<'_>) -> Result<Self, String> {
                toml_integer(value, Self::KIND)
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )+};
}
whole_numbers!(u32, u64, usize);

impl Value for bool {
    const KIND: &'static str = "true or false";
    const SWITCH: bool = true;
    fn from_text(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(format!("expected {}, found {text:?}", Self::KIND)),
        }
    }
    fn from_toml(value: &DeValue<'_>) -> Result<Self, String> {
        match value {
            DeValue::Boolean(b) => Ok(*b),
            other => Err(expected(Self::KIND, other)),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Value for String {
    const KIND: &'static str = "a string";
    fn from_text(text: &str) -> Result<Self, String> {
        Ok(text.to_owned())
    }
    fn show(&self) -> String {
        quoted(self)
    }
}

impl Value for PathBuf {
    const KIND: &'static str = "a path";
    fn from_text(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("expected a path, found an empty string".into());
        }
        Ok(PathBuf::from(text))
    }
    fn show(&self) -> String {
        quoted(&self.to_string_lossy())
    }
}

impl Value for SocketAddr {
    const KIND: &'static str = "an address such as \"127.0.0.1:8080\"";
    fn from_text(text: &str) -> Result<Self, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("expected {}, found {text:?}", Self::KIND))
    }
    fn show(&self) -> String {
        quoted(&self.to_string())
    }
}

impl Value for Duration {
    const KIND: &'static str = "a duration such as \"2s\" or \"150ms\"";
    fn from_text(text: &str) -> Result<Self, String> {
        humantime::parse_duration(text.trim())
            .map_err(|e| format!("expected {}, found {text:?} ({e})", Self::KIND))
    }
    fn show(&self) -> String {
        quoted(&humantime::format_duration(*self).to_string())
    }
}

/// A small enum read from its kebab-case names.
macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name { $($(#[$vdoc])* $variant),+ }

        impl Value for $name {
            const KIND: &'static str = concat!("one of", $(" \"", $text, "\""),+);
            fn from_text(text: &str) -> Result<Self, String> {
                match text.trim() {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!("expected {}, found {text:?}", Self::KIND)),
                }
            }
            fn show(&self) -> String {
                match self { $($name::$variant => quoted($text)),+ }
            }
        }
    };
}

named_enum!(
    /// What happens when a destination's queue is full.
    OverflowPolicy {
        /// The arriving webhook is refused (503).
        TailDrop = "tail-drop",
        /// The oldest queued webhook goes to the dead-letter file.
        HeadDrop = "head-drop",
        /// The arriving webhook goes to the dead-letter file (202 "deferred").
        DeadLetter = "dead-letter",
    }
);

impl OverflowPolicy {
    /// The library's policy of the same name.
    pub(crate) fn policy(self) -> dripfeed::Overflow {
        match self {
            OverflowPolicy::TailDrop => dripfeed::Overflow::TailDrop,
            OverflowPolicy::HeadDrop => dripfeed::Overflow::HeadDrop,
            OverflowPolicy::DeadLetter => dripfeed::Overflow::DeadLetter,
        }
    }
}

named_enum!(
    /// Where accepted webhooks wait for delivery.
    QueueKind {
        /// In this relay, journaled on its disk.
        Local = "local",
        /// In Redis Streams, shared by every relay with the same `redis`:
        /// a node that dies loses nothing, the others deliver its webhooks.
        Redis = "redis",
    }
);

named_enum!(
    /// What a shared store's outage does.
    FailureMode {
        /// Keep going on a local share.
        Open = "open",
        /// Pause deliveries, or refuse tenants with 503.
        Closed = "closed",
    }
);

named_enum!(
    /// What a fleet's Redis keeps of what it acknowledged, as the operator
    /// accepts it (`redis_durability`).
    RedisDurability {
        /// Every write fsynced before it is acknowledged (`appendfsync always`).
        Always = "always",
        /// The append-only file fsynced every second.
        Everysec = "everysec",
        /// Nothing promised: no append-only file, or keys evicted.
        None = "none",
    }
);

named_enum!(
    /// What the relay does with its data directory, or a file in it, that
    /// others may read or write (`file_modes`).
    ModePolicy {
        /// Make it owner-only (0700 a directory, 0600 a file) and warn.
        Fix = "fix",
        /// Refuse to start (or to open it), naming it and its mode.
        Refuse = "refuse",
        /// Leave it as it is, with a warning (permissions managed elsewhere).
        Warn = "warn",
    }
);

named_enum!(
    /// How log lines are written to stderr.
    LogFormat {
        /// Human-readable lines.
        Text = "text",
        /// One JSON object per line.
        Json = "json",
    }
);

impl FailureMode {
    /// The library's failure mode: open keeps `1 / fleet_size` of a shared
    /// limit (at least one relay is assumed).
    pub(crate) fn failure(self, fleet_size: u32) -> dripfeed::global::Failure {
        match self {
            FailureMode::Open => dripfeed::global::Failure::FailOpen {
                local_share: 1.0 / f64::from(fleet_size.max(1)),
            },
            FailureMode::Closed => dripfeed::global::Failure::FailClosed,
        }
    }
}

/// The URI an HTTP request to `url` names (scheme, host, port, path and
/// query: no user info, no fragment), or `None` when a request cannot name
/// its host (a host the URL standard allows, such as `a{b}`, is not a
/// request URI's).
pub(crate) fn request_uri(url: &reqwest::Url) -> Option<axum::http::Uri> {
    let mut bare = url.clone();
    bare.set_username("").ok()?;
    bare.set_password(None).ok()?;
    bare.set_fragment(None);
    bare.as_str().parse().ok()
}

/// An `http://` or `https://` URL a webhook may be delivered to.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl(String);

impl HttpUrl {
    /// The URL as given.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
}

impl Value for HttpUrl {
    const KIND: &'static str = "an http:// or https:// URL";
    fn from_text(text: &str) -> Result<Self, String> {
        let text = text.trim();
        redacted(text)?;
        let url = reqwest::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{text:?} is not http:// or https://"));
        }
        if request_uri(&url).is_none() {
            // A host such as `a{b}` is a URL's but not an HTTP request's.
            return Err(format!(
                "{} cannot be delivered to: an HTTP request cannot name its host",
                quoted(&redact_url(text))
            ));
        }
        Ok(HttpUrl(text.to_owned()))
    }
    fn show(&self) -> String {
        quoted(&redact_url(&self.0))
    }
}

/// The address of a store (Redis, PostgreSQL): shown without its password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct StoreUrl(String);

impl StoreUrl {
    /// The address as given, password included.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
}

impl Value for StoreUrl {
    const KIND: &'static str = "a URL";
    fn from_text(text: &str) -> Result<Self, String> {
        match text.trim() {
            "" => Err("expected a URL, found an empty string".into()),
            t => redacted(t).map(|()| StoreUrl(t.to_owned())),
        }
    }
    fn show(&self) -> String {
        quoted(&redact_url(&self.0))
    }
}

/// Refuses a URL whose password is `***`, as [`redact_url`] shows one:
/// `print-config`'s output read back would use it as the password.
fn redacted(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let pair = lower
        .match_indices("password=***")
        .any(|(at, m)| matches!(lower[at + m.len()..].chars().next(), None | Some('&' | ' ')));
    match pair || url.contains(":***@") {
        true => Err(format!(
            "{} has the password print-config shows in place of one (***): write the real one",
            quoted(&redact_url(url))
        )),
        false => Ok(()),
    }
}

/// `url` with any password replaced by `***`: in a URL's user info, or a
/// `password=` pair of a PostgreSQL key/value string.
pub(crate) fn redact_url(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("redis+sentinel://") {
        // Sentinels separated by commas: no URL parser takes the hosts.
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let rest = match rest.rsplit_once('@') {
            Some((auth, hosts)) => match auth.split_once(':') {
                Some((user, _)) => format!("{user}:***@{hosts}"),
                None => format!("{auth}@{hosts}"),
            },
            None => rest.to_owned(),
        };
        let query: Vec<String> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.ends_with("password") => format!("{k}=***"),
                _ => p.to_owned(),
            })
            .collect();
        return match query.is_empty() {
            true => format!("redis+sentinel://{rest}"),
            false => format!("redis+sentinel://{rest}?{}", query.join("&")),
        };
    }
    if url.contains(',') && url.matches("://").count() > 1 {
        // A cluster's nodes.
        return url.split(',').map(redact_url).collect::<Vec<_>>().join(",");
    }
    if let Ok(mut parsed) = reqwest::Url::parse(url) {
        if parsed.password().is_some() && parsed.set_password(Some("***")).is_ok() {
            return parsed.to_string();
        }
        return url.to_owned();
    }
    url.split(' ')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_is_shown_without_its_passwords() {
        assert_eq!(
            redact_url("redis+sentinel://app:s3cret@h1:1,h2:2/hooks?sentinel_password=x"),
            "redis+sentinel://app:***@h1:1,h2:2/hooks?sentinel_password=***"
        );
        assert_eq!(
            redact_url("redis+sentinel://h1:1,h2:2/hooks"),
            "redis+sentinel://h1:1,h2:2/hooks"
        );
    }

    #[test]
    fn a_url_no_request_can_name_is_refused() {
        let err = HttpUrl::from_text("http://a{b}.example/").unwrap_err();
        assert!(err.contains("cannot be delivered to"), "{err}");
        assert!(HttpUrl::from_text("https://u:p@a.example:8443/x?y#z").is_ok());
        // A redacted password (print-config's) is not taken for one.
        for shown in [
            "https://u:***@a.example/x",
            "redis://:***@127.0.0.1:6379/",
            "host=db user=u password=***",
            "redis+sentinel://app:***@h1:1,h2:2/hooks",
            "redis+sentinel://h1:1/hooks?sentinel_password=***",
        ] {
            let e = StoreUrl::from_text(shown).unwrap_err();
            assert!(e.contains("write the real one"), "{e}");
        }
        assert!(HttpUrl::from_text("https://u:***@a.example/x").is_err());
        assert!(StoreUrl::from_text("host=db PASSWORD=*** user=u").is_err());
        assert!(StoreUrl::from_text("host=db password=***x").is_ok());
        // The refusal shows no other secret of the URL.
        let e =
            StoreUrl::from_text("redis+sentinel://a:***@h:1/m?sentinel_password=real").unwrap_err();
        assert!(!e.contains("password=real"), "{e}");
        assert!(StoreUrl::from_text("redis://:p***@127.0.0.1/").is_ok());
    }

    fn toml_value(text: &str) -> toml::Spanned<DeValue<'_>> {
        DeValue::parse(text).unwrap()
    }

    #[test]
    fn numbers_read_from_text_and_toml_alike() {
        assert_eq!(f64::from_text("200").unwrap(), 200.0);
        assert_eq!(f64::from_toml(toml_value("200").get_ref()).unwrap(), 200.0);
        assert_eq!(f64::from_toml(toml_value("2.5").get_ref()).unwrap(), 2.5);
        assert_eq!(usize::from_toml(toml_value("0x10").get_ref()).unwrap(), 16);
        assert!(usize::from_toml(toml_value("-1").get_ref()).is_err());
        let err = f64::from_toml(toml_value("\"fast\"").get_ref()).unwrap_err();
        assert_eq!(err, "expected a number, found string");
    }

    #[test]
    fn durations_switches_and_enums() {
        assert_eq!(
            Duration::from_text("150ms").unwrap(),
            Duration::from_millis(150)
        );
        assert_eq!(Duration::from_secs(600).show(), "\"10m\"");
        assert!(Duration::from_toml(toml_value("2").get_ref()).is_err());
        assert!(bool::from_text("yes").unwrap());
        assert!(bool::from_toml(toml_value("\"true\"").get_ref()).is_err());
        assert_eq!(
            OverflowPolicy::from_text("head-drop").unwrap(),
            OverflowPolicy::HeadDrop
        );
        let err = OverflowPolicy::from_text("drop").unwrap_err();
        assert!(err.contains("\"tail-drop\""), "{err}");
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379/"),
            "redis://:***@127.0.0.1:6379/"
        );
        assert_eq!(
            redact_url("redis://:a@127.0.0.1:7000/,redis://:a@127.0.0.1:7001/"),
            "redis://:***@127.0.0.1:7000/,redis://:***@127.0.0.1:7001/"
        );
        assert_eq!(
            redact_url("postgres://app:pw@db/app"),
            "postgres://app:***@db/app"
        );
        assert_eq!(
            redact_url("host=db user=app password=pw"),
            "host=db user=app password=***"
        );
        assert_eq!(redact_url("http://example.com/x"), "http://example.com/x");
        assert!(HttpUrl::from_text("ftp://x").is_err());
    }
}
