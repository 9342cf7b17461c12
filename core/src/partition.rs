//! Partitions, and the bounded lock-free table of tenant partitions (C9).
//!
//! Layout. Partitions live in one zeroed arena of 32-byte slots, two a
//! cache line and two a tenant the table may hold, freed only with the
//! table, so a `&Partition` stays valid for the table's lifetime and a
//! permit can name its partition by slot index (no reference count per
//! call). A slot holds the word, the owner's id (up to 15 bytes) or a
//! keyed 120-bit fingerprint of it (longer ids), and a pointer to a cold
//! part made on the first non-healthy event (open-until, counters, LRU
//! tick, window). Each tenant has two home lines, computed from its hash;
//! it takes a free slot in the first, else in the second, else anywhere.
//! A lookup asks for both home lines at once and confirms the tenant on
//! the slot itself: one cache miss for nearly every tenant (about 97.5% of
//! a full table sit at home), no pin, no shard. The tenant-id → slot map
//! is split into shards; each shard is an immutable hash table behind a
//! `crossbeam_epoch::Atomic`. Inserting or removing a tenant copies its
//! shard and swaps it in with one compare-and-swap; the old shard is
//! reclaimed by epoch. The few tenants away from home are found through
//! the tenant index, a fixed array of `tag | slot` hints (see `Index`),
//! confirmed on the slot the same way. Hints that are missing or stale go
//! to the shards (pin the epoch and read, comparing whole ids). Either way
//! no lock, no allocation.
//!
//! Slots. A free slot has no key and a word no one is admitted to; a
//! newcomer holds one by moving its word to `Vacant` with a new generation
//! (one CAS), writes its key, publishes itself in its shard, and stores a
//! fresh closed word with `Release`. Eviction holds a victim the same way:
//! it moves an idle (or closed) word to `Vacant` (one CAS that fails if
//! the partition stopped being evictable), removes the old key from its
//! shard, and then hands the slot to the newcomer or, if a home of the
//! newcomer is free, frees it (no key, then a closed word). Admission
//! re-checks the key for every word it observes (inside the cell's CAS
//! loop), so a call is never admitted into another tenant's partition;
//! permits of the evicted tenant carry an older generation and are
//! recorded as late. Probe permits keep a partition non-idle, so their
//! slots are never recycled under them.
//!
//! Eviction order is sampled, as in Redis' approximated LRU: it scans a few
//! shards from a rotating cursor, takes the first idle partition, widens
//! the scan before settling for the least recently used closed one, and
//! never takes an open, half-open or forced-open one. When nothing is
//! evictable the tenant is served by the dependency's overflow partition.
//!
//! Memory: a tenant takes two 32-byte slots in the arena; its shard entry
//! is 32 bytes (the id packed in two words up to 15 bytes, shared beyond,
//! with the id's hash so rebuilding a shard never rehashes); the index adds
//! 2 bytes per `max_tenants`; the cold part is allocated only once
//! something non-healthy happens to a partition. Shards are rebuilt
//! compactly on every change, so their size follows the live count.
//! Each slot's tenure (`Table::tenure`) adds 8 bytes a slot.
//! Measured in `core/tests/memory.rs`: about 138 bytes per healthy
//! partition with a 12-byte tenant id, all told (table skeleton included);
//! flat through a flood of 1,000,000 distinct ids into a 10,000-tenant
//! table.

use crate::metrics::Stats;
use crate::state::cell::{Cell, Probes, Side, Step, Until};
use crate::state::word::{Phase, Word};
use crate::sync::{
    epoch, thread_index, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, CachePadded, Installed,
    Ordering, StdArc,
};
use siphasher::sip128::SipHasher13;
use std::hash::BuildHasher;
use std::time::Duration;

/// Most shards a table has (see `Table::new`): their index takes hash
/// bits 32..47.
const MAX_SHARDS: usize = 1 << 15;
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
/// sum of all copies, on a failure (and on a success only when armed:
/// see [`Window::record_and_judge`]); a judgement well below the
/// threshold leaves passes, so the failures after it need not sum again
/// (see [`Window::pass`]).
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
    /// Per owned copy, each bucket as the last clear found it: what the
    /// sum subtracts from a bucket still of that epoch. Owned copies are
    /// not zeroed by a clear, because their owner's plain load and store
    /// could straddle the zeroing and write the old counts back; counted
    /// from a snapshot instead, such a write-back adds only its own call.
    baseline: Box<[[AtomicU64; BUCKETS]]>,
    /// Failures that may be counted without a judgement (see
    /// [`Window::pass`]): a judgement that finds the rate well below the
    /// threshold leaves the number of further failures, all in its bucket
    /// epoch, that cannot raise it to the threshold even if no success
    /// came between, so they need not sum the window again.
    spare: AtomicU64,
    /// For a tenant slot's window, the generation of the closed episode
    /// it counts (see `Cold::episodes`); `u64::MAX` otherwise.
    pub(crate) episode: u64,
}

// The `spare` word: version (bits 36..64) | bucket epoch (12..36) | passes
// left (0..12).
const S_PASSES: u64 = (1 << 12) - 1;
const S_EPOCH_SHIFT: u32 = 12;
const S_VERSION_SHIFT: u32 = 36;

/// Bucket width from which a coarse clock reading (a few ms behind) is
/// precise enough to pick the bucket.
pub(crate) const COARSE_BUCKET_NS: u64 = 10_000_000;

/// Owned copies for a global partition's window: one per core, within
/// what [`thread_index`] hands out (none under loom).
pub(crate) fn window_stripes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(thread_index::MAX))
}

/// A bucket word after counting one call of epoch `e` into `cur`, and
/// whether that halved a full bucket.
#[inline]
fn bucket_plus(cur: u64, e: u64, failed: bool) -> (u64, bool) {
    // The usual case first, as one add: the bucket is of this epoch and not
    // full (failures never outnumber calls, so neither count carries).
    if cur >> B_EPOCH_SHIFT == e && (cur >> B_CALLS_SHIFT) & B_FIELD < B_FIELD {
        return (cur + (1 << B_CALLS_SHIFT) + u64::from(failed), false);
    }
    let (calls, fails) = if cur >> B_EPOCH_SHIFT == e {
        ((cur >> B_CALLS_SHIFT) & B_FIELD, cur & B_FIELD)
    } else {
        (0, 0)
    };
    // A full bucket halves both counts: the rate is kept (and recent calls
    // weigh more) instead of one count saturating while the other climbs.
    let halved = calls >= B_FIELD;
    let (calls, fails) = if halved {
        (calls / 2, fails / 2)
    } else {
        (calls, fails)
    };
    let calls = calls + 1;
    let fails = fails + u64::from(failed);
    (
        (e << B_EPOCH_SHIFT) | (calls << B_CALLS_SHIFT) | fails,
        halved,
    )
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
            baseline: (0..owned)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            spare: AtomicU64::new(0),
            episode: u64::MAX,
        }
    }

    /// A tenant slot's window for the closed episode of `generation`: no
    /// owned copies, so every count is a CAS on the shared one.
    pub(crate) fn new_episode(window: Duration, generation: u64) -> Self {
        Self {
            episode: generation,
            ..Self::new(window, 0)
        }
    }

    /// The window's length.
    fn width(&self) -> Duration {
        Duration::from_nanos(self.width_ns.saturating_mul(BUCKETS as u64))
    }

    /// The tick of `now_ns`: `now_ns / width_ns`, by a multiply
    /// with the width's rounded-up reciprocal instead of a division (the
    /// division was a tenth of a failure-rate call). The quotient can come
    /// out one too high only for `now_ns` within `now_ns / 2^64` widths of
    /// a bucket's end (under 0.1 µs of a 1 ms bucket after a year of
    /// uptime): such a call is counted in the next bucket. Monotone in
    /// `now_ns` like the division, so buckets still follow time.
    #[inline]
    fn tick(&self, now_ns: u64) -> u64 {
        ((u128::from(now_ns) * u128::from(self.width_inv)) >> 64) as u64
    }

    /// The bucket epoch of `now_ns` as the buckets store it: [`Window::tick`]
    /// in 24 bits. Ages are taken modulo 2^24, so a bucket is out of the
    /// window whatever its epoch once its age reaches `BUCKETS`.
    #[inline]
    fn epoch(&self, now_ns: u64) -> u64 {
        self.tick(now_ns) & B_EPOCH
    }

    /// Counts one call.
    #[inline]
    pub(crate) fn record(&self, now_ns: u64, failed: bool) {
        if self.count(self.tick(now_ns), failed) {
            self.void_passes();
        }
    }

    /// Counts one call of tick `t` in its bucket; whether that halved a
    /// full bucket.
    #[inline(always)]
    fn count(&self, t: u64, failed: bool) -> bool {
        // The bucket follows the whole tick, not its 24-bit epoch: 2^24 is
        // not a multiple of `BUCKETS`, so at the epoch's wrap the masked
        // value would reuse a bucket only six ticks old, dropping calls
        // still in the window.
        let at = (t % BUCKETS as u64) as usize;
        let e = t & B_EPOCH;
        // Relaxed throughout: the counts are statistics; the trip itself is
        // decided by the word's CAS.
        if self.owned > 0 {
            if let Some(i) = thread_index::get().filter(|&i| i < self.owned) {
                // This thread is the copy's only writer (see `thread_index`).
                let b = &self.stripes[i][at];
                let (next, halved) = bucket_plus(b.load(Ordering::Relaxed), e, failed);
                b.store(next, Ordering::Relaxed);
                return halved;
            }
        }
        let b = &self.stripes[self.owned][at];
        let mut cur = b.load(Ordering::Relaxed);
        loop {
            let (next, halved) = bucket_plus(cur, e, failed);
            match b.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return halved,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Voids every pass granted so far (a new version of `spare`): after a
    /// clear, and after a full bucket halved its counts, which can raise
    /// the window's rate without a failure (the halved bucket may have
    /// held mostly successes). A failure that takes a pass between the
    /// halving store and this void is not judged: passes are exact for
    /// the window's counts except across that step, and a halving takes
    /// 2^20 calls in one bucket (window / 10).
    #[cold]
    fn void_passes(&self) {
        // AcqRel: as every step on `spare` (see `pass`).
        let _ = self
            .spare
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |cur| {
                Some(((cur >> S_VERSION_SHIFT) + 1) << S_VERSION_SHIFT)
            });
    }

    /// (calls, failures) over the window ending now.
    pub(crate) fn totals(&self, now_ns: u64) -> (u64, u64) {
        // Both counts side by side in one sum (calls in the high half:
        // at most 2^20 per bucket, under 2^29 in all), a mask instead of a
        // branch per bucket, ages in 32 bits: every judgement sums all
        // the buckets.
        let e = self.epoch(now_ns) as u32;
        let limit = BUCKETS as u32;
        let both = |v: u64| ((v << (32 - B_CALLS_SHIFT)) & (B_FIELD << 32)) | (v & B_FIELD);
        let mut sum = 0u64;
        let mut below = 0u64;
        for (i, stripe) in self.stripes.iter().enumerate() {
            let base = self.baseline.get(i);
            for (k, b) in stripe.iter().enumerate() {
                // Relaxed: see `record`.
                let v = b.load(Ordering::Relaxed);
                let age = e.wrapping_sub((v >> B_EPOCH_SHIFT) as u32) & B_EPOCH as u32;
                let keep = u64::from(age < limit).wrapping_neg();
                sum += both(v) & keep;
                if let Some(base) = base {
                    // Relaxed: a snapshot of this copy; see `clear`.
                    let z = base[k].load(Ordering::Relaxed);
                    if z != 0 && z >> B_EPOCH_SHIFT == v >> B_EPOCH_SHIFT {
                        below += both(z) & keep;
                    }
                }
            }
        }
        // A halved bucket can hold less than its snapshot: count it as 0.
        let calls = (sum >> 32).saturating_sub(below >> 32);
        let fails = (sum & 0xffff_ffff).saturating_sub(below & 0xffff_ffff);
        (calls, fails.min(calls))
    }

    /// Whether no call is counted in the window ending now (C9: such a
    /// partition is idle, as far as its window goes).
    pub(crate) fn is_empty(&self, now_ns: u64) -> bool {
        self.totals(now_ns).0 == 0
    }

    /// Counts a call and judges the rule of C5: trip when failures / calls
    /// ≥ `rate` with at least `min_calls` calls in the window.
    ///
    /// A success lowers the rate, so it can only trip by completing
    /// `min_calls` while the rate is already high: successes judge only
    /// when the last judgement left the window armed. (A window sliding
    /// past old successes can raise the rate without a failure; the next
    /// failure judges that.)
    #[inline(always)]
    pub(crate) fn record_and_judge(
        &self,
        now_ns: u64,
        failed: bool,
        rate: f64,
        min_calls: u64,
    ) -> bool {
        self.record(now_ns, failed);
        if failed {
            return self.judge_failure(now_ns, rate, min_calls);
        }
        // Relaxed: a hint; a missed arming delays a trip to the next failure.
        self.armed.load(Ordering::Relaxed) && self.judge(now_ns, rate, min_calls, None)
    }

    /// A counted failure's pass or judgement; out of line, so that the
    /// success before it stays a few instructions in the caller.
    #[inline(never)]
    fn judge_failure(&self, now_ns: u64, rate: f64, min_calls: u64) -> bool {
        match self.pass(self.epoch(now_ns)) {
            Ok(()) => false,
            Err(marked) => self.judge(now_ns, rate, min_calls, Some(marked)),
        }
    }

    /// Every failure's one step on `spare`, after counting itself: takes a
    /// pass (`Ok`: no judgement needed) or, when none is left for its
    /// epoch, marks the word with a new version and returns it (`Err`).
    ///
    /// Why that is exact: all failures go through this word one after
    /// another (AcqRel read-modify-writes), and each wrote its bucket
    /// before. A judgement follows its own mark, so it sums every failure
    /// marked or passed before it; it installs passes only if the word is
    /// still its mark, so no failure came between its sum and the
    /// install; and each later failure takes one pass or marks again.
    /// Successes only lower the rate. A stale install would need the
    /// version (28 bits) to come round between a judgement's mark and its
    /// install within one bucket epoch.
    #[inline]
    fn pass(&self, e: u64) -> Result<(), u64> {
        let mut cur = self.spare.load(Ordering::Relaxed);
        loop {
            let open = (cur >> S_EPOCH_SHIFT) & B_EPOCH == e && cur & S_PASSES != 0;
            let next = if open {
                cur - 1
            } else {
                ((cur >> S_VERSION_SHIFT) + 1) << S_VERSION_SHIFT
            };
            // AcqRel: see above.
            match self
                .spare
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if open => return Ok(()),
                Ok(_) => return Err(next),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The judgement of [`Window::record_and_judge`], out of line: the
    /// unarmed success and the failure with a pass are the common calls.
    /// `marked`: the failure's mark on `spare` (`None` for a success).
    #[inline(never)]
    fn judge(&self, now_ns: u64, rate: f64, min_calls: u64, marked: Option<u64>) -> bool {
        let (calls, fails) = self.totals(now_ns);
        let high = |calls: u64, fails: u64| fails > 0 && (fails as f64) >= rate * calls as f64;
        let is_high = high(calls, fails);
        let trip = is_high && calls >= min_calls;
        let armed = is_high && !trip;
        if self.armed.load(Ordering::Relaxed) != armed {
            self.armed.store(armed, Ordering::Relaxed);
        }
        if let (Some(marked), false) = (marked, is_high) {
            // The rate after j more failures and no success is
            // (fails + j) / (calls + j), rising with j; the passes are
            // the j that keep it below the threshold, checked with the
            // very comparison above.
            let room = if rate < 1.0 {
                ((rate * calls as f64 - fails as f64) / (1.0 - rate)).max(0.0)
            } else {
                f64::INFINITY
            };
            let mut n = if room >= S_PASSES as f64 {
                S_PASSES
            } else {
                room as u64
            };
            while n > 0 && high(calls + n, fails + n) {
                n -= 1;
            }
            if n > 0 {
                let e = self.epoch(now_ns);
                let passes =
                    (marked >> S_VERSION_SHIFT) << S_VERSION_SHIFT | e << S_EPOCH_SHIFT | n;
                // Relaxed: only the value matters (see `pass`); a failed
                // exchange means a failure came between, and leaves it.
                let _ = self.spare.compare_exchange(
                    marked,
                    passes,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
        trip
    }

    /// Whether a coarse clock reading is good enough for this window.
    pub(crate) fn coarse_ok(&self) -> bool {
        self.width_ns >= COARSE_BUCKET_NS
    }

    /// Forgets every call: a closed episode starts (a close, a reset, a
    /// slot's new tenant) and counts from its first call (C5, C11). The
    /// shared copy is zeroed (its writers CAS, so none writes an old count
    /// back); the owned copies are snapshotted (see `baseline`).
    pub(crate) fn clear(&self) {
        self.void_passes();
        // Relaxed throughout: see `record`.
        for (stripe, base) in self.stripes.iter().zip(self.baseline.iter()) {
            for (b, z) in stripe.iter().zip(base.iter()) {
                z.store(b.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        for b in self.stripes[self.owned].iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.armed.store(false, Ordering::Relaxed);
    }
}

/// What a partition keeps off its slot, made on the first non-healthy
/// event (a failure, a trip, a counted refusal) or, under the failure-rate
/// policy, when a tenant takes the slot: the open-until, the counters, the
/// LRU tick and the window. A healthy partition has none, so its slot is
/// the word and the owner's key alone: half a cache line.
#[derive(Debug)]
pub(crate) struct Cold {
    until: Until,
    /// When the youngest probe was admitted, and which probe permits hold
    /// no slot (C7's `probe_timeout`, see `state::cell`).
    probes: Probes,
    /// Table tick of the last admission that found the partition not
    /// idle, for LRU eviction (only such partitions are ranked by it).
    last_used: AtomicU64,
    /// A tenant slot's counters (a standalone partition's are its
    /// dependency's: `Dependency::counters`). They belong to one owner:
    /// made by the owner's first count, tagged with the generation its
    /// tenure began at ([`Stats::since`]), replaced by the next owner's
    /// first count and reclaimed by epoch. A count carries the generation it is for and
    /// goes only to the block of that generation's owner (see
    /// [`Partition::owner_stats`]): a count racing a hand-over never
    /// reaches the new owner's counters (C9, C13).
    stats: epoch::Atomic<Stats>,
    /// The failure-rate window of a global or overflow partition: one for
    /// the partition's life, cleared when a closed episode starts.
    window: Installed<Window>,
    /// The failure-rate window of a tenant slot: one per closed episode
    /// (see [`Window::episode`]), installed before the CAS that starts the
    /// episode, the replaced one reclaimed by epoch. A record that checked
    /// its permit against the word and then counts can only reach the
    /// window of its own episode or a window it can tell is not its own:
    /// a late record never counts toward another episode, or another
    /// tenant that took the slot meanwhile (C9, C13).
    episodes: epoch::Atomic<Window>,
}

impl Drop for Cold {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can hold a guard on this pointer
        // any more (the cold part goes with its cell).
        let guard = unsafe { epoch::unprotected() };
        let p = self
            .episodes
            .swap(epoch::Shared::null(), Ordering::Acquire, guard);
        if !p.is_null() {
            // SAFETY: unreachable now; nobody else can load it.
            drop(unsafe { p.into_owned() });
        }
        let p = self
            .stats
            .swap(epoch::Shared::null(), Ordering::Acquire, guard);
        if !p.is_null() {
            // SAFETY: as above.
            drop(unsafe { p.into_owned() });
        }
    }
}

impl Default for Cold {
    fn default() -> Self {
        Self::new()
    }
}

impl Side for Cold {
    fn until(&self) -> &Until {
        &self.until
    }

    fn probes(&self) -> &Probes {
        &self.probes
    }

    fn before_close(&self, generation: u64) {
        if let Some(w) = self.window() {
            w.clear();
        }
        let guard = epoch::pin();
        // Acquire: see the window whose width the next one takes.
        let cur = self.episodes.load(Ordering::Acquire, &guard);
        // SAFETY: a non-null window stays alive while `guard` is held.
        if let Some(w) = unsafe { cur.as_ref() } {
            self.install_episode(Window::new_episode(w.width(), generation), &guard);
        }
    }
}

impl Cold {
    fn new() -> Self {
        Self {
            until: Until::default(),
            probes: Probes::default(),
            last_used: AtomicU64::new(0),
            stats: epoch::Atomic::null(),
            window: Installed::empty(),
            episodes: epoch::Atomic::null(),
        }
    }

    /// The window, if one was installed.
    #[inline]
    fn window(&self) -> Option<&Window> {
        self.window.get()
    }

    /// The window, installing `make()` if there is none.
    fn window_or_install(&self, make: impl FnOnce() -> Window) -> &Window {
        self.window.get_or_install_with(make)
    }

    /// Installs `w` as the tenant window of a new closed episode.
    fn install_episode(&self, w: Window, guard: &epoch::Guard) {
        // AcqRel: publish the new window / see the one replaced.
        let old = self
            .episodes
            .swap(epoch::Owned::new(w), Ordering::AcqRel, guard);
        if !old.is_null() {
            // SAFETY: `old` is unlinked; readers pinned before now may
            // still see it, so destruction waits for the epoch.
            unsafe { guard.defer_destroy(old) };
        }
    }
}

/// A tenant's key words as its partition keeps them (see
/// [`Table::key_words`]).
pub(crate) type Key = [u64; 2];

/// The key words of a free slot (and of the global and overflow
/// partitions, which no tenant owns).
const NO_KEY: Key = [0, 0];

/// Who a resolved partition belongs to: the tenant's key words, and the
/// generation of a word in which the slot was seen to be theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    key: Key,
    pub(crate) generation: u64,
}

/// The owner of the global and overflow partitions: every word is theirs.
pub(crate) const NO_OWNER: Owner = Owner {
    key: NO_KEY,
    generation: 0,
};

impl Owner {
    /// Whether this is [`NO_OWNER`].
    #[inline]
    pub(crate) fn is_none(self) -> bool {
        self.key == NO_KEY
    }
}

/// One breaker: a (dependency, partition) pair's state and counters.
/// A tenant slot is 32 bytes, two to a cache line: the word, the owner's
/// key words (which confirm a lookup on the line the word is on) and the
/// pointer to the cold part. All zeros is a free slot: a closed word no
/// key can match.
#[derive(Debug)]
#[repr(C, align(32))]
pub struct Partition {
    pub(crate) cell: Cell<Cold>,
    /// The owner's key words, [`NO_KEY`] while it has none: lets a
    /// lookup confirm the id without a pin.
    key: [AtomicU64; 2],
}

impl Partition {
    /// A partition outside any table (a dependency's global or overflow
    /// one), its cold part made at once: such partitions are shared by
    /// every caller, so nothing is gained by making it later.
    pub(crate) fn standalone(window: Option<Window>) -> Self {
        let cold = Cold::new();
        if let Some(w) = window {
            cold.window_or_install(|| w);
        }
        Self {
            cell: Cell::with_side(Word::FRESH, cold),
            key: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// A free tenant slot: what the arena's zeroed memory holds.
    #[cfg(loom)]
    fn free() -> Self {
        Self {
            cell: Cell::new(Word::FRESH),
            key: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// The counters of the owner whose tenure of this tenant slot began at
    /// generation `since` ([`Table::tenure`]), made on its first count:
    /// `None` once the slot holds a later owner's, for a count of an owner
    /// gone since, which reaches no one.
    pub(crate) fn owner_stats<'g>(
        &'g self,
        since: u64,
        guard: &'g epoch::Guard,
    ) -> Option<&'g Stats> {
        let cold = self.cell.side();
        // Acquire: see the counters as made.
        let mut cur = cold.stats.load(Ordering::Acquire, guard);
        loop {
            // SAFETY: a block stays alive while `guard` is held.
            match unsafe { cur.as_ref() } {
                Some(s) if s.since == since => return Some(s),
                Some(s) if s.since > since => return None,
                _ => {}
            }
            match Self::install_stats(cold, cur, since, guard) {
                Some(s) => return Some(s),
                // Acquire: see the block that won.
                None => cur = cold.stats.load(Ordering::Acquire, guard),
            }
        }
    }

    /// Replaces `cur` (null, or an earlier owner's block) by a block for
    /// the owner of tenure `since`; `None` if the slot's block is no
    /// longer `cur`.
    fn install_stats<'g>(
        cold: &'g Cold,
        cur: epoch::Shared<'g, Stats>,
        since: u64,
        guard: &'g epoch::Guard,
    ) -> Option<&'g Stats> {
        let new = epoch::Owned::new(Stats::for_owner(since));
        // AcqRel: publish the block / see the one replaced.
        match cold
            .stats
            .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire, guard)
        {
            Ok(p) => {
                if !cur.is_null() {
                    // SAFETY: `cur` is unlinked; pinned readers may still
                    // hold it, so destruction waits for the epoch.
                    unsafe { guard.defer_destroy(cur) };
                }
                // SAFETY: just installed; alive while `guard` is held.
                unsafe { p.as_ref() }
            }
            Err(_) => None,
        }
    }

    /// The counters of the owner of tenure `since`, if it made any.
    pub(crate) fn owner_stats_if_any<'g>(
        &'g self,
        since: u64,
        guard: &'g epoch::Guard,
    ) -> Option<&'g Stats> {
        let cold = self.cell.side_if_any()?;
        // Acquire: see the counters as made.
        let p = cold.stats.load(Ordering::Acquire, guard);
        // SAFETY: a block stays alive while `guard` is held.
        unsafe { p.as_ref() }.filter(|s| s.since == since)
    }

    /// The failure-rate window of a global or overflow partition, if the
    /// policy keeps one (a tenant slot's are per episode: see
    /// [`Partition::with_episode_window`]).
    #[inline]
    pub(crate) fn window(&self) -> Option<&Window> {
        self.cell.side_if_any()?.window()
    }

    /// Runs `f` on a tenant slot's current episode window, if it has one
    /// (see `Cold::episodes`).
    pub(crate) fn with_episode_window<R>(&self, f: impl FnOnce(&Window) -> R) -> Option<R> {
        let cold = self.cell.side_if_any()?;
        let guard = epoch::pin();
        // Acquire: see the window as installed.
        let w = cold.episodes.load(Ordering::Acquire, &guard);
        // SAFETY: a non-null window stays alive while `guard` is held.
        unsafe { w.as_ref() }.map(f)
    }

    /// Whether the slot belongs to `owner` in word `w`: always for
    /// [`NO_OWNER`]; for a tenant, without a load while `w` is of the
    /// generation it was seen theirs in (a slot changes hands only through
    /// vacant words, which move the generation on), else by its key words.
    #[inline]
    pub(crate) fn owned_by(&self, w: Word, owner: Owner) -> bool {
        // Acquire (in `key_is`): the key is written before the word that
        // hands the slot over; having seen that word we see its key.
        owner.is_none()
            || !w.phase().is_held()
                && (w.generation() == owner.generation || self.key_is(owner.key))
    }

    /// Whether the slot is `key`'s in word `w`, by its key words: an
    /// occupied word, and the key read after it.
    #[inline]
    fn keyed(&self, w: Word, key: Key) -> bool {
        // Acquire (in `key_is`): see `owned_by`.
        !w.phase().is_held() && self.key_is(key)
    }

    /// Marks the partition used at the table's tick, if it has a cold part
    /// (a write only when the tick changed). A partition without one is
    /// idle or was never refused, failed or tripped: eviction takes idle
    /// ones first, whenever they were used, and ranks the others by this
    /// tick. The tick is read only for a cold part: most partitions have
    /// none, and reading it first was one more load on every tenant call.
    #[inline]
    pub(crate) fn touch(&self, table: &Table) {
        if let Some(c) = self.cell.side_if_any() {
            let tick = table.tick();
            // Relaxed: an eviction hint.
            if c.last_used.load(Ordering::Relaxed) != tick {
                c.last_used.store(tick, Ordering::Relaxed);
            }
        }
    }

    /// Whether the partition equals a fresh one (C9): its word idle
    /// (`w`), and no call in its failure-rate window, if it keeps one.
    fn is_idle(&self, w: Word, now_ns: &dyn Fn() -> u64) -> bool {
        w.is_idle()
            && self.window().is_none_or(|win| win.is_empty(now_ns()))
            && self
                .with_episode_window(|win| win.is_empty(now_ns()))
                .unwrap_or(true)
    }

    /// The tick of [`Partition::touch`]; 0 when it has no cold part.
    fn last_used(&self) -> u64 {
        // Relaxed: an eviction hint.
        self.cell
            .side_if_any()
            .map_or(0, |c| c.last_used.load(Ordering::Relaxed))
    }

    /// Hands a held slot to a new owner, whose first word will be of
    /// `generation`: a fresh window for that closed episode if the table
    /// keeps windows, then the key words. (Its counters are its own
    /// block, made by its first count: see `Cold::stats`.)
    fn set_owner(&self, owner: Key, tick: u64, window: Option<Duration>, generation: u64) {
        let cold = match (self.cell.side_if_any(), window) {
            (Some(c), _) => Some(c),
            (None, Some(_)) => Some(self.cell.side()),
            (None, None) => None,
        };
        if let Some(c) = cold {
            if let Some(d) = window {
                c.install_episode(Window::new_episode(d, generation), &epoch::pin());
            }
            // Relaxed: an eviction hint.
            c.last_used.store(tick, Ordering::Relaxed);
        }
        self.set_key(owner);
    }

    fn set_key(&self, key: Key) {
        // Release: ordered before the word store that hands the slot over,
        // and after the CAS that made it vacant, so a reader that sees
        // these key words then sees that CAS (or later) when it loads the
        // word again.
        self.key[0].store(key[0], Ordering::Release);
        self.key[1].store(key[1], Ordering::Release);
    }

    /// Whether no tenant owns the slot (nor is about to: a slot being
    /// handed over already has its key). One word tells: a tenant's
    /// second key word is never zero (it holds the id's length or 0xff).
    #[inline]
    pub(crate) fn is_free(&self) -> bool {
        // Acquire: see `set_key`.
        self.key[1].load(Ordering::Acquire) == 0
    }

    /// The key words (cold paths).
    fn key(&self) -> Key {
        // Acquire: see `set_key`.
        [
            self.key[0].load(Ordering::Acquire),
            self.key[1].load(Ordering::Acquire),
        ]
    }

    /// Whether the key words kept in the partition are `key`.
    #[inline]
    fn key_is(&self, key: Key) -> bool {
        // Acquire: see `set_key`.
        self.key[0].load(Ordering::Acquire) == key[0]
            && self.key[1].load(Ordering::Acquire) == key[1]
    }
}

/// What one eviction scan came to.
enum Scan {
    /// A victim held: its slot.
    Taken(u32),
    /// Every candidate changed before it could be taken.
    Lost,
    /// No candidate at all.
    Nothing,
}

/// Where a tenant's calls go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved<'a> {
    pub(crate) slot: u32,
    pub(crate) part: &'a Partition,
    pub(crate) owner: Owner,
    /// This call inserted the tenant with a closed word of
    /// `owner.generation`: it may be admitted on that word even if the
    /// fresh, idle partition is evicted before it looks again (its record
    /// is then late, as C9 allows), so an inserter always makes progress.
    pub(crate) made_closed: bool,
}

impl<'a> Resolved<'a> {
    /// The partition at `slot`, seen to be `key`'s in word `w`.
    #[inline(always)]
    fn seen(slot: u32, part: &'a Partition, key: Key, w: Word) -> Self {
        Self {
            slot,
            part,
            owner: Owner {
                key,
                generation: w.generation(),
            },
            made_closed: false,
        }
    }
}

/// Seeded per table, so tenant ids chosen by callers cannot be aimed at one
/// shard. Under loom a fixed seed: a model's executions must replay the
/// same operations, and some paths (eviction's scan order) follow hashes.
///
/// foldhash's `quality` variant: one more folded multiply than `fast`,
/// whose single multiply of an id's two words left ids that differ in a
/// few bytes bunched in some index buckets for some seeds (up to a third
/// of 1,000 such ids out of the index; see
/// `c9_structured_ids_spread_over_the_index_buckets_whatever_the_seed`).
#[cfg(not(loom))]
type TableHasher = foldhash::quality::RandomState;
#[cfg(loom)]
type TableHasher = foldhash::quality::FixedState;

/// Longest tenant id a partition keeps itself (see [`pack_key`]).
const PART_KEY: usize = 15;

/// The key of a table's long-id fingerprints: random per table, fixed
/// under loom (see [`TableHasher`]).
#[cfg(not(loom))]
fn fingerprint_keys() -> SipHasher13 {
    // std's RandomState draws its keys from the OS; two of its outputs are
    // as unpredictable as they are.
    let s = std::hash::RandomState::new();
    SipHasher13::new_with_keys(s.hash_one(0u8), s.hash_one(1u8))
}
#[cfg(loom)]
fn fingerprint_keys() -> SipHasher13 {
    SipHasher13::new_with_keys(0x5eed_0000_0000_0001, 0x5eed_0000_0000_0002)
}

/// A partition's key words for an id longer than [`PART_KEY`]: 120 bits of
/// the id's keyed SipHash-1-3, with 0xff in the last byte where a packed
/// short id has its length (1 to 15), so the two forms never meet. SipHash
/// is a PRF: without the table's random key, two distinct ids share a
/// fingerprint with probability 2^-120, however they were chosen.
fn fingerprint(keys: &SipHasher13, tenant: &str) -> [u64; 2] {
    let h = keys.hash(tenant.as_bytes());
    [h.h1, h.h2 | FINGERPRINT_MARK << 56]
}

/// The last byte of a fingerprint's key words (see [`fingerprint`]).
const FINGERPRINT_MARK: u64 = 0xff;

/// Whether key words are a long id's fingerprint, not a packed short id.
#[inline(always)]
fn is_fingerprint(key: [u64; 2]) -> bool {
    key[1] >> 56 == FINGERPRINT_MARK
}

/// A tenant id of 1 to [`PART_KEY`] bytes as two words: the bytes, zero
/// padded, little-endian, with the length in the last byte. Never all
/// zeros, which a partition holds while it has no owner. Built from
/// overlapping loads rather than a copy into a buffer:
/// reading a buffer back as words right after byte-wise stores into it
/// stalls store forwarding, a third of a short lookup's time.
#[inline]
fn pack_key(tenant: &str) -> Option<[u64; 2]> {
    let b = tenant.as_bytes();
    let n = b.len();
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let half = |at: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            b.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let byte = |at: usize| -> Option<u64> { b.get(at).map(|&x| u64::from(x)) };
    // Overlapping reads put equal bytes in equal places, so OR joins them.
    let (lo, hi) = match n {
        0 => return None,
        1..=3 => (
            byte(0)? | byte(n / 2)? << (8 * (n / 2)) | byte(n - 1)? << (8 * (n - 1)),
            0,
        ),
        4..=7 => (half(0)? | half(n - 4)? << (8 * (n - 4)), 0),
        8 => (word(0)?, 0),
        9..=PART_KEY => (word(0)?, word(n - 8)? >> (8 * (16 - n))),
        _ => return None,
    };
    Some([lo, hi | (n as u64) << 56])
}

/// The id [`pack_key`] packed (cold paths).
fn unpack_key(key: [u64; 2]) -> Option<StdArc<str>> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&key[0].to_le_bytes());
    b[8..].copy_from_slice(&key[1].to_le_bytes());
    let len = usize::from(b[15]).min(PART_KEY);
    std::str::from_utf8(&b[..len]).ok().map(StdArc::from)
}

/// Cells per index bucket: one cache line. One under loom, to keep the
/// models' interleavings few; the code is the same.
#[cfg(not(loom))]
const WAYS: usize = 16;
#[cfg(loom)]
const WAYS: usize = 1;

/// Index cells: a 6-bit tag from the tenant's hash over a 26-bit slot
/// (slots run to twice `MAX_MAX_TENANTS`, inclusive).
const SLOT_BITS: u32 = 26;
const _: () = assert!(2 * (crate::profile::MAX_MAX_TENANTS as u64) < (1 << SLOT_BITS));

/// The tenant index: a set-associative array of `tag | slot` cells for the
/// tenants that found both their home lines full (about 1 in 40 of a full
/// table; see `Table::homes`). Only a hint: a hit is trusted once the
/// partition it names confirms id and generation, so cells may be stale,
/// lost or overwritten at any time without harm, and are written with
/// plain stores. It spares those tenants' lookups the epoch pin, the shard
/// pointer and the hash table probe: one line of cells, then the
/// partition. One cell per two tenants (2 bytes a tenant), twenty times
/// what a full table's displaced tenants need on average, so a full bucket
/// stays rare; a tag rarely names a stranger (1 in 64 per occupied cell).
struct Index {
    cells: Box<[Bucket]>,
    buckets: u64,
    /// Rotates the cell replaced in a full bucket.
    victim: AtomicUsize,
}

impl Index {
    fn try_new(capacity: u32) -> Result<Self, OutOfMemory> {
        let buckets = Self::buckets_for(capacity);
        Ok(Self {
            cells: zeroed_buckets(buckets)?,
            buckets: buckets as u64,
            victim: AtomicUsize::new(0),
        })
    }

    /// Buckets for a table of `capacity` tenants: one cell per two.
    fn buckets_for(capacity: u32) -> usize {
        (capacity as usize).div_ceil(2 * WAYS).max(1)
    }

    #[inline]
    fn bucket(&self, hash: u64) -> Option<&Bucket> {
        // Low 32 bits scaled to the bucket count: no power-of-two rounding.
        let i = (((hash & 0xffff_ffff) * self.buckets) >> 32) as usize;
        self.cells.get(i)
    }

    /// The bucket's cells in the tenant's probe order: from its home cell
    /// on, wrapping. Cells are filled in the same order, so about 3 tenants
    /// in 4 match the first cell read. What that saves is a mispredicted
    /// branch, not loads: the scan's exit waits on the bucket's cache miss,
    /// and a wrong guess there (about once a call by callgrind's branch
    /// model, when cells were filled from the first free one) discards the
    /// work begun on the next call, so the misses of successive calls did
    /// not overlap.
    #[inline]
    fn probe(&self, hash: u64) -> impl Iterator<Item = &AtomicU32> + '_ {
        let home = Self::home(hash);
        let bucket = self.bucket(hash);
        // A range with the bucket checked inside, not a flat_map over the
        // Option: that compiled to ~50 more instructions a lookup.
        let ways = if bucket.is_some() { WAYS } else { 0 };
        (0..ways).filter_map(move |k| Some(&bucket?.0[(home + k) % WAYS]))
    }

    /// The tenant's first cell in its bucket: bits 52.., above the shard's
    /// (32..47), below the tag's (58..).
    #[inline]
    fn home(hash: u64) -> usize {
        (hash >> 52) as usize % WAYS
    }

    /// The cell naming `slot` for the tenant of `hash`.
    #[inline]
    fn entry(hash: u64, slot: u32) -> u32 {
        ((hash >> 58) as u32) << SLOT_BITS | slot
    }

    /// Slots the bucket names for the tenant of `hash`, in probe order.
    #[inline]
    fn candidates(&self, hash: u64) -> impl Iterator<Item = u32> + '_ {
        let tag = (hash >> 58) as u32;
        let slots = (1u32 << SLOT_BITS) - 1;
        self.probe(hash).filter_map(move |c| {
            // Relaxed: a hint, confirmed through the partition.
            let v = c.load(Ordering::Relaxed);
            (v >> SLOT_BITS == tag && v & slots != 0).then_some(v & slots)
        })
    }

    /// Points the tenant of `hash` at `slot` (never slot 0, the overflow):
    /// the first free cell in probe order.
    fn remember(&self, hash: u64, slot: u32) {
        let new = Self::entry(hash, slot);
        // Relaxed throughout: a hint, confirmed through the partition.
        for c in self.probe(hash) {
            let v = c.load(Ordering::Relaxed);
            if v == new {
                return;
            }
            if v == 0
                && c.compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        if let Some(b) = self.bucket(hash) {
            let i = self.victim.fetch_add(1, Ordering::Relaxed) % WAYS;
            b.0[i].store(new, Ordering::Relaxed);
        }
    }

    /// Clears the cell naming `slot` for the tenant of `hash`, if any.
    fn forget(&self, hash: u64, slot: u32) {
        let old = Self::entry(hash, slot);
        for c in self.bucket(hash).iter().flat_map(|b| b.0.iter()) {
            // Relaxed: a hint; a racing `remember` may win, harmlessly.
            let _ = c.compare_exchange(old, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// One bucket of index cells, on a line of its own: a bucket across two
/// lines would cost a lookup two misses.
#[repr(align(64))]
struct Bucket([AtomicU32; WAYS]);

/// `n` zeroed buckets, zeroed by the allocator (which, for their 64-byte
/// alignment, writes the zeros: the index is in memory from the start).
#[cfg(not(loom))]
fn zeroed_buckets(n: usize) -> Result<Box<[Bucket]>, OutOfMemory> {
    let layout = std::alloc::Layout::array::<Bucket>(n).map_err(|_| OutOfMemory {
        bytes: n.saturating_mul(std::mem::size_of::<Bucket>()),
    })?;
    if layout.size() == 0 {
        return Ok(Box::new([]));
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Bucket;
    if p.is_null() {
        return Err(OutOfMemory {
            bytes: layout.size(),
        });
    }
    // SAFETY: `p` is a live allocation of `layout`, i.e. of `[Bucket; n]`,
    // from the global allocator, as `Box` expects; all-zero bytes are a
    // valid `Bucket` (an array of `AtomicU32`, which has the in-memory
    // representation of `u32`).
    Ok(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

#[cfg(loom)]
fn zeroed_buckets(n: usize) -> Result<Box<[Bucket]>, OutOfMemory> {
    Ok((0..n)
        .map(|_| Bucket(std::array::from_fn(|_| AtomicU32::new(0))))
        .collect())
}

/// An up-front allocation of a table that the allocator refused: building
/// a bank reports it as a profile error rather than aborting (C9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfMemory {
    /// The size of the allocation refused.
    pub(crate) bytes: usize,
}

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the allocator refused {} bytes", self.bytes)
    }
}

/// `Box::new(value)`, with a refusal returned instead of aborting.
fn try_box<T>(value: T) -> Result<Box<T>, OutOfMemory> {
    // The allocator takes no zero-sized request; every caller boxes data.
    const {
        assert!(
            std::mem::size_of::<T>() != 0,
            "try_box of a zero-sized type"
        )
    };
    let layout = std::alloc::Layout::new::<T>();
    // SAFETY: the layout has a non-zero size (checked at compile time).
    let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return Err(OutOfMemory {
            bytes: layout.size(),
        });
    }
    // SAFETY: `p` is a fresh allocation of `Layout::new::<T>()` from the
    // global allocator, so aligned and large enough for a `T`, and owned
    // by no one: writing the value initialises it, and `Box` may then own
    // it (it frees with the same layout).
    unsafe {
        p.write(value);
        Ok(Box::from_raw(p))
    }
}

/// An empty `Vec` with room for exactly `n` items, with a refusal
/// returned instead of aborting.
fn try_vec<T>(n: usize) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| OutOfMemory {
        bytes: std::alloc::Layout::array::<T>(n).map_or(usize::MAX, |l| l.size()),
    })?;
    Ok(v)
}

/// A shard entry: the partition's slot, the id's hash (so rebuilding a
/// shard never rehashes) and the id: packed as the partition keeps it when
/// short (no allocation, a plain copy when the shard is rebuilt), shared
/// otherwise. 32 bytes: the slot shares the discriminant's word.
#[derive(Clone)]
enum Entry {
    Short {
        slot: u32,
        hash: u64,
        key: [u64; 2],
    },
    Long {
        slot: u32,
        hash: u64,
        key: StdArc<str>,
    },
}

impl Entry {
    /// `short` is `pack_key(tenant)`.
    fn new(hash: u64, tenant: &str, short: Option<[u64; 2]>, slot: u32) -> Self {
        match short {
            Some(key) => Entry::Short { slot, hash, key },
            None => Entry::Long {
                slot,
                hash,
                key: StdArc::from(tenant),
            },
        }
    }

    #[inline]
    fn hash(&self) -> u64 {
        match self {
            Entry::Short { hash, .. } | Entry::Long { hash, .. } => *hash,
        }
    }

    #[inline]
    fn slot(&self) -> u32 {
        match self {
            Entry::Short { slot, .. } | Entry::Long { slot, .. } => *slot,
        }
    }

    /// Whether this is `tenant`'s entry; `packed` is `pack_key(tenant)`.
    #[inline]
    fn is(&self, tenant: &str, packed: Option<[u64; 2]>) -> bool {
        match self {
            Entry::Short { key, .. } => packed == Some(*key),
            Entry::Long { key, .. } => packed.is_none() && **key == *tenant,
        }
    }

    fn same_id(&self, other: &Entry) -> bool {
        match (self, other) {
            (Entry::Short { key: a, .. }, Entry::Short { key: b, .. }) => a == b,
            (Entry::Long { key: a, .. }, Entry::Long { key: b, .. }) => a == b,
            _ => false,
        }
    }

    /// The id (cold paths). The bytes came from a `&str`, so the
    /// conversion cannot fail; `None` would only mean a bug.
    fn id(&self) -> Option<StdArc<str>> {
        match self {
            Entry::Short { key, .. } => unpack_key(*key),
            Entry::Long { key, .. } => Some(key.clone()),
        }
    }
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

type ShardMap = hashbrown::HashTable<Entry>;

struct Shard {
    map: ShardMap,
}

/// A cache line: two slots, one home.
const LINE: usize = 64;

/// The huge page size [`Arena::zeroed`] asks for (x86_64's and arm64's
/// usual 2 MiB; elsewhere an alignment, no more).
const HUGE_PAGE: usize = 2 << 20;

/// Linux's `madvise` advice for huge pages (asm-generic values, as on
/// x86_64 and arm64; `libc` has `MADV_COLLAPSE` for glibc targets only).
#[cfg(not(loom))]
const MADV_HUGEPAGE: i32 = 14;
/// Moves memory already on 4 KiB pages onto huge pages (Linux 6.1 on).
#[cfg(not(loom))]
const MADV_COLLAPSE: i32 = 25;

/// A table's slots: one zeroed allocation, two slots a tenant, two slots a
/// cache line. Slot `s` is at index `s - 1` (slot 0 is the dependency's
/// overflow partition), one add from the base. All zeros is a free slot,
/// so the memory is zeroed when the table is made ([`Arena::zeroed`]):
/// `max_tenants` costs its 64 bytes a tenant from the start.
/// Partitions are never moved or freed before the arena, so a `&Partition`
/// lives as long as the table.
struct Arena {
    base: std::ptr::NonNull<Partition>,
    slots: usize,
}

// SAFETY: the arena owns its partitions as a `Box<[Partition]>` would:
// they are reached only through shared references until Drop;
// `Partition` is `Send` and `Sync` (atomics and an owned cold part).
unsafe impl Send for Arena {}
// SAFETY: see `Send`.
unsafe impl Sync for Arena {}

impl Arena {
    fn try_new(slots: usize) -> Result<Self, OutOfMemory> {
        let layout = Self::layout(slots).ok_or(OutOfMemory {
            bytes: slots.saturating_mul(std::mem::size_of::<Partition>()),
        })?;
        if layout.size() == 0 {
            return Ok(Self {
                base: std::ptr::NonNull::dangling(),
                slots: 0,
            });
        }
        #[cfg(not(loom))]
        let p = Self::zeroed(layout).cast::<Partition>();
        #[cfg(loom)]
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) }.cast::<Partition>();
        let base = std::ptr::NonNull::new(p).ok_or(OutOfMemory {
            bytes: layout.size(),
        })?;
        // Loom's atomics are modelled objects, not bytes: make each slot.
        #[cfg(loom)]
        for k in 0..slots {
            // SAFETY: `k < slots`: inside the allocation, not yet shared.
            unsafe { base.as_ptr().add(k).write(Partition::free()) };
        }
        Ok(Self { base, slots })
    }

    /// Zeroed memory for `layout` (non-zero size), null if there is none.
    /// A large arena is asked for huge pages before its first touch: a
    /// lookup lands on a random line of it, and with 4 KiB pages a table
    /// past the TLB's reach (a few MiB) pays a page walk on nearly every
    /// call, under a hypervisor a two-level one (1M tenants, the scale
    /// bench's ring loop: 0.86–0.96× the call in four same-minute A/Bs;
    /// BENCHMARKS.md, "Session 11"). The first touch must be
    /// a write: a page first read is mapped to the shared zero page, and
    /// the write after it splits that into 4 KiB pages. So the zeros are
    /// written here, as `alloc_zeroed` writes them for an alignment above
    /// 16 anyway. Memory the allocator had used before (after a bank of
    /// similar size was dropped, malloc serves up to 32 MiB from its heap)
    /// is already on 4 KiB pages: the collapse after the zeros moves it
    /// onto huge pages, and costs nothing where they are already.
    #[cfg(not(loom))]
    fn zeroed(layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return p;
        }
        let huge = cfg!(target_os = "linux") && layout.align() == HUGE_PAGE;
        if huge {
            Self::advise(p, layout.size(), MADV_HUGEPAGE);
        }
        // SAFETY: `p` is a live allocation of `layout.size()` bytes.
        unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
        if huge {
            Self::advise(p, layout.size(), MADV_COLLAPSE);
        }
        p
    }

    /// `madvise(p, len, advice)` for advice that changes how memory is
    /// backed, never what it holds. A refusal (THP off, an old kernel)
    /// leaves 4 KiB pages, so its result is not needed.
    #[cfg(not(loom))]
    fn advise(p: *mut u8, len: usize, advice: i32) {
        #[cfg(target_os = "linux")]
        // SAFETY: `[p, p + len)` is a live allocation of ours and `p` is
        // page-aligned (huge-page aligned); the advice keeps its contents.
        let _ = unsafe { libc::madvise(p.cast(), len, advice) };
        #[cfg(not(target_os = "linux"))]
        let _ = (p, len, advice);
    }

    /// Room for `slots` partitions (`None` if that overflows), aligned to
    /// a cache line, so a home's two slots share one, and to a huge page
    /// when it spans two. (A partition's own alignment is 32, and malloc
    /// can place a small arena 32 bytes past a line, splitting each of
    /// its homes in two.)
    fn layout(slots: usize) -> Option<std::alloc::Layout> {
        std::alloc::Layout::array::<Partition>(slots)
            .and_then(|l| match l.size() >= 2 * HUGE_PAGE {
                true => l.align_to(HUGE_PAGE),
                false => l.align_to(LINE),
            })
            .ok()
    }

    /// The partition at `i`.
    #[inline]
    fn get(&self, i: usize) -> Option<&Partition> {
        // SAFETY: `i < slots`: inside the allocation, and initialised: all
        // zeros is a valid `Partition` (a closed word, no key, a null
        // cold pointer: atomics, which have the in-memory representation
        // of their integers, and an `AtomicPtr`, of a pointer), or under
        // loom written in `new`; partitions are dropped only with the
        // arena, which outlives `&self`.
        (i < self.slots).then(|| unsafe { &*self.base.as_ptr().add(i) })
    }

    /// The address of the partition at `i`, for a prefetch (`i` must be
    /// in the arena).
    #[inline(always)]
    fn at(&self, i: usize) -> *const Partition {
        self.base.as_ptr().wrapping_add(i)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if self.slots == 0 {
            return;
        }
        // An arena with slots was made with this layout, so it exists.
        let Some(layout) = Self::layout(self.slots) else {
            return;
        };
        // SAFETY: every slot is initialised (see `get`) and, with `&mut
        // self`, no longer reachable by anyone else; each is dropped once
        // (which frees its cold part, if any), then the allocation freed
        // with the layout it was made with.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.base.as_ptr(),
                self.slots,
            ));
            std::alloc::dealloc(self.base.as_ptr().cast(), layout);
        }
    }
}

/// The bounded tenant table of one tenant-scoped dependency.
pub(crate) struct Table {
    shards: Box<[epoch::Atomic<Shard>]>,
    shard_bits: u32,
    index: Index,
    hasher: TableHasher,
    /// Keys the fingerprints that stand for long ids in partitions.
    fingerprints: SipHasher13,
    arena: Arena,
    /// Per slot (arena index), the generation its current tenure began
    /// at: the new owner's first word, or the word that freed it. A
    /// generation older than that is an earlier owner's (see
    /// [`Table::tenure`]).
    tenures: Box<[AtomicU64]>,
    /// Tenants the table may hold: as many home lines, twice as many slots.
    capacity: u32,
    /// Tenants holding a slot or about to: at most `capacity`.
    live: AtomicU32,
    /// The failure-rate window's width, if the policy keeps one.
    window: Option<Duration>,
    /// Logical time for LRU: advances on each insert.
    tick: AtomicU64,
    /// Rotates eviction's scans over the shards.
    cursor: AtomicUsize,
    /// Counts the events that can make a partition evictable (a close, a
    /// reset, a late probe's slot returned): see `none_evictable_at`.
    evictable_epoch: AtomicU64,
    /// The `evictable_epoch` at which a scan of every shard found nothing
    /// to evict, or `u64::MAX`: while the epoch has not moved, a newcomer
    /// goes to the overflow at once instead of scanning a table full of
    /// open partitions again (C9; what a full table's overflow admission
    /// costs).
    none_evictable_at: AtomicU64,
    /// Rotates the search for a free slot away from home.
    spare: AtomicUsize,
    /// `force_open(None)`: tenants with no operator action of their own
    /// since (see `overrides`) start forced open, and `<overflow>` refuses
    /// them. The overflow's own word is never forced for it: it also
    /// serves tenants reset one by one since.
    forced_all: AtomicBool,
    /// Each tenant's own operator action since the last dependency-wide
    /// one, where it outlives the tenant's partition (C9: evicting an idle
    /// partition loses nothing; C11): `true` for a tenant forced open
    /// while the table had no room for it (refused from the overflow, its
    /// later partition starts forced open), `false` for one reset while
    /// `forced_all` holds (admitted, its later partitions start closed).
    /// A forced partition is never evicted, so a tenant forced with room
    /// needs no entry. Copied on write, read by epoch; `override_count`
    /// spares the read while it is empty.
    overrides: epoch::Atomic<Overrides>,
    override_count: AtomicUsize,
}

/// Tenants' own operator actions, by key words (see `Table::overrides`):
/// whether the tenant is forced open.
#[derive(Clone, Default)]
struct Overrides(hashbrown::HashMap<Key, bool, foldhash::fast::FixedState>);

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("capacity", &self.capacity)
            .field("live", &self.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread can hold a guard on our shards.
        let guard = unsafe { epoch::unprotected() };
        for s in self.shards.iter() {
            let p = s.swap(epoch::Shared::null(), Ordering::Acquire, guard);
            if !p.is_null() {
                // SAFETY: unreachable now; nobody else can load it.
                drop(unsafe { p.into_owned() });
            }
        }
        let p = self
            .overrides
            .swap(epoch::Shared::null(), Ordering::Acquire, guard);
        if !p.is_null() {
            // SAFETY: as for the shards.
            drop(unsafe { p.into_owned() });
        }
    }
}

impl Table {
    /// A table of `capacity` tenants, for tests: [`Table::try_new`] that
    /// panics when the allocator refuses.
    #[cfg(test)]
    pub(crate) fn new(capacity: u32, window: Option<Duration>) -> Self {
        Self::try_new(capacity, window).unwrap_or_else(|e| panic!("a table of {capacity}: {e}"))
    }

    /// About 32 tenants a shard, so an insert's copy stays small (with at
    /// most 4,096 shards a 1M table's held ~244 entries each, and a new
    /// tenant cost 3.2 µs). The cap bounds what an empty table costs up
    /// front: 32,768 shards, about 1.8 MB, for 1M tenants.
    fn shards_for(capacity: u32) -> usize {
        (capacity as usize / 32)
            .clamp(1, MAX_SHARDS)
            .next_power_of_two()
    }

    /// Bytes [`Table::try_new`] allocates up front for `capacity` tenants:
    /// the arena, the index and the shards' skeleton (an empty shard each).
    /// What the profile's `memory_limit` is checked against (C9).
    pub(crate) fn footprint(capacity: u32) -> u64 {
        let arena = Arena::layout(2 * capacity as usize).map_or(u64::MAX, |l| l.size() as u64);
        let index = (Index::buckets_for(capacity) * std::mem::size_of::<Bucket>()) as u64;
        let tenures = 2 * capacity as u64 * std::mem::size_of::<AtomicU64>() as u64;
        let shard = std::mem::size_of::<epoch::Atomic<Shard>>() + std::mem::size_of::<Shard>();
        let shards = (Self::shards_for(capacity) * shard) as u64;
        arena
            .saturating_add(index)
            .saturating_add(tenures)
            .saturating_add(shards)
    }

    /// A table of `capacity` tenants. Every up-front allocation is
    /// fallible: a refusal is returned, never an abort (C9).
    pub(crate) fn try_new(capacity: u32, window: Option<Duration>) -> Result<Self, OutOfMemory> {
        let index = Index::try_new(capacity)?;
        let arena = Arena::try_new(2 * capacity as usize)?;
        let mut tenures = try_vec(arena.slots)?;
        tenures.extend((0..arena.slots).map(|_| AtomicU64::new(0)));
        let shards_wanted = Self::shards_for(capacity);
        let shard_bits = shards_wanted.trailing_zeros();
        // Boxes first: an `epoch::Atomic` does not free what it points to,
        // so only a complete set is moved into them.
        let mut boxes = try_vec(shards_wanted)?;
        for _ in 0..shards_wanted {
            boxes.push(try_box(Shard {
                map: hashbrown::HashTable::new(),
            })?);
        }
        let mut shards = try_vec(shards_wanted)?;
        shards.extend(
            boxes
                .into_iter()
                .map(|b| epoch::Atomic::from(epoch::Owned::from(b))),
        );
        Ok(Self {
            shards: shards.into_boxed_slice(),
            shard_bits,
            index,
            hasher: TableHasher::default(),
            fingerprints: fingerprint_keys(),
            arena,
            tenures: tenures.into_boxed_slice(),
            capacity,
            live: AtomicU32::new(0),
            window,
            tick: AtomicU64::new(0),
            cursor: AtomicUsize::new(0),
            evictable_epoch: AtomicU64::new(0),
            none_evictable_at: AtomicU64::new(u64::MAX),
            spare: AtomicUsize::new(0),
            forced_all: AtomicBool::new(false),
            overrides: epoch::Atomic::new(Overrides::default()),
            override_count: AtomicUsize::new(0),
        })
    }

    /// Whether `tenant`, with no partition of its own, is forced open
    /// (C11): by its own last operator action if it has one since the
    /// last dependency-wide action, else by that one.
    pub(crate) fn starts_forced(&self, tenant: &str) -> bool {
        self.key_starts_forced(self.key_words(tenant))
    }

    fn key_starts_forced(&self, key: Key) -> bool {
        // SeqCst, both: ordered with `settle_forced`'s fence and with the
        // stores of the operator paths.
        let all = self.forced_all.load(Ordering::SeqCst);
        if self.override_count.load(Ordering::SeqCst) == 0 {
            return all;
        }
        let guard = epoch::pin();
        // Acquire: see the map as published.
        let map = self.overrides.load(Ordering::Acquire, &guard);
        // SAFETY: never null while the table lives (replaced, never
        // cleared, before Drop); the guard keeps this one alive.
        let own = unsafe { map.deref() }.0.get(&key).copied();
        own.unwrap_or(all)
    }

    /// Records `tenant`'s own operator action: forced open (`true`) or
    /// reset (`false`); `None` forgets it. Operator paths only: the map is
    /// copied on every change.
    fn set_override(&self, tenant: &str, action: Option<bool>) {
        let key = self.key_words(tenant);
        let guard = epoch::pin();
        loop {
            // Acquire: see the map we copy.
            let cur = self.overrides.load(Ordering::Acquire, &guard);
            // SAFETY: see `key_starts_forced`.
            let map = unsafe { cur.deref() };
            if map.0.get(&key).copied() == action {
                return;
            }
            let mut next = map.clone();
            match action {
                Some(forced) => next.0.insert(key, forced),
                None => next.0.remove(&key),
            };
            let n = next.0.len();
            // AcqRel: publish the new map / see a competing one.
            if self
                .overrides
                .compare_exchange(
                    cur,
                    epoch::Owned::new(next),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                    &guard,
                )
                .is_ok()
            {
                // SAFETY: `cur` is unlinked; pinned readers may still see it.
                unsafe { guard.defer_destroy(cur) };
                // SeqCst: see `key_starts_forced`.
                self.override_count.store(n, Ordering::SeqCst);
                crate::sync::fence(Ordering::SeqCst);
                return;
            }
        }
    }

    /// `force_open(t)` of a tenant the table has no room for: refused
    /// from the overflow, forced when it gets a partition, until a reset.
    pub(crate) fn force_unplaced(&self, tenant: &str) {
        self.set_override(tenant, Some(true));
    }

    /// `force_open(t)` applied to t's own partition: a forced partition is
    /// never evicted, so the word carries it and the tenant needs no entry.
    pub(crate) fn forget_override(&self, tenant: &str) {
        self.set_override(tenant, None);
    }

    /// `reset(t)`, before t's partition (if any) is reset: t starts closed
    /// from now on, its next partitions included, even while a
    /// dependency-wide `force_open` holds (C11), and an eviction of its
    /// idle partition does not undo that (C9).
    pub(crate) fn reset_one(&self, tenant: &str) {
        let stays = self.forced_all.load(Ordering::SeqCst).then_some(false);
        self.set_override(tenant, stays);
    }

    /// A dependency-wide `force_open` (`true`) or `reset` (`false`): it
    /// replaces every tenant's own action, then holds for tenants with no
    /// partition. The caller walks the live partitions after this
    /// returns (`settle_forced` says why an insert racing the walk is
    /// never missed).
    pub(crate) fn operate_all(&self, forced: bool) {
        let guard = epoch::pin();
        // AcqRel: as in `set_override`.
        let old = self.overrides.swap(
            epoch::Owned::new(Overrides::default()),
            Ordering::AcqRel,
            &guard,
        );
        // SAFETY: `old` is unlinked; pinned readers may still see it.
        unsafe { guard.defer_destroy(old) };
        self.override_count.store(0, Ordering::SeqCst);
        // SeqCst, and the fence: see `settle_forced`.
        self.forced_all.store(forced, Ordering::SeqCst);
        crate::sync::fence(Ordering::SeqCst);
    }

    /// A tenant's hash, as every path computes it.
    #[cfg(test)]
    fn hash(&self, tenant: &str) -> u64 {
        self.hash_key(self.key_words(tenant))
    }

    /// The two words a partition keeps to confirm its owner without the
    /// shards: the id itself when short ([`pack_key`]), else its
    /// [`fingerprint`] (the empty id included, though no caller gets one
    /// past the bank).
    #[inline]
    fn key_words(&self, tenant: &str) -> Key {
        match pack_key(tenant) {
            Some(k) => k,
            None => self.long_key_words(tenant),
        }
    }

    #[cold]
    fn long_key_words(&self, tenant: &str) -> Key {
        fingerprint(&self.fingerprints, tenant)
    }

    /// Whether lookups of `key` may try the homes and the index before the
    /// shards. Always, but under loom for long ids, as before the index
    /// existed: the eviction models use them to check the shard path
    /// alone (with the index, the admission one grew from 124,264 to
    /// 804,858 executions); the fast paths' protocol, the same whatever
    /// form the key words take, has models of its own with short ids.
    #[inline(always)]
    fn fast(key: Key) -> bool {
        cfg!(not(loom)) || !is_fingerprint(key)
    }

    /// A tenant's hash, from its key words: the two words hashed as one
    /// `u128` (two folded multiplies: foldhash's `u128`, then its
    /// `quality` finish), so the id's bytes are read once, by `pack_key`
    /// or the fingerprint. Every path computes it so.
    #[inline]
    fn hash_key(&self, key: Key) -> u64 {
        self.hasher
            .hash_one(u128::from(key[0]) | u128::from(key[1]) << 64)
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

    /// Current LRU tick.
    #[inline]
    pub(crate) fn tick(&self) -> u64 {
        // Relaxed: an eviction hint.
        self.tick.load(Ordering::Relaxed)
    }

    /// The partition at `slot` (slot 0, the overflow, is the dependency's,
    /// not the table's).
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&Partition> {
        self.arena.get((slot as usize).checked_sub(1)?)
    }

    /// The generation the current tenure of `slot` began at: a count or
    /// record of an older generation is an earlier owner's (C9, C13).
    /// Written before the word that starts the tenure is, so whoever saw
    /// a word of the tenure (or holds a permit of it) reads it or later.
    #[inline]
    pub(crate) fn tenure(&self, slot: u32) -> u64 {
        let i = (slot as usize).wrapping_sub(1);
        // Acquire: see `begin_tenure`.
        self.tenures.get(i).map_or(0, |t| t.load(Ordering::Acquire))
    }

    /// Starts a tenure of `slot` at `generation` (a new owner's first word,
    /// or the word that frees it).
    fn begin_tenure(&self, slot: u32, generation: u64) {
        if let Some(t) = self.tenures.get((slot as usize).wrapping_sub(1)) {
            // Release: before the word of the tenure (see `tenure`).
            t.fetch_max(generation, Ordering::Release);
        }
    }

    /// The arena index of the tenant's preferred slot in each of its two
    /// home lines (the other slot of a line is the index `^ 1`): the hash,
    /// and the hash times an odd constant (whose high bits depend on all
    /// of the hash's), each scaled to the slot count (no power-of-two
    /// rounding), so the line is the scaled value's high bits and the
    /// preferred slot its lowest. One multiply a home gives the index the
    /// lookup reads with: scaling to lines, doubling, adding a bit picked
    /// apart and then counting slots from 1 cost 9 instructions a call
    /// more (callgrind, the scale loop: 150 against 141), and on the 1M
    /// row, where consecutive calls overlap their misses only as far as
    /// the core has registers to rename, 0.80 times the time.
    /// A tenant takes its preferred slot when it is free, so a lookup that
    /// tries it first finds the tenant there at once about 3 times in 4:
    /// trying slot 0 first, which of the two held the tenant was a coin
    /// toss, and the branch on it, mispredicted, discarded the work begun
    /// on the next call, whose cache miss then no longer overlapped.
    ///
    /// Two slots a line, two lines a tenant, twice as many slots as
    /// tenants, a tenant taking the first free slot of its first home,
    /// then of its second: in a full table about 88% of tenants sit in
    /// their first home, 9% in their second and 2.5% elsewhere, found
    /// through the index (`notes/placement_sim.py`;
    /// `c9_most_tenants_sit_in_their_first_home` checks it here).
    #[inline(always)]
    fn homes(&self, hash: u64) -> [usize; 2] {
        let slots = self.arena.slots as u128;
        let scale = |h: u64| ((u128::from(h) * slots) >> 64) as usize;
        [scale(hash), scale(hash.wrapping_mul(0x9e37_79b9_7f4a_7c15))]
    }

    /// The slots of the tenant of `hash`'s homes in the order a lookup
    /// tries them and an insert claims them (they must agree): the
    /// preferred slot of the first home, the other, then the second
    /// home's the same way.
    #[inline(always)]
    fn home_slots(&self, hash: u64) -> [u32; 4] {
        self.home_order(hash).map(|i| i as u32 + 1)
    }

    /// [`Table::home_slots`] as arena indices (the slot less one).
    #[inline(always)]
    fn home_order(&self, hash: u64) -> [usize; 4] {
        let [first, second] = self.homes(hash);
        [first, first ^ 1, second, second ^ 1]
    }

    /// Whether `slot` is in one of the homes of the tenant of `hash`.
    fn at_home(&self, hash: u64, slot: u32) -> bool {
        self.home_slots(hash).contains(&slot)
    }

    /// Looks a tenant up without creating it. Lock-free, allocation-free.
    #[inline]
    pub(crate) fn lookup(&self, tenant: &str) -> Option<Resolved<'_>> {
        let key = self.key_words(tenant);
        self.lookup_hashed(tenant, self.hash_key(key), key)
    }

    /// The common lookup alone, for the admission fast path: a tenant found
    /// at home or through the index, with the word its partition was
    /// confirmed by. `None` says nothing about the tenant: ask
    /// [`Table::lookup`].
    /// Always inlined: left to `#[inline]`, LLVM kept the index lookup
    /// out of line in the admission fast path, and the call and its return
    /// cost 37 more instructions a tenant call (callgrind, the scale loop
    /// at 100k: 199 → 162).
    #[inline(always)]
    pub(crate) fn lookup_known(&self, tenant: &str) -> Option<(Resolved<'_>, Word)> {
        let key = self.key_words(tenant);
        if !Self::fast(key) {
            return None;
        }
        self.lookup_fast(self.hash_key(key), key)
    }

    /// [`Table::lookup`] with the id's hash and key words already made.
    #[inline]
    fn lookup_hashed(&self, tenant: &str, hash: u64, key: Key) -> Option<Resolved<'_>> {
        if Self::fast(key) {
            if let Some((r, _)) = self.lookup_fast(hash, key) {
                return Some(r);
            }
        }
        self.lookup_sharded(tenant, hash, key)
    }

    /// The tenant's homes, then the index: the partition confirmed, with
    /// its confirming word. Both home lines are asked for at once (most
    /// tenants sit in the first; most of the rest in the second), so a
    /// tenant in its second home waits on one miss, not two.
    #[inline(always)]
    fn lookup_fast(&self, hash: u64, key: Key) -> Option<(Resolved<'_>, Word)> {
        let order = self.home_order(hash);
        crate::sync::prefetch(self.arena.at(order[2]));
        for i in order {
            if let Some(found) = self.confirm_at(i, key) {
                return Some(found);
            }
        }
        self.lookup_indexed(hash, key)
    }

    /// The partition at `slot` if it is `key`'s, with the confirming word.
    #[inline(always)]
    fn confirm(&self, slot: u32, key: Key) -> Option<(Resolved<'_>, Word)> {
        self.confirm_at((slot as usize).checked_sub(1)?, key)
    }

    /// [`Table::confirm`] by arena index (the slot less one), as the homes
    /// give it.
    #[inline(always)]
    fn confirm_at(&self, i: usize, key: Key) -> Option<(Resolved<'_>, Word)> {
        let part = self.arena.get(i)?;
        let w = part.cell.load();
        // The key is written only while the slot is held vacant, before
        // the word that hands the slot over, and taking a slot moves the
        // generation on: an occupied `w`, our key, then the same
        // generation again means the key is `w`'s owner's.
        (part.keyed(w, key) && part.cell.load().generation() == w.generation())
            .then(|| (Resolved::seen(i as u32 + 1, part, key, w), w))
    }

    /// The index's answer (tenants away from home), confirmed by the
    /// partition it names, with the confirming word.
    #[inline]
    fn lookup_indexed(&self, hash: u64, key: Key) -> Option<(Resolved<'_>, Word)> {
        self.index
            .candidates(hash)
            .find_map(|slot| self.confirm(slot, key))
    }

    /// The shards' answer; teaches the index a tenant away from home.
    #[cold]
    fn lookup_sharded(&self, tenant: &str, hash: u64, key: Key) -> Option<Resolved<'_>> {
        let short = pack_key(tenant);
        let slot = {
            let guard = epoch::pin();
            // Acquire: see the shard's contents as published.
            let shard = self.shard(hash).load(Ordering::Acquire, &guard);
            // SAFETY: shards are never null while the table lives (replaced,
            // never cleared, before Drop) and the guard keeps this one alive.
            let shard = unsafe { shard.deref() };
            shard
                .map
                .find(hash, |e| e.hash() == hash && e.is(tenant, short))
                .map(Entry::slot)?
        };
        let part = self.get(slot)?;
        let mut w = part.cell.load();
        if w.phase() == Phase::Pending && part.key_is(key) {
            // Published, not yet completed by its inserter: complete it
            // (the inserter's own completion then finds it done).
            w = self.complete(part, w, key);
        }
        // A generation seen before the key was written is one the slot has
        // left for good: reading the key synchronised with that change.
        if !part.keyed(w, key) {
            return None;
        }
        self.remember(hash, key, slot);
        Some(Resolved::seen(slot, part, key, w))
    }

    /// Completes the insert of a published tenant whose slot holds
    /// `pending`: closed, or forced open if it is to be; the word found
    /// if someone else completed it first.
    fn complete(&self, part: &Partition, pending: Word, key: Key) -> Word {
        let phase = if self.key_starts_forced(key) {
            Phase::ForcedOpen
        } else {
            Phase::Closed
        };
        let fresh = pending.transition(phase).with_trips(0);
        if part.cell.try_replace(pending, fresh) {
            fresh
        } else {
            part.cell.load()
        }
    }

    /// Points the index at a tenant's slot, if the fast lookup could not
    /// find it at home.
    fn remember(&self, hash: u64, key: Key, slot: u32) {
        if Self::fast(key) && !self.at_home(hash, slot) {
            self.index.remember(hash, slot);
        }
    }

    /// Looks a tenant up, inserting it if needed; `None` when the table is
    /// full of partitions that cannot be evicted (use the overflow).
    /// `now_ns` reads the bank's clock, for eviction's idle test of
    /// failure-rate windows (read only when something must be evicted).
    pub(crate) fn get_or_insert_at(
        &self,
        tenant: &str,
        now_ns: &dyn Fn() -> u64,
    ) -> Option<Resolved<'_>> {
        let key = self.key_words(tenant);
        let hash = self.hash_key(key);
        match self.lookup_hashed(tenant, hash, key) {
            Some(r) => Some(r),
            None => self.insert(tenant, hash, key, now_ns),
        }
    }

    /// [`Table::get_or_insert_at`] at time 0.
    #[cfg(test)]
    fn get_or_insert(&self, tenant: &str) -> Option<Resolved<'_>> {
        self.get_or_insert_at(tenant, &|| 0)
    }

    /// Inserts a tenant the lookup did not find, or finds the one a racing
    /// inserter published first; `hash` and `key` as the lookup made them.
    #[cold]
    fn insert(
        &self,
        tenant: &str,
        hash: u64,
        key: Key,
        now_ns: &dyn Fn() -> u64,
    ) -> Option<Resolved<'_>> {
        let short = pack_key(tenant);
        loop {
            let slot = self.alloc_slot(hash, now_ns)?;
            let part = self.get(slot)?;
            let (generation, pending) = self.hand_to(slot, part, key);
            if self.publish(Entry::new(hash, tenant, short, slot), key) {
                self.remember(hash, key, slot);
                let fresh = self.complete(part, pending, key);
                let fresh = self.settle_forced(part, fresh, key, generation);
                return Some(Resolved {
                    made_closed: fresh.phase() == Phase::Closed && fresh.generation() == generation,
                    ..Resolved::seen(slot, part, key, fresh)
                });
            }
            // Lost the race to another inserter of the same tenant: no one
            // was admitted here (the slot was pending throughout).
            part.cell.hand_over(Phase::Vacant);
            self.release(slot, true);
            if let Some(r) = self.lookup_hashed(tenant, hash, key) {
                return Some(r);
            }
        }
    }

    /// Hands the held `slot` (`part`) to the tenant of `key`, pending until
    /// its entry is published: the generation its first word will have,
    /// and the pending word.
    fn hand_to(&self, slot: u32, part: &Partition, key: Key) -> (u64, Word) {
        // Relaxed: an eviction hint.
        let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        // Vacant, then pending, then the tenant's first word: two
        // generations on from the held word.
        let generation = part.cell.load().generation() + 2;
        self.begin_tenure(slot, generation);
        part.set_owner(key, tick, self.window, generation);
        // Pending until published: a lookup that finds the slot at home or
        // through the index does not take it for the tenant's partition (it
        // might lose the publish to another inserter's slot); one that
        // finds the published entry completes it.
        (generation, part.cell.hand_over(Phase::Pending))
    }

    /// A tenant just published, whose first word (of `generation`) was
    /// made closed or forced open after `forced_all` and the tenant's own
    /// entry in `overrides` as its completion read them, brought in line
    /// with them as they are now (C11); `fresh` is the word the inserter's
    /// completion found. A dependency-wide `force_open` or `reset` stores
    /// the flag, then (after a `SeqCst` fence) walks the live partitions;
    /// an insert stores its word and publishes it, then (after a `SeqCst`
    /// fence) reads the flag here. By the fences, the walk sees this
    /// tenant or this read sees the new flag: an operator action racing an
    /// insert is never lost. Applied only to the first word: anything
    /// since already decided for the tenant (the walk's own action; a
    /// `force_open(t)` whose lookup completed the insert; a trip).
    fn settle_forced(&self, part: &Partition, fresh: Word, key: Key, generation: u64) -> Word {
        crate::sync::fence(Ordering::SeqCst);
        if fresh.generation() != generation {
            return fresh;
        }
        // SeqCst: see above.
        let want = if self.key_starts_forced(key) {
            Phase::ForcedOpen
        } else {
            Phase::Closed
        };
        if fresh.phase() == want {
            return fresh;
        }
        let settled = part.cell.update(|w| {
            if w.generation() != generation {
                return Step::Keep(w);
            }
            let next = w.transition(want).with_trips(0);
            Step::Install(next, next)
        });
        if settled.phase() == Phase::Closed {
            self.note_evictable();
        }
        settled
    }

    /// A slot held for a new tenant (its word vacant, no one else's):
    /// one of the tenant's homes if one is free, else any free slot, with
    /// room made by eviction when the table holds `capacity` tenants.
    /// `None` when nothing can be evicted.
    fn alloc_slot(&self, hash: u64, now_ns: &dyn Fn() -> u64) -> Option<u32> {
        // Relaxed: a count; each slot is claimed by its own CAS. An
        // inserter that finds the table full takes its count back; one
        // that races it may see the table full a moment early and evict
        // an idle partition it could have spared, which loses nothing.
        let room = self.live.fetch_add(1, Ordering::Relaxed) < self.capacity;
        if !room {
            self.live.fetch_sub(1, Ordering::Relaxed);
            // The victim's room passes to the newcomer, who still prefers
            // a home: a full table has half its slots free.
            let victim = self.evict(now_ns)?;
            return match self.claim_home(hash) {
                Some(home) => {
                    self.release(victim, false);
                    Some(home)
                }
                None => Some(victim),
            };
        }
        if let Some(home) = self.claim_home(hash) {
            return Some(home);
        }
        let found = self.claim_spare();
        if found.is_none() {
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
        found
    }

    /// A free slot in the tenant's homes, first home first, held.
    fn claim_home(&self, hash: u64) -> Option<u32> {
        self.home_slots(hash)
            .into_iter()
            .find(|&slot| self.claim(slot))
    }

    /// Any free slot, held, searched from a rotating start. Slots held or
    /// owned never outnumber `capacity`, half the slots, so a search over
    /// every slot finds one unless racing inserters take each in turn;
    /// after two rounds it gives up (the tenant goes to the overflow).
    #[cold]
    fn claim_spare(&self) -> Option<u32> {
        let n = self.arena.slots;
        // Relaxed: only spreads the searches.
        let start = self.spare.fetch_add(1, Ordering::Relaxed);
        (0..2 * n)
            .map(|k| ((start + k) % n) as u32 + 1)
            .find(|&slot| self.claim(slot))
    }

    /// Holds `slot` if it is free: a word no one is admitted to (not
    /// vacant) with no key, moved to vacant by one CAS.
    fn claim(&self, slot: u32) -> bool {
        let Some(part) = self.get(slot) else {
            return false;
        };
        let w = part.cell.load();
        // The key check comes after the word's load: a key written before
        // a later word would show here, and `w` then fails the CAS.
        !w.phase().is_held()
            && part.is_free()
            && part.cell.try_replace(w, w.transition(Phase::Vacant))
    }

    /// Frees a slot this thread holds (vacant): no key, then a closed
    /// word, which is what makes it free. `room`: also give back the
    /// tenant's room (not when it passes to another tenant).
    fn release(&self, slot: u32, room: bool) {
        if let Some(part) = self.get(slot) {
            part.set_key(NO_KEY);
            let free = part.cell.hand_over(Phase::Closed);
            self.begin_tenure(slot, free.generation());
        }
        if room {
            // Relaxed: a count; see `alloc_slot`.
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The key words of an entry's tenant, as its partition keeps them.
    fn entry_key(&self, e: &Entry) -> Key {
        match e {
            Entry::Short { key, .. } => *key,
            Entry::Long { key, .. } => self.long_key_words(key),
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

    /// Publishes tenant → slot in its shard (`key`: the tenant's key
    /// words); false if another slot won.
    fn publish(&self, entry: Entry, key: Key) -> bool {
        let (hash, slot) = (entry.hash(), entry.slot());
        self.rewrite_shard(hash, |shard| {
            let same = |e: &Entry| e.hash() == hash && e.same_id(&entry);
            if let Some(other) = shard.map.find(hash, same).map(Entry::slot) {
                // An entry naming our own slot is stale: we hold the slot.
                // Another inserter's pending slot is live too: it is about
                // to complete.
                let live = other != slot
                    && self
                        .get(other)
                        .is_some_and(|p| p.key_is(key) && p.cell.load().phase() != Phase::Vacant);
                if live {
                    return None;
                }
            }
            let mut map = self.copy_without(&shard.map, 1, same);
            map.insert_unique(hash, entry.clone(), Entry::hash);
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
        drop: impl Fn(&Entry) -> bool,
    ) -> ShardMap {
        let mut out = hashbrown::HashTable::with_capacity(map.len() + extra);
        for e in map.iter().filter(|e| !drop(e)) {
            out.insert_unique(e.hash(), e.clone(), Entry::hash);
        }
        out
    }

    /// Removes `entry` from its shard and the index if it is still there.
    fn unpublish(&self, entry: &Entry) {
        let (hash, slot) = (entry.hash(), entry.slot());
        self.index.forget(hash, slot);
        let gone = |e: &Entry| e.slot() == slot && e.same_id(entry);
        self.rewrite_shard(hash, |shard| {
            shard.map.find(hash, gone)?;
            Some(self.copy_without(&shard.map, 0, gone))
        });
    }

    /// Finds a victim, makes it vacant, unlinks it; returns its slot.
    /// A victim that stops being evictable before it is taken (it was
    /// used, or another inserter took it) sends the scan round again: the
    /// tenant goes to the overflow only when a scan finds nothing to take
    /// (C9). Each lost race is another thread's progress, so the loop
    /// ends.
    fn evict(&self, now_ns: &dyn Fn() -> u64) -> Option<u32> {
        let now = std::cell::OnceCell::new();
        let now = || *now.get_or_init(now_ns);
        // Acquire: pairs with `note_evictable`; read before the scans, so
        // an event during them leaves the hint stale, never wrong.
        let epoch = self.evictable_epoch.load(Ordering::Acquire);
        if self.none_evictable_at.load(Ordering::Acquire) == epoch {
            return None;
        }
        let mut every = false;
        loop {
            match self.scan_for_victim(&now, every) {
                Scan::Taken(slot) => return Some(slot),
                Scan::Lost => crate::sync::spin_hint(),
                // The sample found nothing: look at every shard before
                // sending the tenant to the overflow.
                Scan::Nothing if !every => every = true,
                Scan::Nothing => {
                    // Release: see `evictable_epoch`.
                    self.none_evictable_at.store(epoch, Ordering::Release);
                    return None;
                }
            }
        }
    }

    /// Whether a newcomer would go to the overflow now, as far as the last
    /// eviction scan knows (see `none_evictable_at`); no scan made here.
    pub(crate) fn known_full(&self) -> bool {
        // Relaxed/Acquire: a hint, as in `evict`.
        self.live.load(Ordering::Relaxed) >= self.capacity
            && self.none_evictable_at.load(Ordering::Acquire)
                == self.evictable_epoch.load(Ordering::Acquire)
    }

    /// Something may have become evictable (see `none_evictable_at`).
    pub(crate) fn note_evictable(&self) {
        // Release: a scan that reads the new epoch redoes its search.
        self.evictable_epoch.fetch_add(1, Ordering::Release);
    }

    /// One eviction scan (see [`Table::evict`]): a sample of the shards
    /// from a rotating cursor, or (`every`) all of them.
    fn scan_for_victim(&self, now_ns: &dyn Fn() -> u64, every: bool) -> Scan {
        let n = self.shards.len();
        // Relaxed: only spreads the scans.
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        let mut lru: Option<(u64, Word, Entry)> = None;
        let mut lost = false;
        let scan = if every { n } else { n.min(EVICT_SCAN_IDLE) };
        for i in 0..scan {
            if (i == EVICT_SCAN_FIRST || every) && lru.is_some() {
                break;
            }
            let guard = epoch::pin();
            // Acquire: see `lookup`.
            let shard = self.shards[(start + i) % n].load(Ordering::Acquire, &guard);
            // SAFETY: see `lookup`.
            let shard = unsafe { shard.deref() };
            for e in shard.map.iter() {
                let Some(p) = self.get(e.slot()) else {
                    continue;
                };
                let w = p.cell.load();
                if w.phase() != Phase::Closed || w.probes() != 0 {
                    continue;
                }
                // The shard may predate the slot's recycling: only the
                // owner's own entry may take (and unpublish) it.
                if !p.key_is(self.entry_key(e)) {
                    continue;
                }
                if p.is_idle(w, now_ns) {
                    if self.take(p, w, e) {
                        return Scan::Taken(e.slot());
                    }
                    lost = true;
                } else {
                    let used = p.last_used();
                    if lru.as_ref().is_none_or(|(u, ..)| used < *u) {
                        lru = Some((used, w, e.clone()));
                    }
                }
            }
        }
        let Some((_, w, e)) = lru else {
            return if lost { Scan::Lost } else { Scan::Nothing };
        };
        match self.get(e.slot()) {
            Some(p) if self.take(p, w, &e) => Scan::Taken(e.slot()),
            _ => Scan::Lost,
        }
    }

    fn take(&self, p: &Partition, seen: Word, entry: &Entry) -> bool {
        if !p.cell.try_replace(seen, seen.transition(Phase::Vacant)) {
            return false;
        }
        self.unpublish(entry);
        true
    }

    /// The tenant id owning `slot` (cold paths: events, snapshots). A
    /// short id is its partition's key words; a long one is found in the
    /// shard its fingerprint's hash names.
    pub(crate) fn key_of(&self, slot: u32, part: &Partition) -> Option<StdArc<str>> {
        let key = part.key();
        if slot == 0 || key == NO_KEY {
            return None;
        }
        if !is_fingerprint(key) {
            return unpack_key(key);
        }
        let hash = self.hash_key(key);
        let guard = epoch::pin();
        // Acquire: see `lookup`.
        let shard = self.shard(hash).load(Ordering::Acquire, &guard);
        // SAFETY: see `lookup`.
        let shard = unsafe { shard.deref() };
        shard
            .map
            .find(hash, |e| e.hash() == hash && e.slot() == slot)
            .and_then(Entry::id)
    }

    /// [`Table::key_of`] for the owner of `slot` as of `generation`: none
    /// once the slot's tenure began after it. The tenure is read on both
    /// sides of the key: a hand-over moves it before writing the new key.
    pub(crate) fn owner_name(
        &self,
        slot: u32,
        part: &Partition,
        generation: u64,
    ) -> Option<StdArc<str>> {
        let since = self.tenure(slot);
        if since > generation {
            return None;
        }
        let name = self.key_of(slot, part)?;
        (self.tenure(slot) == since).then_some(name)
    }

    /// Runs `f` on every tenant partition that is open or half-open (the
    /// sweep's walk: loads only, no names).
    pub(crate) fn for_each_in_episode(&self, mut f: impl FnMut(u32, &Partition)) {
        for s in 1..=self.arena.slots as u32 {
            if let Some(p) = self.get(s) {
                if matches!(p.cell.load().phase().seen(), Phase::Open | Phase::HalfOpen) {
                    f(s, p);
                }
            }
        }
    }

    /// Every live tenant partition with its slot and key.
    pub(crate) fn live(&self) -> Vec<(u32, &Partition, StdArc<str>)> {
        self.live_tenures()
            .into_iter()
            .map(|(s, p, name, _)| (s, p, name))
            .collect()
    }

    /// [`Table::live`], each with the tenure its name was read in: a
    /// reader of the partition's state and counters that finds the
    /// tenure unchanged afterwards read them of the owner named.
    pub(crate) fn live_tenures(&self) -> Vec<(u32, &Partition, StdArc<str>, u64)> {
        (1..=self.arena.slots as u32)
            .filter_map(|s| {
                let p = self.get(s)?;
                let since = self.tenure(s);
                if p.cell.load().phase().is_held() {
                    return None;
                }
                Some((s, p, self.key_of(s, p)?, since))
            })
            .collect()
    }
}

/// Bytes of one tenant slot in the arena, which has two a tenant (its map
/// entry and index cells come on top; the cold part only once something
/// non-healthy happens). 32 bytes on 64-bit targets; `core/tests/memory.rs`
/// measures the whole (about 138 bytes a tenant with a 12-byte id).
pub const PARTITION_BYTES: usize = std::mem::size_of::<Partition>();

// C9's budget: a partition within 128 bytes plus its key, with room for the
// key's shard entry and reference-counted allocation: two slots of 32.
#[cfg(not(loom))]
const _: () = assert!(PARTITION_BYTES == 32);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

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
    fn c9_packed_short_ids_hold_every_byte_and_the_length() {
        let reference = |id: &str| -> Option<[u64; 2]> {
            let b = id.as_bytes();
            if b.is_empty() || b.len() > PART_KEY {
                return None;
            }
            let mut buf = [0u8; 16];
            buf[..b.len()].copy_from_slice(b);
            buf[15] = b.len() as u8;
            let lo = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            let hi = u64::from_le_bytes(buf[8..].try_into().expect("8 bytes"));
            Some([lo, hi])
        };
        let all = "abcdefghijklmnopqrstu\u{e9}";
        let mut seen = std::collections::HashSet::new();
        for n in 0..=all.len() {
            let Some(id) = all.get(..n) else { continue };
            assert_eq!(pack_key(id), reference(id), "{id:?}");
            if let Some(k) = pack_key(id) {
                assert!(seen.insert(k), "{id:?} packs like a shorter id");
                assert_eq!(unpack_key(k).as_deref(), Some(id));
            }
        }
        assert_eq!(seen.len(), PART_KEY);
        // Ids differing in one byte, at each position, pack differently.
        for i in 0..PART_KEY {
            let a: String = (0..PART_KEY)
                .map(|j| if j == i { 'x' } else { 'a' })
                .collect();
            let b = "a".repeat(PART_KEY);
            assert_ne!(pack_key(&a), pack_key(&b), "byte {i}");
        }
    }

    #[test]
    fn c9_an_index_hint_counts_only_once_the_partition_confirms_it() {
        let t = Table::new(8, None);
        let a = t.get_or_insert("tenant-a").expect("room");
        // A forged hint: tenant-b pointed at tenant-a's slot.
        t.index.remember(t.hash("tenant-b"), a.slot);
        assert!(t.lookup("tenant-b").is_none());
        let b = t.get_or_insert("tenant-b").expect("room");
        assert_ne!(b.slot, a.slot);
        assert_eq!(t.lookup("tenant-a").map(|r| r.slot), Some(a.slot));
        assert_eq!(t.lookup("tenant-b").map(|r| r.slot), Some(b.slot));
    }

    /// The slots of `id`'s homes, first home first.
    fn home_slots(t: &Table, id: &str) -> [u32; 4] {
        t.home_slots(t.hash(id))
    }

    #[test]
    fn c9_a_tenant_away_from_home_is_found_through_the_index() {
        let t = Table::new(8, None);
        let id = "tenant-away";
        // Its homes held (as by racing inserters): it must go elsewhere.
        let homes = home_slots(&t, id);
        let held: Vec<u32> = homes.into_iter().filter(|&s| t.claim(s)).collect();
        let r = t.get_or_insert(id).expect("room");
        assert!(!homes.contains(&r.slot), "{} is a home", r.slot);
        for s in held {
            t.release(s, false);
        }
        // Found through the index alone: no pin, no shard.
        let h = t.hash(id);
        assert!(t.index.candidates(h).any(|s| s == r.slot));
        assert_eq!(t.lookup_known(id).map(|(k, _)| k.slot), Some(r.slot));
        // Every cell overwritten with junk (a slot never handed out): the
        // shards still answer, and the index learns the tenant again.
        for c in t.index.cells.iter().flat_map(|b| b.0.iter()) {
            c.store(u32::MAX, Ordering::Relaxed);
        }
        assert!(t.lookup_known(id).is_none());
        assert_eq!(t.lookup(id).map(|r| r.slot), Some(r.slot));
        assert_eq!(t.lookup_known(id).map(|(k, _)| k.slot), Some(r.slot));
        // A tenant at home takes no cell.
        let home = t.get_or_insert("tenant-home").expect("room");
        assert!(home_slots(&t, "tenant-home").contains(&home.slot));
        let hh = t.hash("tenant-home");
        assert!(!t.index.candidates(hh).any(|s| s == home.slot));
    }

    /// Where the tenants of a full table sit: (first home, second home,
    /// elsewhere).
    fn placement(t: &Table, ids: &[String]) -> (usize, usize, usize) {
        let mut at = (0, 0, 0);
        for id in ids {
            let slot = t.get_or_insert(id).expect("room").slot;
            match home_slots(t, id).iter().position(|&s| s == slot) {
                Some(0 | 1) => at.0 += 1,
                Some(_) => at.1 += 1,
                None => at.2 += 1,
            }
        }
        at
    }

    #[test]
    fn c9_most_tenants_sit_in_their_first_home() {
        let n = 10_000;
        let t = Table::new(n, None);
        let ids: Vec<String> = (0..n).map(|i| format!("tenant-{i}")).collect();
        let (first, second, away) = placement(&t, &ids);
        // notes/placement_sim.py: 88.2%, 9.4%, 2.4%.
        assert!(
            first * 100 >= 85 * n as usize,
            "{first} of {n} in the first home"
        );
        assert!(
            away * 100 <= 4 * n as usize,
            "{away} of {n} away ({second} in the second)"
        );
        for id in &ids {
            assert!(
                t.lookup_known(id).is_some(),
                "{id}: found at home or indexed"
            );
        }
        // Each tenant on the index sits in its home cell, where lookups
        // read first, unless its bucket's cell was taken.
        let in_home_cell = ids
            .iter()
            .filter(|id| {
                let h = t.hash(id);
                let slot = t.lookup(id).expect("inserted").slot;
                !home_slots(&t, id).contains(&slot)
                    && t.index.bucket(h).expect("a bucket").0[Index::home(h)]
                        .load(Ordering::Relaxed)
                        == Index::entry(h, slot)
            })
            .count();
        assert!(in_home_cell * 10 >= away * 9, "{in_home_cell} of {away}");
    }

    /// Ids that differ in a few bytes, as real ones do ("tenant-17"), must
    /// spread over the home lines and the index buckets as random ones
    /// would, whatever the table's random seed. Homes: a tenant whose
    /// homes are full is looked up twice over. Index: a bucket holds 16
    /// cells, and a tenant whose bucket is full is not indexed (each of
    /// its calls takes the shards, and teaching the index evicts a
    /// neighbour's cell); here every id is put on an index sized as a
    /// table's for 4 times as many tenants, a harder test than the ~2.5%
    /// a table puts there. (With one cell a tenant, before the homes: over
    /// 1,000 seeds a full table of these 1,000 ids left at most 12 out;
    /// with foldhash's `fast` variant, one multiply of the id's two words,
    /// 2 to 5 tables in 100 left 20 or more out, and the worst 342.)
    #[test]
    fn c9_structured_ids_spread_over_homes_and_index_buckets_whatever_the_seed() {
        let n = 1000u32;
        let formats: [fn(u32) -> String; 3] = [
            |i| format!("tenant-{i}"),
            |i| format!("acct-{i:06}-eu"),
            // The scale bench's: `t` and one letter a..p per nibble.
            |i| {
                let letters = (0..8)
                    .rev()
                    .map(|k| char::from(b'a' + (i >> (4 * k) & 15) as u8));
                std::iter::once('t').chain(letters).collect()
            },
        ];
        for (f, format) in formats.iter().enumerate() {
            let ids: Vec<String> = (0..n).map(format).collect();
            let (mut away, mut out) = (0, 0);
            for _ in 0..100 {
                let t = Table::new(n, None);
                away = away.max(placement(&t, &ids).2);
                let index = Index::try_new(4 * n).expect("a small index");
                for (i, id) in ids.iter().enumerate() {
                    index.remember(t.hash(id), i as u32 + 1);
                }
                let missed = ids
                    .iter()
                    .enumerate()
                    .filter(|&(i, id)| !index.candidates(t.hash(id)).any(|s| s == i as u32 + 1));
                out = out.max(missed.count());
            }
            assert!(away <= 50, "format {f}: up to {away} of {n} away from home");
            assert!(out < 20, "format {f}: up to {out} of {n} not indexed");
        }
    }

    #[test]
    fn c9_long_ids_are_confirmed_through_the_index_by_their_fingerprint() {
        let t = Table::new(8, None);
        let a = "3f2b1c4d-0000-4000-8000-00000000000a";
        let b = "3f2b1c4d-0000-4000-8000-00000000000b";
        let ka = t.key_words(a);
        assert!(is_fingerprint(ka), "never a packed short id's length byte");
        assert_ne!(ka, t.key_words(b));
        let ra = t.get_or_insert(a).expect("room");
        // Found at home: no pin, no shard.
        let (known, w) = t.lookup_known(a).expect("at home");
        assert_eq!((known.slot, w.phase()), (ra.slot, Phase::Closed));
        // A forged hint: b pointed at a's slot. The fingerprint refuses it.
        t.index.remember(t.hash(b), ra.slot);
        assert!(t.lookup_known(b).is_none());
        assert!(t.lookup(b).is_none());
        let rb = t.get_or_insert(b).expect("room");
        assert_ne!(rb.slot, ra.slot);
        assert_eq!(t.lookup_known(b).map(|(r, _)| r.slot), Some(rb.slot));
        // Another table keys its fingerprints afresh.
        assert_ne!(Table::new(8, None).key_words(a), ka);
    }

    #[test]
    fn c9_a_hint_to_a_recycled_slot_resolves_nothing() {
        let t = Table::new(1, None);
        let a = t.get_or_insert("tenant-a").expect("room");
        let ha = t.hash("tenant-a");
        // tenant-b evicts idle tenant-a (its slot freed, or taken by b).
        let b = t.get_or_insert("tenant-b").expect("evicts a");
        assert!(t.lookup("tenant-a").is_none());
        // Hints as a racing reader might have left them, to a's old slot
        // and to b's: neither resolves a.
        t.index.remember(ha, a.slot);
        t.index.remember(ha, b.slot);
        assert!(t.lookup("tenant-a").is_none());
        assert_eq!(t.lookup("tenant-b").map(|r| r.slot), Some(b.slot));
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
    fn c9_tenant_windows_count_in_the_shared_copy_only() {
        let t = Table::new(8, Some(Duration::from_secs(10)));
        let r = t.get_or_insert("a").expect("room");
        assert!(
            r.part.window().is_none(),
            "a tenant's window is per episode"
        );
        let (owned, stripes, episode) = r
            .part
            .with_episode_window(|w| (w.owned, w.stripes.len(), w.episode))
            .expect("a failure-rate table has windows");
        assert_eq!((owned, stripes), (0, 1));
        assert_eq!(
            episode,
            r.part.cell.load().generation(),
            "the tenant's first episode"
        );
    }

    #[test]
    fn c9_every_slot_a_tenant_takes_has_its_window_and_no_other_does() {
        let n = 300;
        let t = Table::new(n, Some(Duration::from_secs(10)));
        let ids: Vec<String> = (0..n).map(|i| format!("tenant-{i}")).collect();
        let slots: Vec<u32> = ids
            .iter()
            .map(|id| t.get_or_insert(id).expect("room").slot)
            .collect();
        for (id, &slot) in ids.iter().zip(&slots) {
            let r = t.lookup(id).expect("inserted");
            assert_eq!(r.slot, slot, "{id}");
            let owned = r.part.with_episode_window(|w| w.owned);
            assert_eq!(owned, Some(0), "{id}");
        }
        let untaken = (1..=2 * n)
            .filter(|s| !slots.contains(s))
            .filter(|&s| t.get(s).expect("in the arena").cell.side_if_any().is_none())
            .count();
        assert_eq!(untaken, n as usize, "a free slot has no cold part");
        assert!(t.get(2 * n + 1).is_none(), "past the arena");
        assert!(t.get(0).is_none(), "the overflow is not the table's");
    }

    /// The flags Linux keeps for the mapping holding `addr` (`VmFlags` in
    /// /proc/self/smaps).
    #[cfg(target_os = "linux")]
    fn vm_flags_at(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&addr);
                        continue;
                    }
                }
            }
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if inside {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn c9_a_large_arena_is_aligned_and_advised_to_huge_pages() {
        let large = Table::new(1 << 17, None); // 8 MiB of slots
        let base = large.arena.base.as_ptr() as usize;
        assert_eq!(base % HUGE_PAGE, 0);
        assert!(large.get_or_insert("acme").is_some());
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            // "hg": MADV_HUGEPAGE was taken (whether the kernel then finds
            // huge pages to give is up to its free memory).
            let flags = vm_flags_at(base).expect("the arena is mapped");
            assert!(flags.split(' ').any(|f| f == "hg"), "{flags}");
        }
    }

    /// A home is a cache line: both its slots are read by one miss.
    #[test]
    fn c9_every_home_line_is_one_cache_line() {
        // Sizes from one line to past the huge-page threshold, several
        // tables each (the allocator's placement varies with its state).
        let tables: Vec<Table> = [1, 2, 3, 17, 1000, 5000, 40_000, 1 << 17]
            .into_iter()
            .flat_map(|n| (0..4).map(move |_| Table::new(n, None)))
            .collect();
        for t in &tables {
            let base = t.arena.base.as_ptr() as usize;
            assert_eq!(base % LINE, 0, "{} slots at {base:#x}", t.arena.slots);
        }
    }

    /// What the profile's `memory_limit` is checked against is what a
    /// table holds once made.
    #[test]
    fn c9_footprint_is_what_a_table_allocates_up_front() {
        for n in [1, 17, 5000, 1 << 17, crate::profile::MAX_MAX_TENANTS] {
            let t = Table::new(n, None);
            let held = t.arena.slots * std::mem::size_of::<Partition>()
                + std::mem::size_of_val(&*t.index.cells)
                + std::mem::size_of_val(&*t.tenures)
                + t.shards.len()
                    * (std::mem::size_of::<epoch::Atomic<Shard>>() + std::mem::size_of::<Shard>());
            assert_eq!(Table::footprint(n), held as u64, "{n} tenants");
        }
        let most = Table::footprint(crate::profile::MAX_MAX_TENANTS);
        assert!(most < 90_000_000, "{most} bytes for the largest table");
    }

    #[test]
    fn c9_the_largest_max_tenants_is_not_a_failure() {
        // 2,000,000 slots: a 61 MiB arena and a 2 MB index, zeroed when
        // made; the table works and drops.
        let t = Table::new(crate::profile::MAX_MAX_TENANTS, None);
        for id in ["a", "b", "a-much-longer-tenant-id-than-a-partition-keeps"] {
            let r = t.get_or_insert(id).expect("room");
            assert_eq!(t.lookup(id).map(|l| l.slot), Some(r.slot));
        }
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
                        for i in 0..40_000 {
                            w.record(0, (i + t) % 4 == 0);
                        }
                    });
                }
            });
        }
        assert_eq!(w.totals(0), (720_000, 180_000));
    }

    #[test]
    fn c5_the_thread_one_past_the_owned_copies_counts_in_the_shared_one_by_cas() {
        // The window has as many owned copies as the lowest index above 0
        // a thread here holds: that thread counts in the shared copy with
        // the threads of higher indices and those that hold none (there
        // are more threads than indices), all by CAS. A plain store of its
        // would lose theirs (in most rounds: the threads must overlap).
        const THREADS: usize = thread_index::MAX + 4;
        const CALLS: u64 = 200_000;
        for round in 0..5 {
            let window = std::sync::OnceLock::new();
            let held = std::sync::Mutex::new(Vec::new());
            let (ready, go) = (
                std::sync::Barrier::new(THREADS + 1),
                std::sync::Barrier::new(THREADS + 1),
            );
            std::thread::scope(|s| {
                for _ in 0..THREADS {
                    s.spawn(|| {
                        if let Some(i) = thread_index::get() {
                            held.lock().expect("not poisoned").push(i);
                        }
                        ready.wait();
                        go.wait();
                        let w: &Window = window.get().expect("made before go");
                        // Over all ten buckets, none near the count that
                        // halves.
                        for c in 0..CALLS {
                            w.record(c % 10 * w.width_ns, c % 4 == 0);
                        }
                    });
                }
                ready.wait();
                let held = held.lock().expect("not poisoned");
                let owned = *held
                    .iter()
                    .filter(|&&i| i > 0)
                    .min()
                    .expect("a thread here holds an index above 0");
                assert!(held.len() < THREADS, "some threads hold no index");
                window
                    .set(Window::new(Duration::from_secs(10), owned))
                    .expect("set once");
                go.wait();
            });
            let n = THREADS as u64 * CALLS;
            let w = window.get().expect("made");
            assert_eq!(w.totals(9 * w.width_ns), (n, n / 4), "round {round}");
        }
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
    fn c11_a_clear_forgets_every_count_even_one_an_owner_writes_back() {
        let w = Window::new(Duration::from_secs(10), 2);
        for _ in 0..10 {
            w.record(0, true);
        }
        // An owner's load before the clear and its store after it: the
        // straddle writes the old bucket back with one more call.
        let copy = &w.stripes[0][0];
        let before = copy.load(Ordering::Relaxed);
        w.clear();
        assert_eq!(w.totals(500_000_000), (0, 0));
        assert!(w.is_empty(500_000_000));
        copy.store(bucket_plus(before, 0, true).0, Ordering::Relaxed);
        let (calls, fails) = w.totals(500_000_000);
        assert!(calls <= 1 && fails <= 1, "{calls} calls, {fails} failures");
        // The same bucket counts again at once: no blind interval (C5).
        w.record(600_000_000, false);
        w.record(600_000_000, true);
        let (calls, _) = w.totals(900_000_000);
        assert!(calls >= 2, "{calls}");
        // The next bucket starts from nothing but its own calls.
        w.record(1_200_000_000, false);
        assert_eq!(w.totals(1_300_000_000).0, calls + 1);
        // A tenant's window (no owned copies) is zeroed.
        let t = Window::new(Duration::from_secs(10), 0);
        t.record(0, true);
        t.clear();
        assert_eq!(t.totals(0), (0, 0));
        t.record(0, true);
        assert_eq!(t.totals(0), (1, 1));
    }

    /// Passes left for the window's epoch at `now_ns`.
    fn passes(w: &Window, now_ns: u64) -> u64 {
        let v = w.spare.load(Ordering::Relaxed);
        if (v >> S_EPOCH_SHIFT) & B_EPOCH == w.epoch(now_ns) {
            v & S_PASSES
        } else {
            0
        }
    }

    #[test]
    fn c5_failures_below_the_threshold_pass_and_the_one_that_reaches_it_trips() {
        for (rate, min_calls, successes) in [(0.5, 10, 100u64), (0.2, 5, 37), (0.9, 3, 9)] {
            let w = Window::new(Duration::from_secs(10), 1);
            for _ in 0..successes {
                w.record_and_judge(0, false, rate, min_calls);
            }
            let (mut calls, mut fails) = (successes, 0u64);
            let mut passed = 0;
            loop {
                let judged_before = passes(&w, 0);
                calls += 1;
                fails += 1;
                let reached = fails as f64 >= rate * calls as f64 && calls >= min_calls;
                let tripped = w.record_and_judge(0, true, rate, min_calls);
                assert_eq!(
                    tripped, reached,
                    "rate {rate}: failure {fails} of {calls} calls"
                );
                if judged_before > 0 {
                    passed += 1;
                }
                if tripped {
                    break;
                }
            }
            assert!(
                passed >= fails / 2,
                "rate {rate}: only {passed} of {fails} failures passed without a judgement"
            );
        }
    }

    #[test]
    fn c5_passes_last_only_within_their_bucket_epoch_and_a_clear() {
        let s = 1_000_000_000;
        let w = Window::new(Duration::from_secs(10), 1);
        for _ in 0..10 {
            w.record_and_judge(0, false, 0.5, 4);
        }
        assert!(!w.record_and_judge(0, true, 0.5, 4));
        assert!(passes(&w, 0) > 0, "1 failure in 11 calls leaves passes");
        // The successes leave the window: four failures now trip, though
        // passes granted in the first bucket would have let them through.
        let later = 10 * s + 1;
        let trips: Vec<bool> = (0..4)
            .map(|_| w.record_and_judge(later, true, 0.5, 4))
            .collect();
        assert_eq!(trips, [false, false, false, true]);

        let w = Window::new(Duration::from_secs(10), 1);
        for _ in 0..10 {
            w.record_and_judge(0, false, 0.5, 1);
        }
        w.record_and_judge(0, true, 0.5, 1);
        assert!(passes(&w, 0) > 0);
        w.clear();
        assert_eq!(passes(&w, 0), 0, "a clear voids the passes");
        assert!(
            w.record_and_judge(0, true, 0.5, 1),
            "the first failure after the clear is judged: 1 of 1"
        );
    }

    #[test]
    fn c5_a_halving_bucket_voids_the_passes() {
        let s = 1_000_000_000;
        let w = Window::new(Duration::from_secs(10), 1);
        // Second 0: 600k failures. Second 1: a bucket one call short of
        // full, all successes.
        for _ in 0..600_000 {
            w.record(0, true);
        }
        for _ in 0..B_FIELD - 1 {
            w.record(s, false);
        }
        assert!(!w.record_and_judge(s, true, 0.5, 1), "600,001 of 1,648,575");
        assert!(passes(&w, s) > 0);
        // The success that finds the bucket full halves it: half its
        // successes go, and the window's rate rises past 50% without a
        // failure.
        w.record(s, false);
        let (calls, fails) = w.totals(s);
        assert!(fails * 2 >= calls, "{fails} of {calls}");
        assert!(
            w.record_and_judge(s, true, 0.5, 1),
            "the next failure must be judged, and trip"
        );
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

    /// The window's rule, written plainly: ten buckets of `width` keyed by
    /// `now / width`, a full bucket halving both counts before it counts,
    /// and C5's judgement on every failure and on a success only while the
    /// last judgement left it armed (a high rate short of `min_calls`).
    struct ReferenceWindow {
        width: u64,
        buckets: [(u64, u64, u64); BUCKETS],
        armed: bool,
    }

    impl ReferenceWindow {
        fn new(width: u64) -> Self {
            Self {
                width,
                buckets: [(0, 0, 0); BUCKETS],
                armed: false,
            }
        }

        fn record(&mut self, now: u64, failed: bool) {
            let e = now / self.width;
            let b = &mut self.buckets[(e % BUCKETS as u64) as usize];
            if b.0 != e {
                *b = (e, 0, 0);
            }
            if b.1 >= B_FIELD {
                *b = (e, b.1 / 2, b.2 / 2);
            }
            b.1 += 1;
            b.2 += u64::from(failed);
        }

        fn totals(&self, now: u64) -> (u64, u64) {
            let e = now / self.width;
            self.buckets
                .iter()
                .filter(|b| e - b.0 < BUCKETS as u64)
                .fold((0, 0), |(c, f), b| (c + b.1, f + b.2))
        }

        fn record_and_judge(&mut self, now: u64, failed: bool, rate: f64, min: u64) -> bool {
            self.record(now, failed);
            if !failed && !self.armed {
                return false;
            }
            let (calls, fails) = self.totals(now);
            let high = fails > 0 && fails as f64 >= rate * calls as f64;
            let trip = high && calls >= min;
            self.armed = high && !trip;
            trip
        }

        fn clear(&mut self) {
            self.buckets = [(0, 0, 0); BUCKETS];
            self.armed = false;
        }
    }

    #[derive(Clone, Debug)]
    enum WindowOp {
        Advance(u64),
        Call(bool),
        Clear,
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(1000))]

        /// Every count and every trip of the window, passes and owned
        /// copies included, is the plain rule's (C5, C11).
        #[test]
        #[allow(clippy::disallowed_types)] // `prop_oneof!` builds a std `Arc`
        fn c5_c11_the_window_counts_and_trips_as_its_plain_rule(
            rate in proptest::sample::select(vec![0.05, 0.1, 0.25, 1.0 / 3.0, 0.5, 0.75, 0.9, 1.0]),
            min_calls in 1u64..24,
            owned in proptest::sample::select(vec![0usize, 2]),
            // From the clock's start, or twelve buckets before the 24-bit
            // bucket epoch wraps (1 s buckets: after 194 days).
            start in proptest::sample::select(vec![0u64, B_EPOCH + 1 - 12]),
            ops in proptest::collection::vec(
                proptest::prop_oneof![
                    12 => proptest::bool::weighted(0.4).prop_map(WindowOp::Call),
                    3 => (0u64..1500).prop_map(WindowOp::Advance),
                    1 => (8000u64..12_000).prop_map(WindowOp::Advance),
                    1 => proptest::strategy::Just(WindowOp::Clear),
                ],
                1..300,
            ),
        ) {
            use proptest::prop_assert_eq;
            let w = Window::new(Duration::from_secs(10), owned);
            let mut r = ReferenceWindow::new(w.width_ns);
            let mut now = start * w.width_ns;
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    WindowOp::Advance(ms) => now += ms * 1_000_000,
                    WindowOp::Call(failed) => {
                        let want = r.record_and_judge(now, failed, rate, min_calls);
                        let got = w.record_and_judge(now, failed, rate, min_calls);
                        prop_assert_eq!(got, want, "op {}: trip of {:?} at {} ns", i, op, now);
                    }
                    WindowOp::Clear => {
                        r.clear();
                        w.clear();
                    }
                }
                prop_assert_eq!(w.totals(now), r.totals(now), "op {}: totals at {} ns", i, now);
                prop_assert_eq!(w.is_empty(now), r.totals(now).0 == 0);
            }
        }
    }

    #[test]
    fn c5_a_full_bucket_halves_both_counts_at_any_epoch() {
        let s = 1_000_000_000;
        for (owned, second) in [(0, 0), (0, 7), (1, 0), (1, 7)] {
            let w = Window::new(Duration::from_secs(10), owned);
            let mut r = ReferenceWindow::new(w.width_ns);
            // The bucket before counts on, untouched by the halving.
            if second > 0 {
                w.record((second - 1) * s, true);
                r.record((second - 1) * s, true);
            }
            let now = second * s + 5;
            for i in 0..B_FIELD + 3 {
                w.record(now, i % 4 == 0);
                r.record(now, i % 4 == 0);
            }
            let want = r.totals(now);
            assert!(want.0 < B_FIELD, "the reference halved: {want:?}");
            assert_eq!(w.totals(now), want, "owned {owned}, second {second}");
            // The next bucket starts from its own calls.
            w.record(now + s, false);
            assert_eq!(w.totals(now + s), (want.0 + 1, want.1));
        }
    }

    /// Marks as the failure path takes them, for the tests of `spare`.
    fn mark(w: &Window, now: u64) -> u64 {
        w.pass(w.epoch(now)).expect_err("no pass is open")
    }

    #[test]
    fn c5_a_judgement_grants_every_failure_that_cannot_reach_the_threshold() {
        for (rate, calls, fails) in [
            (0.5, 4u64, 1u64),
            (0.5, 100, 10),
            (0.25, 40, 3),
            (0.9, 30, 2),
        ] {
            let w = Window::new(Duration::from_secs(10), 0);
            for i in 0..calls {
                w.record(0, i < fails);
            }
            let m = mark(&w, 0);
            assert!(!w.judge(0, rate, 1_000, Some(m)));
            // The most failures in a row that keep the rate below it.
            let most = (0..S_PASSES)
                .take_while(|&n| ((fails + n) as f64) < rate * (calls + n) as f64)
                .last()
                .unwrap_or(0);
            for n in 0..most {
                assert_eq!(
                    w.pass(w.epoch(0)),
                    Ok(()),
                    "rate {rate}, {fails}/{calls}: pass {n}"
                );
            }
            assert!(
                w.pass(w.epoch(0)).is_err(),
                "rate {rate}, {fails}/{calls}: {most} passes"
            );
        }
    }

    #[test]
    fn c5_c11_a_judgement_whose_mark_is_stale_installs_no_passes() {
        let succeed = |w: &Window| {
            for _ in 0..20 {
                w.record(0, false);
            }
        };
        // A clear after the mark.
        let w = Window::new(Duration::from_secs(10), 0);
        w.record(0, true);
        let m = mark(&w, 0);
        w.clear();
        succeed(&w);
        assert!(!w.judge(0, 0.5, 100, Some(m)));
        assert_eq!(passes(&w, 0), 0, "passes from a mark older than the clear");
        // A clear, then a newer mark.
        let w = Window::new(Duration::from_secs(10), 0);
        w.record(0, true);
        let m = mark(&w, 0);
        w.clear();
        w.record(0, true);
        let newer = mark(&w, 0);
        succeed(&w);
        assert!(!w.judge(0, 0.5, 100, Some(m)));
        assert_eq!(
            w.spare.load(Ordering::Relaxed),
            newer,
            "the older judgement wrote"
        );
        // Two failures' marks: the first's judgement comes after the second.
        let w = Window::new(Duration::from_secs(10), 0);
        w.record(0, true);
        let first = mark(&w, 0);
        w.record(0, true);
        let second = mark(&w, 0);
        succeed(&w);
        assert!(!w.judge(0, 0.5, 100, Some(first)));
        assert_eq!(
            w.spare.load(Ordering::Relaxed),
            second,
            "the first judgement wrote"
        );
        assert!(!w.judge(0, 0.5, 100, Some(second)));
        assert!(passes(&w, 0) > 0, "the second judgement grants");
        // Passes used up, then a new mark: never one a judgement still holds.
        while w.pass(w.epoch(0)).is_ok() {}
        let third = w.spare.load(Ordering::Relaxed);
        assert!(!w.judge(0, 0.5, 100, Some(first)));
        assert!(!w.judge(0, 0.5, 100, Some(second)));
        assert_eq!(
            w.spare.load(Ordering::Relaxed),
            third,
            "an older judgement wrote"
        );
    }

    #[test]
    fn c5_a_coarse_clock_picks_buckets_of_10_ms_or_more() {
        assert!(Window::new(Duration::from_millis(100), 0).coarse_ok());
        assert!(Window::new(Duration::from_secs(60), 0).coarse_ok());
        assert!(!Window::new(Duration::from_millis(99), 0).coarse_ok());
        assert!(!Window::new(Duration::from_millis(1), 0).coarse_ok());
    }

    #[test]
    fn c9_c11_a_slot_is_owned_by_its_tenant_through_its_transitions_and_no_longer() {
        use crate::state::machine;
        let t = Table::new(1, None);
        let a = t.get_or_insert("a").expect("room");
        assert!(!a.owner.is_none() && NO_OWNER.is_none());
        let part = a.part;
        assert!(part.owned_by(part.cell.load(), a.owner));
        // A transition moves the generation on: still a's, by its key.
        part.cell
            .operate(machine::force_open, |_| true)
            .expect("forced open");
        let forced = part.cell.load();
        assert_ne!(forced.generation(), a.owner.generation);
        assert!(
            part.owned_by(forced, a.owner),
            "a's after its own transition"
        );
        part.cell.operate(machine::reset, |_| true).expect("reset");
        // b takes a's room: the slot a held is a's no longer.
        let b = t.get_or_insert("b").expect("a is idle and evictable");
        assert!(t.lookup("a").is_none(), "a was evicted");
        assert!(
            !part.owned_by(part.cell.load(), a.owner),
            "a's after its eviction"
        );
        assert!(b.part.owned_by(b.part.cell.load(), b.owner));
        assert!(
            part.owned_by(part.cell.load(), NO_OWNER),
            "anyone's for no owner"
        );
    }

    #[test]
    fn c9_c13_counters_are_made_for_each_owner_and_never_given_back_to_an_earlier_one() {
        let part = Partition::standalone(None);
        let guard = epoch::pin();
        let block = |since| part.owner_stats(since, &guard).map(|s| s as *const Stats);
        let first = block(5).expect("made for the owner of tenure 5");
        assert_eq!(block(5), Some(first), "the same block again");
        assert_eq!(block(3), None, "an earlier owner's count reaches no one");
        assert_eq!(block(5), Some(first), "and takes nothing from the owner");
        let next = block(7).expect("a later owner's own block");
        assert_ne!(next, first);
        assert_eq!(block(5), None, "the owner before it is gone");
        // SAFETY: made by `owner_stats` above; alive while `guard` is held.
        assert_eq!(unsafe { &*next }.since, 7);
    }

    #[test]
    fn c5_a_bucket_whose_epoch_wraps_starts_afresh() {
        // Bucket epochs are 24 bits: with 1 ms buckets they wrap after
        // 2^24 ms (4.7 hours). The first tick after the wrap counts in the
        // bucket tick 2^24 - 20 used, out of the window by then.
        let ms = 1_000_000u64;
        let w = Window::new(Duration::from_millis(10), 0);
        let before = (B_EPOCH + 1 - 20) * ms;
        let wrapped = (B_EPOCH + 1) * ms;
        assert_eq!(
            w.tick(before) % BUCKETS as u64,
            w.tick(wrapped) % BUCKETS as u64
        );
        for _ in 0..16 {
            w.record(before, false);
        }
        assert_eq!(w.totals(before), (16, 0));
        assert_eq!(w.epoch(wrapped), 0);
        w.record(wrapped, true);
        assert_eq!(w.totals(wrapped), (1, 1), "only the call of the new bucket");
    }

    #[test]
    fn c9_the_index_rotates_the_cell_a_full_bucket_gives_up_and_forgets_on_request() {
        let idx = Index::try_new(64).expect("a small index");
        let h = 0xabc0_0000_1234_5678u64;
        let got = |h| idx.candidates(h).collect::<Vec<u32>>();
        for slot in 1..=WAYS as u32 {
            idx.remember(h, slot);
        }
        assert_eq!(got(h).len(), WAYS);
        // Full: each newcomer replaces a cell in turn, never the one the
        // newcomer before it took.
        idx.remember(h, 101);
        idx.remember(h, 102);
        let cells = got(h);
        assert!(cells.contains(&101) && cells.contains(&102), "{cells:?}");
        assert_eq!(cells.len(), WAYS);
        idx.forget(h, 102);
        assert!(!got(h).contains(&102), "forgotten");
        assert!(got(h).contains(&101), "only the cell forgotten");
    }

    #[test]
    fn c9_every_tenant_of_a_full_table_is_found_on_the_fast_path() {
        let n = 4000;
        let t = Table::new(n, None);
        let ids: Vec<String> = (0..n).map(|i| format!("tenant-{i}")).collect();
        let slots: Vec<u32> = ids
            .iter()
            .map(|id| t.get_or_insert(id).expect("room").slot)
            .collect();
        let away = ids
            .iter()
            .zip(&slots)
            .filter(|(id, &slot)| !home_slots(&t, id).contains(&slot))
            .count();
        assert!(
            away > 0,
            "no tenant away from home: the index is not exercised"
        );
        for (id, &slot) in ids.iter().zip(&slots) {
            let found = t.lookup_known(id).map(|(r, _)| r.slot);
            assert_eq!(found, Some(slot), "{id} ({away} tenants away from home)");
        }
    }

    #[test]
    fn c9_a_vec_the_allocator_refuses_is_an_error_naming_its_bytes() {
        // 2^60 bytes: past any address space, refused by every allocator.
        assert_eq!(
            try_vec::<u64>(1 << 57).map(|v| v.capacity()),
            Err(OutOfMemory { bytes: 1 << 60 })
        );
        assert_eq!(
            try_vec::<u64>(usize::MAX / 4).map(|v| v.capacity()),
            Err(OutOfMemory { bytes: usize::MAX }),
            "a size past usize::MAX is named as usize::MAX"
        );
        assert_eq!(try_vec::<u64>(1000).map(|v| v.capacity()), Ok(1000));
    }

    #[test]
    fn a_table_debugs_as_its_capacity_and_live_count() {
        let t = Table::new(8, None);
        t.get_or_insert("a").expect("room");
        assert_eq!(format!("{t:?}"), "Table { capacity: 8, live: 1 }");
    }

    /// Counts one failure in a partition's word: closed, not idle.
    fn mark_used(part: &Partition) {
        part.cell.update(|w| {
            let n = w.with_count(1);
            Step::Install(n, n)
        });
    }

    #[test]
    fn c9_an_insert_is_admitted_on_the_closed_word_it_made_and_only_then() {
        let t = Table::new(4, None);
        let a = t.get_or_insert("a").expect("room");
        assert!(
            a.made_closed,
            "a new tenant's first call rides its fresh word"
        );
        let w = a.part.cell.load();
        assert_eq!(
            (w.phase(), w.generation()),
            (Phase::Closed, a.owner.generation)
        );
        assert_eq!(
            t.owner_name(a.slot, a.part, a.owner.generation).as_deref(),
            Some("a"),
            "the tenure began with that word"
        );
        let again = t.get_or_insert("a").expect("found");
        assert_eq!(again.slot, a.slot);
        assert!(!again.made_closed, "found, not made");
        t.forced_all.store(true, Ordering::SeqCst);
        let b = t.get_or_insert("b").expect("room");
        assert_eq!(b.part.cell.load().phase(), Phase::ForcedOpen);
        assert!(!b.made_closed, "made forced open");
    }

    #[test]
    fn c11_an_insert_settles_on_the_operator_action_it_raced_unless_its_tenant_moved_on() {
        let hint = |t: &Table| t.evictable_epoch.load(Ordering::Relaxed);
        // force_open(None) stored its flag after the insert read it.
        let t = Table::new(4, None);
        let a = t.get_or_insert("a").expect("room");
        let (part, key, g) = (a.part, a.owner.key, a.owner.generation);
        let first = part.cell.load();
        t.forced_all.store(true, Ordering::SeqCst);
        let before = hint(&t);
        let forced = t.settle_forced(part, first, key, g);
        assert_eq!(forced.phase(), Phase::ForcedOpen);
        assert_eq!(part.cell.load(), forced);
        assert_eq!(hint(&t), before, "forced open: nothing became evictable");
        // reset(None) cleared it after an insert read it set: closed, and
        // evictable again.
        let t = Table::new(4, None);
        t.forced_all.store(true, Ordering::SeqCst);
        let b = t.get_or_insert("b").expect("room");
        let (part, key, g) = (b.part, b.owner.key, b.owner.generation);
        let first = part.cell.load();
        assert_eq!(first.phase(), Phase::ForcedOpen);
        t.forced_all.store(false, Ordering::SeqCst);
        let before = hint(&t);
        let closed = t.settle_forced(part, first, key, g);
        assert_eq!(closed.phase(), Phase::Closed);
        assert!(hint(&t) > before, "a settled close is evictable");
        // A word of a later episode (here a trip) already decided for it,
        // whether the completion found the first word or the later one.
        let tripped = part.cell.update(|w| {
            let n = w.transition(Phase::Open);
            Step::Install(n, n)
        });
        assert_eq!(t.settle_forced(part, first, key, g), tripped);
        assert_eq!(t.settle_forced(part, tripped, key, g), tripped);
        assert_eq!(part.cell.load(), tripped, "left as it is");
    }

    #[test]
    fn c11_a_tenant_forced_open_while_its_insert_settles_stays_forced() {
        // The steps of `insert`, with the operator between the publish and
        // the inserter's completion: its lookup completes the tenant and
        // `force_open(a)` forces that first word.
        use crate::state::machine;
        let t = Table::new(4, None);
        let key = t.key_words("a");
        let hash = t.hash_key(key);
        let slot = t.alloc_slot(hash, &|| 0).expect("room");
        let part = t.get(slot).expect("a tenant slot");
        let (generation, pending) = t.hand_to(slot, part, key);
        assert!(t.publish(Entry::new(hash, "a", pack_key("a"), slot), key));
        let r = t.lookup("a").expect("published, completed by the lookup");
        assert_eq!(r.owner.generation, generation);
        part.cell
            .operate(machine::force_open, |w| part.owned_by(w, r.owner))
            .expect("forced");
        let fresh = t.complete(part, pending, key);
        let settled = t.settle_forced(part, fresh, key, generation);
        assert_eq!(
            settled.phase(),
            Phase::ForcedOpen,
            "the operator's force kept"
        );
        assert_eq!(part.cell.load().phase(), Phase::ForcedOpen);
    }

    #[test]
    fn c9_a_lookup_through_the_shards_leaves_a_completed_tenant_as_it_is() {
        let t = Table::new(4, None);
        let a = t.get_or_insert("a").expect("room");
        mark_used(a.part);
        let before = a.part.cell.load();
        let key = t.key_words("a");
        let r = t
            .lookup_sharded("a", t.hash_key(key), key)
            .expect("published");
        assert_eq!(r.slot, a.slot);
        assert_eq!(a.part.cell.load(), before, "found, not made afresh");
    }

    #[test]
    fn c9_a_tenants_homes_are_two_pairs_of_neighbouring_slots() {
        for n in [1, 3, 17, 1000] {
            let t = Table::new(n, None);
            for i in 0..1000 {
                let o = t.home_order(t.hash(&format!("tenant-{i}")));
                assert!(o.iter().all(|&i| i < t.arena.slots), "{o:?}");
                assert_eq!((o[0] ^ 1, o[2] ^ 1), (o[1], o[3]), "{n} tenants: {o:?}");
            }
        }
    }

    /// The slot the shard of `hash` publishes for `tenant`, if any.
    fn published(t: &Table, hash: u64, tenant: &str) -> Option<u32> {
        let guard = epoch::pin();
        let shard = t.shard(hash).load(Ordering::Acquire, &guard);
        // SAFETY: shards are never null while the table lives; the guard
        // keeps this one alive.
        let shard = unsafe { shard.deref() };
        shard
            .map
            .find(hash, |e| e.hash() == hash && e.is(tenant, pack_key(tenant)))
            .map(Entry::slot)
    }

    #[test]
    fn c9_tenants_whose_hashes_collide_keep_their_own_entries() {
        // Two 64-bit hashes meet by chance about once in 2^32 pairs of a
        // million tenants; the entries must still name each its own.
        let long = |c: char| format!("{c}-{}", "x".repeat(40));
        for (a, b) in [("a".to_string(), "b".to_string()), (long('a'), long('b'))] {
            let t = Table::new(8, None);
            let h = 0x0123_4567_89ab_cdef;
            let sa = t.get_or_insert(&a).expect("room").slot;
            let sb = t.get_or_insert(&b).expect("room").slot;
            for (id, slot) in [(&a, sa), (&b, sb)] {
                let entry = Entry::new(h, id, pack_key(id), slot);
                assert!(
                    t.publish(entry, t.key_words(id)),
                    "{id} published at {h:#x}"
                );
            }
            for (id, slot) in [(&a, sa), (&b, sb)] {
                assert_eq!(published(&t, h, id), Some(slot), "{id}'s entry");
                let key = t.key_words(id);
                let found = t.lookup_sharded(id, h, key).map(|r| r.slot);
                assert_eq!(found, Some(slot), "{id} looked up at {h:#x}");
            }
        }
    }

    #[test]
    fn c9_a_long_id_is_named_by_its_own_entry_among_colliding_ones() {
        // A long id's name is read from the entry of its hash and slot: an
        // entry of another id with the same hash, met first, is not it.
        let (a, b) = (
            format!("a-{}", "x".repeat(40)),
            format!("b-{}", "x".repeat(40)),
        );
        let t = Table::new(8, None);
        let ra = t.get_or_insert(&a).expect("room");
        let rb = t.get_or_insert(&b).expect("room");
        let ha = t.hash(&a);
        // b's entry forged at a's hash, then a's published again: a's
        // comes after b's in the shard.
        assert!(t.publish(Entry::new(ha, &b, None, rb.slot), t.key_words(&b)));
        assert!(t.publish(Entry::new(ha, &a, None, ra.slot), t.key_words(&a)));
        assert_eq!(t.key_of(ra.slot, ra.part).as_deref(), Some(a.as_str()));
        assert_eq!(t.key_of(rb.slot, rb.part).as_deref(), Some(b.as_str()));
    }

    #[test]
    fn c9_a_publish_replaces_stale_entries_and_yields_only_to_a_live_inserter() {
        let t = Table::new(8, None);
        let a = t.get_or_insert("a").expect("room");
        let key = t.key_words("a");
        let hash = t.hash_key(key);
        let entry = |slot| Entry::new(hash, "a", pack_key("a"), slot);
        // An entry naming the very slot the publisher holds is stale.
        assert!(t.publish(entry(a.slot), key), "its own slot again");
        // a's live partition wins over another slot.
        let s = t.claim_spare().expect("a free slot");
        assert!(!t.publish(entry(s), key), "a's live partition stays");
        assert_eq!(published(&t, hash, "a"), Some(a.slot));
        // An entry of z's naming a slot another tenant (c) took since is
        // stale: z's inserter replaces it.
        let c = t.get_or_insert("c").expect("room");
        let z = t.key_words("z");
        let z_hash = t.hash("z");
        let z_entry = |slot| Entry::new(z_hash, "z", pack_key("z"), slot);
        assert!(t.publish(z_entry(c.slot), z));
        assert!(t.publish(z_entry(s), z), "over c's slot");
        assert_eq!(published(&t, z_hash, "z"), Some(s));
    }

    #[test]
    fn c9_unpublishing_an_entry_no_longer_there_leaves_the_tenants_live_one() {
        let t = Table::new(8, None);
        let a = t.get_or_insert("a").expect("room");
        let key = t.key_words("a");
        let hash = t.hash_key(key);
        let elsewhere = if a.slot == 1 { 2 } else { 1 };
        t.unpublish(&Entry::new(hash, "a", pack_key("a"), elsewhere));
        assert_eq!(published(&t, hash, "a"), Some(a.slot));
        assert_eq!(t.lookup("a").map(|r| r.slot), Some(a.slot));
    }

    #[test]
    fn c9_the_overflows_slot_names_no_tenant() {
        let t = Table::new(4, None);
        let a = t.get_or_insert("a").expect("room");
        assert_eq!(t.key_of(a.slot, a.part).as_deref(), Some("a"));
        assert_eq!(t.key_of(0, a.part), None, "slot 0 is the overflow's");
    }

    #[test]
    fn c9_each_table_keys_its_fingerprints_afresh() {
        // Fixed keys would let callers choose ids whose fingerprints meet.
        let id = "a-tenant-id-longer-than-sixteen-bytes";
        let (t, u) = (Table::new(1, None), Table::new(1, None));
        assert!(is_fingerprint(t.key_words(id)));
        assert_ne!(t.key_words(id), u.key_words(id));
        assert!(!is_fingerprint(t.key_words("short")), "a packed id");
    }

    #[test]
    fn c9_a_spare_slot_is_searched_from_a_rotating_start_over_every_slot() {
        let t = Table::new(4, None);
        let n = t.arena.slots as u32;
        assert!(t.claim(1));
        let first = t.claim_spare().expect("seven slots free");
        assert_ne!(first, 1);
        // Every slot but one held: each search still finds it.
        for free in 2..=n {
            let t = Table::new(4, None);
            for slot in (1..=n).filter(|&s| s != free) {
                assert!(t.claim(slot));
            }
            assert_eq!(t.claim_spare(), Some(free));
        }
    }

    /// The index of the shard that holds `id`'s entry.
    fn shard_of(t: &Table, id: &str) -> usize {
        let shard = t.shard(t.hash(id));
        t.shards
            .iter()
            .position(|s| std::ptr::eq(s, shard))
            .expect("one of the table's shards")
    }

    #[test]
    fn c9_a_scan_prefers_an_idle_partition_of_its_first_shards_then_takes_a_used_one() {
        // The first scan starts at shard 0: an idle partition among the
        // first EVICT_SCAN_FIRST shards goes first (C9's order); past
        // them the scan settles for the least recently used, so one
        // admission's scan stays bounded.
        let last = EVICT_SCAN_FIRST - 1;
        for (at, idle_goes) in [(1, true), (last, true), (last + 1, false), (15, false)] {
            let t = Table::new(512, None);
            assert_eq!(t.shards.len(), 16);
            let ids: Vec<String> = (0..512).map(|i| format!("t{i}")).collect();
            let idle = ids
                .iter()
                .find(|id| shard_of(&t, id) == at)
                .expect("a tenant in every shard")
                .clone();
            for id in &ids {
                let r = t.get_or_insert(id).expect("room");
                if *id != idle {
                    mark_used(r.part);
                }
            }
            t.get_or_insert("newcomer").expect("a victim");
            let gone: Vec<&String> = ids.iter().filter(|id| t.lookup(id).is_none()).collect();
            assert_eq!(gone.len(), 1, "{gone:?}");
            assert_eq!(
                *gone[0] == idle,
                idle_goes,
                "idle {idle} in shard {at}; evicted {} of shard {}",
                gone[0],
                shard_of(&t, gone[0])
            );
        }
    }
}
