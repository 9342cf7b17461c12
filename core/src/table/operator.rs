//! Operator actions a table keeps beyond its partitions (C11).

use super::Table;
use crate::partition::Key;
use crate::sync::{epoch, Ordering};

/// Tenants' own operator actions, by key words (see `Table::overrides`):
/// whether the tenant is forced open.
#[derive(Clone, Default)]
pub(super) struct Overrides(hashbrown::HashMap<Key, bool, foldhash::fast::FixedState>);

impl Table {
    /// Whether `tenant`, with no partition of its own, is forced open
    /// (C11): by its own last operator action if it has one since the
    /// last dependency-wide action, else by that one.
    pub(crate) fn starts_forced(&self, tenant: &str) -> bool {
        self.key_starts_forced(self.key_words(tenant))
    }

    pub(super) fn key_starts_forced(&self, key: Key) -> bool {
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
    pub(super) fn set_override(&self, tenant: &str, action: Option<bool>) {
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
}
