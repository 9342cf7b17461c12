//! C9: a tenant id is 1 to 256 bytes of UTF-8. A longer one is refused by
//! every call that takes a tenant and counts against nothing: no
//! partition, no overflow count, no metric, nothing in the stale cache.

use breakerbank::{
    AdmitError, Bank, CallError, CallOptions, Decision, Dependency, ManualClock, Outcome, Profile,
    Rejection, State, TenantProblem, MAX_TENANT_LEN,
};

const PROFILE: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 5m
    max_tenants: 4
  email_client:
    isolation: global
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 5m
"#;

fn bank() -> Bank {
    Bank::with_clock(
        Profile::from_yaml(PROFILE).expect("profile"),
        ManualClock::new(),
    )
}

/// Every call that takes a tenant, with `id`: each refusal's message must
/// name the limit and the length given.
fn refused_everywhere(dep: &Dependency, id: &str, rejection: &Rejection<'_>) {
    let len = id.len().to_string();
    let named = |what: &str, msg: String| {
        assert!(
            msg.contains("256") && msg.contains(&len),
            "{what}: `{msg}` should name the limit (256) and the length ({len})"
        );
    };
    let invalid = AdmitError::InvalidTenant {
        problem: TenantProblem::TooLong { len: id.len() },
    };
    match dep.admit(Some(id), None) {
        Err(e) => {
            assert_eq!(e, invalid);
            named("admit", e.to_string());
        }
        Ok(Decision::Admitted(p)) => {
            p.record(Outcome::Cancelled);
            panic!("admit accepted a {len}-byte tenant id");
        }
        Ok(Decision::Rejected(r)) => panic!("admit rejected ({:?}) instead of refusing", r.reason),
    }
    match dep.state(Some(id)) {
        Err(e) => {
            assert_eq!(e, invalid);
            named("state", e.to_string());
        }
        Ok(s) => panic!("state answered {s:?} for a {len}-byte tenant id"),
    }
    match dep.call(Some(id), None, || Ok::<u32, String>(1)) {
        Err(e) => {
            assert!(matches!(
                e,
                CallError::InvalidTenant { problem: TenantProblem::TooLong { len } } if len == id.len()
            ));
            named("call", e.to_string());
        }
        Ok(_) => panic!("call ran for a {len}-byte tenant id"),
    }
    let opts = CallOptions {
        cache_key: Some("k"),
        degraded: None,
        classify: None,
        ..Default::default()
    };
    match dep.call_with(Some(id), None, opts, || Ok::<u32, String>(1)) {
        Err(e) => named("call_with", e.to_string()),
        Ok(_) => panic!("call_with ran for a {len}-byte tenant id"),
    }
    // Operator actions on one such tenant do nothing (and are not "every
    // partition", which a missing tenant means).
    dep.force_open(Some(id));
    dep.reset(Some(id));
    assert_eq!(dep.try_force_open(Some(id)), Err(invalid));
    assert_eq!(dep.try_reset(Some(id)), Err(invalid));
    dep.cache_put(Some(id), "k", 7u32);
    // With no partition to name, the fallback serves nothing for it and
    // counts nothing.
    let served = dep.serve_fallback(Some(id), rejection, Some("k"), None::<fn() -> Option<u32>>);
    assert!(served.is_err());
}

#[test]
fn c9_a_tenant_id_longer_than_256_bytes_is_refused_and_counts_against_nothing() {
    let bank = bank();
    let dep = bank.dependency("payments_client").expect("declared");
    // A known tenant, tripped open, to see that nothing reaches it either
    // and to have a rejection to serve a fallback for.
    match dep.admit(Some("acme"), None) {
        Ok(Decision::Admitted(p)) => p.record(Outcome::Failure),
        other => panic!("{other:?}"),
    }
    let Ok(Decision::Rejected(rejection)) = dep.admit(Some("acme"), None) else {
        panic!("acme is open");
    };
    let before = bank.prometheus();
    for id in ["x".repeat(257), "é".repeat(128) + "x", "x".repeat(1 << 20)] {
        refused_everywhere(&dep, &id, &rejection);
    }
    // No partition and no overflow count: the metrics are unchanged, and
    // so stay small.
    let metrics = bank.metrics();
    let payments = &metrics.dependencies[0];
    let names: Vec<&str> = payments
        .partitions
        .iter()
        .map(|p| p.partition.as_str())
        .collect();
    assert_eq!(names, ["acme"]);
    let after = bank.prometheus();
    // Line order follows hash maps: compare the lines as sets.
    let lines = |text: &str| {
        let mut v: Vec<String> = text.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(lines(&after), lines(&before));
    assert!(after.len() < 16 << 10, "{} bytes", after.len());
    assert_eq!(dep.state(Some("acme")).expect("valid"), State::Open);
    assert_eq!(dep.state(Some("globex")).expect("valid"), State::Closed);
}

#[test]
fn c9_a_tenant_id_of_256_bytes_is_accepted() {
    let bank = bank();
    let dep = bank.dependency("payments_client").expect("declared");
    for id in ["x".repeat(256), "é".repeat(128)] {
        assert_eq!(id.len(), MAX_TENANT_LEN);
        match dep
            .admit(Some(&id), None)
            .expect("256 bytes is within the limit")
        {
            Decision::Admitted(p) => p.record(Outcome::Success),
            Decision::Rejected(r) => panic!("{:?}", r.reason),
        }
        assert_eq!(dep.partition_of(Some(&id)), id);
    }
}

#[test]
fn c9_a_missing_or_empty_tenant_is_still_tenant_required() {
    let bank = bank();
    let dep = bank.dependency("payments_client").expect("declared");
    for t in [None, Some("")] {
        let e = dep.admit(t, None).expect_err("no tenant");
        assert_eq!(e, breakerbank::AdmitError::TenantRequired);
    }
}

#[test]
fn c9_a_global_dependency_ignores_the_tenant_whatever_its_length() {
    let bank = bank();
    let email = bank.dependency("email_client").expect("declared");
    let long = "x".repeat(1 << 20);
    assert!(matches!(
        email.admit(Some(&long), None),
        Ok(Decision::Admitted(_))
    ));
    assert_eq!(email.state(Some(&long)).expect("global"), State::Closed);
}

#[test]
fn c9_bytes_that_are_not_utf8_are_an_invalid_tenant() {
    // The bindings' bytes (C's, a Python string with a lone surrogate
    // encoded with `surrogatepass`) are made text by the core's rule.
    let e = breakerbank::tenant_text(b"ab\xed\xa0\x80").unwrap_err();
    assert!(matches!(e, AdmitError::InvalidTenant { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("not valid UTF-8") && msg.contains("byte 2"),
        "{msg}"
    );
    assert_eq!(breakerbank::tenant_text("acme".as_bytes()), Ok("acme"));
}
