//! Fires requests at a partner through a limiter and summarizes what happened.

use std::sync::Arc;
use std::time::Duration;

use dripfeed::rate::AimdConfig;
use dripfeed::{Delivery, Slots};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Which limiter paces the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Limiter {
    Dripfeed,
    Governor,
    Tower,
}

#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub url: String,
    pub rate: f64,
    pub requests: u32,
    pub concurrency: usize,
    /// `Some(ceiling)`: adaptive between rate / 2 and the ceiling, starting at `rate`.
    pub adaptive: Option<f64>,
    pub limiter: Limiter,
}

#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub sent: u64,
    pub ok: u64,
    pub limited: u64,
    pub errors: u64,
    pub refused: u64,
    pub elapsed: Duration,
    pub waits: Vec<Duration>,
}

impl Summary {
    pub(crate) fn achieved(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    pub(crate) fn wait(&self, q: f64) -> Duration {
        let mut w = self.waits.clone();
        w.sort();
        w.get(((w.len() as f64 * q) as usize).min(w.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    }
}

/// 2xx done; 429/503 "slow down" with its Retry-After; anything else failed.
fn judge(answer: &Result<reqwest::Response, reqwest::Error>) -> Delivery {
    match answer {
        Ok(r) if r.status().is_success() => Delivery::Done,
        Ok(r) if matches!(r.status().as_u16(), 429 | 503) => Delivery::Retry {
            after: r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs),
        },
        _ => Delivery::Failed,
    }
}

type Wait = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ()>> + Send>>
        + Send
        + Sync,
>;

pub(crate) async fn run(plan: &Plan) -> Summary {
    // Built in one workspace with the relay, reqwest has rustls without a
    // crypto provider: give it ring (a second call finds it installed).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(plan.concurrency)
        .build()
        .unwrap_or_default();
    let slots = match plan.limiter {
        Limiter::Dripfeed => {
            let mut b = Slots::builder()
                .name("api_client")
                .drain_rate(plan.rate)
                .latency_budget(Duration::from_secs(3600));
            if let Some(ceiling) = plan.adaptive {
                let aimd = AimdConfig::default()
                    .with_floor(plan.rate / 2.0)
                    .with_ceiling(ceiling.max(plan.rate))
                    .with_target_p99(Duration::from_millis(250))
                    .with_min_samples(5)
                    .build();
                if let Ok(aimd) = aimd {
                    b = b.adaptive(aimd);
                }
            }
            b.build_slots().ok().map(|(s, _)| s)
        }
        _ => None,
    };
    // governor and tower are driven through a "wait for your turn" closure
    let other: Option<Wait> = match plan.limiter {
        Limiter::Dripfeed => None,
        Limiter::Governor => {
            let quota = governor::Quota::with_period(Duration::from_secs_f64(1.0 / plan.rate))
                .map(|q| q.allow_burst(std::num::NonZeroU32::MIN));
            quota.map(|q| {
                let lim = Arc::new(governor::RateLimiter::direct(q));
                Arc::new(move || {
                    let lim = lim.clone();
                    Box::pin(async move {
                        lim.until_ready().await;
                        Ok(())
                    })
                        as std::pin::Pin<
                            Box<dyn std::future::Future<Output = Result<(), ()>> + Send>,
                        >
                }) as Wait
            })
        }
        Limiter::Tower => {
            use tower::{Service, ServiceBuilder, ServiceExt};
            let svc = ServiceBuilder::new()
                .buffer(plan.requests as usize + 1)
                .rate_limit(plan.rate.round().max(1.0) as u64, Duration::from_secs(1))
                .service(tower::service_fn(|()| async {
                    Ok::<_, std::convert::Infallible>(())
                }));
            Some(Arc::new(move || {
                let mut svc = svc.clone();
                Box::pin(async move {
                    let ready = svc.ready().await.map_err(|_| ())?;
                    ready.call(()).await.map_err(|_| ())
                })
                    as std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ()>> + Send>>
            }) as Wait)
        }
    };
    let gate = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..plan.requests {
        let (client, url, slots, other, gate) = (
            client.clone(),
            plan.url.clone(),
            slots.clone(),
            other.clone(),
            gate.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.ok()?;
            let queued = Instant::now();
            let answer = match (slots, other) {
                (Some(slots), _) => {
                    let slot = slots.acquire().await.ok()?;
                    let waited = queued.elapsed();
                    let answer = client.get(&url).send().await;
                    slot.report(judge(&answer));
                    (waited, answer)
                }
                (None, Some(wait)) => {
                    wait().await.ok()?;
                    (queued.elapsed(), client.get(&url).send().await)
                }
                (None, None) => return None,
            };
            Some(answer)
        }));
    }
    let mut s = Summary::default();
    for t in tasks {
        match t.await.ok().flatten() {
            Some((waited, answer)) => {
                s.sent += 1;
                s.waits.push(waited);
                match answer {
                    Ok(r) if r.status().is_success() => s.ok += 1,
                    Ok(r) if r.status().as_u16() == 429 => s.limited += 1,
                    _ => s.errors += 1,
                }
            }
            None => s.refused += 1,
        }
    }
    s.elapsed = start.elapsed();
    s
}
