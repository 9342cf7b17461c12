//! C21: a dependency's `slo` block and the sizing advice `check` gives
//! from it (docs/reference/behaviour.md, "C21 Sizing from the SLO").

use breakerbank::Profile;
use std::time::Duration;

/// A one-dependency profile with `extra` appended to the dependency.
fn profile(extra: &str) -> String {
    format!(
        r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {{consecutive_failures: 5, slow_call: 2s}}
    open_duration: 30s
    half_open: {{probe_budget: 1, success_threshold: 2}}
    fallback: {{kind: error, code: PAYMENT_UNAVAILABLE}}
    recovery_bound: 10m
{extra}"#
    )
}

fn problems(text: &str) -> Vec<String> {
    match Profile::from_yaml(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.problems().to_vec(),
    }
}

#[test]
fn c21_slo_is_optional_and_parsed() {
    let p = Profile::from_yaml(&profile("")).unwrap();
    assert_eq!(p.dependencies()[0].slo, None);
    let p = Profile::from_yaml(&profile(
        "    slo:\n      latency: 800ms\n      recovery: {typical: 1m, worst: 10m}\n",
    ))
    .unwrap();
    let slo = p.dependencies()[0].slo.as_ref().unwrap();
    assert_eq!(slo.latency, Some(Duration::from_millis(800)));
    let r = slo.recovery.unwrap();
    assert_eq!(r.typical, Duration::from_secs(60));
    assert_eq!(r.worst, Duration::from_secs(600));
}

#[test]
fn c21_slo_may_declare_only_latency_or_only_recovery() {
    let p = Profile::from_yaml(&profile("    slo: {latency: 300ms}\n")).unwrap();
    let slo = p.dependencies()[0].slo.as_ref().unwrap();
    assert_eq!(slo.latency, Some(Duration::from_millis(300)));
    assert_eq!(slo.recovery, None);
    let p =
        Profile::from_yaml(&profile("    slo: {recovery: {typical: 1m, worst: 1m}}\n")).unwrap();
    assert_eq!(p.dependencies()[0].slo.as_ref().unwrap().latency, None);
}

#[test]
fn c21_worst_below_typical_is_rejected_naming_dependency_and_field() {
    let ps = problems(&profile("    slo: {recovery: {typical: 5m, worst: 1m}}\n"));
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert!(ps[0].contains("payments_client"), "{ps:?}");
    assert!(ps[0].contains("`slo.recovery.worst`"), "{ps:?}");
    assert!(ps[0].contains("typical"), "{ps:?}");
}

#[test]
fn c21_slo_fields_are_checked_like_every_other() {
    let ps = problems(&profile("    slo: {recovery: {typical: 1m}}\n"));
    assert!(
        ps.iter().any(|p| p.contains("payments_client")
            && p.contains("`slo.recovery.worst`")
            && p.contains("missing")),
        "{ps:?}"
    );
    let ps = problems(&profile("    slo: {latency: 0s}\n"));
    assert!(
        ps.iter().any(|p| p.contains("payments_client")
            && p.contains("`slo.latency`")
            && p.contains("positive")),
        "{ps:?}"
    );
    let ps = problems(&profile("    slo: {latency: 800}\n"));
    assert!(ps.iter().any(|p| p.contains("`slo.latency`")), "{ps:?}");
    let ps = problems(&profile("    slo: {}\n"));
    assert!(
        ps.iter()
            .any(|p| p.contains("payments_client") && p.contains("`slo`")),
        "{ps:?}"
    );
    let ps = problems(&profile(
        "    slo: {latency: 1s, recover: {typical: 1m, worst: 2m}}\n",
    ));
    assert!(
        ps.iter()
            .any(|p| p.contains("payments_client") && p.contains("recover")),
        "{ps:?}"
    );
}

use breakerbank::AdviceKind;

/// The kinds of advice `check` gives `text`, with the dependency each names.
fn advice(text: &str) -> Vec<(Option<String>, AdviceKind, String)> {
    Profile::from_yaml(text)
        .unwrap()
        .advice()
        .into_iter()
        .map(|a| (a.dependency.clone(), a.kind, a.to_string()))
        .collect()
}

fn kinds(text: &str) -> Vec<AdviceKind> {
    advice(text).into_iter().map(|(_, k, _)| k).collect()
}

/// One dependency sized from its SLO: no advice.
fn sized(fields: &str) -> String {
    format!(
        r#"
dependencies:
  payments_client:
    isolation: tenant
{fields}
    half_open: {{probe_budget: 1, success_threshold: 2}}
    fallback: {{kind: error, code: PAYMENT_UNAVAILABLE}}
"#
    )
}

const GOOD: &str = "    trip: {consecutive_failures: 5, slow_call: 1500ms}
    open_duration: 50s
    backoff: {multiplier: 2.0, max: 10m}
    recovery_bound: 15m
    slo: {latency: 800ms, recovery: {typical: 1m, worst: 10m}}";

#[test]
fn c21_a_profile_sized_from_its_slo_gets_no_advice() {
    assert_eq!(advice(&sized(GOOD)), vec![]);
}

#[test]
fn c21_slow_call_missing_or_far_above_latency_is_advised() {
    let missing = sized(&GOOD.replace(", slow_call: 1500ms", ""));
    let a = advice(&missing);
    assert_eq!(kinds(&missing), vec![AdviceKind::SlowCallMissing], "{a:?}");
    let (dep, _, msg) = &a[0];
    assert_eq!(dep.as_deref(), Some("payments_client"));
    assert!(
        msg.contains("`trip.slow_call`") && msg.contains("1s 600ms"),
        "{msg}"
    );
    assert!(
        msg.contains("`slo.latency`") && msg.contains("800ms"),
        "{msg}"
    );

    let far = sized(&GOOD.replace("slow_call: 1500ms", "slow_call: 5s"));
    assert_eq!(kinds(&far), vec![AdviceKind::SlowCallAboveLatency]);
    // Twice the promise is the most that is not far above it.
    let edge = sized(&GOOD.replace("slow_call: 1500ms", "slow_call: 1600ms"));
    assert_eq!(kinds(&edge), vec![]);
}

#[test]
fn c21_open_duration_far_from_typical_recovery_is_advised_both_ways() {
    for open in ["20s", "3m"] {
        let text = sized(&GOOD.replace("open_duration: 50s", &format!("open_duration: {open}")));
        let a = advice(&text);
        assert_eq!(
            kinds(&text),
            vec![AdviceKind::OpenDurationFarFromRecovery],
            "{a:?}"
        );
        let msg = &a[0].2;
        assert!(
            msg.contains("`open_duration`") && msg.contains(open),
            "{msg}"
        );
        assert!(
            msg.contains("`slo.recovery.typical`") && msg.contains("1m"),
            "{msg}"
        );
        assert!(msg.contains("tune"), "{msg}");
    }
    let short = advice(&sized(
        &GOOD.replace("open_duration: 50s", "open_duration: 20s"),
    ));
    assert!(short[0].2.contains("flap"), "{short:?}");
    let long = advice(&sized(
        &GOOD.replace("open_duration: 50s", "open_duration: 3m"),
    ));
    assert!(
        long[0].2.contains("after the dependency has recovered"),
        "{long:?}"
    );
}

#[test]
fn c21_recovery_bound_below_worst_is_advised() {
    let text = sized(&GOOD.replace("recovery_bound: 15m", "recovery_bound: 5m"));
    let a = advice(&text);
    assert_eq!(
        kinds(&text),
        vec![AdviceKind::RecoveryBoundBelowWorst],
        "{a:?}"
    );
    assert!(
        a[0].2.contains("`recovery_bound`") && a[0].2.contains("10m"),
        "{a:?}"
    );
    assert!(a[0].2.contains("stuck"), "{a:?}");
}

#[test]
fn c21_a_backoff_whose_cap_cannot_reach_worst_is_advised() {
    let text = sized(&GOOD.replace("max: 10m", "max: 2m"));
    let a = advice(&text);
    assert_eq!(
        kinds(&text),
        vec![AdviceKind::BackoffCapBelowWorst],
        "{a:?}"
    );
    assert!(
        a[0].2.contains("`backoff.max`") && a[0].2.contains("10m"),
        "{a:?}"
    );
    // No backoff: the cap is `open_duration`, and a worst outage re-trips
    // about worst / open_duration times.
    let text = sized(&GOOD.replace("    backoff: {multiplier: 2.0, max: 10m}\n", ""));
    let a = advice(&text);
    assert_eq!(kinds(&text), vec![AdviceKind::BackoffMissing], "{a:?}");
    assert!(
        a[0].2.contains("`backoff: {multiplier: 2.0, max: 10m}`"),
        "{a:?}"
    );
    // A multiplier of 1 never lengthens the period either.
    let text = sized(&GOOD.replace("multiplier: 2.0", "multiplier: 1.0"));
    assert_eq!(kinds(&text), vec![AdviceKind::BackoffCapBelowWorst]);
}

#[test]
fn c21_one_open_duration_for_every_dependency_is_a_copied_default() {
    let text = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 2}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 5m
  email_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 5m
"#;
    let a = advice(text);
    assert_eq!(kinds(text), vec![AdviceKind::SharedOpenDuration], "{a:?}");
    let (dep, _, msg) = &a[0];
    assert_eq!(*dep, None);
    assert!(
        msg.contains("payments_client") && msg.contains("email_client"),
        "{msg}"
    );
    assert!(msg.contains("30s") && msg.contains("slo.recovery"), "{msg}");
    // Different durations: nothing copied.
    assert_eq!(kinds(&text.replacen("30s", "45s", 1)), vec![]);
}

#[test]
fn c21_well_known_defaults_without_an_slo_are_copied_defaults() {
    for (open, source) in [
        ("60s", "resilience4j"),
        ("1m", "pybreaker"),
        ("5s", "Polly"),
    ] {
        let text = sized(&format!(
            "    trip: {{consecutive_failures: 5}}\n    open_duration: {open}\n    recovery_bound: 5m"
        ));
        let a = advice(&text);
        assert_eq!(kinds(&text), vec![AdviceKind::WellKnownDefault], "{a:?}");
        assert!(
            a[0].2.contains(source) && a[0].2.contains("`slo.recovery`"),
            "{a:?}"
        );
    }
    // An SLO that says so: the same value is sized, not copied.
    let text = sized(&GOOD.replace("open_duration: 50s", "open_duration: 60s"));
    assert_eq!(kinds(&text), vec![]);
}

#[test]
fn c21_advice_has_a_suggestion_and_names_the_field() {
    let text = sized(&GOOD.replace("open_duration: 50s", "open_duration: 10s"));
    let a = Profile::from_yaml(&text).unwrap().advice();
    assert_eq!(a[0].field, "open_duration");
    assert_eq!(a[0].suggested, Some(Duration::from_secs(60)));
}
