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

impl Vetter {
    /// `fields` as a destination within `limits`, or its problem type
    /// (`bad-destination`, `private-destination`) and what is wrong.
    pub(crate) async fn vet(&self, fields: Fields, limits: &Limits) -> Result<Destination, Unfit> {
        let dest = fields
            .check_body(&self.origin)
            .map_err(|detail| ("bad-destination", detail))?;
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
