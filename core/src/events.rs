//! Events (C16): delivered to listeners on a dispatcher thread, never on
//! the admission path. Emitters only `try_send` into a bounded queue; when
//! the queue is full the event is dropped and counted.

use crate::clock::Instant;
use crate::outcome::State;
use crate::sync::{AtomicBool, AtomicU64, Ordering, StdArc};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex as StdMutex, OnceLock};

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
}

impl EventKind {
    /// `"transition"`, `"reset"`, `"forced_open"`, `"stuck"`, `"reload"`,
    /// `"trip"` or `"half_open"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Transition => "transition",
            EventKind::Reset => "reset",
            EventKind::ForcedOpen => "forced_open",
            EventKind::Stuck => "stuck",
            EventKind::Reload => "reload",
            EventKind::Trip => "trip",
            EventKind::HalfOpen => "half_open",
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
    tx: OnceLock<SyncSender<Event>>,
    // A std mutex: taken by `subscribe` and by the dispatcher to copy the
    // list, never while a listener runs and never on the admission path.
    listeners: StdArc<StdMutex<Vec<Listener>>>,
    dropped: AtomicU64,
    queued: AtomicU64,
    delivered: StdArc<AtomicU64>,
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
            tx: OnceLock::new(),
            listeners: StdArc::new(StdMutex::new(Vec::new())),
            dropped: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            delivered: StdArc::new(AtomicU64::new(0)),
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
        let Some(tx) = self.tx.get() else {
            return;
        };
        let Some(event) = make() else {
            return;
        };
        // Counted before sending so `flush` never sees delivered > queued.
        // Relaxed: statistics; `flush` only compares them.
        self.queued.fetch_add(1, Ordering::Relaxed);
        if tx.try_send(event).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until what was queued so far has been delivered.
    pub(crate) fn flush(&self, timeout: std::time::Duration) -> bool {
        // Relaxed: see `emit`.
        let target = self.queued.load(Ordering::Relaxed);
        let deadline = std::time::Instant::now() + timeout;
        // Acquire: see the listeners' effects once they are counted.
        while self.delivered.load(Ordering::Acquire) < target {
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

    pub(crate) fn subscribe(&self, l: Listener) {
        if let Ok(mut v) = self.listeners.lock() {
            v.push(l);
        }
        self.tx.get_or_init(|| {
            let (tx, rx) = sync_channel::<Event>(EVENT_QUEUE);
            let listeners = self.listeners.clone();
            let delivered = self.delivered.clone();
            // The thread ends when the bank (the last sender) is dropped.
            let spawned = std::thread::Builder::new()
                .name("breakerbank-events".into())
                .spawn(move || {
                    for ev in rx {
                        let ls: Vec<Listener> =
                            listeners.lock().map(|v| v.clone()).unwrap_or_default();
                        for l in ls {
                            // A panicking listener must not stop delivery to the others.
                            let _ =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(&ev)));
                        }
                        // Release: what listeners did is visible to `flush`'s Acquire.
                        delivered.fetch_add(1, Ordering::Release);
                    }
                });
            if spawned.is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            tx
        });
        // Relaxed: see `enabled`.
        self.enabled.store(true, Ordering::Relaxed);
    }
}
