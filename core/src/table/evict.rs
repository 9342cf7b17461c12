//! Eviction: making room for a newcomer in a full table (C9).

use super::shard::Entry;
use super::Table;
use crate::clock::Instant;
use crate::partition::Partition;
use crate::state::word::{Phase, Word};
use crate::sync::{epoch, Ordering};
use std::time::Duration;

/// Shards scanned for an idle partition before settling for an LRU one.
pub(super) const EVICT_SCAN_IDLE: usize = 64;
/// Shards scanned before an LRU closed partition may be taken.
pub(super) const EVICT_SCAN_FIRST: usize = 8;

/// What one eviction scan came to.
pub(super) enum Scan {
    /// A victim held: its slot.
    Taken(u32),
    /// Every candidate changed before it could be taken.
    Lost,
    /// No candidate at all.
    Nothing,
    /// No candidate now, but one may become evictable by time alone (see
    /// `scan_for_victim`): no hint is left for the next newcomer.
    NothingYet,
}

impl Table {
    /// Finds a victim, makes it vacant, unlinks it; returns its slot.
    /// A victim that stops being evictable before it is taken (it was
    /// used, or another inserter took it) sends the scan round again: the
    /// tenant goes to the overflow only when a scan finds nothing to take
    /// (C9). Each lost race is another thread's progress, so the loop
    /// ends.
    pub(super) fn evict(&self, now_ns: &dyn Fn() -> u64) -> Option<u32> {
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
                Scan::Nothing | Scan::NothingYet if !every => every = true,
                Scan::NothingYet => return None,
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
        self.live.load(Ordering::Relaxed) >= self.limit.load(Ordering::Relaxed)
            && self.none_evictable_at.load(Ordering::Acquire)
                == self.evictable_epoch.load(Ordering::Acquire)
    }

    /// The most tenants the table can be given by [`Table::set_limit`].
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Lets the table hold at most `limit` tenants (at most its capacity;
    /// a reload's new `max_tenants`, C20), evicting in C9's order (idle
    /// first, then closed ones least recently used first) until it holds
    /// no more, or until only open, half-open and forced-open partitions
    /// are left: those are never evicted, and newcomers go to the
    /// overflow until enough of them close. Returns the tenants evicted.
    pub(crate) fn set_limit(&self, limit: u32, now_ns: &dyn Fn() -> u64) -> u32 {
        let limit = limit.min(self.capacity);
        // Relaxed: see `alloc_slot`.
        self.limit.store(limit, Ordering::Relaxed);
        self.shrink_to_limit(now_ns)
    }

    /// Evicts in C9's order while the table holds more tenants than its
    /// limit (after a reload lowered it below partitions that could not
    /// go then), until it holds no more or nothing else can go. Returns
    /// the tenants evicted.
    pub(super) fn shrink_to_limit(&self, now_ns: &dyn Fn() -> u64) -> u32 {
        let mut evicted = 0;
        // Relaxed: as in `alloc_slot`; a count read a little early only
        // moves the work to the next insert.
        while self.live.load(Ordering::Relaxed) > self.limit.load(Ordering::Relaxed) {
            let Some(victim) = self.evict(now_ns) else {
                break;
            };
            self.release(victim, true);
            evicted += 1;
        }
        evicted
    }

    /// Sets the `probe_timeout` after which a closed partition's probes
    /// of an earlier episode no longer keep it (C7, C9).
    pub(crate) fn set_probe_timeout(&self, timeout: Duration) {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: read by eviction scans as a bound, like `limit`.
        self.probe_timeout_ns.store(ns, Ordering::Relaxed);
    }

    /// Something may have become evictable (see `none_evictable_at`).
    pub(crate) fn note_evictable(&self) {
        // Release: a scan that reads the new epoch redoes its search.
        self.evictable_epoch.fetch_add(1, Ordering::Release);
    }

    /// One eviction scan (see [`Table::evict`]): a sample of the shards
    /// from a rotating cursor, or (`every`) all of them.
    pub(super) fn scan_for_victim(&self, now_ns: &dyn Fn() -> u64, every: bool) -> Scan {
        let n = self.shards.len();
        // Relaxed: only spreads the scans.
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        let mut lru: Option<(u64, Word, Entry)> = None;
        let mut lost = false;
        // A closed partition whose probes of an earlier episode are not yet
        // `probe_timeout` old: not evictable now, but by time alone later,
        // with no event to move `evictable_epoch`.
        let mut later = false;
        // Relaxed: see `set_probe_timeout`.
        let probe_timeout = Duration::from_nanos(self.probe_timeout_ns.load(Ordering::Relaxed));
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
                if w.phase() != Phase::Closed {
                    continue;
                }
                // C7: a probe of an earlier episode keeps its partition
                // until it records or outlives `probe_timeout`; then it
                // counts as cancelled, and `take` takes its slot back.
                if w.probes() != 0
                    && !p
                        .cell
                        .probes_timed_out(Instant::from_nanos(now_ns()), probe_timeout)
                {
                    later = true;
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
            return match (lost, later) {
                (true, _) => Scan::Lost,
                (false, true) => Scan::NothingYet,
                (false, false) => Scan::Nothing,
            };
        };
        match self.get(e.slot()) {
            Some(p) if self.take(p, w, &e) => Scan::Taken(e.slot()),
            _ => Scan::Lost,
        }
    }

    pub(super) fn take(&self, p: &Partition, seen: Word, entry: &Entry) -> bool {
        // A victim's probes in flight are timed out (see the scan): the
        // slot goes with none, and their permits, of generations below the
        // vacant word's, hold none from here on. That is written before
        // the slot can pass to anyone (this thread hands it over or
        // releases it after this returns), and a record in between finds
        // a vacant word with no probe to return.
        let vacant = seen.transition(Phase::Vacant).with_probes(0);
        if !p.cell.try_replace(seen, vacant) {
            return false;
        }
        if seen.probes() != 0 {
            p.cell.forget_probes_below(vacant.generation());
        }
        self.unpublish(entry);
        true
    }
}
