//! TLS on a listener (rustls with ring): a certificate chain and its key
//! from PEM files (`tls_cert`, `tls_key`; `admin_tls_cert`,
//! `admin_tls_key`), TLS 1.2 and 1.3, ALPN `http/1.1`. The handshake is
//! part of the request head: it must end within `header_read_timeout`, and
//! the connection holds one of `max_connections` from its accept.
//!
//! [`Certs`] is the listener's certificate resolver: a reload (SIGHUP)
//! reads the files again and swaps the key in; handshakes from then on get
//! the new certificate, connections already open keep theirs.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// The certificate a listener serves, swapped by a reload.
#[derive(Debug)]
pub(crate) struct Certs {
    current: RwLock<Arc<CertifiedKey>>,
}

/// The provider every listener uses.
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The chain of `cert` and the key of `key` (PEM), checked to belong
/// together; or why not, naming the file.
pub(crate) fn load(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    load_blaming(cert, key).map_err(|(_, why)| why)
}

/// Which of the pair [`load_blaming`] could not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The certificate file.
    Cert,
    /// The key file, or a key that is not the certificate's.
    Key,
}

/// [`load`], saying which file is at fault (so a configuration error
/// names the setting, and where it was given, that holds it).
pub(crate) fn load_blaming(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, (Fault, String)> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| (Fault::Cert, format!("{}: {e}", cert.display())))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (Fault::Cert, format!("{}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err((
            Fault::Cert,
            format!("{}: no PEM certificate in it", cert.display()),
        ));
    }
    let der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| (Fault::Key, format!("{}: {e}", key.display())))?;
    let certified = CertifiedKey::from_der(chain, der, &provider()).map_err(|e| {
        let why = format!(
            "{} and {}: {e} (is the key the certificate's?)",
            cert.display(),
            key.display()
        );
        (Fault::Key, why)
    })?;
    Ok(Arc::new(certified))
}

impl Certs {
    /// The certificate of `cert` and `key` ([`load`]).
    pub(crate) fn open(cert: &Path, key: &Path) -> Result<Arc<Certs>, String> {
        Ok(Arc::new(Certs {
            current: RwLock::new(load(cert, key)?),
        }))
    }

    /// Serves `key` from the next handshake on.
    pub(crate) fn set(&self, key: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = key;
    }

    /// What a TLS listener accepts connections with.
    pub(crate) fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("the TLS versions: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_mismatched_file_is_named() {
        let dir = std::env::temp_dir().join(format!("dripfeed-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = load(&dir.join("none.pem"), &dir.join("none.key")).unwrap_err();
        assert!(e.contains("none.pem"), "{e}");
        std::fs::write(dir.join("empty.pem"), "").unwrap();
        let e = load(&dir.join("empty.pem"), &dir.join("none.key")).unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
