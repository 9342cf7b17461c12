//! The bank: identity (C1), fallbacks (C3, C4), tenant isolation and the
//! bounded table (C9), metrics (C14), stuck alerts (C15), events (C16).

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;
use breakerbank::{
    AdmitError, Bank, CallError, CallOptions, Decision, DependencyUnavailable, EventKind,
    ManualClock, Outcome, Profile, RejectReason, State,
};
use common::*;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TWO: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 2}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 1m
    max_tenants: 100
  email_client:
    isolation: global
    trip: {consecutive_failures: 2}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 1m
  catalog_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 1m
"#;

fn two() -> (Bank, ManualClock) {
    let clock = ManualClock::new();
    (
        Bank::with_clock(Profile::from_yaml(TWO).unwrap(), clock.clone()),
        clock,
    )
}

#[test]
fn c1_dependencies_never_share_a_breaker() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    assert_eq!(email.state(None).unwrap(), State::Open);
    assert_eq!(pay.state(Some("acme")).unwrap(), State::Closed);
    assert!(bank.dependency("nope_client").is_none());
    assert_eq!(
        bank.dependency_names(),
        ["payments_client", "email_client", "catalog_client"]
    );
}

#[test]
fn c1_global_dependency_ignores_the_tenant() {
    let (bank, _c) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, Some("acme"), 1);
    fail(&email, Some("globex"), 1);
    assert_eq!(email.state(None).unwrap(), State::Open);
}

#[test]
fn tenant_scoped_dependency_requires_a_tenant() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    assert_eq!(
        pay.admit(None, None).unwrap_err(),
        AdmitError::TenantRequired
    );
    assert_eq!(
        pay.admit(Some(""), None).unwrap_err(),
        AdmitError::TenantRequired
    );
    assert_eq!(pay.state(None).unwrap_err(), AdmitError::TenantRequired);
    assert_eq!(pay.state(Some("")).unwrap_err(), AdmitError::TenantRequired);
    assert!(matches!(
        pay.call(None, None, || Ok::<_, ()>(1)),
        Err(CallError::TenantRequired)
    ));
}

#[test]
fn c9_one_tenant_failing_never_trips_another() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    let tenants: Vec<String> = (0..1000).map(|i| format!("tenant-{i}")).collect();
    for t in &tenants {
        admitted(pay.admit(Some(t), None).unwrap()).record(Outcome::Success);
    }
    // 100 max tenants: the table recycles idle partitions as 1000 arrive.
    fail(&pay, Some("faulty"), 2);
    assert_eq!(pay.state(Some("faulty")).unwrap(), State::Open);
    let mut changed = 0;
    for t in &tenants {
        match pay.admit(Some(t), None).unwrap() {
            Decision::Admitted(p) => p.record(Outcome::Success),
            Decision::Rejected(_) => changed += 1,
        }
        if pay.state(Some(t)).unwrap() != State::Closed {
            changed += 1;
        }
    }
    assert_eq!(changed, 0, "false global trips");
    assert_eq!(
        pay.state(Some("faulty")).unwrap(),
        State::Open,
        "the open tenant survived"
    );
}

#[test]
fn c5_c9_a_recorded_success_resets_its_own_tenants_count_and_no_other() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    // Two failures trip. Three tenants: "quiet" stays fresh, the other two
    // count one failure each, then only "a" records a success, through a
    // permit admitted on the fast path (the tenants are known by then),
    // which carries its partition. Had it carried "quiet"'s (a fresh word
    // of the same generation), the success would pass for one that changes
    // nothing, and a's count would stand.
    for t in ["quiet", "a", "b"] {
        admitted(pay.admit(Some(t), None).unwrap()).record(Outcome::Success);
    }
    fail(&pay, Some("a"), 1);
    fail(&pay, Some("b"), 1);
    admitted(pay.admit(Some("a"), None).unwrap()).record(Outcome::Success);
    fail(&pay, Some("a"), 1);
    fail(&pay, Some("b"), 1);
    assert_eq!(
        pay.state(Some("a")).unwrap(),
        State::Closed,
        "a's count was reset"
    );
    assert_eq!(pay.state(Some("b")).unwrap(), State::Open, "b's was not");
    assert_eq!(pay.state(Some("quiet")).unwrap(), State::Closed);
    // The overflow partition (the dependency's own) saw none of it.
    assert_eq!(pay.state(Some("<never seen>")).unwrap(), State::Closed);
}

#[test]
fn c9_flood_of_a_million_tenants_stays_bounded_and_keeps_open_ones() {
    let bank = tenant_bank(1, 10000);
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("victim"), 1);
    let mut overflowed = 0u64;
    for i in 0..1_000_000u32 {
        let t = format!("flood-{i}");
        match pay.admit(Some(&t), None).unwrap() {
            Decision::Admitted(p) => p.record(Outcome::Success),
            Decision::Rejected(_) => overflowed += 1,
        }
    }
    assert_eq!(
        overflowed, 0,
        "idle tenants are recycled, nobody is refused"
    );
    assert_eq!(
        pay.state(Some("victim")).unwrap(),
        State::Open,
        "open partitions are never evicted"
    );
    let m = bank.metrics();
    let live = m.dependencies[0].partitions.len();
    assert!(
        live <= 10_001,
        "{live} partitions live with max_tenants 10000"
    );
    assert!(m.dependencies[0]
        .partitions
        .iter()
        .any(|p| p.partition == "victim"));
}

#[test]
fn c9_full_table_of_open_partitions_routes_new_tenants_to_overflow() {
    let bank = tenant_bank(1, 3);
    let pay = bank.dependency("payments_client").unwrap();
    for t in ["a", "b", "c"] {
        fail(&pay, Some(t), 1);
    }
    admitted(pay.admit(Some("d"), None).unwrap()).record(Outcome::Success);
    admitted(pay.admit(Some("e"), None).unwrap()).record(Outcome::Success);
    for t in ["a", "b", "c"] {
        assert_eq!(pay.state(Some(t)).unwrap(), State::Open);
    }
    let m = bank.metrics();
    let overflow = m.dependencies[0]
        .partitions
        .iter()
        .find(|p| p.partition == "<overflow>")
        .expect("overflow partition listed");
    assert_eq!(overflow.partition_overflow_total, 2);
    assert_eq!(
        pay.state(Some("d")).unwrap(),
        State::Closed,
        "unseen reads as fresh"
    );
}

#[test]
fn c9_evicted_permit_is_recorded_as_late_not_applied() {
    let bank = tenant_bank(1, 1);
    let pay = bank.dependency("payments_client").unwrap();
    let old = admitted(pay.admit(Some("a"), None).unwrap()).into_raw();
    // "a" is idle (a closed call in flight counts for nothing): "b" evicts
    // it (and takes its slot, or a free one beside it).
    admitted(pay.admit(Some("b"), None).unwrap()).record(Outcome::Success);
    pay.record_raw(old, Outcome::Failure); // would trip "b" if applied
    assert_eq!(pay.state(Some("b")).unwrap(), State::Closed);
    let m = bank.metrics();
    let parts = &m.dependencies[0].partitions;
    assert!(parts.iter().all(|p| p.partition != "a"), "a was evicted");
    // Counted once: on "b" if it took a's slot, else on the overflow
    // partition, which stands for slots no tenant owns.
    let late: u64 = parts.iter().map(|p| p.late_records_total).sum();
    assert_eq!(late, 1);
    assert!(parts.iter().all(|p| p.failures_total == 0));
}

/// C9's order: idle partitions go first, then closed ones with counts,
/// least recently used first (an admission is a use); open ones never.
#[test]
fn c9_eviction_takes_idle_first_then_the_least_recently_used() {
    let bank = tenant_bank(5, 3);
    let pay = bank.dependency("payments_client").unwrap();
    let listed = |bank: &Bank| -> Vec<String> {
        let mut names: Vec<String> = bank.metrics().dependencies[0]
            .partitions
            .iter()
            .map(|p| p.partition.clone())
            .filter(|n| n != "<overflow>")
            .collect();
        names.sort();
        names
    };
    // One failure each, in this order: none idle.
    for t in ["a", "b", "c"] {
        fail(&pay, Some(t), 1);
    }
    // A call of "a" (left in flight: a success would make "a" idle).
    let _in_flight = admitted(pay.admit(Some("a"), None).unwrap()).into_raw();
    // "d" evicts "b": not "a", used since; not "c", inserted after "b".
    admitted(pay.admit(Some("d"), None).unwrap()).record(Outcome::Success);
    assert_eq!(listed(&bank), ["a", "c", "d"]);
    // "d" is idle: "e" takes its place before any closed one with counts.
    admitted(pay.admit(Some("e"), None).unwrap()).record(Outcome::Failure);
    assert_eq!(listed(&bank), ["a", "c", "e"]);
    // The counts survived the evictions.
    let m = bank.metrics();
    for p in &m.dependencies[0].partitions {
        let want = u64::from(p.partition != "<overflow>");
        assert_eq!(p.failures_total, want, "{}", p.partition);
    }
}

#[test]
fn c9_force_open_all_isolates_tenants_first_seen_afterwards() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    admitted(pay.admit(Some("acme"), None).unwrap()).record(Outcome::Success);
    pay.force_open(None);
    assert_eq!(pay.state(Some("acme")).unwrap(), State::ForcedOpen);
    assert_eq!(pay.state(Some("newcomer")).unwrap(), State::ForcedOpen);
    assert_eq!(
        rejected(pay.admit(Some("newcomer"), None).unwrap()).reason,
        RejectReason::ForcedOpen
    );
    pay.reset(None);
    assert_eq!(pay.state(Some("acme")).unwrap(), State::Closed);
    assert_eq!(pay.state(Some("newcomer")).unwrap(), State::Closed);
    assert_eq!(pay.state(Some("later")).unwrap(), State::Closed);
    // One tenant only.
    pay.force_open(Some("acme"));
    assert_eq!(pay.state(Some("acme")).unwrap(), State::ForcedOpen);
    assert_eq!(pay.state(Some("newcomer")).unwrap(), State::Closed);
}

#[test]
fn c3_error_fallback_fails_fast_with_code_and_retry_after() {
    let (bank, clock) = two();
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 2);
    clock.advance(Duration::from_secs(10));
    let mut called = false;
    let r = pay.call(Some("acme"), None, || {
        called = true;
        Ok::<_, ()>(1)
    });
    assert!(!called, "an open breaker never calls the dependency");
    match r {
        Err(CallError::Unavailable(DependencyUnavailable {
            dependency,
            partition,
            code,
            retry_after,
            why,
        })) => {
            assert_eq!(why, breakerbank::Unserved::ErrorFallback);
            assert_eq!(dependency, "payments_client");
            assert_eq!(partition, "acme");
            assert_eq!(code.as_deref(), Some("PAYMENT_UNAVAILABLE"));
            assert_eq!(retry_after, Some(Duration::from_secs(20)));
        }
        other => panic!("{other:?}"),
    }
    let m = bank.metrics();
    assert_eq!(m.dependencies[0].partitions[0].fallback_error_total, 1);
}

#[test]
fn c3_c4_degraded_fallback_serves_or_fails_never_succeeds() {
    let (bank, _c) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    let ok = email.call_with(
        None,
        None,
        CallOptions {
            cache_key: None,
            degraded: Some(Box::new(|| Some("queued"))),
            classify: None,
            ..Default::default()
        },
        || Ok::<_, ()>("sent"),
    );
    assert_eq!(ok.unwrap(), "queued");
    let none = email.call_with(
        None,
        None,
        CallOptions {
            cache_key: None,
            degraded: Some(Box::new(|| None)),
            classify: None,
            ..Default::default()
        },
        || Ok::<&str, ()>("sent"),
    );
    assert!(matches!(
        none,
        Err(CallError::Unavailable(DependencyUnavailable {
            code: None,
            ..
        }))
    ));
    let missing = email.call(None, None, || Ok::<_, ()>("sent"));
    assert!(matches!(missing, Err(CallError::Unavailable(_))));
    let p = &bank.metrics().dependencies[1].partitions[0];
    assert_eq!(
        (p.fallback_degraded_total, p.fallback_failures_total),
        (1, 2)
    );
    // The fallback never recorded a success: still open.
    assert_eq!(email.state(None).unwrap(), State::Open);
}

#[test]
fn c3_c4_stale_fallback_serves_last_good_value_within_max_staleness() {
    let (bank, clock) = two();
    let cat = bank.dependency("catalog_client").unwrap();
    let key = || CallOptions {
        cache_key: Some("sku-1"),
        degraded: None,
        classify: None,
        ..Default::default()
    };
    assert_eq!(
        cat.call_with(Some("acme"), None, key(), || Ok::<_, String>(7))
            .unwrap(),
        7
    );
    assert!(matches!(
        cat.call_with(Some("acme"), None, key(), || Err::<i32, _>(
            "down".to_string()
        )),
        Err(CallError::Inner(_))
    ));
    assert_eq!(cat.state(Some("acme")).unwrap(), State::Open);
    assert_eq!(
        cat.call_with(Some("acme"), None, key(), || -> Result<i32, String> {
            panic!("not called")
        })
        .unwrap(),
        7
    );
    // Another tenant's cache is its own.
    fail(&cat, Some("globex"), 1);
    assert!(matches!(
        cat.call_with(Some("globex"), None, key(), || -> Result<i32, String> {
            panic!()
        }),
        Err(CallError::Unavailable(_))
    ));
    // Too old: C4.
    clock.advance(Duration::from_secs(601));
    fail(&cat, Some("acme"), 1); // the half-open probe fails: open again
    let r = cat.call_with(Some("acme"), None, key(), || -> Result<i32, String> {
        panic!()
    });
    match r {
        Err(CallError::Unavailable(u)) => {
            assert_eq!(u.partition, "acme");
            assert!(u.retry_after.is_some() || cat.state(Some("acme")).unwrap() != State::Open);
        }
        Ok(v) => panic!("served a value {v} older than max_staleness"),
        Err(e) => panic!("{e:?}"),
    }
}

#[test]
fn c3_stale_value_outlives_partition_eviction() {
    let p = profile(
        "catalog_client",
        "tenant",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: stale, max_staleness: 10m}",
        "max_tenants: 1",
    );
    let bank = Bank::with_clock(p, ManualClock::new());
    let cat = bank.dependency("catalog_client").unwrap();
    let key = || CallOptions {
        cache_key: Some("k"),
        degraded: None,
        classify: None,
        ..Default::default()
    };
    cat.call_with(Some("a"), None, key(), || Ok::<_, ()>(1))
        .unwrap();
    cat.call_with(Some("b"), None, key(), || Ok::<_, ()>(2))
        .unwrap(); // evicts "a"
    fail(&cat, Some("a"), 1);
    assert_eq!(
        cat.call_with(Some("a"), None, key(), || -> Result<i32, ()> { panic!() })
            .unwrap(),
        1
    );
}

#[test]
fn c10_call_with_expired_deadline_is_deadline_expired_not_fallback() {
    let (bank, clock) = two();
    let email = bank.dependency("email_client").unwrap();
    clock.advance(Duration::from_secs(1));
    let r = email.call_with(
        None,
        Some(clock.now()),
        CallOptions {
            cache_key: None,
            degraded: Some(Box::new(|| Some(1))),
            classify: None,
            ..Default::default()
        },
        || Ok::<_, ()>(2),
    );
    assert!(matches!(r, Err(CallError::DeadlineExpired)));
}

#[test]
fn c14_metrics_count_what_happened() {
    let (bank, clock) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    clock.advance(Duration::from_secs(10));
    rejected(email.admit(None, None).unwrap());
    clock.advance(Duration::from_secs(20));
    let probe = admitted(email.admit(None, None).unwrap());
    assert_eq!(
        rejected(email.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    clock.advance(Duration::from_secs(5));
    probe.record(Outcome::Success);
    clock.advance(Duration::from_secs(100));
    let m = bank.metrics();
    let p = &m.dependencies[1].partitions[0];
    assert_eq!(p.partition, "global");
    assert_eq!(p.state, State::Closed);
    assert_eq!(
        (p.opened_total, p.half_opened_total, p.closed_total),
        (1, 1, 1)
    );
    assert_eq!((p.rejected_open_total, p.probe_rejects_total), (1, 1));
    assert_eq!(p.failures_total, 2);
    assert_eq!(
        p.open_seconds_total, 35.0,
        "trip to close, half-open included"
    );
    assert_eq!(p.open_episode_seconds, 0.0);
    let names: Vec<&str> = p.values().iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), 19);
    assert_eq!(names[0], "open_seconds_total");
    assert_eq!(names[18], "stuck");
}

#[test]
fn c14_prometheus_parses_back() {
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 2);
    let text = bank.prometheus();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("parses");
    let find = |metric: &str, extra: Option<(&str, &str)>| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == metric
                    && s.labels.get("dependency") == Some("payments_client")
                    && s.labels.get("partition") == Some("acme")
                    && extra.is_none_or(|(k, v)| s.labels.get(k) == Some(v))
            })
            .unwrap_or_else(|| panic!("no {metric} sample for acme in:\n{text}"))
            .value
            .clone()
    };
    let value = |v: prometheus_parse::Value| match v {
        prometheus_parse::Value::Gauge(x)
        | prometheus_parse::Value::Counter(x)
        | prometheus_parse::Value::Untyped(x) => x,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        value(find("breakerbank_state", Some(("state", "open")))),
        1.0
    );
    assert_eq!(
        value(find("breakerbank_state", Some(("state", "closed")))),
        0.0
    );
    assert_eq!(value(find("breakerbank_failures_total", None)), 2.0);
    assert_eq!(value(find("breakerbank_opened_total", None)), 1.0);
}

#[test]
fn c14_prometheus_escapes_label_values() {
    // Unescaping is checked by Python's prometheus_client parser in
    // py/tests; here, the exposition format's escapes a tenant id can
    // need. A newline, the third, is a control character: no tenant id
    // holds one (C9), so none reaches the text unescaped either.
    let (bank, _c) = two();
    let pay = bank.dependency("payments_client").unwrap();
    // Open: listed by name (a closed partition has no series of its own).
    fail(&pay, Some("ac\"me\\x"), 2);
    let text = bank.prometheus();
    assert!(text.contains(r#"partition="ac\"me\\x""#), "{text}");
    assert!(matches!(
        pay.admit(Some("ac\nme"), None),
        Err(breakerbank::AdmitError::InvalidTenant { .. })
    ));
}

#[test]
fn c15_stuck_listed_gauged_and_announced_once_per_episode() {
    let (bank, clock) = two();
    let events = recorder(&bank);
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 2);
    clock.advance(Duration::from_secs(30));
    admitted(pay.admit(Some("acme"), None).unwrap()).record(Outcome::Failure); // re-trip
    assert!(bank.stuck().is_empty());
    clock.advance(Duration::from_secs(31));
    let stuck = bank.stuck();
    assert_eq!(stuck.len(), 1, "{stuck:?}");
    assert_eq!(stuck[0].partition, "acme");
    assert_eq!(
        stuck[0].open_for,
        Duration::from_secs(61),
        "counted from the first trip"
    );
    let _ = bank.stuck();
    let _ = bank.metrics();
    assert!(bank.metrics().dependencies[0].partitions[0].stuck);
    pay.force_open(Some("acme"));
    assert!(bank.stuck().is_empty(), "a forced open is not stuck");
    wait_for(&events, |ev| {
        ev.iter().any(|e| e.kind == EventKind::ForcedOpen)
    });
    let n = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventKind::Stuck)
        .count();
    assert_eq!(n, 1, "announced once");
}

fn wait_for(events: &Mutex<Vec<breakerbank::Event>>, done: impl Fn(&[breakerbank::Event]) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done(&events.lock().unwrap()) {
        assert!(
            std::time::Instant::now() < deadline,
            "events did not arrive"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn c14_c16_a_slow_listener_never_slows_admission_and_dropped_events_are_exposed() {
    let (bank, _c) = two();
    let gate = Arc::new(Mutex::new(()));
    let held = gate.lock().unwrap();
    let g = gate.clone();
    bank.subscribe(move |_| drop(g.lock()));
    let email = bank.dependency("email_client").unwrap();
    // The listener blocks on the held lock; transitions keep flowing.
    for _ in 0..10_000 {
        fail(&email, None, 2);
        email.reset(None);
    }
    assert!(
        bank.events_dropped() > 0,
        "the bounded queue dropped rather than blocked"
    );
    // Counted where a fleet's alerts can see it (C14).
    let m = bank.metrics();
    assert!(m.events_dropped > 0 && m.events_dropped <= bank.events_dropped());
    let line = format!("breakerbank_events_dropped_total {}", m.events_dropped);
    let text = m.prometheus();
    assert!(text.contains(&line), "no {line:?} in:\n{text}");
    assert!(bank
        .prometheus()
        .contains("breakerbank_events_dropped_total "));
    drop(held);
}

#[test]
fn c16_events_name_dependency_partition_and_states() {
    let (bank, clock) = two();
    let events = recorder(&bank);
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 2);
    clock.advance(Duration::from_secs(30));
    admitted(pay.admit(Some("acme"), None).unwrap()).record(Outcome::Success);
    wait_for(&events, |ev| ev.len() >= 3);
    let ev = events.lock().unwrap();
    let seen: Vec<(EventKind, &str, Option<State>, Option<State>)> = ev
        .iter()
        .map(|e| (e.kind, e.partition.as_str(), e.from, e.to))
        .collect();
    assert_eq!(
        seen,
        [
            (
                EventKind::Transition,
                "acme",
                Some(State::Closed),
                Some(State::Open)
            ),
            (
                EventKind::Transition,
                "acme",
                Some(State::Open),
                Some(State::HalfOpen)
            ),
            (
                EventKind::Transition,
                "acme",
                Some(State::HalfOpen),
                Some(State::Closed)
            ),
        ]
    );
    assert!(ev.iter().all(|e| e.dependency == "payments_client"));
}

#[test]
fn c7_async_call_dropped_mid_flight_returns_the_probe_slot() {
    let (bank, clock) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    clock.advance(Duration::from_secs(30));
    {
        let fut = email.call_async(None, None, std::future::pending::<Result<(), ()>>());
        let mut fut = Box::pin(fut);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            rejected(email.admit(None, None).unwrap()).reason,
            RejectReason::ProbeBudget
        );
    }
    let p = admitted(email.admit(None, None).unwrap());
    assert!(p.is_probe());
    assert_eq!(
        bank.metrics().dependencies[1].partitions[0].cancelled_total,
        1
    );
}

#[test]
fn c9_churn_through_a_one_slot_table_always_finishes() {
    // Regression: eviction through a stale shard snapshot once left an
    // entry naming another tenant's slot, and an admission then spun in
    // get_or_insert forever (found by loom, reproduced with real threads).
    let bank = Arc::new(tenant_bank(3, 1));
    let (done, finished) = std::sync::mpsc::channel();
    for t in 0..8 {
        let bank = bank.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let dep = bank.dependency("payments_client").unwrap();
            for i in 0..20_000u32 {
                let tenant = format!("t{}", (i + t) % 8);
                if let Decision::Admitted(p) = dep.admit(Some(&tenant), None).unwrap() {
                    p.record(if i % 5 == 0 {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    });
                }
            }
            let _ = done.send(t);
        });
    }
    for _ in 0..8 {
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("an admission never returned");
    }
    let m = bank.metrics();
    assert!(
        m.dependencies[0].partitions.len() <= 2,
        "one slot plus <overflow>"
    );
}

#[test]
fn c14_refusals_counted_exactly_by_more_threads_than_stripes() {
    // Global refusal counters have per-thread stripes for the first few
    // threads; later threads share the locked counter, and exiting threads
    // hand their stripe on. Every refusal must be counted once either way.
    let (bank, _clock) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    let refuse = |threads: usize, each: u64, why: RejectReason| {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..each {
                        let r = rejected(email.admit(None, None).unwrap());
                        assert_eq!(r.reason, why);
                    }
                });
            }
        });
    };
    let open_refusals =
        |bank: &Bank| bank.metrics().dependencies[1].partitions[0].rejected_open_total;
    refuse(24, 1_000, RejectReason::Open);
    assert_eq!(open_refusals(&bank), 24_000);
    // A second wave takes over the stripes of the first, counts preserved.
    refuse(24, 500, RejectReason::Open);
    assert_eq!(open_refusals(&bank), 36_000);
    email.force_open(None);
    refuse(3, 100, RejectReason::ForcedOpen);
    let m = bank.metrics();
    assert_eq!(
        m.dependencies[1].partitions[0].forced_open_rejects_total,
        300
    );
    assert_eq!(m.dependencies[1].partitions[0].rejected_open_total, 36_000);
}

#[test]
fn c14_failures_counted_exactly_by_more_threads_than_stripes() {
    let bank = Bank::new(
        Profile::from_yaml(
            "dependencies:
  flaky_client:
    isolation: global
    trip: {failure_rate: 1.0, min_calls: 1000000, window: 1h}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: FLAKY}
    recovery_bound: 1m
",
        )
        .unwrap(),
    );
    let flaky = bank.dependency("flaky_client").unwrap();
    for _wave in 0..2 {
        std::thread::scope(|s| {
            for _ in 0..20 {
                s.spawn(|| fail(&flaky, None, 600));
            }
        });
    }
    let p = &bank.metrics().dependencies[0].partitions[0];
    assert_eq!(p.state, State::Closed);
    assert_eq!(p.failures_total, 24_000);
}

#[test]
fn c15_c9_a_tenant_refusal_is_counted_and_announces_stuck_under_its_own_name() {
    // Open longer than the recovery bound: the refusals themselves must
    // notice the episode is stuck, and name the tenant's partition.
    let clock = ManualClock::new();
    let yaml = TWO.replacen("open_duration: 30s", "open_duration: 5m", 1);
    let bank = Bank::with_clock(Profile::from_yaml(&yaml).unwrap(), clock.clone());
    let events = recorder(&bank);
    let pay = bank.dependency("payments_client").unwrap();
    admitted(pay.admit(Some("globex"), None).unwrap()).record(Outcome::Success);
    fail(&pay, Some("acme"), 2);
    clock.advance(Duration::from_secs(61));
    for _ in 0..3 {
        let r = rejected(pay.admit(Some("acme"), None).unwrap());
        assert_eq!(r.reason, RejectReason::Open);
        assert_eq!(r.retry_after, Some(Duration::from_secs(300 - 61)));
    }
    wait_for(&events, |ev| ev.iter().any(|e| e.kind == EventKind::Stuck));
    let stuck: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventKind::Stuck)
        .map(|e| e.partition.clone())
        .collect();
    assert_eq!(stuck, ["acme"]);
    let m = bank.metrics();
    let parts = &m.dependencies[0].partitions;
    let acme = parts.iter().find(|p| p.partition == "acme").unwrap();
    assert_eq!(acme.rejected_open_total, 3);
    assert!(parts
        .iter()
        .filter(|p| p.partition != "acme")
        .all(|p| p.rejected_open_total == 0));
    admitted(pay.admit(Some("globex"), None).unwrap()).record(Outcome::Success);
}

const SLOW_STALE: &str = r#"
dependencies:
  catalog_client:
    isolation: global
    trip: {consecutive_failures: 5, slow_call: 2s}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 1m
"#;

#[test]
fn c3_c5_a_slow_success_counts_as_a_failure_and_is_not_kept_for_stale_fallbacks() {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(Profile::from_yaml(SLOW_STALE).unwrap(), clock.clone());
    let cat = bank.dependency("catalog_client").unwrap();
    let key = || CallOptions {
        cache_key: Some("sku-1"),
        degraded: None,
        classify: None,
        ..Default::default()
    };
    let slow = cat.call_with(None, None, key(), || {
        clock.advance(Duration::from_secs(3));
        Ok::<_, String>(1)
    });
    assert_eq!(slow.unwrap(), 1, "the caller still gets the slow value");
    let fast = cat.call_with(None, None, key(), || Ok::<_, String>(2));
    assert_eq!(fast.unwrap(), 2);
    let late = cat.call_with(None, None, key(), || {
        clock.advance(Duration::from_secs(3));
        Ok::<_, String>(3)
    });
    assert_eq!(late.unwrap(), 3);
    cat.force_open(None);
    let served = cat.call_with(None, None, key(), || -> Result<i32, String> {
        panic!("forced open: not called")
    });
    assert_eq!(
        served.unwrap(),
        2,
        "the stale value is the last counted success, not a slow call's"
    );
}

#[test]
fn c3_a_call_without_a_cache_key_is_kept_and_served_under_the_default_key() {
    let (bank, _clock) = two();
    let cat = bank.dependency("catalog_client").unwrap();
    let none = || CallOptions::<i32, String> {
        cache_key: None,
        degraded: None,
        classify: None,
        classify_ok: None,
    };
    assert_eq!(
        cat.call_with(Some("acme"), None, none(), || Ok::<_, String>(5))
            .unwrap(),
        5
    );
    cat.force_open(Some("acme"));
    let served = cat.call_with(Some("acme"), None, none(), || -> Result<i32, String> {
        panic!("forced open: not called")
    });
    assert_eq!(served.unwrap(), 5);
    let keyed = cat.call_with(
        Some("acme"),
        None,
        CallOptions {
            cache_key: Some("other"),
            degraded: None,
            classify: None,
            ..Default::default()
        },
        || -> Result<i32, String> { panic!("forced open: not called") },
    );
    assert!(matches!(keyed, Err(CallError::Unavailable(_))));
}

#[test]
fn c10_only_an_expired_deadline_serves_no_fallback() {
    use breakerbank::Instant;
    let (bank, clock) = two();
    let email = bank.dependency("email_client").unwrap();
    clock.advance(Duration::from_secs(5));
    let Decision::Rejected(r) = email.admit(None, Some(Instant::from_nanos(1))).unwrap() else {
        panic!("an expired deadline is refused");
    };
    assert_eq!(r.reason, RejectReason::DeadlineExpired);
    assert!(!r.reason.serves_fallback());
    assert!(r.fallback_to_serve().is_none());
    email.force_open(None);
    let Decision::Rejected(r) = email.admit(None, None).unwrap() else {
        panic!("forced open");
    };
    assert!(r.reason.serves_fallback());
    assert_eq!(r.fallback_to_serve(), Some(email.fallback()));
    for reason in [
        RejectReason::Open,
        RejectReason::ProbeBudget,
        RejectReason::ForcedOpen,
    ] {
        assert!(reason.serves_fallback(), "{reason:?}");
    }
}

#[test]
fn c14_every_metric_is_named_once_in_api_order_and_exposed() {
    let api = [
        "open_seconds_total",
        "open_episode_seconds",
        "opened_total",
        "half_opened_total",
        "closed_total",
        "rejected_open_total",
        "probe_rejects_total",
        "forced_open_rejects_total",
        "deadline_expired_total",
        "failures_total",
        "cancelled_total",
        "late_records_total",
        "fallback_stale_total",
        "fallback_degraded_total",
        "fallback_error_total",
        "fallback_failures_total",
        "partition_overflow_total",
        "would_trip_total",
        "stuck",
    ];
    let names: Vec<_> = breakerbank::METRICS.iter().map(|m| m.name).collect();
    assert_eq!(names, api);
    let (bank, _clock) = two();
    let email = bank.dependency("email_client").unwrap();
    fail(&email, None, 2);
    let snap = bank.metrics();
    let p = &snap
        .dependencies
        .iter()
        .find(|d| d.name == "email_client")
        .unwrap()
        .partitions[0];
    let values = p.values();
    for (m, (name, v)) in breakerbank::METRICS.iter().zip(&values) {
        assert_eq!(m.name, *name);
        assert_eq!((m.read)(p).as_f64(), *v);
    }
    assert_eq!(
        (breakerbank::METRICS[2].read)(p),
        breakerbank::MetricValue::Count(1),
        "opened_total"
    );
    let text = bank.prometheus();
    for m in &breakerbank::METRICS {
        let stem = m.name.strip_suffix("_total").unwrap_or(m.name);
        assert!(
            text.contains(&format!("# HELP breakerbank_{stem} {}", m.help)),
            "{} missing from the exposition",
            m.name
        );
    }
}
