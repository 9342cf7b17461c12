//! Event delivery to a C callback (C16).
//!
//! The core calls its subscribers off the admission path. This module adds
//! what C needs on top: the callback is never called while any lock is held
//! (ours or the core's own locks are not ours to hold), replacing or
//! clearing it waits for a running call to return, and once `bb_bank_free`
//! has returned the callback is never called again, so the caller may free
//! `user_data`.

// Arc from std: the listener is not loom-modelled (clippy.toml steers only
// the core's imports through `crate::sync`).
#![allow(clippy::disallowed_types)]

use crate::boundary::Fail;
use crate::types::bb_breaker_state;
use breakerbank::{Bank, Event, EventKind};
use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// What an event is about.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum bb_event_kind {
    /// A state transition (`from` → `to`).
    BB_EVENT_TRANSITION = 0,
    /// An operator reset (`bb_reset`).
    BB_EVENT_RESET = 1,
    /// An operator force-open (`bb_force_open`).
    BB_EVENT_FORCED_OPEN = 2,
    /// The breaker has not closed within its `recovery_bound` (C15); once
    /// per trip-to-close episode.
    BB_EVENT_STUCK = 3,
    /// `bb_bank_reload` put a new profile in force (C20): one event for
    /// each dependency it kept, added or removed, with partition `*` and
    /// no states.
    BB_EVENT_RELOAD = 4,
    /// An operator trip (`bb_trip`, C19): `from` → open; ends by itself.
    BB_EVENT_TRIP = 5,
    /// An operator half-open (`bb_half_open`, C19): `from` → half-open.
    BB_EVENT_HALF_OPEN = 6,
    /// The trip policy of a dependency in observe mode fired (C22): the
    /// breaker stays closed, its counts restarted; no states. Counted in
    /// `would_trip_total`.
    BB_EVENT_WOULD_TRIP = 7,
}

/// One event, lent to the callback for the duration of the call: copy what
/// you keep; the strings are UTF-8 and not NUL-terminated.
#[repr(C)]
#[derive(Debug)]
pub struct bb_event {
    /// What happened.
    pub kind: bb_event_kind,
    /// The dependency's name.
    pub dependency: *const c_char,
    /// Its length in bytes.
    pub dependency_len: usize,
    /// The partition: the tenant id, `global`, or `<overflow>`.
    pub partition: *const c_char,
    /// Its length in bytes.
    pub partition_len: usize,
    /// When, in ns on the bank's clock.
    pub at_ns: u64,
    /// Whether `from` is meaningful.
    pub has_from: bool,
    /// The state before.
    pub from: bb_breaker_state,
    /// Whether `to` is meaningful.
    pub has_to: bool,
    /// The state after.
    pub to: bb_breaker_state,
}

/// An event callback: `user_data` as given to `bb_set_listener`, and the
/// event, valid only during the call. Called from a thread of breakerbank's,
/// never from inside `bb_admit` or `bb_record` and never with a lock held;
/// one call at a time per bank. Every other function may be called from
/// it, but not `bb_set_listener` or `bb_bank_free` (from inside a callback
/// they return `BB_ERR_INVALID_ARGUMENT` and change nothing: they would
/// wait for the callback itself).
pub type bb_listener_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const bb_event)>;

#[derive(Clone, Copy)]
struct CListener {
    f: unsafe extern "C" fn(*mut c_void, *const bb_event),
    user_data: *mut c_void,
}

// SAFETY: `user_data` is the caller's opaque pointer; `bb_set_listener`'s
// contract makes the caller responsible for it being usable from the thread
// that delivers events (documented there). We never dereference it.
unsafe impl Send for CListener {}

#[derive(Default)]
struct SlotState {
    current: Option<CListener>,
    /// Callbacks running right now (0 or 1: the core delivers in order).
    running: usize,
}

/// The bank's listener, shared with the closure given to `Bank::subscribe`
/// (which may outlive the `bb_bank`).
#[derive(Default)]
pub(crate) struct ListenerSlot {
    state: Mutex<SlotState>,
    idle: Condvar,
    subscribed: OnceLock<()>,
}

thread_local! {
    /// Set while this thread runs a C callback.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

fn in_callback() -> bool {
    IN_CALLBACK.try_with(Cell::get).unwrap_or(false)
}

impl ListenerSlot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // A poisoned lock only means a panic elsewhere; the state is two
        // plain fields that are always consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Installs `f` (with `user_data`) as `bank`'s callback, or clears it
    /// when `f` is `None`, as `bb_set_listener` documents: the core is
    /// subscribed once, on first use, and the previous callback is never
    /// called after this returns.
    pub(crate) fn set(
        self: &Arc<Self>,
        bank: &Bank,
        f: bb_listener_fn,
        user_data: *mut c_void,
    ) -> Result<(), Fail> {
        self.replace(f.map(|f| CListener { f, user_data }))?;
        self.subscribed.get_or_init(|| {
            let shared = Arc::clone(self);
            bank.subscribe(move |e: &Event| shared.deliver(e));
        });
        Ok(())
    }

    /// Clears the callback, as the bank is freed: none is running when this
    /// returns, and none is called afterwards.
    pub(crate) fn clear(&self) -> Result<(), Fail> {
        self.replace(None)
    }

    /// Replaces the callback and waits until no callback is running, so that
    /// the previous one is never called after this returns.
    fn replace(&self, new: Option<CListener>) -> Result<(), Fail> {
        if in_callback() {
            return Err(Fail::arg(
                "cannot change or free a bank's listener from inside its callback",
            ));
        }
        let mut s = self.lock();
        s.current = new;
        while s.running > 0 {
            s = self.idle.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }

    fn deliver(&self, e: &Event) {
        let l = {
            let mut s = self.lock();
            let Some(l) = s.current else { return };
            s.running += 1;
            l
        }; // lock released before calling out
        let from = e.from.map(bb_breaker_state::from);
        let to = e.to.map(bb_breaker_state::from);
        let ev = bb_event {
            kind: match e.kind {
                EventKind::Transition => bb_event_kind::BB_EVENT_TRANSITION,
                EventKind::Reset => bb_event_kind::BB_EVENT_RESET,
                EventKind::ForcedOpen => bb_event_kind::BB_EVENT_FORCED_OPEN,
                EventKind::Stuck => bb_event_kind::BB_EVENT_STUCK,
                EventKind::Reload => bb_event_kind::BB_EVENT_RELOAD,
                EventKind::Trip => bb_event_kind::BB_EVENT_TRIP,
                EventKind::HalfOpen => bb_event_kind::BB_EVENT_HALF_OPEN,
                EventKind::WouldTrip => bb_event_kind::BB_EVENT_WOULD_TRIP,
            },
            dependency: e.dependency.as_ptr().cast(),
            dependency_len: e.dependency.len(),
            partition: e.partition.as_ptr().cast(),
            partition_len: e.partition.len(),
            at_ns: e.at.as_nanos(),
            has_from: from.is_some(),
            from: from.unwrap_or(bb_breaker_state::BB_STATE_CLOSED),
            has_to: to.is_some(),
            to: to.unwrap_or(bb_breaker_state::BB_STATE_CLOSED),
        };
        let _ = IN_CALLBACK.try_with(|c| c.set(true));
        // SAFETY: `f` and `user_data` were given together to
        // `bb_set_listener`, whose contract is that `f` is safe to call with
        // `user_data` from another thread until the listener is replaced or
        // the bank freed — and both of those wait for this call (`running`)
        // before returning. `&ev` and the strings it points into live until
        // the end of this function.
        unsafe { (l.f)(l.user_data, &ev) };
        let _ = IN_CALLBACK.try_with(|c| c.set(false));
        let mut s = self.lock();
        s.running -= 1;
        if s.running == 0 {
            self.idle.notify_all();
        }
    }
}
