//! C22: observe mode. Every call is admitted and counted, the trip policy
//! is judged, and each time it fires the breaker counts and announces a
//! `would_trip` instead of opening; a reload may switch the mode.
#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;

use breakerbank::{Bank, Event, EventKind, ManualClock, Mode, Outcome, Profile, State};
use common::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `svc_client` (global) or `payments_client` (tenant) with `trip` and
/// `mode` (none: the default).
fn profile_of(isolation: &str, trip: &str, mode: Option<&str>) -> Profile {
    let name = if isolation == "tenant" {
        "payments_client"
    } else {
        "svc_client"
    };
    profile(
        name,
        isolation,
        trip,
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: DOWN}",
        &mode.map(|m| format!("mode: {m}")).unwrap_or_default(),
    )
}

fn banked(profile: Profile) -> (Bank, ManualClock, Arc<Mutex<Vec<Event>>>) {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile, clock.clone());
    let events = recorder(&bank);
    (bank, clock, events)
}

/// The events of `kind` delivered so far, as (partition, from, to).
fn of_kind(
    bank: &Bank,
    events: &Mutex<Vec<Event>>,
    kind: EventKind,
) -> Vec<(String, Option<State>, Option<State>)> {
    assert!(bank.flush_events(Duration::from_secs(10)), "events flushed");
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| (e.partition.clone(), e.from, e.to))
        .collect()
}

/// `would_trip_total` of one partition (0 when the snapshot does not list it).
fn would_trips(bank: &Bank, dep: &str, partition: &str) -> u64 {
    bank.metrics()
        .dependencies
        .iter()
        .find(|d| d.name == dep)
        .expect("listed")
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .map_or(0, |p| p.would_trip_total)
}

/// The per-dependency `would_trip_total` (the snapshot's `*`).
fn would_trips_of_dependency(bank: &Bank, dep: &str) -> f64 {
    bank.metrics()
        .dependencies
        .iter()
        .find(|d| d.name == dep)
        .expect("listed")
        .totals
        .get("would_trip_total")
        .expect("would_trip_total is a metric")
}

/// The value of the one sample `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| {
            let (head, _) = l.rsplit_once(' ').unwrap();
            head.split('{').next() == Some(name)
                && labels
                    .iter()
                    .all(|(k, v)| head.contains(&format!("{k}=\"{v}\"")))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?} in\n{text}");
    found[0].rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[test]
fn c22_the_mode_defaults_to_enforce_and_reads_observe() {
    let trip = "{consecutive_failures: 5}";
    let default = profile_of("global", trip, None);
    assert_eq!(default.dependencies()[0].mode, Mode::Enforce);
    let enforce = profile_of("global", trip, Some("enforce"));
    assert_eq!(enforce.dependencies()[0].mode, Mode::Enforce);
    let observe = profile_of("global", trip, Some("observe"));
    assert_eq!(observe.dependencies()[0].mode, Mode::Observe);
}

#[test]
fn c22_a_mode_other_than_enforce_or_observe_is_refused_naming_dependency_and_field() {
    for bad in ["watch", "metrics_only", "\"\"", "1", "Observe"] {
        let yaml = format!(
            "dependencies:\n  svc_client:\n    isolation: global\n    trip: {{consecutive_failures: 5}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: DOWN}}\n    recovery_bound: 5m\n    mode: {bad}\n"
        );
        let err = Profile::from_yaml(&yaml).expect_err(&format!("accepted mode: {bad}"));
        let msg = err.to_string();
        assert!(
            msg.contains("svc_client") && msg.contains("`mode`") && msg.contains("`observe`"),
            "mode: {bad}: {msg}"
        );
    }
}

#[test]
fn c22_fifteen_failures_at_a_threshold_of_five_admit_every_call_and_count_three_would_trips() {
    let (bank, _clock, events) = banked(profile_of(
        "global",
        "{consecutive_failures: 5}",
        Some("observe"),
    ));
    let dep = bank.dependency("svc_client").unwrap();
    for i in 0..15 {
        let permit = admitted(dep.admit(None, None).unwrap());
        assert!(!permit.is_probe(), "call {i} admitted as an ordinary call");
        permit.record(Outcome::Failure);
        assert_eq!(dep.state(None).unwrap(), State::Closed, "after failure {i}");
    }
    assert_eq!(would_trips(&bank, "svc_client", "global"), 3);
    assert_eq!(would_trips_of_dependency(&bank, "svc_client"), 3.0);
    let m = bank.metrics();
    let global = &m.dependencies[0].partitions[0];
    assert_eq!(global.failures_total, 15, "every failure counted as usual");
    assert_eq!(global.opened_total, 0, "never opened");
    assert_eq!(global.rejected_open_total, 0);
    assert_eq!(m.dependencies[0].totals.calls.failure, 15);
    assert_eq!(
        sample(
            &bank.prometheus(),
            "breakerbank_dependency_would_trip_total",
            &[("dependency", "svc_client")]
        ),
        3.0
    );
    let announced = of_kind(&bank, &events, EventKind::WouldTrip);
    assert_eq!(announced.len(), 3, "{announced:?}");
    assert!(announced.iter().all(|(p, _, _)| p == "global"));
    assert!(
        of_kind(&bank, &events, EventKind::Transition).is_empty(),
        "no transition"
    );
    // The counts restarted after the third: nothing is counted toward a
    // fourth.
    assert_eq!(dep.inspect(None).unwrap().consecutive_failures, 0);
}

#[test]
fn c22_the_count_restarts_after_a_would_trip_as_after_a_close() {
    let (bank, _clock, _events) = banked(profile_of(
        "global",
        "{consecutive_failures: 5}",
        Some("observe"),
    ));
    let dep = bank.dependency("svc_client").unwrap();
    fail(&dep, None, 7);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 1);
    assert_eq!(dep.inspect(None).unwrap().consecutive_failures, 2);
    // A success still clears the count, as in enforce mode.
    admitted(dep.admit(None, None).unwrap()).record(Outcome::Success);
    fail(&dep, None, 4);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 1);
    fail(&dep, None, 1);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 2);
}

#[test]
fn c22_a_failure_rate_policy_in_observe_mode_counts_would_trips_and_restarts_its_window() {
    for isolation in ["global", "tenant"] {
        let (bank, clock, events) = banked(profile_of(
            isolation,
            "{failure_rate: 0.5, min_calls: 4, window: 10s}",
            Some("observe"),
        ));
        let name = bank.metrics().dependencies[0].name.clone();
        let dep = bank.dependency(&name).unwrap();
        let tenant = (isolation == "tenant").then_some("acme");
        let partition = tenant.unwrap_or("global");
        // 12 failures: the window reaches min_calls at a rate of 1 three
        // times, each time from an empty window.
        for _ in 0..12 {
            admitted(dep.admit(tenant, None).unwrap()).record(Outcome::Failure);
            clock.advance(Duration::from_millis(10));
        }
        assert_eq!(would_trips(&bank, &name, partition), 3, "{isolation}");
        assert_eq!(dep.state(tenant).unwrap(), State::Closed);
        let seen = dep.inspect(tenant).unwrap();
        assert_eq!(
            (seen.window_calls, seen.window_failures),
            (0, 0),
            "{isolation}: the window restarted"
        );
        // A trip judged on a success: two failures, then two successes
        // complete min_calls at a rate of 0.5.
        for outcome in [Outcome::Failure, Outcome::Failure, Outcome::Success] {
            admitted(dep.admit(tenant, None).unwrap()).record(outcome);
        }
        assert_eq!(would_trips(&bank, &name, partition), 3, "{isolation}");
        admitted(dep.admit(tenant, None).unwrap()).record(Outcome::Success);
        assert_eq!(would_trips(&bank, &name, partition), 4, "{isolation}");
        assert_eq!(dep.state(tenant).unwrap(), State::Closed);
        assert_eq!(of_kind(&bank, &events, EventKind::WouldTrip).len(), 4);
        assert!(of_kind(&bank, &events, EventKind::Transition).is_empty());
        assert_eq!(would_trips_of_dependency(&bank, &name), 4.0);
    }
}

#[test]
fn c22_a_would_trip_in_one_tenant_does_not_touch_another() {
    let (bank, _clock, events) = banked(profile_of(
        "tenant",
        "{consecutive_failures: 5}",
        Some("observe"),
    ));
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("globex"), 3);
    fail(&dep, Some("acme"), 15);
    assert_eq!(would_trips(&bank, "payments_client", "acme"), 3);
    assert_eq!(would_trips(&bank, "payments_client", "globex"), 0);
    assert_eq!(would_trips_of_dependency(&bank, "payments_client"), 3.0);
    let globex = dep.inspect(Some("globex")).unwrap();
    assert_eq!(globex.state, State::Closed);
    assert_eq!(globex.consecutive_failures, 3, "globex's count untouched");
    let announced = of_kind(&bank, &events, EventKind::WouldTrip);
    assert_eq!(announced.len(), 3);
    assert!(
        announced.iter().all(|(p, _, _)| p == "acme"),
        "{announced:?}"
    );
    // globex's own count goes on from where it was.
    fail(&dep, Some("globex"), 2);
    assert_eq!(would_trips(&bank, "payments_client", "globex"), 1);
}

#[test]
fn c22_an_enforced_dependency_beside_an_observed_one_still_trips() {
    let text = "dependencies:
  watched_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: DOWN}
    recovery_bound: 5m
    mode: observe
  enforced_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: DOWN}
    recovery_bound: 5m
";
    let (bank, _clock, _events) = banked(Profile::from_yaml(text).unwrap());
    let watched = bank.dependency("watched_client").unwrap();
    let enforced = bank.dependency("enforced_client").unwrap();
    fail(&watched, None, 5);
    fail(&enforced, None, 5);
    assert_eq!(watched.state(None).unwrap(), State::Closed);
    assert_eq!(enforced.state(None).unwrap(), State::Open);
    assert_eq!(would_trips(&bank, "enforced_client", "global"), 0);
}

#[test]
fn c22_operator_actions_apply_in_observe_mode() {
    let (bank, clock, _events) = banked(profile_of(
        "global",
        "{consecutive_failures: 5}",
        Some("observe"),
    ));
    let dep = bank.dependency("svc_client").unwrap();
    dep.force_open(None);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(r.reason, breakerbank::RejectReason::ForcedOpen);
    dep.reset(None);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // An operator trip opens it for its open period, then the probe cycle
    // closes it as usual.
    dep.trip(None);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(SECS30);
    let probe = admitted(dep.admit(None, None).unwrap());
    assert!(probe.is_probe());
    probe.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // And observe mode goes on: the policy never opens it.
    fail(&dep, None, 5);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 1);
}

#[test]
fn c22_a_reload_to_observe_closes_an_open_breaker_and_stops_trips() {
    let (bank, _clock, events) = banked(profile_of("global", "{consecutive_failures: 5}", None));
    let dep = bank.dependency("svc_client").unwrap();
    fail(&dep, None, 5);
    assert_eq!(dep.state(None).unwrap(), State::Open);
    bank.reload(profile_of(
        "global",
        "{consecutive_failures: 5}",
        Some("observe"),
    ))
    .unwrap();
    assert_eq!(
        dep.state(None).unwrap(),
        State::Closed,
        "every call admitted"
    );
    fail(&dep, None, 10);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 2);
    let closes: Vec<_> = of_kind(&bank, &events, EventKind::Transition)
        .into_iter()
        .filter(|(_, _, to)| *to == Some(State::Closed))
        .collect();
    assert_eq!(
        closes.len(),
        1,
        "the switch's close is announced: {closes:?}"
    );
}

#[test]
fn c22_a_reload_to_enforce_starts_closed_and_counts_from_the_switch() {
    for isolation in ["global", "tenant"] {
        let trip = "{consecutive_failures: 5}";
        let (bank, _clock, _events) = banked(profile_of(isolation, trip, Some("observe")));
        let name = bank.metrics().dependencies[0].name.clone();
        let dep = bank.dependency(&name).unwrap();
        let tenant = (isolation == "tenant").then_some("acme");
        fail(&dep, tenant, 9);
        assert_eq!(dep.inspect(tenant).unwrap().consecutive_failures, 4);
        bank.reload(profile_of(isolation, trip, Some("enforce")))
            .unwrap();
        let seen = dep.inspect(tenant).unwrap();
        assert_eq!(seen.state, State::Closed, "{isolation}");
        assert_eq!(seen.consecutive_failures, 0, "{isolation}: counts restart");
        fail(&dep, tenant, 4);
        assert_eq!(dep.state(tenant).unwrap(), State::Closed, "{isolation}");
        fail(&dep, tenant, 1);
        assert_eq!(dep.state(tenant).unwrap(), State::Open, "{isolation}");
        assert_eq!(would_trips(&bank, &name, tenant.unwrap_or("global")), 1);
    }
}

#[test]
fn c22_a_reload_that_keeps_the_mode_keeps_the_counts() {
    let trip = "{consecutive_failures: 5}";
    let (bank, _clock, _events) = banked(profile_of("global", trip, Some("observe")));
    let dep = bank.dependency("svc_client").unwrap();
    fail(&dep, None, 3);
    bank.reload(profile_of(
        "global",
        "{consecutive_failures: 6}",
        Some("observe"),
    ))
    .unwrap();
    assert_eq!(dep.inspect(None).unwrap().consecutive_failures, 3);
    fail(&dep, None, 3);
    assert_eq!(would_trips(&bank, "svc_client", "global"), 1);
}

#[test]
fn c22_a_forced_open_partition_stays_forced_across_a_mode_switch() {
    let trip = "{consecutive_failures: 5}";
    let (bank, _clock, _events) = banked(profile_of("global", trip, Some("observe")));
    let dep = bank.dependency("svc_client").unwrap();
    dep.force_open(None);
    bank.reload(profile_of("global", trip, None)).unwrap();
    assert_eq!(dep.state(None).unwrap(), State::ForcedOpen);
    bank.reload(profile_of("global", trip, Some("observe")))
        .unwrap();
    assert_eq!(dep.state(None).unwrap(), State::ForcedOpen);
}
