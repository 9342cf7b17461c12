//! Observe mode (C22): the trip policy is judged as usual, but when it
//! fires the breaker stays closed and the firing is counted
//! (`would_trip_total`) and announced (a `would_trip` event); a reload
//! that switches the mode starts the dependency's breakers closed.
//!
//! The invariant: observe mode costs the healthy path nothing. The state
//! machine reads the mode only where a closed breaker's trip is decided
//! (`machine::record`'s trip), and what happens next lives here.

use crate::dependency::*;
use crate::events::{Event, EventKind};
use crate::metrics::bump;
use crate::partition::Partition;
use crate::state::cell::Operated;
use crate::state::machine;
use crate::state::word::{Phase, Word};

impl Dependency {
    /// The trip policy fired in observe mode (C22) and the word stayed
    /// closed, its count restarted: the failure-rate window restarts too
    /// (as a close clears it), and the would-trip is counted and
    /// announced. Reached only from a trip decision, never from the
    /// healthy path.
    #[cold]
    pub(crate) fn would_trip(&self, permit: PermitData, part: &Partition, stats: Option<&Stats>) {
        let inner = &*self.inner;
        match part.window() {
            Some(window) => window.clear(),
            None => {
                // A tenant slot's window of this episode only: one of a
                // later episode starts empty anyway.
                part.with_episode_window(|window| {
                    if window.episode == permit.generation {
                        window.clear();
                    }
                });
            }
        }
        if let Some(s) = stats {
            bump(&s.would_trip_total);
        }
        let at = inner.clock.now();
        inner.events.emit_some(|| {
            Some(Event {
                kind: EventKind::WouldTrip,
                dependency: inner.name.clone(),
                partition: self.partition_name_at(permit.slot, part, permit.generation)?,
                at,
                from: None,
                to: None,
            })
        });
    }

    /// A reload switched the mode (C22): every partition starts closed
    /// with its counts restarted (the failure-rate window included), so
    /// observe mode admits every call from the switch and enforce mode
    /// trips only on what it counted itself. An open or half-open
    /// breaker is closed as a reset closes it (new generation, its probes'
    /// records late) and announced as a transition; a closed one keeps
    /// its generation, so its calls in flight still count. A forced-open
    /// breaker stays forced: the operator's isolation lasts until a reset
    /// (C11).
    pub(crate) fn restart_for_mode(&self) {
        let restart = |slot: u32, part: &Partition| {
            let reopened = |w: Word| match w.phase().seen() {
                Phase::Open | Phase::HalfOpen => machine::reset(w),
                _ => None,
            };
            if let Operated::Done(t) = part.cell.operate(reopened, |_| true) {
                self.on_transition(slot, part, &t, EventKind::Transition);
                return;
            }
            let mut w = part.cell.load();
            while w.phase() == Phase::Closed && w.count() != 0 {
                if part.cell.try_replace(w, w.with_count(0)) {
                    break;
                }
                w = part.cell.load();
            }
            if w.phase() != Phase::Closed {
                return;
            }
            match part.window() {
                Some(window) => window.clear(),
                None => {
                    part.with_episode_window(|window| {
                        if window.episode == w.generation() {
                            window.clear();
                        }
                    });
                }
            }
        };
        match self.parts() {
            Parts::Global(p) => restart(0, p),
            Parts::Tenant(t, shared) => {
                for (slot, part, _) in t.live() {
                    restart(slot, part);
                }
                restart(0, shared);
            }
        }
    }
}
