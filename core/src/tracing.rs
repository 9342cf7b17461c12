//! Breaker events as [`tracing`](https://docs.rs/tracing) events (feature
//! `tracing`): subscribe [`emit`] to a bank, and every transition, reset,
//! forced open and stuck alert (C16) becomes a structured event with
//! target `breakerbank` and the fields
//!
//! | field        | value                                                          |
//! |--------------|----------------------------------------------------------------|
//! | `kind`       | the [`EventKind`]: `transition`, `reset`, `forced_open`, `stuck` |
//! | `dependency` | the dependency's name                                          |
//! | `partition`  | the tenant id, `global` or `<overflow>`                        |
//! | `from`, `to` | the states before and after (absent for a stuck alert)        |
//! | `reason`     | why: see [`reason`]                                            |
//! | `at_ns`      | when, in nanoseconds on the bank's clock                       |
//!
//! at level `WARN` for a breaker that opens (tripped, or forced open),
//! `ERROR` for a stuck alert, `INFO` otherwise.
//!
//! They are emitted from the bank's event dispatcher thread, like every
//! listener's work: never from the admission path, which only queues the
//! event (C16). So they reach the subscriber installed globally (the usual
//! `tracing_subscriber::fmt().init()`), not one set for a single thread
//! with `with_default`.
//!
//! ```
//! use breakerbank::{Bank, Profile};
//! let bank = Bank::new(Profile::from_yaml(r#"
//! dependencies:
//!   payments_client:
//!     isolation: tenant
//!     trip: {consecutive_failures: 5}
//!     open_duration: 30s
//!     half_open: {probe_budget: 1, success_threshold: 1}
//!     fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
//!     recovery_bound: 5m
//! "#).unwrap());
//! bank.subscribe(breakerbank::tracing::emit);
//! // WARN breakerbank: breaker forced open kind="forced_open"
//! //   dependency="payments_client" partition="acme" from="closed"
//! //   to="forced_open" reason="operator" at_ns=…
//! bank.dependency("payments_client").unwrap().force_open(Some("acme"));
//! ```

use crate::events::{Event, EventKind};
use crate::outcome::State;
use ::tracing::{event, Level};

/// Emits `event` as a `tracing` event (see the [module docs](self)). A
/// listener for [`Bank::subscribe`](crate::Bank::subscribe).
pub fn emit(event: &Event) {
    let (level, message) = describe(event);
    // A callsite's level is static: one per level used.
    macro_rules! at {
        ($level:expr) => {
            event!(
                target: "breakerbank",
                $level,
                kind = event.kind.as_str(),
                dependency = event.dependency.as_str(),
                partition = event.partition.as_str(),
                from = event.from.map(State::as_str),
                to = event.to.map(State::as_str),
                reason = reason(event),
                at_ns = event.at.as_nanos(),
                "{message}"
            )
        };
    }
    match level {
        Severity::Info => at!(Level::INFO),
        Severity::Warn => at!(Level::WARN),
        Severity::Error => at!(Level::ERROR),
    }
}

/// The `tracing` levels events are emitted at.
enum Severity {
    Info,
    Warn,
    Error,
}

/// An event's level and message. Exhaustive over [`EventKind`], with no
/// wildcard: a new kind of event does not compile until it is given one.
fn describe(event: &Event) -> (Severity, &'static str) {
    match event.kind {
        EventKind::Transition => match event.to {
            Some(State::Open) => (Severity::Warn, "breaker opened"),
            Some(State::HalfOpen) => (Severity::Info, "breaker half-opened"),
            Some(State::Closed) => (Severity::Info, "breaker closed"),
            Some(State::ForcedOpen) => (Severity::Warn, "breaker forced open"),
            None => (Severity::Info, "breaker changed state"),
        },
        EventKind::Reset => (Severity::Info, "breaker reset"),
        EventKind::ForcedOpen => (Severity::Warn, "breaker forced open"),
        EventKind::Stuck => (Severity::Error, "breaker stuck past its recovery bound"),
        EventKind::Reload => (Severity::Info, "profile reloaded"),
        EventKind::Trip => (Severity::Warn, "breaker tripped by an operator"),
        EventKind::HalfOpen => (Severity::Info, "breaker half-opened by an operator"),
        EventKind::WouldTrip => (
            Severity::Warn,
            "trip policy fired in observe mode; breaker left closed",
        ),
    }
}

/// Why the event happened, as its `reason` field says it:
///
/// | event                          | `reason`             |
/// |--------------------------------|----------------------|
/// | transition closed → open       | `trip_policy` (C5)   |
/// | transition half-open → open    | `probe_failed` (C8)  |
/// | transition open → half-open    | `open_period_ended` (C6) |
/// | transition half-open → closed  | `probes_succeeded` (C8) |
/// | reset, forced open             | `operator` (C11)     |
/// | trip, half-open                | `operator` (C19)     |
/// | stuck                          | `recovery_bound` (C15) |
/// | reload                         | `reload` (C20)       |
/// | would trip (observe mode)      | `trip_policy` (C22)  |
///
/// Exhaustive over [`EventKind`], with no wildcard, as [`emit`]'s level is.
pub fn reason(event: &Event) -> &'static str {
    match event.kind {
        EventKind::Transition => match (event.from, event.to) {
            (Some(State::Closed), Some(State::Open)) => "trip_policy",
            (Some(State::HalfOpen), Some(State::Open)) => "probe_failed",
            (Some(State::Open), Some(State::HalfOpen)) => "open_period_ended",
            (Some(State::HalfOpen), Some(State::Closed)) => "probes_succeeded",
            _ => "transition",
        },
        EventKind::Reset | EventKind::ForcedOpen | EventKind::Trip | EventKind::HalfOpen => {
            "operator"
        }
        EventKind::Stuck => "recovery_bound",
        EventKind::Reload => "reload",
        EventKind::WouldTrip => "trip_policy",
    }
}
