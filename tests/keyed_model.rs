//! `KeyedBuckets` against a plain reference model of the formulas.

use std::collections::HashMap;
use std::time::Duration;

use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota};
use proptest::prelude::*;
use tokio::time::Instant;

#[derive(Debug, Clone)]
enum Op {
    Admit(u8, f64),
    CanAdmit(u8, f64),
    Settle(u8, f64, f64),
    SetQuota(u8, Option<(f64, f64)>),
    Advance(u64),
}

fn cost() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => 0.01f64..6.0,
        1 => Just(0.0),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0), Just(1e300)],
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6, cost()).prop_map(|(k, c)| Op::Admit(k, c)),
        2 => (0u8..6, cost()).prop_map(|(k, c)| Op::CanAdmit(k, c)),
        2 => (0u8..6, 0.0f64..6.0, 0.0f64..12.0).prop_map(|(k, e, a)| Op::Settle(k, e, a)),
        1 => (0u8..6, proptest::option::of((1.0f64..10.0, 0.1f64..10.0))).prop_map(|(k, q)| Op::SetQuota(k, q)),
        4 => prop_oneof![0u64..10_000, 0u64..3_000_000_000].prop_map(Op::Advance),
    ]
}

/// How far the table's figures may stray from the model's: the table
/// keeps when each bucket empties in an `f64` of nanoseconds, so its debts
/// carry the rounding of a time and a rate (relative to the size at most,
/// or a few nanoseconds' worth absolute).
const TOLERANCE: f64 = 1e-9;

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * (1.0 + a.abs().max(b.abs()))
}

/// The formulas, written plainly: `HashMap<key, (debt, last_nanos)>`.
struct Model {
    default: (f64, f64),
    quotas: HashMap<u8, (f64, f64)>,
    buckets: HashMap<u8, (f64, u64)>,
}

impl Model {
    fn quota(&self, k: u8) -> (f64, f64) {
        self.quotas.get(&k).copied().unwrap_or(self.default)
    }
    fn debt(&self, k: u8, now: u64) -> f64 {
        let (_, rate) = self.quota(k);
        match self.buckets.get(&k) {
            Some(&(debt, last)) => (debt - ((now - last) as f64 / 1e9) * rate).max(0.0),
            None => 0.0,
        }
    }
}

fn check_decision(
    model: &mut Model,
    k: u8,
    cost: f64,
    now: u64,
    got: Result<f64, AdmitError>,
    apply: bool,
) {
    let (size, rate) = model.quota(k);
    let debt = model.debt(k, now);
    match got {
        _ if !(cost.is_finite() && cost > 0.0) => {
            assert!(matches!(got, Err(AdmitError::InvalidCost(_))))
        }
        _ if cost > size => assert_eq!(got, Err(AdmitError::CostExceedsSize { cost, size })),
        Ok(after) => {
            assert!(
                debt + cost <= size * (1.0 + TOLERANCE),
                "admitted over size"
            );
            assert!(
                near(after, (debt + cost).min(size)),
                "{after} {debt} + {cost}"
            );
            if apply {
                model.buckets.insert(k, (after, now));
            }
        }
        Err(AdmitError::OverQuota(o)) => {
            assert!(debt + cost > size * (1.0 - TOLERANCE), "refused with room");
            assert!(near(o.debt(), debt) && o.size() == size, "{o:?} {debt}");
            let wait = (debt + cost - size) / rate;
            assert!((o.retry_after().as_secs_f64() - wait).abs() <= 2e-9 * (1.0 + wait));
        }
        Err(e) => panic!("unexpected {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn table_matches_model(size in 1.0f64..20.0, rate in 0.1f64..10.0, ops in proptest::collection::vec(op(), 1..120)) {
        // 8 shards of 8 slots for 6 keys: never evicts, so the model is exact.
        let table = KeyedBuckets::<u8>::builder(64, Quota::per_second(rate).burst(size).unwrap()).shards(8).build().unwrap();
        let t0 = Instant::now();
        let at = |n: u64| t0 + Duration::from_nanos(n);
        let mut model = Model { default: (size, rate), quotas: HashMap::new(), buckets: HashMap::new() };
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Admit(k, c) => {
                    let got = table.try_admit_at(&k, c, at(now));
                    if let Ok(a) = &got {
                        prop_assert!(a.debt() <= a.size() && a.remaining() == a.size() - a.debt());
                    }
                    check_decision(&mut model, k, c, now, got.map(|a| a.debt()), true);
                }
                Op::CanAdmit(k, c) => {
                    let before: Vec<f64> = (0..6).map(|k| table.debt_at(&k, at(now))).collect();
                    let got = table.can_admit_at(&k, c, at(now)).map(|()| model.debt(k, now) + c);
                    check_decision(&mut model, k, c, now, got, false);
                    let after: Vec<f64> = (0..6).map(|k| table.debt_at(&k, at(now))).collect();
                    prop_assert_eq!(before, after);
                }
                Op::Settle(k, e, a) => {
                    let want = (model.debt(k, now) + (a - e)).max(0.0);
                    let got = table.settle_at(&k, e, a, at(now)).unwrap();
                    prop_assert!(near(got, want), "{} {}", got, want);
                    model.buckets.insert(k, (want, now));
                }
                Op::SetQuota(k, q) => {
                    // A change of quota first brings the bucket up to now.
                    let debt = model.debt(k, now);
                    let changes = q.is_some() || model.quotas.contains_key(&k);
                    if changes && model.buckets.contains_key(&k) {
                        model.buckets.insert(k, (debt, now));
                    }
                    match q {
                        Some((s, r)) => {
                            table.set_quota_at(k, Quota::per_second(r).burst(s).unwrap(), at(now)).unwrap();
                            model.quotas.insert(k, (s, r));
                        }
                        None => {
                            prop_assert_eq!(table.clear_quota_at(&k, at(now)), model.quotas.remove(&k).is_some());
                        }
                    }
                }
                Op::Advance(d) => now += d,
            }
            for k in 0..6 {
                let debt = table.debt_at(&k, at(now));
                prop_assert!(debt >= 0.0);
                prop_assert!(near(debt, model.debt(k, now)), "{} {}", debt, model.debt(k, now));
            }
        }
        prop_assert_eq!(table.evictions(), 0);
        prop_assert!(table.len() <= 6);
    }

    #[test]
    fn drained_bucket_is_a_new_bucket(
        history in proptest::collection::vec((0.1f64..5.0, 0.0f64..8.0), 1..10),
        probe in proptest::collection::vec((cost(), 0u64..2_000_000_000), 1..30),
    ) {
        let q = Quota::per_second(1.5).burst(5.0).unwrap();
        let table = KeyedBuckets::<&str>::builder(8, q).shards(1).build().unwrap();
        let t0 = Instant::now();
        for (c, actual) in history {
            let _ = table.try_admit_at(&"old", c, t0);
            table.settle_at(&"old", c, actual, t0).unwrap();
        }
        let debt = table.debt_at(&"old", t0);
        let drained = t0 + Duration::from_secs_f64(debt / q.rate()) + Duration::from_secs(1);
        prop_assert_eq!(table.debt_at(&"old", drained), 0.0);
        let mut now = drained;
        for (c, step) in probe {
            let (old, new) = (table.try_admit_at(&"old", c, now), table.try_admit_at(&"new", c, now));
            prop_assert_eq!(format!("{old:?}"), format!("{new:?}"));
            prop_assert_eq!(table.debt_at(&"old", now), table.debt_at(&"new", now));
            now += Duration::from_nanos(step);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Kept as when it empties (an `f64` of nanoseconds since the table was
    /// built), a bucket still takes exactly its burst at one instant, at
    /// awkward rates up to 10^4 a second with whole costs (10^3 with costs
    /// of 0.01) and up to a year into the table's life, and then exactly
    /// what its rate gives back.
    #[test]
    fn a_burst_is_exact_at_any_rate_and_age(
        (burst, cost, rate) in prop_oneof![
            (1u32..300, Just(1.0f64), prop_oneof![0.1f64..10.0, 10.0f64..1e4]),
            (1u32..20, Just(0.01f64), prop_oneof![0.1f64..10.0, 10.0f64..1e3]),
        ],
        age_s in prop_oneof![Just(0u64), 0u64..31_536_000],
    ) {
        let q = Quota::per_second(rate).burst(f64::from(burst)).unwrap();
        let table = KeyedBuckets::<u8>::new(4, q).unwrap();
        let now = Instant::now() + Duration::from_secs(age_s);
        let each = (f64::from(burst) / cost).round() as u32;
        let taken = (0..each + 5).filter(|_| table.try_admit_at(&1, cost, now).is_ok()).count();
        prop_assert_eq!(taken, each as usize);
        // Two units' time later, two more fit (one if that is the burst)
        // and a third does not. Each admission rounds its time up by at
        // most one step of the f64 (a nanosecond at 104 days, 4 at a year),
        // so the wait allows one per admission made.
        let at = (age_s * 1_000_000_000) as f64 * 2.0;
        let step = at.next_up() - at;
        let rounding = Duration::from_nanos((f64::from(each + 2) * step).ceil() as u64 + 2);
        let later = now + Duration::from_secs_f64(2.0 / rate) + rounding;
        let again = (0..5).filter(|_| table.try_admit_at(&1, 1.0, later).is_ok()).count();
        prop_assert_eq!(again, burst.min(2) as usize);
    }
}
