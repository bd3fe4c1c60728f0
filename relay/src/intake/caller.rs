//! Step 2 of the request path: who is posting. With `[[tenants]]` the
//! caller is the tenant whose key `Authorization: Bearer KEY` presents
//! (401 otherwise), and the tenant header is not read; without tenants
//! (an open relay) the tenant is the one the tenant header names, or
//! `default`, as before.

use std::sync::Arc;
use std::time::SystemTime;

use axum::http::HeaderMap;

use super::answers::Answers;
use super::{Intake, Refusal, bad_name};
use crate::auth::bearer::{Bearer, Unauthorized};
use crate::auth::tenants::Account;
use crate::domain::names::{self, Tenant};

/// Who a request is from.
pub(super) struct Caller {
    /// Its tenant: its quota and its idempotency keys go by this name.
    pub tenant: Tenant,
    /// The tenant's account when tenants are configured: what it may do.
    pub account: Option<Arc<Account>>,
    /// Whether its webhooks are charged to its quota.
    pub charged: bool,
}

impl Caller {
    /// Whether it may post to `destination` (an endpoint of `app`, if
    /// `Some`).
    pub(super) fn may_use(&self, destination: &str, app: Option<&str>) -> bool {
        self.account
            .as_ref()
            .is_none_or(|a| a.may_use(destination, app))
    }
}

impl Intake {
    /// The caller of a request with `headers`: authenticated by its key
    /// when tenants are configured, else named by the tenant header.
    pub(super) fn caller(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let Some(tenants) = &self.tenants else {
            let tenant =
                names::tenant(headers, &self.tenant_header).map_err(|e| bad_name("tenant", e))?;
            return Ok(Caller {
                tenant,
                account: None,
                charged: self.keyed,
            });
        };
        let account = Bearer::from_headers(headers)
            .and_then(|key| tenants.get().authenticate(&key, SystemTime::now()))
            .map_err(|why| self.unauthorized(why))?;
        Ok(Caller {
            tenant: Tenant {
                named: Some(account.name.to_string()),
            },
            charged: self.keyed && account.limited,
            account: Some(account),
        })
    }

    /// 401, counted.
    fn unauthorized(&self, why: Unauthorized) -> Refusal {
        Answers::bump(&self.answers.unauthorized_401);
        Box::new(why.response())
    }
}
