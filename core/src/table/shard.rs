//! The shards: the tenant-id to slot map, copied on write and read by epoch.

use super::key::unpack_key;
use super::Table;
use crate::partition::Key;
use crate::state::word::Phase;
use crate::sync::{epoch, Ordering, StdArc};

/// A shard entry: the partition's slot, the id's hash (so rebuilding a
/// shard never rehashes) and the id: packed as the partition keeps it when
/// short (no allocation, a plain copy when the shard is rebuilt), shared
/// otherwise. 32 bytes: the slot shares the discriminant's word.
#[derive(Clone)]
pub(super) enum Entry {
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
    pub(super) fn new(hash: u64, tenant: &str, short: Option<[u64; 2]>, slot: u32) -> Self {
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
    pub(super) fn hash(&self) -> u64 {
        match self {
            Entry::Short { hash, .. } | Entry::Long { hash, .. } => *hash,
        }
    }

    #[inline]
    pub(super) fn slot(&self) -> u32 {
        match self {
            Entry::Short { slot, .. } | Entry::Long { slot, .. } => *slot,
        }
    }

    /// Whether this is `tenant`'s entry; `packed` is `pack_key(tenant)`.
    #[inline]
    pub(super) fn is(&self, tenant: &str, packed: Option<[u64; 2]>) -> bool {
        match self {
            Entry::Short { key, .. } => packed == Some(*key),
            Entry::Long { key, .. } => packed.is_none() && **key == *tenant,
        }
    }

    pub(super) fn same_id(&self, other: &Entry) -> bool {
        match (self, other) {
            (Entry::Short { key: a, .. }, Entry::Short { key: b, .. }) => a == b,
            (Entry::Long { key: a, .. }, Entry::Long { key: b, .. }) => a == b,
            _ => false,
        }
    }

    /// The id (cold paths). The bytes came from a `&str`, so the
    /// conversion cannot fail; `None` would only mean a bug.
    pub(super) fn id(&self) -> Option<StdArc<str>> {
        match self {
            Entry::Short { key, .. } => unpack_key(*key),
            Entry::Long { key, .. } => Some(key.clone()),
        }
    }
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

pub(super) type ShardMap = hashbrown::HashTable<Entry>;

pub(super) struct Shard {
    pub(super) map: ShardMap,
}

impl Table {
    /// The key words of an entry's tenant, as its partition keeps them.
    pub(super) fn entry_key(&self, e: &Entry) -> Key {
        match e {
            Entry::Short { key, .. } => *key,
            Entry::Long { key, .. } => self.long_key_words(key),
        }
    }

    /// The one copy-on-write loop over a shard: `edit` sees the current
    /// shard and returns its replacement, or `None` to leave it as it is
    /// (then the loop returns false). The replaced shard is reclaimed once
    /// no pinned reader can still see it.
    pub(super) fn rewrite_shard(
        &self,
        hash: u64,
        mut edit: impl FnMut(&Shard) -> Option<ShardMap>,
    ) -> bool {
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
    pub(super) fn publish(&self, entry: Entry, key: Key) -> bool {
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
    pub(super) fn copy_without(
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
    pub(super) fn unpublish(&self, entry: &Entry) {
        let (hash, slot) = (entry.hash(), entry.slot());
        self.index.forget(hash, slot);
        let gone = |e: &Entry| e.slot() == slot && e.same_id(entry);
        self.rewrite_shard(hash, |shard| {
            shard.map.find(hash, gone)?;
            Some(self.copy_without(&shard.map, 0, gone))
        });
    }
}
