//! Profile loading: every rejection names the dependency and field (docs/reference/profile.md).

use breakerbank::{Fallback, Isolation, Profile, TripPolicy};
use std::time::Duration;

const GOOD: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip:
      consecutive_failures: 5
      slow_call: 2s
    open_duration: 30s
    backoff: {multiplier: 2.0, max: 5m}
    half_open:
      probe_budget: 2
      success_threshold: 3
    fallback:
      kind: error
      code: PAYMENT_UNAVAILABLE
    recovery_bound: 5m
    max_tenants: 10000
  email_client:
    isolation: global
    trip: {failure_rate: 0.5, min_calls: 20, window: 10s}
    open_duration: 15s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 2m
  catalog_client:
    isolation: global
    trip: {consecutive_failures: 3}
    open_duration: 250ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 1h
"#;

#[test]
fn contract_example_loads_with_every_field() {
    let p = Profile::from_yaml(GOOD).unwrap();
    let d = p.dependencies();
    assert_eq!(d.len(), 3);
    assert_eq!(d[0].name, "payments_client");
    assert_eq!(d[0].isolation, Isolation::Tenant);
    assert_eq!(d[0].trip, TripPolicy::ConsecutiveFailures(5));
    assert_eq!(d[0].slow_call, Some(Duration::from_secs(2)));
    assert_eq!(d[0].backoff.unwrap().max, Duration::from_secs(300));
    assert_eq!((d[0].probe_budget, d[0].success_threshold), (2, 3));
    assert_eq!(
        d[0].fallback,
        Fallback::Error {
            code: "PAYMENT_UNAVAILABLE".into()
        }
    );
    assert_eq!(d[0].max_tenants, 10_000);
    assert_eq!(
        d[1].trip,
        TripPolicy::FailureRate {
            rate: 0.5,
            min_calls: 20,
            window: Duration::from_secs(10)
        }
    );
    assert_eq!(d[1].fallback, Fallback::Degraded);
    assert_eq!(d[2].open_duration, Duration::from_millis(250));
    assert_eq!(
        d[2].fallback,
        Fallback::Stale {
            max_staleness: Duration::from_secs(600)
        }
    );
    assert_eq!(d[2].recovery_bound, Duration::from_secs(3600));
}

#[test]
fn default_max_tenants_is_100000() {
    let p = Profile::from_yaml(&GOOD.replace("    max_tenants: 10000\n", "")).unwrap();
    assert_eq!(p.dependencies()[0].max_tenants, 100_000);
}

#[test]
fn c7_probe_timeout_defaults_to_recovery_bound_and_must_be_positive() {
    let p = Profile::from_yaml(GOOD).unwrap();
    let d = &p.dependencies()[0];
    assert_eq!(d.probe_timeout, d.recovery_bound);
    let p = Profile::from_yaml(&GOOD.replacen(
        "    recovery_bound: 5m\n",
        "    recovery_bound: 5m\n    probe_timeout: 45s\n",
        1,
    ))
    .unwrap();
    assert_eq!(p.dependencies()[0].probe_timeout, Duration::from_secs(45));
    assert_eq!(p.dependencies()[1].probe_timeout, Duration::from_secs(120));
    rejects(
        "    recovery_bound: 5m\n",
        "    recovery_bound: 5m\n    probe_timeout: 0s\n",
        &["payments_client", "probe_timeout", "positive"],
    );
    rejects(
        "    recovery_bound: 5m\n",
        "    recovery_bound: 5m\n    probe_timeout: soon\n",
        &["payments_client", "probe_timeout"],
    );
}

/// Replaces `from` (which must occur) in the good profile and expects an
/// error mentioning every one of `needles`.
fn rejects(from: &str, to: &str, needles: &[&str]) {
    assert!(GOOD.contains(from), "test setup: `{from}` not in profile");
    let yaml = GOOD.replacen(from, to, 1);
    let err = Profile::from_yaml(&yaml).expect_err(&format!("accepted:\n{yaml}"));
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "error `{msg}` should mention `{n}`");
    }
}

#[test]
fn c2_route_like_names_are_rejected() {
    rejects(
        "  email_client:",
        "  /v1/email:",
        &["/v1/email", "contains `/`", "client module"],
    );
    rejects(
        "  email_client:",
        "  \"GET email\":",
        &["GET email", "HTTP method"],
    );
    rejects(
        "  email_client:",
        "  \"email client\":",
        &["email client", "whitespace"],
    );
    rejects(
        "  email_client:",
        "  \"post /send\":",
        &["post /send", "HTTP method"],
    );
}

#[test]
fn c6_missing_open_duration_is_rejected() {
    rejects(
        "    open_duration: 15s\n",
        "",
        &["email_client", "open_duration", "missing"],
    );
}

#[test]
fn c3_missing_fallback_or_its_fields_is_rejected() {
    rejects(
        "    fallback: {kind: degraded}\n",
        "",
        &["email_client", "fallback", "missing"],
    );
    rejects(
        "      code: PAYMENT_UNAVAILABLE\n",
        "",
        &["payments_client", "fallback.code"],
    );
    rejects(
        "{kind: stale, max_staleness: 10m}",
        "{kind: stale}",
        &["catalog_client", "fallback.max_staleness"],
    );
    rejects(
        "{kind: degraded}",
        "{kind: retry}",
        &["email_client", "fallback.kind", "retry"],
    );
}

#[test]
fn required_fields_are_named() {
    rejects(
        "    isolation: global\n    trip: {failure_rate",
        "    trip: {failure_rate",
        &["email_client", "isolation"],
    );
    rejects(
        "    recovery_bound: 2m\n",
        "",
        &["email_client", "recovery_bound"],
    );
    rejects(
        "{probe_budget: 1, success_threshold: 1}\n    fallback: {kind: degraded}",
        "{probe_budget: 1}\n    fallback: {kind: degraded}",
        &["email_client", "half_open.success_threshold"],
    );
    rejects(
        "{failure_rate: 0.5, min_calls: 20, window: 10s}",
        "{failure_rate: 0.5, window: 10s}",
        &["email_client", "trip.min_calls"],
    );
    rejects(
        "{failure_rate: 0.5, min_calls: 20, window: 10s}",
        "{}",
        &["email_client", "trip"],
    );
}

#[test]
fn zero_budgets_and_thresholds_are_rejected() {
    rejects(
        "probe_budget: 2",
        "probe_budget: 0",
        &["payments_client", "half_open.probe_budget", "got 0"],
    );
    rejects(
        "success_threshold: 3",
        "success_threshold: 0",
        &["payments_client", "half_open.success_threshold"],
    );
    rejects(
        "consecutive_failures: 5",
        "consecutive_failures: -1",
        &["payments_client", "trip.consecutive_failures"],
    );
    rejects(
        "probe_budget: 2",
        "probe_budget: 128",
        &["payments_client", "half_open.probe_budget", "127"],
    );
}

#[test]
fn zero_or_negative_or_unitless_durations_are_rejected() {
    rejects(
        "open_duration: 30s",
        "open_duration: 0s",
        &["payments_client", "open_duration", "positive"],
    );
    rejects(
        "open_duration: 30s",
        "open_duration: -5s",
        &["payments_client", "open_duration"],
    );
    rejects(
        "open_duration: 30s",
        "open_duration: 30",
        &["payments_client", "open_duration"],
    );
    rejects(
        "recovery_bound: 1h",
        "recovery_bound: soon",
        &["catalog_client", "recovery_bound"],
    );
    rejects(
        "window: 10s",
        "window: 0ms",
        &["email_client", "trip.window"],
    );
}

#[test]
fn rates_outside_zero_one_are_rejected() {
    for bad in ["0", "0.0", "1.5", "-0.2"] {
        rejects(
            "failure_rate: 0.5",
            &format!("failure_rate: {bad}"),
            &["email_client", "trip.failure_rate", "(0, 1]"],
        );
    }
    Profile::from_yaml(&GOOD.replace("failure_rate: 0.5", "failure_rate: 1.0"))
        .expect("1.0 is allowed");
}

#[test]
fn backoff_rules() {
    rejects(
        "multiplier: 2.0",
        "multiplier: 0.5",
        &["payments_client", "backoff.multiplier"],
    );
    rejects("max: 5m}", "max: 1s}", &["payments_client", "backoff.max"]);
    // A maximum equal to `open_duration` (30s) is allowed: no growth.
    let equal = GOOD.replacen("max: 5m}", "max: 30s}", 1);
    let p = Profile::from_yaml(&equal).expect("backoff.max equal to open_duration");
    assert_eq!(
        p.dependencies()[0].backoff.unwrap().max,
        Duration::from_secs(30)
    );
}

#[test]
fn c5_min_calls_or_window_without_failure_rate_is_rejected() {
    for extra in ["min_calls: 5", "window: 10s", "min_calls: 5, window: 10s"] {
        rejects(
            "{consecutive_failures: 3}",
            &format!("{{consecutive_failures: 3, {extra}}}"),
            &["catalog_client", "trip", "only go with `failure_rate`"],
        );
    }
}

#[test]
fn max_tenants_on_a_global_dependency_is_rejected() {
    rejects(
        "    recovery_bound: 2m\n",
        "    recovery_bound: 2m\n    max_tenants: 10\n",
        &["email_client", "max_tenants", "tenant"],
    );
    rejects(
        "max_tenants: 10000",
        "max_tenants: 0",
        &["payments_client", "max_tenants"],
    );
}

#[test]
fn unknown_fields_are_rejected_and_named() {
    rejects(
        "    recovery_bound: 2m\n",
        "    recovery_bound: 2m\n    retries: 3\n",
        &["email_client", "retries"],
    );
    rejects(
        "{kind: degraded}",
        "{kind: degraded, colour: red}",
        &["email_client", "colour"],
    );
    rejects("dependencies:", "deps: {}\ndependencies:", &["deps"]);
}

#[test]
fn duplicate_names_are_rejected() {
    let dup = format!("{GOOD}  email_client:\n    isolation: global\n");
    let err = Profile::from_yaml(&dup).unwrap_err().to_string();
    assert!(
        err.contains("email_client") && err.contains("twice"),
        "{err}"
    );
}

#[test]
fn duplicate_fields_are_rejected() {
    rejects(
        "    open_duration: 15s\n",
        "    open_duration: 15s\n    open_duration: 20s\n",
        &["email_client", "open_duration"],
    );
}

#[test]
fn malformed_and_empty_documents_are_rejected() {
    for (doc, needle) in [
        ("", "empty"),
        ("   \n# just a comment\n", "dependencies"),
        ("dependencies: {}", "at least one"),
        ("dependencies: [1, 2]", "mapping"),
        (
            "dependencies:\n  a_client: {isolation: global\n",
            "dependency `a_client`",
        ),
        ("42", "dependencies"),
    ] {
        let err = Profile::from_yaml(doc).expect_err(doc).to_string();
        assert!(
            err.contains(needle),
            "`{doc}` gave `{err}`, wanted `{needle}`"
        );
    }
}

#[test]
fn every_problem_is_listed() {
    let yaml = GOOD
        .replace("probe_budget: 2", "probe_budget: 0")
        .replace("open_duration: 15s", "open_duration: 0s");
    let err = Profile::from_yaml(&yaml).unwrap_err();
    assert_eq!(err.problems().len(), 2, "{err}");
}

#[test]
fn load_names_a_missing_file() {
    let err = Profile::load("/nonexistent/profile.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/profile.yaml"), "{err}");
}

/// `count` tenant-scoped dependencies of `max_tenants` each, after `head`
/// (top-level fields).
fn many_dependencies(head: &str, count: usize, max_tenants: u64) -> String {
    let mut yaml = format!("{head}dependencies:\n");
    for i in 0..count {
        yaml.push_str(&format!(
            "  client_{i:02}:\n    isolation: tenant\n    trip: {{consecutive_failures: 5}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: DOWN}}\n    recovery_bound: 5m\n    max_tenants: {max_tenants}\n"
        ));
    }
    yaml
}

#[test]
fn c9_max_tenants_is_at_most_one_million() {
    rejects(
        "max_tenants: 10000",
        "max_tenants: 1000001",
        &["payments_client", "max_tenants", "1000000", "1000001"],
    );
    let at_cap = GOOD.replace("max_tenants: 10000", "max_tenants: 1000000");
    let p = Profile::from_yaml(&at_cap).expect("1,000,000 is allowed");
    assert_eq!(p.dependencies()[0].max_tenants, 1_000_000);
}

/// The issue's 926-byte profile: four dependencies of 2^24 tenants each.
#[test]
fn c9_the_926_byte_profile_is_rejected_at_load() {
    let yaml = many_dependencies("", 4, 16_777_216);
    let err = Profile::from_yaml(&yaml).expect_err("2^24 tenants is over the cap");
    let msg = err.to_string();
    for name in ["client_00", "client_01", "client_02", "client_03"] {
        assert!(msg.contains(name), "`{msg}` should name `{name}`");
    }
    assert!(msg.contains("max_tenants"), "{msg}");
}

#[test]
fn c9_memory_limit_takes_bytes_with_a_unit() {
    for (limit, bytes) in [
        ("512MiB", 512 << 20),
        ("2GiB", 2 << 30),
        ("1073741824", 1 << 30),
        ("64000 KiB", 64_000 << 10),
        ("1TiB", 1 << 40),
        ("3GB", 3_000_000_000),
        ("\"100000000\"", 100_000_000),
    ] {
        let yaml = format!("memory_limit: {limit}\n{GOOD}");
        match Profile::from_yaml(&yaml) {
            Ok(p) => assert_eq!(p.memory_limit(), bytes, "{limit}"),
            Err(e) => panic!("memory_limit: {limit} rejected: {e}"),
        }
    }
    let default = Profile::from_yaml(GOOD).expect("good");
    assert_eq!(default.memory_limit(), breakerbank::DEFAULT_MEMORY_LIMIT);
    assert_eq!(breakerbank::DEFAULT_MEMORY_LIMIT, 1 << 30);
}

#[test]
fn c9_a_bad_memory_limit_is_rejected_naming_the_field() {
    for limit in [
        "0",
        "0MiB",
        "-1",
        "12 parsecs",
        "MiB",
        "1.5GiB",
        "\"\"",
        "99999999999TiB",
    ] {
        let yaml = format!("memory_limit: {limit}\n{GOOD}");
        let err = Profile::from_yaml(&yaml).expect_err(&format!("accepted memory_limit: {limit}"));
        let msg = err.to_string();
        assert!(
            msg.contains("memory_limit"),
            "`{msg}` should name the field"
        );
    }
}

#[test]
fn c9_partitions_needing_more_than_memory_limit_are_rejected_naming_the_dependencies() {
    // Two tables of 1,000,000 tenants need over 100 MiB between them.
    let yaml = many_dependencies("memory_limit: 100MiB\n", 2, 1_000_000);
    let err = Profile::from_yaml(&yaml).expect_err("over the memory limit");
    let msg = err.to_string();
    for needle in ["client_00", "client_01", "memory_limit", "100MiB"] {
        assert!(msg.contains(needle), "`{msg}` should mention `{needle}`");
    }
    // Either fits alone.
    let one = many_dependencies("memory_limit: 100MiB\n", 1, 1_000_000);
    Profile::from_yaml(&one).expect("one table fits in 100 MiB");
}

#[test]
fn c9_the_default_memory_limit_is_one_gib() {
    // A table of 1,000,000 tenants takes about 83 MB: twelve fit in
    // 1 GiB, thirteen do not.
    Profile::from_yaml(&many_dependencies("", 12, 1_000_000)).expect("within 1 GiB");
    let err = Profile::from_yaml(&many_dependencies("", 13, 1_000_000))
        .expect_err("over the default 1 GiB");
    assert!(err.to_string().contains("memory_limit"), "{err}");
    Profile::from_yaml(&many_dependencies("memory_limit: 2GiB\n", 13, 1_000_000))
        .expect("within 2 GiB");
}

#[test]
fn c5_min_calls_is_at_most_the_window_counters_range() {
    let at_cap = GOOD.replacen("min_calls: 20", "min_calls: 1048575", 1);
    let p = Profile::from_yaml(&at_cap).expect("min_calls: 2^20 - 1 is allowed");
    assert!(
        matches!(
            p.dependencies()[1].trip,
            TripPolicy::FailureRate {
                min_calls: 1_048_575,
                ..
            }
        ),
        "{:?}",
        p.dependencies()[1].trip
    );
    rejects(
        "min_calls: 20",
        "min_calls: 1048576",
        &["email_client", "trip.min_calls", "1048575", "1048576"],
    );
}

#[test]
fn c9_the_memory_limit_message_gives_each_table_in_mib_and_the_limit_as_written() {
    // Written as a bare number of bytes, the limit is quoted as written.
    let yaml = many_dependencies("memory_limit: 104857600\n", 2, 1_000_000);
    let msg = Profile::from_yaml(&yaml)
        .expect_err("over the memory limit")
        .to_string();
    assert!(
        msg.contains("`memory_limit: 104857600`"),
        "`{msg}` should quote the limit as written"
    );
    // Each table's size, then the total, in MiB with one decimal.
    let size_of = |after: &str| -> f64 {
        let rest = &msg[msg
            .find(after)
            .unwrap_or_else(|| panic!("`{msg}` lacks `{after}`"))
            + after.len()..];
        let end = rest
            .find(" MiB")
            .unwrap_or_else(|| panic!("`{msg}`: no MiB after `{after}`"));
        rest[..end]
            .parse()
            .unwrap_or_else(|e| panic!("`{msg}`: `{}` after `{after}`: {e}", &rest[..end]))
    };
    let one = size_of("`client_00` (");
    assert!((50.0..100.0).contains(&one), "one table of 1M: {one} MiB");
    assert_eq!(size_of("`client_01` ("), one);
    assert!((size_of(" need ") - 2.0 * one).abs() <= 0.1, "{msg}");
}

#[test]
fn c2_a_name_that_is_only_an_http_method_word_is_not_route_like() {
    for name in ["get", "DELETE", "Trace"] {
        let yaml = GOOD.replacen("  email_client:", &format!("  {name}:"), 1);
        let p = Profile::from_yaml(&yaml)
            .unwrap_or_else(|e| panic!("dependency `{name}` rejected: {e}"));
        assert!(p.dependencies().iter().any(|d| d.name == name));
    }
}

#[test]
fn c3_a_blank_error_code_and_fields_of_another_kind_are_rejected() {
    rejects(
        "code: PAYMENT_UNAVAILABLE",
        "code: \"  \"",
        &["payments_client", "fallback.code", "must not be empty"],
    );
    for extra in ["code: X", "max_staleness: 1m", "code: X, max_staleness: 1m"] {
        rejects(
            "fallback: {kind: degraded}",
            &format!("fallback: {{kind: degraded, {extra}}}"),
            &["email_client", "`kind: degraded` takes neither"],
        );
    }
}

// -- the profile section: a profile given as data ------------------------

/// A parse-level message without the position only text has.
fn without_position(problem: &str) -> String {
    let mut out = problem.to_string();
    while let Some(at) = out.find(" at line ") {
        let rest = &out[at + " at line ".len()..];
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let line = digits(rest);
        let after = &rest[line..];
        let Some(col) = after.strip_prefix(" column ") else {
            break;
        };
        let end = at + " at line ".len() + line + " column ".len() + digits(col);
        out.replace_range(at..end, "");
    }
    out
}

/// `text` loaded as YAML text and as a value of the YAML crate.
fn both(text: &str) -> (Result<Profile, Vec<String>>, Result<Profile, Vec<String>>) {
    let problems = |e: breakerbank::ConfigError| {
        e.problems()
            .iter()
            .map(|p| without_position(p))
            .collect::<Vec<_>>()
    };
    let value: breakerbank::serde_yaml_ng::Value =
        breakerbank::serde_yaml_ng::from_str(text).expect("well-formed YAML");
    (
        Profile::from_yaml(text).map_err(problems),
        Profile::from_value(value).map_err(problems),
    )
}

#[test]
fn profile_section_a_value_loads_as_its_yaml_text_does() {
    let (text, value) = both(GOOD);
    assert_eq!(text.expect("good"), value.expect("good as a value"));
}

#[test]
fn profile_section_a_value_gets_the_same_checks_and_messages_as_text() {
    let cases = [
        // validation: every problem, named by dependency and field
        GOOD.replace("open_duration: 30s", "open_duration: 0s")
            .replace("probe_budget: 2", "probe_budget: 0"),
        GOOD.replace("consecutive_failures: 5", "consecutive_failures: 5000"),
        GOOD.replace(
            "    isolation: global\n    trip: {failure_rate",
            "    trip: {failure_rate",
        ),
        GOOD.replace("code: PAYMENT_UNAVAILABLE", "code: \" \""),
        GOOD.replace("payments_client:", "GET /payments:"),
        GOOD.replace("max_staleness: 10m", "max_staleness: 10"),
        format!("memory_limit: 12 parsecs\n{GOOD}"),
        format!("memory_limit: 1KiB\n{GOOD}"),
        // parse level: unknown fields, wrong types, wrong shapes
        GOOD.replace("recovery_bound: 5m", "recovry_bound: 5m"),
        GOOD.replace("probe_budget: 2", "probe_budget: two"),
        GOOD.replace("    max_tenants: 10000\n", "    max_tenants: [1]\n"),
        "dependencies: [payments_client]\n".to_string(),
        "dependencies:\n".to_string(),
        "depedencies: {}\n".to_string(),
    ];
    for case in &cases {
        let (text, value) = both(case);
        let text = text.expect_err(case);
        let value = value.expect_err(case);
        assert_eq!(text, value, "for:\n{case}");
    }
}

#[test]
fn profile_section_an_empty_value_is_refused_as_empty_text_is() {
    let text = Profile::from_yaml("").unwrap_err();
    let value = Profile::from_value(breakerbank::serde_yaml_ng::Value::Null).unwrap_err();
    assert_eq!(text, value);
    assert!(
        value.to_string().contains("the profile is empty"),
        "{value}"
    );
}

#[test]
fn profile_section_a_parse_error_names_the_dependency_and_field_once_with_one_position() {
    let err =
        Profile::from_yaml(&GOOD.replace("probe_budget: 2", "probe_budget: two")).unwrap_err();
    let [problem] = err.problems() else {
        panic!("{err}")
    };
    assert!(
        problem
            .starts_with("dependency `payments_client`: field `half_open.probe_budget` must be "),
        "{problem}"
    );
    assert_eq!(problem.matches("payments_client").count(), 1, "{problem}");
    assert_eq!(problem.matches(" at line ").count(), 1, "{problem}");
}

// -- the profile section: errors that say how to fix them ----------------

/// The problems of `text`, which must not load.
fn problems_of(text: &str) -> Vec<String> {
    Profile::from_yaml(text)
        .expect_err("the profile should be refused")
        .problems()
        .to_vec()
}

#[test]
fn profile_section_a_misspelt_field_gets_the_nearest_valid_name() {
    for (from, to, wanted) in [
        (
            "recovery_bound: 5m",
            "recovry_bound: 5m",
            "did you mean `recovery_bound`?",
        ),
        ("window: 10s", "windw: 10s", "did you mean `trip.window`?"),
        (
            "probe_budget: 2",
            "probe_budgt: 2",
            "did you mean `half_open.probe_budget`?",
        ),
        (
            "kind: degraded",
            "knd: degraded",
            "did you mean `fallback.kind`?",
        ),
    ] {
        let problems = problems_of(&GOOD.replacen(from, to, 1));
        assert!(
            problems.iter().any(|p| p.contains(wanted)),
            "`{to}`: {problems:?} should say {wanted}"
        );
    }
}

#[test]
fn profile_section_a_field_at_the_wrong_level_is_told_the_level_it_belongs_to() {
    for (from, to, wanted) in [
        (
            "    recovery_bound: 5m\n",
            "    recovery_bound: 5m\n    slow_call: 2s\n",
            "`slow_call` belongs under `trip` (`trip.slow_call`)",
        ),
        (
            "    recovery_bound: 5m\n",
            "    recovery_bound: 5m\n    probe_budget: 2\n",
            "`probe_budget` belongs under `half_open`",
        ),
        (
            "      slow_call: 2s\n",
            "      slow_call: 2s\n      open_duration: 30s\n",
            "`open_duration` belongs directly under the dependency's name",
        ),
    ] {
        let problems = problems_of(&GOOD.replacen(from, to, 1));
        let [problem] = problems.as_slice() else {
            panic!("{problems:?}")
        };
        assert!(problem.contains(wanted), "{problem} should say {wanted}");
    }
}

#[test]
fn profile_section_every_problem_is_listed_once_with_one_position_in_the_profiles_words() {
    let text = GOOD
        .replacen("recovery_bound: 5m", "recovry_bound: 5m", 1)
        .replacen("probe_budget: 2", "probe_budget: two", 1)
        .replacen("max_tenants: 10000", "max_tenants: [1]", 1)
        .replacen("min_calls: 20", "min_calls: 0", 1)
        .replacen("max_staleness: 10m", "max_staleness: soon", 1);
    let problems = problems_of(&text);
    // payments_client: the unknown field, the probe budget, max_tenants,
    // and recovery_bound missing; email_client: min_calls; catalog_client:
    // max_staleness.
    assert_eq!(problems.len(), 6, "{problems:#?}");
    for (problem, dep) in problems.iter().zip([
        "payments_client",
        "payments_client",
        "payments_client",
        "payments_client",
        "email_client",
        "catalog_client",
    ]) {
        assert!(
            problem.starts_with(&format!("dependency `{dep}`: ")),
            "{problem}"
        );
        assert_eq!(problem.matches(dep).count(), 1, "{problem}");
        assert_eq!(problem.matches(" at line ").count(), 1, "{problem}");
        for parser_word in ["i64", "u32", "f64", "struct", "invalid type", "expected"] {
            assert!(
                !problem.contains(parser_word),
                "{problem}: says `{parser_word}`"
            );
        }
    }
    assert!(
        problems[0].contains("at line 16 column 5"),
        "{}",
        problems[0]
    );
}

#[test]
fn profile_section_a_repeated_field_or_dependency_is_named_with_its_position() {
    let problems = problems_of(&GOOD.replacen(
        "    open_duration: 15s\n",
        "    open_duration: 15s\n    open_duration: 20s\n",
        1,
    ));
    assert_eq!(
        problems,
        ["dependency `email_client`: field `open_duration` is given twice: keep one at line 22 column 5"]
    );
    let twice = format!("{GOOD}  email_client:\n    isolation: global\n");
    let problems = problems_of(&twice);
    assert_eq!(
        problems,
        ["dependency `email_client` is declared twice (first at line 18 column 3) at line 32 column 3"]
    );
}

#[test]
fn profile_section_a_profile_is_at_most_16_mib() {
    let padding = "#".repeat(breakerbank::MAX_PROFILE_BYTES);
    let big = format!("{GOOD}{padding}\n");
    let problems = problems_of(&big);
    let [problem] = problems.as_slice() else {
        panic!("{problems:?}")
    };
    assert!(problem.contains("16 MiB"), "{problem}");
    let path = std::env::temp_dir().join(format!("bb-big-profile-{}.yaml", std::process::id()));
    std::fs::write(&path, &big).unwrap();
    let err = Profile::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(err.to_string().contains("16 MiB"), "{err}");
    // Just under the cap loads.
    let under = format!(
        "{GOOD}{}\n",
        &padding[..breakerbank::MAX_PROFILE_BYTES - GOOD.len() - 2]
    );
    Profile::from_yaml(&under).expect("a profile under the cap loads");
}

#[test]
fn profile_section_aliases_cannot_blow_the_profile_up() {
    let mut bomb = format!("{GOOD}x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n");
    for i in 1..10 {
        bomb.push_str(&format!(
            "x{i}: &x{i} [{}]\n",
            vec![format!("*x{}", i - 1); 10].join(", ")
        ));
    }
    let problems = problems_of(&bomb);
    assert!(problems[0].contains("expands to more than"), "{problems:?}");
}
