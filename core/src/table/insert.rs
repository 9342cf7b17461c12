//! Inserting a tenant: holding a slot, handing it over, publishing the
//! tenant and settling its first word with the operator's actions.

use super::key::pack_key;
use super::lookup::Resolved;
use super::shard::Entry;
use super::Table;
use crate::partition::{Key, Partition, NO_KEY};
use crate::state::cell::Step;
use crate::state::word::{Phase, Word};
use crate::sync::Ordering;

impl Table {
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
    pub(super) fn get_or_insert(&self, tenant: &str) -> Option<Resolved<'_>> {
        self.get_or_insert_at(tenant, &|| 0)
    }

    /// Inserts a tenant the lookup did not find, or finds the one a racing
    /// inserter published first; `hash` and `key` as the lookup made them.
    #[cold]
    pub(super) fn insert(
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
                // Owned as of the tenure's first word, not `fresh`: when a
                // lookup completed the insert first, `fresh` is whatever
                // word the slot holds by now, possibly a later tenant's
                // (the newcomer evicted and its slot handed on), which
                // must never pass for the newcomer's own.
                return Some(Resolved {
                    made_closed: fresh.phase() == Phase::Closed && fresh.generation() == generation,
                    ..Resolved::seen_at(slot, part, key, generation)
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
    pub(super) fn hand_to(&self, slot: u32, part: &Partition, key: Key) -> (u64, Word) {
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
    pub(super) fn settle_forced(
        &self,
        part: &Partition,
        fresh: Word,
        key: Key,
        generation: u64,
    ) -> Word {
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
    /// room made by eviction when the table holds `limit` tenants.
    /// `None` when nothing can be evicted.
    pub(super) fn alloc_slot(&self, hash: u64, now_ns: &dyn Fn() -> u64) -> Option<u32> {
        // Relaxed: a count; each slot is claimed by its own CAS. An
        // inserter that finds the table full takes its count back; one
        // that races it may see the table full a moment early and evict
        // an idle partition it could have spared, which loses nothing.
        // Relaxed: the limit is a bound a reload moves; an insert racing
        // the move may use the old one, and the reload's shrink evicts it.
        let room = self.live.fetch_add(1, Ordering::Relaxed) < self.limit.load(Ordering::Relaxed);
        if !room {
            self.live.fetch_sub(1, Ordering::Relaxed);
            // The victim's room passes to the newcomer, who still prefers
            // a home: a full table has half its slots free.
            let victim = self.evict(now_ns)?;
            // Partitions a lowered limit had to keep (open ones, C20)
            // count against it once they can go: the newcomer takes one
            // place and the rest are given back, so the table comes back
            // within `max_tenants` (C9).
            if self.live.load(Ordering::Relaxed) > self.limit.load(Ordering::Relaxed) {
                self.shrink_to_limit(now_ns);
            }
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
        let found = self.claim_any_free();
        if found.is_none() {
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
        found
    }

    /// A free slot in the tenant's homes, first home first, held.
    pub(super) fn claim_home(&self, hash: u64) -> Option<u32> {
        self.home_slots(hash)
            .into_iter()
            .find(|&slot| self.claim(slot))
    }

    /// Any free slot, held, searched from a rotating start. Slots held or
    /// owned never outnumber `capacity`, half the slots, so a search over
    /// every slot finds one unless racing inserters take each in turn;
    /// after two rounds it gives up (the tenant goes to the overflow).
    #[cold]
    pub(super) fn claim_any_free(&self) -> Option<u32> {
        let n = self.arena.slots;
        // Relaxed: only spreads the searches.
        let start = self.free_search.fetch_add(1, Ordering::Relaxed);
        (0..2 * n)
            .map(|k| ((start + k) % n) as u32 + 1)
            .find(|&slot| self.claim(slot))
    }

    /// Holds `slot` if it is free: a word no one is admitted to (not
    /// vacant) with no key, moved to vacant by one CAS.
    pub(super) fn claim(&self, slot: u32) -> bool {
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
    pub(super) fn release(&self, slot: u32, room: bool) {
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
}
