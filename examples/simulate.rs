//! The adaptive drain at work, simulated: one arrival trace (twice the
//! downstream's capacity, with a 10 s outage) through three drains (fixed at
//! the AIMD ceiling, fixed at its floor, and AIMD), each a real dripfeed
//! throttle on paused tokio time, so two simulated minutes take a second or
//! two. Prints a table and writes a plot of rate, p99 and queue depth.
//!
//! ```text
//! cargo run --release --example simulate -- [capacity] [svg path]
//! ```

#[path = "../tests/support/fragile.rs"]
mod fragile;
#[path = "../tests/support/sim.rs"]
mod sim;

use std::time::Duration;

use plotters::prelude::*;
use sim::{Scenario, Trace, run};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let capacity: f64 = args.next().map_or(Ok(120.0), |a| a.parse())?;
    let out = args
        .next()
        .unwrap_or_else(|| "docs/src/simulation.svg".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let mut base = Scenario::new(capacity);
    base.outage = Some((Duration::from_secs(60), Duration::from_secs(70)));
    let drains = [
        ("fixed at ceiling (200/s)", Some(200.0)),
        ("fixed at floor (20/s)", Some(20.0)),
        ("AIMD (20..200/s)", None),
    ];
    let traces: Vec<(&str, Trace)> = drains
        .iter()
        .map(|(name, fixed)| {
            let mut s = base.clone();
            s.fixed_rate = *fixed;
            (*name, rt.block_on(run(&s)))
        })
        .collect();

    println!(
        "downstream capacity C = {capacity}/s, base latency 40 ms, offered {}/s, outage 60-70 s, 120 s simulated\n",
        base.offered
    );
    println!(
        "| drain | delivered/s (30-120 s) | downstream p99 (30-60 s) | refused | failed deliveries | waiting at end |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, t) in &traces {
        println!(
            "| {name} | {:.1} | {:.0} ms | {} | {} | {} |",
            t.throughput(30.0, 120.0),
            t.p99(30.0, 60.0) * 1000.0,
            t.refused,
            t.failed,
            t.left_waiting
        );
    }
    if let Some((_, t)) = traces.last() {
        let (mean, min, max) = per_second(t, 30, 60);
        println!(
            "\nAIMD, deliveries per second (by completion) over 30-60 s: mean {:.3} C, min {:.3} C, max {:.3} C",
            mean / capacity,
            min / capacity,
            max / capacity
        );
    }
    plot(&out, capacity, &traces)?;
    println!("\nplot written to {out}");
    Ok(())
}

/// A panel: title, unit, y range and the series it draws from a trace.
type Panel = (
    &'static str,
    &'static str,
    f64,
    Box<dyn Fn(&Trace) -> Vec<(f64, f64)>>,
);

/// Mean, min and max of the deliveries completed in each whole second of
/// `[from, to)`: the measure the real-receiver run (`aimd_real`) reports.
fn per_second(t: &Trace, from: usize, to: usize) -> (f64, f64, f64) {
    let mut counts = vec![0u32; to.saturating_sub(from)];
    for (sent, latency) in &t.latencies {
        let done = (sent + latency).floor();
        if done >= from as f64 && done < to as f64 {
            counts[done as usize - from] += 1;
        }
    }
    let n = counts.len().max(1) as f64;
    let mean = counts.iter().map(|c| f64::from(*c)).sum::<f64>() / n;
    let min = counts.iter().copied().min().map_or(0.0, f64::from);
    let max = counts.iter().copied().max().map_or(0.0, f64::from);
    (mean, min, max)
}

/// p99 of each second's deliveries.
fn p99_series(t: &Trace) -> Vec<(f64, f64)> {
    (0..120)
        .map(|s| (s as f64 + 0.5, t.p99(s as f64, s as f64 + 1.0) * 1000.0))
        .filter(|(_, p)| *p > 0.0)
        .collect()
}

fn plot(
    path: &str,
    capacity: f64,
    traces: &[(&str, Trace)],
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(path, (900, 840)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((3, 1));
    let colors = [RED, BLUE, RGBColor(0, 150, 0)];

    let series: [Panel; 3] = [
        (
            "drain rate",
            "jobs/s",
            220.0,
            Box::new(|t: &Trace| t.points.iter().map(|(x, r, _)| (*x, *r)).collect()),
        ),
        (
            "downstream p99 per second",
            "ms",
            1200.0,
            Box::new(p99_series),
        ),
        (
            "queue depth",
            "jobs",
            420.0,
            Box::new(|t: &Trace| t.points.iter().map(|(x, _, d)| (*x, *d as f64)).collect()),
        ),
    ];
    for (panel, (title, unit, top, get)) in panels.iter().zip(series.iter()) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{title} (C = {capacity}/s, outage 60-70 s)"),
                ("sans-serif", 18),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..120f64, 0f64..*top)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(*unit)
            .draw()?;
        if *title == "drain rate" {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, capacity), (120.0, capacity)],
                    BLACK.mix(0.4),
                ))?
                .label("capacity C")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
        }
        if *title == "downstream p99 per second" {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, 150.0), (120.0, 150.0)],
                    BLACK.mix(0.4),
                ))?
                .label("target 150 ms")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
        }
        for ((name, t), color) in traces.iter().zip(colors.iter()) {
            let color = *color;
            chart
                .draw_series(LineSeries::new(
                    get(t).into_iter().map(|(x, y)| (x, y.min(*top))),
                    color.stroke_width(2),
                ))?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
