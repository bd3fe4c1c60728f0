//! The HTTP client's resolver: the system's (`getaddrinfo`, through
//! `tokio::net::lookup_host`), with every address the [`AddressGuard`]
//! refuses dropped. It runs at every new connection, so a name that
//! resolved to a public address when it was configured and to a private
//! one later is still refused. When no address is left the lookup fails
//! with the guard's [`Refused`], which the delivery finds in the error
//! ([`super::guard::refusal`]) and treats as final.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::Name;

use super::guard::{AddressGuard, Refused};

/// What a lookup fails with: the guard's [`Refused`], boxed as itself so
/// that it can be found again in the client's error.
type LookupError = Box<dyn std::error::Error + Send + Sync>;

/// A resolver that connects only where the guard allows.
#[derive(Clone, Debug)]
pub(crate) struct GuardedResolver {
    guard: Arc<AddressGuard>,
}

impl GuardedResolver {
    /// Resolves through the system, then drops what `guard` refuses.
    pub(crate) fn new(guard: Arc<AddressGuard>) -> GuardedResolver {
        GuardedResolver { guard }
    }
}

impl tower::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = LookupError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, LookupError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), LookupError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = self.guard.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let mut refused: Option<Refused> = None;
            let allowed: Vec<SocketAddr> = found
                .filter(|addr| match guard.check(addr.ip()) {
                    Ok(()) => true,
                    Err(r) => {
                        refused.get_or_insert(r);
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(r)) => Err(r.into()),
                (true, None) => Err(format!("{host} resolves to no address").into()),
                (false, Some(r)) => {
                    tracing::debug!(%host, refused = %r, "some addresses of a destination dropped");
                    Ok(allowed.into_iter())
                }
                (false, None) => Ok(allowed.into_iter()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::guard::{Range, refusal};

    /// A client refused `localhost` fails with the guard's refusal,
    /// found in the error's chain; allowed, it reaches the listener.
    #[tokio::test]
    async fn a_name_resolving_to_a_refused_address_is_not_connected_to() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                // The request's head (a bodyless GET), then the answer.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.ends_with(b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s
                    .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let client = |guard: AddressGuard| {
            let timeout = std::time::Duration::from_secs(10);
            crate::deliver::client::build(timeout, None, 4, Arc::new(guard)).unwrap()
        };
        let to = crate::deliver::endpoint::Endpoint::parse(&format!("http://localhost:{port}/"))
            .unwrap();
        let get = || {
            axum::http::Request::get("/")
                .header("host", to.host.clone())
                .body(http_body_util::Full::new(axum::body::Bytes::new()))
                .unwrap()
        };
        let (answer, _) = client(AddressGuard::default()).send(&to, get()).await;
        let err = answer.unwrap_err();
        let refused = refusal(&err).unwrap_or_else(|| panic!("the guard's refusal in {err:?}"));
        assert_eq!(refused.range, Range::Loopback);
        let allowed = AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        let (answer, _) = client(allowed).send(&to, get()).await;
        let resp = answer.unwrap();
        assert_eq!(resp.status.as_u16(), 204);
    }
}
