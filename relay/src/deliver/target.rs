//! Where a destination's deliveries go: its target, worked out once when it
//! is configured, and where a delivery looks it up by name ([`Targets`],
//! which the relay's table of destinations in force implements).

use std::sync::Arc;

use crate::config::Destination;

/// Where a destination's deliveries go, and its signing keys: parsed once
/// when it is configured, not at every delivery.
#[derive(Debug)]
pub(crate) struct Target {
    /// The same, as each delivery sends to it.
    pub endpoint: Option<super::endpoint::Endpoint>,
    /// Its host when that is an IP literal (checked by the address guard
    /// before each delivery; a name is checked by the resolver).
    pub literal: Option<std::net::IpAddr>,
    /// The bytes of its `whsec_` secrets: the secret, then the previous one
    /// while it is being replaced; none: unsigned.
    pub secrets: Vec<Arc<[u8]>>,
    /// Whether its delivery errors have their own series (else `_other`).
    pub own_series: bool,
}

impl Target {
    pub(crate) fn of(d: &Destination) -> Target {
        Target {
            endpoint: super::endpoint::Endpoint::parse(d.url.as_str()),
            literal: super::guard::ip_literal(d.url.as_str()),
            secrets: [&d.secret, &d.previous_secret]
                .into_iter()
                .flatten()
                .map(|s| s.key())
                .collect(),
            own_series: d.own_series(),
        }
    }
}

/// Where deliveries look their destination's target up by name.
pub(crate) trait Targets: Send + Sync {
    /// `name`'s target while it is held (open, or draining after a
    /// deletion); `None` once it is gone.
    fn target(&self, name: &str) -> Option<Arc<Target>>;
}
