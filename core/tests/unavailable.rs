//! C4: what a refusal reports, borrowed (`unavailable_ref`,
//! `serve_fallback_ref`) and owned (`unavailable`, `serve_fallback`): the
//! same dependency, partition, code and retry-after, and the same message.

mod common;

use breakerbank::{
    Bank, DependencyUnavailable, ManualClock, PartitionName, Profile, UnavailableRef,
};
use common::rejected;

const PROFILE: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 5m
    max_tenants: 1
  email_client:
    isolation: global
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 5m
"#;

/// The borrowed and owned forms of one refusal agree, field by field and
/// in their message.
fn agree(borrowed: UnavailableRef<'_>, owned: &DependencyUnavailable) {
    assert_eq!(borrowed.into_owned(), *owned);
    assert_eq!(borrowed.to_string(), owned.to_string());
    assert_eq!(owned.borrowed(), borrowed);
}

#[test]
fn c4_a_refusal_reported_borrowed_is_the_owned_error() {
    let bank = Bank::with_clock(
        Profile::from_yaml(PROFILE).expect("profile"),
        ManualClock::new(),
    );
    let pay = bank.dependency("payments_client").expect("declared");
    let _ = pay.call(Some("acme"), None, || Err::<(), _>("down"));
    let r = rejected(pay.admit(Some("acme"), None).expect("admission"));
    let u = pay.unavailable_ref(Some("acme"), &r);
    assert_eq!(u.partition, PartitionName::Tenant("acme"));
    assert_eq!(u.code, Some("PAYMENT_UNAVAILABLE"));
    assert!(u.retry_after.is_some());
    agree(u, &pay.unavailable(Some("acme"), &r));
    let served = pay.serve_fallback_ref::<u32>(Some("acme"), &r, None, None::<fn() -> Option<u32>>);
    let owned = pay.serve_fallback::<u32>(Some("acme"), &r, None, None::<fn() -> Option<u32>>);
    agree(
        served.expect_err("error fallback"),
        &owned.expect_err("error fallback"),
    );
    // A tenant the full table has no partition for, and one whose id is
    // too long to name one: both are reported as the overflow partition.
    for other in ["newcomer", &"x".repeat(300)] {
        let u = pay.unavailable_ref(Some(other), &r);
        assert_eq!(u.partition, PartitionName::Overflow);
        assert_eq!(u.partition.as_str(), "<overflow>");
        agree(u, &pay.unavailable(Some(other), &r));
        let served =
            pay.serve_fallback_ref::<u32>(Some(other), &r, None, None::<fn() -> Option<u32>>);
        agree(
            served.expect_err("error fallback"),
            &pay.unavailable(Some(other), &r),
        );
    }

    let email = bank.dependency("email_client").expect("declared");
    email.force_open(None);
    let r = rejected(email.admit(None, None).expect("admission"));
    let u = email.unavailable_ref(Some("ignored"), &r);
    assert_eq!(
        (u.partition, u.code, u.retry_after),
        (PartitionName::Global, None, None)
    );
    assert_eq!(
        u.to_string(),
        "dependency `email_client` is unavailable for partition `global`: \
         no degraded behaviour was given",
        "C4: the message says why no fallback served"
    );
    agree(u, &email.unavailable(None, &r));
}

/// C3, C4: `call`, which takes no cache key, on a `stale` dependency
/// whose cache holds a `()` under the default key (stored by a
/// `call_with` of a unit-returning call) reports the dependency
/// unavailable; it never panics serving that value.
#[test]
fn c4_call_on_a_stale_dependency_with_a_unit_value_cached_reports_unavailable() {
    let bank = Bank::with_clock(
        Profile::from_yaml(
            r#"
dependencies:
  cache_client:
    isolation: global
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 5m
"#,
        )
        .expect("profile"),
        ManualClock::new(),
    );
    let dep = bank.dependency("cache_client").expect("declared");
    let stored = dep.call_with(None, None, breakerbank::CallOptions::default(), || {
        Ok::<(), &str>(())
    });
    assert!(stored.is_ok());
    let _ = dep.call(None, None, || Err::<(), _>("down"));
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dep.call(None, None, || Ok::<u32, &str>(7))
    }));
    match refused {
        Ok(Err(breakerbank::CallError::Unavailable(u))) => {
            assert_eq!(u.dependency, "cache_client");
        }
        Ok(other) => panic!("expected Unavailable, got {other:?}"),
        Err(_) => panic!("`call` panicked serving the stale fallback"),
    }
}
