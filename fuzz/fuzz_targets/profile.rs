//! `Profile::from_yaml` on arbitrary bytes.
//!
//! Loading must never panic, hang or blow up memory (the make target sets
//! `-timeout` and `-rss_limit_mb`), and every profile it accepts must obey
//! the contract's profile rules ("The profile (YAML)", C2, C6, C9), checked
//! on the resulting `DependencyConfig`s and, for what a config cannot show
//! (a field given or not), on the YAML itself.
#![no_main]

use breakerbank::{DependencyConfig, Fallback, Isolation, Profile, TripPolicy};
use libfuzzer_sys::fuzz_target;
use serde_yaml_ng::Value;

/// C9: `max_tenants` is at most 1,000,000 per dependency.
const CONTRACT_MAX_TENANTS: u32 = 1_000_000;
/// C9: the default `memory_limit`.
const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;
/// The least a tenant partition costs when the bank is built, as
/// `DependencyConfig::max_tenants` documents it: a 64-byte slot and 2 bytes
/// of index. A profile needing more than the memory limit at this lower
/// bound must have been rejected (C9).
const MIN_BYTES_PER_TENANT: u64 = 66;

/// Fields the contract allows in a dependency, and inside its sub-maps.
const DEP_FIELDS: [&str; 11] = [
    "isolation",
    "trip",
    "open_duration",
    "backoff",
    "half_open",
    "fallback",
    "recovery_bound",
    "max_tenants",
    "probe_timeout",
    "slo",
    "mode",
];
const TRIP_FIELDS: [&str; 5] = [
    "consecutive_failures",
    "failure_rate",
    "min_calls",
    "window",
    "slow_call",
];

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(text) => check(text),
        // Invalid UTF-8 cannot reach `from_yaml`; its lossy reading still
        // exercises the parser on the same structure.
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});

fn check(text: &str) {
    let profile = match Profile::from_yaml(text) {
        Ok(p) => p,
        Err(e) => {
            // A rejection explains itself.
            assert!(!e.problems().is_empty(), "a rejection without a problem");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let deps = profile.dependencies();
    assert!(
        !deps.is_empty(),
        "a profile without dependencies was accepted"
    );
    let mut tenant_bytes: u64 = 0;
    for (i, d) in deps.iter().enumerate() {
        check_config(d);
        assert!(
            deps[..i].iter().all(|o| o.name != d.name),
            "duplicate dependency `{}` accepted",
            d.name
        );
        if d.isolation == Isolation::Tenant {
            tenant_bytes =
                tenant_bytes.saturating_add(u64::from(d.max_tenants) * MIN_BYTES_PER_TENANT);
        }
    }
    // This loader has no `memory_limit` field, so the default applies.
    assert!(
        tenant_bytes <= DEFAULT_MEMORY_LIMIT,
        "C9: accepted a profile whose tenant tables need at least {tenant_bytes} bytes, over the \
         1 GiB default memory_limit"
    );
    check_yaml(text, deps);
}

/// The rules a validated dependency must satisfy.
fn check_config(d: &DependencyConfig) {
    let n = &d.name;
    // C2: named after a client module, never a route.
    assert!(!n.is_empty(), "C2: empty dependency name accepted");
    assert!(
        !n.contains('/'),
        "C2: route-like name `{n}` (contains `/`) accepted"
    );
    assert!(
        !n.chars().any(char::is_whitespace),
        "C2: route-like name `{n}` (whitespace) accepted"
    );
    for m in [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE",
    ] {
        let b = n.as_bytes();
        assert!(
            !(b.len() > m.len()
                && b[..m.len()].eq_ignore_ascii_case(m.as_bytes())
                && b[m.len()].is_ascii_whitespace()),
            "C2: name `{n}` starts with the HTTP method {m}"
        );
    }
    // Durations > 0; C6: open_duration required and positive.
    assert!(
        !d.open_duration.is_zero(),
        "`{n}`: zero open_duration accepted"
    );
    assert!(
        !d.recovery_bound.is_zero(),
        "`{n}`: zero recovery_bound accepted"
    );
    if let Some(s) = d.slow_call {
        assert!(!s.is_zero(), "`{n}`: zero slow_call accepted");
    }
    match &d.trip {
        TripPolicy::ConsecutiveFailures(k) => {
            assert!(*k >= 1, "`{n}`: consecutive_failures {k} accepted");
        }
        TripPolicy::FailureRate {
            rate,
            min_calls,
            window,
        } => {
            assert!(
                *rate > 0.0 && *rate <= 1.0,
                "`{n}`: failure_rate {rate} outside (0, 1] accepted"
            );
            assert!(*min_calls >= 1, "`{n}`: min_calls {min_calls} accepted");
            assert!(!window.is_zero(), "`{n}`: zero window accepted");
        }
    }
    assert!(
        d.probe_budget >= 1,
        "`{n}`: probe_budget {} accepted",
        d.probe_budget
    );
    assert!(
        d.success_threshold >= 1,
        "`{n}`: success_threshold {} accepted",
        d.success_threshold
    );
    if let Some(b) = d.backoff {
        assert!(
            b.multiplier >= 1.0,
            "C6: `{n}`: backoff multiplier {} accepted",
            b.multiplier
        );
        assert!(
            b.max >= d.open_duration,
            "C6: `{n}`: backoff max {:?} shorter than open_duration {:?} accepted",
            b.max,
            d.open_duration
        );
    }
    match &d.fallback {
        Fallback::Error { code } => {
            assert!(
                !code.trim().is_empty(),
                "C3: `{n}`: empty error code accepted"
            )
        }
        Fallback::Stale { max_staleness } => {
            assert!(
                !max_staleness.is_zero(),
                "C3: `{n}`: zero max_staleness accepted"
            )
        }
        Fallback::Degraded => {}
    }
    // C9: bounded partitions.
    assert!(d.max_tenants >= 1, "C9: `{n}`: max_tenants 0 accepted");
    assert!(
        d.max_tenants <= CONTRACT_MAX_TENANTS,
        "C9: `{n}`: max_tenants {} over 1,000,000 accepted",
        d.max_tenants
    );
}

/// What the configs cannot show: which fields the YAML gave.
fn check_yaml(text: &str, deps: &[DependencyConfig]) {
    // The loader accepted the text, so a YAML reader accepts it too; if
    // not, there is nothing more to compare.
    let Ok(root) = serde_yaml_ng::from_str::<Value>(text) else {
        return;
    };
    let Some(map) = plain(&root)
        .get("dependencies")
        .and_then(|v| plain(v).as_mapping())
    else {
        panic!("accepted a profile whose `dependencies` is not a mapping");
    };
    assert_eq!(
        map.len(),
        deps.len(),
        "declared and loaded dependencies differ"
    );
    for d in deps {
        let Some(raw) = map.get(d.name.as_str()).and_then(|v| plain(v).as_mapping()) else {
            // A non-string key that deserialised to this name (a number):
            // the structural rules below need the string key.
            continue;
        };
        let n = &d.name;
        for (k, _) in raw {
            let k = k.as_str().unwrap_or("");
            assert!(
                DEP_FIELDS.contains(&k),
                "`{n}`: unknown field `{k}` accepted"
            );
        }
        for req in [
            "isolation",
            "trip",
            "open_duration",
            "half_open",
            "fallback",
            "recovery_bound",
        ] {
            assert!(
                raw.contains_key(req),
                "`{n}`: missing required `{req}` accepted"
            );
        }
        if let Some(h) = raw.get("half_open").and_then(|v| plain(v).as_mapping()) {
            for req in ["probe_budget", "success_threshold"] {
                assert!(
                    h.contains_key(req),
                    "`{n}`: missing half_open.{req} accepted"
                );
            }
        }
        if let Some(t) = raw.get("trip").and_then(|v| plain(v).as_mapping()) {
            for (k, _) in t {
                let k = k.as_str().unwrap_or("");
                assert!(
                    TRIP_FIELDS.contains(&k),
                    "`{n}`: unknown trip field `{k}` accepted"
                );
            }
        }
        if raw.contains_key("max_tenants") {
            assert_eq!(
                d.isolation,
                Isolation::Tenant,
                "C9: `{n}`: max_tenants on a global dependency accepted"
            );
        }
        if let Some(f) = raw.get("fallback").and_then(|v| plain(v).as_mapping()) {
            match &d.fallback {
                Fallback::Error { .. } => assert!(f.contains_key("code")),
                Fallback::Stale { .. } => assert!(f.contains_key("max_staleness")),
                Fallback::Degraded => {}
            }
        }
    }
}

/// A value without its YAML tags (`!tag value`), which the loader ignores.
fn plain(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => plain(&t.value),
        v => v,
    }
}
