//! Call wrappers and fallback serving (C3, C4): running a call through
//! its breaker, and what a refused call gets instead. Every surface drives
//! the one sequence in [`running`]: [`Dependency::begin`], then a
//! [`Running`] call's end or a [`Refused`] one's fallback.

mod running;
pub use running::{Begun, Ended, NotServed, Raw, Recording, Refused, Running};

use crate::clock::Instant;
use crate::dependency::permit::*;
use crate::dependency::*;
use crate::fallback::{DependencyUnavailable, Fallback, PartitionName, UnavailableRef, Unserved};
use crate::metrics::{bump, Stats};
use crate::outcome::*;
use crate::partition::GLOBAL;
use crate::sync::AtomicU64;
use std::any::Any;
use std::fmt;
use std::future::Future;

/// The stale-cache key of a call that names none.
const DEFAULT_CACHE_KEY: &str = "";

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
    /// A tenant-scoped dependency was called with a tenant id that names
    /// no partition (C9, [`AdmitError::InvalidTenant`]): nothing ran,
    /// nothing was counted.
    InvalidTenant {
        /// What is wrong with it.
        problem: crate::outcome::TenantProblem,
    },
    /// The handle's dependency was removed from the bank by a reload, or
    /// started afresh by one (C20): nothing ran, nothing was counted.
    UnknownDependency,
}

impl<E> From<AdmitError> for CallError<E> {
    fn from(e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => CallError::TenantRequired,
            AdmitError::InvalidTenant { problem } => CallError::InvalidTenant { problem },
            AdmitError::UnknownDependency => CallError::UnknownDependency,
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
            CallError::InvalidTenant { problem } => {
                fmt::Display::fmt(&AdmitError::InvalidTenant { problem: *problem }, f)
            }
            CallError::UnknownDependency => fmt::Display::fmt(&AdmitError::UnknownDependency, f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for CallError<E> {}

/// Options of [`Dependency::call_with`] and
/// [`Dependency::call_async_with`]: the stale-cache key, a degraded
/// behaviour (returning `None` when it cannot serve), and this call's
/// classifiers of errors and of returned values (C17).
pub struct CallOptions<'a, T, E> {
    /// Key of the value in the stale cache (`stale` fallbacks).
    pub cache_key: Option<&'a str>,
    /// The degraded behaviour (`degraded` fallbacks).
    pub degraded: Option<Box<dyn FnOnce() -> Option<T> + 'a>>,
    /// What this call's error counts as (C17): [`Outcome::Failure`],
    /// [`Outcome::Success`] (an expected answer such as "not found") or
    /// [`Outcome::Cancelled`] (counts as neither). `None`: the
    /// dependency's default ([`Dependency::set_classify`]), else every
    /// error is a failure. The error is returned to the caller whatever it
    /// counts as.
    pub classify: Option<&'a dyn Fn(&E) -> Outcome>,
    /// What a returned value counts as (C17): an `Ok` that is an error
    /// answer ([`Outcome::Failure`]), as resilience4j's `recordResult` or
    /// gobreaker's `IsSuccessful` say. `None`: every value is a success.
    /// The value is returned to the caller whatever it counts as, and
    /// kept for `stale` fallbacks only when it counted as a success.
    pub classify_ok: Option<&'a dyn Fn(&T) -> Outcome>,
}

impl<T, E> Default for CallOptions<'_, T, E> {
    fn default() -> Self {
        Self {
            cache_key: None,
            degraded: None,
            classify: None,
            classify_ok: None,
        }
    }
}

impl<T, E> fmt::Debug for CallOptions<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("cache_key", &self.cache_key)
            .field("degraded", &self.degraded.is_some())
            .field("classify", &self.classify.is_some())
            .field("classify_ok", &self.classify_ok.is_some())
            .finish()
    }
}

/// A dependency's default error classifier (C17), set once with
/// [`Dependency::set_classify`]: it sees the error of a wrapped call
/// (`call`, `call_with`, `call_async`, `call_async_with`) as `&dyn Any`,
/// since each call has its own error type, and says what it counts as, or
/// `None` to leave it to the default rule (a failure).
pub type Classifier = dyn Fn(&dyn Any) -> Option<Outcome> + Send + Sync;

impl Dependency {
    /// Sets the dependency's default error classifier (C17), once: every
    /// handle of the dependency sees it, and a wrapped call whose options
    /// carry no classifier of their own uses it. `Err(classify)` if one was
    /// set already. Explicit records ([`Permit::record`]) are the caller's
    /// word and never classified.
    ///
    /// ```
    /// use breakerbank::{Bank, CallError, ManualClock, Outcome, Profile, State};
    /// use std::io;
    ///
    /// let bank = Bank::with_clock(Profile::from_yaml(r#"
    /// dependencies:
    ///   users_client:
    ///     isolation: global
    ///     trip: {consecutive_failures: 1}
    ///     open_duration: 30s
    ///     half_open: {probe_budget: 1, success_threshold: 1}
    ///     fallback: {kind: error, code: USERS_DOWN}
    ///     recovery_bound: 5m
    /// "#)?, ManualClock::new());
    /// let users = bank.dependency("users_client").unwrap();
    /// // "Not found" is an answer, not an outage.
    /// users
    ///     .set_classify(|e| match e.downcast_ref::<io::Error>()?.kind() {
    ///         io::ErrorKind::NotFound => Some(Outcome::Success),
    ///         _ => None,
    ///     })
    ///     .unwrap_or_else(|_| panic!("set once"));
    /// let missing = users.call(None, None, || {
    ///     Err::<(), _>(io::Error::from(io::ErrorKind::NotFound))
    /// });
    /// assert!(matches!(missing, Err(CallError::Inner(_))), "still returned");
    /// assert_eq!(users.state(None)?, State::Closed, "but not counted");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_classify<F>(&self, classify: F) -> Result<(), F>
    where
        F: Fn(&dyn Any) -> Option<Outcome> + Send + Sync + 'static,
    {
        let mut given = Some(classify);
        let _ = self
            .inner
            .classify
            .get_or_init(|| Box::new(given.take().expect("taken once")));
        match given {
            None => Ok(()),
            Some(f) => Err(f),
        }
    }

    /// What the error of a wrapped call counts as (C17), the one place
    /// the rule is applied: this call's classifier if it has one, else
    /// the dependency's default if it says, else a failure
    /// ([`Outcome::of_error`]).
    pub fn classify_error<E: 'static>(
        &self,
        error: &E,
        per_call: Option<&dyn Fn(&E) -> Outcome>,
    ) -> Outcome {
        if let Some(f) = per_call {
            return f(error);
        }
        self.inner
            .classify
            .get()
            .and_then(|f| f(error))
            .unwrap_or_else(|| Outcome::of_error(error))
    }

    /// The error a rejection amounts to when no fallback is served (C4):
    /// for callers that handle rejections themselves. Counts nothing.
    pub fn unavailable(
        &self,
        tenant: Option<&str>,
        rejection: &Rejection<'_>,
    ) -> DependencyUnavailable {
        self.unavailable_ref(tenant, rejection).into_owned()
    }

    /// [`unavailable`](Self::unavailable), borrowed: nothing is
    /// allocated (for bindings that make their own error from it).
    pub fn unavailable_ref<'a>(
        &'a self,
        tenant: Option<&'a str>,
        rejection: &Rejection<'a>,
    ) -> UnavailableRef<'a> {
        let why = match (self.tenant_rule(tenant), rejection.fallback) {
            (Err(AdmitError::InvalidTenant { .. }), _) => Unserved::InvalidTenant,
            (_, Fallback::Error { .. }) => Unserved::ErrorFallback,
            (_, Fallback::Degraded) => Unserved::NoDegraded,
            (_, Fallback::Stale { .. }) => Unserved::NoValueCached,
        };
        UnavailableRef {
            dependency: &self.inner.name,
            partition: self.partition_name(tenant),
            code: rejection.fallback.code(),
            retry_after: rejection.retry_after,
            why,
        }
    }

    /// Serves the declared fallback for a rejection (C3, C4): the one place
    /// fallbacks are chosen and counted. `stale` serves the last good value
    /// for (tenant or `global`, `cache_key`, `""` without one) no older
    /// than `max_staleness`;
    /// `degraded` runs `degraded` (`None` from it means it failed); `error`
    /// always yields [`DependencyUnavailable`] with the code. A fallback
    /// never turns into a recorded success. A tenant id that is not one
    /// (C9) is served nothing and counted nowhere:
    /// [`DependencyUnavailable`] for the `<overflow>` partition. The
    /// error says why nothing was served ([`Unserved`]).
    pub fn serve_fallback<T: Clone + Send + Sync + 'static>(
        &self,
        tenant: Option<&str>,
        rejection: &Rejection<'_>,
        cache_key: Option<&str>,
        degraded: Option<impl FnOnce() -> Option<T>>,
    ) -> Result<T, DependencyUnavailable> {
        self.serve_fallback_ref(tenant, rejection, cache_key, degraded)
            .map_err(UnavailableRef::into_owned)
    }

    /// [`serve_fallback`](Self::serve_fallback) with the error borrowed:
    /// a refusal allocates nothing (for bindings that make their own
    /// error from it). Marked inline: a binding instantiates it, and
    /// without the hint whether its refusal path inlines it depends on how
    /// the binding's crate happens to be split into codegen units.
    #[inline]
    pub fn serve_fallback_ref<'a, T: Clone + Send + Sync + 'static>(
        &'a self,
        tenant: Option<&'a str>,
        rejection: &Rejection<'a>,
        cache_key: Option<&str>,
        degraded: Option<impl FnOnce() -> Option<T>>,
    ) -> Result<T, UnavailableRef<'a>> {
        self.serve_with(tenant, rejection, degraded, |owner| {
            self.stale_value::<T>(rejection, owner, cache_key)
        })
    }

    /// The `stale` fallback's value for (`owner`, `cache_key`), or why
    /// there is none (C4).
    #[inline]
    pub(crate) fn stale_value<T: Clone + Send + Sync + 'static>(
        &self,
        rejection: &Rejection<'_>,
        owner: &str,
        cache_key: Option<&str>,
    ) -> Result<T, Unserved> {
        let inner = &*self.inner;
        let Fallback::Stale { max_staleness } = rejection.fallback else {
            return Err(Unserved::NoValueCached);
        };
        let key = cache_key.unwrap_or(DEFAULT_CACHE_KEY);
        inner.stale.get().map_or(Err(Unserved::NoValueCached), |c| {
            c.get::<T>(owner, key, inner.clock.now(), *max_staleness)
        })
    }

    /// The fallback for a rejection, with the stale value looked up by
    /// `stale` (given the cache's owner: the tenant or `global`): the one
    /// place a fallback is chosen and counted, whether or not the value
    /// type can be cached.
    #[inline]
    pub(crate) fn serve_with<'a, T>(
        &'a self,
        tenant: Option<&'a str>,
        rejection: &Rejection<'a>,
        degraded: Option<impl FnOnce() -> Option<T>>,
        stale: impl FnOnce(&str) -> Result<T, Unserved>,
    ) -> Result<T, UnavailableRef<'a>> {
        let inner = &*self.inner;
        let unavailable = |partition, code, why| UnavailableRef {
            dependency: &inner.name,
            partition,
            code,
            retry_after: rejection.retry_after,
            why,
        };
        let tenant = match self.tenant_rule(tenant) {
            Ok(t) => t,
            Err(AdmitError::TenantRequired | AdmitError::UnknownDependency) => None,
            Err(AdmitError::InvalidTenant { .. }) => {
                return Err(unavailable(
                    PartitionName::Overflow,
                    rejection.fallback.code(),
                    Unserved::InvalidTenant,
                ))
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
        let unavailable = |code, why| unavailable(partition, code, why);
        match rejection.fallback {
            Fallback::Error { code } => {
                count(|s| &s.fallback_error_total);
                Err(unavailable(Some(code), Unserved::ErrorFallback))
            }
            Fallback::Degraded => {
                let served = match degraded {
                    None => Err(Unserved::NoDegraded),
                    Some(f) => f().ok_or(Unserved::DegradedFailed),
                };
                match served {
                    Ok(v) => {
                        count(|s| &s.fallback_degraded_total);
                        Ok(v)
                    }
                    Err(why) => {
                        count(|s| &s.fallback_failures_total);
                        Err(unavailable(None, why))
                    }
                }
            }
            Fallback::Stale { .. } => match stale(tenant.unwrap_or(GLOBAL)) {
                Ok(v) => {
                    count(|s| &s.fallback_stale_total);
                    Ok(v)
                }
                Err(why) => {
                    count(|s| &s.fallback_failures_total);
                    Err(unavailable(None, why))
                }
            },
        }
    }

    /// The stale-cache rule (C3), for every surface: the value a call
    /// returned is kept for `stale` fallbacks when the call counted as a
    /// success (`counted`, as [`Permit::finish`] or
    /// [`record_raw`](Self::record_raw) returned it: a success at least
    /// `slow_call` long counts as a failure and is not kept), under
    /// `cache_key` or, without one, the dependency's default key `""`.
    /// `value` is made only when kept.
    pub fn keep_stale<T: Clone + Send + Sync + 'static>(
        &self,
        tenant: Option<&str>,
        cache_key: Option<&str>,
        counted: Outcome,
        value: impl FnOnce() -> T,
    ) {
        // The fallback in force decides: a cache kept from an earlier
        // `stale` profile is not filled while another fallback is declared.
        if counted == Outcome::Success
            && matches!(self.fallback(), Fallback::Stale { .. })
            && self.inner.stale.get().is_some()
        {
            self.cache_put(tenant, cache_key.unwrap_or(DEFAULT_CACHE_KEY), value());
        }
    }

    /// Stores a good value for `stale` fallbacks (a no-op for other kinds,
    /// and for a tenant id longer than [`MAX_TENANT_LEN`] bytes, C9). Calls
    /// go through [`keep_stale`](Self::keep_stale), which decides whether
    /// their value is kept.
    pub fn cache_put<T: Clone + Send + Sync + 'static>(
        &self,
        tenant: Option<&str>,
        key: &str,
        value: T,
    ) {
        if let Some(c) = self.inner.stale.get() {
            let owner = match self.tenant_rule(tenant) {
                Ok(t) => t.unwrap_or(GLOBAL),
                Err(AdmitError::TenantRequired | AdmitError::UnknownDependency) => GLOBAL,
                Err(AdmitError::InvalidTenant { .. }) => return,
            };
            c.put(owner, key, self.inner.clock.now(), value);
        }
    }

    /// Runs `f` if admitted and records its outcome; otherwise serves the
    /// fallback, which with no cache key or degraded behaviour can only be
    /// [`CallError::Unavailable`]. See [`call_with`](Self::call_with).
    #[inline]
    pub fn call<T, E: 'static>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        // A panic in `f` drops the running call, which records `Cancelled`
        // (C13), or a slow failure past `slow_call` (C10).
        // `begin` spelled out: the admission's answer is matched where
        // it is made, so the permit stays in registers (`Begun` is a
        // wider value than `Decision`).
        match self.admit(tenant, deadline)? {
            Decision::Admitted(permit) => finish(Running::new(tenant, permit), f()),
            Decision::Rejected(r) => refused_nothing(Refused::of(self, tenant, r)),
        }
    }

    /// Like [`call`](Self::call), with a stale-cache key, a degraded
    /// behaviour and classifiers ([`CallOptions`]): a value is kept for `stale` fallbacks as
    /// [`keep_stale`](Self::keep_stale) says; a rejection serves the declared fallback (C3, C4).
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
    /// let opts = || CallOptions { cache_key: Some("sku-1"), ..Default::default() };
    /// let fresh = catalog.call_with(None, None, opts(), || Ok::<_, String>(42));
    /// assert_eq!(fresh.unwrap(), 42);
    /// let failed = catalog.call_with(None, None, opts(), || Err::<i32, _>("boom".to_string()));
    /// assert!(matches!(failed, Err(CallError::Inner(_))));
    /// // Open now: the last good value is served without calling.
    /// let stale = catalog.call_with(None, None, opts(), || -> Result<i32, String> { unreachable!() });
    /// assert_eq!(stale.unwrap(), 42);
    /// ```
    pub fn call_with<T: Clone + Send + Sync + 'static, E: 'static>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        options: CallOptions<'_, T, E>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        match self.begin(tenant, deadline)? {
            Begun::Running(call) => finish_with(call, &options, f()),
            Begun::Refused(refused) => refused_with(refused, options),
        }
    }

    /// The async twin of [`call`](Self::call). If the returned future is
    /// dropped mid-call, the call is given up ([`Running::given_up`]):
    /// cancelled, or a slow failure once it ran `slow_call` (C10, C13).
    pub async fn call_async<T, E: 'static>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, CallError<E>> {
        match self.begin(tenant, deadline)? {
            Begun::Running(call) => finish(call, fut.await),
            Begun::Refused(refused) => refused_nothing(refused),
        }
    }

    /// The async twin of [`call_with`](Self::call_with). If the returned
    /// future is dropped mid-call, the call is given up (C10, C13).
    pub async fn call_async_with<T: Clone + Send + Sync + 'static, E: 'static>(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
        options: CallOptions<'_, T, E>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, CallError<E>> {
        match self.begin(tenant, deadline)? {
            Begun::Running(call) => finish_with(call, &options, fut.await),
            Begun::Refused(refused) => refused_with(refused, options),
        }
    }
}

/// The call's result as [`Dependency::call`] returns it, its outcome
/// recorded (an error's by the dependency's classifier, C17).
#[inline(always)]
fn finish<'a, T, E: 'static>(
    call: Running<'a, Permit<'a>>,
    out: Result<T, E>,
) -> Result<T, CallError<E>> {
    // The result moves straight through, without being borrowed across
    // the record.
    match out {
        Ok(v) => {
            call.end(Outcome::Success);
            Ok(v)
        }
        Err(e) => {
            call.end_err(&e, None);
            Err(CallError::Inner(e))
        }
    }
}

/// `call`'s error for a refusal. Out of line: built in the caller, the
/// error's value was merged with the admitted path's result through
/// the stack, which cost the healthy call more than the breaker did.
#[inline(never)]
fn refused_nothing<T, E>(refused: Refused<'_>) -> Result<T, CallError<E>> {
    Err(refused.serve_nothing().into())
}

/// The result of a running call as `call_with` returns it: its outcome
/// recorded (classified by `options`, C17), a success kept for `stale`
/// fallbacks.
fn finish_with<'a, T: Clone + Send + Sync + 'static, E: 'static>(
    call: Running<'a, Permit<'a>>,
    options: &CallOptions<'_, T, E>,
    out: Result<T, E>,
) -> Result<T, CallError<E>> {
    match out {
        Ok(v) => {
            call.end_ok(&v, options.classify_ok)
                .keep(options.cache_key, || v.clone());
            Ok(v)
        }
        Err(e) => {
            call.end_err(&e, options.classify);
            Err(CallError::Inner(e))
        }
    }
}

/// `call_with`'s answer to a refusal: the declared fallback (C3, C4).
fn refused_with<T: Clone + Send + Sync + 'static, E>(
    refused: Refused<'_>,
    options: CallOptions<'_, T, E>,
) -> Result<T, CallError<E>> {
    refused
        .serve(options.cache_key, options.degraded)
        .map_err(CallError::from)
}

impl<E> From<NotServed<'_>> for CallError<E> {
    fn from(e: NotServed<'_>) -> Self {
        match e {
            NotServed::DeadlineExpired => CallError::DeadlineExpired,
            NotServed::Unavailable(u) => CallError::Unavailable(u.into_owned()),
        }
    }
}

/// The value type of a fallback served without a cache key or degraded
/// behaviour (`call`'s): uninhabited, so no cache entry can be of it and
/// serving can only fail. (A type a caller can name, such as `()`, could
/// have been cached by a `call_with` under the default key.)
#[derive(Clone, Copy)]
pub(crate) enum NoValue {}
