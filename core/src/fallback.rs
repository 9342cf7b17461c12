//! Fallbacks (C3, C4): what a caller gets when a call is not admitted, the
//! stale cache behind `stale`, and [`DependencyUnavailable`].

use crate::clock::Instant;
use crate::sync::StdArc as KeyArc;
use crate::sync::{AtomicBool, Ordering};
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
/// A papaya map: its reads never block, whatever writers do, so a refused
/// call served from here never waits on a lock (C3); writes (a successful
/// call's value) may. Bounded on its own: past its capacity a writer drops
/// entries, those too old to be served first, so memory stays bounded
/// whatever keys callers use. A replaced or trimmed value is dropped once
/// no reader can still see it (papaya's deferred reclamation), not at
/// once. Independent of the partition table, so a
/// value outlives the eviction of its partition (C3), and an overflowed
/// tenant still gets its own values (C9).
pub(crate) struct StaleCache {
    map: papaya::HashMap<CacheKey, (Instant, Value), foldhash::fast::RandomState>,
    capacity: usize,
    max_staleness: Duration,
    /// Held (by `try`, never waited for) by the writer that trims the map.
    trimming: AtomicBool,
}

/// A cache entry's key: (tenant or `global`, cache key).
#[derive(Clone, PartialEq, Eq)]
struct CacheKey {
    owner: KeyArc<str>,
    key: KeyArc<str>,
}

impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&*self.owner, &*self.key).hash(h)
    }
}

/// A lookup's key, borrowed: no allocation on the refused path.
#[derive(Hash)]
struct Lookup<'a>(&'a str, &'a str);

impl papaya::Equivalent<CacheKey> for Lookup<'_> {
    fn equivalent(&self, k: &CacheKey) -> bool {
        *k.owner == *self.0 && *k.key == *self.1
    }
}

impl fmt::Debug for StaleCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCache")
            .field("len", &self.map.len())
            .finish()
    }
}

impl StaleCache {
    pub(crate) fn new(capacity: usize, max_staleness: Duration) -> Self {
        Self {
            map: papaya::HashMap::builder()
                .capacity(capacity.min(1024))
                .hasher(foldhash::fast::RandomState::default())
                .build(),
            capacity,
            max_staleness,
            trimming: AtomicBool::new(false),
        }
    }

    pub(crate) fn put<T: Clone + Send + Sync + 'static>(
        &self,
        owner: &str,
        key: &str,
        at: Instant,
        value: T,
    ) {
        let k = CacheKey {
            owner: owner.into(),
            key: key.into(),
        };
        self.map.pin().insert(k, (at, KeyArc::new(value)));
        if self.map.len() > self.capacity {
            self.trim(at);
        }
    }

    /// Brings the map back under its capacity, with room for a sixteenth
    /// more: entries too old to be served go first, then any. One writer
    /// at a time; the others go on (the map stays bounded: each over-full
    /// writer either trims or sees another one trimming).
    #[cold]
    fn trim(&self, now: Instant) {
        // Acquire/Release: hands the map's state from one trimmer to the next.
        if self.trimming.swap(true, Ordering::Acquire) {
            return;
        }
        let target = self.capacity - self.capacity / 16;
        let map = self.map.pin();
        let stale: Vec<CacheKey> = map
            .iter()
            .filter(|(_, (at, _))| now.saturating_duration_since(*at) > self.max_staleness)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &stale {
            map.remove(k);
        }
        if map.len() > target {
            let extra = map.len() - target;
            let any: Vec<CacheKey> = map.iter().take(extra).map(|(k, _)| k.clone()).collect();
            for k in &any {
                map.remove(k);
            }
        }
        self.trimming.store(false, Ordering::Release);
    }

    /// The value for (owner, key) if it is a `T` no older than `max_age`.
    pub(crate) fn get<T: Clone + Send + Sync + 'static>(
        &self,
        owner: &str,
        key: &str,
        now: Instant,
        max_age: Duration,
    ) -> Option<T> {
        let map = self.map.pin();
        let (at, v) = map.get(&Lookup(owner, key))?;
        if now.saturating_duration_since(*at) > max_age {
            return None;
        }
        v.downcast_ref::<T>().cloned()
    }

    /// Entries held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c3_the_stale_cache_stays_bounded_and_serves_what_it_keeps() {
        let c = StaleCache::new(1000, Duration::from_secs(60));
        let t = |s: u64| Instant::from_nanos(s * 1_000_000_000);
        for i in 0..10_000u32 {
            c.put("acme", &format!("k{i}"), t(u64::from(i) / 100), i);
        }
        assert!(c.len() <= 1000, "{} entries", c.len());
        // The newest value is served; one older than max_age is not.
        assert_eq!(
            c.get::<u32>("acme", "k9999", t(100), Duration::from_secs(60)),
            Some(9999)
        );
        assert_eq!(
            c.get::<u32>("acme", "k9999", t(200), Duration::from_secs(60)),
            None
        );
        // Keys are (owner, key): another tenant's value is not served.
        assert_eq!(
            c.get::<u32>("globex", "k9999", t(100), Duration::from_secs(60)),
            None
        );
        // A value of another type is not served as this one.
        assert_eq!(
            c.get::<String>("acme", "k9999", t(100), Duration::from_secs(60)),
            None
        );
    }
}
