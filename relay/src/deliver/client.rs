//! The HTTP client every delivery uses: reqwest on rustls (ring), the
//! system's roots plus `ca_file`'s, a timeout per delivery, no redirects
//! (a receiver cannot send a webhook somewhere else), no retries of its own
//! (the relay's are paced and counted), no proxy from the
//! environment (the connection goes where the guard checked), and a
//! resolver that drops the addresses the [`AddressGuard`] refuses.

use std::sync::Arc;

use super::guard::AddressGuard;
use super::resolver::GuardedResolver;
use crate::config::Settings;

/// The client for `s`, connecting only where `guard` allows, or why it
/// cannot be made (an unreadable `ca_file`).
pub fn client(
    s: &Settings,
    pool_per_host: usize,
    guard: Arc<AddressGuard>,
) -> Result<reqwest::Client, String> {
    // rustls with ring, installed once per process (a second call finds it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(s.deliver_timeout)
        .pool_max_idle_per_host(pool_per_host)
        .redirect(reqwest::redirect::Policy::none())
        // Retries are the relay's own (paced, counted, with backoff): none
        // inside the client, which would also copy every request's head in
        // case it retried.
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver::new(guard)));
    if let Some(path) = &s.ca_file {
        let pem = std::fs::read(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        // Added to the system's roots, not instead of them.
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| format!("the HTTP client: {e}"))
}
