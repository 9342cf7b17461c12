//! C14: a bounded exposition, per-dependency series that never go down,
//! calls by outcome, and the profile's `metrics.partitions`.
#![allow(clippy::disallowed_types)]

mod common;

use breakerbank::{Bank, ManualClock, MetricsSnapshot, Outcome, Profile, State};
use common::*;
use std::time::Duration;

const TENANTS: &str = "dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 3}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: PAY_DOWN}
    recovery_bound: 5m
    max_tenants: MAX
  email_client:
    isolation: global
    trip: {consecutive_failures: 3}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: MAIL_DOWN}
    recovery_bound: 5m
";

fn tenants(max: u32, extra: &str) -> (Bank, ManualClock) {
    let text = format!("{extra}{}", TENANTS.replace("MAX", &max.to_string()));
    let clock = ManualClock::new();
    let bank = Bank::with_clock(Profile::from_yaml(&text).unwrap(), clock.clone());
    (bank, clock)
}

/// The sample lines of an exposition (what Prometheus stores as series).
fn series(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect()
}

/// The value of the one sample named `name` whose labels include every
/// `key="value"` of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&str> = series(text)
        .into_iter()
        .filter(|l| {
            let (head, _) = l.rsplit_once(' ').unwrap();
            let metric = head.split('{').next().unwrap();
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| head.contains(&format!("{k}=\"{v}\"")))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?} in\n{text}");
    found[0].rsplit_once(' ').unwrap().1.parse().unwrap()
}

/// The per-dependency totals of `dep` in `m` (the snapshot's `*`).
fn totals<'a>(m: &'a MetricsSnapshot, dep: &str) -> &'a breakerbank::DependencyTotals {
    &m.dependencies
        .iter()
        .find(|d| d.name == dep)
        .expect("listed")
        .totals
}

#[test]
fn c14_five_thousand_closed_tenants_expose_fewer_than_400_series() {
    let (bank, _clock) = tenants(10_000, "");
    let pay = bank.dependency("payments_client").unwrap();
    for t in 0..5_000 {
        let t = format!("tenant-{t}");
        // A failure then a success: every tenant has counters, all closed.
        fail(&pay, Some(&t), 1);
        admitted(pay.admit(Some(&t), None).unwrap()).record(Outcome::Success);
    }
    let m = bank.metrics();
    assert_eq!(m.dependencies[0].partitions.len(), 5_000, "all live");
    let text = m.prometheus();
    let n = series(&text).len();
    assert!(n < 400, "{n} series for 5,000 closed tenants:\n{text}");
    assert!(!text.contains("tenant-1\""), "no closed tenant named");
    let dep = [("dependency", "payments_client")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_failures_total", &dep),
        5_000.0
    );
    let by = |outcome| {
        sample(
            &text,
            "breakerbank_dependency_calls_total",
            &[("dependency", "payments_client"), ("outcome", outcome)],
        )
    };
    assert_eq!(by("success"), 5_000.0);
    assert_eq!(by("failure"), 5_000.0);
    assert_eq!(by("cancelled"), 0.0);
    assert_eq!(by("refused"), 0.0);
    let closed = [("dependency", "payments_client"), ("state", "closed")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_partitions", &closed),
        5_000.0
    );
}

#[test]
fn c14_an_open_tenant_is_listed_by_name() {
    let (bank, _clock) = tenants(10_000, "");
    let pay = bank.dependency("payments_client").unwrap();
    for t in 0..5_000 {
        fail(&pay, Some(&format!("tenant-{t}")), 1);
    }
    fail(&pay, Some("tenant-42"), 2);
    let _ = rejected(pay.admit(Some("tenant-42"), None).unwrap());
    let text = bank.prometheus();
    assert!(series(&text).len() < 400);
    let t42 = |state| {
        sample(
            &text,
            "breakerbank_state",
            &[("partition", "tenant-42"), ("state", state)],
        )
    };
    assert_eq!(t42("open"), 1.0);
    assert_eq!(t42("closed"), 0.0);
    let p = [
        ("dependency", "payments_client"),
        ("partition", "tenant-42"),
    ];
    assert_eq!(sample(&text, "breakerbank_rejected_open_total", &p), 1.0);
    assert_eq!(sample(&text, "breakerbank_failures_total", &p), 3.0);
    let open = [("dependency", "payments_client"), ("state", "open")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_partitions", &open),
        1.0
    );
    let refused = [("dependency", "payments_client"), ("outcome", "refused")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_calls_total", &refused),
        1.0
    );
    assert!(!text.contains("partition=\"tenant-41\""));
}

#[test]
fn c14_per_dependency_counters_equal_the_calls_made_after_90_of_100_tenants_were_evicted() {
    let (bank, clock) = tenants(100, "");
    let pay = bank.dependency("payments_client").unwrap();
    let (mut ok, mut failed, mut cancelled, mut refused, mut opened) = (0, 0, 0, 0, 0);
    for t in 0..100 {
        let t = format!("old-{t}");
        fail(&pay, Some(&t), 2);
        failed += 2;
        admitted(pay.admit(Some(&t), None).unwrap()).record(Outcome::Success);
        admitted(pay.admit(Some(&t), None).unwrap()).record(Outcome::Cancelled);
        ok += 1;
        cancelled += 1;
        if t.ends_with('7') {
            // A trip, refusals and a recovery: counters a close leaves.
            fail(&pay, Some(&t), 3);
            failed += 3;
            opened += 1;
            let _ = rejected(pay.admit(Some(&t), None).unwrap());
            refused += 1;
            clock.advance(Duration::from_secs(31));
            admitted(pay.admit(Some(&t), None).unwrap()).record(Outcome::Success);
            ok += 1;
            assert_eq!(pay.state(Some(&t)).unwrap(), State::Closed);
        }
    }
    let before = bank.metrics();
    let sums = |m: &MetricsSnapshot| {
        let t = totals(m, "payments_client");
        (
            t.calls.success,
            t.calls.failure,
            t.calls.cancelled,
            t.calls.refused,
            t.get("opened_total").unwrap(),
        )
    };
    assert_eq!(
        sums(&before),
        (ok, failed, cancelled, refused, opened as f64)
    );
    // Newcomers with a failure counted are not idle: the old ones, all
    // idle, are evicted first (C9).
    for t in 0..90 {
        fail(&pay, Some(&format!("new-{t}")), 1);
        failed += 1;
    }
    let after = bank.metrics();
    let live_old = after.dependencies[0]
        .partitions
        .iter()
        .filter(|p| p.partition.starts_with("old-"))
        .count();
    assert_eq!(live_old, 10, "90 of the 100 were evicted");
    assert_eq!(
        sums(&after),
        (ok, failed, cancelled, refused, opened as f64)
    );
    let t = totals(&after, "payments_client");
    assert_eq!(t.get("failures_total"), Some(failed as f64));
    assert_eq!(t.get("cancelled_total"), Some(cancelled as f64));
    assert_eq!(t.get("rejected_open_total"), Some(refused as f64));
    assert_eq!(t.get("closed_total"), Some(opened as f64));
    assert_eq!(
        t.get("open_seconds_total"),
        Some(opened as f64 * 31.0),
        "time open is kept too"
    );
    // The exposition says the same.
    let text = after.prometheus();
    let dep = [("dependency", "payments_client")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_failures_total", &dep),
        failed as f64
    );
    assert_eq!(
        sample(&text, "breakerbank_dependency_opened_total", &dep),
        opened as f64
    );
    let success = [("dependency", "payments_client"), ("outcome", "success")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_calls_total", &success),
        ok as f64
    );
}

#[test]
fn c14_a_global_dependency_counts_calls_by_outcome() {
    let (bank, _clock) = tenants(10, "");
    let mail = bank.dependency("email_client").unwrap();
    for _ in 0..5 {
        admitted(mail.admit(None, None).unwrap()).record(Outcome::Success);
    }
    fail(&mail, None, 1);
    drop(admitted(mail.admit(None, None).unwrap())); // a dropped permit: cancelled
    fail(&mail, None, 2);
    let _ = rejected(mail.admit(None, None).unwrap());
    let _ = rejected(mail.admit(None, None).unwrap());
    let m = bank.metrics();
    let c = totals(&m, "email_client").calls;
    assert_eq!((c.success, c.failure, c.cancelled, c.refused), (5, 3, 1, 2));
    let text = m.prometheus();
    let open = [("dependency", "email_client"), ("state", "open")];
    assert_eq!(
        sample(&text, "breakerbank_dependency_partitions", &open),
        1.0
    );
    // Not closed: listed by partition too.
    assert_eq!(
        sample(
            &text,
            "breakerbank_state",
            &[("partition", "global"), ("state", "open")]
        ),
        1.0
    );
}

#[test]
fn c14_partitions_all_lists_closed_partitions_too() {
    let (bank, _clock) = tenants(100, "metrics: {partitions: all}\n");
    let pay = bank.dependency("payments_client").unwrap();
    for t in 0..3 {
        fail(&pay, Some(&format!("t{t}")), 1);
    }
    let text = bank.prometheus();
    for t in 0..3 {
        let p = format!("t{t}");
        assert_eq!(
            sample(
                &text,
                "breakerbank_state",
                &[("partition", &p), ("state", "closed")]
            ),
            1.0
        );
    }
    // And not_closed is the default, also when spelt out.
    let (bank, _clock) = tenants(100, "metrics: {partitions: not_closed}\n");
    fail(&bank.dependency("payments_client").unwrap(), Some("t0"), 1);
    assert!(!bank.prometheus().contains("partition=\"t0\""));
}

#[test]
fn c14_the_metrics_field_is_checked_at_load() {
    let bad = |extra: &str| {
        let text = format!("{extra}{}", TENANTS.replace("MAX", "10"));
        Profile::from_yaml(&text).unwrap_err().to_string()
    };
    let e = bad("metrics: {partitions: some}\n");
    assert!(
        e.contains("metrics.partitions") && e.contains("not_closed") && e.contains("all"),
        "{e}"
    );
    let e = bad("metrics: {series: all}\n");
    assert!(e.contains("metrics") && e.contains("series"), "{e}");
    let e = bad("metrics: all\n");
    assert!(e.contains("metrics"), "{e}");
}

#[test]
fn c14_call_durations_are_a_histogram_where_calls_are_timed() {
    let text = TENANTS.replace("MAX", "10").replace(
        "    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: MAIL_DOWN}",
        "    trip: {consecutive_failures: 3, slow_call: 2s}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: MAIL_DOWN}",
    );
    assert!(text.contains("slow_call"));
    let clock = ManualClock::new();
    let bank = Bank::with_clock(Profile::from_yaml(&text).unwrap(), clock.clone());
    let mail = bank.dependency("email_client").unwrap();
    for ms in [5, 300, 3_000] {
        let p = admitted(mail.admit(None, None).unwrap());
        clock.advance(Duration::from_millis(ms));
        p.record(Outcome::Success);
    }
    let m = bank.metrics();
    let h = totals(&m, "email_client")
        .call_durations
        .as_ref()
        .expect("timed");
    assert_eq!(h.count, 3);
    assert!((h.sum_seconds - 3.305).abs() < 1e-9, "{h:?}");
    let c = totals(&m, "email_client").calls;
    assert_eq!((c.success, c.failure), (2, 1), "the slow call failed");
    let text = m.prometheus();
    let le = |le| {
        sample(
            &text,
            "breakerbank_dependency_call_duration_seconds_bucket",
            &[("dependency", "email_client"), ("le", le)],
        )
    };
    assert_eq!(le("0.01"), 1.0);
    assert_eq!(le("0.5"), 2.0);
    assert_eq!(le("+Inf"), 3.0);
    // Untimed: no histogram, no duration measured.
    assert!(totals(&m, "payments_client").call_durations.is_none());
    assert!(!text.contains("call_duration_seconds_bucket{dependency=\"payments_client\""));
}

#[test]
fn c14_successes_from_more_threads_than_stripes_are_all_counted() {
    let (bank, _clock) = tenants(10, "");
    let mail = bank.dependency("email_client").unwrap();
    // Two waves, so the second reuses the indices the first gave back.
    for _ in 0..2 {
        std::thread::scope(|s| {
            for _ in 0..24 {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        admitted(mail.admit(None, None).unwrap()).record(Outcome::Success);
                    }
                });
            }
        });
    }
    let m = bank.metrics();
    assert_eq!(totals(&m, "email_client").calls.success, 48_000);
}
