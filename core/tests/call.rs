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
use std::task::{Context, Poll, Waker};
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
    assert_eq!(dep.state(None).unwrap(), State::Open, "a hung dependency trips");
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
