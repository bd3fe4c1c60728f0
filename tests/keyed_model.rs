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
            assert!(debt + cost <= size, "admitted over size");
            assert_eq!(after, debt + cost);
            if apply {
                model.buckets.insert(k, (debt + cost, now));
            }
        }
        Err(AdmitError::OverQuota(o)) => {
            assert!(debt + cost > size, "refused with room");
            assert_eq!((o.debt(), o.size()), (debt, size));
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
                    prop_assert_eq!(table.settle_at(&k, e, a, at(now)), Ok(want));
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
                prop_assert_eq!(debt, model.debt(k, now));
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
