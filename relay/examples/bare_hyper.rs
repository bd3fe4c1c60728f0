//! The relay's stack with nothing on it: the reference row of
//! `scripts/vs_nginx.sh`. A hyper HTTP/1 server on the relay's runtime
//! settings (a multi-thread runtime with every core, jemalloc, the
//! listener's connection builder: tokio timer, header read timeout, head
//! buffer) reads each request's body and answers 202 with a body shaped
//! like the relay's (`{"id":"…","status":"queued"}`), keeping nothing.
//!
//! ```sh
//! cargo run --release -p dripfeed-relay --example bare_hyper -- 127.0.0.1:8081
//! ```

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

/// The relay's allocator.
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Ids for the answers, as the relay gives each webhook one.
static NEXT: AtomicU64 = AtomicU64::new(1);

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // The body is read whole, as the relay reads a webhook's.
    let _body = req.into_body().collect().await.map(|b| b.to_bytes());
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let body = format!(r#"{{"id":"{id}","status":"queued"}}"#);
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(&addr).await?;
        println!("listening on {}", listener.local_addr()?);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .max_buf_size(64 * 1024);
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(_) => continue,
            };
            let http = http.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(answer);
                let _ = http.serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}
