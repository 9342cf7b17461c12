//! C18: `inspect` reads one breaker's state, counters and episode, and
//! changes nothing.

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;
use breakerbank::{Bank, Inspection, Instant, ManualClock, Outcome, State};
use common::*;
use std::time::Duration;

fn tenant_dep(bank: &Bank) -> breakerbank::Dependency {
    bank.dependency("payments_client").unwrap()
}

fn fresh(since: Instant) -> Inspection {
    Inspection {
        state: State::Closed,
        consecutive_failures: 0,
        half_open_successes: 0,
        probes_in_flight: 0,
        retrips: 0,
        since,
        retry_after: None,
        window_calls: 0,
        window_failures: 0,
    }
}

#[test]
fn c18_inspect_follows_a_breaker_through_a_whole_episode() {
    let (bank, clock, dep) = bank(3, 2, 2, "backoff: {multiplier: 2.0, max: 5m}");
    assert_eq!(dep.inspect(None).unwrap(), fresh(Instant::from_nanos(0)));
    fail(&dep, None, 2);
    assert_eq!(dep.inspect(None).unwrap().consecutive_failures, 2);

    clock.advance(Duration::from_secs(7));
    let tripped_at = bank.now();
    fail(&dep, None, 1);
    let open = dep.inspect(None).unwrap();
    assert_eq!(
        open,
        Inspection {
            state: State::Open,
            consecutive_failures: 0,
            half_open_successes: 0,
            probes_in_flight: 0,
            retrips: 0,
            since: tripped_at,
            retry_after: Some(SECS30),
            window_calls: 0,
            window_failures: 0,
        }
    );
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        dep.inspect(None).unwrap().retry_after,
        Some(Duration::from_secs(20)),
        "retry_after counts down"
    );

    // The open period ends: read as half-open before anyone admits.
    clock.advance(Duration::from_secs(20));
    let ended = dep.inspect(None).unwrap();
    assert_eq!((ended.state, ended.retry_after), (State::HalfOpen, None));
    let p1 = admitted(dep.admit(None, None).unwrap());
    let p2 = admitted(dep.admit(None, None).unwrap());
    let half = dep.inspect(None).unwrap();
    assert_eq!(
        (half.state, half.probes_in_flight, half.since),
        (State::HalfOpen, 2, tripped_at)
    );
    p1.record(Outcome::Success);
    let half = dep.inspect(None).unwrap();
    assert_eq!((half.half_open_successes, half.probes_in_flight), (1, 1));

    // A probe failure re-trips: same episode, one re-trip, backoff applied.
    p2.record(Outcome::Failure);
    let retripped = dep.inspect(None).unwrap();
    assert_eq!(retripped.state, State::Open);
    assert_eq!(retripped.retrips, 1);
    assert_eq!(retripped.since, tripped_at, "a re-trip is the same episode");
    assert_eq!(retripped.retry_after, Some(Duration::from_secs(60)));
    assert_eq!(retripped.half_open_successes, 0);

    // Two successes close it: a new closed episode from the close.
    clock.advance(Duration::from_secs(60));
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.inspect(None).unwrap(), fresh(bank.now()));
}

#[test]
fn c18_inspect_changes_nothing_and_announces_nothing() {
    let (bank, clock, dep) = bank(1, 2, 2, "");
    let events = std::sync::Arc::new(std::sync::Mutex::new(0usize));
    let seen = events.clone();
    bank.subscribe(move |_| *seen.lock().unwrap() += 1);
    fail(&dep, None, 1);
    clock.advance(SECS30);
    let probe = admitted(dep.admit(None, None).unwrap());
    bank.flush_events(Duration::from_secs(5));
    let before = (*events.lock().unwrap(), bank.metrics());
    let first = dep.inspect(None).unwrap();
    for _ in 0..3 {
        assert_eq!(dep.inspect(None).unwrap(), first);
    }
    bank.flush_events(Duration::from_secs(5));
    assert_eq!((*events.lock().unwrap(), bank.metrics()), before);
    // The probe's permit is still of the current generation: it counts.
    probe.record(Outcome::Success);
    assert_eq!(dep.inspect(None).unwrap().half_open_successes, 1);
}

#[test]
fn c18_inspect_never_creates_a_partition_and_reads_an_unseen_tenant_as_fresh() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let bank = Bank::with_clock(
        profile(
            "payments_client",
            "tenant",
            "{consecutive_failures: 2}",
            "{probe_budget: 1, success_threshold: 1}",
            "{kind: error, code: X}",
            "max_tenants: 10",
        ),
        clock.clone(),
    );
    let pay = tenant_dep(&bank);
    clock.advance(Duration::from_secs(5));
    // No transition yet: the start of the bank's clock, whenever the bank
    // was made on it.
    let created = Instant::from_nanos(0);
    assert_eq!(pay.inspect(Some("ghost")).unwrap(), fresh(created));
    assert!(
        bank.metrics().dependencies[0].partitions.is_empty(),
        "inspecting made no partition"
    );
    // A tenant that has a partition but never left closed: the clock's start.
    fail(&pay, Some("acme"), 1);
    let acme = pay.inspect(Some("acme")).unwrap();
    assert_eq!((acme.consecutive_failures, acme.since), (1, created));
    assert_eq!(
        pay.inspect(Some("ghost")).unwrap(),
        fresh(created),
        "another tenant's failures are not ghost's (C9)"
    );
    // After a dependency-wide force, an unseen tenant reads forced open.
    pay.force_open(None);
    assert_eq!(pay.inspect(Some("ghost")).unwrap().state, State::ForcedOpen);
    assert_eq!(
        bank.metrics().dependencies[0].partitions.len(),
        1,
        "still only acme"
    );
}

#[test]
fn c18_inspect_applies_the_tenant_rules() {
    let tb = tenant_bank(2, 10);
    let pay = tenant_dep(&tb);
    assert_eq!(
        pay.inspect(None),
        Err(breakerbank::AdmitError::TenantRequired)
    );
    assert_eq!(
        pay.inspect(Some("")),
        Err(breakerbank::AdmitError::TenantRequired)
    );
    let long = "x".repeat(257);
    assert_eq!(
        pay.inspect(Some(&long)),
        Err(breakerbank::AdmitError::InvalidTenant {
            problem: breakerbank::TenantProblem::TooLong { len: 257 }
        })
    );
    // A global dependency ignores the tenant.
    let (_b, _c, dep) = bank(3, 1, 1, "");
    assert_eq!(dep.inspect(Some("anything")), dep.inspect(None));
}

#[test]
fn c18_forced_open_reads_since_the_force_with_no_retry_after() {
    let (bank, clock, dep) = bank(3, 1, 1, "");
    fail(&dep, None, 2);
    clock.advance(Duration::from_secs(3));
    dep.force_open(None);
    let forced = dep.inspect(None).unwrap();
    assert_eq!(
        forced,
        Inspection {
            state: State::ForcedOpen,
            consecutive_failures: 0,
            half_open_successes: 0,
            probes_in_flight: 0,
            retrips: 0,
            since: bank.now(),
            retry_after: None,
            window_calls: 0,
            window_failures: 0,
        }
    );
    clock.advance(Duration::from_secs(4));
    dep.reset(None);
    assert_eq!(dep.inspect(None).unwrap(), fresh(bank.now()), "the reset");
}

/// `email_client` on the failure-rate policy: 50% over `min_calls` in 10 s.
fn rate_profile(isolation: &str, min_calls: u32) -> breakerbank::Profile {
    profile(
        "email_client",
        isolation,
        &format!("{{failure_rate: 0.5, min_calls: {min_calls}, window: 10s}}"),
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: degraded}",
        "",
    )
}

#[test]
fn c18_under_failure_rate_consecutive_failures_are_the_windows_failures() {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(rate_profile("global", 10), clock.clone());
    let dep = bank.dependency("email_client").unwrap();
    fail(&dep, None, 2);
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    fail(&dep, None, 1);
    assert_eq!(
        dep.inspect(None).unwrap().consecutive_failures,
        3,
        "failures in the window, a success between them or not"
    );
    clock.advance(Duration::from_secs(11));
    assert_eq!(
        dep.inspect(None).unwrap().consecutive_failures,
        0,
        "the window slid past them"
    );
}

#[test]
fn c18_tenant_failure_rate_reads_its_own_episode_window() {
    let bank = Bank::with_clock(rate_profile("tenant", 4), ManualClock::new());
    let dep = bank.dependency("email_client").unwrap();
    fail(&dep, Some("acme"), 2);
    assert_eq!(dep.inspect(Some("acme")).unwrap().consecutive_failures, 2);
    dep.reset(Some("acme"));
    assert_eq!(
        dep.inspect(Some("acme")).unwrap().consecutive_failures,
        0,
        "a reset starts a new window"
    );
}

#[test]
fn c18_inspect_reads_the_failure_rate_window() {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(rate_profile("global", 10), clock.clone());
    let dep = bank.dependency("email_client").unwrap();
    for _ in 0..4 {
        admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    }
    fail(&dep, None, 2);
    let i = dep.inspect(None).unwrap();
    assert_eq!((i.window_calls, i.window_failures), (6, 2));
    assert_eq!(i.consecutive_failures, 2, "the same read");
    clock.advance(Duration::from_secs(11));
    let i = dep.inspect(None).unwrap();
    assert_eq!((i.window_calls, i.window_failures), (0, 0), "slid past");
    // A tenant's window is its own episode's.
    let bank = Bank::with_clock(rate_profile("tenant", 10), ManualClock::new());
    let dep = bank.dependency("email_client").unwrap();
    admitted(dep.admit(Some("acme"), None).unwrap()).record(Outcome::Success);
    fail(&dep, Some("acme"), 1);
    let i = dep.inspect(Some("acme")).unwrap();
    assert_eq!((i.window_calls, i.window_failures), (2, 1));
    let other = dep.inspect(Some("globex")).unwrap();
    assert_eq!((other.window_calls, other.window_failures), (0, 0));
    // The consecutive policy keeps no window.
    let (_bank, _clock, dep) = bank_consecutive();
    fail(&dep, None, 2);
    let i = dep.inspect(None).unwrap();
    assert_eq!((i.window_calls, i.window_failures), (0, 0));
}

fn bank_consecutive() -> (Bank, ManualClock, breakerbank::Dependency) {
    bank(3, 1, 1, "")
}
