//! The one check of a destination's limits, whatever door it comes in by
//! (the configuration file, a flag, `--destinations`, the admin API's
//! `PUT`, the registry, the fleet's map): its rates and budget as the
//! library takes them, and a queue the process can hold. A destination
//! that passes can take a webhook: no 201 followed by a 400 on every post,
//! no ring of hundreds of MiB allocated by the first one.
//!
//! A destination's queue holds `budget × rate` webhooks, and its ring is
//! sized for the highest rate it may reach (its ceiling, else the set's
//! highest rate). Each webhook held costs at least [`JOB_OVERHEAD`] bytes
//! of `max_queue_bytes`, so a ring larger than `max_queue_bytes /
//! JOB_OVERHEAD` could never fill, only take memory; nor may it pass
//! [`MAX_JOBS`], what the relay holds at once across destinations.

use std::time::Duration;

use dripfeed::destinations::DestinationConfig;

use super::budget::JOB_OVERHEAD;
use crate::config::{Config, Destination};

/// Webhooks the relay holds at once, across destinations; also the most
/// one destination's queue may hold.
pub(crate) const MAX_JOBS: u64 = 1_000_000;

/// The webhooks a queue holds for a latency `budget` at `rate` per
/// second: `budget × rate`, rounded up, at least one.
pub(crate) fn held(budget: Duration, rate: f64) -> f64 {
    (budget.as_secs_f64() * rate).ceil().max(1.0)
}

/// What a destination must fit, from the settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `drain_rate`: the rate of a destination without its own.
    pub rate: f64,
    /// `latency_budget`: the budget of a destination without its own.
    pub budget: Duration,
    /// The highest rate a destination may have, and its ring's rate when
    /// it has no ceiling; `None` where there is no ring (the fleet's
    /// queue, bounded at `budget × rate` in Redis).
    pub max_rate: Option<f64>,
    /// `max_queue_bytes`.
    pub max_queue_bytes: u64,
}

impl Limits {
    /// The limits of `cfg` for the local engine: the highest rate is the
    /// adaptive ceiling, else the largest rate any destination is given.
    pub(crate) fn local(cfg: &Config) -> Limits {
        let s = &cfg.settings;
        let max_rate = match s.adaptive {
            true => s.ceiling,
            false => cfg
                .destinations
                .iter()
                .flat_map(|d| [d.rate, d.ceiling])
                .flatten()
                .fold(s.drain_rate, f64::max),
        };
        Limits {
            max_rate: Some(max_rate),
            ..Limits::fleet(cfg)
        }
    }

    /// The limits of `cfg` for the fleet's queue (no ring).
    pub(crate) fn fleet(cfg: &Config) -> Limits {
        let s = &cfg.settings;
        Limits {
            rate: s.drain_rate,
            budget: s.latency_budget,
            max_rate: None,
            max_queue_bytes: s.max_queue_bytes,
        }
    }

    /// The most webhooks one destination's queue (its ring) may hold.
    pub(crate) fn most_held(&self) -> u64 {
        (self.max_queue_bytes / JOB_OVERHEAD).clamp(1, MAX_JOBS)
    }

    /// `d`'s capacity (`budget × rate`), or what is wrong with it, in
    /// words a `PUT`'s 422 and a configuration error both use.
    pub(crate) fn check(&self, d: &Destination) -> Result<u64, String> {
        let mut overrides = DestinationConfig::default();
        if let Some(r) = d.rate {
            overrides = overrides.rate(r);
        }
        if let Some(r) = d.ceiling {
            overrides = overrides.ceiling(r);
        }
        if let Some(b) = d.budget {
            overrides = overrides.budget(b);
        }
        overrides
            .validate(self.max_rate.unwrap_or(f64::INFINITY))
            .map_err(|e| e.to_string())?;
        let budget = d.budget.unwrap_or(self.budget);
        let rate = d.rate.unwrap_or(self.rate);
        let reach = d.ceiling.or(self.max_rate).unwrap_or(rate).max(rate);
        let capacity = held(budget, rate);
        let ring = held(budget, reach);
        let most = self.most_held();
        if ring > most as f64 {
            let sized = match ring > capacity {
                true => format!(" (its ring is sized for {reach}/s: {ring:.0})"),
                false => String::new(),
            };
            return Err(format!(
                "budget × rate is {capacity:.0} webhooks{sized}, more than one queue may hold: \
                 {most} (max_queue_bytes {} at {JOB_OVERHEAD} bytes a webhook, at most \
                 {MAX_JOBS}); give a shorter budget or a lower rate",
                self.max_queue_bytes
            ));
        }
        Ok(capacity as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Fields, Origin};

    fn dest(budget: Option<&str>, rate: Option<f64>, ceiling: Option<f64>) -> Destination {
        let fields = Fields {
            name: Some("d".into()),
            url: Some("http://127.0.0.1:9/".into()),
            rate,
            ceiling,
            budget: budget.map(str::to_owned),
            ..Fields::default()
        };
        fields.check_body(&Origin::Default).unwrap()
    }

    fn limits(max_rate: Option<f64>) -> Limits {
        Limits {
            rate: 100.0,
            budget: Duration::from_secs(1),
            max_rate,
            max_queue_bytes: 64 << 20,
        }
    }

    #[test]
    fn a_queue_the_byte_budget_cannot_hold_is_refused_in_both_engines() {
        for l in [limits(Some(100.0)), limits(None)] {
            assert_eq!(l.check(&dest(Some("2s"), None, None)), Ok(200));
            assert_eq!(l.most_held(), 174_762);
            for budget in ["20000s", "10000000s"] {
                let e = l.check(&dest(Some(budget), None, None)).unwrap_err();
                assert!(e.contains("more than one queue may hold: 174762"), "{e}");
            }
            let crossed = l.check(&dest(None, Some(20.0), Some(10.0))).unwrap_err();
            assert!(
                crossed.contains("above the most allowed, 10/s"),
                "{crossed}"
            );
        }
        // The ring is sized for the ceiling, not the rate.
        let e = limits(Some(1e6))
            .check(&dest(Some("1s"), Some(10.0), Some(500_000.0)))
            .unwrap_err();
        assert!(e.contains("its ring is sized for 500000/s"), "{e}");
        // Above the set's highest rate: the library's own words.
        let e = limits(Some(100.0))
            .check(&dest(None, Some(200.0), None))
            .unwrap_err();
        assert!(e.contains("above the most allowed"), "{e}");
        // A small byte budget holds a smaller queue.
        let small = Limits {
            max_queue_bytes: JOB_OVERHEAD * 50,
            ..limits(None)
        };
        assert_eq!(small.check(&dest(Some("500ms"), None, None)), Ok(50));
        assert!(small.check(&dest(Some("1s"), None, None)).is_err());
    }
}
