//! C17: what counts as a failure is the caller's call — a classifier per
//! call or per dependency for the wrapped forms; every error a failure by
//! default.

mod common;
use breakerbank::{CallError, CallOptions, Outcome, PartitionMetrics, State};
use common::*;
use std::future::Future;
use std::io;

fn global(bank: &breakerbank::Bank) -> PartitionMetrics {
    bank.metrics().dependencies[0].partitions[0].clone()
}

/// Polls a future that never waits to its end.
fn ready<F: Future>(fut: F) -> F::Output {
    let mut fut = Box::pin(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the future waited"),
    }
}

fn not_found() -> io::Error {
    io::Error::from(io::ErrorKind::NotFound)
}

fn with<'a>(classify: &'a dyn Fn(&io::Error) -> Outcome) -> CallOptions<'a, i32, io::Error> {
    CallOptions {
        classify: Some(classify),
        ..Default::default()
    }
}

#[test]
fn c17_by_default_every_error_is_a_failure() {
    let (bank, _c, dep) = bank(2, 1, 1, "");
    for _ in 0..2 {
        let r = dep.call(None, None, || Err::<(), _>(not_found()));
        assert!(matches!(r, Err(CallError::Inner(_))));
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    assert_eq!(global(&bank).failures_total, 2);
}

#[test]
fn c17_a_call_classifier_decides_and_the_error_still_reaches_the_caller() {
    let (bank, _c, dep) = bank(2, 1, 1, "");
    let as_success = |_: &io::Error| Outcome::Success;
    let as_cancelled = |_: &io::Error| Outcome::Cancelled;
    for _ in 0..5 {
        let r = dep.call_with(None, None, with(&as_success), || Err(not_found()));
        match r {
            Err(CallError::Inner(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            other => panic!("the error is returned whatever it counts as: {other:?}"),
        }
        let r = dep.call_with(None, None, with(&as_cancelled), || Err(not_found()));
        assert!(matches!(r, Err(CallError::Inner(_))));
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = global(&bank);
    assert_eq!((m.failures_total, m.cancelled_total), (0, 5));
    // A failure between two successes: the count restarts (C5).
    let as_failure = |_: &io::Error| Outcome::Failure;
    let _ = dep.call_with(None, None, with(&as_failure), || Err(not_found()));
    let _ = dep.call_with(None, None, with(&as_success), || Err(not_found()));
    let _ = dep.call_with(None, None, with(&as_failure), || Err(not_found()));
    assert_eq!(dep.state(None).unwrap(), State::Closed, "not consecutive");
    let _ = dep.call_with(None, None, with(&as_failure), || Err(not_found()));
    assert_eq!(dep.state(None).unwrap(), State::Open);
}

#[test]
fn c17_a_probe_classified_cancelled_returns_its_slot_and_success_closes() {
    let (_bank, clock, dep) = bank(1, 1, 1, "");
    fail(&dep, None, 1);
    clock.advance(SECS30);
    let as_cancelled = |_: &io::Error| Outcome::Cancelled;
    let _ = dep.call_with(None, None, with(&as_cancelled), || Err(not_found()));
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    assert_eq!(dep.inspect(None).unwrap().probes_in_flight, 0);
    let as_success = |_: &io::Error| Outcome::Success;
    let _ = dep.call_with(None, None, with(&as_success), || Err(not_found()));
    assert_eq!(
        dep.state(None).unwrap(),
        State::Closed,
        "an expected answer"
    );
}

#[test]
fn c17_the_dependency_default_is_set_once_and_a_call_classifier_overrides_it() {
    let (bank, _c, dep) = bank(2, 1, 1, "");
    let other = bank.dependency("svc_client").unwrap();
    assert!(dep
        .set_classify(|e| match e.downcast_ref::<io::Error>()?.kind() {
            io::ErrorKind::NotFound => Some(Outcome::Success),
            io::ErrorKind::Interrupted => Some(Outcome::Cancelled),
            _ => None,
        })
        .is_ok());
    assert!(
        other.set_classify(|_| Some(Outcome::Failure)).is_err(),
        "set once, on the dependency: another handle finds it set"
    );
    for _ in 0..3 {
        let _ = dep.call(None, None, || Err::<(), _>(not_found()));
        let _ = other.call(None, None, || {
            Err::<(), _>(io::Error::from(io::ErrorKind::Interrupted))
        });
        // An error type it does not know: left to the default rule.
        let _ = dep.call(None, None, || Err::<(), _>("not an io::Error"));
        let _ = dep.call(None, None, || Ok::<_, ()>(()));
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = global(&bank);
    assert_eq!((m.failures_total, m.cancelled_total), (3, 3));
    // The call's own classifier comes first.
    let as_failure = |_: &io::Error| Outcome::Failure;
    for _ in 0..2 {
        let _ = dep.call_with(None, None, with(&as_failure), || Err(not_found()));
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    // Other kinds of io::Error fall through to a failure.
    let (_b2, _c2, fresh) = common::bank(2, 1, 1, "");
    let _ = fresh.set_classify(|e| {
        (e.downcast_ref::<io::Error>()?.kind() == io::ErrorKind::NotFound)
            .then_some(Outcome::Success)
    });
    for _ in 0..2 {
        let _ = fresh.call(None, None, || {
            Err::<(), _>(io::Error::from(io::ErrorKind::ConnectionRefused))
        });
    }
    assert_eq!(fresh.state(None).unwrap(), State::Open);
}

#[test]
fn c17_async_calls_classify_like_sync_ones() {
    let (bank, _c, dep) = bank(2, 1, 1, "");
    let _ = dep.set_classify(|e| {
        (e.downcast_ref::<io::Error>()?.kind() == io::ErrorKind::NotFound)
            .then_some(Outcome::Success)
    });
    for _ in 0..3 {
        let r = ready(dep.call_async(None, None, async { Err::<(), _>(not_found()) }));
        assert!(matches!(r, Err(CallError::Inner(_))));
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let as_cancelled = |_: &io::Error| Outcome::Cancelled;
    let r = ready(dep.call_async_with(None, None, with(&as_cancelled), async {
        Err(io::Error::from(io::ErrorKind::ConnectionReset))
    }));
    assert!(matches!(r, Err(CallError::Inner(_))));
    assert_eq!(global(&bank).cancelled_total, 1);
    let ok = ready(dep.call_async_with(None, None, with(&as_cancelled), async { Ok(7) }));
    assert_eq!(ok.unwrap(), 7);
    assert_eq!(global(&bank).failures_total, 0);
}

#[test]
fn c17_an_error_counted_as_success_is_not_a_value_for_stale_fallbacks() {
    let p = profile(
        "catalog_client",
        "global",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: stale, max_staleness: 10m}",
        "",
    );
    let bank = breakerbank::Bank::with_clock(p, breakerbank::ManualClock::new());
    let cat = bank.dependency("catalog_client").unwrap();
    let as_success = |_: &io::Error| Outcome::Success;
    let opts = || CallOptions {
        cache_key: Some("sku"),
        classify: Some(&as_success as &dyn Fn(&io::Error) -> Outcome),
        ..Default::default()
    };
    let _ = cat.call_with(None, None, opts(), || Err(not_found()));
    cat.force_open(None);
    let served = cat.call_with(None, None, opts(), || -> Result<i32, io::Error> {
        panic!("forced open: not called")
    });
    assert!(
        matches!(served, Err(CallError::Unavailable(_))),
        "nothing was kept"
    );
}
