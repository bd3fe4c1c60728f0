//! `dripfeed-relay health`: the configuration read as the relay reads it,
//! then the relay's own `/readyz` asked on its admin listener (loopback
//! when it listens on every address), within 3 s. Exit 0 when it answers
//! 200, 1 otherwise (saying what it got): a container's `HEALTHCHECK`
//! that needs no curl. Over TLS it does not check the certificate: it is
//! the relay's own listener, asked for a status code only, nothing sent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use crate::config::Config;

/// How long the probe may take.
const LIMIT: Duration = Duration::from_secs(3);

/// Where to ask: the admin listener, on loopback if it listens on every
/// address.
fn probe_addr(admin: SocketAddr) -> SocketAddr {
    let ip = match admin.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, admin.port())
}

/// The URL of `/readyz` for `cfg`.
fn readyz_url(cfg: &Config) -> String {
    let s = &cfg.settings;
    let scheme = if s.admin_tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{}/readyz", probe_addr(s.admin_listen))
}

/// Asks the relay of `cfg` whether it is ready.
pub(crate) async fn check(cfg: &Config) -> ExitCode {
    let url = readyz_url(cfg);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder()
        .timeout(LIMIT)
        .danger_accept_invalid_certs(true)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dripfeed-relay health: no HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => {
            say!("ready: {url}");
            ExitCode::SUCCESS
        }
        Ok(r) => {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            eprintln!("dripfeed-relay health: {url} answered {status}: {body}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("dripfeed-relay health: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_is_asked_on_loopback() {
        let at = |s: &str| probe_addr(s.parse().unwrap()).to_string();
        assert_eq!(at("0.0.0.0:9091"), "127.0.0.1:9091");
        assert_eq!(at("[::]:9091"), "[::1]:9091");
        assert_eq!(at("10.0.0.5:8090"), "10.0.0.5:8090");
    }
}
