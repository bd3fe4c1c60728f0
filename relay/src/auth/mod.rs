//! Who is calling. API keys and the admin token are held as SHA-256
//! digests ([`crate::config::digest`]); a request presents its key as
//! `Authorization: Bearer KEY` ([`bearer`], an axum extractor any
//! router can use), and the tenant table ([`tenants`]) finds the tenant
//! whose key it is, comparing against every digest in constant time. A
//! refusal is a 401 with `WWW-Authenticate: Bearer` and a problem body
//! naming nothing but what the caller sent.

pub(crate) mod bearer;
pub(crate) mod tenants;
