//! The roots outbound connections trust: deliveries and trace export
//! alike (TLS 1.2 and 1.3 over ring, the system's roots and `ca_file`'s).

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The TLS settings of an HTTPS client: TLS 1.2 and 1.3 over ring, the
/// system's roots and `ca_file`'s (added to them, not instead), ALPN
/// `http/1.1`; or why they cannot be made (an unreadable `ca_file`).
pub(crate) fn config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    // rustls with ring, installed once per process (a second call finds
    // it) for the other TLS users; this client names its provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = match ca_file {
        Some(path) => ca_certs(path).map_err(|e| format!("ca_file {e}"))?,
        None => Vec::new(),
    };
    // The system's roots, and `ca_file`'s added to them (not instead).
    let verifier = if extra.is_empty() {
        rustls_platform_verifier::Verifier::new(provider.clone())
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
    }
    .map_err(|e| format!("the TLS roots (the system's and ca_file's): {e}"))?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("the TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tls)
}

/// `ca_file`, if given, is a PEM file of certificates deliveries can trust.
pub(crate) fn check_ca_file(cfg: &crate::config::Config) -> Option<crate::config::ConfigError> {
    let path = cfg.settings.ca_file.as_ref()?;
    let e = ca_certs(path).err()?;
    let origin = cfg.origin("ca_file").cloned();
    Some(crate::config::ConfigError::new("ca_file", origin, e))
}

/// The certificates of a PEM file (`ca_file`), or why there are none.
pub(crate) fn ca_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let dir = std::env::temp_dir().join(format!("dripfeed-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = ca_certs(&path).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(ca_certs(&dir.join("missing.pem")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
