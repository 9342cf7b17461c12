//! The bounded lock-free table of tenant partitions (C9).
//!
//! Layout. Partitions live in one zeroed arena of 32-byte slots, two a
//! cache line and two a tenant the table may hold, freed only with the
//! table, so a `&Partition` stays valid for the table's lifetime and a
//! permit can name its partition by slot index (no reference count per
//! call). A slot holds the word, the owner's id (up to 15 bytes) or a
//! keyed 120-bit fingerprint of it (longer ids), and a pointer to a side
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
//! 2 bytes per `max_tenants`; the side part is allocated only once
//! something non-healthy happens to a partition. Shards are rebuilt
//! compactly on every change, so their size follows the live count.
//! Each slot's tenure (`Table::tenure`) adds 8 bytes a slot.
//! Measured in `core/tests/memory.rs`: about 138 bytes per healthy
//! partition with a 12-byte tenant id, all told (table skeleton included);
//! flat through a flood of 1,000,000 distinct ids into a 10,000-tenant
//! table.

mod alloc;
mod arena;
mod evict;
mod index;
mod insert;
mod key;
mod lookup;
mod operator;
mod shard;
#[cfg(test)]
mod tests;

pub(crate) use self::alloc::OutOfMemory;
use self::alloc::{try_box, try_vec};
use self::arena::Arena;
pub(crate) use self::index::MAX_SLOTS;
use self::index::{Bucket, Index};
use self::key::{fingerprint, fingerprint_keys, is_fingerprint, pack_key, unpack_key, TableHasher};
pub(crate) use self::lookup::Resolved;
use self::operator::Overrides;
use self::shard::{Entry, Shard};
use crate::metrics::Stats;
use crate::partition::{Key, Partition, NO_KEY};
use crate::state::word::Phase;
use crate::sync::{epoch, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, StdArc};
use siphasher::sip128::SipHasher13;
use std::hash::BuildHasher;
use std::time::Duration;

/// Most shards a table has (see `Table::new`): their index takes hash
/// bits 32..47.
const MAX_SHARDS: usize = 1 << 15;

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
    /// Tenants the table was built for: as many home lines, twice as many
    /// slots.
    capacity: u32,
    /// Tenants the table may hold now: `capacity`, or less after a reload
    /// lowered `max_tenants` (C20).
    limit: AtomicU32,
    /// Tenants holding a slot or about to: at most `limit`, or more for
    /// as long as a lowered limit finds nothing evictable.
    live: AtomicU32,
    /// The failure-rate window's width, if the policy keeps one.
    window: Option<Duration>,
    /// The dependency's `probe_timeout` in ns (C7): a closed partition
    /// whose probes of an earlier episode are all this old holds nothing
    /// any more, and may be evicted. Set again by a reload (C20).
    probe_timeout_ns: AtomicU64,
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
    free_search: AtomicUsize,
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
    /// The counters of owners gone (evicted): added here when a slot's
    /// next tenure begins, so the dependency's sums keep them (C14).
    pub(crate) gone: Stats,
}

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

    /// About 32 tenants a shard, so an insert's copy stays small. The cap
    /// bounds what an empty table costs up
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
            limit: AtomicU32::new(capacity),
            live: AtomicU32::new(0),
            window,
            probe_timeout_ns: AtomicU64::new(u64::MAX),
            tick: AtomicU64::new(0),
            cursor: AtomicUsize::new(0),
            evictable_epoch: AtomicU64::new(0),
            none_evictable_at: AtomicU64::new(u64::MAX),
            free_search: AtomicUsize::new(0),
            forced_all: AtomicBool::new(false),
            overrides: epoch::Atomic::new(Overrides::default()),
            override_count: AtomicUsize::new(0),
            gone: Stats::default(),
        })
    }
}

impl Table {
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
    /// shards. Always, but under loom for long ids: the eviction models
    /// use them to check the shard path alone (with the homes and the
    /// index too, their executions grow several times over); the fast
    /// paths' protocol, the same whatever form the key words take, has
    /// models of its own with short ids.
    #[inline(always)]
    fn homes_first(key: Key) -> bool {
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
        // The owner before keeps its counts in the dependency's sums; no
        // count reaches its block any more (see `Dependency::counters`).
        if let Some(part) = self.get(slot) {
            part.retire_stats(generation, &self.gone);
        }
    }

    /// The arena index of the tenant's preferred slot in each of its two
    /// home lines (the other slot of a line is the index `^ 1`): the hash,
    /// and the hash times an odd constant (whose high bits depend on all
    /// of the hash's), each scaled to the slot count (no power-of-two
    /// rounding), so the line is the scaled value's high bits and the
    /// preferred slot its lowest. One multiply a home gives the index the
    /// lookup reads with, where scaling to lines, doubling, adding a bit
    /// picked apart and then counting slots from 1 costs several
    /// instructions more on a path whose calls overlap their cache misses
    /// only as far as the core has registers to rename.
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
    /// through the index (`docs/design/placement_sim.py`;
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

    /// Runs `f` on every tenant slot's partition (loads only, no names).
    pub(crate) fn for_each_slot(&self, mut f: impl FnMut(&Partition)) {
        for s in 1..=self.arena.slots as u32 {
            if let Some(p) = self.get(s) {
                f(p);
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
