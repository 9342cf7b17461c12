//! Fallbacks (C3, C4): what a caller gets when a call is not admitted, the
//! stale cache behind `stale`, and [`DependencyUnavailable`].

use crate::clock::Instant;
use crate::partition::{GLOBAL, OVERFLOW};
use crate::sync::StdArc as KeyArc;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
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
    /// Why no fallback served (C4).
    pub why: Unserved,
}

/// Why a refused call was served no fallback (C4): its error's message
/// says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unserved {
    /// The declared fallback is `error`: its code is the answer.
    ErrorFallback,
    /// `stale`: no good value was cached for the call's key.
    NoValueCached,
    /// `stale`: the cached value is older than `max_staleness`, by `by`.
    TooOld {
        /// How much older than `max_staleness` it is.
        by: Duration,
    },
    /// `degraded`: the call gave no degraded behaviour.
    NoDegraded,
    /// `degraded`: the degraded behaviour failed (a binding chains its
    /// error to the refusal).
    DegradedFailed,
    /// The tenant id is not one (C9): nothing is served to it.
    InvalidTenant,
}

impl fmt::Display for Unserved {
    /// The reason in words, as the refusal's message ends.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unserved::ErrorFallback => f.write_str("the declared fallback is an error"),
            Unserved::NoValueCached => f.write_str("no value cached for that key"),
            Unserved::TooOld { by } => write!(
                f,
                "the cached value is older than max_staleness by {:.3}s",
                by.as_secs_f64()
            ),
            Unserved::NoDegraded => f.write_str("no degraded behaviour was given"),
            Unserved::DegradedFailed => f.write_str("the degraded behaviour failed"),
            Unserved::InvalidTenant => f.write_str("the tenant id is invalid"),
        }
    }
}

impl DependencyUnavailable {
    /// The error as borrowed fields, for its message.
    pub fn borrowed(&self) -> UnavailableRef<'_> {
        UnavailableRef {
            dependency: &self.dependency,
            partition: PartitionName::of(&self.partition),
            code: self.code.as_deref(),
            retry_after: self.retry_after,
            why: self.why,
        }
    }
}

impl fmt::Display for DependencyUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.borrowed(), f)
    }
}

/// A partition's name as a refusal reports it, borrowed: no string is
/// made for it (C1, C9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartitionName<'a> {
    /// A global dependency's one partition, `global`.
    Global,
    /// A tenant-scoped dependency's shared partition, `<overflow>`: a
    /// missing or invalid tenant, or one not in the table.
    Overflow,
    /// A tenant's own partition, named by the tenant id.
    Tenant(&'a str),
}

impl<'a> PartitionName<'a> {
    /// The name: the tenant id, `global` or `<overflow>`.
    pub const fn as_str(&self) -> &'a str {
        match *self {
            PartitionName::Global => GLOBAL,
            PartitionName::Overflow => OVERFLOW,
            PartitionName::Tenant(t) => t,
        }
    }

    /// The partition called `name` (a tenant id of either reserved name
    /// cannot be told apart from the reserved partition, and reads as it).
    pub fn of(name: &'a str) -> Self {
        match name {
            GLOBAL => PartitionName::Global,
            OVERFLOW => PartitionName::Overflow,
            t => PartitionName::Tenant(t),
        }
    }
}

impl fmt::Display for PartitionName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// [`DependencyUnavailable`] borrowed from the dependency, its declared
/// fallback and the caller's tenant id: what a refusal reports, made
/// without allocating. [`into_owned`](Self::into_owned) makes the error;
/// its message is this one's `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnavailableRef<'a> {
    /// The dependency.
    pub dependency: &'a str,
    /// The partition.
    pub partition: PartitionName<'a>,
    /// The declared error code, if the fallback is `error`.
    pub code: Option<&'a str>,
    /// Time until the breaker next admits a probe, when known.
    pub retry_after: Option<Duration>,
    /// Why no fallback served (C4).
    pub why: Unserved,
}

impl UnavailableRef<'_> {
    /// The owned error.
    pub fn into_owned(self) -> DependencyUnavailable {
        DependencyUnavailable {
            dependency: self.dependency.to_owned(),
            partition: self.partition.as_str().to_owned(),
            code: self.code.map(str::to_owned),
            retry_after: self.retry_after,
            why: self.why,
        }
    }
}

impl fmt::Display for UnavailableRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dependency `{}` is unavailable for partition `{}`",
            self.dependency, self.partition
        )?;
        if let Some(code) = self.code {
            write!(f, " ({code})")?;
        }
        if self.why != Unserved::ErrorFallback {
            write!(f, ": {}", self.why)?;
        }
        if let Some(r) = self.retry_after {
            write!(f, "; retry after {:.3}s", r.as_secs_f64())?;
        }
        Ok(())
    }
}

impl std::error::Error for DependencyUnavailable {}

fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

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
    /// In ns: what trimming drops first. Set again by a reload (C20).
    max_staleness: AtomicU64,
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
            max_staleness: AtomicU64::new(nanos_of(max_staleness)),
            trimming: AtomicBool::new(false),
        }
    }

    /// The age past which trimming drops entries first (a reload's new
    /// `max_staleness`).
    pub(crate) fn set_max_staleness(&self, max_staleness: Duration) {
        // Relaxed: a trimming hint; no other memory is published with it.
        self.max_staleness
            .store(nanos_of(max_staleness), Ordering::Relaxed);
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
        // Relaxed: see `set_max_staleness`.
        let max = Duration::from_nanos(self.max_staleness.load(Ordering::Relaxed));
        let stale: Vec<CacheKey> = map
            .iter()
            .filter(|(_, (at, _))| now.saturating_duration_since(*at) > max)
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

    /// The value for (owner, key) if it is a `T` no older than `max_age`,
    /// else why not (C4).
    pub(crate) fn get<T: Clone + Send + Sync + 'static>(
        &self,
        owner: &str,
        key: &str,
        now: Instant,
        max_age: Duration,
    ) -> Result<T, Unserved> {
        let map = self.map.pin();
        let (at, v) = map
            .get(&Lookup(owner, key))
            .ok_or(Unserved::NoValueCached)?;
        let age = now.saturating_duration_since(*at);
        if age > max_age {
            return Err(Unserved::TooOld { by: age - max_age });
        }
        v.downcast_ref::<T>()
            .cloned()
            .ok_or(Unserved::NoValueCached)
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

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn c3_each_fallback_kind_has_its_profile_name() {
        let kinds = [
            (
                Fallback::Stale {
                    max_staleness: Duration::from_secs(1),
                },
                "stale",
                None,
            ),
            (Fallback::Degraded, "degraded", None),
            (
                Fallback::Error {
                    code: "DOWN".into(),
                },
                "error",
                Some("DOWN"),
            ),
        ];
        for (f, name, code) in kinds {
            assert_eq!(f.kind().as_str(), name);
            assert_eq!(f.code(), code);
        }
    }

    #[test]
    fn c4_dependency_unavailable_says_which_partition_why_and_when() {
        let mut e = DependencyUnavailable {
            dependency: "payments_client".into(),
            partition: "acme".into(),
            code: Some("PAYMENT_UNAVAILABLE".into()),
            retry_after: Some(Duration::from_millis(1_500)),
            why: Unserved::ErrorFallback,
        };
        assert_eq!(
            e.to_string(),
            "dependency `payments_client` is unavailable for partition `acme` \
             (PAYMENT_UNAVAILABLE); retry after 1.500s"
        );
        e.code = None;
        e.retry_after = None;
        e.why = Unserved::TooOld {
            by: Duration::from_millis(250),
        };
        assert_eq!(
            e.to_string(),
            "dependency `payments_client` is unavailable for partition `acme`: \
             the cached value is older than max_staleness by 0.250s"
        );
    }

    #[test]
    fn c3_a_value_exactly_max_staleness_old_is_served_one_older_is_not() {
        let c = StaleCache::new(16, Duration::from_secs(10));
        c.put("acme", "k", t(1_000), 7u32);
        let max = Duration::from_secs(10);
        assert_eq!(c.get::<u32>("acme", "k", t(11_000), max).ok(), Some(7));
        assert_eq!(c.get::<u32>("acme", "k", t(11_001), max).ok(), None);
        // A reading from before the write (another thread's clock) serves it.
        assert_eq!(c.get::<u32>("acme", "k", t(500), max).ok(), Some(7));
        assert!(format!("{c:?}").contains("len: 1"));
    }

    #[test]
    fn c3_trimming_drops_stale_values_first_and_keeps_a_sixteenth_of_room() {
        let max = Duration::from_secs(10);
        let c = StaleCache::new(32, max);
        // 16 values too old to be served at 20 s, then 16 fresh ones.
        for i in 0..16u32 {
            c.put("acme", &format!("old{i}"), t(0), i);
        }
        for i in 0..16u32 {
            c.put("acme", &format!("new{i}"), t(20_000), i);
        }
        assert_eq!(c.len(), 32, "at capacity, nothing trimmed");
        // One more at 20 s: over capacity, the 16 stale values go and
        // nothing fresh does (17 <= 30, the target).
        c.put("acme", "one-more", t(20_000), 99);
        assert_eq!(c.len(), 17);
        for i in 0..16u32 {
            assert_eq!(
                c.get::<u32>("acme", &format!("new{i}"), t(20_000), max)
                    .ok(),
                Some(i)
            );
        }
        // A value exactly max_staleness old is not stale: kept by a trim.
        let c = StaleCache::new(32, max);
        for i in 0..32u32 {
            c.put("acme", &format!("edge{i}"), t(10_000), i);
        }
        c.put("acme", "late", t(20_000), 0);
        // Nothing was stale: the trim removed only enough for room
        // (33 -> 30), never below the target.
        assert_eq!(c.len(), 30);
        // Over capacity with nothing stale, it still comes back under.
        let c = StaleCache::new(16, max);
        for i in 0..40u32 {
            c.put("acme", &format!("k{i}"), t(0), i);
            assert!(c.len() <= 16, "{} entries after {i}", c.len());
        }
    }

    #[test]
    fn c3_c9_a_value_is_served_only_for_its_own_tenant_and_key() {
        // Many keys, so that lookups of absent (tenant, key) pairs meet
        // stored entries in the map's probe sequences: each must compare
        // both halves of the key.
        let c = StaleCache::new(8192, Duration::from_secs(60));
        for i in 0..4000u32 {
            c.put("acme", &format!("k{i}"), t(0), i);
        }
        for i in 0..4000u32 {
            let k = format!("k{i}");
            assert_eq!(
                c.get::<u32>("acme", &k, t(0), Duration::from_secs(60)).ok(),
                Some(i)
            );
            assert_eq!(
                c.get::<u32>("globex", &k, t(0), Duration::from_secs(60))
                    .ok(),
                None
            );
            let other = format!("x{i}");
            assert_eq!(
                c.get::<u32>("acme", &other, t(0), Duration::from_secs(60))
                    .ok(),
                None
            );
        }
    }

    #[test]
    fn c3_one_trimmer_at_a_time_the_flag_is_released() {
        let c = StaleCache::new(16, Duration::from_secs(10));
        for i in 0..17u32 {
            c.put("acme", &format!("k{i}"), t(0), i);
        }
        assert!(!c.trimming.load(Ordering::Relaxed), "released after a trim");
        assert_eq!(c.len(), 15);
        // While another writer trims, a writer does not trim.
        c.trimming.store(true, Ordering::Relaxed);
        for i in 17..20u32 {
            c.put("acme", &format!("k{i}"), t(0), i);
        }
        assert_eq!(c.len(), 18);
    }

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
            c.get::<u32>("acme", "k9999", t(100), Duration::from_secs(60))
                .ok(),
            Some(9999)
        );
        assert_eq!(
            c.get::<u32>("acme", "k9999", t(200), Duration::from_secs(60))
                .ok(),
            None
        );
        // Keys are (owner, key): another tenant's value is not served.
        assert_eq!(
            c.get::<u32>("globex", "k9999", t(100), Duration::from_secs(60))
                .ok(),
            None
        );
        // A value of another type is not served as this one.
        assert_eq!(
            c.get::<String>("acme", "k9999", t(100), Duration::from_secs(60))
                .ok(),
            None
        );
    }
}
