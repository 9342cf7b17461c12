//! Announcements that are due whether or not anyone calls: ended open
//! periods (C14) and stuck episodes (C15).

use crate::clock::Advanced;
use crate::dependency::*;
use crate::events::{Event, EventKind};
use crate::fork::{self, Restart};
use crate::metrics::begins_episode;
use crate::outcome::State;
use crate::partition::Partition;
use crate::state::machine::Transition;
use crate::state::word::Phase;
use crate::sync::append::AppendList;
use crate::sync::{AtomicU64, Ordering, StdArc};
use std::sync::Weak;
use std::time::Duration;

/// A breaker open past its dependency's recovery bound (C15).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// The dependency.
    pub dependency: String,
    /// The partition.
    pub partition: String,
    /// Since the trip that began the episode.
    pub open_for: Duration,
}

/// Announces what must be announced whether or not anyone calls: open
/// periods that have ended (C14) and episodes past their recovery bound
/// (C15). On the system clock a thread, started at the first trip, sweeps
/// every [`SWEEP_EVERY`] and ends when the bank is gone; on a manual clock
/// the sweep runs each time the clock is advanced. Each dependency keeps
/// when it next has something due, so a sweep with nothing due costs a
/// load per dependency.
pub(crate) struct Sweeper {
    /// Every dependency of the bank, those a reload added included.
    /// Lock-free: the sweep thread walking it at a fork leaves the child
    /// nothing held (`crate::fork`).
    pub(crate) deps: AppendList<Weak<DepInner>>,
    /// 0 while no thread sweeps; else 1 + the fork count
    /// ([`fork::epoch`]) the thread was started at. A forked child reads
    /// its parent's thread as gone and starts its own.
    pub(crate) running: AtomicU64,
    pub(crate) manual: bool,
}

/// How often the system clock's sweeper looks (C15 allows one second).
#[cfg(not(loom))]
const SWEEP_EVERY: Duration = Duration::from_millis(250);

impl Sweeper {
    /// Sweeps `deps` too (a new bank's, or those a reload added).
    pub(crate) fn add(&self, deps: &[Dependency]) {
        for d in deps {
            self.deps.push(StdArc::downgrade(&d.inner));
        }
    }

    fn sweep(&self) {
        for d in self.deps.iter() {
            if let Some(inner) = d.upgrade() {
                let d = Dependency { inner };
                // A removed dependency's breakers are no one's concern.
                if !d.is_retired() {
                    d.sweep();
                }
            }
        }
    }

    /// Something may fall due: on the system clock, make sure the thread runs.
    fn wake(self: &StdArc<Self>) {
        if self.manual {
            return;
        }
        let mine = fork::epoch() + 1;
        // Relaxed: one thread is started; a second would only sweep twice.
        let was = self.running.load(Ordering::Relaxed);
        if was == mine || self.running.swap(mine, Ordering::Relaxed) == mine {
            return;
        }
        #[cfg(not(loom))]
        {
            if was == 0 {
                // The first thread: a forked child needs one too, called or not.
                let owner: StdArc<dyn Restart> = self.clone();
                fork::register(StdArc::downgrade(&owner));
            }
            let weak = StdArc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("breakerbank-sweep".into())
                .spawn(move || loop {
                    std::thread::sleep(SWEEP_EVERY);
                    match weak.upgrade() {
                        Some(s) => s.sweep(),
                        None => return,
                    }
                });
            if spawned.is_err() {
                self.running.store(0, Ordering::Relaxed);
            }
        }
    }
}

impl Restart for Sweeper {
    fn restart(self: StdArc<Self>) {
        // Relaxed: as in `wake`. Only a sweeper whose thread ran in the
        // parent needs one here.
        if self.running.load(Ordering::Relaxed) != 0 {
            self.wake();
        }
    }
}

impl Advanced for Sweeper {
    fn advanced(&self) {
        self.sweep();
    }
}

impl Dependency {
    pub(crate) fn on_transition(
        &self,
        slot: u32,
        part: &Partition,
        t: &Transition,
        kind: EventKind,
    ) {
        let inner = &*self.inner;
        let now = inner.clock.now();
        let pin = pin_for(slot);
        if let Some(stats) = self.counters(slot, part, t.generation, &pin) {
            let bound = inner.tuning().config.recovery_bound;
            stats.on_transition(t.from, t.to, now, bound, t.generation);
        }
        drop(pin);
        // Named after the owner the transition happened to; a partition
        // evicted before its transition is announced (reset, closed and
        // taken by a newcomer meanwhile) is not announced: the slot's
        // name now is another tenant's, or none.
        inner.events.emit_some(|| {
            Some(Event {
                kind,
                dependency: inner.name.clone(),
                partition: self.partition_name_at(slot, part, t.generation)?,
                at: now,
                from: Some(State::from_phase(t.from)),
                to: Some(State::from_phase(t.to)),
            })
        });
        // An open period to end, or an episode that may become stuck (an
        // operator's half-open from closed begins one with no open period).
        if t.to == Phase::Open || (t.to == Phase::HalfOpen && begins_episode(t.from, t.to)) {
            self.schedule(slot, part);
            inner.sweeper.wake();
        }
        if let (Phase::Closed, Some(table)) = (t.to, &inner.table) {
            table.note_evictable();
        }
    }

    /// Notes when the sweep next has something to do for `part`: the end
    /// of its open period, or its episode's recovery bound if its stuck
    /// alert is still to come.
    pub(crate) fn schedule(&self, slot: u32, part: &Partition) {
        let w = part.cell.load();
        let mut due = u64::MAX;
        if w.phase() == Phase::Open {
            if let Some(until) = part.cell.open_until(w.generation()) {
                due = until.as_nanos();
            }
        }
        if matches!(w.phase().seen(), Phase::Open | Phase::HalfOpen) {
            let pin = pin_for(slot);
            if let Some(at) = self
                .current_counters(slot, part, &pin)
                .and_then(|s| s.stuck_pending(self.inner.tuning().config.recovery_bound))
            {
                due = due.min(at);
            }
        }
        if due != u64::MAX {
            // Relaxed: a hint for the sweep; each sweep recomputes it.
            self.inner.sweep_due.fetch_min(due, Ordering::Relaxed);
        }
    }

    /// Makes the announcements that are due (see [`Sweeper`]): ends the
    /// open periods that are over, announces stuck episodes.
    pub(crate) fn sweep(&self) {
        let inner = &*self.inner;
        // Relaxed: see `schedule`. Taken before the walk: a trip noted
        // meanwhile is seen by the walk or kept for the next sweep.
        if inner.clock.now().as_nanos() < inner.sweep_due.load(Ordering::Relaxed) {
            return;
        }
        inner.sweep_due.store(u64::MAX, Ordering::Relaxed);
        let policy = &inner.tuning().policy;
        let mut one = |slot: u32, part: &Partition| {
            if let Some(t) = part.cell.expire(policy, &*inner.clock) {
                self.on_transition(slot, part, &t, EventKind::Transition);
            }
            self.check_stuck(slot, part);
            self.schedule(slot, part);
        };
        match self.parts() {
            Parts::Global(p) => one(0, p),
            Parts::Tenant(t, shared) => {
                t.for_each_in_episode(&mut one);
                one(0, shared);
            }
        }
    }

    /// Announces a stuck episode once (C15); true while stuck.
    pub(crate) fn check_stuck(&self, slot: u32, part: &Partition) -> Option<Duration> {
        let inner = &*self.inner;
        let phase = self.phase_now(part);
        if !matches!(phase, Phase::Open | Phase::HalfOpen) {
            return None;
        }
        let pin = pin_for(slot);
        let stats = self.current_counters(slot, part, &pin)?;
        let start = stats.episode_start()?;
        // Coarse: stuck alerts are about minutes, not microseconds.
        let now = self.now_coarse();
        let open_for = now.saturating_duration_since(start);
        let bound = inner.tuning().config.recovery_bound;
        if open_for < bound {
            return None;
        }
        if stats.take_stuck_alert(now, bound) {
            // Named after the owner whose counters raised it.
            inner.events.emit_some(|| {
                Some(Event {
                    kind: EventKind::Stuck,
                    dependency: inner.name.clone(),
                    partition: self.partition_name_at(slot, part, stats.since)?,
                    at: now,
                    from: None,
                    to: Some(State::from_phase(phase)),
                })
            });
        }
        Some(open_for)
    }
}
