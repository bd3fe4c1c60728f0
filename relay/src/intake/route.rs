//! Step 3 of the request path: the destination a request names with the
//! destination header (only configured ones; never a URL it gives), and
//! whether its tenant may post there.
//!
//! A refusal names nothing the caller does not own: not the destinations
//! configured, not the one it asked for. A tenant limited to some
//! destinations gets 403 for any other name, configured or not, so it
//! cannot learn which exist; a tenant that may use every destination gets
//! 404 for a name not configured. Without the header, the destination is
//! the only one the caller may use, if there is one; else 422 (the request
//! is well formed; which destination it means cannot be told).

use axum::http::{HeaderMap, StatusCode};

use super::answers::Answers;
use super::caller::Caller;
use super::{Intake, Refusal, refusal};
use crate::catalog::Pass;

/// The 404 for a destination not configured (or being deleted).
pub(super) fn unknown() -> Refusal {
    let detail = "no destination of that name is configured".to_owned();
    refusal(StatusCode::NOT_FOUND, "unknown-destination", detail)
}

impl Intake {
    /// The destination a request names, if its caller may post to it.
    /// The pass is held until the admission ends (a deletion waits for it).
    pub(super) fn pick(&self, headers: &HeaderMap, caller: &Caller) -> Result<Pass, Refusal> {
        let header = &self.destination_header;
        let name = match headers.get(header.as_str()).map(|v| v.to_str()) {
            Some(Ok(name)) => name.trim(),
            Some(Err(_)) => {
                let detail = format!("the {header} header is not text");
                return Err(refusal(StatusCode::BAD_REQUEST, "bad-destination", detail));
            }
            None => return self.only_one(caller),
        };
        let forbidden = || {
            Answers::bump(&self.answers.forbidden_403);
            let detail = "this tenant may not post to that destination".to_owned();
            refusal(StatusCode::FORBIDDEN, "forbidden-destination", detail)
        };
        let app = self.catalog.application_of(name);
        if !caller.may_use(name, app.as_deref()) {
            return Err(forbidden());
        }
        let pass = self.catalog.open(name).ok_or_else(unknown)?;
        // Held, it cannot be deleted and made again under another
        // application: checked once more as it now is.
        let now = self.catalog.application_of(name);
        if now != app && !caller.may_use(name, now.as_deref()) {
            return Err(forbidden());
        }
        Ok(pass)
    }

    /// The destination of a request without the header: the only one its
    /// caller may use.
    fn only_one(&self, caller: &Caller) -> Result<Pass, Refusal> {
        let usable = |n: &str, app: Option<&str>| caller.may_use(n, app);
        let within = caller.account.as_ref().and_then(|a| a.within());
        let only = match within {
            Some(within) => self.catalog.only_within(within, usable),
            None => self.catalog.only(usable),
        };
        match only {
            Some(only) => Ok(only),
            None => {
                let detail = format!(
                    "name the destination with the {} header",
                    self.destination_header
                );
                Err(refusal(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "missing-destination",
                    detail,
                ))
            }
        }
    }
}
