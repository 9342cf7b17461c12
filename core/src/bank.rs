//! The public face: [`Bank`], [`Dependency`], admission, permits, calls.

use crate::clock::Advanced;
use crate::clock::{Clock, Instant, ManualClock, MonotonicClock};
use crate::events::{Event, EventBus, EventKind};
use crate::fallback::{DependencyUnavailable, Fallback, StaleCache, STALE_CACHE_CAPACITY};
use crate::metrics::{
    bump, DependencyMetrics, Hot, MetricsSnapshot, PartitionMetrics, State, Stats,
};
use crate::partition::{Owner, Partition, GLOBAL, NO_OWNER, OVERFLOW};
use crate::profile::{ConfigError, DependencyConfig, Isolation, Profile, TripPolicy};
use crate::state::machine::{self, Admission, Policy, Recorded, Refusal, Transition, Verdict};
use crate::state::word::{Phase, Word, GEN_MASK};
use crate::sync::{epoch, AtomicBool, AtomicU64, CachePadded, Ordering, StdArc};
use crate::table::{Resolved, Table};
use crate::window::Window;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::sync::{OnceLock, Weak};
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
pub struct RawPermit(PermitData);

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

const NOT_TIMED: u64 = u64::MAX;

/// An admission's answer in two words, so the out-of-line slow path
/// returns it in registers and the caller rebuilds the [`Decision`] in
/// registers too. (Returned as a `Decision`, it went through memory, and
/// the caller's copy of it, read wider than it was written, stalled on
/// store forwarding: most of a closed admit + record's cost.)
///
/// `head`: slot in bits 0..21, kind in bits 21..24, probe in bit 24, and
/// the generation where the word keeps it (bits 25..64), so moving it
/// between the two is a mask. Slots fit in 21 bits: a table has two a
/// tenant and at most `MAX_MAX_TENANTS` (10^6) tenants. `tail`: the permit's `started_ns`, or the
/// refusal's retry-after in nanoseconds (`u64::MAX`: none).
#[derive(Clone, Copy)]
struct Answer {
    head: u64,
    tail: u64,
}

enum AnswerKind {
    Admitted,
    Rejected(RejectReason),
    TenantRequired,
    InvalidTenant(usize),
}

/// The permit of a call admitted on closed word `w` of the partition at
/// `slot`: never a probe, not timed.
#[inline(always)]
fn closed_permit(slot: u32, w: Word) -> PermitData {
    PermitData {
        slot,
        generation: w.generation(),
        probe: false,
        started_ns: NOT_TIMED,
    }
}

/// A pin for reading or bumping the counters of the partition at `slot`
/// (see [`Dependency::counters`]): none for slot 0, whose counters are
/// never replaced.
#[inline]
fn pin_for(slot: u32) -> Option<epoch::Guard> {
    (slot != 0).then(epoch::pin)
}

/// An outcome as the state machine takes it (before `slow_call` may turn
/// a success into a failure).
#[inline(always)]
fn verdict_of(outcome: Outcome) -> Verdict {
    match outcome {
        Outcome::Success => Verdict::Success,
        Outcome::Failure => Verdict::Failure,
        Outcome::Cancelled => Verdict::Cancelled,
    }
}

impl Answer {
    const ADMITTED: u64 = 0;
    const OPEN: u64 = 1;
    const PROBE_BUDGET: u64 = 2;
    const FORCED_OPEN: u64 = 3;
    const DEADLINE: u64 = 4;
    const TENANT: u64 = 5;
    const INVALID_TENANT: u64 = 6;
    const SLOT: u64 = (1 << 21) - 1;
    const KIND_SHIFT: u32 = 21;
    const KIND: u64 = 0b111;
    const PROBE: u64 = 1 << 24;
    const GEN_SHIFT: u32 = 25;
    const NONE: u64 = u64::MAX;

    const TENANT_REQUIRED: Answer = Answer {
        head: Self::TENANT << Self::KIND_SHIFT,
        tail: Self::NONE,
    };

    /// A refused tenant id, its length in `tail`.
    fn invalid_tenant(len: usize) -> Self {
        Answer {
            head: Self::INVALID_TENANT << Self::KIND_SHIFT,
            tail: len as u64,
        }
    }

    /// The answer for a tenant [`Dependency::tenant`] refused.
    fn refused_tenant(e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => Self::TENANT_REQUIRED,
            AdmitError::InvalidTenant { len } => Self::invalid_tenant(len),
        }
    }

    #[inline(always)]
    fn admitted(raw: PermitData) -> Self {
        Answer {
            head: Self::ADMITTED << Self::KIND_SHIFT
                | if raw.probe { Self::PROBE } else { 0 }
                | ((raw.generation & GEN_MASK) << Self::GEN_SHIFT)
                | (u64::from(raw.slot) & Self::SLOT),
            tail: raw.started_ns,
        }
    }

    #[inline(always)]
    fn rejected(reason: RejectReason, retry_after: Option<Duration>) -> Self {
        let kind = match reason {
            RejectReason::Open => Self::OPEN,
            RejectReason::ProbeBudget => Self::PROBE_BUDGET,
            RejectReason::ForcedOpen => Self::FORCED_OPEN,
            RejectReason::DeadlineExpired => Self::DEADLINE,
        };
        // Saturates at 584 years, one nanosecond short of "none".
        let tail = retry_after.map_or(Self::NONE, |d| {
            u64::try_from(d.as_nanos()).map_or(Self::NONE - 1, |n| n.min(Self::NONE - 1))
        });
        Answer {
            head: kind << Self::KIND_SHIFT,
            tail,
        }
    }

    /// A refusal by an open breaker, retry after `retry_ns`.
    #[inline(always)]
    fn refused_open(retry_ns: u64) -> Self {
        Answer {
            head: Self::OPEN << Self::KIND_SHIFT,
            tail: retry_ns.min(Self::NONE - 1),
        }
    }

    #[inline(always)]
    fn kind(self) -> AnswerKind {
        match (self.head >> Self::KIND_SHIFT) & Self::KIND {
            Self::ADMITTED => AnswerKind::Admitted,
            Self::OPEN => AnswerKind::Rejected(RejectReason::Open),
            Self::PROBE_BUDGET => AnswerKind::Rejected(RejectReason::ProbeBudget),
            Self::FORCED_OPEN => AnswerKind::Rejected(RejectReason::ForcedOpen),
            Self::DEADLINE => AnswerKind::Rejected(RejectReason::DeadlineExpired),
            Self::INVALID_TENANT => AnswerKind::InvalidTenant(self.tail as usize),
            _ => AnswerKind::TenantRequired,
        }
    }

    #[inline(always)]
    fn raw(self) -> PermitData {
        PermitData {
            slot: (self.head & Self::SLOT) as u32,
            generation: self.head >> Self::GEN_SHIFT,
            probe: self.head & Self::PROBE != 0,
            started_ns: self.tail,
        }
    }

    #[inline(always)]
    fn retry_after(self) -> Option<Duration> {
        (self.tail != Self::NONE).then(|| Duration::from_nanos(self.tail))
    }
}

/// Permission to make one call. Record its outcome; dropping it unrecorded
/// records [`Outcome::Cancelled`] (C13).
pub struct Permit<'a> {
    dep: &'a Dependency,
    raw: PermitData,
    /// The partition `raw.slot` names, when the admission had it at hand,
    /// so recording need not find it again by slot (for a tenant, the
    /// table's arena bounds check and address on the call's critical path).
    part: Option<&'a Partition>,
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
        this.dep.record_fast(this.raw, this.part, outcome);
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

/// The answer to an admission.
#[derive(Debug)]
pub enum Decision<'a> {
    /// Go ahead; record the outcome through the permit.
    Admitted(Permit<'a>),
    /// Do not call; serve the fallback.
    Rejected(Rejection<'a>),
}

/// What [`Dependency::call`] and friends return on error.
#[derive(Debug)]
pub enum CallError<E> {
    /// The call ran and failed with this error.
    Inner(E),
    /// Not admitted and the fallback could not serve (C4).
    Unavailable(DependencyUnavailable),
    /// The deadline had already expired (C10).
    DeadlineExpired,
    /// A tenant-scoped dependency was called without a tenant.
    TenantRequired,
    /// A tenant-scoped dependency was called with a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes (C9): nothing ran, nothing was counted.
    InvalidTenant {
        /// The length given, in bytes.
        len: usize,
    },
}

impl<E> From<AdmitError> for CallError<E> {
    fn from(e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => CallError::TenantRequired,
            AdmitError::InvalidTenant { len } => CallError::InvalidTenant { len },
        }
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Inner(e) => write!(f, "{e}"),
            CallError::Unavailable(u) => write!(f, "{u}"),
            CallError::DeadlineExpired => f.write_str("the call's deadline had already expired"),
            CallError::TenantRequired => fmt::Display::fmt(&AdmitError::TenantRequired, f),
            CallError::InvalidTenant { len } => {
                fmt::Display::fmt(&AdmitError::InvalidTenant { len: *len }, f)
            }
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for CallError<E> {}

/// Options of [`Dependency::call_with`]: the stale-cache key and a
/// degraded behaviour (returning `None` when it cannot serve).
pub struct CallOptions<'a, T> {
    /// Key of the value in the stale cache (`stale` fallbacks).
    pub cache_key: Option<&'a str>,
    /// The degraded behaviour (`degraded` fallbacks).
    pub degraded: Option<Box<dyn FnOnce() -> Option<T> + 'a>>,
}

impl<T> Default for CallOptions<'_, T> {
    fn default() -> Self {
        Self {
            cache_key: None,
            degraded: None,
        }
    }
}

impl<T> fmt::Debug for CallOptions<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("cache_key", &self.cache_key)
            .field("degraded", &self.degraded.is_some())
            .finish()
    }
}

/// A breaker open past its dependency's recovery bound (C15).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// The dependency.
    pub dependency: String,
    /// The partition.
    pub partition: String,
    /// Since the trip that began the episode.
    pub open_for: Duration,
}

/// A dependency's partitions as the cold paths walk them: the global one,
/// or a tenant table and its overflow partition.
enum Parts<'a> {
    Global(&'a Partition),
    Tenant(&'a Table, &'a Partition),
}

pub(crate) struct DepInner {
    /// `slow_call` is set: admissions read the clock.
    timed: bool,
    /// Global and not `timed`: a closed word admits on one load of `zero`.
    admit_fast: bool,
    /// Global, failure-rate policy, not `timed`, and a window whose buckets
    /// a coarse reading places: closed outcomes go to the window without
    /// the cell's CAS loop (see `record_windowed`).
    window_fast: bool,
    /// Consecutive policy and no `slow_call`: a closed success with no
    /// failures counted is a no-op, decidable with one load.
    quiet_success: bool,
    id: u32,
    config: DependencyConfig,
    policy: Policy,
    rate: Option<(f64, u64)>,
    clock: StdArc<dyn Clock>,
    /// The clock again when it is the system one: its coarse reading is
    /// then one inlined load, not a dynamic call.
    mono: Option<MonotonicClock>,
    /// Slot 0: the global partition, or a tenant-scoped dependency's
    /// overflow. Inline and found without a branch on the isolation, so
    /// the healthy global path is loads from one block.
    zero: CachePadded<Partition>,
    /// Slot 0's counters, for its life (a tenant slot's are its owner's:
    /// see [`Dependency::counters`]). A global partition's count its
    /// refusals in per-thread stripes: every caller meets the same open
    /// breaker.
    zero_stats: Stats,
    /// The tenant partitions (slots 1…), for tenant isolation.
    table: Option<Table>,
    stale: Option<StaleCache>,
    events: StdArc<EventBus>,
    sweeper: StdArc<Sweeper>,
    /// Bank-clock time (ns) from which the sweep has something to do for
    /// this dependency (an open period ending, an episode reaching its
    /// recovery bound); `u64::MAX`: nothing.
    sweep_due: AtomicU64,
}

/// Announces what must be announced whether or not anyone calls: open
/// periods that have ended (C14) and episodes past their recovery bound
/// (C15). On the system clock a thread, started at the first trip, sweeps
/// every [`SWEEP_EVERY`] and ends when the bank is gone; on a manual clock
/// the sweep runs each time the clock is advanced. Each dependency keeps
/// when it next has something due, so a sweep with nothing due costs a
/// load per dependency.
pub(crate) struct Sweeper {
    deps: OnceLock<Vec<Weak<DepInner>>>,
    started: AtomicBool,
    manual: bool,
}

/// How often the system clock's sweeper looks (C15 allows one second).
#[cfg(not(loom))]
const SWEEP_EVERY: Duration = Duration::from_millis(250);

impl Sweeper {
    fn sweep(&self) {
        for d in self.deps.get().into_iter().flatten() {
            if let Some(inner) = d.upgrade() {
                Dependency { inner }.sweep();
            }
        }
    }

    /// Something may fall due: on the system clock, make sure the thread runs.
    fn wake(self: &StdArc<Self>) {
        // Relaxed: one thread is started; a second would only sweep twice.
        if self.manual || self.started.swap(true, Ordering::Relaxed) {
            return;
        }
        #[cfg(not(loom))]
        {
            let weak = StdArc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("breakerbank-sweep".into())
                .spawn(move || loop {
                    std::thread::sleep(SWEEP_EVERY);
                    match weak.upgrade() {
                        Some(s) => s.sweep(),
                        None => return,
                    }
                });
            if spawned.is_err() {
                self.started.store(false, Ordering::Relaxed);
            }
        }
    }
}

impl Advanced for Sweeper {
    fn advanced(&self) {
        self.sweep();
    }
}

/// One dependency of a bank: resolve once with [`Bank::dependency`], clone
/// freely (an `Arc`), call on the hot path.
#[derive(Clone)]
pub struct Dependency {
    inner: StdArc<DepInner>,
}

impl fmt::Debug for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dependency")
            .field("name", &self.inner.config.name)
            .field("isolation", &self.inner.config.isolation)
            .finish()
    }
}

/// Where one admission goes.
#[derive(Clone, Copy)]
struct Target<'a> {
    slot: u32,
    part: &'a Partition,
    owner: Owner,
    overflow: bool,
    /// See `Resolved::made_closed`.
    made_closed: bool,
}

impl<'a> Target<'a> {
    /// The dependency's shared overflow partition (C9).
    fn overflow(zero: &'a Partition) -> Self {
        Target {
            slot: 0,
            part: zero,
            owner: NO_OWNER,
            overflow: true,
            made_closed: false,
        }
    }
}

impl Dependency {
    /// The dependency of `config`; a tenant table the allocator refuses is
    /// a [`ConfigError`] naming it (C9).
    fn try_new(
        id: u32,
        config: DependencyConfig,
        clock: StdArc<dyn Clock>,
        events: StdArc<EventBus>,
        sweeper: StdArc<Sweeper>,
    ) -> Result<Self, ConfigError> {
        let (consecutive, rate, window) = match config.trip {
            TripPolicy::ConsecutiveFailures(n) => (Some(n), None, None),
            TripPolicy::FailureRate {
                rate,
                min_calls,
                window,
            } => (None, Some((rate, u64::from(min_calls))), Some(window)),
        };
        let policy = Policy {
            consecutive_failures: consecutive,
            probe_budget: config.probe_budget,
            success_threshold: config.success_threshold,
            open_duration: config.open_duration,
            backoff: config.backoff.map(|b| (b.multiplier, b.max)),
            probe_timeout: config.probe_timeout,
        };
        // The global or overflow partition's window: shared by every caller
        // (an overflow one by every tenant that finds no room) and never
        // recycled, so it keeps per-thread copies.
        let zero_window = window.map(|w| Window::new(w, crate::window::window_stripes()));
        let (zero, zero_stats, table) = match config.isolation {
            Isolation::Global => (Partition::standalone(zero_window), Stats::striped(), None),
            Isolation::Tenant => (
                Partition::standalone(zero_window),
                Stats::default(),
                Some(Table::try_new(config.max_tenants, window).map_err(|e| {
                    ConfigError::one(format!(
                        "dependency `{}`: cannot allocate the partition table of its `max_tenants: {}` ({e}); lower `max_tenants` or give the process more memory",
                        config.name, config.max_tenants
                    ))
                })?),
            ),
        };
        let stale = match config.fallback {
            Fallback::Stale { max_staleness } => {
                Some(StaleCache::new(STALE_CACHE_CAPACITY, max_staleness))
            }
            _ => None,
        };
        Ok(Self {
            inner: StdArc::new(DepInner {
                timed: config.slow_call.is_some(),
                admit_fast: table.is_none() && config.slow_call.is_none(),
                window_fast: table.is_none()
                    && config.slow_call.is_none()
                    && zero.window().is_some_and(|w| w.coarse_ok()),
                quiet_success: consecutive.is_some() && config.slow_call.is_none(),
                id,
                config,
                policy,
                rate,
                mono: clock.as_monotonic().copied(),
                clock,
                zero: CachePadded::new(zero),
                zero_stats,
                table,
                stale,
                events,
                sweeper,
                sweep_due: AtomicU64::new(u64::MAX),
            }),
        })
    }

    /// The dependency's name.
    pub fn name(&self) -> &str {
        &self.inner.config.name
    }

    /// Its index in the bank (stable; what the C API calls its id).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// Whether each tenant has its own breaker.
    pub fn is_tenant_scoped(&self) -> bool {
        self.inner.config.isolation == Isolation::Tenant
    }

    /// The declared fallback.
    pub fn fallback(&self) -> &Fallback {
        &self.inner.config.fallback
    }

    /// The validated configuration.
    pub fn config(&self) -> &DependencyConfig {
        &self.inner.config
    }

    /// Calls at least this slow count as failures.
    pub fn slow_call(&self) -> Option<Duration> {
        self.inner.config.slow_call
    }

    /// Now, on the bank's clock.
    pub fn now(&self) -> Instant {
        self.inner.clock.now()
    }

    /// The bank clock's coarse reading ([`Clock::now_coarse`]).
    #[inline(always)]
    fn now_coarse(&self) -> Instant {
        match &self.inner.mono {
            Some(m) => m.recent(),
            None => self.inner.clock.now_coarse(),
        }
    }

    #[inline]
    fn parts(&self) -> Parts<'_> {
        match &self.inner.table {
            None => Parts::Global(&self.inner.zero),
            Some(t) => Parts::Tenant(t, &self.inner.zero),
        }
    }

    /// The tenant as this dependency takes it: none for a global one
    /// (which ignores it, whatever it is), else a non-empty id of at most
    /// [`MAX_TENANT_LEN`] bytes (C9). The one place the rule is applied.
    fn tenant<'t>(&self, tenant: Option<&'t str>) -> Result<Option<&'t str>, AdmitError> {
        match (self.parts(), tenant) {
            (Parts::Global(_), _) => Ok(None),
            (Parts::Tenant(..), Some(t)) if t.len() > MAX_TENANT_LEN => {
                Err(AdmitError::InvalidTenant { len: t.len() })
            }
            (Parts::Tenant(..), Some(t)) if !t.is_empty() => Ok(Some(t)),
            (Parts::Tenant(..), _) => Err(AdmitError::TenantRequired),
        }
    }

    /// Resolves (creating if needed) the partition for an admission.
    #[inline]
    fn target(&self, tenant: Option<&str>) -> Target<'_> {
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => Target {
                slot: 0,
                part: p,
                owner: NO_OWNER,
                overflow: false,
                made_closed: false,
            },
            (Parts::Tenant(t, zero), Some(name)) => {
                match t.get_or_insert_at(name, &|| self.now_coarse().as_nanos()) {
                    Some(Resolved {
                        slot,
                        part,
                        owner,
                        made_closed,
                    }) => {
                        part.touch(|| t.tick());
                        Target {
                            slot,
                            part,
                            owner,
                            overflow: false,
                            made_closed,
                        }
                    }
                    None => Target::overflow(zero),
                }
            }
            (Parts::Tenant(_, zero), None) => Target::overflow(zero),
        }
    }

    /// Resolves again after the tenant's slot was recycled under us. With
    /// a full table two new tenants can evict each other's fresh, idle
    /// partitions indefinitely (loom found it); after two losses the call
    /// goes to the overflow partition, so admission always finishes.
    fn retarget(&self, tenant: Option<&str>, lost: &mut u32) -> Target<'_> {
        *lost += 1;
        match self.parts() {
            Parts::Tenant(_, zero) if *lost > 2 => Target::overflow(zero),
            _ => self.target(tenant),
        }
    }

    #[inline]
    fn partition_by_slot(&self, slot: u32) -> Option<&Partition> {
        if slot == 0 {
            return Some(&self.inner.zero);
        }
        self.inner.table.as_ref()?.get(slot)
    }

    /// The counters a count for the owner of the partition at `slot` as
    /// of `generation` goes to (a generation the caller saw that owner's
    /// word at, or its permit's): a standalone partition's own at slot 0,
    /// else that owner's, or none once the slot holds a later owner's (a
    /// count of an evicted partition reaches no one: C9, C13). `pin` is
    /// [`pin_for`]`(slot)`.
    fn counters<'a>(
        &'a self,
        slot: u32,
        part: &'a Partition,
        generation: u64,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<&'a Stats> {
        if slot == 0 {
            return Some(&self.inner.zero_stats);
        }
        let (since, guard) = self.tenure_pinned(slot, pin)?;
        if since > generation {
            return None;
        }
        part.owner_stats(since, guard)
    }

    /// The counters of the partition at `slot` as its current owner has
    /// them, if it made any (for reading). `pin` as for
    /// [`Dependency::counters`].
    fn current_counters<'a>(
        &'a self,
        slot: u32,
        part: &'a Partition,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<&'a Stats> {
        if slot == 0 {
            return Some(&self.inner.zero_stats);
        }
        let (since, guard) = self.tenure_pinned(slot, pin)?;
        part.owner_stats_if_any(since, guard)
    }

    /// The current tenure of tenant slot `slot`, with the guard of `pin`
    /// to read its owner's counters under.
    fn tenure_pinned<'a>(
        &'a self,
        slot: u32,
        pin: &'a Option<epoch::Guard>,
    ) -> Option<(u64, &'a epoch::Guard)> {
        Some((self.inner.table.as_ref()?.tenure(slot), pin.as_ref()?))
    }

    /// The name of the partition at `slot` as of `generation`: none once
    /// the slot's tenure began after it (the owner then is gone).
    fn partition_name_at(&self, slot: u32, part: &Partition, generation: u64) -> Option<String> {
        match self.parts() {
            Parts::Global(_) => Some(GLOBAL.to_string()),
            Parts::Tenant(..) if slot == 0 => Some(OVERFLOW.to_string()),
            Parts::Tenant(t, _) => t.owner_name(slot, part, generation).map(|k| k.to_string()),
        }
    }

    /// Asks to make one call (C7, C10, C12).
    ///
    /// On a closed breaker this is one atomic load (plus the tenant lookup
    /// for tenant-scoped dependencies); it reads the clock only for a
    /// deadline, a `slow_call` policy, or an open breaker.
    ///
    /// ```
    /// use breakerbank::{Bank, Decision, Outcome, Profile};
    /// let bank = Bank::new(Profile::from_yaml(r#"
    /// dependencies:
    ///   payments_client:
    ///     isolation: tenant
    ///     trip: {consecutive_failures: 5}
    ///     open_duration: 30s
    ///     half_open: {probe_budget: 2, success_threshold: 3}
    ///     fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    ///     recovery_bound: 5m
    /// "#).unwrap());
    /// let payments = bank.dependency("payments_client").unwrap();
    /// match payments.admit(Some("acme"), None).unwrap() {
    ///     Decision::Admitted(permit) => permit.record(Outcome::Success),
    ///     Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
    /// };
    /// ```
    #[inline(always)]
    pub fn admit(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<Decision<'_>, AdmitError> {
        // A global breaker's common cases come from one load of its word,
        // with the decisions `machine::admit` makes for a closed word and
        // for an open one whose period is not over; a known tenant's the
        // same way from the word that confirmed its lookup. Each path
        // builds its decision itself: merged into one `Answer` first, the
        // admitted path paid for packing it and testing its kind again.
        // Always inlined: left to `#[inline]` this grew past LLVM's
        // threshold and returned its decision through memory (141 -> 181
        // instructions a tenant call; 130 inlined).
        if let (true, None) = (self.inner.admit_fast, deadline) {
            let p = &*self.inner.zero;
            let w = p.cell.load();
            if w.phase() == Phase::Closed {
                return Ok(self.admitted(closed_permit(0, w), Some(p)));
            }
            if w.phase() == Phase::Open {
                return self.decode(self.answer_open(p, w));
            }
        }
        if let (Some(t), Some(name), None) = (&self.inner.table, tenant, deadline) {
            if let Some(d) = self.admit_known(t, name) {
                return d;
            }
        }
        self.decode(self.admit_slow(tenant, deadline))
    }

    /// A tenant the index knows, decided on the word that confirmed the
    /// lookup as the global fast path decides: closed admits (unless
    /// `slow_call` times it), open refuses while the period runs. Anything
    /// else is `admit_slow`'s.
    #[inline(always)]
    fn admit_known<'t>(
        &'t self,
        t: &'t Table,
        tenant: &str,
    ) -> Option<Result<Decision<'t>, AdmitError>> {
        let (r, w) = t.lookup_known(tenant)?;
        if let Some(raw) = self.admit_closed(r.slot, w) {
            r.part.touch(|| t.tick());
            return Some(Ok(self.admitted(raw, Some(r.part))));
        }
        match w.phase() {
            Phase::Open => Some(self.decode(self.refuse_known(t, r.slot, r.part, w)?)),
            _ => None,
        }
    }

    /// An admitted call's decision; with the partition when a fast path
    /// resolved it (see `Permit::part`).
    #[inline(always)]
    fn admitted<'a>(&'a self, raw: PermitData, part: Option<&'a Partition>) -> Decision<'a> {
        Decision::Admitted(Permit {
            dep: self,
            raw,
            part,
        })
    }

    /// `admit_known` for an open word. Out of line, so the closed case
    /// stays small enough to inline; slot and partition apart, in
    /// registers (a `Resolved` went through the stack on every call).
    #[inline(never)]
    fn refuse_known(&self, t: &Table, slot: u32, part: &Partition, w: Word) -> Option<Answer> {
        let retry_ns = self.refuse_open(slot, part, w)?;
        part.touch(|| t.tick());
        Some(Answer::refused_open(retry_ns))
    }

    /// An open global word: refused here while the period runs, else the
    /// general path. Out of line, so the closed path above stays small
    /// enough to inline into every caller.
    #[inline(never)]
    fn answer_open(&self, p: &Partition, w: Word) -> Answer {
        match self.refuse_open(0, p, w) {
            Some(retry_ns) => Answer::refused_open(retry_ns),
            None => self.admit_slow(None, None),
        }
    }

    /// Rebuilds an out-of-line path's answer in the caller, from
    /// registers. Its permit finds its partition by slot when recorded.
    #[inline(always)]
    fn decode(&self, a: Answer) -> Result<Decision<'_>, AdmitError> {
        match a.kind() {
            AnswerKind::Admitted => Ok(self.admitted(a.raw(), None)),
            AnswerKind::Rejected(reason) => Ok(Decision::Rejected(Rejection {
                reason,
                fallback: &self.inner.config.fallback,
                retry_after: a.retry_after(),
            })),
            AnswerKind::TenantRequired => Err(AdmitError::TenantRequired),
            AnswerKind::InvalidTenant(len) => Err(AdmitError::InvalidTenant { len }),
        }
    }

    /// An open partition (at `slot`) whose period is not over, decided
    /// without the CAS loop: the tagged open-until, one coarse reading and
    /// `machine::still_open`, the same rule `machine::admit` applies.
    /// Returns the retry-after (ns) of the refusal it counted.
    #[inline(always)]
    fn refuse_open(&self, slot: u32, p: &Partition, w: Word) -> Option<u64> {
        if w.phase() != Phase::Open {
            return None;
        }
        let until = p.cell.open_until(w.generation())?;
        let now = self.now_coarse();
        let retry_after = machine::still_open_ns(until, now)?;
        let pin = pin_for(slot);
        if let Some(stats) = self.counters(slot, p, w.generation(), &pin) {
            stats.hot(Hot::Open);
            if stats.stuck_due(now) {
                self.check_stuck(slot, p);
            }
        }
        Some(retry_after)
    }

    /// A closed word of the partition at `slot` admits without a clock
    /// (unless `slow_call` times it).
    #[inline]
    fn admit_closed(&self, slot: u32, w: Word) -> Option<PermitData> {
        (w.phase() == Phase::Closed && !self.inner.timed).then(|| closed_permit(slot, w))
    }

    /// Records an outcome, deciding the healthy case with one load: under
    /// the consecutive policy a success on a closed word with no failures
    /// counted changes nothing (`machine::record`'s `(None, Applied)`).
    #[inline(always)]
    fn record_fast(&self, raw: PermitData, part: Option<&Partition>, outcome: Outcome) {
        if !self.quiet_on(raw, part, outcome) {
            let _ = self.record_cold(raw.slot, raw.generation, raw.probe, raw.started_ns, outcome);
        }
    }

    /// Whether recording `outcome` for `raw` would change nothing: a
    /// success under the consecutive policy (no `slow_call`) on a closed
    /// word of its generation with no failures counted. One load.
    #[inline(always)]
    fn quiet(&self, raw: PermitData, outcome: Outcome) -> bool {
        self.quiet_on(raw, None, outcome)
    }

    /// [`Dependency::quiet`] on `part`, the partition `raw.slot` names, if
    /// the caller has it (else it is found by slot).
    #[inline(always)]
    fn quiet_on(&self, raw: PermitData, part: Option<&Partition>, outcome: Outcome) -> bool {
        outcome == Outcome::Success
            && self.inner.quiet_success
            && !raw.probe
            && part
                .or_else(|| self.partition_by_slot(raw.slot))
                .is_some_and(|part| part.cell.load().is_quiet_closed(raw.generation))
    }

    #[inline(never)]
    fn admit_slow(&self, tenant: Option<&str>, deadline: Option<Instant>) -> Answer {
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            Err(e) => return Answer::refused_tenant(e),
        };
        let inner = &*self.inner;
        if let Some(d) = deadline {
            if inner.clock.now() >= d {
                self.count_expired(tenant);
                return Answer::rejected(RejectReason::DeadlineExpired, None);
            }
        }
        let mut target = self.target(tenant);
        let mut lost = 0u32;
        loop {
            if target.overflow {
                let stats = &inner.zero_stats;
                bump(&stats.partition_overflow_total);
                if let (Some(name), Some(t)) = (tenant, &inner.table) {
                    if t.starts_forced(name) {
                        stats.hot(Hot::ForcedOpen);
                        return Answer::rejected(RejectReason::ForcedOpen, None);
                    }
                }
            }
            let owner = target.owner;
            let part = target.part;
            if target.made_closed {
                // Admitted on the closed word this call installed.
                let started_ns = if inner.timed {
                    inner.clock.now().as_nanos()
                } else {
                    NOT_TIMED
                };
                return Answer::admitted(PermitData {
                    slot: target.slot,
                    generation: owner.generation,
                    probe: false,
                    started_ns,
                });
            }
            // A closed partition of this tenant admits on one load, as a
            // global one does: the decision `machine::admit` makes for a
            // closed word, with the same ownership check as the CAS loop.
            let w = part.cell.load();
            if let Some(raw) = self.admit_closed(target.slot, w) {
                if part.owned_by(w, owner) {
                    return Answer::admitted(raw);
                }
            }
            // The generation of the word decided on: whose counters a
            // refusal goes to.
            let seen = std::cell::Cell::new(owner.generation);
            let Some(decided) = part.cell.admit(&inner.policy, &*inner.clock, |w| {
                seen.set(w.generation());
                part.owned_by(w, owner)
            }) else {
                // The slot was recycled under us: resolve the tenant again.
                target = self.retarget(tenant, &mut lost);
                continue;
            };
            let (adm, t, at) = (decided.admission, decided.transition, decided.reading);
            if let Some((probes, generation)) = decided.reclaimed {
                // C7: probes that outlived `probe_timeout` count as
                // cancelled, with the owner they were admitted for.
                let pin = pin_for(target.slot);
                if let Some(stats) = self.counters(target.slot, part, generation, &pin) {
                    stats
                        .cancelled_total
                        .fetch_add(u64::from(probes), Ordering::Relaxed);
                }
            }
            if let Some(t) = t {
                self.on_transition(target.slot, part, &t, EventKind::Transition);
            }
            return match adm {
                Admission::Admit { generation, probe } => {
                    let started_ns = if inner.config.slow_call.is_some() {
                        inner.clock.now().as_nanos()
                    } else {
                        NOT_TIMED
                    };
                    Answer::admitted(PermitData {
                        slot: target.slot,
                        generation,
                        probe,
                        started_ns,
                    })
                }
                Admission::Refuse {
                    refusal,
                    retry_after,
                } => {
                    let pin = pin_for(target.slot);
                    let stats = self.counters(target.slot, part, seen.get(), &pin);
                    let hot = |kind| stats.inspect(|s| s.hot(kind));
                    let reason = match refusal {
                        Refusal::Open => {
                            hot(Hot::Open);
                            // One load and compare; the announcement is cold.
                            if at.is_some_and(|now| stats.is_some_and(|s| s.stuck_due(now))) {
                                self.check_stuck(target.slot, part);
                            }
                            RejectReason::Open
                        }
                        Refusal::ProbeBudget => {
                            hot(Hot::ProbeBudget);
                            RejectReason::ProbeBudget
                        }
                        Refusal::ForcedOpen => {
                            hot(Hot::ForcedOpen);
                            RejectReason::ForcedOpen
                        }
                    };
                    Answer::rejected(reason, retry_after)
                }
                Admission::Vacant => {
                    target = self.retarget(tenant, &mut lost);
                    continue;
                }
                // `Cell::admit` admits again after a reclaim.
                Admission::Reclaim { .. } => unreachable!("Cell::admit never returns a reclaim"),
            };
        }
    }

    /// Counts an expired deadline (C10) on the partition the tenant already
    /// has, without touching the table: such an admission neither inserts
    /// nor evicts (C9). A tenant with no partition has no breaker to count
    /// it against.
    #[cold]
    fn count_expired(&self, tenant: Option<&str>) {
        let part = match (self.parts(), tenant) {
            (Parts::Global(p), _) => Some((0, p, 0)),
            (Parts::Tenant(t, _), Some(name)) => {
                t.lookup(name).map(|r| (r.slot, r.part, r.owner.generation))
            }
            (Parts::Tenant(..), None) => None,
        };
        if let Some((slot, p, generation)) = part {
            let pin = pin_for(slot);
            if let Some(stats) = self.counters(slot, p, generation, &pin) {
                bump(&stats.deadline_expired_total);
            }
        }
    }

    /// Records the outcome of a permit given as plain data (C13).
    ///
    /// A permit of an older generation, or of a partition evicted since,
    /// is counted as late and changes nothing else; a probe permit always
    /// returns its slot. The permit is consumed: recorded once, by its type.
    ///
    /// Returns the outcome as counted: a success at least `slow_call` long
    /// is a failure (C5).
    #[inline]
    pub fn record_raw(&self, permit: RawPermit, outcome: Outcome) -> Outcome {
        self.record_data(permit.0, outcome)
    }

    /// [`Dependency::record_raw`] on the permit's fields.
    #[inline]
    fn record_data(&self, permit: PermitData, outcome: Outcome) -> Outcome {
        if self.quiet(permit, outcome) {
            return outcome;
        }
        self.record_cold(
            permit.slot,
            permit.generation,
            permit.probe,
            permit.started_ns,
            outcome,
        )
    }

    /// Everything but the quiet success, kept out of line so the fast path
    /// before it stays a few instructions in the caller (the C ABI's
    /// `bb_record` included).
    /// (The permit in scalars: passed in registers, so the caller need not
    /// spill it to memory on the fast path just in case.)
    #[inline(never)]
    fn record_cold(
        &self,
        slot: u32,
        generation: u64,
        probe: bool,
        started_ns: u64,
        outcome: Outcome,
    ) -> Outcome {
        // The window's fast path takes the scalars: a `PermitData` built
        // here went through the stack, its slot and probe flag stored
        // apart and read back as one word, which stalled store forwarding
        // on every failure-rate record.
        if self.record_windowed(slot, generation, probe, outcome) {
            return outcome;
        }
        let permit = PermitData {
            slot,
            generation,
            probe,
            started_ns,
        };
        self.record_general(permit, outcome)
    }

    /// [`Dependency::record_cold`] past the failure-rate window's fast
    /// path: a function of its own, so the registers its general path
    /// needs are not saved on the window's every call. (The permit by
    /// value: a spill here costs nothing the fast paths pay.)
    #[inline(never)]
    fn record_general(&self, permit: PermitData, outcome: Outcome) -> Outcome {
        if self.record_counted(permit, outcome) {
            return outcome;
        }
        let inner = &*self.inner;
        let Some(part) = self.partition_by_slot(permit.slot) else {
            return outcome;
        };
        let mut verdict = verdict_of(outcome);
        if let (Verdict::Success, Some(slow)) = (verdict, inner.config.slow_call) {
            if permit.started_ns != NOT_TIMED {
                let took = inner
                    .clock
                    .now()
                    .saturating_duration_since(Instant::from_nanos(permit.started_ns));
                if took >= slow {
                    verdict = Verdict::Failure;
                }
            }
        }
        let mut trip = false;
        if let (Some((rate, min_calls)), false, false) =
            (inner.rate, permit.probe, verdict == Verdict::Cancelled)
        {
            let w = part.cell.load();
            if w.phase() == Phase::Closed && w.generation() == permit.generation {
                let judge = |window: &Window| {
                    // A bucket is window / 10 wide: a coarse reading picks
                    // it well enough once buckets are ≥ 10 ms.
                    let now = if window.coarse_ok() {
                        self.now_coarse()
                    } else {
                        inner.clock.now()
                    }
                    .as_nanos();
                    window.record_and_judge(now, verdict == Verdict::Failure, rate, min_calls)
                };
                trip = match part.window() {
                    Some(window) => judge(window),
                    // A tenant slot's window of this permit's episode, or
                    // none: a window of a later episode (the word moved on
                    // since the load above) is not this record's to count
                    // in; the cell then finds the record late.
                    None => part
                        .with_episode_window(|window| {
                            window.episode == permit.generation && judge(window)
                        })
                        .unwrap_or(false),
                };
            }
        }
        self.apply(permit, part, verdict, trip)
    }

    /// A closed global failure-rate breaker's success or failure, counted
    /// in the window and judged without the cell's CAS loop. That is what
    /// the general path comes to for a closed word of the permit's
    /// generation with no count (the rate policy keeps none there):
    /// `machine::record` changes nothing unless the window trips, and a
    /// trip goes on through the cell. True when recorded.
    #[inline]
    fn record_windowed(&self, slot: u32, generation: u64, probe: bool, outcome: Outcome) -> bool {
        let inner = &*self.inner;
        if !inner.window_fast || slot != 0 || probe {
            return false;
        }
        let verdict = verdict_of(outcome);
        if verdict == Verdict::Cancelled {
            return false;
        }
        let part = &*inner.zero;
        let (Some((rate, min_calls)), Some(window)) = (inner.rate, part.window()) else {
            return false;
        };
        if !part.cell.load().is_quiet_closed(generation) {
            return false;
        }
        let failed = verdict == Verdict::Failure;
        if window.record_and_judge(self.now_coarse().as_nanos(), failed, rate, min_calls) {
            let permit = PermitData {
                slot,
                generation,
                probe,
                started_ns: NOT_TIMED,
            };
            let _ = self.apply(permit, part, verdict, true);
        } else if failed {
            inner.zero_stats.hot(Hot::Failure);
        }
        true
    }

    /// A failure the consecutive policy only counts
    /// ([`machine::count_failure`]), installed by one CAS instead of the
    /// cell's loop; a lost race goes the general way. True when recorded.
    #[inline]
    fn record_counted(&self, permit: PermitData, outcome: Outcome) -> bool {
        if outcome != Outcome::Failure || permit.probe {
            return false;
        }
        let Some(part) = self.partition_by_slot(permit.slot) else {
            return false;
        };
        let w = part.cell.load();
        let Some(next) = machine::count_failure(w, &self.inner.policy, permit.generation) else {
            return false;
        };
        if !part.cell.try_replace(w, next) {
            return false;
        }
        let pin = pin_for(permit.slot);
        if let Some(stats) = self.counters(permit.slot, part, permit.generation, &pin) {
            stats.hot(Hot::Failure);
        }
        self.touch_failed(permit.slot, part);
        true
    }

    /// Ranks a tenant partition that just counted a failure for LRU
    /// eviction: its cold part, where the tick lives, exists by now.
    fn touch_failed(&self, slot: u32, part: &Partition) {
        if let (Some(t), true) = (&self.inner.table, slot != 0) {
            part.touch(|| t.tick());
        }
    }

    /// The cell's part of a record, after the window's: the word's change,
    /// the counters, the transition's event.
    fn apply(&self, permit: PermitData, part: &Partition, verdict: Verdict, trip: bool) -> Outcome {
        let inner = &*self.inner;
        let r = part.cell.record(
            &inner.policy,
            &*inner.clock,
            permit.generation,
            permit.probe,
            verdict,
            trip,
        );
        let pin = pin_for(permit.slot);
        let stats = || self.counters(permit.slot, part, permit.generation, &pin);
        match r {
            Recorded::Late => {
                // A slot that changed owner since the permit was issued
                // (or has none) counts it with the dependency's overflow
                // partition, which lists it.
                bump(&stats().unwrap_or(&inner.zero_stats).late_records_total);
                // A returned probe slot can leave a closed partition with
                // none in flight: evictable again.
                if let (true, Some(table)) = (permit.probe, &inner.table) {
                    table.note_evictable();
                }
            }
            Recorded::Applied | Recorded::Transition(_) => match verdict {
                Verdict::Failure => {
                    if let Some(s) = stats() {
                        s.hot(Hot::Failure);
                    }
                    self.touch_failed(permit.slot, part);
                }
                Verdict::Cancelled => {
                    if let Some(s) = stats() {
                        bump(&s.cancelled_total);
                    }
                }
                Verdict::Success => {}
            },
        }
        drop(pin);
        if let Recorded::Transition(t) = r {
            self.on_transition(permit.slot, part, &t, EventKind::Transition);
        }
        match verdict {
            Verdict::Success => Outcome::Success,
            Verdict::Failure => Outcome::Failure,
            Verdict::Cancelled => Outcome::Cancelled,
        }
    }

    fn on_transition(&self, slot: u32, part: &Partition, t: &Transition, kind: EventKind) {
        let inner = &*self.inner;
        let now = inner.clock.now();
        let pin = pin_for(slot);
        if let Some(stats) = self.counters(slot, part, t.generation, &pin) {
            stats.on_transition(t.from, t.to, now, inner.config.recovery_bound, t.generation);
        }
        drop(pin);
        // Named after the owner the transition happened to; a partition
        // evicted before its transition is announced (reset, closed and
        // taken by a newcomer meanwhile) is not announced: the slot's
        // name now is another tenant's, or none.
        inner.events.emit_some(|| {
            Some(Event {
                kind,
                dependency: inner.config.name.clone(),
                partition: self.partition_name_at(slot, part, t.generation)?,
                at: now,
                from: Some(State::from_phase(t.from)),
                to: Some(State::from_phase(t.to)),
            })
        });
        if t.to == Phase::Open {
            self.schedule(slot, part);
            inner.sweeper.wake();
        }
        if let (Phase::Closed, Some(table)) = (t.to, &inner.table) {
            table.note_evictable();
        }
    }

    /// Notes when the sweep next has something to do for `part`: the end
    /// of its open period, or its episode's recovery bound if its stuck
    /// alert is still to come.
    fn schedule(&self, slot: u32, part: &Partition) {
        let w = part.cell.load();
        let mut due = u64::MAX;
        if w.phase() == Phase::Open {
            if let Some(until) = part.cell.open_until(w.generation()) {
                due = until.as_nanos();
            }
        }
        if matches!(w.phase().seen(), Phase::Open | Phase::HalfOpen) {
            let pin = pin_for(slot);
            if let Some(at) = self
                .current_counters(slot, part, &pin)
                .and_then(|s| s.stuck_pending())
            {
                due = due.min(at);
            }
        }
        if due != u64::MAX {
            // Relaxed: a hint for the sweep; each sweep recomputes it.
            self.inner.sweep_due.fetch_min(due, Ordering::Relaxed);
        }
    }

    /// Makes the announcements that are due (see [`Sweeper`]): ends the
    /// open periods that are over, announces stuck episodes.
    fn sweep(&self) {
        let inner = &*self.inner;
        // Relaxed: see `schedule`. Taken before the walk: a trip noted
        // meanwhile is seen by the walk or kept for the next sweep.
        if inner.clock.now().as_nanos() < inner.sweep_due.load(Ordering::Relaxed) {
            return;
        }
        inner.sweep_due.store(u64::MAX, Ordering::Relaxed);
        let mut one = |slot: u32, part: &Partition| {
            if let Some(t) = part.cell.expire(&inner.policy, &*inner.clock) {
                self.on_transition(slot, part, &t, EventKind::Transition);
            }
            self.check_stuck(slot, part);
            self.schedule(slot, part);
        };
        match self.parts() {
            Parts::Global(p) => one(0, p),
            Parts::Tenant(t, zero) => {
                t.for_each_in_episode(&mut one);
                one(0, zero);
            }
        }
    }

    /// Announces a stuck episode once (C15); true while stuck.
    fn check_stuck(&self, slot: u32, part: &Partition) -> Option<Duration> {
        let inner = &*self.inner;
        let phase = self.phase_now(part);
        if !matches!(phase, Phase::Open | Phase::HalfOpen) {
            return None;
        }
        let pin = pin_for(slot);
        let stats = self.current_counters(slot, part, &pin)?;
        let start = stats.episode_start()?;
        // Coarse: stuck alerts are about minutes, not microseconds.
        let now = self.now_coarse();
        let open_for = now.saturating_duration_since(start);
        if open_for < inner.config.recovery_bound {
            return None;
        }
        if stats.take_stuck_alert(now, inner.config.recovery_bound) {
            // Named after the owner whose counters raised it.
            inner.events.emit_some(|| {
                Some(Event {
                    kind: EventKind::Stuck,
                    dependency: inner.config.name.clone(),
                    partition: self.partition_name_at(slot, part, stats.since)?,
                    at: now,
                    from: None,
                    to: Some(State::from_phase(phase)),
                })
            });
        }
        Some(open_for)
    }

    /// The state of a partition (C11); an unseen or evicted tenant reads as
    /// a fresh partition (forced open after a dependency-wide force), and
    /// asking never creates one.
    pub fn state(&self, tenant: Option<&str>) -> Result<State, AdmitError> {
        let tenant = self.tenant(tenant)?;
        Ok(match (self.parts(), tenant) {
            (Parts::Global(p), _) => State::from_phase(self.phase_now(p)),
            (Parts::Tenant(t, _), Some(name)) => match t.lookup(name) {
                Some(r) => State::from_phase(self.phase_now(r.part)),
                None if t.starts_forced(name) => State::ForcedOpen,
                None => State::Closed,
            },
            (Parts::Tenant(..), None) => State::Closed,
        })
    }

    /// The phase an admission would find now (C14): an open partition
    /// whose period has ended reads half-open, before any admission makes
    /// the transition.
    fn phase_now(&self, part: &Partition) -> Phase {
        let w = part.cell.load();
        match (w.phase(), part.cell.open_until(w.generation())) {
            (Phase::Open, Some(until))
                if machine::still_open(until, self.inner.clock.now()).is_none() =>
            {
                Phase::HalfOpen
            }
            (phase, _) => phase.seen(),
        }
    }

    fn operate(&self, tenant: Option<&str>, kind: EventKind) -> Result<(), AdmitError> {
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            // No tenant: every partition.
            Err(AdmitError::TenantRequired) => None,
            Err(e) => return Err(e),
        };
        let action: fn(Word) -> Option<(Word, Transition)> = match kind {
            EventKind::ForcedOpen => machine::force_open,
            _ => machine::reset,
        };
        // Whether the action was applied: not when the slot changed owner
        // between the lookup and the CAS.
        let apply = |slot: u32, part: &Partition, owner: Owner| -> bool {
            match part.cell.operate(action, |w| part.owned_by(w, owner)) {
                Some(t) => {
                    self.on_transition(slot, part, &t, kind);
                    true
                }
                None => false,
            }
        };
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => {
                apply(0, p, NO_OWNER);
            }
            (Parts::Tenant(t, _), Some(name)) if kind == EventKind::ForcedOpen => loop {
                // Forcing a tenant open isolates that tenant alone: its own
                // partition, made if need be. Resolved again if its slot
                // changes owner under the action (each such loss is another
                // thread's progress).
                let target = self.target(Some(name));
                if target.overflow {
                    // No room for it: remembered, refused from the overflow
                    // and forced when it gets a partition; never the shared
                    // overflow partition (that would isolate innocent tenants).
                    t.force_unplaced(name);
                    // An insert of this tenant racing the action reads the
                    // mark after publishing itself (`Table::settle_forced`)
                    // or is found here, after the mark's fence.
                    if let Some(r) = t.lookup(name) {
                        if !apply(r.slot, r.part, r.owner) {
                            continue;
                        }
                        return Ok(());
                    }
                    self.announce(kind, name.to_string());
                    return Ok(());
                }
                if apply(target.slot, target.part, target.owner) {
                    t.forget_override(name);
                    return Ok(());
                }
            },
            (Parts::Tenant(t, _), Some(name)) => {
                // Recorded first, so that a partition t gets from here on
                // (an insert racing this reset included, by the fence in
                // `set_override` and `Table::settle_forced`'s) starts closed.
                t.reset_one(name);
                if let Some(r) = t.lookup(name) {
                    // Evicted before the CAS: fresh, which a reset makes.
                    apply(r.slot, r.part, r.owner);
                }
            }
            (Parts::Tenant(t, zero), None) => {
                // An insert racing this walk sees the new rule or is seen
                // by the walk (`Table::settle_forced`).
                t.operate_all(kind == EventKind::ForcedOpen);
                for (slot, part, _) in t.live() {
                    apply(slot, part, NO_OWNER);
                }
                // `<overflow>` is reset with the rest but never forced: it
                // also serves tenants reset one by one while the force
                // holds; the others it refuses by `Table::starts_forced`.
                if kind == EventKind::Reset {
                    apply(0, zero, NO_OWNER);
                }
            }
        }
        Ok(())
    }

    /// An operator action's event for a tenant that has no partition.
    fn announce(&self, kind: EventKind, partition: String) {
        let inner = &*self.inner;
        let at = inner.clock.now();
        inner.events.emit(|| Event {
            kind,
            dependency: inner.config.name.clone(),
            partition,
            at,
            from: Some(State::Closed),
            to: Some(State::ForcedOpen),
        });
    }

    /// Forces a partition closed: new generation, counters cleared (C11).
    /// `None` (or `Some("")`) on a tenant-scoped dependency resets every
    /// partition and ends a dependency-wide `force_open`. A tenant id
    /// longer than [`MAX_TENANT_LEN`] bytes names no partition: nothing is
    /// done ([`try_reset`](Self::try_reset) says so).
    pub fn reset(&self, tenant: Option<&str>) {
        let _ = self.try_reset(tenant);
    }

    /// [`reset`](Self::reset), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_reset(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, EventKind::Reset)
    }

    /// Isolates a partition until [`reset`](Self::reset) (C11). `None` (or
    /// `Some("")`) on a tenant-scoped dependency isolates every partition,
    /// including tenants first seen afterwards. A tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes names no partition: nothing is done (and
    /// nothing created; [`try_force_open`](Self::try_force_open) says so).
    pub fn force_open(&self, tenant: Option<&str>) {
        let _ = self.try_force_open(tenant);
    }

    /// [`force_open`](Self::force_open), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_force_open(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, EventKind::ForcedOpen)
    }

    fn resolve_existing(&self, tenant: Option<&str>) -> (u32, &Partition, String, u64) {
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => (0, p, GLOBAL.to_string(), 0),
            (Parts::Tenant(t, zero), Some(name)) => match t.lookup(name) {
                Some(r) => (r.slot, r.part, name.to_string(), r.owner.generation),
                None => (0, zero, OVERFLOW.to_string(), 0),
            },
            (Parts::Tenant(_, zero), None) => (0, zero, OVERFLOW.to_string(), 0),
        }
    }

    /// The partition that serves a tenant just admitted or rejected: the
    /// tenant id, `global`, or `<overflow>` when the tenant is not in the
    /// table (C9), as for a missing tenant or one longer than
    /// [`MAX_TENANT_LEN`] bytes, which no partition is named after.
    /// Read-only: never creates a partition.
    pub fn partition_of(&self, tenant: Option<&str>) -> String {
        let tenant = self.tenant(tenant).ok().flatten();
        self.resolve_existing(tenant).2
    }

    /// The partition a call for `tenant` would be served by, by name,
    /// without touching the table: the tenant's own (whether or not it has
    /// one yet), `global`, or `<overflow>` when the table is known to be
    /// full of partitions that cannot be evicted (or the tenant is missing
    /// or invalid). What an expired deadline's error names (C10): such a
    /// call never reaches a partition.
    pub fn breaker_of(&self, tenant: Option<&str>) -> String {
        match (self.parts(), self.tenant(tenant)) {
            (Parts::Global(_), _) => GLOBAL.to_string(),
            (Parts::Tenant(t, _), Ok(Some(name))) => {
                if t.lookup(name).is_none() && t.known_full() {
                    OVERFLOW.to_string()
                } else {
                    name.to_string()
                }
            }
            (Parts::Tenant(..), _) => OVERFLOW.to_string(),
        }
    }

    /// The error a rejection amounts to when no fallback is served (C4):
    /// for callers that handle rejections themselves. Counts nothing.
    pub fn unavailable(
        &self,
        tenant: Option<&str>,
        rejection: &Rejection<'_>,
    ) -> DependencyUnavailable {
        DependencyUnavailable {
            dependency: self.inner.config.name.clone(),
            partition: self.partition_of(tenant),
            code: rejection.fallback.code().map(str::to_string),
            retry_after: rejection.retry_after,
        }
    }

    /// Serves the declared fallback for a rejection (C3, C4): the one place
    /// fallbacks are chosen and counted. `stale` serves the last good value
    /// for (tenant or `global`, `cache_key`) no older than `max_staleness`;
    /// `degraded` runs `degraded` (`None` from it means it failed); `error`
    /// always yields [`DependencyUnavailable`] with the code. A fallback
    /// never turns into a recorded success. A tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes is served nothing and counted nowhere
    /// (C9): [`DependencyUnavailable`] for the `<overflow>` partition.
    pub fn serve_fallback<T: Clone + Send + Sync + 'static>(
        &self,
        tenant: Option<&str>,
        rejection: &Rejection<'_>,
        cache_key: Option<&str>,
        degraded: Option<impl FnOnce() -> Option<T>>,
    ) -> Result<T, DependencyUnavailable> {
        let inner = &*self.inner;
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            Err(AdmitError::TenantRequired) => None,
            Err(AdmitError::InvalidTenant { .. }) => {
                return Err(DependencyUnavailable {
                    dependency: inner.config.name.clone(),
                    partition: OVERFLOW.to_string(),
                    code: inner.config.fallback.code().map(str::to_string),
                    retry_after: rejection.retry_after,
                })
            }
        };
        let (slot, part, partition, generation) = self.resolve_existing(tenant);
        let pin = pin_for(slot);
        let stats = self.counters(slot, part, generation, &pin);
        let count = |c: fn(&Stats) -> &AtomicU64| {
            if let Some(s) = stats {
                bump(c(s));
            }
        };
        let unavailable = |code: Option<String>| DependencyUnavailable {
            dependency: inner.config.name.clone(),
            partition: partition.clone(),
            code,
            retry_after: rejection.retry_after,
        };
        match &inner.config.fallback {
            Fallback::Error { code } => {
                count(|s| &s.fallback_error_total);
                Err(unavailable(Some(code.clone())))
            }
            Fallback::Degraded => match degraded.and_then(|f| f()) {
                Some(v) => {
                    count(|s| &s.fallback_degraded_total);
                    Ok(v)
                }
                None => {
                    count(|s| &s.fallback_failures_total);
                    Err(unavailable(None))
                }
            },
            Fallback::Stale { max_staleness } => {
                let owner = tenant.unwrap_or(GLOBAL);
                let hit = match (&inner.stale, cache_key) {
                    (Some(c), Some(k)) => c.get::<T>(owner, k, inner.clock.now(), *max_staleness),
                    _ => None,
                };
                match hit {
                    Some(v) => {
                        count(|s| &s.fallback_stale_total);
                        Ok(v)
                    }
                    None => {
                        count(|s| &s.fallback_failures_total);
                        Err(unavailable(None))
                    }
                }
            }
        }
    }

    /// Stores a good value for `stale` fallbacks (a no-op for other kinds,
    /// and for a tenant id longer than [`MAX_TENANT_LEN`] bytes, C9).
    pub fn cache_put<T: Clone + Send + Sync + 'static>(
        &self,
        tenant: Option<&str>,
        key: &str,
        value: T,
    ) {
        if let Some(c) = &self.inner.stale {
            let owner = match self.tenant(tenant) {
                Ok(t) => t.unwrap_or(GLOBAL),
                Err(AdmitError::TenantRequired) => GLOBAL,
                Err(AdmitError::InvalidTenant { .. }) => return,
            };
            c.put(owner, key, self.inner.clock.now(), value);
        }
    }

    fn reject_to_error<T, E>(
        &self,
        tenant: Option<&str>,
        r: &Rejection<'_>,
    ) -> Result<T, CallError<E>> {
        if r.reason == RejectReason::DeadlineExpired {
            return Err(CallError::DeadlineExpired);
        }
        self.serve_fallback::<()>(tenant, r, None, None::<fn() -> Option<()>>)
            .map_err(CallError::Unavailable)
            .map(|_| unreachable_value())
    }

    /// Runs `f` if admitted and records its outcome; otherwise serves the
    /// fallback, which with no cache key or degraded behaviour can only be
    /// [`CallError::Unavailable`]. See [`call_with`](Self::call_with).
    #[inline]
    pub fn call<T, E>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        // A panic in `f` drops the permit, which records `Cancelled` (C13).
        match self.admit(tenant, deadline) {
            Ok(Decision::Admitted(p)) => finish(p, f()),
            Ok(Decision::Rejected(r)) => self.refused(tenant, &r),
            Err(e) => Err(e.into()),
        }
    }

    /// `call`'s error for a refusal. Out of line: built in the caller, the
    /// error's value was merged with the admitted path's result through
    /// the stack, which cost the healthy call more than the breaker did.
    #[inline(never)]
    fn refused<T, E>(&self, tenant: Option<&str>, r: &Rejection<'_>) -> Result<T, CallError<E>> {
        self.reject_to_error(tenant, r)
    }

    /// Like [`call`](Self::call), with a stale-cache key and a degraded
    /// behaviour: a success is cached under `cache_key` for `stale`
    /// fallbacks; a rejection serves the declared fallback (C3, C4).
    ///
    /// ```
    /// use breakerbank::{Bank, CallError, CallOptions, Profile};
    /// let bank = Bank::new(Profile::from_yaml(r#"
    /// dependencies:
    ///   catalog_client:
    ///     isolation: global
    ///     trip: {consecutive_failures: 1}
    ///     open_duration: 30s
    ///     half_open: {probe_budget: 1, success_threshold: 1}
    ///     fallback: {kind: stale, max_staleness: 10m}
    ///     recovery_bound: 5m
    /// "#).unwrap());
    /// let catalog = bank.dependency("catalog_client").unwrap();
    /// let opts = || CallOptions { cache_key: Some("sku-1"), degraded: None };
    /// let fresh = catalog.call_with(None, None, opts(), || Ok::<_, String>(42));
    /// assert_eq!(fresh.unwrap(), 42);
    /// let failed = catalog.call_with(None, None, opts(), || Err::<i32, _>("boom".to_string()));
    /// assert!(matches!(failed, Err(CallError::Inner(_))));
    /// // Open now: the last good value is served without calling.
    /// let stale = catalog.call_with(None, None, opts(), || -> Result<i32, String> { unreachable!() });
    /// assert_eq!(stale.unwrap(), 42);
    /// ```
    pub fn call_with<T: Clone + Send + Sync + 'static, E>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        options: CallOptions<'_, T>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        match self.admit(tenant, deadline).map_err(CallError::from)? {
            Decision::Admitted(p) => {
                let out = f();
                if let (Ok(v), Some(k)) = (&out, options.cache_key) {
                    self.cache_put(tenant, k, v.clone());
                }
                finish(p, out)
            }
            Decision::Rejected(r) if r.reason == RejectReason::DeadlineExpired => {
                Err(CallError::DeadlineExpired)
            }
            Decision::Rejected(r) => self
                .serve_fallback(tenant, &r, options.cache_key, options.degraded)
                .map_err(CallError::Unavailable),
        }
    }

    /// The async twin of [`call`](Self::call). If the returned future is
    /// dropped mid-call, the permit records `Cancelled` (C10, C13).
    pub async fn call_async<T, E>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, CallError<E>> {
        match self.admit(tenant, deadline).map_err(CallError::from)? {
            Decision::Admitted(p) => finish(p, fut.await),
            Decision::Rejected(r) => self.reject_to_error(tenant, &r),
        }
    }

    fn snapshot(&self, now: Instant) -> DependencyMetrics {
        let inner = &*self.inner;
        let bound = inner.config.recovery_bound;
        let mut partitions = Vec::new();
        let read = |slot: u32, part: &Partition, name: String| {
            self.check_stuck(slot, part);
            PartitionMetrics::new(
                name,
                self.phase_now(part),
                self.current_counters(slot, part, &pin_for(slot)),
                now,
                bound,
            )
        };
        match self.parts() {
            Parts::Global(p) => partitions.push(read(0, p, GLOBAL.to_string())),
            Parts::Tenant(t, o) => {
                for (slot, part, key, since) in t.live_tenures() {
                    let m = read(slot, part, key.to_string());
                    // A slot that changed owner while it was read is left
                    // out: what was read may be the new owner's, under the
                    // old owner's name (the next snapshot lists it).
                    if t.tenure(slot) == since {
                        partitions.push(m);
                    }
                }
                // Listed once something happened to it (its cold part is
                // made with it, counters and all).
                if !inner.zero_stats.is_clear() || o.cell.load() != Word::FRESH {
                    partitions.push(read(0, o, OVERFLOW.to_string()));
                }
            }
        }
        DependencyMetrics {
            name: inner.config.name.clone(),
            partitions,
        }
    }

    fn stuck_list(&self, out: &mut Vec<Stuck>) {
        let mut push = |name: String, open_for: Option<Duration>| {
            if let Some(open_for) = open_for {
                out.push(Stuck {
                    dependency: self.inner.config.name.clone(),
                    partition: name,
                    open_for,
                });
            }
        };
        match self.parts() {
            Parts::Global(p) => push(GLOBAL.to_string(), self.check_stuck(0, p)),
            Parts::Tenant(t, zero) => {
                for (slot, part, key, since) in t.live_tenures() {
                    let open_for = self.check_stuck(slot, part);
                    // As in `snapshot`: a slot that changed owner while it
                    // was read is left out.
                    if t.tenure(slot) == since {
                        push(key.to_string(), open_for);
                    }
                }
                push(OVERFLOW.to_string(), self.check_stuck(0, zero));
            }
        }
    }
}

fn unreachable_value<T>() -> T {
    // `serve_fallback::<()>` without a cache key or degraded behaviour can
    // only fail; this keeps the types honest without an unwrap.
    unreachable!("a fallback without cache key or degraded behaviour cannot serve a value")
}

fn finish<T, E>(p: Permit<'_>, out: Result<T, E>) -> Result<T, CallError<E>> {
    match out {
        Ok(v) => {
            p.record(Outcome::Success);
            Ok(v)
        }
        Err(e) => {
            p.record(Outcome::Failure);
            Err(CallError::Inner(e))
        }
    }
}

/// A bank of breakers built from a profile: one per dependency and
/// partition. `Send + Sync`; share it by reference or `Arc`.
pub struct Bank {
    deps: Vec<Dependency>,
    by_name: HashMap<String, u32>,
    clock: StdArc<dyn Clock>,
    events: StdArc<EventBus>,
}

impl fmt::Debug for Bank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bank")
            .field("dependencies", &self.deps)
            .finish()
    }
}

impl Bank {
    /// A bank on the system's monotonic clock.
    ///
    /// # Panics
    ///
    /// When the allocator refuses a partition table (see
    /// [`Bank::try_new`], which returns that as a [`ConfigError`]).
    pub fn new(profile: Profile) -> Bank {
        Self::with_clock(profile, MonotonicClock::new())
    }

    /// A bank on the given clock (e.g. a [`ManualClock`] in tests).
    ///
    /// # Panics
    ///
    /// As [`Bank::new`]; [`Bank::try_with_clock`] does not.
    pub fn with_clock(profile: Profile, clock: impl Clock + 'static) -> Bank {
        Self::try_with_clock(profile, clock).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Bank::new`], with a partition table the allocator refuses
    /// returned as a [`ConfigError`] naming its dependency, never an abort
    /// or a panic (C9). What the C and Python constructors use.
    pub fn try_new(profile: Profile) -> Result<Bank, ConfigError> {
        Self::try_with_clock(profile, MonotonicClock::new())
    }

    /// [`Bank::with_clock`], fallible as [`Bank::try_new`] is.
    pub fn try_with_clock(
        profile: Profile,
        clock: impl Clock + 'static,
    ) -> Result<Bank, ConfigError> {
        let clock: StdArc<dyn Clock> = StdArc::new(clock);
        let events = StdArc::new(EventBus::new());
        let sweeper = StdArc::new(Sweeper {
            deps: OnceLock::new(),
            started: AtomicBool::new(false),
            manual: clock.as_manual().is_some(),
        });
        let deps = profile
            .dependencies()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Dependency::try_new(
                    i as u32,
                    c.clone(),
                    clock.clone(),
                    events.clone(),
                    sweeper.clone(),
                )
            })
            .collect::<Result<Vec<Dependency>, ConfigError>>()?;
        let _ = sweeper
            .deps
            .set(deps.iter().map(|d| StdArc::downgrade(&d.inner)).collect());
        if let Some(manual) = clock.as_manual() {
            let observer: StdArc<dyn Advanced> = sweeper.clone();
            manual.observe(StdArc::downgrade(&observer));
        }
        let by_name = deps
            .iter()
            .map(|d| (d.name().to_string(), d.id()))
            .collect();
        Ok(Bank {
            deps,
            by_name,
            clock,
            events,
        })
    }

    /// A dependency by name; resolve once, then clone the handle freely.
    pub fn dependency(&self, name: &str) -> Option<Dependency> {
        self.dependency_id(name)
            .and_then(|i| self.dependency_by_id(i))
            .cloned()
    }

    /// A dependency's id (its index in the profile).
    pub fn dependency_id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// A dependency by id, borrowed.
    #[inline]
    pub fn dependency_by_id(&self, id: u32) -> Option<&Dependency> {
        self.deps.get(id as usize)
    }

    /// The dependency names, in profile order.
    pub fn dependency_names(&self) -> Vec<&str> {
        self.deps.iter().map(Dependency::name).collect()
    }

    /// Now, on the bank's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The manual clock, if the bank runs on one.
    pub fn manual_clock(&self) -> Option<&ManualClock> {
        self.clock.as_manual()
    }

    /// Every live partition's metrics (C14).
    pub fn metrics(&self) -> MetricsSnapshot {
        let now = self.now();
        MetricsSnapshot {
            dependencies: self.deps.iter().map(|d| d.snapshot(now)).collect(),
        }
    }

    /// The metrics as Prometheus text exposition (C14).
    pub fn prometheus(&self) -> String {
        self.metrics().prometheus()
    }

    /// Breakers open past their recovery bound (C15).
    pub fn stuck(&self) -> Vec<Stuck> {
        let mut out = Vec::new();
        for d in &self.deps {
            d.stuck_list(&mut out);
        }
        out
    }

    /// Adds a listener for transitions, resets, forced opens and stuck
    /// alerts (C16). Listeners run on a dispatcher thread, in order; a slow
    /// listener delays other events, never admission. Events beyond the
    /// queue's bound are dropped and counted ([`Bank::events_dropped`]).
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        self.events.subscribe(StdArc::new(listener));
    }

    /// Waits until every event queued so far has been delivered to every
    /// listener, or `timeout` passes; true when delivered. For tests and
    /// shutdown, never for the hot path.
    pub fn flush_events(&self, timeout: Duration) -> bool {
        self.events.flush(timeout)
    }

    /// Events dropped because listeners fell behind.
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
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
            let a = Answer::admitted(raw);
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
                let a = Answer::rejected(reason, retry);
                assert!(matches!(a.kind(), AnswerKind::Rejected(r) if r == reason));
                assert_eq!(a.retry_after(), retry);
            }
        }
        let huge = Answer::rejected(RejectReason::Open, Some(Duration::MAX));
        assert_eq!(huge.retry_after(), Some(Duration::from_nanos(u64::MAX - 1)));
        assert!(matches!(
            Answer::TENANT_REQUIRED.kind(),
            AnswerKind::TenantRequired
        ));
        assert!(matches!(
            Answer::refused_tenant(AdmitError::InvalidTenant { len: 1 << 20 }).kind(),
            AnswerKind::InvalidTenant(len) if len == 1 << 20
        ));
    }
}
