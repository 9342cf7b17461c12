//! The only place that names atomics, `Arc` and threads.
//!
//! Under `--cfg loom` every primitive comes from loom so the models in
//! `loom-tests/` explore the real code; otherwise from std. The packed
//! breaker word uses `atomic::Atomic<Word>` (default features off, so a
//! size without native atomics cannot compile); loom has no typed atomic,
//! so under loom [`AtomicWord`] wraps loom's `AtomicU64` with the same
//! method names.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

// Aliases rather than re-exports, so clippy's `disallowed-types` (which
// bans the std paths everywhere else) sees the alias here and not the
// std type at every use.
#[cfg(not(loom))]
#[allow(clippy::disallowed_types)]
mod std_prims {
    pub(crate) type AtomicBool = std::sync::atomic::AtomicBool;
    pub(crate) type AtomicPtr<T> = std::sync::atomic::AtomicPtr<T>;
    pub(crate) type AtomicU32 = std::sync::atomic::AtomicU32;
    pub(crate) type AtomicU64 = std::sync::atomic::AtomicU64;
    pub(crate) type AtomicUsize = std::sync::atomic::AtomicUsize;
    pub(crate) type Arc<T> = std::sync::Arc<T>;
}
#[cfg(not(loom))]
pub(crate) use std_prims::{Arc, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;

/// A mutex loom can see: one held across a loom atomic (a yield point in
/// a model) by a std mutex would block another model thread for real.
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Immutable shared values (tenant keys, cached fallback values): their
/// reference counts guard no breaker state, so loom need not model them,
/// and loom's `Arc` cannot hold `str` or `dyn Any`.
#[allow(clippy::disallowed_types)]
pub(crate) type StdArc<T> = std::sync::Arc<T>;

/// A pointer slot of process bookkeeping that threads outside loom's
/// models read (an event dispatcher's), which loom's atomics cannot be.
#[allow(clippy::disallowed_types)]
pub(crate) type StdAtomicPtr<T> = std::sync::atomic::AtomicPtr<T>;

pub(crate) use crossbeam_epoch as epoch;
pub(crate) use crossbeam_utils::CachePadded;

use std::marker::PhantomData;

/// Lets spin/retry loops yield to loom's scheduler; a no-op hint otherwise.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Small per-thread indices, each held by at most one live thread at a
/// time: a thread takes the lowest free one on first use and gives it back
/// when it exits; at most [`MAX`](thread_index::MAX) are out at once, and
/// later threads get none. Holding index `i` makes a thread the only
/// writer of stripe `i` of a per-thread striped counter, so it can count
/// there with a plain load and store (no locked instruction) and still
/// exactly: the pool's mutex orders the previous holder's last store
/// before the next holder's first load.
///
/// Process-wide bookkeeping, not breaker state, and switched off under
/// loom (`MAX` is 0 there): std's mutex.
#[allow(clippy::disallowed_types)]
pub(crate) mod thread_index {
    use std::sync::Mutex;

    /// Indices handed out at most.
    pub(crate) const MAX: usize = if cfg!(loom) { 0 } else { 16 };

    struct Pool {
        next: usize,
        free: Vec<usize>,
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        next: 0,
        free: Vec::new(),
    });

    /// A held index; given back when its thread exits.
    struct Held(usize);

    impl Drop for Held {
        fn drop(&mut self) {
            // The cache first: a count made while the thread's locals are
            // torn down then takes the shared way, never a stripe whose
            // index another thread may hold by now.
            let _ = CACHED.try_with(|c| c.set(NONE));
            if let Ok(mut p) = POOL.lock() {
                p.free.push(self.0);
            }
        }
    }

    // `get`'s answer cached where one load reads it: the index, `MAX`
    // for a thread holding none, `UNSET` before the first `cached`. A
    // `const` local without `Drop`: reading it needs no check of its
    // initialisation or teardown, unlike `MINE`.
    thread_local!(static CACHED: std::cell::Cell<usize> = const { std::cell::Cell::new(UNSET) });
    const UNSET: usize = usize::MAX;
    const NONE: usize = MAX;

    /// This thread's index if it holds one and has asked before (by
    /// [`cached_first`]), else a number of [`MAX`] or more: one
    /// thread-local load, for the hottest counts, which compare it with
    /// `MAX`, index with it, and call [`cached_first`] on the cold side.
    #[inline(always)]
    pub(crate) fn cached() -> usize {
        CACHED.with(std::cell::Cell::get)
    }

    /// This thread's index if it holds one, else a number of [`MAX`] or
    /// more, cached for [`cached`] from now on.
    #[cold]
    #[inline(never)]
    pub(crate) fn cached_first() -> usize {
        let c = CACHED.with(std::cell::Cell::get);
        if c != UNSET {
            return c;
        }
        let c = get().unwrap_or(NONE);
        CACHED.with(|cell| cell.set(c));
        c
    }

    fn take() -> Option<Held> {
        let mut p = POOL.lock().ok()?;
        // The lowest free index: stripe counts sized by the core count
        // (below MAX) then serve the threads that are running.
        if let Some(at) = (0..p.free.len()).min_by_key(|&k| p.free[k]) {
            return Some(Held(p.free.swap_remove(at)));
        }
        (p.next < MAX).then(|| {
            p.next += 1;
            Held(p.next - 1)
        })
    }

    thread_local!(static MINE: Option<Held> = take());

    /// This thread's index, if it holds one (none also while the thread's
    /// locals are being torn down).
    #[inline]
    pub(crate) fn get() -> Option<usize> {
        if MAX == 0 {
            return None;
        }
        MINE.try_with(|h| h.as_ref().map(|h| h.0)).ok().flatten()
    }
}

/// Asks for the cache line at `p` ahead of its use (a hint: no fault,
/// whatever the address; nothing where no stable intrinsic exists).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: `prefetcht0` reads nothing architecturally and never faults;
    // SSE, which it needs, is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = p;
}

/// A part made on first need and kept until its owner drops: null, or
/// one boxed value installed by a compare-and-swap from null and never
/// replaced, so a `&T` it hands out lives as long as `&self`.
///
/// It owns its `T` as `OnceLock<T>` does: sending it sends the `T`
/// (`T: Send`), and sharing it lets any thread install a `T`, read it, or
/// leave it to be dropped by whichever thread drops the owner
/// (`T: Send + Sync`). Not part of the API; public (hidden) only so these
/// bounds are checked from outside the crate:
///
/// ```
/// fn send_and_sync<T: Send + Sync>() {}
/// send_and_sync::<breakerbank::Installed<std::sync::Arc<u8>>>();
/// ```
///
/// A `T` that must stay on its thread makes it neither `Send`:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<breakerbank::Installed<std::rc::Rc<u8>>>();
/// ```
///
/// nor `Sync`:
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<breakerbank::Installed<std::rc::Rc<u8>>>();
/// ```
///
/// and a `T` that is `Send` but not `Sync` keeps it from being `Sync`:
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<breakerbank::Installed<std::cell::Cell<u8>>>();
/// ```
///
/// The raw pointer in the marker keeps the auto traits from following
/// `AtomicPtr`, which is `Send + Sync` whatever it points to.
#[derive(Debug)]
pub struct Installed<T>(AtomicPtr<T>, PhantomData<*mut T>);

// SAFETY: an `Installed<T>` owns at most one boxed `T`; moving it to
// another thread moves that `T` (dropped there), which `T: Send` allows.
unsafe impl<T: Send> Send for Installed<T> {}
// SAFETY: through `&Installed<T>` a thread may read the `T` another
// installed (`T: Sync`) or install one that another thread later drops
// with the owner (`T: Send`): `OnceLock`'s bounds, for the same reasons.
unsafe impl<T: Send + Sync> Sync for Installed<T> {}

impl<T> Installed<T> {
    /// Nothing installed yet.
    pub(crate) fn empty() -> Self {
        Self(AtomicPtr::new(std::ptr::null_mut()), PhantomData)
    }

    /// `value` installed already.
    pub(crate) fn with(value: T) -> Self {
        Self(AtomicPtr::new(Box::into_raw(Box::new(value))), PhantomData)
    }

    /// The installed value, if any.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the AcqRel CAS that installed it.
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: non-null means a pointer from `Box::into_raw` of a live,
        // initialised value (`with` or `install`), never replaced
        // and freed only in Drop, which needs `&mut self`.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The installed value, installing `make()` if there is none (a racing
    /// installer's value wins over ours, which is dropped).
    #[inline]
    pub(crate) fn get_or_install_with(&self, make: impl FnOnce() -> T) -> &T {
        match self.get() {
            Some(v) => v,
            None => self.install(make()),
        }
    }

    /// Installs `value` unless a value is installed; returns the one that
    /// stays.
    #[cold]
    fn install(&self, value: T) -> &T {
        let fresh = Box::into_raw(Box::new(value));
        // AcqRel: publish the initialised value / see the winner's.
        match self.0.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: we just installed `fresh`, a live Box; see `get`.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: `winner` was installed; see `get`.
                unsafe { &*winner }
            }
        }
    }
}

impl<T> Drop for Installed<T> {
    fn drop(&mut self) {
        // A load, not `get_mut`, which loom's atomics lack; with `&mut
        // self` nothing races it.
        let p = self.0.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a pointer from `Box::into_raw` (see `get`), freed
            // once, here, with `&mut self`.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A list that only grows, read without a lock: a thread that forks while
/// another walks or extends it leaves the child a list it can still use
/// (a mutex held at the fork would stay held in the child for ever).
/// Values are dropped with the list.
///
/// Process bookkeeping (listeners, a sweep's dependencies), never breaker
/// state, and walked by threads outside loom's models: std atomics.
#[allow(clippy::disallowed_types)]
pub(crate) mod append {
    use std::sync::atomic::{AtomicPtr, Ordering};

    struct Node<T> {
        value: T,
        next: AtomicPtr<Node<T>>,
    }

    /// See the module.
    pub(crate) struct AppendList<T> {
        head: AtomicPtr<Node<T>>,
        /// A node at or before the end, where a push starts its walk, so
        /// n pushes cost O(n), not O(n²) (a bank of 50k dependencies
        /// registers each with the sweep). Only a hint: a push that loses
        /// a race may set it back to an earlier node, from which the walk
        /// still reaches the end, since nodes are never unlinked.
        tail: AtomicPtr<Node<T>>,
    }

    // SAFETY: the list owns its values; sending it sends them.
    unsafe impl<T: Send> Send for AppendList<T> {}
    // SAFETY: through `&AppendList<T>` a thread reads values others pushed
    // (`T: Sync`) or pushes one that another thread drops with the list
    // (`T: Send`).
    unsafe impl<T: Send + Sync> Sync for AppendList<T> {}

    impl<T> Default for AppendList<T> {
        fn default() -> Self {
            Self {
                head: AtomicPtr::new(std::ptr::null_mut()),
                tail: AtomicPtr::new(std::ptr::null_mut()),
            }
        }
    }

    impl<T> AppendList<T> {
        /// Adds `value` at the end.
        pub(crate) fn push(&self, value: T) {
            let node = Box::into_raw(Box::new(Node {
                value,
                next: AtomicPtr::new(std::ptr::null_mut()),
            }));
            // Acquire: pairs with the Release below, so the hinted node is
            // seen whole.
            let hint = self.tail.load(Ordering::Acquire);
            // SAFETY: a linked node lives until the list drops, which
            // needs `&mut self`.
            let mut link = unsafe { hint.as_ref() }.map_or(&self.head, |n| &n.next);
            loop {
                // AcqRel: publish the node's value / see the next node's.
                match link.compare_exchange(
                    std::ptr::null_mut(),
                    node,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        self.tail.store(node, Ordering::Release);
                        return;
                    }
                    // SAFETY: a linked node lives until the list drops,
                    // which needs `&mut self`.
                    Err(next) => link = unsafe { &(*next).next },
                }
            }
        }

        /// The values, in the order they were pushed.
        pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
            // Acquire: pairs with `push`'s CAS.
            let first = self.head.load(Ordering::Acquire);
            // SAFETY: as in `push`: linked nodes outlive `&self`.
            std::iter::successors(unsafe { first.as_ref() }, |n| unsafe {
                n.next.load(Ordering::Acquire).as_ref()
            })
            .map(|n| &n.value)
        }
    }

    impl<T> Drop for AppendList<T> {
        fn drop(&mut self) {
            let mut p = *self.head.get_mut();
            while !p.is_null() {
                // SAFETY: each node came from `Box::into_raw` in `push` and
                // is freed once, here, with `&mut self`.
                let mut node = unsafe { Box::from_raw(p) };
                p = *node.next.get_mut();
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::AppendList;

        #[test]
        fn keeps_order_across_threads() {
            let list = AppendList::default();
            std::thread::scope(|s| {
                for t in 0..4 {
                    let list = &list;
                    s.spawn(move || (0..100).for_each(|i| list.push(t * 1000 + i)));
                }
            });
            let all: Vec<i32> = list.iter().copied().collect();
            assert_eq!(all.len(), 400);
            for t in 0..4 {
                let mine: Vec<_> = all.iter().filter(|v| **v / 1000 == t).collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
