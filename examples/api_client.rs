//! Wrapping an outbound API client: every call waits for its drain slot, so
//! a partner API with a strict quota never sees more than it allows; with
//! `--adaptive` the rate follows the partner's answers and obeys its
//! `Retry-After`. `--limiter governor|tower` runs the same calls through
//! governor's `until_ready()` or tower's `RateLimit` (+ `Buffer`) instead.
//!
//! ```text
//! cargo run --release --example api_client -- --rate 50 --requests 500
//! ```

#[path = "api_client/partner.rs"]
mod partner;
#[path = "api_client/run.rs"]
mod run;

use clap::Parser;

/// Calls a partner API through a throttle and prints what happened.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Flags {
    /// The partner API; without it a built-in partner with a strict quota starts on loopback.
    #[arg(long)]
    base_url: Option<String>,
    /// The built-in partner's quota, requests per second.
    #[arg(long, default_value_t = 50.0)]
    partner_quota: f64,
    /// The built-in partner answers 429 without Retry-After / RateLimit hints.
    #[arg(long)]
    no_hints: bool,
    /// Calls per second.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// How many calls.
    #[arg(long, default_value_t = 500)]
    requests: u32,
    /// Calls in flight at most.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Let the rate follow the partner (AIMD up to --ceiling).
    #[arg(long)]
    adaptive: bool,
    /// The adaptive ceiling, calls per second (default 1.5 × --rate).
    #[arg(long)]
    ceiling: Option<f64>,
    /// Which limiter paces the calls.
    #[arg(long, value_enum, default_value = "dripfeed")]
    limiter: run::Limiter,
}

#[tokio::main]
async fn main() {
    let flags = Flags::parse();
    let url = match flags.base_url.clone() {
        Some(url) => url,
        None => {
            let p = partner::Partner::new(flags.partner_quota, 2, !flags.no_hints);
            match partner::serve(([127, 0, 0, 1], 0).into(), p).await {
                Ok(addr) => format!("http://{addr}/v1/things"),
                Err(e) => {
                    eprintln!("api_client: starting the built-in partner: {e}");
                    std::process::exit(1);
                }
            }
        }
    };
    let plan = run::Plan {
        url,
        rate: flags.rate,
        requests: flags.requests,
        concurrency: flags.concurrency,
        adaptive: flags
            .adaptive
            .then(|| flags.ceiling.unwrap_or(flags.rate * 1.5)),
        limiter: flags.limiter,
    };
    println!(
        "{:?} at {}/s{}, {} calls, {} in flight",
        plan.limiter,
        plan.rate,
        if flags.adaptive { " (adaptive)" } else { "" },
        plan.requests,
        plan.concurrency
    );
    let s = run::run(&plan).await;
    println!(
        "| sent | ok | partner 429s | errors | refused | elapsed | achieved | wait p50 | wait p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {:.2} s | {:.1}/s | {:.0} ms | {:.0} ms |",
        s.sent,
        s.ok,
        s.limited,
        s.errors,
        s.refused,
        s.elapsed.as_secs_f64(),
        s.achieved(),
        s.wait(0.5).as_secs_f64() * 1000.0,
        s.wait(0.99).as_secs_f64() * 1000.0
    );
}
