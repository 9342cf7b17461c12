//! The value types of the ABI. Names and values are a public contract
//! (API.md, C section): variants are spelled here exactly as C sees them, and
//! an explicit value, once released, is never renumbered. New variants take
//! new values at the end.

use breakerbank::{FallbackKind, Outcome, RejectReason, State};
use std::ffi::c_void;

/// The result of every function. `BB_OK` is 0; on any other value the
/// calling thread's message is available from `bb_last_error`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum bb_status {
    /// Success: out-parameters were written.
    BB_OK = 0,
    /// A null or misaligned pointer, a bad length, invalid UTF-8, an unknown
    /// enum value, or a permit that was already recorded or never issued.
    BB_ERR_INVALID_ARGUMENT = 1,
    /// The YAML profile was rejected; the message names the dependency and field.
    BB_ERR_CONFIG = 2,
    /// No dependency with that name or id.
    BB_ERR_UNKNOWN_DEPENDENCY = 3,
    /// A tenant-scoped dependency was given no tenant (or an empty one).
    BB_ERR_TENANT_REQUIRED = 4,
    /// The buffer is smaller than the text; `*written` holds the size needed.
    BB_ERR_BUFFER_TOO_SMALL = 5,
    /// `bb_clock_advance` on a bank built without `manual_clock`.
    BB_ERR_NOT_MANUAL_CLOCK = 6,
    /// A bug inside breakerbank was caught at the boundary (nothing unwound
    /// into C); the message is in `bb_last_error`.
    BB_ERR_PANIC = 7,
    /// A tenant id longer than 256 bytes on a tenant-scoped dependency
    /// (C9): nothing was done or counted for it.
    BB_ERR_INVALID_TENANT = 8,
}

/// A breaker's state, from `bb_state`.
///
/// The C type is `bb_breaker_state` rather than `bb_state`: in C a typedef
/// and the function `bb_state` would share one namespace and collide. The
/// constants are API.md's.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum bb_breaker_state {
    /// Traffic flows; failures are counted.
    BB_STATE_CLOSED = 0,
    /// Tripped: calls get the fallback until the open period ends.
    BB_STATE_OPEN = 1,
    /// At most `probe_budget` probes in flight.
    BB_STATE_HALF_OPEN = 2,
    /// Isolated by an operator until `bb_reset`.
    BB_STATE_FORCED_OPEN = 3,
}

impl From<State> for bb_breaker_state {
    #[inline]
    fn from(s: State) -> Self {
        match s {
            State::Closed => Self::BB_STATE_CLOSED,
            State::Open => Self::BB_STATE_OPEN,
            State::HalfOpen => Self::BB_STATE_HALF_OPEN,
            State::ForcedOpen => Self::BB_STATE_FORCED_OPEN,
        }
    }
}

/// Why a call was not admitted (`BB_REASON_NONE` when it was).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum bb_reason {
    /// Admitted.
    BB_REASON_NONE = 0,
    /// The breaker is open; `retry_after_ns` says when it next admits a probe.
    BB_REASON_OPEN = 1,
    /// Half-open and every probe slot is taken.
    BB_REASON_PROBE_BUDGET = 2,
    /// Isolated by an operator.
    BB_REASON_FORCED_OPEN = 3,
    /// The deadline had already expired: no fallback hides it, nothing counted
    /// against the dependency.
    BB_REASON_DEADLINE_EXPIRED = 4,
}

impl From<RejectReason> for bb_reason {
    #[inline]
    fn from(r: RejectReason) -> Self {
        match r {
            RejectReason::Open => Self::BB_REASON_OPEN,
            RejectReason::ProbeBudget => Self::BB_REASON_PROBE_BUDGET,
            RejectReason::ForcedOpen => Self::BB_REASON_FORCED_OPEN,
            RejectReason::DeadlineExpired => Self::BB_REASON_DEADLINE_EXPIRED,
        }
    }
}

/// The fallback a rejected call must take, as declared in the profile (C3).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum bb_fallback_kind {
    /// Admitted, or a deadline expiry (which gets no fallback).
    BB_FALLBACK_NONE = 0,
    /// Serve the last good value for the key, no older than `max_staleness`.
    BB_FALLBACK_STALE = 1,
    /// Run the caller's degraded behaviour.
    BB_FALLBACK_DEGRADED = 2,
    /// Fail with the profile's error code (`bb_fallback_code`).
    BB_FALLBACK_ERROR = 3,
}

impl From<FallbackKind> for bb_fallback_kind {
    #[inline]
    fn from(k: FallbackKind) -> Self {
        match k {
            FallbackKind::Stale => Self::BB_FALLBACK_STALE,
            FallbackKind::Degraded => Self::BB_FALLBACK_DEGRADED,
            FallbackKind::Error => Self::BB_FALLBACK_ERROR,
        }
    }
}

/// The outcome of an admitted call, given to `bb_record`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum bb_outcome {
    /// The dependency answered well.
    BB_OUTCOME_SUCCESS = 0,
    /// The dependency failed (even if the deadline also expired, C10).
    BB_OUTCOME_FAILURE = 1,
    /// The caller gave up or its deadline expired before the dependency
    /// answered: neither failure nor success; returns a probe slot.
    BB_OUTCOME_CANCELLED = 2,
}

/// How an outcome crosses the boundary: C may pass any `uint32_t`, and a
/// Rust enum holding an unknown value would be undefined behaviour, so
/// `bb_record` takes the raw number and checks it. It is spelled `bb_outcome`
/// in the header (cbindgen.toml renames it and does not emit it).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct bb_outcome_raw(pub u32);

impl bb_outcome_raw {
    /// The outcome, or `None` for a value that is not a `bb_outcome`.
    #[inline]
    pub(crate) fn decode(self) -> Option<Outcome> {
        match self.0 {
            0 => Some(Outcome::Success),
            1 => Some(Outcome::Failure),
            2 => Some(Outcome::Cancelled),
            _ => None,
        }
    }
}

impl From<bb_outcome> for bb_outcome_raw {
    #[inline]
    fn from(o: bb_outcome) -> Self {
        bb_outcome_raw(o as u32)
    }
}

/// How a `bool` crosses from C into Rust: C stores one byte, a binding in
/// another language may store any byte there, and a Rust `bool` holding
/// anything but 0 or 1 is undefined behaviour. So what C writes and Rust
/// reads (`bb_bank_from_yaml`'s `manual_clock`) is this
/// byte, spelled `bool` in the header (cbindgen.toml renames it and does not
/// emit it); breakerbank itself writes only 0 and 1.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct bb_bool_raw(pub u8);

impl bb_bool_raw {
    /// Any byte but 0 reads as true, as C reads a `bool` it did not write.
    #[inline]
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for bb_bool_raw {
    #[inline]
    fn from(b: bool) -> Self {
        bb_bool_raw(u8::from(b))
    }
}

/// An admitted call's permit, handed back to `bb_record` exactly once.
///
/// 16 opaque bytes: no field is API, and nothing to allocate or free.
/// Everything `bb_record` needs stays in the bank, so the permit only
/// names it: a copy recorded again, a permit with any byte altered, one
/// made up, or one another bank issued, is `BB_ERR_INVALID_ARGUMENT` and
/// changes nothing (or, in the race `bb_record` describes, a no-op). A
/// permit that is never recorded keeps a probe slot of a half-open
/// breaker taken until the dependency's `probe_timeout`: give up with
/// `BB_OUTCOME_CANCELLED`. Whether the call is a probe is
/// `bb_decision.probe`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct bb_permit {
    /// breakerbank's; all zero in a decision that admitted nothing.
    pub opaque: [u64; 2],
}

/// The answer of `bb_admit` (and of `bb_call`).
///
/// Admitted: `admitted` is true, `probe` says whether the call is a
/// half-open probe (C7), `permit` must be recorded once with `bb_record`
/// (`bb_call` records it itself and leaves `permit` all zero), `reason` is
/// `BB_REASON_NONE` and `fallback` is `BB_FALLBACK_NONE`. Not admitted:
/// `reason` says why and `fallback` is the dependency's declared fallback
/// to take instead (none for `BB_REASON_DEADLINE_EXPIRED`); `permit` is all
/// zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct bb_decision {
    /// The call may go to the dependency.
    pub admitted: bool,
    /// The call is a half-open probe.
    pub probe: bool,
    /// Why it was not admitted.
    pub reason: bb_reason,
    /// What to do instead.
    pub fallback: bb_fallback_kind,
    /// For `BB_REASON_OPEN`: ns until the breaker next admits a probe;
    /// 0 otherwise (and for "now").
    pub retry_after_ns: u64,
    /// The permit to record (`bb_admit`, admitted only).
    pub permit: bb_permit,
}

/// The caller's function that `bb_call` runs once admitted, on the
/// calling thread: `ctx` is `bb_call`'s, `probe` says whether the call is
/// a half-open probe. It returns the call's outcome; a value outside
/// `bb_outcome` is recorded as `BB_OUTCOME_CANCELLED` and `bb_call`
/// returns `BB_ERR_INVALID_ARGUMENT`.
///
/// It must return normally: it must not unwind (a C++ exception, a Rust
/// panic) or `longjmp` out of `bb_call` (breakerbank's frames would be
/// skipped: undefined behaviour, and the call never recorded). It may call
/// any `bb_*` function, `bb_call` included, except `bb_bank_free` on the
/// bank it runs under.
pub type bb_call_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, probe: bool) -> bb_outcome_raw>;

/// One breaker as `bb_inspect` read it (C18): every field from one load of
/// its state word, the open-until and counters beside it. A plain value
/// struct: nothing to free.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct bb_inspection {
    /// The state an admission would find now: an open breaker whose open
    /// period has ended reads `BB_STATE_HALF_OPEN`.
    pub state: bb_breaker_state,
    /// Closed: failures counted toward the trip (consecutive failures;
    /// under `failure_rate`, the failures in the current window). 0 in
    /// every other state.
    pub consecutive_failures: u32,
    /// Half-open: successful probes of this half-open episode; else 0.
    pub half_open_successes: u32,
    /// Probe permits holding a slot, earlier half-open episodes' included.
    pub probes_in_flight: u32,
    /// Re-trips from half-open since the last close (the backoff exponent).
    pub retrips: u32,
    /// When the current episode began, ns on the bank's clock: the trip
    /// (open, half-open), the force (forced open), the last close or reset
    /// (closed); 0, the start of the bank's clock, for a partition that
    /// has seen no transition.
    pub since_ns: u64,
    /// Whether `retry_after_ns` holds a value: true exactly when `state`
    /// is `BB_STATE_OPEN`.
    pub has_retry_after: bool,
    /// Open: ns until the breaker next admits a probe; 0 when
    /// `has_retry_after` is false.
    pub retry_after_ns: u64,
    /// Closed under `failure_rate`: the calls in the current window, the
    /// ones its rate is taken over (C5). 0 under `consecutive_failures`,
    /// which keeps no window, and in every other state.
    pub window_calls: u32,
    /// Closed under `failure_rate`: the failures among `window_calls`;
    /// else 0.
    pub window_failures: u32,
}
