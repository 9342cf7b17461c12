//! Shared helpers for the integration tests.
#![allow(dead_code)]
#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

use breakerbank::{
    Bank, Decision, Dependency, Event, ManualClock, Outcome, Permit, Profile, Rejection,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A one-dependency profile; `extra` lines are indented into the entry.
pub fn profile(
    name: &str,
    isolation: &str,
    trip: &str,
    half_open: &str,
    fallback: &str,
    extra: &str,
) -> Profile {
    let mut y = format!(
        "dependencies:\n  {name}:\n    isolation: {isolation}\n    trip: {trip}\n    open_duration: 30s\n    half_open: {half_open}\n    fallback: {fallback}\n    recovery_bound: 5m\n"
    );
    for line in extra.lines().filter(|l| !l.trim().is_empty()) {
        y.push_str("    ");
        y.push_str(line.trim());
        y.push('\n');
    }
    Profile::from_yaml(&y).unwrap_or_else(|e| panic!("test profile invalid: {e}\n{y}"))
}

/// Global `svc_client`: trips after `n` failures, budget `b`, threshold `s`.
pub fn bank(n: u32, b: u32, s: u32, extra: &str) -> (Bank, ManualClock, Dependency) {
    let p = profile(
        "svc_client",
        "global",
        &format!("{{consecutive_failures: {n}}}"),
        &format!("{{probe_budget: {b}, success_threshold: {s}}}"),
        "{kind: error, code: SVC_DOWN}",
        extra,
    );
    let clock = ManualClock::new();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("svc_client").expect("declared");
    (bank, clock, dep)
}

/// Tenant-scoped `payments_client` with an error fallback: trips after
/// `failures`, budget 1, threshold 1, at most `max_tenants` partitions.
pub fn tenant_bank(failures: u32, max_tenants: u32) -> Bank {
    let p = profile(
        "payments_client",
        "tenant",
        &format!("{{consecutive_failures: {failures}}}"),
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        &format!("max_tenants: {max_tenants}"),
    );
    Bank::with_clock(p, ManualClock::new())
}

pub fn admitted<'a>(d: Decision<'a>) -> Permit<'a> {
    match d {
        Decision::Admitted(p) => p,
        Decision::Rejected(r) => panic!("expected admission, got {r:?}"),
    }
}

pub fn rejected<'a>(d: Decision<'a>) -> Rejection<'a> {
    match d {
        Decision::Rejected(r) => r,
        Decision::Admitted(p) => panic!("expected rejection, got permit (probe: {})", p.is_probe()),
    }
}

/// Records `n` failures on `tenant`.
pub fn fail(dep: &Dependency, tenant: Option<&str>, n: u32) {
    for _ in 0..n {
        admitted(dep.admit(tenant, None).expect("tenant ok")).record(Outcome::Failure);
    }
}

pub const SECS30: Duration = Duration::from_secs(30);

/// Collects every event of `bank` from now on.
pub fn recorder(bank: &Bank) -> Arc<Mutex<Vec<Event>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    bank.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    events
}
