//! The checks a destination changed at run time goes through, whatever
//! engine keeps it: its fields as the configuration's are checked, the
//! limits its queue imposes ([`Limits`]), and the address guard (a name
//! resolved when `resolve_destinations_at_start` says so). The engines
//! call [`Vetter::vet`] on the value a change resolved to, before they
//! write it.

use std::sync::Arc;

use crate::config::{Destination, Fields, Origin};
use crate::deliver::guard::AddressGuard;
use crate::domain::limits::Limits;

/// Checks destinations made or changed through the admin API.
pub(crate) struct Vetter {
    /// The origin such a destination has (the registry, or the fleet's map).
    pub origin: Origin,
    /// Where deliveries may go.
    pub guard: Arc<AddressGuard>,
    /// Whether a host name is resolved and its addresses checked.
    pub resolve: bool,
}

/// Why a destination does not pass: its problem type and what is wrong.
pub(crate) type Unfit = (&'static str, String);

/// What in `url` would not reach its receiver as written, if anything:
/// the admin API takes what a delivery sends, not what it would rewrite
/// (the configuration, checked at start, stays as lenient as it was).
pub(crate) fn unsendable(url: &str) -> Option<String> {
    if url.contains(char::is_whitespace) {
        return Some("it holds a space: percent-encode it (%20)".into());
    }
    let parsed = reqwest::Url::parse(url).ok()?;
    if parsed.fragment().is_some() {
        return Some("a #fragment is never sent to the receiver: leave it out".into());
    }
    if parsed.port() == Some(0) {
        return Some("port 0 cannot be delivered to".into());
    }
    // Anything else the parser rewrites (a backslash, `.` and `..`
    // segments, bytes it percent-encodes, an empty or default port):
    // the URL as it would be sent, to give instead. Case in the scheme and
    // host, and the `/` an empty path gets, are not worth a refusal.
    let sent = parsed.as_str();
    if sent.eq_ignore_ascii_case(url) || sent.eq_ignore_ascii_case(&with_root(url)) {
        return None;
    }
    Some(format!("it would be sent as {sent}: give it so"))
}

/// `url` with the `/` of an empty path after its authority, as a parser
/// writes it (`http://a.example?q` → `http://a.example/?q`).
fn with_root(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[end..].starts_with('/') {
        true => url.to_owned(),
        false => format!("{}/{}", &url[..end], &url[end..]),
    }
}

impl Vetter {
    /// `fields` as a destination within `limits`, or its problem type
    /// (`bad-destination`, `private-destination`) and what is wrong.
    pub(crate) async fn vet(&self, fields: Fields, limits: &Limits) -> Result<Destination, Unfit> {
        let dest = fields
            .check_body(&self.origin)
            .map_err(|detail| ("bad-destination", detail))?;
        if let Some(why) = unsendable(dest.url.as_str()) {
            return Err(("bad-destination", format!("{}: {why}", dest.url)));
        }
        limits
            .check(&dest)
            .map_err(|detail| ("bad-destination", detail))?;
        if let Err(refused) = self.guard.check_destination(&dest.url, self.resolve).await {
            let detail = format!(
                "{}: {refused}: allow it with --allow-destination-cidr {} (allow_destination_cidrs)",
                dest.url, refused.net
            );
            return Err(("private-destination", detail));
        }
        Ok(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::unsendable;

    #[test]
    fn the_admin_api_takes_only_urls_sent_as_written() {
        for good in [
            "https://hooks.example/a%20b?q=1",
            "http://127.0.0.1:8080/x",
            "https://hooks.example",
            "https://hooks.example?x=1",
            "HTTPS://Hooks.Example/Path",
            "https://user:pass@hooks.example:8443/x?y=%C3%A9",
            "http://[::1]:8080/x",
        ] {
            assert_eq!(unsendable(good), None, "{good}");
        }
        for bad in [
            "http://127.0.0.1:47010/a b",
            "https://hooks.example/x?q=x y",
            "https://hooks.example/x#frag",
            "http://127.0.0.1:0/a",
            "http://127.0.0.1:47010/a\\b",
            "http://127.0.0.1:47010/./x/../y",
            "http://127.0.0.1:47010/caf\u{e9}",
            "http://127.0.0.1:/emptyport",
            "http://127.0.0.1:047650/x",
            "http://hooks.example:80/x",
        ] {
            assert!(unsendable(bad).is_some(), "{bad}");
        }
        assert_eq!(
            unsendable("http://127.0.0.1:47010/./x/../y").as_deref(),
            Some("it would be sent as http://127.0.0.1:47010/y: give it so")
        );
    }
}
