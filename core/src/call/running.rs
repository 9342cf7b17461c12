//! The one home of a call through a breaker: admit, run, classify,
//! record, keep the stale value; or, refused, serve the fallback and say
//! why it could not. Rust's wrappers, the tower layer, the Python binding
//! and the C ABI's `bb_call` drive this sequence; none writes it out.
//!
//! ```
//! use breakerbank::{Bank, Begun, Outcome, Profile};
//! let bank = Bank::new(Profile::from_yaml(r#"
//! dependencies:
//!   prices_client:
//!     isolation: tenant
//!     trip: {consecutive_failures: 2, slow_call: 2s}
//!     open_duration: 30s
//!     half_open: {probe_budget: 1, success_threshold: 1}
//!     fallback: {kind: stale, max_staleness: 10m}
//!     recovery_bound: 5m
//! "#).unwrap());
//! let prices = bank.dependency("prices_client").unwrap();
//! let price = match prices.begin(Some("acme"), None).unwrap() {
//!     Begun::Running(call) => {
//!         let answer: Result<u32, String> = Ok(120); // the real call
//!         if let Ok(v) = &answer {
//!             // counted (a success, unless it took `slow_call`), kept for `stale`
//!             call.end_ok(v, None).keep(Some("sku-1"), || *v);
//!         } else if let Err(e) = &answer {
//!             call.end_err(e, None);
//!         }
//!         answer.unwrap()
//!     }
//!     Begun::Refused(refused) => refused.serve(Some("sku-1"), None::<fn() -> Option<u32>>).unwrap(),
//! };
//! assert_eq!(price, 120);
//! # let _ = Outcome::Success;
//! ```

use crate::call::NoValue;
use crate::clock::Instant;
use crate::dependency::permit::PermitData;
use crate::dependency::{Decision, Dependency, HeldPermit, Permit, RawPermit};
use crate::fallback::{UnavailableRef, Unserved};
use crate::outcome::{AdmitError, Outcome, RejectReason, Rejection};
use std::fmt;
use std::mem::ManuallyDrop;

/// What [`Dependency::begin`] gives: a call to run, or a refusal to answer.
#[derive(Debug)]
pub enum Begun<'a> {
    /// Admitted: run the call, then end it.
    Running(Running<'a, Permit<'a>>),
    /// Not admitted: serve the fallback ([`Refused::serve`]).
    Refused(Refused<'a>),
}

impl Dependency {
    /// Begins a call for `tenant` with the caller's `deadline` (C2, C10):
    /// a [`Running`] call, whose end records what it counts as, or a
    /// [`Refused`] one, which serves the declared fallback (C3, C4).
    /// `Err` for a tenant this dependency refuses (C9) or a dependency a
    /// reload removed (C20): nothing ran, nothing was counted.
    #[inline(always)]
    pub fn begin<'a>(
        &'a self,
        tenant: Option<&'a str>,
        deadline: Option<Instant>,
    ) -> Result<Begun<'a>, AdmitError> {
        Ok(match self.admit(tenant, deadline)? {
            Decision::Admitted(permit) => Begun::Running(Running { tenant, permit }),
            Decision::Rejected(rejection) => Begun::Refused(Refused {
                dep: self,
                tenant,
                rejection,
            }),
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// How a [`Running`] call holds its permit: a [`Permit`] (Rust's scoped
/// calls), a shared [`HeldPermit`] (the Python binding's decisions and
/// awaitables), or a [`Raw`] one with its dependency (futures that
/// outlive a borrow, the C ABI). Sealed: the core's permits only.
pub trait Recording<'a>: sealed::Sealed {
    /// The dependency that admitted the call.
    fn dependency(&self) -> &'a Dependency;
    /// Whether the call is a half-open probe.
    fn is_probe(&self) -> bool;
    /// Records `outcome`, returning it as counted (C5, C10: a call at
    /// least `slow_call` long is a failure).
    fn record(self, outcome: Outcome) -> Outcome;
    /// Gives the permit back uncounted (C17: the call never ran).
    fn withdraw(self);
}

impl sealed::Sealed for Permit<'_> {}

impl<'a> Recording<'a> for Permit<'a> {
    #[inline(always)]
    fn dependency(&self) -> &'a Dependency {
        self.dep
    }

    #[inline(always)]
    fn is_probe(&self) -> bool {
        self.raw.probe
    }

    #[inline(always)]
    fn record(self, outcome: Outcome) -> Outcome {
        // Consumed without Drop, as `Permit::record`.
        let this = ManuallyDrop::new(self);
        this.dep.record_fast(this.raw, this.part, outcome)
    }

    fn withdraw(self) {
        let this = ManuallyDrop::new(self);
        this.dep.withdraw(this.raw);
    }
}

impl sealed::Sealed for &HeldPermit {}

impl<'a> Recording<'a> for &'a HeldPermit {
    fn dependency(&self) -> &'a Dependency {
        HeldPermit::dependency(self)
    }

    fn is_probe(&self) -> bool {
        HeldPermit::is_probe(self)
    }

    /// A permit recorded already keeps its first outcome (C13).
    fn record(self, outcome: Outcome) -> Outcome {
        HeldPermit::record(self, outcome).unwrap_or_else(|first| first)
    }

    fn withdraw(self) {
        HeldPermit::withdraw(self);
    }
}

/// A [`RawPermit`] with the dependency that issued it: recorded once,
/// given up ([`Outcome::Cancelled`], or a slow failure) if dropped.
pub struct Raw<'a> {
    dep: &'a Dependency,
    raw: PermitData,
}

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Raw")
            .field("dep", &self.dep)
            .field("raw", &self.raw)
            .finish()
    }
}

impl sealed::Sealed for Raw<'_> {}

impl<'a> Recording<'a> for Raw<'a> {
    fn dependency(&self) -> &'a Dependency {
        self.dep
    }

    fn is_probe(&self) -> bool {
        self.raw.probe
    }

    #[inline]
    fn record(self, outcome: Outcome) -> Outcome {
        let this = ManuallyDrop::new(self);
        this.dep.record_data(this.raw, outcome)
    }

    fn withdraw(self) {
        let this = ManuallyDrop::new(self);
        this.dep.withdraw(this.raw);
    }
}

impl Drop for Raw<'_> {
    fn drop(&mut self) {
        let _ = self.dep.record_data(self.raw, Outcome::Cancelled);
    }
}

/// An admitted call, running: end it with what it returned
/// ([`end_ok`](Self::end_ok), [`end_err`](Self::end_err)), with an
/// outcome ([`end`](Self::end)), or give it up
/// ([`given_up`](Self::given_up)). Dropped, it is given up.
///
/// Every end applies the one classification chain (C17): this call's
/// classifier, else the dependency's default
/// ([`Dependency::set_classify`]), else the default rule (a value is a
/// success, an error a failure); then C10's slow-call rule, in the
/// record: a call that ran at least `slow_call` counts as a failure
/// whether it returned, failed or was given up.
///
/// ```
/// use breakerbank::{Bank, Begun, ManualClock, Outcome, Profile, State};
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// let bank = Bank::with_clock(Profile::from_yaml(r#"
/// dependencies:
///   search_client:
///     isolation: global
///     trip: {consecutive_failures: 1, slow_call: 500ms}
///     open_duration: 30s
///     half_open: {probe_budget: 1, success_threshold: 1}
///     fallback: {kind: error, code: SEARCH_DOWN}
///     recovery_bound: 5m
/// "#).unwrap(), clock.clone());
/// let search = bank.dependency("search_client").unwrap();
/// let Begun::Running(call) = search.begin(None, None).unwrap() else { unreachable!() };
/// clock.advance(Duration::from_secs(2)); // the dependency hangs; the caller stops waiting
/// assert_eq!(call.given_up(), Outcome::Failure, "a slow call");
/// assert_eq!(search.state(None).unwrap(), State::Open);
/// ```
pub struct Running<'a, P: Recording<'a>> {
    tenant: Option<&'a str>,
    permit: P,
}

impl<'a, P: Recording<'a> + fmt::Debug> fmt::Debug for Running<'a, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("tenant", &self.tenant)
            .field("permit", &self.permit)
            .finish()
    }
}

impl<'a> Running<'a, Raw<'a>> {
    /// The running call of a permit given as plain data (from
    /// [`Permit::into_raw`] or [`Running::into_raw`]), for `tenant`, the
    /// tenant it was admitted for.
    pub fn raw(dep: &'a Dependency, permit: RawPermit, tenant: Option<&'a str>) -> Self {
        Running {
            tenant,
            permit: Raw { dep, raw: permit.0 },
        }
    }
}

impl<'a> Running<'a, &'a HeldPermit> {
    /// The running call of a held permit (from [`Running::into_held`]),
    /// for `tenant`, the tenant it was admitted for. Ending it records
    /// the held permit, unless it was recorded already (then its first
    /// outcome stands and is returned as counted).
    pub fn held(permit: &'a HeldPermit, tenant: Option<&'a str>) -> Self {
        Running { tenant, permit }
    }
}

impl<'a> Running<'a, Permit<'a>> {
    /// The running call of `permit`, admitted for `tenant`: for a hot
    /// path that matches [`Dependency::admit`]'s answer where it is made
    /// ([`begin`](Dependency::begin) spelled out, so the permit stays in
    /// registers: [`Begun`] is a wider value than [`Decision`]), with
    /// [`Refused::of`] for its other arm.
    #[inline(always)]
    pub fn new(tenant: Option<&'a str>, permit: Permit<'a>) -> Self {
        Running { tenant, permit }
    }

    /// The permit as plain data, to end later through
    /// [`Running::raw`]; the caller now owes that end (nothing is
    /// recorded on drop).
    pub fn into_raw(self) -> RawPermit {
        self.permit.into_raw()
    }

    /// The permit, held: for a call that ends later, maybe on another
    /// thread, through [`Running::held`] (a binding's decision object).
    pub fn into_held(self) -> HeldPermit {
        HeldPermit::new(self.permit)
    }
}

impl<'a, P: Recording<'a>> Running<'a, P> {
    /// Whether the call is a half-open probe (C7).
    #[inline]
    pub fn is_probe(&self) -> bool {
        self.permit.is_probe()
    }

    /// The dependency that admitted the call.
    #[inline]
    pub fn dependency(&self) -> &'a Dependency {
        self.permit.dependency()
    }

    /// The tenant the call was admitted for.
    #[inline]
    pub fn tenant(&self) -> Option<&'a str> {
        self.tenant
    }

    /// Ends the call with `outcome` as the caller judged it (C13);
    /// `slow_call` still applies (C10).
    #[inline(always)]
    pub fn end(self, outcome: Outcome) -> Ended<'a> {
        let dep = self.permit.dependency();
        let counted = self.permit.record(outcome);
        Ended {
            dep,
            tenant: self.tenant,
            counted,
        }
    }

    /// Ends the call with the value it returned: a success, unless
    /// `classify_ok` says otherwise (C17).
    #[inline(always)]
    pub fn end_ok<T>(self, value: &T, classify_ok: Option<&dyn Fn(&T) -> Outcome>) -> Ended<'a> {
        let outcome = classify_ok.map_or(Outcome::Success, |f| f(value));
        self.end(outcome)
    }

    /// Ends the call with the error it returned, classified by
    /// `classify`, else the dependency's default, else a failure (C17).
    /// Returns the outcome as counted. An error's value is never kept.
    #[inline]
    pub fn end_err<E: 'static>(
        self,
        error: &E,
        classify: Option<&dyn Fn(&E) -> Outcome>,
    ) -> Outcome {
        let outcome = self.permit.dependency().classify_error(error, classify);
        self.end(outcome).counted
    }

    /// The call never ran: the caller's mistake, found only once it was
    /// admitted (a binding's callable that turned out to be of the wrong
    /// form, C17). The permit is given back, its probe slot returned, and
    /// nothing is counted: the refusal is the caller's error, not the
    /// dependency's.
    #[inline]
    pub fn not_run(self) {
        self.permit.withdraw();
    }

    /// The caller stopped waiting (a deadline, a timeout, a cancelled
    /// task, a dropped future): cancelled, or a slow failure if the call
    /// ran at least `slow_call` (C10). Returns the outcome as counted.
    #[inline]
    pub fn given_up(self) -> Outcome {
        self.end(Outcome::Cancelled).counted
    }
}

/// An ended call: what it counted as, and the stale value to keep.
#[derive(Debug)]
pub struct Ended<'a> {
    dep: &'a Dependency,
    tenant: Option<&'a str>,
    counted: Outcome,
}

impl Ended<'_> {
    /// The outcome as counted (C5, C10, C17).
    #[inline]
    pub fn counted(&self) -> Outcome {
        self.counted
    }

    /// Keeps the call's value for `stale` fallbacks under `cache_key`
    /// (`""` without one) if it counted as a success
    /// ([`Dependency::keep_stale`]): `value` is made only then.
    #[inline]
    pub fn keep<T: Clone + Send + Sync + 'static>(
        self,
        cache_key: Option<&str>,
        value: impl FnOnce() -> T,
    ) {
        self.dep
            .keep_stale(self.tenant, cache_key, self.counted, value);
    }
}

/// A call that was not admitted: serve the declared fallback (C3).
#[derive(Debug)]
pub struct Refused<'a> {
    dep: &'a Dependency,
    tenant: Option<&'a str>,
    rejection: Rejection<'a>,
}

/// Why a refused call got no fallback value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotServed<'a> {
    /// The caller's deadline had expired: no fallback hides it (C10).
    DeadlineExpired,
    /// The fallback could not serve (C4); the error says why.
    Unavailable(UnavailableRef<'a>),
}

impl fmt::Display for NotServed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotServed::DeadlineExpired => f.write_str("the call's deadline had already expired"),
            NotServed::Unavailable(u) => fmt::Display::fmt(u, f),
        }
    }
}

impl<'a> Refused<'a> {
    /// The refused call of `rejection`, which `dependency` gave for
    /// `tenant`: for a binding that kept the refusal's parts.
    #[inline(always)]
    pub fn of(
        dependency: &'a Dependency,
        tenant: Option<&'a str>,
        rejection: Rejection<'a>,
    ) -> Self {
        Refused {
            dep: dependency,
            tenant,
            rejection,
        }
    }

    /// The refusal: its reason, the declared fallback, `retry_after`.
    #[inline]
    pub fn rejection(&self) -> &Rejection<'a> {
        &self.rejection
    }

    /// Why the call was not admitted.
    #[inline]
    pub fn reason(&self) -> RejectReason {
        self.rejection.reason
    }

    /// The dependency that refused.
    #[inline]
    pub fn dependency(&self) -> &'a Dependency {
        self.dep
    }

    /// The tenant the call was refused for.
    #[inline]
    pub fn tenant(&self) -> Option<&'a str> {
        self.tenant
    }

    /// Serves the declared fallback (C3, C4): the stale value kept under
    /// `cache_key`, or `degraded`'s value (`None` from it: it failed), or
    /// the `error` fallback's error. Counted as the fallback served.
    #[inline]
    pub fn serve<T: Clone + Send + Sync + 'static>(
        self,
        cache_key: Option<&str>,
        degraded: Option<impl FnOnce() -> Option<T>>,
    ) -> Result<T, NotServed<'a>> {
        if !self.rejection.reason.serves_fallback() {
            return Err(NotServed::DeadlineExpired);
        }
        self.dep
            .serve_fallback_ref(self.tenant, &self.rejection, cache_key, degraded)
            .map_err(NotServed::Unavailable)
    }

    /// [`serve`](Self::serve) for values that cannot be cached (a
    /// response, a caller's object): `degraded` still serves, a `stale`
    /// fallback has nothing kept for them.
    #[inline]
    pub fn serve_uncached<T>(
        self,
        degraded: Option<impl FnOnce() -> Option<T>>,
    ) -> Result<T, NotServed<'a>> {
        self.serve_as::<NoValue, T>(None, degraded, |never| match never {})
    }

    /// [`serve`](Self::serve) for a caller whose stale cache holds a
    /// handle `C` of its values (a binding's): the handle kept under
    /// `cache_key` is made into the value by `from_cache` (`None`: the
    /// value is gone, served as nothing cached); `degraded`'s value need
    /// not be `Clone`.
    #[inline]
    pub fn serve_as<C: Clone + Send + Sync + 'static, T>(
        self,
        cache_key: Option<&str>,
        degraded: Option<impl FnOnce() -> Option<T>>,
        from_cache: impl FnOnce(C) -> Option<T>,
    ) -> Result<T, NotServed<'a>> {
        if !self.rejection.reason.serves_fallback() {
            return Err(NotServed::DeadlineExpired);
        }
        let (dep, rejection) = (self.dep, &self.rejection);
        dep.serve_with(self.tenant, rejection, degraded, |owner| {
            let kept = dep.stale_value::<C>(rejection, owner, cache_key)?;
            from_cache(kept).ok_or(Unserved::NoValueCached)
        })
        .map_err(NotServed::Unavailable)
    }

    /// Serves a call that gave no cache key and no degraded behaviour:
    /// only the error can be served, counted as the fallback's.
    #[inline]
    pub fn serve_nothing(self) -> NotServed<'a> {
        match self.serve::<NoValue>(None, None::<fn() -> Option<NoValue>>) {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }
}
