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
        self.restart_window(part, permit.generation);
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
        match self.parts() {
            Parts::Global(p) => self.restart_closed(0, p),
            Parts::Tenant(t, shared) => {
                for (slot, part, _) in t.live() {
                    self.restart_closed(slot, part);
                }
                self.restart_closed(0, shared);
            }
        }
    }

    /// A closed breaker's trip was decided on `used`, a tuning a reload
    /// has since replaced with one in observe mode: the reload's restart
    /// may have come before the trip's CAS, so the trip is undone here, as
    /// the restart would have done (C22: observe mode admits every call
    /// from the switch). A trip path, never the healthy one.
    pub(crate) fn tripped_on(&self, used: &Tuning, slot: u32, part: &Partition) {
        if !used.policy.observe && self.inner.tuning().policy.observe {
            self.restart_closed(slot, part);
        }
    }

    /// One partition of [`Dependency::restart_for_mode`]. Every path
    /// writes the word (a closed one with its own value if nothing
    /// changes): a trip decided on the old tuning whose CAS comes after
    /// this write reads it, and so sees the new tuning when it checks
    /// ([`Dependency::tripped_on`]); one whose CAS came first is closed
    /// here. A load alone would let both miss each other.
    fn restart_closed(&self, slot: u32, part: &Partition) {
        loop {
            let w = part.cell.load();
            match w.phase().seen() {
                Phase::Open | Phase::HalfOpen => {
                    let reopened = |w: Word| match w.phase().seen() {
                        Phase::Open | Phase::HalfOpen => machine::reset(w),
                        _ => None,
                    };
                    if let Operated::Done(t) = part.cell.operate(reopened, |_| true) {
                        self.on_transition(slot, part, &t, EventKind::Transition);
                        return;
                    }
                }
                Phase::Closed => {
                    if part.cell.try_replace(w, w.with_count(0)) {
                        self.restart_window(part, w.generation());
                        return;
                    }
                }
                // Forced open (the operator's until a reset), or a slot
                // in a hand-over (no breaker).
                _ => return,
            }
        }
    }

    /// Restarts the failure-rate window of `part`'s closed episode of
    /// `generation`, if it keeps one.
    fn restart_window(&self, part: &Partition, generation: u64) {
        match part.window() {
            Some(window) => window.clear(),
            None => {
                // A tenant slot's window of this episode only: one of a
                // later episode starts empty anyway.
                part.with_episode_window(|window| {
                    if window.episode == generation {
                        window.clear();
                    }
                });
            }
        }
    }
}
