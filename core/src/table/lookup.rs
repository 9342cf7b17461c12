//! Finding a tenant's partition: its homes, the index, then the shards.

use super::key::pack_key;
use super::shard::Entry;
use super::Table;
use crate::partition::{Key, Owner, Partition};
use crate::state::word::{Phase, Word};
use crate::sync::{epoch, Ordering};

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
    pub(super) fn seen(slot: u32, part: &'a Partition, key: Key, w: Word) -> Self {
        Self::seen_at(slot, part, key, w.generation())
    }

    /// The partition at `slot`, known to be `key`'s in its word of
    /// `generation`.
    #[inline(always)]
    pub(super) fn seen_at(slot: u32, part: &'a Partition, key: Key, generation: u64) -> Self {
        Self {
            slot,
            part,
            owner: Owner { key, generation },
            made_closed: false,
        }
    }
}

impl Table {
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
    /// Always inlined: left to `#[inline]`, LLVM keeps the index lookup
    /// out of line in the admission fast path, and the call and its return
    /// cost more than the lookup's own work.
    #[inline(always)]
    pub(crate) fn lookup_known(&self, tenant: &str) -> Option<(Resolved<'_>, Word)> {
        let key = self.key_words(tenant);
        if !Self::homes_first(key) {
            return None;
        }
        self.lookup_fast(self.hash_key(key), key)
    }

    /// [`Table::lookup`] with the id's hash and key words already made.
    #[inline]
    pub(super) fn lookup_hashed(&self, tenant: &str, hash: u64, key: Key) -> Option<Resolved<'_>> {
        if Self::homes_first(key) {
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
    pub(super) fn lookup_fast(&self, hash: u64, key: Key) -> Option<(Resolved<'_>, Word)> {
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
    pub(super) fn confirm(&self, slot: u32, key: Key) -> Option<(Resolved<'_>, Word)> {
        self.confirm_at((slot as usize).checked_sub(1)?, key)
    }

    /// [`Table::confirm`] by arena index (the slot less one), as the homes
    /// give it.
    #[inline(always)]
    pub(super) fn confirm_at(&self, i: usize, key: Key) -> Option<(Resolved<'_>, Word)> {
        let part = self.arena.get(i)?;
        let w = part.cell.load();
        part.keyed(w, key)
            .then(|| (Resolved::seen(i as u32 + 1, part, key, w), w))
    }

    /// The index's answer (tenants away from home), confirmed by the
    /// partition it names, with the confirming word.
    #[inline]
    pub(super) fn lookup_indexed(&self, hash: u64, key: Key) -> Option<(Resolved<'_>, Word)> {
        self.index
            .candidates(hash)
            .find_map(|slot| self.confirm(slot, key))
    }

    /// The shards' answer; teaches the index a tenant away from home.
    #[cold]
    pub(super) fn lookup_sharded(&self, tenant: &str, hash: u64, key: Key) -> Option<Resolved<'_>> {
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
        // A word that moved on between its two reads in `keyed` (a
        // transition of the tenant's own, most often) is read again while
        // the key stays ours; a few tries, then the insert path (which
        // finds the entry published and looks up again).
        for _ in 0..3 {
            let mut w = part.cell.load();
            if w.phase() == Phase::Pending && part.key_is(key) {
                // Published, not yet completed by its inserter: complete
                // it (the inserter's own completion then finds it done).
                w = self.complete(part, w, key);
            }
            if part.keyed(w, key) {
                self.remember(hash, key, slot);
                return Some(Resolved::seen(slot, part, key, w));
            }
            if !part.key_is(key) {
                return None;
            }
        }
        None
    }

    /// Completes the insert of a published tenant whose slot holds
    /// `pending`: closed, or forced open if it is to be; the word found
    /// if someone else completed it first.
    pub(super) fn complete(&self, part: &Partition, pending: Word, key: Key) -> Word {
        let phase = if self.key_starts_forced(key) {
            Phase::ForcedOpen
        } else {
            Phase::Closed
        };
        let fresh = pending.transition(phase).with_trips(0);
        if !part.cell.try_replace(pending, fresh) {
            return part.cell.load();
        }
        if phase == Phase::Closed {
            // A closed newcomer is evictable: a scan that met it pending
            // (and so may have found nothing) must look again.
            self.note_evictable();
        }
        fresh
    }

    /// Points the index at a tenant's slot, if the fast lookup could not
    /// find it at home.
    pub(super) fn remember(&self, hash: u64, key: Key, slot: u32) {
        if Self::homes_first(key) && !self.at_home(hash, slot) {
            self.index.remember(hash, slot);
        }
    }
}
