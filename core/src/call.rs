//! Call wrappers and fallback serving (C3, C4): running a call through
//! its breaker, and what a refused call gets instead.

use crate::clock::Instant;
use crate::dependency::permit::*;
use crate::dependency::*;
use crate::fallback::{DependencyUnavailable, Fallback};
use crate::metrics::{bump, Stats};
use crate::outcome::*;
use crate::partition::{GLOBAL, OVERFLOW};
use crate::sync::AtomicU64;
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
    /// A tenant-scoped dependency was called with a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes (C9): nothing ran, nothing was counted.
    InvalidTenant {
        /// The length given, in bytes.
        len: usize,
    },
    /// The handle's dependency was removed from the bank by a reload, or
    /// its isolation changed (C20): nothing ran, nothing was counted.
    UnknownDependency,
}

impl<E> From<AdmitError> for CallError<E> {
    fn from(e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => CallError::TenantRequired,
            AdmitError::InvalidTenant { len } => CallError::InvalidTenant { len },
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
            CallError::InvalidTenant { len } => {
                fmt::Display::fmt(&AdmitError::InvalidTenant { len: *len }, f)
            }
            CallError::UnknownDependency => fmt::Display::fmt(&AdmitError::UnknownDependency, f),
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

impl Dependency {
    /// The error a rejection amounts to when no fallback is served (C4):
    /// for callers that handle rejections themselves. Counts nothing.
    pub fn unavailable(
        &self,
        tenant: Option<&str>,
        rejection: &Rejection<'_>,
    ) -> DependencyUnavailable {
        DependencyUnavailable {
            dependency: self.inner.name.clone(),
            partition: self.partition_of(tenant),
            code: rejection.fallback.code().map(str::to_string),
            retry_after: rejection.retry_after,
        }
    }

    /// Serves the declared fallback for a rejection (C3, C4): the one place
    /// fallbacks are chosen and counted. `stale` serves the last good value
    /// for (tenant or `global`, `cache_key`, `""` without one) no older
    /// than `max_staleness`;
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
        let tenant = match self.tenant_rule(tenant) {
            Ok(t) => t,
            Err(AdmitError::TenantRequired | AdmitError::UnknownDependency) => None,
            Err(AdmitError::InvalidTenant { .. }) => {
                return Err(DependencyUnavailable {
                    dependency: inner.name.clone(),
                    partition: OVERFLOW.to_string(),
                    code: rejection.fallback.code().map(str::to_string),
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
            dependency: inner.name.clone(),
            partition: partition.clone(),
            code,
            retry_after: rejection.retry_after,
        };
        match rejection.fallback {
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
                let key = cache_key.unwrap_or(DEFAULT_CACHE_KEY);
                let hit = inner
                    .stale
                    .get()
                    .and_then(|c| c.get::<T>(owner, key, inner.clock.now(), *max_staleness));
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

    pub(crate) fn reject_to_error<T, E>(
        &self,
        tenant: Option<&str>,
        r: &Rejection<'_>,
    ) -> Result<T, CallError<E>> {
        if !r.reason.serves_fallback() {
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
    pub(crate) fn refused<T, E>(
        &self,
        tenant: Option<&str>,
        r: &Rejection<'_>,
    ) -> Result<T, CallError<E>> {
        self.reject_to_error(tenant, r)
    }

    /// Like [`call`](Self::call), with a stale-cache key and a degraded
    /// behaviour: a value is kept for `stale` fallbacks as
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
                let counted = p.finish(&out, Outcome::of_error);
                if let Ok(v) = &out {
                    self.keep_stale(tenant, options.cache_key, counted, || v.clone());
                }
                out.map_err(CallError::Inner)
            }
            Decision::Rejected(r) if !r.reason.serves_fallback() => Err(CallError::DeadlineExpired),
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
}

fn unreachable_value<T>() -> T {
    // `serve_fallback::<()>` without a cache key or degraded behaviour can
    // only fail; this keeps the types honest without an unwrap.
    unreachable!("a fallback without cache key or degraded behaviour cannot serve a value")
}

/// The call's result as [`Dependency::call`] returns it, its outcome
/// recorded by `p` under the core's error rule ([`Outcome::of_error`]).
#[inline(always)]
fn finish<T, E>(p: Permit<'_>, out: Result<T, E>) -> Result<T, CallError<E>> {
    // `Permit::finish` spelled out: the result moves straight through,
    // without being borrowed across the record.
    match out {
        Ok(v) => {
            p.record(Outcome::Success);
            Ok(v)
        }
        Err(e) => {
            p.record(Outcome::of_error(&e));
            Err(CallError::Inner(e))
        }
    }
}
