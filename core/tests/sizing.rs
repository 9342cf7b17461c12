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
