//! `check`'s advice (C21): the profile held against each dependency's
//! `slo`, and the open durations that look copied rather than sized. A
//! profile with advice is valid; the advice says what to change and why.

use super::{DependencyConfig, Profile};
use std::fmt;
use std::time::Duration;

/// How far a duration may be from what the SLO implies before `check`
/// says so: a factor of 2 either way. Within it, only a replay of
/// outages (`tune`) can tell which value is better.
const FAR: u32 = 2;

/// Open durations other libraries default to, which profiles copy: each
/// with the libraries it comes from.
const WELL_KNOWN: [(Duration, &str); 2] = [
    (
        Duration::from_secs(60),
        "resilience4j's `waitDurationInOpenState` and pybreaker's `reset_timeout`",
    ),
    (
        Duration::from_secs(5),
        "Polly's `BreakDuration` and Hystrix's `sleepWindowInMilliseconds`",
    ),
];

/// What a piece of advice is about (C21).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdviceKind {
    /// `slo.latency` is declared but `trip.slow_call` is not: a dependency
    /// that answers slowly never trips the breaker.
    SlowCallMissing,
    /// `trip.slow_call` is more than twice `slo.latency`.
    SlowCallAboveLatency,
    /// `open_duration` is less than half or more than twice
    /// `slo.recovery.typical`.
    OpenDurationFarFromRecovery,
    /// `recovery_bound` is below `slo.recovery.worst`.
    RecoveryBoundBelowWorst,
    /// The backoff's open period cannot grow to `slo.recovery.worst`
    /// (`backoff.max` below it, or a multiplier of 1).
    BackoffCapBelowWorst,
    /// No backoff while `slo.recovery.worst` is more than twice
    /// `open_duration`.
    BackoffMissing,
    /// Every dependency has the same `open_duration` and not every one
    /// declares `slo.recovery`.
    SharedOpenDuration,
    /// `open_duration` is another library's default and no
    /// `slo.recovery` says so.
    WellKnownDefault,
}

impl AdviceKind {
    /// The kind in snake case, as the command line's JSON and Python name
    /// it (`open_duration_far_from_recovery`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdviceKind::SlowCallMissing => "slow_call_missing",
            AdviceKind::SlowCallAboveLatency => "slow_call_above_latency",
            AdviceKind::OpenDurationFarFromRecovery => "open_duration_far_from_recovery",
            AdviceKind::RecoveryBoundBelowWorst => "recovery_bound_below_worst",
            AdviceKind::BackoffCapBelowWorst => "backoff_cap_below_worst",
            AdviceKind::BackoffMissing => "backoff_missing",
            AdviceKind::SharedOpenDuration => "shared_open_duration",
            AdviceKind::WellKnownDefault => "well_known_default",
        }
    }
}

/// One piece of `check`'s advice (C21): which field to change, to what,
/// and why. Displayed as one sentence naming the dependency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advice {
    /// The dependency it concerns; `None` for advice about the profile as
    /// a whole (one `open_duration` shared by every dependency).
    pub dependency: Option<String>,
    /// The field to change, as the profile spells it (`trip.slow_call`).
    pub field: &'static str,
    /// What the advice is about.
    pub kind: AdviceKind,
    /// The value to set, where one follows from the SLO.
    pub suggested: Option<Duration>,
    /// What to change and why, in the profile's words.
    message: String,
}

impl Advice {
    /// What to change and why, without the dependency's name.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.dependency {
            Some(dep) => write!(f, "dependency `{dep}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A duration as the profile writes it (`1m`, `1s 600ms`).
fn show(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

/// `d` times `k`, saturating.
fn times(d: Duration, k: u32) -> Duration {
    d.saturating_mul(k)
}

impl Profile {
    /// `check`'s advice (C21): each dependency's durations held against
    /// its `slo`, and open durations that look copied from a default.
    /// Advice never makes a profile invalid; it says what to change and
    /// why. Empty for a profile sized from its SLO.
    ///
    /// ```
    /// use breakerbank::{AdviceKind, Profile};
    /// let profile = Profile::from_yaml(r#"
    /// dependencies:
    ///   email_client:
    ///     isolation: global
    ///     trip: {consecutive_failures: 5, slow_call: 1s}
    ///     open_duration: 10s
    ///     backoff: {multiplier: 2.0, max: 5m}
    ///     half_open: {probe_budget: 1, success_threshold: 1}
    ///     fallback: {kind: degraded}
    ///     recovery_bound: 10m
    ///     slo: {latency: 500ms, recovery: {typical: 1m, worst: 5m}}
    /// "#).unwrap();
    /// let advice = profile.advice();
    /// assert_eq!(advice.len(), 1);
    /// assert_eq!(advice[0].kind, AdviceKind::OpenDurationFarFromRecovery);
    /// assert_eq!(advice[0].field, "open_duration");
    /// ```
    pub fn advice(&self) -> Vec<Advice> {
        let mut out = Vec::new();
        for dep in &self.deps {
            advise(dep, &mut out);
        }
        shared_open_duration(&self.deps, &mut out);
        out
    }
}

/// The advice about one dependency, into `out`.
fn advise(dep: &DependencyConfig, out: &mut Vec<Advice>) {
    let mut push = |field, kind, suggested, message: String| {
        out.push(Advice {
            dependency: Some(dep.name.clone()),
            field,
            kind,
            suggested,
            message,
        });
    };
    let open = dep.open_duration;
    let latency = dep.slo.and_then(|s| s.latency);
    let recovery = dep.slo.and_then(|s| s.recovery);

    if let Some(latency) = latency {
        let slow = times(latency, FAR);
        match dep.slow_call {
            None => push(
                "trip.slow_call",
                AdviceKind::SlowCallMissing,
                Some(slow),
                format!(
                    "set `trip.slow_call` to about {} (twice `slo.latency`, {}): without it a dependency that stops answering in time but does not fail never trips the breaker, and every caller waits",
                    show(slow),
                    show(latency)
                ),
            ),
            Some(s) if s > slow => push(
                "trip.slow_call",
                AdviceKind::SlowCallAboveLatency,
                Some(slow),
                format!(
                    "lower `trip.slow_call` from {} to about {}: it is more than twice `slo.latency` ({}), so calls far slower than the dependency promises still count as successes",
                    show(s),
                    show(slow),
                    show(latency)
                ),
            ),
            Some(_) => {}
        }
    }

    if let Some(r) = recovery {
        let typical = r.typical;
        if times(open, FAR) < typical {
            push(
                "open_duration",
                AdviceKind::OpenDurationFarFromRecovery,
                Some(typical),
                format!(
                    "raise `open_duration` from {} towards `slo.recovery.typical` ({}): it is less than half of it, so a typical outage re-trips the breaker from half-open about {} times (it flaps, sending probes into the outage); `python -m breakerbank tune` weighs flaps against extra outage",
                    show(open),
                    show(typical),
                    typical.as_nanos() / open.as_nanos().max(1)
                ),
            );
        } else if open > times(typical, FAR) {
            push(
                "open_duration",
                AdviceKind::OpenDurationFarFromRecovery,
                Some(typical),
                format!(
                    "lower `open_duration` from {} towards `slo.recovery.typical` ({}): it is more than twice it, so after a typical outage the breaker stays open about {} after the dependency has recovered, refusing callers it could serve; `python -m breakerbank tune` weighs flaps against extra outage",
                    show(open),
                    show(typical),
                    show(open.saturating_sub(typical))
                ),
            );
        }

        if dep.recovery_bound < r.worst {
            push(
                "recovery_bound",
                AdviceKind::RecoveryBoundBelowWorst,
                Some(r.worst),
                format!(
                    "raise `recovery_bound` from {} to at least `slo.recovery.worst` ({}): an outage the dependency says it may have would count its breakers as stuck and call for a person",
                    show(dep.recovery_bound),
                    show(r.worst)
                ),
            );
        }

        match dep.backoff {
            Some(b) if b.multiplier <= 1.0 => push(
                "backoff.multiplier",
                AdviceKind::BackoffCapBelowWorst,
                None,
                format!(
                    "raise `backoff.multiplier` above 1: at 1 the open period never grows, so an outage as long as `slo.recovery.worst` ({}) re-trips the breaker about {} times",
                    show(r.worst),
                    r.worst.as_nanos() / open.as_nanos().max(1)
                ),
            ),
            Some(b) if b.max < r.worst => push(
                "backoff.max",
                AdviceKind::BackoffCapBelowWorst,
                Some(r.worst),
                format!(
                    "raise `backoff.max` from {} to `slo.recovery.worst` ({}): the open period stops growing at {}, so an outage as long as the worst keeps re-tripping the breaker every {}",
                    show(b.max),
                    show(r.worst),
                    show(b.max),
                    show(b.max)
                ),
            ),
            Some(_) => {}
            None if r.worst > times(open, FAR) => push(
                "backoff",
                AdviceKind::BackoffMissing,
                Some(r.worst),
                format!(
                    "add `backoff: {{multiplier: 2.0, max: {}}}`: without a backoff every open period is {}, so an outage as long as `slo.recovery.worst` ({}) re-trips the breaker about {} times",
                    show(r.worst),
                    show(open),
                    show(r.worst),
                    r.worst.as_nanos() / open.as_nanos().max(1)
                ),
            ),
            None => {}
        }
    } else if let Some((_, source)) = WELL_KNOWN.iter().find(|(d, _)| *d == open) {
        push(
            "open_duration",
            AdviceKind::WellKnownDefault,
            None,
            format!(
                "`open_duration: {}` is {source} default, and no `slo.recovery` says the dependency's outages last about that long: declare `slo: {{recovery: {{typical: …, worst: …}}}}` from its incident history and size `open_duration` from it (`python -m breakerbank tune`)",
                show(open)
            ),
        );
    }
}

/// The advice about one `open_duration` shared by every dependency, into
/// `out`: unless each declares `slo.recovery` (then each is judged on its
/// own), one value for all looks copied rather than sized.
fn shared_open_duration(deps: &[DependencyConfig], out: &mut Vec<Advice>) {
    let [first, rest @ ..] = deps else {
        return;
    };
    if rest.is_empty() || rest.iter().any(|d| d.open_duration != first.open_duration) {
        return;
    }
    if deps
        .iter()
        .all(|d| d.slo.is_some_and(|s| s.recovery.is_some()))
    {
        return;
    }
    let names: Vec<String> = deps.iter().map(|d| format!("`{}`", d.name)).collect();
    out.push(Advice {
        dependency: None,
        field: "open_duration",
        kind: AdviceKind::SharedOpenDuration,
        suggested: None,
        message: format!(
            "every dependency ({}) has `open_duration: {}`: one value for dependencies that recover differently looks copied rather than sized; declare each one's `slo.recovery` and size its `open_duration` from it",
            names.join(", "),
            show(first.open_duration)
        ),
    });
}
