//! A call through a breaker, as every surface drives it: given up after
//! `slow_call` it is a slow failure (C10), a returned value can count as
//! a failure (C17), a refusal says why no fallback served (C4).

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

mod common;
use breakerbank::{
    Bank, CallError, CallOptions, Decision, Dependency, ManualClock, Outcome, PartitionMetrics,
    State,
};
use common::*;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

const SLOW: Duration = Duration::from_millis(20);

/// Global `svc_client`: trips after 3 failures, `slow_call` 20 ms,
/// budget 1, threshold 1.
fn slow_bank() -> (Bank, ManualClock, Dependency) {
    let p = profile(
        "svc_client",
        "global",
        "{consecutive_failures: 3, slow_call: 20ms}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: SVC_DOWN}",
        "",
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("svc_client").expect("declared");
    (bank, clock, dep)
}

fn global(bank: &Bank) -> PartitionMetrics {
    bank.metrics().dependencies[0].partitions[0].clone()
}

#[test]
fn c10_a_permit_given_up_after_slow_call_is_a_slow_failure() {
    let (bank, clock, dep) = slow_bank();
    for _ in 0..3 {
        let p = admitted(dep.admit(None, None).unwrap());
        clock.advance(SLOW + Duration::from_millis(5));
        p.record(Outcome::Cancelled);
    }
    assert_eq!(
        dep.state(None).unwrap(),
        State::Open,
        "a hung dependency trips"
    );
    let m = global(&bank);
    assert_eq!((m.failures_total, m.cancelled_total), (3, 0));
}

#[test]
fn c10_a_permit_dropped_after_slow_call_is_a_slow_failure() {
    let (bank, clock, dep) = slow_bank();
    for _ in 0..3 {
        let p = admitted(dep.admit(None, None).unwrap());
        clock.advance(SLOW);
        drop(p);
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    assert_eq!(global(&bank).failures_total, 3);
}

#[test]
fn c10_a_call_given_up_before_slow_call_stays_cancelled() {
    let (bank, clock, dep) = slow_bank();
    for _ in 0..5 {
        let p = admitted(dep.admit(None, None).unwrap());
        clock.advance(SLOW - Duration::from_millis(1));
        p.record(Outcome::Cancelled);
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = global(&bank);
    assert_eq!((m.failures_total, m.cancelled_total), (0, 5));
}

#[test]
fn c10_a_dropped_call_async_future_of_a_hung_dependency_trips() {
    let (bank, clock, dep) = slow_bank();
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..3 {
        {
            let hung = dep.call_async(None, None, std::future::pending::<Result<(), ()>>());
            let mut hung = pin!(hung);
            assert!(hung.as_mut().poll(&mut cx).is_pending());
            clock.advance(SLOW * 2);
        } // the caller stops waiting: the future is dropped
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    assert_eq!(global(&bank).failures_total, 3);
    let refused = dep.call(None, None, || Ok::<_, ()>(()));
    assert!(matches!(refused, Err(CallError::Unavailable(_))));
}

#[test]
fn c10_a_probe_given_up_after_slow_call_reopens() {
    let (_bank, clock, dep) = slow_bank();
    fail(&dep, None, 3);
    clock.advance(Duration::from_secs(30));
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe());
    clock.advance(SLOW);
    p.record(Outcome::Cancelled);
    assert_eq!(dep.state(None).unwrap(), State::Open, "the probe was slow");
}

#[test]
fn c17_a_success_classified_as_cancelled_after_slow_call_is_a_failure() {
    let (bank, clock, dep) = slow_bank();
    let cancelled = |_: &String| Outcome::Cancelled;
    for _ in 0..3 {
        let opts = CallOptions::<(), String> {
            classify: Some(&cancelled),
            ..Default::default()
        };
        let r = dep.call_with(None, None, opts, || {
            clock.advance(SLOW);
            Err("gave up".to_string())
        });
        assert!(matches!(r, Err(CallError::Inner(_))));
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    assert_eq!(global(&bank).failures_total, 3);
}

#[test]
fn c10_a_permit_of_a_dependency_without_slow_call_given_up_stays_cancelled() {
    let (bank, clock, dep) = bank(1, 1, 1, "");
    let Decision::Admitted(p) = dep.admit(None, None).unwrap() else {
        panic!("closed admits")
    };
    clock.advance(Duration::from_secs(3600));
    p.record(Outcome::Cancelled);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(global(&bank).cancelled_total, 1);
}

fn stale_bank() -> (Bank, ManualClock, Dependency) {
    let p = profile(
        "catalog_client",
        "tenant",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: stale, max_staleness: 10s}",
        "",
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("catalog_client").expect("declared");
    (bank, clock, dep)
}

#[test]
fn c4_a_refusal_says_why_no_fallback_served() {
    let (_bank, clock, dep) = stale_bank();
    let key = |k| CallOptions::<u32, String> {
        cache_key: Some(k),
        ..Default::default()
    };
    dep.call_with(Some("acme"), None, key("sku-1"), || Ok(7))
        .unwrap();
    let _ = dep.call_with(Some("acme"), None, key("sku-1"), || Err("down".into()));
    assert_eq!(dep.state(Some("acme")).unwrap(), State::Open);
    let msg = |r: Result<u32, CallError<String>>| match r {
        Err(CallError::Unavailable(u)) => u.to_string(),
        other => panic!("{other:?}"),
    };
    let never = || -> Result<u32, String> { unreachable!("open") };
    assert!(
        msg(dep.call_with(Some("acme"), None, key("sku-2"), never))
            .contains(": no value cached for that key"),
        "no value for that key"
    );
    assert_eq!(
        dep.call_with(Some("acme"), None, key("sku-1"), never)
            .unwrap(),
        7
    );
    clock.advance(Duration::from_secs(12));
    let too_old = msg(dep.call_with(Some("acme"), None, key("sku-1"), never));
    assert!(
        too_old.contains("older than max_staleness by 2.000s"),
        "{too_old}"
    );
}

#[test]
fn c4_a_degraded_fallback_that_fails_or_is_missing_says_so() {
    let (_bank, _clock, dep) = bank(1, 1, 1, "");
    let _ = dep; // error fallback: its code is the answer, no reason appended
    let p = profile(
        "email_client",
        "global",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: degraded}",
        "",
    );
    let bank = Bank::with_clock(p, ManualClock::new());
    let email = bank.dependency("email_client").unwrap();
    email.force_open(None);
    let failed = CallOptions::<u32, ()> {
        degraded: Some(Box::new(|| None)),
        ..Default::default()
    };
    match email.call_with(None, None, failed, || Ok(1)) {
        Err(CallError::Unavailable(u)) => {
            assert_eq!(u.why, breakerbank::Unserved::DegradedFailed);
            assert!(u.to_string().ends_with(": the degraded behaviour failed"));
        }
        other => panic!("{other:?}"),
    }
    match email.call(None, None, || Ok::<u32, ()>(1)) {
        Err(CallError::Unavailable(u)) => {
            assert_eq!(u.why, breakerbank::Unserved::NoDegraded)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn c17_a_returned_value_classified_as_a_failure_trips_and_is_not_kept() {
    let (bank, _clock, dep) = stale_bank();
    let empty_is_failure = |v: &u32| {
        if *v == 0 {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    };
    let opts = || CallOptions::<u32, String> {
        cache_key: Some("k"),
        classify_ok: Some(&empty_is_failure),
        ..Default::default()
    };
    // The error answer is returned to the caller, counted as a failure.
    assert_eq!(
        dep.call_with(Some("acme"), None, opts(), || Ok(0)).unwrap(),
        0
    );
    assert_eq!(dep.state(Some("acme")).unwrap(), State::Open);
    let m = bank.metrics().dependencies[0]
        .partitions
        .iter()
        .find(|p| p.partition == "acme")
        .cloned()
        .unwrap();
    assert_eq!(m.failures_total, 1);
    // And it was not kept for the stale fallback.
    let served = dep.call_with(Some("acme"), None, opts(), || unreachable!());
    assert!(
        matches!(served, Err(CallError::Unavailable(_))),
        "{served:?}"
    );
}

#[test]
fn c3_begin_runs_ends_and_serves_through_one_home() {
    use breakerbank::{Begun, NotServed};
    let (_bank, clock, dep) = stale_bank();
    let Begun::Running(call) = dep.begin(Some("acme"), None).unwrap() else {
        panic!("closed admits")
    };
    assert!(!call.is_probe());
    assert_eq!(call.tenant(), Some("acme"));
    call.end_ok(&5u32, None).keep(Some("k"), || 5u32);
    let Begun::Running(call) = dep.begin(Some("acme"), None).unwrap() else {
        panic!("closed admits")
    };
    assert_eq!(call.end_err(&"boom", None), Outcome::Failure);
    let Begun::Refused(refused) = dep.begin(Some("acme"), None).unwrap() else {
        panic!("open refuses")
    };
    assert_eq!(refused.reason(), breakerbank::RejectReason::Open);
    assert_eq!(
        refused
            .serve(Some("k"), None::<fn() -> Option<u32>>)
            .unwrap(),
        5
    );
    // An expired deadline is never hidden by a fallback (C10).
    let Begun::Refused(refused) = dep.begin(Some("acme"), Some(clock.now())).unwrap() else {
        panic!("an expired deadline is refused")
    };
    assert_eq!(
        refused.serve(Some("k"), None::<fn() -> Option<u32>>),
        Err(NotServed::DeadlineExpired)
    );
}
