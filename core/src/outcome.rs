//! What an admission and a call can come to: a breaker's state as callers
//! see it, rejections and their reasons, a call's outcome, and the errors
//! a tenant id can meet.

use crate::fallback::Fallback;
use crate::state::word::Phase;
use std::fmt;
use std::time::Duration;

/// The longest tenant id, in bytes of UTF-8 (C9): every output that names
/// partitions (metrics, Prometheus text, events) is bounded by it.
pub const MAX_TENANT_LEN: usize = 256;

/// Why a tenant-scoped dependency refused the tenant it was given, before
/// any partition was looked at (nothing is counted for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// `None` or `Some("")` on a tenant-scoped dependency; it never guesses.
    TenantRequired,
    /// A tenant id longer than [`MAX_TENANT_LEN`] bytes (C9).
    InvalidTenant {
        /// The length given, in bytes.
        len: usize,
    },
    /// The handle's dependency is no longer in the bank: a reload removed
    /// it, or started it afresh as a new dependency (a change of
    /// isolation, trip policy kind or `window`, or a `max_tenants` above
    /// its table's size, C20). Resolve the name again with
    /// [`Bank::dependency`](crate::Bank::dependency).
    UnknownDependency,
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdmitError::TenantRequired => {
                f.write_str("this dependency is tenant-scoped: a non-empty tenant id is required")
            }
            AdmitError::InvalidTenant { len } => write!(
                f,
                "a tenant id is 1 to {MAX_TENANT_LEN} bytes of UTF-8; this one is {len} bytes"
            ),
            AdmitError::UnknownDependency => f.write_str(
                "this dependency was removed from the bank's profile by a reload, or started afresh by one (its isolation, trip policy kind, window or table size changed): resolve it again by name",
            ),
        }
    }
}

impl std::error::Error for AdmitError {}

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The breaker is open.
    Open,
    /// Half-open and every probe slot is taken (C7).
    ProbeBudget,
    /// Forced open by an operator (C11).
    ForcedOpen,
    /// The caller's deadline had already expired (C10).
    DeadlineExpired,
}

impl RejectReason {
    /// `"open"`, `"probe_budget"`, `"forced_open"` or `"deadline_expired"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::ProbeBudget => "probe_budget",
            RejectReason::ForcedOpen => "forced_open",
            RejectReason::DeadlineExpired => "deadline_expired",
        }
    }

    /// Whether a call refused for this reason is served the dependency's
    /// fallback: every reason but an expired deadline, whose caller has
    /// given up and gets [`RejectReason::DeadlineExpired`] as its error
    /// (C10). The one place the rule is written.
    #[inline]
    pub fn serves_fallback(self) -> bool {
        self != RejectReason::DeadlineExpired
    }
}

impl Rejection<'_> {
    /// The fallback to serve for this refusal: the dependency's declared
    /// one, or none for an expired deadline (see
    /// [`RejectReason::serves_fallback`]).
    #[inline]
    pub fn fallback_to_serve(&self) -> Option<&Fallback> {
        self.reason.serves_fallback().then_some(self.fallback)
    }
}

/// A refused call and the fallback to serve instead.
#[derive(Clone, Copy, Debug)]
pub struct Rejection<'a> {
    /// Why.
    pub reason: RejectReason,
    /// The dependency's declared fallback.
    pub fallback: &'a Fallback,
    /// Time until the next probe can be admitted (for `Open`).
    pub retry_after: Option<Duration>,
}

/// The outcome of a call, recorded through its permit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency answered well.
    Success,
    /// The dependency failed (also past the deadline, if it had failed).
    Failure,
    /// The caller gave up or its deadline expired first: neither (C10).
    Cancelled,
}

impl Outcome {
    /// `"success"`, `"failure"` or `"cancelled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// The core's error rule for a call that returned an error: a failure
    /// of the dependency, whatever the error. The default classifier of
    /// [`Permit::finish`](crate::Permit::finish).
    #[inline(always)]
    pub fn of_error<E: ?Sized>(_: &E) -> Outcome {
        Outcome::Failure
    }
}

/// Breaker state as callers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls flow.
    Closed,
    /// Tripped; calls get the fallback.
    Open,
    /// Probing with a bounded budget.
    HalfOpen,
    /// Isolated by an operator until reset.
    ForcedOpen,
}

impl State {
    /// `"closed"`, `"open"`, `"half_open"` or `"forced_open"`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
        }
    }

    /// Every state, in order.
    pub const ALL: [State; 4] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
    ];

    pub(crate) fn from_phase(p: Phase) -> State {
        match p {
            Phase::Closed | Phase::Vacant | Phase::Pending => State::Closed,
            Phase::Open => State::Open,
            Phase::HalfOpen | Phase::Reclaiming | Phase::Checking => State::HalfOpen,
            Phase::ForcedOpen => State::ForcedOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c14_outcomes_and_states_are_named_as_api_md_names_them() {
        let outcomes =
            [Outcome::Success, Outcome::Failure, Outcome::Cancelled].map(Outcome::as_str);
        assert_eq!(outcomes, ["success", "failure", "cancelled"]);
        assert_eq!(
            State::ALL.map(State::as_str),
            ["closed", "open", "half_open", "forced_open"]
        );
        assert_eq!(Outcome::of_error(&"any error"), Outcome::Failure);
    }
}
