//! # breakerbank
//!
//! A bank of circuit breakers for outbound calls: one breaker per
//! downstream dependency and isolation partition (`global`, or one per
//! tenant), admission decided lock-free on the hot path, and an explicit
//! fallback whenever a call is not admitted.
//!
//! ```
//! use breakerbank::{Bank, Decision, ManualClock, Outcome, Profile, RejectReason, State};
//! use std::time::Duration;
//!
//! let profile = Profile::from_yaml(r#"
//! dependencies:
//!   payments_client:
//!     isolation: tenant
//!     trip: {consecutive_failures: 2}
//!     open_duration: 30s
//!     half_open: {probe_budget: 1, success_threshold: 1}
//!     fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
//!     recovery_bound: 5m
//! "#)?;
//! let clock = ManualClock::new();
//! let bank = Bank::with_clock(profile, clock.clone());
//! let payments = bank.dependency("payments_client").expect("declared above");
//!
//! // Two failures for tenant acme trip acme's breaker only.
//! for _ in 0..2 {
//!     if let Decision::Admitted(p) = payments.admit(Some("acme"), None)? {
//!         p.record(Outcome::Failure);
//!     }
//! }
//! assert_eq!(payments.state(Some("acme"))?, State::Open);
//! assert_eq!(payments.state(Some("globex"))?, State::Closed);
//! match payments.admit(Some("acme"), None)? {
//!     Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
//!     Decision::Admitted(_) => unreachable!("open"),
//! }
//!
//! // After the open period one probe goes through; its success closes.
//! clock.advance(Duration::from_secs(30));
//! match payments.admit(Some("acme"), None)? {
//!     Decision::Admitted(p) => { assert!(p.is_probe()); p.record(Outcome::Success) }
//!     Decision::Rejected(r) => unreachable!("{r:?}"),
//! }
//! assert_eq!(payments.state(Some("acme"))?, State::Closed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Cost on the healthy path
//! - `consecutive_failures`: admit is one atomic load; recording a success
//!   is one load, and a write only when failures were counted. No clock read.
//! - `failure_rate`: every record reads the coarse clock (one load) and
//!   counts into one window bucket: a plain load and store in the calling
//!   thread's own copy of a global window (one per core), a
//!   compare-and-swap otherwise.
//! - an open breaker's refusal: one load of the word, one of its open-until,
//!   one of the coarse clock (refreshed every millisecond by a background
//!   thread that runs only while refusals need it), and the refusal count
//!   (a plain load and store in the thread's own stripe for a global
//!   breaker; a locked add otherwise).
//! - `slow_call`: two clock reads per call (admit and record).
//! - tenant isolation: the id's key words (the id itself up to 15 bytes,
//!   else a keyed SipHash-1-3 fingerprint), their hash, one line of the
//!   tenant index, and the partition, which confirms the key words; the
//!   first call after an index miss takes the shard lookup (an epoch pin).
//!
//! The contract's clauses (C1…C16) are cited in the docs and tests.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations)]

mod bank;
mod call;
pub mod clock;
mod dependency;
mod events;
mod fallback;
pub mod fork;
mod metrics;
mod outcome;
mod partition;
mod profile;
mod state;
mod sync;
mod table;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "tracing")]
pub mod tracing;
mod window;

pub use bank::Bank;
pub use call::{
    Begun, CallError, CallOptions, Classifier, Ended, NotServed, Raw, Recording, Refused, Running,
};
pub use clock::{Clock, Instant, ManualClock, MonotonicClock};
pub use dependency::{Decision, Dependency, HeldPermit, Inspection, Permit, RawPermit, Stuck};
pub use events::{Event, EventKind, EVENT_QUEUE};
pub use fallback::{
    DependencyUnavailable, Fallback, FallbackKind, PartitionName, UnavailableRef, Unserved,
    STALE_CACHE_CAPACITY,
};
pub use metrics::{
    Calls, DependencyMetrics, DependencyTotals, Histogram, Metric, MetricValue, MetricsSnapshot,
    PartitionMetrics, DURATION_BUCKETS, METRICS, OPENMETRICS_CONTENT_TYPE,
};
pub use outcome::{
    tenant_text, AdmitError, Outcome, RejectReason, Rejection, State, TenantProblem,
    MAX_TENANT_LEN, RESERVED_TENANT_IDS,
};
/// The lazily installed part's auto-trait bounds, checked from outside
/// by its doc tests (see `sync.rs`); not API.
#[doc(hidden)]
pub use sync::Installed;

/// Bytes of one tenant slot in a tenant table, which has two a tenant:
/// what the memory figures are made of (C9).
pub use partition::PARTITION_BYTES;
pub use profile::{
    Advice, AdviceKind, Backoff, ConfigError, DependencyConfig, Isolation, Mode, PartitionSeries,
    Profile, Recovery, Slo, TripPolicy, DEFAULT_MAX_TENANTS, DEFAULT_MEMORY_LIMIT, MAX_MAX_TENANTS,
    MAX_PROFILE_BYTES,
};
/// The YAML crate whose [`Value`](serde_yaml_ng::Value)
/// [`Profile::from_value`] takes, so a caller builds one with the same
/// version the core parses with.
pub use serde_yaml_ng;
/// The largest `consecutive_failures` and `success_threshold` a profile
/// may set: what the word's counter holds.
pub use state::word::MAX_COUNT;

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The user guide's Rust examples, compiled and run as doc tests (`make
/// docs-test` checks that every page with a `rust` block is here).
#[cfg(doctest)]
pub mod user_docs {
    #[doc = include_str!("../../docs/guide/dependencies.md")]
    pub struct Dependencies;
    #[doc = include_str!("../../docs/guide/fallbacks.md")]
    pub struct Fallbacks;
    #[doc = include_str!("../../docs/guide/probe-cycle.md")]
    pub struct ProbeCycle;
    #[doc = include_str!("../../docs/guide/deadlines.md")]
    pub struct Deadlines;
    #[doc = include_str!("../../docs/guide/rust.md")]
    pub struct Rust;
}
