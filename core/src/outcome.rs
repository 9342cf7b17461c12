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

/// The partition names no tenant may take (C9): the global partition's,
/// the overflow's, and `*`, which names every partition (the per-dependency
/// totals of a snapshot, an action on every partition, a reload's event).
pub const RESERVED_TENANT_IDS: [&str; 3] = ["global", "<overflow>", "*"];

/// What is wrong with a tenant id (C9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantProblem {
    /// Longer than [`MAX_TENANT_LEN`] bytes.
    TooLong {
        /// The length given, in bytes.
        len: usize,
    },
    /// It holds a control character (Unicode category Cc: U+0000 to
    /// U+001F, U+007F to U+009F; NUL included).
    ControlCharacter {
        /// The character.
        character: char,
        /// Its offset, in bytes.
        at: usize,
    },
    /// Its bytes are not valid UTF-8 (a C caller's bytes, or a lone
    /// surrogate from Python).
    NotUtf8 {
        /// The offset of the first byte that is not, in bytes.
        at: usize,
    },
    /// It is one of [`RESERVED_TENANT_IDS`].
    Reserved {
        /// The reserved name it is.
        name: &'static str,
    },
}

impl TenantProblem {
    /// The problem of `tenant`, a non-empty id, if it has one: the one
    /// place C9's rule for a tenant id's text is written.
    pub(crate) fn of(tenant: &str) -> Option<TenantProblem> {
        if tenant.len() > MAX_TENANT_LEN {
            return Some(TenantProblem::TooLong { len: tenant.len() });
        }
        if let Some(&name) = RESERVED_TENANT_IDS.iter().find(|&&r| r == tenant) {
            return Some(TenantProblem::Reserved { name });
        }
        // Printable ASCII, the usual id, in one pass over the bytes.
        if tenant.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return None;
        }
        tenant
            .char_indices()
            .find(|(_, c)| c.is_control())
            .map(|(at, character)| TenantProblem::ControlCharacter { character, at })
    }
}

impl fmt::Display for TenantProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TenantProblem::TooLong { len } => write!(
                f,
                "a tenant id is 1 to {MAX_TENANT_LEN} bytes of UTF-8; this one is {len} bytes"
            ),
            TenantProblem::ControlCharacter { character, at } => write!(
                f,
                "a tenant id holds no control character; this one has {character:?} (U+{:04X}) at byte {at}",
                u32::from(*character)
            ),
            TenantProblem::NotUtf8 { at } => write!(
                f,
                "a tenant id is UTF-8 text; this one is not valid UTF-8 from byte {at}"
            ),
            TenantProblem::Reserved { name } => write!(
                f,
                "`{name}` is a reserved partition name ({}), not a tenant id",
                RESERVED_TENANT_IDS.map(|r| format!("`{r}`")).join(", ")
            ),
        }
    }
}

/// A tenant id given as bytes (a C caller's, or a Python string's encoded
/// with `surrogatepass`), as text: bytes that are not UTF-8 are
/// [`AdmitError::InvalidTenant`] with [`TenantProblem::NotUtf8`]. The text
/// is then checked as every tenant id is, when a dependency takes it.
pub fn tenant_text(bytes: &[u8]) -> Result<&str, AdmitError> {
    std::str::from_utf8(bytes).map_err(|e| AdmitError::InvalidTenant {
        problem: TenantProblem::NotUtf8 {
            at: e.valid_up_to(),
        },
    })
}

/// Why a tenant-scoped dependency refused the tenant it was given, before
/// any partition was looked at (nothing is counted for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// `None` or `Some("")` on a tenant-scoped dependency; it never guesses.
    TenantRequired,
    /// A tenant id that names no partition (C9): too long, holding a
    /// control character, not UTF-8, or a reserved partition name.
    InvalidTenant {
        /// What is wrong with it.
        problem: TenantProblem,
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
            AdmitError::InvalidTenant { problem } => write!(f, "invalid tenant id: {problem}"),
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
