//! Events (C16): delivered to listeners on a dispatcher thread, never on
//! the admission path. Emitters only `try_send` into a bounded queue; when
//! the queue is full the event is dropped and counted.

use crate::clock::Instant;
use crate::fork::{self, Restart};
use crate::outcome::State;
use crate::sync::append::AppendList;
use crate::sync::{AtomicBool, AtomicU64, Ordering, StdArc, StdAtomicPtr};
use std::sync::mpsc::{sync_channel, SyncSender};

/// Events waiting for the dispatcher at most; beyond, they are dropped.
pub const EVENT_QUEUE: usize = 4096;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The breaker changed state by itself (trip, half-open, close).
    Transition,
    /// An operator reset it (C11).
    Reset,
    /// An operator forced it open (C11).
    ForcedOpen,
    /// It has not closed within its recovery bound (C15).
    Stuck,
    /// A reload put a new profile in force (C20): one event for each
    /// dependency it kept, added or removed, with partition `*` (all of
    /// them) and no states.
    Reload,
    /// An operator tripped it open (C19); it ends by itself.
    Trip,
    /// An operator started a probe cycle (C19).
    HalfOpen,
    /// The trip policy of a dependency in observe mode fired (C22): the
    /// breaker stays closed, its counts restarted. No states.
    WouldTrip,
}

impl EventKind {
    /// `"transition"`, `"reset"`, `"forced_open"`, `"stuck"`, `"reload"`,
    /// `"trip"`, `"half_open"` or `"would_trip"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Transition => "transition",
            EventKind::Reset => "reset",
            EventKind::ForcedOpen => "forced_open",
            EventKind::Stuck => "stuck",
            EventKind::Reload => "reload",
            EventKind::Trip => "trip",
            EventKind::HalfOpen => "half_open",
            EventKind::WouldTrip => "would_trip",
        }
    }
}

/// One event, as listeners receive it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The dependency.
    pub dependency: String,
    /// The partition: tenant id, `global` or `<overflow>`.
    pub partition: String,
    /// When, on the bank's clock.
    pub at: Instant,
    /// State before (transitions and operator actions).
    pub from: Option<State>,
    /// State after (transitions and operator actions).
    pub to: Option<State>,
}

type Listener = StdArc<dyn Fn(&Event) + Send + Sync>;

/// The bank's event queue and listeners.
pub(crate) struct EventBus {
    enabled: AtomicBool,
    /// The dispatcher of this process, or null before the first listener.
    /// A forked child inherits its parent's (whose thread stayed there) and
    /// starts its own on first use (see `crate::fork`); the parent's is
    /// kept behind it, never dropped in the child (its queue may have been
    /// mid-operation in a thread the child does not have).
    current: StdAtomicPtr<Dispatcher>,
    // Lock-free: a dispatcher of the parent walking it at the fork leaves
    // the child nothing held.
    listeners: StdArc<AppendList<Listener>>,
    dropped: AtomicU64,
}

/// One dispatcher thread's queue and counts.
struct Dispatcher {
    tx: SyncSender<Event>,
    /// The fork count it was started at ([`fork::epoch`]).
    epoch: u64,
    queued: AtomicU64,
    delivered: StdArc<AtomicU64>,
    /// The one it replaced (a parent's, in a forked child), owned here.
    prev: *mut Dispatcher,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl EventBus {
    pub(crate) fn new() -> Self {
        Self {
            enabled: AtomicBool::new(false),
            current: StdAtomicPtr::new(std::ptr::null_mut()),
            listeners: StdArc::default(),
            dropped: AtomicU64::new(0),
        }
    }

    /// Whether anyone listens (so emitters can skip building events).
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        // Relaxed: a listener added concurrently may miss this event.
        self.enabled.load(Ordering::Relaxed)
    }

    /// Queues an event without blocking.
    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        self.emit_some(|| Some(make()));
    }

    /// [`EventBus::emit`] for an event that may turn out to be due to no
    /// one: `make` returns `None` to send nothing.
    pub(crate) fn emit_some(&self, make: impl FnOnce() -> Option<Event>) {
        if !self.enabled() {
            return;
        }
        let Some(d) = self.dispatcher() else {
            return;
        };
        let Some(event) = make() else {
            return;
        };
        // Counted before sending so `flush` never sees delivered > queued.
        // Relaxed: statistics; `flush` only compares them.
        d.queued.fetch_add(1, Ordering::Relaxed);
        if d.tx.try_send(event).is_err() {
            d.queued.fetch_sub(1, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// This process's dispatcher, started again if the one there is was
    /// started before a fork; none before the first listener.
    #[inline]
    fn dispatcher(&self) -> Option<&Dispatcher> {
        // Acquire: pairs with the CAS that installed it.
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: non-null pointers come from `Box::into_raw` in `start`,
        // freed only in `Drop` (`&mut self`).
        let d = unsafe { p.as_ref() }?;
        if d.epoch == fork::epoch() {
            return Some(d);
        }
        Some(self.start(p))
    }

    /// Starts a dispatcher in place of `seen` (null: none yet), unless
    /// another thread just did; returns the one in force.
    #[cold]
    fn start(&self, mut seen: *mut Dispatcher) -> &Dispatcher {
        loop {
            let fresh = Box::into_raw(Box::new(self.spawn(seen)));
            // AcqRel: publish the new dispatcher / see a racing one's.
            match self
                .current
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: just installed; freed only in `Drop`.
                Ok(_) => return unsafe { &*fresh },
                Err(winner) => {
                    // SAFETY: `fresh` lost the race and was never shared;
                    // it does not own `seen`, which stays in the chain.
                    let mut lost = unsafe { Box::from_raw(fresh) };
                    lost.prev = std::ptr::null_mut();
                    drop(lost);
                    // SAFETY: as in `dispatcher`.
                    match unsafe { winner.as_ref() } {
                        Some(d) if d.epoch == fork::epoch() => return d,
                        _ => seen = winner,
                    }
                }
            }
        }
    }

    /// A new dispatcher thread over the listeners, replacing `prev`.
    fn spawn(&self, prev: *mut Dispatcher) -> Dispatcher {
        let (tx, rx) = sync_channel::<Event>(EVENT_QUEUE);
        let listeners = self.listeners.clone();
        let delivered = StdArc::new(AtomicU64::new(0));
        let counted = delivered.clone();
        fork::watch();
        // The thread ends when the bank (the last sender) is dropped.
        let spawned = std::thread::Builder::new()
            .name("breakerbank-events".into())
            .spawn(move || {
                for ev in rx {
                    for l in listeners.iter() {
                        // A panicking listener must not stop delivery to the others.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(&ev)));
                    }
                    // Release: what listeners did is visible to `flush`'s Acquire.
                    counted.fetch_add(1, Ordering::Release);
                }
            });
        if spawned.is_err() {
            // No thread: the queue's receiver is gone, so every event sent
            // to it is dropped and counted.
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Dispatcher {
            tx,
            epoch: fork::epoch(),
            queued: AtomicU64::new(0),
            delivered,
            prev,
        }
    }

    /// Waits until what was queued so far has been delivered.
    pub(crate) fn flush(&self, timeout: std::time::Duration) -> bool {
        let Some(d) = self.dispatcher() else {
            return true;
        };
        // Relaxed: see `emit`.
        let target = d.queued.load(Ordering::Relaxed);
        let deadline = std::time::Instant::now() + timeout;
        // Acquire: see the listeners' effects once they are counted.
        while d.delivered.load(Ordering::Acquire) < target {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        true
    }

    /// Events dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn subscribe(self: &StdArc<Self>, l: Listener) {
        self.listeners.push(l);
        if self.dispatcher().is_none() {
            let owner: StdArc<dyn Restart> = self.clone();
            fork::register(StdArc::downgrade(&owner));
            self.start(std::ptr::null_mut());
        }
        // Relaxed: see `enabled`.
        self.enabled.store(true, Ordering::Relaxed);
    }
}

impl Restart for EventBus {
    fn restart(self: StdArc<Self>) {
        let _ = self.dispatcher();
    }
}

impl Drop for EventBus {
    fn drop(&mut self) {
        let mut p = *self.current.get_mut();
        while !p.is_null() {
            // SAFETY: each pointer in the chain came from `Box::into_raw`
            // in `start` and is owned by the chain alone; freed once, here.
            let d = unsafe { Box::from_raw(p) };
            p = d.prev;
            if d.epoch != fork::epoch() {
                // A parent's, in a forked child: its queue is left as the
                // fork found it (see `current`).
                std::mem::forget(d);
            }
        }
    }
}
