//! Fallbacks (C3, C4): what a caller gets when a call is not admitted, the
//! stale cache behind `stale`, and [`DependencyUnavailable`].

use crate::clock::Instant;
use crate::sync::StdArc as KeyArc;
use std::any::Any;
use std::fmt;
use std::time::Duration;

/// The fallback a dependency declares (C3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Serve the last good value for the call's cache key, if no older than `max_staleness`.
    Stale {
        /// Oldest value that may be served.
        max_staleness: Duration,
    },
    /// Run a caller-supplied degraded behaviour.
    Degraded,
    /// Fail with an error code.
    Error {
        /// The code callers see, e.g. `PAYMENT_UNAVAILABLE`.
        code: String,
    },
}

/// The kind of a [`Fallback`], without its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FallbackKind {
    /// [`Fallback::Stale`].
    Stale,
    /// [`Fallback::Degraded`].
    Degraded,
    /// [`Fallback::Error`].
    Error,
}

impl FallbackKind {
    /// `"stale"`, `"degraded"` or `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackKind::Stale => "stale",
            FallbackKind::Degraded => "degraded",
            FallbackKind::Error => "error",
        }
    }
}

impl Fallback {
    /// The kind.
    #[inline]
    pub fn kind(&self) -> FallbackKind {
        match self {
            Fallback::Stale { .. } => FallbackKind::Stale,
            Fallback::Degraded => FallbackKind::Degraded,
            Fallback::Error { .. } => FallbackKind::Error,
        }
    }

    /// The error code, for `error`.
    pub fn code(&self) -> Option<&str> {
        match self {
            Fallback::Error { code } => Some(code),
            _ => None,
        }
    }
}

/// The dependency could not be served, not even by its fallback (C4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependencyUnavailable {
    /// The dependency.
    pub dependency: String,
    /// The partition: a tenant id, `global` or `<overflow>`.
    pub partition: String,
    /// The declared error code, if the fallback is `error`.
    pub code: Option<String>,
    /// Time until the breaker next admits a probe, when known.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for DependencyUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dependency `{}` is unavailable for partition `{}`",
            self.dependency, self.partition
        )?;
        if let Some(code) = &self.code {
            write!(f, " ({code})")?;
        }
        if let Some(r) = self.retry_after {
            write!(f, "; retry after {:.3}s", r.as_secs_f64())?;
        }
        Ok(())
    }
}

impl std::error::Error for DependencyUnavailable {}

/// Entries kept per stale cache, whatever the number of keys callers use.
pub const STALE_CACHE_CAPACITY: usize = 65_536;

type Value = KeyArc<dyn Any + Send + Sync>;

/// Last good values of one dependency, keyed by (tenant or `global`, cache key).
///
/// Bounded on its own (quick_cache's CLOCK-Pro eviction) and independent of
/// the partition table, so a value outlives the eviction of its partition
/// (C3), and an overflowed tenant still gets its own values (C9).
pub(crate) struct StaleCache {
    cache: quick_cache::sync::Cache<(KeyArc<str>, KeyArc<str>), (Instant, Value)>,
}

impl fmt::Debug for StaleCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCache")
            .field("len", &self.cache.len())
            .finish()
    }
}

impl StaleCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            cache: quick_cache::sync::Cache::new(capacity),
        }
    }

    pub(crate) fn put<T: Clone + Send + Sync + 'static>(
        &self,
        owner: &str,
        key: &str,
        at: Instant,
        value: T,
    ) {
        self.cache
            .insert((owner.into(), key.into()), (at, KeyArc::new(value)));
    }

    /// The value for (owner, key) if it is a `T` no older than `max_age`.
    pub(crate) fn get<T: Clone + Send + Sync + 'static>(
        &self,
        owner: &str,
        key: &str,
        now: Instant,
        max_age: Duration,
    ) -> Option<T> {
        let (at, v) = self.cache.get(&(owner.into(), key.into()))?;
        if now.saturating_duration_since(at) > max_age {
            return None;
        }
        v.downcast_ref::<T>().cloned()
    }
}
