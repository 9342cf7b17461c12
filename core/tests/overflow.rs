//! The overflow partition's semantics (C9, C11, C14, C18, C19): a tenant it
//! serves reads its state, an action on every partition is announced once
//! as partition `*`, and `trip(None)` judges "has served" by what it served.
#![allow(clippy::disallowed_types)] // tests use std sync types directly

use breakerbank::{Bank, Decision, Event, EventKind, ManualClock, Outcome, Profile, State};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROFILE: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAY_DOWN}
    recovery_bound: 5m
    max_tenants: 1
"#;

fn bank() -> Bank {
    Bank::with_clock(Profile::from_yaml(PROFILE).unwrap(), ManualClock::new())
}

fn fail(dep: &breakerbank::Dependency, tenant: &str) {
    match dep.admit(Some(tenant), None).unwrap() {
        Decision::Admitted(p) => p.record(Outcome::Failure),
        Decision::Rejected(r) => panic!("{tenant}: rejected {:?}", r.reason),
    }
}

#[test]
fn c14_c18_a_tenant_served_by_an_open_overflow_reads_its_state() {
    let bank = bank();
    let pay = bank.dependency("payments_client").unwrap();
    // The table's one slot holds an outage: newcomers share the overflow.
    fail(&pay, "acme");
    assert_eq!(pay.state(Some("acme")).unwrap(), State::Open);
    fail(&pay, "globex");
    assert_eq!(pay.partition_of(Some("globex")), "<overflow>");
    // The overflow is open now: globex (and any newcomer) is refused...
    assert!(matches!(
        pay.admit(Some("initech"), None).unwrap(),
        Decision::Rejected(_)
    ));
    // ...and reads so.
    for tenant in ["globex", "initech"] {
        assert_eq!(pay.state(Some(tenant)).unwrap(), State::Open, "{tenant}");
        let seen = pay.inspect(Some(tenant)).unwrap();
        assert_eq!(seen.state, State::Open, "{tenant}");
        assert_eq!(seen.retry_after, Some(Duration::from_secs(30)));
    }
}

#[test]
fn c11_c16_an_action_on_every_partition_is_announced_once_as_star() {
    let bank = bank();
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    bank.subscribe(move |e| seen.lock().unwrap().push(e.clone()));
    let pay = bank.dependency("payments_client").unwrap();
    // No partition exists yet.
    pay.force_open(None);
    assert_eq!(pay.state(Some("acme")).unwrap(), State::ForcedOpen);
    pay.reset(None);
    assert!(bank.flush_events(Duration::from_secs(2)));
    let star: Vec<EventKind> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.partition == "*")
        .map(|e| e.kind)
        .collect();
    assert_eq!(star, [EventKind::ForcedOpen, EventKind::Reset]);
}

#[test]
fn c19_trip_all_after_reset_all_leaves_an_overflow_that_served_no_one() {
    let bank = bank();
    let pay = bank.dependency("payments_client").unwrap();
    pay.reset(None);
    pay.trip(None);
    assert!(
        !bank.metrics().dependencies[0]
            .partitions
            .iter()
            .any(|p| p.partition == "<overflow>" && p.state == State::Open),
        "{:?}",
        bank.metrics().dependencies[0].partitions
    );
    // Once it has served someone, it is tripped with the rest.
    fail(&pay, "acme");
    match pay.admit(Some("globex"), None).unwrap() {
        Decision::Admitted(p) => p.record(Outcome::Success),
        Decision::Rejected(r) => panic!("{:?}", r.reason),
    }
    pay.trip(None);
    assert_eq!(pay.state(Some("globex")).unwrap(), State::Open);
}
