//! Forked children (C16): a bank built before a `fork()` keeps working in
//! the child (gunicorn `--preload`, prefork workers, `multiprocessing`'s
//! fork start method).
//!
//! A child has only the thread that forked: the bank's event dispatcher
//! and sweep threads, and the coarse clock's ticker, stay in the parent.
//! A `pthread_atfork` child handler counts the fork (`epoch`); each
//! thread's owner notes the count it started its thread in, so a copy in
//! a child sees its thread is gone, and starts it again, with one relaxed
//! load on the paths that wake or feed a thread (a trip, an event), never
//! on the closed admit + record path. Breakers that nobody calls still
//! need their sweep (an open period ending, a stuck alert), so the child
//! handler also starts again the threads every live bank ran in the
//! parent: at once in a C or Rust process, or, where the runtime must
//! first make itself whole in the child (Python), when the binding says
//! so from its own after-fork hook ([`defer_restart`], [`restart`]).
//!
//! A thread of the parent that held a lock of the bank at the fork would
//! leave it held in the child: the lists the threads walk are lock-free,
//! and the registry below is held across the fork by its prepare handler.

/// Something that owns a background thread a forked child needs again.
pub(crate) trait Restart: Send + Sync {
    /// In a forked child: start again the thread this ran in the parent,
    /// if it ran one.
    #[cfg_attr(any(loom, not(unix)), allow(dead_code))]
    fn restart(self: crate::sync::StdArc<Self>);
}

#[cfg(all(unix, not(loom)))]
#[allow(clippy::disallowed_types)] // process bookkeeping, outside every loom model
mod imp {
    use super::Restart;
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Weak};

    static EPOCH: AtomicU64 = AtomicU64::new(0);
    static DEFERRED: AtomicBool = AtomicBool::new(false);

    /// The live owners of threads, behind a spin lock that a fork holds
    /// (prepare) and both sides release (parent, child): the child never
    /// inherits it held.
    struct Registry {
        locked: AtomicBool,
        owners: UnsafeCell<Vec<Weak<dyn Restart>>>,
    }

    // SAFETY: `owners` is only touched with `locked` held (see `with`).
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry {
        locked: AtomicBool::new(false),
        owners: UnsafeCell::new(Vec::new()),
    };

    fn lock() {
        // Acquire: see the previous holder's writes to `owners`.
        while REGISTRY
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    fn unlock() {
        // Release: publish the writes to `owners`.
        REGISTRY.locked.store(false, Ordering::Release);
    }

    fn with<R>(f: impl FnOnce(&mut Vec<Weak<dyn Restart>>) -> R) -> R {
        lock();
        // SAFETY: `locked` is held, so this is the only reference; `f`
        // never reenters the registry (it neither forks nor registers).
        let r = f(unsafe { &mut *REGISTRY.owners.get() });
        unlock();
        r
    }

    pub(super) fn epoch() -> u64 {
        // Relaxed: the count orders nothing; a thread's owner compares it
        // with the count it noted.
        EPOCH.load(Ordering::Relaxed)
    }

    pub(super) fn register(owner: Weak<dyn Restart>) {
        watch();
        with(|owners| {
            owners.retain(|o| o.strong_count() > 0);
            owners.push(owner);
        });
    }

    pub(super) fn defer_restart() {
        watch();
        DEFERRED.store(true, Ordering::Relaxed);
    }

    pub(super) fn restart() {
        let live: Vec<Arc<dyn Restart>> =
            with(|owners| owners.iter().filter_map(Weak::upgrade).collect());
        // Outside the lock: a restart spawns a thread, and dropping the
        // last handle of a bank may run its destructor.
        for o in live {
            o.restart();
        }
    }

    extern "C" fn prepare() {
        lock();
    }

    extern "C" fn parent() {
        unlock();
    }

    extern "C" fn child() {
        unlock();
        EPOCH.fetch_add(1, Ordering::Relaxed);
        crate::clock::forked();
        if !DEFERRED.load(Ordering::Relaxed) {
            restart();
        }
    }

    pub(super) fn watch() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: registers three handlers that touch only this
            // module's statics (and, in the child, start threads, as a
            // child may once glibc has made its allocator and thread list
            // whole, which it does before the child handlers run).
            unsafe {
                libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
            }
        });
    }
}

#[cfg(not(all(unix, not(loom))))]
mod imp {
    use super::Restart;
    use std::sync::Weak;

    pub(super) fn epoch() -> u64 {
        0
    }
    pub(super) fn watch() {}
    pub(super) fn register(_: Weak<dyn Restart>) {}
    pub(super) fn defer_restart() {}
    pub(super) fn restart() {}
}

/// How many forks lie between the process that first watched for them
/// and this one: 0 there, 1 in its children, 2 in theirs. A parent's count
/// never changes when it forks.
#[inline]
pub(crate) fn epoch() -> u64 {
    imp::epoch()
}

/// Installs the fork handlers (once), before a thread the child will miss
/// is started.
pub(crate) fn watch() {
    imp::watch();
}

/// Asks for `owner`'s threads to be started again in a forked child, for
/// as long as it lives. Also installs the fork handlers (once).
pub(crate) fn register(owner: std::sync::Weak<dyn Restart>) {
    imp::register(owner);
}

/// Leaves starting the banks' threads again in a forked child to the
/// caller, who then calls [`restart`] from its own after-fork hook. For
/// a runtime that must make itself whole in the child before a bank's
/// thread may call into it: the Python binding calls this when it loads
/// and [`restart`] from `os.register_at_fork(after_in_child=…)`. Without
/// it the threads start again as the child returns from `fork()`.
pub fn defer_restart() {
    imp::defer_restart();
}

/// In a forked child: starts again the event dispatcher and the sweep of
/// every live bank that ran them in the parent (after
/// [`defer_restart`]; harmless otherwise, and in a process that never
/// forked). A bank that is used starts them again by itself on its next
/// event or trip; this is for banks nobody calls, whose open periods and
/// stuck alerts must still be announced (C14, C15, C16).
pub fn restart() {
    imp::restart();
}
