//! The arena: every tenant slot of a table in one zeroed allocation.

use super::alloc::OutOfMemory;
use crate::partition::Partition;

/// A cache line: two slots, one home.
pub(super) const LINE: usize = 64;

/// The huge page size [`Arena::zeroed`] asks for (x86_64's and arm64's
/// usual 2 MiB; elsewhere an alignment, no more).
pub(super) const HUGE_PAGE: usize = 2 << 20;

/// Linux's `madvise` advice for huge pages (asm-generic values, as on
/// x86_64 and arm64; `libc` has `MADV_COLLAPSE` for glibc targets only).
#[cfg(not(loom))]
pub(super) const MADV_HUGEPAGE: i32 = 14;
/// Moves memory already on 4 KiB pages onto huge pages (Linux 6.1 on).
#[cfg(not(loom))]
pub(super) const MADV_COLLAPSE: i32 = 25;

/// A table's slots: one zeroed allocation, two slots a tenant, two slots a
/// cache line. Slot `s` is at index `s - 1` (slot 0 is the dependency's
/// overflow partition), one add from the base. All zeros is a free slot,
/// so the memory is zeroed when the table is made ([`Arena::zeroed`]):
/// `max_tenants` costs its 64 bytes a tenant from the start.
/// Partitions are never moved or freed before the arena, so a `&Partition`
/// lives as long as the table.
pub(super) struct Arena {
    pub(super) base: std::ptr::NonNull<Partition>,
    pub(super) slots: usize,
}

// SAFETY: the arena owns its partitions as a `Box<[Partition]>` would:
// they are reached only through shared references until Drop;
// `Partition` is `Send` and `Sync` (atomics and an owned side part).
unsafe impl Send for Arena {}
// SAFETY: see `Send`.
unsafe impl Sync for Arena {}

impl Arena {
    pub(super) fn try_new(slots: usize) -> Result<Self, OutOfMemory> {
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
    /// call, under a hypervisor a two-level one (docs/design/tenant-table.md).
    /// The first touch must be a write: a page first read is mapped to the shared zero page, and
    /// the write after it splits that into 4 KiB pages. So the zeros are
    /// written here, as `alloc_zeroed` writes them for an alignment above
    /// 16 anyway. Memory the allocator had used before (after a bank of
    /// similar size was dropped, malloc serves up to 32 MiB from its heap)
    /// is already on 4 KiB pages: the collapse after the zeros moves it
    /// onto huge pages, and costs nothing where they are already.
    #[cfg(not(loom))]
    pub(super) fn zeroed(layout: std::alloc::Layout) -> *mut u8 {
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
    pub(super) fn advise(p: *mut u8, len: usize, advice: i32) {
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
    pub(super) fn layout(slots: usize) -> Option<std::alloc::Layout> {
        std::alloc::Layout::array::<Partition>(slots)
            .and_then(|l| match l.size() >= 2 * HUGE_PAGE {
                true => l.align_to(HUGE_PAGE),
                false => l.align_to(LINE),
            })
            .ok()
    }

    /// The partition at `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&Partition> {
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
    pub(super) fn at(&self, i: usize) -> *const Partition {
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
        // (which frees its side part, if any), then the allocation freed
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
