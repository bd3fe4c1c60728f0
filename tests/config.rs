//! Every invalid configuration gets its typed error; nothing panics.

use std::time::Duration;

use dripfeed::{BuildError, ChannelSink, Delivery, Overflow, RateError, Throttle, ThrottleBuilder};

fn builder() -> ThrottleBuilder<u32> {
    Throttle::builder().drain_rate(100.0)
}

#[test]
fn invalid_rates() {
    assert_eq!(
        Throttle::<u32>::builder().validate(),
        Err(BuildError::MissingRate)
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = builder().drain_rate(bad).validate().unwrap_err();
        assert!(
            matches!(
                err,
                BuildError::InvalidRate {
                    what: "drain rate",
                    ..
                }
            ),
            "{bad}: {err}"
        );
        let err = builder().max_rate(bad).validate().unwrap_err();
        assert!(
            matches!(
                err,
                BuildError::InvalidRate {
                    what: "max rate",
                    ..
                }
            ),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        builder().max_rate(50.0).validate(),
        Err(BuildError::RateAboveMax {
            rate: 100.0,
            max_rate: 50.0
        })
    );
}

#[test]
fn invalid_sizes_and_durations() {
    assert_eq!(
        builder().latency_budget(Duration::ZERO).validate(),
        Err(BuildError::ZeroDuration {
            what: "latency budget"
        })
    );
    assert_eq!(
        builder().capacity(0).validate(),
        Err(BuildError::ZeroCapacity { what: "capacity" })
    );
    assert!(matches!(
        builder().capacity(usize::MAX).validate(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        builder()
            .max_rate(1e300)
            .latency_budget(Duration::from_secs(3600))
            .validate(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert_eq!(
        builder().max_in_flight(0).validate(),
        Err(BuildError::InvalidInFlight(0))
    );
    assert_eq!(
        builder().max_queue_wait(Duration::ZERO).validate(),
        Err(BuildError::ZeroDuration {
            what: "max queue wait"
        })
    );
    assert_eq!(
        builder().deliver_timeout(Duration::ZERO).validate(),
        Err(BuildError::ZeroDuration {
            what: "deliver timeout"
        })
    );
    assert_eq!(
        builder().overflow(Overflow::DeadLetter).validate(),
        Err(BuildError::MissingSink)
    );
    let (sink, _rx) = ChannelSink::new(1).unwrap();
    assert_eq!(
        builder()
            .overflow(Overflow::DeadLetter)
            .dead_letter(sink)
            .validate(),
        Ok(())
    );
}

#[test]
fn capacity_follows_the_budget() {
    // 0.1 s × 30/s is 3.0000000000000004 in floating point: still 3
    assert_eq!(
        Throttle::<u32>::builder()
            .drain_rate(30.0)
            .latency_budget(Duration::from_millis(100))
            .validate(),
        Ok(())
    );
}

#[test]
fn build_outside_a_runtime_is_an_error_not_a_panic() {
    let err = builder()
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap_err();
    assert_eq!(err, BuildError::NoRuntime);
    assert_eq!(
        err.to_string(),
        "build must be called inside a tokio runtime"
    );
    // build_unspawned needs no runtime
    assert!(
        builder()
            .build_unspawned(|_: &u32, _| async { Delivery::Done })
            .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn rate_changes_are_validated() {
    let (throttle, _drain) = builder()
        .max_rate(200.0)
        .latency_budget(Duration::from_millis(100))
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    assert_eq!(throttle.capacity(), 10);
    for bad in [0.0, -5.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            throttle.set_drain_rate(bad),
            Err(RateError::Invalid(_))
        ));
    }
    assert_eq!(
        throttle.set_drain_rate(201.0),
        Err(RateError::AboveMax {
            rate: 201.0,
            max_rate: 200.0
        })
    );
    assert_eq!(throttle.set_drain_rate(0.5), Ok(100.0));
    assert_eq!(throttle.capacity(), 1, "at least one place");
    throttle.shutdown(Duration::ZERO).await;
    assert_eq!(throttle.set_drain_rate(10.0), Err(RateError::Closed));
}
