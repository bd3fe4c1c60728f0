//! Every input gives a value or a typed error, never a panic: NaN,
//! infinities, subnormals, huge and negative numbers into the builder, the
//! rate, the per-key maths and the header rendering. The proptest mirror of
//! the `cargo fuzz` target in `fuzz/`.

use std::time::Duration;

use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota};
use dripfeed::{BuildError, Delivery, Throttle, headers};
use proptest::prelude::*;
use tokio::time::Instant;

fn hostile() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE / 4.0),
        Just(f64::MAX),
        Just(1e-300),
        Just(1e300),
        -1e9..1e9f64,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, .. ProptestConfig::default() })]

    #[test]
    fn the_builder_answers_every_configuration(
        rate in hostile(),
        max in hostile(),
        budget_ns in any::<u64>(),
        capacity in any::<usize>(),
        use_capacity in any::<bool>(),
        new_rate in hostile(),
    ) {
        let mut b = Throttle::<u8>::builder().drain_rate(rate).max_rate(max);
        b = if use_capacity { b.capacity(capacity) } else { b.latency_budget(Duration::from_nanos(budget_ns)) };
        // Validate everything; allocate only small rings.
        let ring = if use_capacity { capacity as f64 } else { budget_ns as f64 * 1e-9 * max };
        if b.validate().is_ok() && ring >= 1e6 {
            return Ok(());
        }
        match b.build_unspawned(|_: &u8, _| async { Delivery::Done }) {
            Ok((throttle, _drain)) => {
                prop_assert!(rate.is_finite() && rate > 0.0 && rate <= max);
                prop_assert!(throttle.capacity() >= 1);
                let _ = throttle.set_drain_rate(new_rate);
                prop_assert!(throttle.drain_rate().is_finite() && throttle.drain_rate() > 0.0);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty() && e != BuildError::NoRuntime),
        }
    }

    #[test]
    fn the_per_key_maths_answers_every_input(
        size in hostile(),
        rate in hostile(),
        ops in prop::collection::vec((hostile(), hostile(), any::<u32>(), 0u8..4), 1..40),
    ) {
        let Ok(quota) = Quota::per_second(rate).burst(size) else { return Ok(()); };
        let Ok(table) = KeyedBuckets::new(4, quota) else { return Ok(()); };
        let mut now = Instant::now();
        for (cost, actual, dt_us, op) in ops {
            now += Duration::from_micros(u64::from(dt_us));
            let key = u64::from(dt_us % 6);
            match op {
                0 => match table.try_admit_at(&key, cost, now) {
                    Ok(admit) => prop_assert!(admit.debt() <= quota.size() * (1.0 + 1e-12)),
                    // a tiny rate saturates the wait: a value, not a panic
                    Err(AdmitError::OverQuota(over)) => prop_assert!(over.retry_after() > Duration::ZERO),
                    Err(_) => {}
                },
                1 => { let _ = table.can_admit_at(&key, cost, now); }
                2 => { let _ = table.settle_at(&key, cost, actual, now); }
                _ => prop_assert!(table.debt_at(&key, now) >= 0.0),
            }
            prop_assert!(table.len() <= table.max_keys());
        }
    }

    #[test]
    fn refusals_render_for_any_quota_and_cost(
        size in hostile(),
        rate in hostile(),
        drain in hostile(),
        costs in prop::collection::vec(hostile(), 1..20),
    ) {
        let Ok(quota) = Quota::per_second(rate).burst(size) else { return Ok(()); };
        let built = Throttle::<u8>::builder()
            .drain_rate(drain)
            .capacity(2)
            .per_key(8, quota)
            .build_unspawned(|_: &u8, _| async { Delivery::Done });
        let Ok((throttle, _drain)) = built else { return Ok(()); };
        for (i, cost) in costs.into_iter().enumerate() {
            if let Err(refused) = throttle.try_submit(dripfeed::Submission::new(0).key(i % 3, cost)) {
                let _ = refused.retry_after();
                let _ = refused.rate_limit().map(|l| (l.header(), l.policy_header()));
                prop_assert!(headers::for_rejected(&refused).len() <= 3);
            }
            if let Err(refused) = throttle.try_submit(1) {
                let _ = headers::for_rejected(&refused);
            }
        }
    }

    #[test]
    fn headers_render_any_wait(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        let s = headers::retry_after(d);
        prop_assert!(s.parse::<u64>().is_ok_and(|v| v >= 1));
    }
}
