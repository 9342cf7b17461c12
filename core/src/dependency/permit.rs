//! Decisions and permits: the answer to an admission, the caller's right to
//! make one call and record it once (C13), and the packed answer the
//! out-of-line admission paths return.

use crate::dependency::*;
use crate::partition::Partition;
use crate::state::word::GEN_MASK;
use std::fmt;
use std::mem::ManuallyDrop;
use std::time::Duration;

/// A permit's fields, as the core passes them around (see [`RawPermit`]
/// for the form callers hold).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PermitData {
    /// The partition's slot in its dependency (0: global or overflow).
    pub(crate) slot: u32,
    /// The generation the permit belongs to (C13).
    pub(crate) generation: u64,
    /// Whether it holds a probe slot (C7).
    pub(crate) probe: bool,
    /// Admission time on the bank's clock, for `slow_call`; `u64::MAX`
    /// unless the dependency has `slow_call`.
    pub(crate) started_ns: u64,
}

/// A permit as plain data, for bindings that cannot hold a borrow:
/// [`Permit::into_raw`] makes one, [`Dependency::record_raw`] consumes it.
/// Exactly once by its type (C13): not `Copy`, not `Clone`, no public
/// fields, so safe code can neither record one twice nor make one up.
///
/// ```
/// # use breakerbank::{Bank, Decision, Outcome, Profile};
/// # let bank = Bank::new(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap());
/// let svc = bank.dependency("svc_client").unwrap();
/// let Decision::Admitted(p) = svc.admit(None, None).unwrap() else { panic!() };
/// let raw = p.into_raw(); // kept by a binding across a boundary
/// assert!(!raw.is_probe());
/// svc.record_raw(raw, Outcome::Success);
/// ```
///
/// Recording it twice does not compile:
///
/// ```compile_fail
/// # use breakerbank::{Bank, Decision, Outcome, Profile};
/// # let bank = Bank::new(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap());
/// # let svc = bank.dependency("svc_client").unwrap();
/// # let Decision::Admitted(p) = svc.admit(None, None).unwrap() else { panic!() };
/// let raw = p.into_raw();
/// svc.record_raw(raw, Outcome::Success);
/// svc.record_raw(raw, Outcome::Failure); // use of a moved value
/// ```
///
/// Nor does a copy, or one made up:
///
/// ```compile_fail
/// # use breakerbank::{Bank, Decision, Outcome, Profile};
/// # let bank = Bank::new(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap());
/// # let svc = bank.dependency("svc_client").unwrap();
/// # let Decision::Admitted(p) = svc.admit(None, None).unwrap() else { panic!() };
/// let raw = p.into_raw();
/// let copy = raw.clone(); // RawPermit is not Clone
/// svc.record_raw(copy, Outcome::Success);
/// ```
///
/// ```compile_fail
/// # use breakerbank::{Bank, Outcome, Profile, RawPermit};
/// # let bank = Bank::new(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap());
/// # let svc = bank.dependency("svc_client").unwrap();
/// let forged = RawPermit { slot: 0, generation: 0, probe: true, started_ns: 0 };
/// svc.record_raw(forged, Outcome::Success);
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RawPermit(pub(crate) PermitData);

impl RawPermit {
    /// The partition's slot in its dependency (0: global or overflow).
    pub fn slot(&self) -> u32 {
        self.0.slot
    }

    /// The generation the permit belongs to (C13).
    pub fn generation(&self) -> u64 {
        self.0.generation
    }

    /// Whether it holds a probe slot (C7).
    pub fn is_probe(&self) -> bool {
        self.0.probe
    }

    /// Admission time on the bank's clock (ns), for `slow_call`;
    /// `u64::MAX` unless the dependency has `slow_call`.
    pub fn started_ns(&self) -> u64 {
        self.0.started_ns
    }

    /// A permit rebuilt from its fields, for a binding that passed them
    /// through a boundary that cannot carry a Rust value (the C ABI).
    ///
    /// # Safety
    ///
    /// The fields must be those of one [`RawPermit`] that
    /// [`Permit::into_raw`] made on the dependency it will be recorded
    /// with, and it must be recorded at most once: a permit made up, or
    /// recorded twice, breaks the probe budget and the counts (C7, C13).
    /// Not memory safety: the contract the type otherwise enforces.
    #[doc(hidden)]
    pub unsafe fn from_parts(slot: u32, generation: u64, probe: bool, started_ns: u64) -> Self {
        RawPermit(PermitData {
            slot,
            generation,
            probe,
            started_ns,
        })
    }
}

pub(crate) const NOT_TIMED: u64 = u64::MAX;

/// An admission's answer in two words, so the out-of-line slow path
/// returns it in registers and the caller rebuilds the [`Decision`] in
/// registers too. (Returned as a `Decision`, it went through memory, and
/// the caller's copy of it, read wider than it was written, stalled on
/// store forwarding: most of a closed admit + record's cost.)
///
/// `bits`: slot in bits 0..21, kind in bits 21..24, probe in bit 24, and
/// the generation where the word keeps it (bits 25..64), so moving it
/// between the two is a mask. Slots fit in 21 bits: a table has two a
/// tenant and at most `MAX_MAX_TENANTS` (10^6) tenants. `nanos`: the permit's `started_ns`, or the
/// refusal's retry-after in nanoseconds (`u64::MAX`: none).
#[derive(Clone, Copy)]
pub(crate) struct PackedAnswer {
    bits: u64,
    nanos: u64,
}

pub(crate) enum AnswerKind {
    Admitted,
    Rejected(RejectReason),
    TenantRequired,
    InvalidTenant(TenantProblem),
    UnknownDependency,
}

/// The permit of a call admitted on a closed word of `generation` of the
/// partition at `slot`: never a probe, not timed.
#[inline(always)]
pub(crate) fn closed_permit(slot: u32, generation: u64) -> PermitData {
    PermitData {
        slot,
        generation,
        probe: false,
        started_ns: NOT_TIMED,
    }
}

impl PackedAnswer {
    const ADMITTED: u64 = 0;
    const OPEN: u64 = 1;
    const PROBE_BUDGET: u64 = 2;
    const FORCED_OPEN: u64 = 3;
    const DEADLINE: u64 = 4;
    const TENANT: u64 = 5;
    const INVALID_TENANT: u64 = 6;
    const UNKNOWN_DEPENDENCY: u64 = 7;
    const SLOT: u64 = (1 << 21) - 1;
    const KIND_SHIFT: u32 = 21;
    const KIND: u64 = 0b111;
    const PROBE: u64 = 1 << 24;
    const GEN_SHIFT: u32 = 25;
    const NONE: u64 = u64::MAX;

    pub(crate) const TENANT_REQUIRED: PackedAnswer = PackedAnswer {
        bits: Self::TENANT << Self::KIND_SHIFT,
        nanos: Self::NONE,
    };

    /// A refused tenant id, its problem in `nanos`: the kind in the top
    /// two bits, below them the length, the offset (and a control
    /// character's code point in the low 21 bits) or the reserved name's
    /// index.
    pub(crate) fn invalid_tenant(problem: TenantProblem) -> Self {
        const LOW: u64 = (1 << 62) - 1;
        let at = |at: usize| (at as u64).min(LOW >> 21);
        let nanos = match problem {
            TenantProblem::TooLong { len } => (len as u64).min(LOW),
            TenantProblem::ControlCharacter { character, at: a } => {
                1 << 62 | at(a) << 21 | u64::from(u32::from(character))
            }
            TenantProblem::NotUtf8 { at: a } => 2 << 62 | (a as u64).min(LOW),
            TenantProblem::Reserved { name } => {
                let i = RESERVED_TENANT_IDS.iter().position(|&r| r == name);
                3 << 62 | i.unwrap_or(0) as u64
            }
        };
        PackedAnswer {
            bits: Self::INVALID_TENANT << Self::KIND_SHIFT,
            nanos,
        }
    }

    /// The problem [`PackedAnswer::invalid_tenant`] packed.
    fn tenant_problem(self) -> TenantProblem {
        const LOW: u64 = (1 << 62) - 1;
        let low = self.nanos & LOW;
        match self.nanos >> 62 {
            0 => TenantProblem::TooLong { len: low as usize },
            1 => TenantProblem::ControlCharacter {
                character: char::from_u32((low & ((1 << 21) - 1)) as u32).unwrap_or('\0'),
                at: (low >> 21) as usize,
            },
            2 => TenantProblem::NotUtf8 { at: low as usize },
            _ => TenantProblem::Reserved {
                name: RESERVED_TENANT_IDS[(low as usize).min(RESERVED_TENANT_IDS.len() - 1)],
            },
        }
    }

    /// The answer for a tenant [`Dependency::tenant`] refused.
    pub(crate) fn refused_tenant(e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => Self::TENANT_REQUIRED,
            AdmitError::InvalidTenant { problem } => Self::invalid_tenant(problem),
            AdmitError::UnknownDependency => PackedAnswer {
                bits: Self::UNKNOWN_DEPENDENCY << Self::KIND_SHIFT,
                nanos: Self::NONE,
            },
        }
    }

    #[inline(always)]
    pub(crate) fn admitted(raw: PermitData) -> Self {
        PackedAnswer {
            bits: Self::ADMITTED << Self::KIND_SHIFT
                | if raw.probe { Self::PROBE } else { 0 }
                | ((raw.generation & GEN_MASK) << Self::GEN_SHIFT)
                | (u64::from(raw.slot) & Self::SLOT),
            nanos: raw.started_ns,
        }
    }

    #[inline(always)]
    pub(crate) fn rejected(reason: RejectReason, retry_after: Option<Duration>) -> Self {
        let kind = match reason {
            RejectReason::Open => Self::OPEN,
            RejectReason::ProbeBudget => Self::PROBE_BUDGET,
            RejectReason::ForcedOpen => Self::FORCED_OPEN,
            RejectReason::DeadlineExpired => Self::DEADLINE,
        };
        // Saturates at 584 years, one nanosecond short of "none".
        let nanos = retry_after.map_or(Self::NONE, |d| {
            u64::try_from(d.as_nanos()).map_or(Self::NONE - 1, |n| n.min(Self::NONE - 1))
        });
        PackedAnswer {
            bits: kind << Self::KIND_SHIFT,
            nanos,
        }
    }

    /// A refusal by an open breaker, retry after `retry_ns`.
    #[inline(always)]
    pub(crate) fn refused_open(retry_ns: u64) -> Self {
        PackedAnswer {
            bits: Self::OPEN << Self::KIND_SHIFT,
            nanos: retry_ns.min(Self::NONE - 1),
        }
    }

    #[inline(always)]
    pub(crate) fn kind(self) -> AnswerKind {
        match (self.bits >> Self::KIND_SHIFT) & Self::KIND {
            Self::ADMITTED => AnswerKind::Admitted,
            Self::OPEN => AnswerKind::Rejected(RejectReason::Open),
            Self::PROBE_BUDGET => AnswerKind::Rejected(RejectReason::ProbeBudget),
            Self::FORCED_OPEN => AnswerKind::Rejected(RejectReason::ForcedOpen),
            Self::DEADLINE => AnswerKind::Rejected(RejectReason::DeadlineExpired),
            Self::INVALID_TENANT => AnswerKind::InvalidTenant(self.tenant_problem()),
            Self::UNKNOWN_DEPENDENCY => AnswerKind::UnknownDependency,
            _ => AnswerKind::TenantRequired,
        }
    }

    #[inline(always)]
    pub(crate) fn raw(self) -> PermitData {
        PermitData {
            slot: (self.bits & Self::SLOT) as u32,
            generation: self.bits >> Self::GEN_SHIFT,
            probe: self.bits & Self::PROBE != 0,
            started_ns: self.nanos,
        }
    }

    #[inline(always)]
    pub(crate) fn retry_after(self) -> Option<Duration> {
        (self.nanos != Self::NONE).then(|| Duration::from_nanos(self.nanos))
    }
}

/// The answer to an admission.
#[derive(Debug)]
pub enum Decision<'a> {
    /// Go ahead; record the outcome through the permit.
    Admitted(Permit<'a>),
    /// Do not call; serve the fallback.
    Rejected(Rejection<'a>),
}

/// Permission to make one call. Record its outcome; dropping it unrecorded
/// records [`Outcome::Cancelled`] (C13).
pub struct Permit<'a> {
    pub(crate) dep: &'a Dependency,
    pub(crate) raw: PermitData,
    /// The partition `raw.slot` names, when the admission had it at hand,
    /// so recording need not find it again by slot (for a tenant, the
    /// table's arena bounds check and address on the call's critical path).
    pub(crate) part: Option<&'a Partition>,
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("dep", &self.dep)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

impl Permit<'_> {
    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.raw.probe
    }

    /// The generation this permit belongs to.
    pub fn generation(&self) -> u64 {
        self.raw.generation
    }

    /// Records the call's outcome.
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        // Consumed without Drop: no "done" flag to write and test, so a
        // permit stays in registers through an inlined admit + record.
        let this = ManuallyDrop::new(self);
        let _ = this.dep.record_fast(this.raw, this.part, outcome);
    }

    /// Records the outcome of the call this permit admitted, from what the
    /// call returned (C13): a value is a success, an error is what
    /// `classify` says it is (the caller's rule: [`Outcome::of_error`] for
    /// Rust's, where every error is a failure; Python's exception rule in
    /// its binding). Returns the outcome as counted: a success at least
    /// `slow_call` long is a failure (C5).
    #[inline(always)]
    pub fn finish<T, E>(
        self,
        result: &Result<T, E>,
        classify: impl FnOnce(&E) -> Outcome,
    ) -> Outcome {
        let outcome = match result {
            Ok(_) => Outcome::Success,
            Err(e) => classify(e),
        };
        let this = ManuallyDrop::new(self);
        this.dep.record_fast(this.raw, this.part, outcome)
    }

    /// The permit as plain data; the caller now owes exactly one
    /// [`Dependency::record_raw`] (nothing is recorded on drop).
    #[inline]
    pub fn into_raw(self) -> RawPermit {
        RawPermit(ManuallyDrop::new(self).raw)
    }
}

impl Drop for Permit<'_> {
    /// Only unrecorded permits are dropped: `record` and `into_raw` consume
    /// theirs without running this.
    fn drop(&mut self) {
        let _ = self.dep.record_data(self.raw, Outcome::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c13_answer_round_trips_every_permit_field() {
        for (slot, generation, probe, started_ns) in [
            (0, 0, false, NOT_TIMED),
            ((1 << 21) - 1, GEN_MASK, true, 0),
            (2_000_000, 1 << 30, false, 5),
            (7, 12345, true, 99),
        ] {
            let raw = PermitData {
                slot,
                generation,
                probe,
                started_ns,
            };
            let a = PackedAnswer::admitted(raw);
            assert!(matches!(a.kind(), AnswerKind::Admitted));
            assert_eq!(a.raw(), raw);
        }
    }

    #[test]
    fn c3_answer_round_trips_every_refusal() {
        for reason in [
            RejectReason::Open,
            RejectReason::ProbeBudget,
            RejectReason::ForcedOpen,
            RejectReason::DeadlineExpired,
        ] {
            for retry in [
                None,
                Some(Duration::ZERO),
                Some(Duration::from_millis(1500)),
            ] {
                let a = PackedAnswer::rejected(reason, retry);
                assert!(matches!(a.kind(), AnswerKind::Rejected(r) if r == reason));
                assert_eq!(a.retry_after(), retry);
            }
        }
        let huge = PackedAnswer::rejected(RejectReason::Open, Some(Duration::MAX));
        assert_eq!(huge.retry_after(), Some(Duration::from_nanos(u64::MAX - 1)));
        assert!(matches!(
            PackedAnswer::TENANT_REQUIRED.kind(),
            AnswerKind::TenantRequired
        ));
        for problem in [
            TenantProblem::TooLong { len: 1 << 20 },
            TenantProblem::ControlCharacter {
                character: '\u{9f}',
                at: 255,
            },
            TenantProblem::ControlCharacter {
                character: '\0',
                at: 0,
            },
            TenantProblem::NotUtf8 { at: 3 },
            TenantProblem::Reserved { name: "global" },
            TenantProblem::Reserved { name: "<overflow>" },
            TenantProblem::Reserved { name: "*" },
        ] {
            assert!(matches!(
                PackedAnswer::refused_tenant(AdmitError::InvalidTenant { problem }).kind(),
                AnswerKind::InvalidTenant(p) if p == problem
            ));
        }
    }
}
