//! The HTTP client every delivery uses: reqwest on rustls (ring), the
//! system's roots plus `ca_file`'s, a timeout per delivery, and no
//! redirects (a receiver cannot send a webhook somewhere else).

use crate::config::Settings;

/// The client for `s`, or why it cannot be made (an unreadable `ca_file`).
pub fn client(s: &Settings, pool_per_host: usize) -> Result<reqwest::Client, String> {
    // rustls with ring, installed once per process (a second call finds it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(s.deliver_timeout)
        .pool_max_idle_per_host(pool_per_host)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = &s.ca_file {
        let pem = std::fs::read(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        // Added to the system's roots, not instead of them.
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| format!("the HTTP client: {e}"))
}
