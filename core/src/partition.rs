//! Partitions, and the bounded lock-free table of tenant partitions (C9).
//!
//! Layout. Partitions live in an arena of fixed-size chunks, allocated on
//! first use and freed only with the table, so a `&Partition` stays valid
//! for the table's lifetime and a permit can name its partition by slot
//! index (no reference count per call). The tenant-id → slot map is split
//! into shards; each shard is an immutable hash table behind a
//! `crossbeam_epoch::Atomic`. Lookups pin the epoch and read: no lock, no
//! allocation. Inserting or removing a tenant copies its shard and swaps it
//! in with one compare-and-swap; the old shard is reclaimed by epoch.
//!
//! Eviction recycles a slot. The evictor first moves the slot's word from
//! an idle (or closed) word to `Vacant` with a new generation (one CAS that
//! fails if the partition stopped being evictable), removes the old key
//! from its shard, writes the new owner tag (the new key's hash), and
//! finally stores a fresh closed word with `Release`. Admission re-checks the owner tag for
//! every word it observes (inside the cell's CAS loop), so a call is never
//! admitted into another tenant's partition; permits of the evicted tenant
//! carry an older generation and are recorded as late. Probe permits keep
//! a partition non-idle, so their slots are never recycled under them.
//!
//! Eviction order is sampled, as in Redis' approximated LRU: it scans a few
//! shards from a rotating cursor, takes the first idle partition, widens
//! the scan before settling for the least recently used closed one, and
//! never takes an open, half-open or forced-open one. When nothing is
//! evictable the tenant is served by the dependency's overflow partition.
//!
//! Memory: a partition is 48 bytes in the arena; its tenant id lives once,
//! in its shard entry (inline up to 22 bytes, shared beyond, with the id's
//! hash so rebuilding a shard never rehashes), and its counters are
//! allocated only once something non-healthy happens to it. Shards are
//! rebuilt compactly on every change, so their size follows the live
//! count. Measured in `core/tests/memory.rs`: about 116 bytes per healthy
//! partition with a 12-byte tenant id, all told; about 1.2 MB for a
//! 10,000-tenant table, flat through a flood of 1,000,000 distinct ids.

use crate::metrics::Stats;
use crate::state::cell::Cell;
use crate::state::word::{Phase, Word};
use crate::sync::{
    epoch, thread_index, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, CachePadded,
    Mutex, Ordering, StdArc,
};
use std::hash::BuildHasher;
use std::time::Duration;

/// Partitions per arena chunk.
#[cfg(not(loom))]
const CHUNK: usize = 256;
/// Under loom each partition is several modelled objects, created and torn
/// down in every execution: a small chunk keeps the C9 models tractable.
#[cfg(loom)]
const CHUNK: usize = 4;
/// Shards scanned for an idle partition before settling for an LRU one.
const EVICT_SCAN_IDLE: usize = 64;
/// Shards scanned before an LRU closed partition may be taken.
const EVICT_SCAN_FIRST: usize = 8;

/// Name of a global dependency's single partition.
pub const GLOBAL: &str = "global";
/// Name of a tenant-scoped dependency's overflow partition.
pub const OVERFLOW: &str = "<overflow>";

/// The rolling failure-rate window: `BUCKETS` buckets of `window / BUCKETS`.
///
/// Approximation: the rate covers the current bucket and the nine before it,
/// so the effective window is between 90% and 100% of `window`.
pub(crate) const BUCKETS: usize = 10;
const B_EPOCH_SHIFT: u32 = 40;
const B_CALLS_SHIFT: u32 = 20;
const B_FIELD: u64 = (1 << 20) - 1;
const B_EPOCH: u64 = (1 << 24) - 1;

/// The rolling failure-rate window of one partition.
///
/// Each bucket is one word: (bucket epoch, calls, failures). A global
/// partition keeps one copy of the buckets per core (cache-padded): a
/// thread holding [`thread_index`] `i` below that count is the only writer
/// of copy `i` and counts there with a plain load and store; every other
/// thread (and every thread of a tenant partition, which has no owned
/// copies) counts in the shared copy by CAS. The rate is judged over the
/// sum of all copies.
#[derive(Debug)]
pub(crate) struct Window {
    /// `owned` per-thread copies, then the shared one.
    stripes: Box<[CachePadded<[AtomicU64; BUCKETS]>]>,
    owned: usize,
    width_ns: u64,
    /// ⌈2^64 / width_ns⌉ (`u64::MAX` for a width of 1), for `epoch`.
    width_inv: u64,
    /// The last judgement saw the rate at or above the threshold with too
    /// few calls: only then can a success trip (by completing `min_calls`),
    /// so only then do successes judge.
    armed: AtomicBool,
    /// Epoch of the last trip's clear, or `NEVER`: buckets of that epoch or
    /// older are ignored. An owner's load and store that straddled the
    /// clear can write back a pre-trip count; it lands in a bucket of the
    /// clear's epoch at the latest, so it is never counted.
    cleared: AtomicU64,
}

const NEVER: u64 = u64::MAX;

/// Bucket width from which a coarse clock reading (a few ms behind) is
/// precise enough to pick the bucket.
pub(crate) const COARSE_BUCKET_NS: u64 = 10_000_000;

/// Owned copies for a global partition's window: one per core, within
/// what [`thread_index`] hands out (none under loom).
pub(crate) fn window_stripes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(thread_index::MAX))
}

/// A bucket word after counting one call of epoch `e` into `cur`.
#[inline]
fn bucket_plus(cur: u64, e: u64, failed: bool) -> u64 {
    let (calls, fails) = if cur >> B_EPOCH_SHIFT == e {
        ((cur >> B_CALLS_SHIFT) & B_FIELD, cur & B_FIELD)
    } else {
        (0, 0)
    };
    // A full bucket halves both counts: the rate is kept (and recent calls
    // weigh more) instead of one count saturating while the other climbs.
    let (calls, fails) = if calls >= B_FIELD {
        (calls / 2, fails / 2)
    } else {
        (calls, fails)
    };
    let calls = calls + 1;
    let fails = fails + u64::from(failed);
    (e << B_EPOCH_SHIFT) | (calls << B_CALLS_SHIFT) | fails
}

impl Window {
    /// A window of `window`, with `owned` per-thread copies of the buckets.
    pub(crate) fn new(window: Duration, owned: usize) -> Self {
        let width = u64::try_from(window.as_nanos() / BUCKETS as u128).unwrap_or(u64::MAX);
        let owned = owned.min(thread_index::MAX);
        Self {
            stripes: (0..=owned)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            owned,
            width_ns: width.max(1),
            width_inv: u64::try_from((1u128 << 64).div_ceil(u128::from(width.max(1))))
                .unwrap_or(u64::MAX),
            armed: AtomicBool::new(false),
            cleared: AtomicU64::new(NEVER),
        }
    }

    /// The bucket epoch of `now_ns`: `now_ns / width_ns`, by a multiply
    /// with the width's rounded-up reciprocal instead of a division (the
    /// division was a tenth of a failure-rate call). The quotient can come
    /// out one too high only for `now_ns` within `now_ns / 2^64` widths of
    /// a bucket's end (under 0.1 µs of a 1 ms bucket after a year of
    /// uptime): such a call is counted in the next bucket. Monotone in
    /// `now_ns` like the division, so buckets still follow time.
    #[inline]
    fn epoch(&self, now_ns: u64) -> u64 {
        let q = ((u128::from(now_ns) * u128::from(self.width_inv)) >> 64) as u64;
        q & B_EPOCH
    }

    /// Counts one call.
    #[inline]
    pub(crate) fn record(&self, now_ns: u64, failed: bool) {
        let e = self.epoch(now_ns);
        let at = (e as usize) % BUCKETS;
        // Relaxed throughout: the counts are statistics; the trip itself is
        // decided by the word's CAS.
        if self.owned > 0 {
            if let Some(i) = thread_index::get().filter(|&i| i < self.owned) {
                // This thread is the copy's only writer (see `thread_index`).
                let b = &self.stripes[i][at];
                b.store(
                    bucket_plus(b.load(Ordering::Relaxed), e, failed),
                    Ordering::Relaxed,
                );
                return;
            }
        }
        let b = &self.stripes[self.owned][at];
        let mut cur = b.load(Ordering::Relaxed);
        loop {
            let next = bucket_plus(cur, e, failed);
            match b.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// (calls, failures) over the window ending now.
    pub(crate) fn totals(&self, now_ns: u64) -> (u64, u64) {
        let e = self.epoch(now_ns);
        // Ages below `limit` count: the window's buckets, and of those only
        // the ones after the last trip's clear.
        let limit = match self.cleared.load(Ordering::Relaxed) {
            NEVER => BUCKETS as u64,
            c => (e.wrapping_sub(c) & B_EPOCH).min(BUCKETS as u64),
        };
        let mut calls = 0;
        let mut fails = 0;
        for b in self.stripes.iter().flat_map(|s| s.iter()) {
            // Relaxed: see `record`.
            let v = b.load(Ordering::Relaxed);
            let age = e.wrapping_sub(v >> B_EPOCH_SHIFT) & B_EPOCH;
            if age < limit {
                calls += (v >> B_CALLS_SHIFT) & B_FIELD;
                fails += v & B_FIELD;
            }
        }
        (calls, fails)
    }

    /// Counts a call and judges the rule of C5: trip when failures / calls
    /// ≥ `rate` with at least `min_calls` calls in the window.
    ///
    /// A success lowers the rate, so it can only trip by completing
    /// `min_calls` while the rate is already high: successes judge only
    /// when the last judgement left the window armed. (A window sliding
    /// past old successes can raise the rate without a failure; the next
    /// failure judges that.)
    pub(crate) fn record_and_judge(
        &self,
        now_ns: u64,
        failed: bool,
        rate: f64,
        min_calls: u64,
    ) -> bool {
        self.record(now_ns, failed);
        // Relaxed: a hint; a missed arming delays a trip to the next failure.
        if !failed && !self.armed.load(Ordering::Relaxed) {
            return false;
        }
        let (calls, fails) = self.totals(now_ns);
        let high = fails > 0 && (fails as f64) >= rate * calls as f64;
        let trip = high && calls >= min_calls;
        let armed = high && !trip;
        if self.armed.load(Ordering::Relaxed) != armed {
            self.armed.store(armed, Ordering::Relaxed);
        }
        trip
    }

    /// Whether a coarse clock reading is good enough for this window.
    pub(crate) fn coarse_ok(&self) -> bool {
        self.width_ns >= COARSE_BUCKET_NS
    }

    /// Forgets every call, for a recycled tenant slot (no owned copies, so
    /// no owner can write back an old count).
    pub(crate) fn clear(&self) {
        self.zero();
        self.cleared.store(NEVER, Ordering::Relaxed);
    }

    /// Forgets every call on a trip at `now_ns`, so a closed breaker starts
    /// afresh. Calls in the trip's own bucket are ignored too (see
    /// `cleared`): after an open period shorter than a bucket (window / 10)
    /// the first calls count from the next bucket on.
    pub(crate) fn clear_at(&self, now_ns: u64) {
        self.zero();
        self.cleared.store(self.epoch(now_ns), Ordering::Relaxed);
    }

    fn zero(&self) {
        for b in self.stripes.iter().flat_map(|s| s.iter()) {
            // Relaxed: see `record`.
            b.store(0, Ordering::Relaxed);
        }
        self.armed.store(false, Ordering::Relaxed);
    }
}

/// One breaker: a (dependency, partition) pair's state and counters.
#[derive(Debug)]
pub struct Partition {
    pub(crate) cell: Cell,
    /// Hash tag of the tenant owning this slot (0: global / overflow).
    owner: AtomicU64,
    /// Table tick of the last admission, for LRU eviction.
    last_used: AtomicU64,
    /// Counters, allocated on the first non-healthy event.
    stats: AtomicPtr<Stats>,
    /// Failure-rate window, for the failure-rate policy.
    pub(crate) window: Option<Box<Window>>,
}

impl Drop for Partition {
    fn drop(&mut self) {
        let p = self.stats.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `stats` is null or a pointer from `Box::into_raw` in
            // `stats()`, installed once and freed only here, with `&mut self`.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl Partition {
    pub(crate) fn new(word: Word, window: Option<(Duration, usize)>) -> Self {
        Self {
            cell: Cell::new(word),
            owner: AtomicU64::new(0),
            last_used: AtomicU64::new(0),
            stats: AtomicPtr::new(std::ptr::null_mut()),
            window: window.map(|(w, stripes)| Box::new(Window::new(w, stripes))),
        }
    }

    /// The counters, allocating them on first use.
    #[inline]
    pub(crate) fn stats(&self) -> &Stats {
        // Acquire: pairs with the Release of the CAS that installed it.
        let p = self.stats.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: non-null means installed by the CAS in `first_stats`
            // from a live Box; it is freed only in Drop, which needs `&mut self`.
            return unsafe { &*p };
        }
        self.first_stats()
    }

    #[cold]
    fn first_stats(&self) -> &Stats {
        let fresh = Box::into_raw(Box::default());
        // AcqRel: publish the initialised block / see the winner's.
        match self.stats.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: we just installed `fresh`, a live Box; see above.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: `winner` is the installed block; see above.
                unsafe { &*winner }
            }
        }
    }

    /// Installs `stats` as the counters unless some already are.
    pub(crate) fn install_stats(&self, stats: Stats) {
        let fresh = Box::into_raw(Box::new(stats));
        // AcqRel: as in `stats`.
        if self
            .stats
            .compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `fresh` lost the race and was never shared.
            drop(unsafe { Box::from_raw(fresh) });
        }
    }

    /// The counters if any were ever allocated.
    pub(crate) fn stats_if_any(&self) -> Option<&Stats> {
        // Acquire: as in `stats`.
        let p = self.stats.load(Ordering::Acquire);
        // SAFETY: as in `stats`.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Whether the slot belongs to `owner` in word `w`.
    #[inline]
    pub(crate) fn owned_by(&self, w: Word, owner: u64) -> bool {
        // Acquire: the owner is written before the word that hands the slot
        // over; having seen that word we see its owner.
        w.phase() != Phase::Vacant && self.owner.load(Ordering::Acquire) == owner
    }

    /// Marks the partition used at `tick` (a write only when it changed).
    #[inline]
    pub(crate) fn touch(&self, tick: u64) {
        // Relaxed: an eviction hint.
        if self.last_used.load(Ordering::Relaxed) != tick {
            self.last_used.store(tick, Ordering::Relaxed);
        }
    }

    fn set_owner(&self, owner: u64) {
        if let Some(s) = self.stats_if_any() {
            s.clear();
        }
        if let Some(w) = &self.window {
            w.clear();
        }
        // Release: ordered before the word store that hands the slot over.
        self.owner.store(owner, Ordering::Release);
    }
}

/// Where a tenant's calls go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved<'a> {
    pub(crate) slot: u32,
    pub(crate) part: &'a Partition,
    pub(crate) owner: u64,
}

/// Seeded per table, so tenant ids chosen by callers cannot be aimed at one
/// shard. Under loom a fixed seed: a model's executions must replay the
/// same operations, and some paths (eviction's scan order) follow hashes.
#[cfg(not(loom))]
type TableHasher = foldhash::fast::RandomState;
#[cfg(loom)]
type TableHasher = foldhash::fast::FixedState;

/// Tenant ids up to this many bytes live inside the shard entry.
const INLINE_KEY: usize = 22;

/// A tenant id as a shard stores it: inline when short (no allocation, no
/// pointer to chase on lookup, a plain copy when the shard is rebuilt),
/// shared otherwise.
#[derive(Clone)]
enum TenantKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Shared(StdArc<str>),
}

impl TenantKey {
    fn new(tenant: &str) -> Self {
        let b = tenant.as_bytes();
        if b.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..b.len()].copy_from_slice(b);
            TenantKey::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            TenantKey::Shared(StdArc::from(tenant))
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            TenantKey::Inline { len, bytes } => &bytes[..*len as usize],
            TenantKey::Shared(s) => s.as_bytes(),
        }
    }

    #[inline]
    fn is(&self, tenant: &str) -> bool {
        self.bytes() == tenant.as_bytes()
    }

    /// The id as a string (cold paths). The bytes came from a `&str`, so
    /// the conversion cannot fail; `None` would only mean a bug.
    fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(self.bytes()).ok()
    }
}

/// A shard entry: the key's hash (so rebuilding a shard never rehashes),
/// the key, and the partition's slot.
type Entry = (u64, TenantKey, u32);
type ShardMap = hashbrown::HashTable<Entry>;

struct Shard {
    map: ShardMap,
}

/// The bounded tenant table of one tenant-scoped dependency.
pub(crate) struct Table {
    shards: Box<[epoch::Atomic<Shard>]>,
    shard_bits: u32,
    hasher: TableHasher,
    chunks: Box<[AtomicPtr<Partition>]>,
    capacity: u32,
    /// Next never-used slot (1-based; slot 0 is the overflow partition).
    next: AtomicU32,
    /// Slots released after losing an insert race.
    free: Mutex<Vec<u32>>,
    free_len: AtomicUsize,
    /// Logical time for LRU: advances on each insert.
    tick: AtomicU64,
    cursor: AtomicUsize,
    window: Option<Duration>,
    /// `force_open(None)`: tenants first seen afterwards start forced open.
    pub(crate) forced_all: AtomicBool,
    pub(crate) overflow: Partition,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("capacity", &self.capacity)
            .field("allocated", &self.next.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for c in self.chunks.iter() {
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                let slice = std::ptr::slice_from_raw_parts_mut(p, CHUNK);
                // SAFETY: `p` came from `Box::into_raw` of a `Box<[Partition]>`
                // of length CHUNK in `chunk()`, installed once, freed only here.
                drop(unsafe { Box::from_raw(slice) });
            }
        }
        // SAFETY: `&mut self`: no other thread can hold a guard on our shards.
        let guard = unsafe { epoch::unprotected() };
        for s in self.shards.iter() {
            let p = s.swap(epoch::Shared::null(), Ordering::Acquire, guard);
            if !p.is_null() {
                // SAFETY: unreachable now; nobody else can load it.
                drop(unsafe { p.into_owned() });
            }
        }
    }
}

impl Table {
    pub(crate) fn new(capacity: u32, window: Option<Duration>) -> Self {
        let shards_wanted = (capacity as usize / 32).clamp(1, 4096).next_power_of_two();
        let shard_bits = shards_wanted.trailing_zeros();
        let nchunks = (capacity as usize).div_ceil(CHUNK);
        Self {
            shards: (0..shards_wanted)
                .map(|_| {
                    epoch::Atomic::new(Shard {
                        map: hashbrown::HashTable::new(),
                    })
                })
                .collect(),
            shard_bits,
            hasher: TableHasher::default(),
            chunks: (0..nchunks)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            capacity,
            next: AtomicU32::new(1),
            free: Mutex::new(Vec::new()),
            free_len: AtomicUsize::new(0),
            tick: AtomicU64::new(0),
            cursor: AtomicUsize::new(0),
            window,
            forced_all: AtomicBool::new(false),
            overflow: Partition::new(Word::FRESH, window.map(|w| (w, 1))),
        }
    }

    #[inline]
    fn hash(&self, tenant: &str) -> u64 {
        self.hasher.hash_one(tenant)
    }

    #[inline]
    fn shard(&self, hash: u64) -> &epoch::Atomic<Shard> {
        // Bits 32.. pick the shard: hashbrown takes its bucket index from
        // the low bits and its 7-bit control tag from the top ones, so a
        // shard chosen by either would leave every entry of a shard with
        // the same tag or bucket, and every probe would compare keys.
        let idx = ((hash >> 32) as usize) & ((1usize << self.shard_bits) - 1);
        &self.shards[idx]
    }

    /// The owner tag of a tenant (never 0, which marks "no tenant").
    #[inline]
    pub(crate) fn owner_tag(hash: u64) -> u64 {
        hash | 1
    }

    /// Current LRU tick.
    #[inline]
    pub(crate) fn tick(&self) -> u64 {
        // Relaxed: an eviction hint.
        self.tick.load(Ordering::Relaxed)
    }

    /// The partition at `slot`, if that slot was ever handed out.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&Partition> {
        if slot == 0 {
            return Some(&self.overflow);
        }
        let i = slot as usize - 1;
        let c = self.chunks.get(i / CHUNK)?;
        // Acquire: pairs with the Release of the chunk's installing CAS.
        let p = c.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer is a live allocation of CHUNK
        // partitions, freed only when the table drops, and `i % CHUNK < CHUNK`.
        Some(unsafe { &*p.add(i % CHUNK) })
    }

    fn chunk(&self, idx: usize) -> Option<()> {
        let c = self.chunks.get(idx)?;
        // Acquire: see `get`.
        if !c.load(Ordering::Acquire).is_null() {
            return Some(());
        }
        let vacant = Word::FRESH.with_phase(Phase::Vacant);
        let b: Box<[Partition]> = (0..CHUNK)
            .map(|_| Partition::new(vacant, self.window.map(|w| (w, 1))))
            .collect();
        let raw = Box::into_raw(b) as *mut Partition;
        // AcqRel: publish the initialised chunk / see the winner's.
        if c.compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
        {
            let slice = std::ptr::slice_from_raw_parts_mut(raw, CHUNK);
            // SAFETY: we allocated it above and lost the race: never shared.
            drop(unsafe { Box::from_raw(slice) });
        }
        Some(())
    }

    /// Looks a tenant up without creating it. Lock-free, allocation-free.
    #[inline]
    pub(crate) fn lookup(&self, tenant: &str) -> Option<Resolved<'_>> {
        let hash = self.hash(tenant);
        let owner = Self::owner_tag(hash);
        let slot = {
            let guard = epoch::pin();
            // Acquire: see the shard's contents as published.
            let shard = self.shard(hash).load(Ordering::Acquire, &guard);
            // SAFETY: shards are never null while the table lives (replaced,
            // never cleared, before Drop) and the guard keeps this one alive.
            let shard = unsafe { shard.deref() };
            shard
                .map
                .find(hash, |(h, k, _)| *h == hash && k.is(tenant))
                .map(|(_, _, s)| *s)?
        };
        let part = self.get(slot)?;
        part.owned_by(part.cell.load(), owner)
            .then_some(Resolved { slot, part, owner })
    }

    /// Looks a tenant up, inserting it if needed; `None` when the table is
    /// full of partitions that cannot be evicted (use the overflow).
    pub(crate) fn get_or_insert(&self, tenant: &str) -> Option<Resolved<'_>> {
        loop {
            if let Some(r) = self.lookup(tenant) {
                return Some(r);
            }
            let hash = self.hash(tenant);
            let owner = Self::owner_tag(hash);
            let slot = self.alloc_slot()?;
            let part = self.get(slot)?;
            let key = TenantKey::new(tenant);
            part.set_owner(owner);
            // Relaxed: an eviction hint.
            let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
            part.touch(tick);
            let vacant = part.cell.load();
            let phase = if self.forced_all.load(Ordering::Acquire) {
                Phase::ForcedOpen
            } else {
                Phase::Closed
            };
            part.cell.store(vacant.transition(phase).with_trips(0));
            if self.publish(hash, key, slot) {
                return Some(Resolved { slot, part, owner });
            }
            // Lost the race to another inserter of the same tenant.
            part.cell.store(part.cell.load().transition(Phase::Vacant));
            self.release(slot);
        }
    }

    fn alloc_slot(&self) -> Option<u32> {
        // Relaxed: a hint; the list itself is behind the mutex.
        if self.free_len.load(Ordering::Relaxed) > 0 {
            if let Ok(mut f) = self.free.lock() {
                if let Some(s) = f.pop() {
                    self.free_len.store(f.len(), Ordering::Relaxed);
                    return Some(s);
                }
            }
        }
        // Relaxed: only uniqueness matters; chunk publication has its own ordering.
        let s = self.next.fetch_add(1, Ordering::Relaxed);
        if s <= self.capacity {
            self.chunk((s as usize - 1) / CHUNK)?;
            return Some(s);
        }
        self.next.fetch_sub(1, Ordering::Relaxed);
        self.evict()
    }

    fn release(&self, slot: u32) {
        if let Ok(mut f) = self.free.lock() {
            f.push(slot);
            self.free_len.store(f.len(), Ordering::Relaxed);
        }
    }

    /// The one copy-on-write loop over a shard: `edit` sees the current
    /// shard and returns its replacement, or `None` to leave it as it is
    /// (then the loop returns false). The replaced shard is reclaimed once
    /// no pinned reader can still see it.
    fn rewrite_shard(&self, hash: u64, mut edit: impl FnMut(&Shard) -> Option<ShardMap>) -> bool {
        let guard = epoch::pin();
        let atomic = self.shard(hash);
        loop {
            // Acquire: see the shard we copy.
            let cur = atomic.load(Ordering::Acquire, &guard);
            // SAFETY: see `lookup`.
            let shard = unsafe { cur.deref() };
            let Some(map) = edit(shard) else {
                return false;
            };
            // AcqRel: publish the new shard / see a competing one.
            match atomic.compare_exchange(
                cur,
                epoch::Owned::new(Shard { map }),
                Ordering::AcqRel,
                Ordering::Acquire,
                &guard,
            ) {
                Ok(_) => {
                    // SAFETY: `cur` is unlinked; readers pinned before now
                    // may still see it, so destruction waits for the epoch.
                    unsafe { guard.defer_destroy(cur) };
                    return true;
                }
                Err(_) => crate::sync::spin_hint(),
            }
        }
    }

    /// Publishes tenant → slot in its shard; false if another slot won.
    fn publish(&self, hash: u64, key: TenantKey, slot: u32) -> bool {
        self.rewrite_shard(hash, |shard| {
            let same = |k: &TenantKey| k.bytes() == key.bytes();
            if let Some((_, _, other)) = shard.map.find(hash, |(h, k, _)| *h == hash && same(k)) {
                // An entry naming our own slot is stale: we hold the slot.
                let live = *other != slot
                    && self
                        .get(*other)
                        .is_some_and(|p| p.owned_by(p.cell.load(), Self::owner_tag(hash)));
                if live {
                    return None;
                }
            }
            let mut map = self.copy_without(&shard.map, 1, |k, _| same(k));
            map.insert_unique(hash, (hash, key.clone(), slot), |e| e.0);
            Some(map)
        })
    }

    /// A compact copy of a shard's map without the entries `drop` names,
    /// with room for `extra` more. Rebuilt rather than cloned so removals
    /// leave no tombstones behind: a shard's size follows its live count,
    /// however many tenants have come and gone.
    fn copy_without(
        &self,
        map: &ShardMap,
        extra: usize,
        drop: impl Fn(&TenantKey, u32) -> bool,
    ) -> ShardMap {
        let mut out = hashbrown::HashTable::with_capacity(map.len() + extra);
        for e in map.iter().filter(|(_, k, s)| !drop(k, *s)) {
            out.insert_unique(e.0, e.clone(), |e| e.0);
        }
        out
    }

    /// Removes tenant → slot from its shard if it still maps there.
    fn unpublish(&self, key: &str, slot: u32) {
        let hash = self.hash(key);
        self.rewrite_shard(hash, |shard| {
            shard.map.find(hash, |(_, k, s)| k.is(key) && *s == slot)?;
            Some(self.copy_without(&shard.map, 0, |k, s| k.is(key) && s == slot))
        });
    }

    /// Finds a victim, makes it vacant, unlinks it; returns its slot.
    fn evict(&self) -> Option<u32> {
        let n = self.shards.len();
        // Relaxed: only spreads the scans.
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        let mut lru: Option<(u64, u32, Word, TenantKey)> = None;
        for i in 0..n.min(EVICT_SCAN_IDLE) {
            if i == EVICT_SCAN_FIRST && lru.is_some() {
                break;
            }
            let guard = epoch::pin();
            // Acquire: see `lookup`.
            let shard = self.shards[(start + i) % n].load(Ordering::Acquire, &guard);
            // SAFETY: see `lookup`.
            let shard = unsafe { shard.deref() };
            for (h, key, slot) in shard.map.iter() {
                let Some(p) = self.get(*slot) else { continue };
                let w = p.cell.load();
                // The shard may predate the slot's recycling: only the
                // owner's own entry may take (and unpublish) it.
                if !p.owned_by(w, Self::owner_tag(*h)) {
                    continue;
                }
                if w.is_idle() {
                    if self.take(p, w, key, *slot) {
                        return Some(*slot);
                    }
                } else if w.phase() == Phase::Closed && w.probes() == 0 {
                    // Relaxed: an eviction hint.
                    let used = p.last_used.load(Ordering::Relaxed);
                    if lru.as_ref().is_none_or(|(u, ..)| used < *u) {
                        lru = Some((used, *slot, w, key.clone()));
                    }
                }
            }
        }
        let (_, slot, w, key) = lru?;
        let p = self.get(slot)?;
        self.take(p, w, &key, slot).then_some(slot)
    }

    fn take(&self, p: &Partition, seen: Word, key: &TenantKey, slot: u32) -> bool {
        let Some(key) = key.to_str() else {
            return false;
        };
        if !p.cell.try_replace(seen, seen.transition(Phase::Vacant)) {
            return false;
        }
        self.unpublish(key, slot);
        true
    }

    /// The tenant id owning `slot` (cold paths: events, snapshots). The
    /// partition keeps only its owner tag, the key's hash with the low bit
    /// set, which names the shard; the key itself lives in the shard.
    pub(crate) fn key_of(&self, slot: u32, part: &Partition) -> Option<StdArc<str>> {
        // Acquire: see `owned_by`.
        let owner = part.owner.load(Ordering::Acquire);
        if slot == 0 || owner == 0 {
            return None;
        }
        let guard = epoch::pin();
        // Both candidate hashes pick the same shard (bits 32..): one load,
        // whatever the hash (loom replays need the same operations).
        // Acquire: see `lookup`.
        let shard = self.shard(owner).load(Ordering::Acquire, &guard);
        // SAFETY: see `lookup`.
        let shard = unsafe { shard.deref() };
        [owner, owner & !1].into_iter().find_map(|hash| {
            shard
                .map
                .find(hash, |(h, _, s)| *h == hash && *s == slot)
                .and_then(|(_, k, _)| k.to_str().map(StdArc::from))
        })
    }

    /// Every live tenant partition with its slot and key.
    pub(crate) fn live(&self) -> Vec<(u32, &Partition, StdArc<str>)> {
        // Relaxed: a snapshot; slots beyond a racing insert are skipped.
        let end = self.next.load(Ordering::Relaxed).min(self.capacity + 1);
        (1..end)
            .filter_map(|s| {
                let p = self.get(s)?;
                if p.cell.load().phase() == Phase::Vacant {
                    return None;
                }
                Some((s, p, self.key_of(s, p)?))
            })
            .collect()
    }
}

/// Bytes of one tenant partition in the arena (the key and its map entry
/// come on top; counters only once something non-healthy happens).
/// 48 bytes on 64-bit targets; `core/tests/memory.rs` measures the whole
/// (about 121 bytes with a 12-byte tenant id).
pub const PARTITION_BYTES: usize = std::mem::size_of::<Partition>();

// C9's budget: a partition within 128 bytes plus its key, with room for the
// key's shard entry and reference-counted allocation.
#[cfg(not(loom))]
const _: () = assert!(PARTITION_BYTES <= 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c5_window_saturation_keeps_the_rate() {
        let w = Window::new(Duration::from_secs(10), 3);
        for i in 0..3 * B_FIELD {
            w.record(0, i % 2 == 0);
        }
        let (calls, fails) = w.totals(0);
        let rate = fails as f64 / calls as f64;
        assert!((0.49..=0.51).contains(&rate), "{fails}/{calls}");
    }

    #[test]
    fn c9_short_and_long_tenant_ids_resolve_and_name_their_partition() {
        let t = Table::new(8, None);
        let long = "tenant-0123456789-0123456789-0123456789"; // shared, not inline
        for id in ["a", "exactly-twenty-two-by!", long] {
            let r = t.get_or_insert(id).expect("room");
            let again = t.lookup(id).expect("inserted");
            assert_eq!(again.slot, r.slot, "{id}");
            assert_eq!(t.key_of(r.slot, r.part).as_deref(), Some(id));
        }
        assert!(t.lookup("exactly-twenty-two-by?").is_none());
        assert_eq!(t.live().len(), 3);
    }

    #[test]
    fn c5_striped_window_sums_every_thread() {
        let w = Window::new(Duration::from_secs(10), 3);
        std::thread::scope(|s| {
            for t in 0..4 {
                let w = &w;
                s.spawn(move || {
                    for i in 0..1000 {
                        w.record(0, (i + t) % 4 == 0);
                    }
                });
            }
        });
        assert_eq!(w.totals(0), (4000, 1000));
    }

    #[test]
    fn c5_live_threads_hold_different_indices() {
        // Regression: stripes picked by TLS address put every thread on one.
        let gate = std::sync::Barrier::new(4);
        let ids: Vec<Option<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let i = thread_index::get();
                        gate.wait(); // all four alive at once
                        i
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().ok().flatten()).collect()
        });
        // Tests running beside this one may hold indices too: the ones we
        // got must differ, and at least two are left for us.
        let got: Vec<usize> = ids.iter().flatten().copied().collect();
        let mut distinct = got.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), got.len(), "indices {ids:?}");
        assert!(got.len() >= 2, "indices {ids:?}");
    }

    #[test]
    fn c5_owned_copies_and_shared_copy_sum_exactly() {
        // More threads than owned copies: the first count alone, the rest
        // share by CAS; waves of threads hand their copies on.
        let w = Window::new(Duration::from_secs(10), 2);
        for _ in 0..3 {
            std::thread::scope(|s| {
                for t in 0..6 {
                    let w = &w;
                    s.spawn(move || {
                        for i in 0..2000 {
                            w.record(0, (i + t) % 4 == 0);
                        }
                    });
                }
            });
        }
        assert_eq!(w.totals(0), (36_000, 9_000));
    }

    #[test]
    fn c5_epoch_by_reciprocal_matches_division_but_at_bucket_ends() {
        for window_ms in [1u64, 7, 10, 333, 10_000, 3_600_000] {
            let w = Window::new(Duration::from_millis(window_ms), 0);
            let width = w.width_ns;
            for now in [
                0,
                1,
                width - 1,
                width,
                width + 1,
                123_456_789_012,
                u64::MAX / 3,
            ] {
                let exact = (now / width) & B_EPOCH;
                let got = w.epoch(now);
                // One higher only right at a bucket's end.
                let early = got == ((now / width + 1) & B_EPOCH)
                    && width - now % width <= now / (1 << 40) + 1;
                assert!(
                    got == exact || early,
                    "window {window_ms} ms, now {now}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn c5_a_trip_forgets_its_own_bucket_and_older() {
        let w = Window::new(Duration::from_secs(10), 2);
        for _ in 0..10 {
            w.record(0, true);
        }
        w.clear_at(500_000_000); // same 1 s bucket as the calls
                                 // A count written back over the clear (an owner's load and store
                                 // that straddled it) lands in the trip's bucket: ignored.
        w.record(600_000_000, true);
        assert_eq!(w.totals(900_000_000), (0, 0));
        // The next bucket counts again.
        w.record(1_200_000_000, false);
        assert_eq!(w.totals(1_300_000_000), (1, 0));
        // A recycled slot starts with no memory of the trip.
        w.clear();
        w.record(1_400_000_000, true);
        assert_eq!(w.totals(1_400_000_000), (1, 1));
    }

    #[test]
    fn c5_success_judges_only_when_armed() {
        let w = Window::new(Duration::from_secs(10), 1);
        assert!(!w.record_and_judge(0, true, 0.5, 3), "1 call < min_calls");
        assert!(w.armed.load(Ordering::Relaxed), "rate high, too few calls");
        assert!(
            !w.record_and_judge(0, false, 0.5, 3),
            "1/2 but only 2 calls"
        );
        assert!(w.armed.load(Ordering::Relaxed), "still high");
        assert!(!w.record_and_judge(0, false, 0.5, 3), "1/3 < 50%");
        assert!(
            !w.armed.load(Ordering::Relaxed),
            "disarmed once the rate fell"
        );
        let w = Window::new(Duration::from_secs(10), 1);
        w.record_and_judge(0, true, 0.5, 2);
        assert!(
            w.record_and_judge(0, false, 0.5, 2),
            "the success completes min_calls at 50%"
        );
    }

    #[test]
    fn c5_window_counts_within_the_window_only() {
        let w = Window::new(Duration::from_secs(10), 3);
        let s = 1_000_000_000;
        w.record(0, true);
        w.record(5 * s, false);
        assert_eq!(w.totals(5 * s), (2, 1));
        assert_eq!(
            w.totals(10 * s + 1),
            (1, 0),
            "the first bucket left the window"
        );
        w.clear();
        assert_eq!(w.totals(5 * s), (0, 0));
    }
}
