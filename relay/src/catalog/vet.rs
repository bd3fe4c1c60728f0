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
pub(crate) fn unsendable(url: &str) -> Option<&'static str> {
    if url.contains(char::is_whitespace) {
        return Some("it holds a space: percent-encode it (%20)");
    }
    let parsed = reqwest::Url::parse(url).ok()?;
    if parsed.fragment().is_some() {
        return Some("a #fragment is never sent to the receiver: leave it out");
    }
    if parsed.port() == Some(0) {
        return Some("port 0 cannot be delivered to");
    }
    None
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
        assert_eq!(unsendable("https://hooks.example/a%20b?q=1"), None);
        assert_eq!(unsendable("http://127.0.0.1:8080/x"), None);
        for bad in [
            "http://127.0.0.1:47010/a b",
            "https://hooks.example/x?q=x y",
            "https://hooks.example/x#frag",
            "http://127.0.0.1:0/a",
        ] {
            assert!(unsendable(bad).is_some(), "{bad}");
        }
    }
}
