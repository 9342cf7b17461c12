//! Partitions: one breaker's word, its owner's key words and the side part
//! made on the first non-healthy event. Tenant partitions live in a
//! [`Table`](crate::table::Table)'s arena; a dependency's global and
//! overflow partitions stand alone.

use crate::metrics::Stats;
use crate::state::cell::{Cell, Probes, Side, Until};
use crate::state::word::Word;
use crate::sync::{epoch, AtomicU64, Installed, Ordering};
use crate::window::Window;
use std::time::Duration;

/// Name of a global dependency's single partition.
pub const GLOBAL: &str = "global";
/// Name of a tenant-scoped dependency's overflow partition.
pub const OVERFLOW: &str = "<overflow>";

/// What a partition keeps off its slot, made on the first non-healthy
/// event (a failure, a trip, a counted refusal) or, under the failure-rate
/// policy, when a tenant takes the slot: the open-until, the counters, the
/// LRU tick and the window. A healthy partition has none, so its slot is
/// the word and the owner's key alone: half a cache line.
#[derive(Debug)]
pub(crate) struct SidePart {
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

impl Drop for SidePart {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can hold a guard on this pointer
        // any more (the side part goes with its cell).
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

impl Default for SidePart {
    fn default() -> Self {
        Self::new()
    }
}

impl Side for SidePart {
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

impl SidePart {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn window(&self) -> Option<&Window> {
        self.window.get()
    }

    /// The window, installing `make()` if there is none.
    pub(crate) fn window_or_install(&self, make: impl FnOnce() -> Window) -> &Window {
        self.window.get_or_install_with(make)
    }

    /// Installs `w` as the tenant window of a new closed episode.
    pub(crate) fn install_episode(&self, w: Window, guard: &epoch::Guard) {
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
pub(crate) const NO_KEY: Key = [0, 0];

/// Who a resolved partition belongs to: the tenant's key words, and the
/// generation of a word in which the slot was seen to be theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) key: Key,
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
/// pointer to the side part. All zeros is a free slot: a closed word no
/// key can match.
#[derive(Debug)]
#[repr(C, align(32))]
pub struct Partition {
    pub(crate) cell: Cell<SidePart>,
    /// The owner's key words, [`NO_KEY`] while it has none: lets a
    /// lookup confirm the id without a pin.
    key: [AtomicU64; 2],
}

impl Partition {
    /// A partition outside any table (a dependency's global or overflow
    /// one), its side part made at once: such partitions are shared by
    /// every caller, so nothing is gained by making it later.
    pub(crate) fn standalone(window: Option<Window>) -> Self {
        let cold = SidePart::new();
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
    pub(crate) fn free() -> Self {
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
    pub(crate) fn install_stats<'g>(
        cold: &'g SidePart,
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

    /// Adds the counters of the owner before the tenure beginning at
    /// `generation`, if it made any, to `gone` (once: see
    /// [`Stats::absorb_into`]).
    pub(crate) fn retire_stats(&self, generation: u64, gone: &Stats) {
        let Some(cold) = self.cell.side_if_any() else {
            return;
        };
        let guard = epoch::pin();
        // Acquire: see the counters as made.
        let p = cold.stats.load(Ordering::Acquire, &guard);
        // SAFETY: a block stays alive while `guard` is held.
        if let Some(s) = unsafe { p.as_ref() }.filter(|s| s.since < generation) {
            s.absorb_into(gone);
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
    /// (see `SidePart::episodes`).
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
    /// vacant words, which move the generation on), else by
    /// [`Partition::keyed`].
    #[inline]
    pub(crate) fn owned_by(&self, w: Word, owner: Owner) -> bool {
        owner.is_none()
            || (w.generation() == owner.generation && !w.phase().is_held())
            || self.keyed(w, owner.key)
    }

    /// Whether the slot is `key`'s in word `w`, by its key words: an
    /// occupied word, the key read after it, then the word's generation
    /// again. The key can be newer than `w`: between the two reads the
    /// slot may have passed to another tenant and back, so the key is
    /// ours while `w` was the other tenant's (a refusal decided on such a
    /// word refused a tenant for another's open breaker). The slot
    /// changes hands only through vacant words, which move the
    /// generation on, so the same generation after the key means no
    /// hand-over came between.
    #[inline]
    pub(crate) fn keyed(&self, w: Word, key: Key) -> bool {
        // Acquire (in `key_is` and `load`): the key is written while the
        // slot is held vacant, before the word that hands it over; a key
        // read from a later tenure synchronises with the vacant CAS, so
        // the load after it sees that generation or a later one.
        !w.phase().is_held() && self.key_is(key) && self.cell.load().generation() == w.generation()
    }

    /// Marks the partition used at the table's tick, if it has a side part
    /// (a write only when the tick changed). A partition without one is
    /// idle or was never refused, failed or tripped: eviction takes idle
    /// ones first, whenever they were used, and ranks the others by this
    /// tick, which `tick` reads (the table's clock): only for a side part,
    /// as most partitions have none and the read is a load.
    #[inline]
    pub(crate) fn touch(&self, tick: impl FnOnce() -> u64) {
        if let Some(c) = self.cell.side_if_any() {
            let tick = tick();
            // Relaxed: an eviction hint.
            if c.last_used.load(Ordering::Relaxed) != tick {
                c.last_used.store(tick, Ordering::Relaxed);
            }
        }
    }

    /// Whether the partition equals a fresh one (C9): its word idle
    /// (`w`), and no call in its failure-rate window, if it keeps one.
    pub(crate) fn is_idle(&self, w: Word, now_ns: &dyn Fn() -> u64) -> bool {
        w.is_idle()
            && self.window().is_none_or(|win| win.is_empty(now_ns()))
            && self
                .with_episode_window(|win| win.is_empty(now_ns()))
                .unwrap_or(true)
    }

    /// The tick of [`Partition::touch`]; 0 when it has no side part.
    pub(crate) fn last_used(&self) -> u64 {
        // Relaxed: an eviction hint.
        self.cell
            .side_if_any()
            .map_or(0, |c| c.last_used.load(Ordering::Relaxed))
    }

    /// Hands a held slot to a new owner, whose first word will be of
    /// `generation`: a fresh window for that closed episode if the table
    /// keeps windows, then the key words. (Its counters are its own
    /// block, made by its first count: see `SidePart::stats`.)
    pub(crate) fn set_owner(
        &self,
        owner: Key,
        tick: u64,
        window: Option<Duration>,
        generation: u64,
    ) {
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

    pub(crate) fn set_key(&self, key: Key) {
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
    pub(crate) fn key(&self) -> Key {
        // Acquire: see `set_key`.
        [
            self.key[0].load(Ordering::Acquire),
            self.key[1].load(Ordering::Acquire),
        ]
    }

    /// Whether the key words kept in the partition are `key`.
    #[inline]
    pub(crate) fn key_is(&self, key: Key) -> bool {
        // Acquire: see `set_key`.
        self.key[0].load(Ordering::Acquire) == key[0]
            && self.key[1].load(Ordering::Acquire) == key[1]
    }
}

/// Bytes of one tenant slot in the arena, which has two a tenant (its map
/// entry and index cells come on top; the side part only once something
/// non-healthy happens). 32 bytes on 64-bit targets; `core/tests/memory.rs`
/// measures the whole (about 138 bytes a tenant with a 12-byte id).
pub const PARTITION_BYTES: usize = std::mem::size_of::<Partition>();

// C9's budget: a partition within 128 bytes plus its key, with room for the
// key's shard entry and reference-counted allocation: two slots of 32.
#[cfg(not(loom))]
const _: () = assert!(PARTITION_BYTES == 32);
