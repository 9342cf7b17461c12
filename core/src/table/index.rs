//! The tenant index: hints for the tenants away from their home lines.

use super::alloc::OutOfMemory;
use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// Cells per index bucket: one cache line. One under loom, to keep the
/// models' interleavings few; the code is the same.
#[cfg(not(loom))]
pub(super) const WAYS: usize = 16;
#[cfg(loom)]
pub(super) const WAYS: usize = 1;

/// Index cells: a 6-bit tag from the tenant's hash over a 26-bit slot
/// (slots run to twice `MAX_MAX_TENANTS`, inclusive: see [`MAX_SLOTS`]).
pub(super) const SLOT_BITS: u32 = 26;
/// Slots an index cell can name: the profile keeps a table below it.
pub(crate) const MAX_SLOTS: u64 = 1 << SLOT_BITS;

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
pub(super) struct Index {
    pub(super) cells: Box<[Bucket]>,
    pub(super) buckets: u64,
    /// Rotates the cell replaced in a full bucket.
    pub(super) victim: AtomicUsize,
}

impl Index {
    pub(super) fn try_new(capacity: u32) -> Result<Self, OutOfMemory> {
        let buckets = Self::buckets_for(capacity);
        Ok(Self {
            cells: zeroed_buckets(buckets)?,
            buckets: buckets as u64,
            victim: AtomicUsize::new(0),
        })
    }

    /// Buckets for a table of `capacity` tenants: one cell per two.
    pub(super) fn buckets_for(capacity: u32) -> usize {
        (capacity as usize).div_ceil(2 * WAYS).max(1)
    }

    #[inline]
    pub(super) fn bucket(&self, hash: u64) -> Option<&Bucket> {
        // Low 32 bits scaled to the bucket count: no power-of-two rounding.
        let i = (((hash & 0xffff_ffff) * self.buckets) >> 32) as usize;
        self.cells.get(i)
    }

    /// The bucket's cells in the tenant's probe order: from its home cell
    /// on, wrapping. Cells are filled in the same order, so about 3 tenants
    /// in 4 match the first cell read. What that saves is a mispredicted
    /// branch, not loads: the scan's exit waits on the bucket's cache miss,
    /// and a wrong guess there discards the work begun on the next call, so
    /// the misses of successive calls would not overlap.
    #[inline]
    pub(super) fn probe(&self, hash: u64) -> impl Iterator<Item = &AtomicU32> + '_ {
        let home = Self::home(hash);
        let bucket = self.bucket(hash);
        // A range with the bucket checked inside, not a flat_map over the
        // Option, which compiles to a much longer loop.
        let ways = if bucket.is_some() { WAYS } else { 0 };
        (0..ways).filter_map(move |k| Some(&bucket?.0[(home + k) % WAYS]))
    }

    /// The tenant's first cell in its bucket: bits 52.., above the shard's
    /// (32..47), below the tag's (58..).
    #[inline]
    pub(super) fn home(hash: u64) -> usize {
        (hash >> 52) as usize % WAYS
    }

    /// The cell naming `slot` for the tenant of `hash`.
    #[inline]
    pub(super) fn entry(hash: u64, slot: u32) -> u32 {
        ((hash >> 58) as u32) << SLOT_BITS | slot
    }

    /// Slots the bucket names for the tenant of `hash`, in probe order.
    #[inline]
    pub(super) fn candidates(&self, hash: u64) -> impl Iterator<Item = u32> + '_ {
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
    pub(super) fn remember(&self, hash: u64, slot: u32) {
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
    pub(super) fn forget(&self, hash: u64, slot: u32) {
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
pub(super) struct Bucket(pub(super) [AtomicU32; WAYS]);

/// `n` zeroed buckets, zeroed by the allocator (which, for their 64-byte
/// alignment, writes the zeros: the index is in memory from the start).
#[cfg(not(loom))]
pub(super) fn zeroed_buckets(n: usize) -> Result<Box<[Bucket]>, OutOfMemory> {
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
pub(super) fn zeroed_buckets(n: usize) -> Result<Box<[Bucket]>, OutOfMemory> {
    Ok((0..n)
        .map(|_| Bucket(std::array::from_fn(|_| AtomicU32::new(0))))
        .collect())
}
