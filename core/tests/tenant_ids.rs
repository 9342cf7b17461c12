//! C9: a tenant id that names no partition is refused with
//! `InvalidTenant`, naming what is wrong, and counts against nothing: the
//! reserved partition names (`global`, `<overflow>`, `*`) and ids holding a
//! control character (NUL included). So no tenant can pass for the
//! overflow (or every partition) in metrics, Prometheus text or events.
#![allow(clippy::disallowed_types)] // tests use std sync types directly

use breakerbank::{AdmitError, Bank, CallError, Decision, ManualClock, Outcome, Profile};
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
    max_tenants: 4
"#;

/// Each refused id, and what its refusal's message must say.
const REFUSED: [(&str, &[&str]); 10] = [
    ("global", &["`global`", "reserved"]),
    ("<overflow>", &["`<overflow>`", "reserved"]),
    ("*", &["`*`", "reserved"]),
    ("\0", &["control character", "U+0000", "at byte 0"]),
    ("ac\0me", &["control character", "U+0000", "at byte 2"]),
    ("line\nbreak", &["control character", "U+000A", "at byte 4"]),
    ("tab\t", &["control character", "U+0009", "at byte 3"]),
    ("del\x7f", &["control character", "U+007F", "at byte 3"]),
    ("c1\u{85}", &["control character", "U+0085", "at byte 2"]),
    (
        "\u{1b}[31mred",
        &["control character", "U+001B", "at byte 0"],
    ),
];

fn says(what: &str, id: &str, msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{what}({id:?}): `{msg}` should say {p:?}");
    }
}

#[test]
fn c9_reserved_names_and_control_characters_are_refused_everywhere_and_count_nothing() {
    let bank = Bank::with_clock(Profile::from_yaml(PROFILE).unwrap(), ManualClock::new());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    bank.subscribe(move |e| seen.lock().unwrap().push(e.clone()));
    let dep = bank.dependency("payments_client").unwrap();
    for (id, parts) in REFUSED {
        let invalid = |what: &str, r: Result<(), AdmitError>| match r {
            Err(e @ AdmitError::InvalidTenant { .. }) => says(what, id, &e.to_string(), parts),
            other => panic!("{what}({id:?}): {other:?}, not InvalidTenant"),
        };
        invalid(
            "admit",
            dep.admit(Some(id), None).map(|d| {
                if let Decision::Admitted(p) = d {
                    p.record(Outcome::Cancelled);
                }
            }),
        );
        invalid("state", dep.state(Some(id)).map(drop));
        invalid("inspect", dep.inspect(Some(id)).map(drop));
        invalid("try_reset", dep.try_reset(Some(id)));
        invalid("try_force_open", dep.try_force_open(Some(id)));
        invalid("try_trip", dep.try_trip(Some(id)));
        invalid("try_half_open", dep.try_half_open(Some(id)));
        match dep.call(Some(id), None, || Ok::<u32, String>(1)) {
            Err(e @ CallError::InvalidTenant { .. }) => says("call", id, &e.to_string(), parts),
            Err(e) => panic!("call({id:?}): {e}"),
            Ok(_) => panic!("call({id:?}) ran"),
        }
        // The quiet forms do nothing: `*` in particular is not "every
        // partition" (that is `None`).
        dep.force_open(Some(id));
        dep.trip(Some(id));
        dep.cache_put(Some(id), "k", 1u32);
    }
    assert!(bank.flush_events(Duration::from_secs(2)));
    assert_eq!(*events.lock().unwrap(), [], "nothing was announced");
    // No partition, no overflow count: nothing in the snapshot, and no
    // series for a partition of these names in the exposition.
    let metrics = bank.metrics();
    assert!(metrics.dependencies[0].partitions.is_empty());
    let text = bank.prometheus();
    for name in ["global", "<overflow>", "*"] {
        assert!(
            !text.contains(&format!("partition=\"{name}\"")),
            "{name} has a series:\n{text}"
        );
    }
    // Every tenant is still admitted as before.
    assert!(matches!(
        dep.admit(Some("acme"), None),
        Ok(Decision::Admitted(_))
    ));
}

#[test]
fn c9_ids_that_only_look_reserved_and_printable_unicode_are_tenants() {
    let bank = Bank::with_clock(Profile::from_yaml(PROFILE).unwrap(), ManualClock::new());
    let dep = bank.dependency("payments_client").unwrap();
    for id in [
        "Global",
        "global ",
        "<overflow",
        "**",
        "x*",
        "café",
        "租户",
        "a\u{200b}b",
    ] {
        match dep.admit(Some(id), None) {
            Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
            other => panic!("{id:?}: {other:?}"),
        }
    }
}
