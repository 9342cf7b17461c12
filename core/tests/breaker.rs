//! Breaker behaviour on a ManualClock: C5–C8, C10–C13.

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;
use breakerbank::{Bank, Decision, Instant, ManualClock, Outcome, RejectReason, State};
use common::*;
use std::time::Duration;

#[test]
fn c5_consecutive_failures_trip_and_success_resets_the_count() {
    let (_b, _c, dep) = bank(3, 1, 1, "");
    fail(&dep, None, 2);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    fail(&dep, None, 2);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Closed,
        "the success reset the count"
    );
    fail(&dep, None, 1);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(r.reason, RejectReason::Open);
    assert_eq!(r.retry_after, Some(SECS30));
    assert_eq!(r.fallback.code(), Some("SVC_DOWN"));
}

#[test]
fn c5_failure_rate_needs_min_calls_and_rate() {
    let p = profile(
        "email_client",
        "global",
        "{failure_rate: 0.5, min_calls: 10, window: 10s}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: degraded}",
        "",
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("email_client").unwrap();
    // 9 failures: rate 100% but below min_calls.
    fail(&dep, None, 9);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // The 10th call is a success; 9/10 failed with min_calls reached: trip.
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Open,
        "9/10 ≥ 0.5 with ≥ 10 calls"
    );
}

#[test]
fn c5_failure_rate_below_threshold_stays_closed() {
    let p = profile(
        "email_client",
        "global",
        "{failure_rate: 0.5, min_calls: 4, window: 10s}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: degraded}",
        "",
    );
    let bank = Bank::with_clock(p, ManualClock::new());
    let dep = bank.dependency("email_client").unwrap();
    for _ in 0..50 {
        for _ in 0..2 {
            admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
        }
        fail(&dep, None, 1);
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed, "33% < 50%");
}

#[test]
fn c5_failure_rate_forgets_calls_outside_the_window() {
    let p = profile(
        "email_client",
        "global",
        "{failure_rate: 0.5, min_calls: 4, window: 10s}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: degraded}",
        "",
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("email_client").unwrap();
    fail(&dep, None, 3);
    clock.advance(Duration::from_secs(11));
    for _ in 0..3 {
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    }
    fail(&dep, None, 1);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Closed,
        "1 failure in 4 calls is 25%"
    );
    fail(&dep, None, 2);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Open,
        "3 of 6 in the window"
    );
}

#[test]
fn c5_slow_call_counts_as_failure() {
    let clock = ManualClock::new();
    let p = profile(
        "svc_client",
        "global",
        "{consecutive_failures: 2, slow_call: 2s}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        "",
    );
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("svc_client").unwrap();
    for _ in 0..2 {
        let permit = admitted(dep.admit(None, None).unwrap());
        clock.advance(Duration::from_secs(2));
        permit.record(Outcome::Success);
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
    let m = bank.metrics();
    assert_eq!(m.dependencies[0].partitions[0].failures_total, 2);
}

#[test]
fn c6_open_duration_backoff_and_cap_reset_on_close() {
    let (_b, clock, dep) = bank(1, 1, 1, "backoff: {multiplier: 2.0, max: 100s}");
    fail(&dep, None, 1);
    let mut expected = [30u64, 60, 100, 100].into_iter();
    let mut open_for = expected.next().unwrap();
    loop {
        let r = rejected(dep.admit(None, None).unwrap());
        assert_eq!(r.retry_after, Some(Duration::from_secs(open_for)));
        clock.advance(Duration::from_secs(open_for) - Duration::from_millis(1));
        assert_eq!(
            rejected(dep.admit(None, None).unwrap()).reason,
            RejectReason::Open
        );
        clock.advance(Duration::from_millis(1));
        let probe = admitted(dep.admit(None, None).unwrap());
        assert!(probe.is_probe());
        match expected.next() {
            Some(next) => {
                probe.record(Outcome::Failure);
                open_for = next;
            }
            None => {
                probe.record(Outcome::Success);
                break;
            }
        }
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    fail(&dep, None, 1);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(
        r.retry_after,
        Some(SECS30),
        "backoff resets when the breaker closes"
    );
}

fn half_open(b: u32, s: u32) -> (Bank, ManualClock, breakerbank::Dependency) {
    let (bank, clock, dep) = bank(1, b, s, "");
    fail(&dep, None, 1);
    clock.advance(SECS30);
    (bank, clock, dep)
}

#[test]
fn c7_probe_budget_bounds_probes_in_flight() {
    let (_b, _c, dep) = half_open(2, 5);
    let p1 = admitted(dep.admit(None, None).unwrap());
    let p2 = admitted(dep.admit(None, None).unwrap());
    assert!(p1.is_probe() && p2.is_probe());
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(r.reason, RejectReason::ProbeBudget);
    assert_eq!(r.retry_after, None);
    p1.record(Outcome::Success);
    let p3 = admitted(dep.admit(None, None).unwrap());
    assert!(p3.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    drop((p2, p3));
}

#[test]
fn c7_probe_of_an_earlier_episode_still_holds_its_slot() {
    let (_b, clock, dep) = half_open(2, 1);
    let slow = admitted(dep.admit(None, None).unwrap());
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Failure); // reopens
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(SECS30);
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget,
        "the slow probe of the last episode still holds one of two slots"
    );
    slow.record(Outcome::Success); // late: returns its slot, closes nothing
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    let again = admitted(dep.admit(None, None).unwrap());
    drop((p, again));
}

/// A dependency with `probe_timeout: 10s`, half-open (budget `b`,
/// threshold 1) at the returned clock.
fn half_open_timed(b: u32) -> (Bank, ManualClock, breakerbank::Dependency) {
    let (bank, clock, dep) = bank(1, b, 1, "probe_timeout: 10s");
    fail(&dep, None, 1);
    clock.advance(SECS30);
    (bank, clock, dep)
}

fn partition0(bank: &Bank) -> breakerbank::PartitionMetrics {
    bank.metrics().dependencies[0].partitions[0].clone()
}

#[test]
fn c7_a_probe_never_recorded_gives_its_slot_back_after_probe_timeout() {
    // A caller that loses its permit (a C caller has no destructor; here
    // the permit is forgotten) must not wedge the breaker half-open.
    let (bank, clock, dep) = half_open_timed(1);
    let lost = admitted(dep.admit(None, None).unwrap());
    assert!(lost.is_probe());
    std::mem::forget(lost);
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget,
        "within probe_timeout the lost probe still holds its slot"
    );
    clock.advance(Duration::from_millis(1));
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe(), "the timed-out probe gave its slot back");
    assert_eq!(partition0(&bank).cancelled_total, 1, "counted as cancelled");
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget,
        "the new probe holds the one slot"
    );
    p.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c7_c13_the_record_of_a_timed_out_probe_is_late_and_frees_no_slot() {
    for outcome in [Outcome::Success, Outcome::Failure, Outcome::Cancelled] {
        let (bank, clock, dep) = half_open_timed(2);
        let old = admitted(dep.admit(None, None).unwrap()).into_raw();
        let old2 = admitted(dep.admit(None, None).unwrap()).into_raw();
        clock.advance(Duration::from_secs(10));
        let p1 = admitted(dep.admit(None, None).unwrap());
        let p2 = admitted(dep.admit(None, None).unwrap());
        assert!(p1.is_probe() && p2.is_probe(), "{outcome:?}");
        let before = partition0(&bank);
        assert_eq!(before.cancelled_total, 2);
        dep.record_raw(old, outcome);
        let m = partition0(&bank);
        assert_eq!(m.late_records_total, 1, "{outcome:?}: late");
        assert_eq!(
            (m.failures_total, m.cancelled_total),
            (before.failures_total, before.cancelled_total),
            "{outcome:?}: counted as late only"
        );
        assert_eq!(dep.state(None).unwrap(), State::HalfOpen, "{outcome:?}");
        assert_eq!(
            rejected(dep.admit(None, None).unwrap()).reason,
            RejectReason::ProbeBudget,
            "{outcome:?}: the late record took a current probe's slot"
        );
        drop(p1); // cancelled: its slot is free again
        let p3 = admitted(dep.admit(None, None).unwrap());
        dep.record_raw(old2, outcome);
        assert_eq!(
            rejected(dep.admit(None, None).unwrap()).reason,
            RejectReason::ProbeBudget,
            "{outcome:?}: the second late record took a current probe's slot"
        );
        drop((p2, p3));
        let a = admitted(dep.admit(None, None).unwrap());
        let b = admitted(dep.admit(None, None).unwrap());
        assert!(a.is_probe() && b.is_probe(), "{outcome:?}: no slot leaked");
        drop((a, b));
    }
}

#[test]
fn c7_probes_of_an_earlier_episode_past_probe_timeout_free_the_first_admission_of_the_next() {
    let (bank, clock, dep) = half_open_timed(1);
    let lost = admitted(dep.admit(None, None).unwrap()).into_raw();
    // Another episode: reset, trip again, wait out the open period (the
    // lost probe still holds the one slot, and is 30 s old by then).
    dep.reset(None);
    fail(&dep, None, 1);
    clock.advance(SECS30);
    let before = partition0(&bank);
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe(), "the first admission of the half-open period");
    let after = partition0(&bank);
    assert_eq!(after.cancelled_total, before.cancelled_total + 1);
    dep.record_raw(lost, Outcome::Success);
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    p.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c7_a_live_probe_keeps_its_slot_until_probe_timeout_defaults_to_recovery_bound() {
    let (bank, clock, dep) = half_open(1, 1);
    assert_eq!(dep.config().probe_timeout, Duration::from_secs(300));
    let p = admitted(dep.admit(None, None).unwrap());
    clock.advance(Duration::from_secs(299));
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    assert_eq!(partition0(&bank).cancelled_total, 0);
    clock.advance(Duration::from_secs(1));
    let q = admitted(dep.admit(None, None).unwrap());
    p.record(Outcome::Success); // late: closes nothing
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    q.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c8_threshold_above_one_needs_that_many_successes() {
    let (_b, _c, dep) = half_open(1, 3);
    for i in 1..3 {
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
        assert_eq!(
            dep.state(None).unwrap(),
            State::HalfOpen,
            "after {i} successes"
        );
    }
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c8_probe_failure_reopens_for_a_new_open_period() {
    let (_b, clock, dep) = half_open(1, 3);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Failure);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(SECS30 - Duration::from_millis(1));
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::Open
    );
    clock.advance(Duration::from_millis(1));
    // A new episode: the earlier success does not count.
    for _ in 0..2 {
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    }
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
}

#[test]
fn c10_expired_deadline_is_rejected_not_counted() {
    let (bank, clock, dep) = bank(1, 1, 1, "");
    clock.advance(Duration::from_secs(5));
    let now = clock.now();
    let r = rejected(dep.admit(None, Some(now)).unwrap());
    assert_eq!(
        r.reason,
        RejectReason::DeadlineExpired,
        "a deadline equal to now has expired"
    );
    let r = rejected(dep.admit(None, Some(Instant::ZERO)).unwrap());
    assert_eq!(r.reason, RejectReason::DeadlineExpired);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let p = admitted(
        dep.admit(None, Some(now + Duration::from_nanos(1)))
            .unwrap(),
    );
    p.record(Outcome::Success);
    let m = &bank.metrics().dependencies[0].partitions[0];
    assert_eq!(m.deadline_expired_total, 2);
    assert_eq!(m.failures_total, 0);
}

#[test]
fn c10_cancelled_counts_neither_and_returns_the_probe_slot() {
    let (bank, _c, dep) = half_open(1, 1);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Cancelled);
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe(), "the cancelled probe returned its slot");
    p.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // Closed: cancellations never trip.
    for _ in 0..5 {
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Cancelled);
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(
        bank.metrics().dependencies[0].partitions[0].cancelled_total,
        6
    );
}

#[test]
fn c10_failure_after_deadline_is_still_a_failure() {
    let (_b, clock, dep) = bank(1, 1, 1, "");
    let p = admitted(
        dep.admit(None, Some(clock.now() + Duration::from_secs(1)))
            .unwrap(),
    );
    clock.advance(Duration::from_secs(2));
    p.record(Outcome::Failure);
    assert_eq!(dep.state(None).unwrap(), State::Open);
}

#[test]
fn c11_reset_and_force_open() {
    let (bank, _c, dep) = bank(1, 1, 1, "");
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    bank.subscribe(move |e| sink.lock().unwrap().push(e.kind));
    fail(&dep, None, 1);
    dep.reset(None);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    dep.force_open(None);
    assert_eq!(dep.state(None).unwrap(), State::ForcedOpen);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(r.reason, RejectReason::ForcedOpen);
    assert_eq!(r.retry_after, None);
    dep.reset(None);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let want = [
        breakerbank::EventKind::Transition,
        breakerbank::EventKind::Reset,
        breakerbank::EventKind::ForcedOpen,
        breakerbank::EventKind::Reset,
    ];
    assert!(bank.flush_events(Duration::from_secs(5)));
    assert_eq!(*events.lock().unwrap(), want);
}

#[test]
fn c12_ten_hour_clock_jump_goes_half_open_never_closed() {
    let (_b, clock, dep) = bank(1, 1, 2, "");
    fail(&dep, None, 1);
    clock.advance(Duration::from_secs(10 * 3600));
    assert_eq!(
        dep.state(None).unwrap(),
        State::HalfOpen,
        "the period is over: what an admission would find (C14), never closed"
    );
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe());
    assert_eq!(
        dep.state(None).unwrap(),
        State::HalfOpen,
        "never straight to closed"
    );
    p.record(Outcome::Success);
    assert_eq!(
        dep.state(None).unwrap(),
        State::HalfOpen,
        "threshold 2 needs a second probe"
    );
}

#[test]
fn c13_late_record_from_an_older_generation_changes_nothing() {
    let (bank, _c, dep) = bank(2, 1, 1, "");
    let old = admitted(dep.admit(None, None).unwrap());
    fail(&dep, None, 2);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    old.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    dep.reset(None);
    let old = admitted(dep.admit(None, None).unwrap());
    dep.reset(None);
    fail(&dep, None, 1);
    old.record(Outcome::Failure); // would trip if it counted
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = &bank.metrics().dependencies[0].partitions[0];
    assert_eq!(m.late_records_total, 2);
    assert_eq!(m.failures_total, 3);
}

#[test]
fn c13_dropped_permit_is_cancelled_and_returns_its_slot() {
    let (bank, _c, dep) = half_open(1, 1);
    {
        let _p = admitted(dep.admit(None, None).unwrap());
        assert_eq!(
            rejected(dep.admit(None, None).unwrap()).reason,
            RejectReason::ProbeBudget
        );
    }
    let p = admitted(dep.admit(None, None).unwrap());
    assert!(p.is_probe());
    drop(p);
    assert_eq!(
        bank.metrics().dependencies[0].partitions[0].cancelled_total,
        2
    );
}

#[test]
fn c13_permit_generation_changes_on_every_transition() {
    let (_b, clock, dep) = bank(1, 1, 1, "");
    let g0 = admitted(dep.admit(None, None).unwrap())
        .into_raw()
        .generation();
    fail(&dep, None, 1); // closed -> open
    clock.advance(SECS30);
    let p = admitted(dep.admit(None, None).unwrap()); // open -> half-open
    assert_eq!(p.generation(), g0 + 2);
    p.record(Outcome::Success); // half-open -> closed
    let g3 = admitted(dep.admit(None, None).unwrap()).generation();
    assert_eq!(g3, g0 + 3);
}

#[test]
fn healthy_admissions_need_no_clock() {
    // A clock that panics proves the healthy path never reads it.
    struct NoClock;
    impl breakerbank::Clock for NoClock {
        fn now(&self) -> Instant {
            panic!("the healthy path read the clock")
        }
    }
    let p = profile(
        "svc_client",
        "global",
        "{consecutive_failures: 3}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        "",
    );
    let bank = Bank::with_clock(p, NoClock);
    let dep = bank.dependency("svc_client").unwrap();
    for _ in 0..100 {
        match dep.admit(None, None).unwrap() {
            Decision::Admitted(p) => p.record(Outcome::Success),
            Decision::Rejected(r) => panic!("{r:?}"),
        }
    }
    let tenant = profile(
        "svc_client",
        "tenant",
        "{consecutive_failures: 3}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        "",
    );
    let bank = Bank::with_clock(tenant, NoClock);
    let dep = bank.dependency("svc_client").unwrap();
    for t in ["a", "b", "a"] {
        admitted(dep.admit(Some(t), None).unwrap()).record(Outcome::Success);
    }
}

#[test]
fn c12_an_open_period_lasts_its_duration_with_the_clock_at_20_years() {
    let (_b, clock, dep) = bank(1, 1, 1, "");
    clock.advance(Duration::from_secs(20 * 365 * 86_400));
    fail(&dep, None, 1);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(
        (r.reason, r.retry_after),
        (RejectReason::Open, Some(SECS30))
    );
    clock.advance(SECS30 - Duration::from_millis(1));
    rejected(dep.admit(None, None).unwrap());
    clock.advance(Duration::from_millis(1));
    assert!(admitted(dep.admit(None, None).unwrap()).is_probe());
}

/// Global `email_client` on the failure-rate policy: `rate` over
/// `min_calls` in a 60 s window, open for `open`.
fn rate_bank(
    rate: f64,
    min_calls: u32,
    open: &str,
) -> (Bank, ManualClock, breakerbank::Dependency) {
    let y = format!(
        "dependencies:
  email_client:
    isolation: global
    trip: {{failure_rate: {rate}, min_calls: {min_calls}, window: 60s}}
    open_duration: {open}
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: degraded}}
    recovery_bound: 5m
"
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(breakerbank::Profile::from_yaml(&y).unwrap(), clock.clone());
    let dep = bank.dependency("email_client").unwrap();
    (bank, clock, dep)
}

#[test]
fn c11_reset_clears_the_failure_rate_window() {
    let (_b, _c, dep) = rate_bank(0.5, 3, "30s");
    fail(&dep, None, 2);
    dep.reset(None);
    fail(&dep, None, 1);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Closed,
        "1 call after the reset"
    );
    // force_open then reset: the same.
    let (_b, _c, dep) = rate_bank(0.5, 3, "30s");
    fail(&dep, None, 2);
    dep.force_open(None);
    dep.reset(None);
    fail(&dep, None, 1);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c5_no_blind_interval_after_a_close() {
    let (_b, clock, dep) = rate_bank(0.5, 10, "1s");
    fail(&dep, None, 10);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(Duration::from_secs(1));
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // Still inside the trip's 6 s bucket: every call counts.
    fail(&dep, None, 10);
    assert_eq!(dep.state(None).unwrap(), State::Open, "10 of 10 failed");
}

#[test]
fn c14_state_reads_half_open_once_the_open_period_has_ended() {
    let (bank, clock, dep) = bank(1, 1, 1, "");
    fail(&dep, None, 1);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);
    let m = bank.metrics();
    assert_eq!(m.dependencies[0].partitions[0].state, State::HalfOpen);
    assert!(bank.prometheus().contains("state=\"half_open\"} 1"));
}

#[test]
fn c15_c14_a_manual_clock_moved_past_the_bound_announces_with_no_one_looking() {
    let (bank, clock, dep) = bank(1, 1, 1, "");
    let events = recorder(&bank);
    fail(&dep, None, 1);
    // Nobody admits, scrapes or asks: advancing the clock is all.
    clock.advance(SECS30);
    assert!(bank.flush_events(Duration::from_secs(5)));
    let kinds = |evs: &[breakerbank::Event]| -> Vec<(breakerbank::EventKind, Option<State>)> {
        evs.iter().map(|e| (e.kind, e.to)).collect()
    };
    assert_eq!(
        kinds(&events.lock().unwrap()),
        [
            (breakerbank::EventKind::Transition, Some(State::Open)),
            (breakerbank::EventKind::Transition, Some(State::HalfOpen)),
        ],
        "the end of the open period is announced by the sweep (C14)"
    );
    clock.advance(Duration::from_secs(300)); // recovery_bound 5m from the trip
    assert!(bank.flush_events(Duration::from_secs(5)));
    let evs = events.lock().unwrap().clone();
    assert_eq!(
        evs.iter()
            .filter(|e| e.kind == breakerbank::EventKind::Stuck)
            .count(),
        1,
        "{evs:?}"
    );
    // Once per episode.
    clock.advance(Duration::from_secs(300));
    assert!(bank.flush_events(Duration::from_secs(5)));
    assert_eq!(
        events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.kind == breakerbank::EventKind::Stuck)
            .count(),
        1
    );
}

#[test]
fn c15_on_the_system_clock_a_stuck_breaker_is_announced_with_no_one_looking() {
    let bank = Bank::new(
        breakerbank::Profile::from_yaml(
            "dependencies:
  svc_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 50ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: SVC_DOWN}
    recovery_bound: 200ms
",
        )
        .unwrap(),
    );
    let events = recorder(&bank);
    let dep = bank.dependency("svc_client").unwrap();
    fail(&dep, Some("acme"), 1);
    // Bounded wait for the sweeper (it looks every 250 ms): no call, no
    // scrape, no `stuck()` meanwhile.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let seen = |k: breakerbank::EventKind, to: Option<State>| {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.kind == k && (to.is_none() || e.to == to) && e.partition == "acme")
    };
    while !(seen(breakerbank::EventKind::Stuck, None)
        && seen(breakerbank::EventKind::Transition, Some(State::HalfOpen)))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen(breakerbank::EventKind::Transition, Some(State::HalfOpen)),
        "{:?}",
        events.lock().unwrap()
    );
    assert!(
        seen(breakerbank::EventKind::Stuck, None),
        "{:?}",
        events.lock().unwrap()
    );
}

#[test]
fn c13_a_held_permit_counts_one_outcome_whatever_the_threads() {
    use breakerbank::HeldPermit;
    // Two failures trip: a held permit recorded by many threads at once
    // counts one failure, so the breaker stays closed after one permit.
    let (_b, _c, dep) = bank(2, 1, 1, "");
    for _ in 0..50 {
        let held = HeldPermit::new(admitted(dep.admit(None, None).unwrap()));
        assert!(!held.is_probe(), "a closed admission is no probe");
        assert!(format!("{held:?}").contains("outcome: None"), "{held:?}");
        let wins: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| held.record(Outcome::Failure)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(wins.iter().filter(|r| r.is_ok()).count(), 1, "{wins:?}");
        assert!(wins
            .iter()
            .all(|r| *r == Ok(Outcome::Failure) || *r == Err(Outcome::Failure)));
        assert_eq!(held.outcome(), Some(Outcome::Failure));
        assert!(
            format!("{held:?}").contains("outcome: Some(Failure)"),
            "{held:?}"
        );
        drop(held);
        // One failure counted, then a success resets the count.
        assert_eq!(dep.state(None).unwrap(), State::Closed);
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    }
    let m = _b.metrics();
    assert_eq!(m.dependencies[0].partitions[0].failures_total, 50);
    assert_eq!(m.dependencies[0].partitions[0].cancelled_total, 0);
}

#[test]
fn c7_c13_a_held_permit_dropped_unrecorded_is_cancelled_and_gives_its_probe_back() {
    use breakerbank::HeldPermit;
    let (b, clock, dep) = bank(1, 1, 1, "");
    fail(&dep, None, 1);
    clock.advance(SECS30);
    let probe = HeldPermit::new(admitted(dep.admit(None, None).unwrap()));
    assert!(probe.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    drop(probe);
    assert!(
        admitted(dep.admit(None, None).unwrap()).is_probe(),
        "the dropped probe's slot is free again"
    );
    assert_eq!(
        b.metrics().dependencies[0].partitions[0].cancelled_total,
        2,
        "the held probe and the one just dropped"
    );
}

/// C5: the failure-rate policy trips when the rate is ≥ R, so a window
/// whose rate equals R exactly trips, for every R written with two
/// decimals (7 failures of 100 calls is a rate of 0.07, though 0.07 × 100
/// is a little over 7 in binary floating point), and one failure fewer
/// does not.
#[test]
fn c5_a_failure_rate_exactly_at_the_threshold_trips() {
    for calls in [10u32, 20, 100] {
        for pct in 1..100u32 {
            if pct * calls % 100 != 0 {
                continue;
            }
            let failures = pct * calls / 100;
            for (fails, trips) in [(failures - 1, false), (failures, true)] {
                if fails == 0 {
                    continue;
                }
                let rate = format!("0.{pct:02}");
                let p = profile(
                    "email_client",
                    "global",
                    &format!("{{failure_rate: {rate}, min_calls: {calls}, window: 10s}}"),
                    "{probe_budget: 1, success_threshold: 1}",
                    "{kind: degraded}",
                    "",
                );
                let bank = Bank::with_clock(p, ManualClock::new());
                let dep = bank.dependency("email_client").unwrap();
                for _ in 0..calls - fails {
                    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
                }
                fail(&dep, None, fails);
                let want = if trips { State::Open } else { State::Closed };
                assert_eq!(
                    dep.state(None).unwrap(),
                    want,
                    "failure_rate {rate}: {fails} failures of {calls} calls"
                );
            }
        }
    }
}

/// C7 × C9: a probe lost by its caller in an episode that then closed
/// gives its slot back after `probe_timeout`, as it would in half-open:
/// its closed partition is then evictable like any other, and a newcomer
/// to a full table gets a partition instead of the overflow.
#[test]
fn c7_c9_a_lost_probe_of_a_closed_partition_stops_holding_it_after_probe_timeout() {
    let p = profile(
        "payments_client",
        "tenant",
        "{consecutive_failures: 1}",
        "{probe_budget: 2, success_threshold: 1}",
        "{kind: error, code: X}",
        "probe_timeout: 10s\nmax_tenants: 1",
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("acme"), 1);
    clock.advance(SECS30);
    let closing = admitted(dep.admit(Some("acme"), None).unwrap());
    let lost = admitted(dep.admit(Some("acme"), None).unwrap());
    assert!(closing.is_probe() && lost.is_probe());
    let lost = lost.into_raw(); // a C caller that lost its permit
    closing.record(Outcome::Success);
    assert_eq!(dep.state(Some("acme")).unwrap(), State::Closed);
    clock.advance(Duration::from_secs(60)); // well past probe_timeout
    admitted(dep.admit(Some("globex"), None).unwrap()).record(Outcome::Success);
    assert_eq!(
        dep.partition_of(Some("globex")),
        "globex",
        "acme's closed partition holds nothing any more: evicted for the newcomer"
    );
    // The lost probe's record, if it ever comes, returns nothing to a
    // later owner of acme's slot (C9, C13). Of the table's two slots,
    // globex took the one acme's was not; the next newcomer evicts idle
    // globex and takes acme's old slot, the only one free.
    admitted(dep.admit(Some("initech"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("initech")), "initech");
    fail(&dep, Some("initech"), 1);
    clock.advance(SECS30);
    let probe = admitted(dep.admit(Some("initech"), None).unwrap());
    assert!(probe.is_probe());
    assert_eq!(dep.inspect(Some("initech")).unwrap().probes_in_flight, 1);
    dep.record_raw(lost, Outcome::Success);
    assert_eq!(dep.inspect(Some("initech")).unwrap().probes_in_flight, 1);
    assert_eq!(dep.state(Some("initech")).unwrap(), State::HalfOpen);
    probe.record(Outcome::Success);
    assert_eq!(dep.state(Some("initech")).unwrap(), State::Closed);
}

#[test]
fn c5_c12_one_failure_a_bucket_epoch_range_later_does_not_trip_on_old_failures() {
    // Three failures, then one 2^24 buckets later (194 days of 1 s
    // buckets: the rolling window's bucket epochs are 24 bits): a window
    // holding one failure of one call, under `min_calls: 4`, stays
    // closed, globally and per tenant.
    for (isolation, tenant) in [
        ("global", None),
        ("tenant\n    max_tenants: 10", Some("acme")),
    ] {
        let y = format!(
            "dependencies:
  email_client:
    isolation: {isolation}
    trip: {{failure_rate: 0.5, min_calls: 4, window: 10s}}
    open_duration: 30s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: degraded}}
    recovery_bound: 5m
"
        );
        let clock = ManualClock::new();
        let bank = Bank::with_clock(breakerbank::Profile::from_yaml(&y).unwrap(), clock.clone());
        let dep = bank.dependency("email_client").unwrap();
        fail(&dep, tenant, 3);
        assert_eq!(dep.state(tenant).unwrap(), State::Closed);
        clock.advance(Duration::from_secs(1 << 24));
        fail(&dep, tenant, 1);
        assert_eq!(
            dep.state(tenant).unwrap(),
            State::Closed,
            "{isolation}: one failure of one call in the window"
        );
        fail(&dep, tenant, 3);
        assert_eq!(
            dep.state(tenant).unwrap(),
            State::Open,
            "{isolation}: 4 of 4"
        );
    }
}
