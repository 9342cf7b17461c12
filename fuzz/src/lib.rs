//! What the fuzz targets share: the fixed profile that `bank_ops` and
//! `c_abi` build their banks from, and its tenant pool.
//!
//! The profile is small on purpose: tables of two to four tenants for a
//! pool of five, so eviction and the overflow partition (C9) happen within
//! a few operations; probe budgets and success thresholds of one to three
//! (C7, C8); both trip policies (C5) on both isolations (C1); backoff on
//! two dependencies (C6). Durations are whole seconds with integer
//! multipliers, so the open period a harness expects is exact.

use std::time::Duration;

/// The profile of every bank the structured targets build.
pub const PROFILE: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 2}
    open_duration: 10s
    backoff: {multiplier: 2.0, max: 40s}
    half_open: {probe_budget: 2, success_threshold: 2}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 30s
    max_tenants: 3
  email_client:
    isolation: global
    trip: {failure_rate: 0.5, min_calls: 4, window: 10s}
    open_duration: 5s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 1m
  catalog_client:
    isolation: tenant
    trip: {failure_rate: 0.5, min_calls: 3, window: 5s}
    open_duration: 3s
    half_open: {probe_budget: 3, success_threshold: 3}
    fallback: {kind: stale, max_staleness: 1m}
    recovery_bound: 20s
    max_tenants: 2
  ledger_client:
    isolation: global
    trip: {consecutive_failures: 1}
    open_duration: 1s
    backoff: {multiplier: 3.0, max: 20s}
    half_open: {probe_budget: 2, success_threshold: 3}
    fallback: {kind: error, code: LEDGER_DOWN}
    recovery_bound: 10s
  search_client:
    isolation: tenant
    trip: {consecutive_failures: 3}
    open_duration: 2s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 15s
    max_tenants: 4
"#;

/// Tenant ids the targets draw from: more than any table holds.
pub const TENANTS: [&str; 5] = ["acme", "globex", "initech", "umbrella", "hooli"];

/// Clock steps that land exactly on, just before and just after the open
/// periods and window lengths of [`PROFILE`].
pub const STEPS: [Duration; 12] = [
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_millis(999),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(3),
    Duration::from_secs(5),
    Duration::from_nanos(9_999_999_999),
    Duration::from_secs(10),
    Duration::from_secs(20),
    Duration::from_secs(40),
    Duration::from_secs(3600),
];

/// The open period the contract expects after `retrips` re-trips from
/// half-open (C6): `open × multiplier^retrips`, capped at the backoff's
/// `max`, never below `open`. Exact for the integer multipliers of
/// [`PROFILE`].
pub fn expected_open_period(cfg: &breakerbank::DependencyConfig, retrips: u32) -> Duration {
    let open = cfg.open_duration;
    let Some(b) = cfg.backoff else {
        return open;
    };
    let mut d = open;
    for _ in 0..retrips {
        if d >= b.max {
            break;
        }
        // The profile's multipliers are whole numbers (checked in `bank_ops`).
        d = d.saturating_mul(b.multiplier as u32);
    }
    d.min(b.max).max(open)
}
