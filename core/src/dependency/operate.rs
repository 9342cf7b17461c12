//! Operator actions (C11, C19), state reads, inspection (C18) and snapshots.

use crate::clock::Instant;
use crate::dependency::*;
use crate::events::{Event, EventKind};
use crate::fallback::PartitionName;
use crate::metrics::{DependencyMetrics, PartitionMetrics};
use crate::outcome::State;
use crate::partition::{Owner, Partition, GLOBAL, NO_OWNER, OVERFLOW};
use crate::state::cell::Operated;
use crate::state::machine;
use crate::state::word::{Phase, Word};
use std::time::Duration;

/// One breaker as [`Dependency::inspect`] read it (C18): every field from
/// one load of its word, the open-until and counters beside it.
///
/// ```
/// use breakerbank::{Bank, ManualClock, Profile, State};
/// use std::time::Duration;
///
/// let profile = Profile::from_yaml(
///     "dependencies:
///   payments_client:
///     isolation: global
///     trip: {consecutive_failures: 2}
///     open_duration: 30s
///     half_open: {probe_budget: 1, success_threshold: 1}
///     fallback: {kind: error, code: PAY_DOWN}
///     recovery_bound: 5m
/// ",
/// )?;
/// let clock = ManualClock::new();
/// let bank = Bank::with_clock(profile, clock.clone());
/// let dep = bank.dependency("payments_client").unwrap();
/// let failing = || dep.call(None, None, || Err::<(), _>("timeout"));
/// let _ = failing();
/// assert_eq!(dep.inspect(None)?.consecutive_failures, 1);
///
/// clock.advance(Duration::from_secs(5));
/// let _ = failing();
/// let seen = dep.inspect(None)?;
/// assert_eq!(seen.state, State::Open);
/// assert_eq!(seen.since, bank.now(), "the trip began the episode");
/// assert_eq!(seen.retry_after, Some(Duration::from_secs(30)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// The state an admission would find now: an open breaker whose open
    /// period has ended reads [`State::HalfOpen`] (C14).
    pub state: State,
    /// Closed: failures counted toward the trip. Under
    /// `consecutive_failures` the consecutive failures since the last
    /// success; under `failure_rate`, which keeps no consecutive count,
    /// the failures in the current window (the ones its rate is taken
    /// over). 0 in every other state.
    pub consecutive_failures: u32,
    /// Half-open: successful probes of this half-open episode (C8); 0 in
    /// every other state.
    pub half_open_successes: u32,
    /// Probe permits holding a slot, those of earlier half-open episodes
    /// not yet recorded included (C7).
    pub probes_in_flight: u32,
    /// Re-trips from half-open since the last close (the backoff exponent,
    /// C6).
    pub retrips: u32,
    /// When the current episode began, on the bank's clock: for open and
    /// half-open the trip (or operator half-open) that left closed, re-trips
    /// not counted; for forced open the force; for closed the last close or
    /// reset. A partition that has seen no transition (an unseen or evicted
    /// tenant's included) reads the start of the bank's clock (`Instant` 0:
    /// the bank's creation on the default clock). Recorded on
    /// transitions only, just after their compare-and-swap: a reader racing
    /// one can see the state it made with the previous `since`.
    pub since: Instant,
    /// Open: the time until the breaker next admits a probe. `None` in
    /// every other state (forced open included: it waits for a reset).
    pub retry_after: Option<Duration>,
    /// Closed under `failure_rate`: the calls in the current window, the
    /// ones its rate is taken over (C5). 0 under `consecutive_failures`,
    /// which keeps no window, and in every other state.
    pub window_calls: u32,
    /// Closed under `failure_rate`: the failures among
    /// [`window_calls`](Self::window_calls). 0 otherwise.
    pub window_failures: u32,
}

/// What an operator can do to a breaker (C11, C19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Closed, counts cleared: `reset`.
    Reset,
    /// Isolated until a reset: `force_open`.
    ForceOpen,
    /// Opened now, for the open period: `trip`.
    Trip,
    /// A probe cycle started now: `half_open`.
    HalfOpen,
}

impl Action {
    /// The event the action is announced as.
    fn event(self) -> EventKind {
        match self {
            Action::Reset => EventKind::Reset,
            Action::ForceOpen => EventKind::ForcedOpen,
            Action::Trip => EventKind::Trip,
            Action::HalfOpen => EventKind::HalfOpen,
        }
    }
}

impl Dependency {
    /// The state of a partition (C11); an unseen or evicted tenant reads as
    /// a fresh partition (forced open after a dependency-wide force), and
    /// asking never creates one.
    pub fn state(&self, tenant: Option<&str>) -> Result<State, AdmitError> {
        let tenant = self.tenant(tenant)?;
        Ok(match self.own_word(tenant) {
            Some((_, part, w)) => State::from_phase(self.phase_of(part, w)),
            None => match self.served_by_overflow(tenant) {
                Some(o) => State::from_phase(self.phase_now(o)),
                None => self.fresh_state(tenant),
            },
        })
    }

    /// The overflow partition, when it is what serves `tenant`, a tenant
    /// with no partition of its own: the table is full of partitions that
    /// cannot be evicted (C9), and no force of its own is waiting for it.
    /// What `state` and `inspect` then read (C14, C18).
    fn served_by_overflow(&self, tenant: Option<&str>) -> Option<&Partition> {
        match (self.parts(), tenant) {
            (Parts::Tenant(t, shared), Some(name)) if t.known_full() && !t.starts_forced(name) => {
                Some(shared)
            }
            _ => None,
        }
    }

    /// The partition `tenant` has (the global one for a global
    /// dependency), with a word of its own: the slot can pass to another
    /// tenant between the lookup and the load, and then the lookup is
    /// made again. `None` when the tenant has no partition.
    fn own_word(&self, tenant: Option<&str>) -> Option<(u32, &Partition, Word)> {
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => Some((0, p, p.cell.load())),
            (Parts::Tenant(t, _), Some(name)) => loop {
                let r = t.lookup(name)?;
                let w = r.part.cell.load();
                if r.part.owned_by(w, r.owner) {
                    return Some((r.slot, r.part, w));
                }
            },
            (Parts::Tenant(..), None) => None,
        }
    }

    /// The state of a tenant with no partition: a fresh one's, forced
    /// open after a dependency-wide force.
    fn fresh_state(&self, tenant: Option<&str>) -> State {
        match (self.parts(), tenant) {
            (Parts::Tenant(t, _), Some(name)) if t.starts_forced(name) => State::ForcedOpen,
            _ => State::Closed,
        }
    }

    /// One breaker's state, counters and episode (C18); see [`Inspection`].
    /// Reads, never changes: an unseen or evicted tenant reads as a fresh
    /// partition (forced open after a dependency-wide force) and asking
    /// never creates one; the end of an open period is reported, not made.
    /// Tenant rules as for [`admit`](Self::admit).
    pub fn inspect(&self, tenant: Option<&str>) -> Result<Inspection, AdmitError> {
        let tenant = self.tenant(tenant)?;
        Ok(match self.own_word(tenant) {
            Some((slot, part, w)) => self.inspect_word(slot, part, w),
            None if self.served_by_overflow(tenant).is_some() => {
                let o = &*self.inner.shared;
                self.inspect_word(0, o, o.cell.load())
            }
            None => Inspection {
                state: self.fresh_state(tenant),
                consecutive_failures: 0,
                half_open_successes: 0,
                probes_in_flight: 0,
                retrips: 0,
                since: Instant::from_nanos(0),
                retry_after: None,
                window_calls: 0,
                window_failures: 0,
            },
        })
    }

    /// [`inspect`](Self::inspect) of the partition at `slot` on its word
    /// `w` (see `own_word`).
    fn inspect_word(&self, slot: u32, part: &Partition, w: Word) -> Inspection {
        let inner = &*self.inner;
        let policy = self.policy();
        let now = inner.clock.now();
        let (state, retry_after) = match w.phase() {
            Phase::Open => match part.cell.open_until(w.generation()) {
                Some(until) => match machine::still_open(until, now) {
                    Some(left) => (State::Open, Some(left)),
                    None => (State::HalfOpen, None),
                },
                // The trip is being published: its whole period is ahead.
                None => (State::Open, Some(policy.open_duration_for(w.trips()))),
            },
            p => (State::from_phase(p.seen()), None),
        };
        // The failure-rate window of the closed episode of `w`, read once
        // (one sum of its buckets): (calls, failures).
        let window = match (state, policy.consecutive_failures) {
            (State::Closed, None) => {
                let totals = |win: &crate::window::Window| win.totals(now.as_nanos());
                match part.window() {
                    Some(win) => totals(win),
                    // A tenant slot's window of this closed episode, if any.
                    None => part
                        .with_episode_window(|win| {
                            (win.episode == w.generation()).then(|| totals(win))
                        })
                        .flatten()
                        .unwrap_or((0, 0)),
                }
            }
            _ => (0, 0),
        };
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let consecutive_failures = match (state, policy.consecutive_failures) {
            (State::Closed, Some(_)) => w.count(),
            (State::Closed, None) => narrow(window.1),
            _ => 0,
        };
        let pin = pin_for(slot);
        let since = self
            .current_counters(slot, part, &pin)
            .and_then(|s| s.began())
            .unwrap_or(Instant::from_nanos(0));
        Inspection {
            state,
            consecutive_failures,
            half_open_successes: if state == State::HalfOpen {
                w.count()
            } else {
                0
            },
            probes_in_flight: w.probes(),
            retrips: w.trips(),
            since,
            retry_after,
            window_calls: narrow(window.0),
            window_failures: narrow(window.1),
        }
    }

    /// The phase an admission would find now (C14): an open partition
    /// whose period has ended reads half-open, before any admission makes
    /// the transition.
    pub(crate) fn phase_now(&self, part: &Partition) -> Phase {
        self.phase_of(part, part.cell.load())
    }

    /// [`Dependency::phase_now`] of the word `w` the caller read.
    pub(crate) fn phase_of(&self, part: &Partition, w: Word) -> Phase {
        match (w.phase(), part.cell.open_until(w.generation())) {
            (Phase::Open, Some(until))
                if machine::still_open(until, self.inner.clock.now()).is_none() =>
            {
                Phase::HalfOpen
            }
            (phase, _) => phase.seen(),
        }
    }

    /// An operator action (C11, C19) on one partition or, with no tenant,
    /// on every partition; announced as the action's event.
    pub(crate) fn operate(&self, tenant: Option<&str>, action: Action) -> Result<(), AdmitError> {
        let kind = action.event();
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            // No tenant: every partition.
            Err(AdmitError::TenantRequired) => None,
            Err(e) => return Err(e),
        };
        let inner = &*self.inner;
        let policy = self.policy();
        // A trip's open period runs from the action.
        let now = inner.clock.now();
        let transition = |w: Word| match action {
            Action::ForceOpen => machine::force_open(w),
            Action::Trip => machine::trip(w, now, policy),
            Action::HalfOpen => machine::half_open(w, policy),
            Action::Reset => machine::reset(w),
        };
        // What the action did; `Lost` when the slot changed owner between
        // the lookup and the CAS.
        let apply = |slot: u32, part: &Partition, owner: Owner| -> Operated {
            let r = part.cell.operate(transition, |w| part.owned_by(w, owner));
            if let Operated::Done(t) = r {
                self.on_transition(slot, part, &t, kind);
            }
            r
        };
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => {
                apply(0, p, NO_OWNER);
            }
            (Parts::Tenant(t, _), Some(name)) if action == Action::ForceOpen => loop {
                // Forcing a tenant open isolates that tenant alone: its own
                // partition, made if need be. Resolved again if its slot
                // changes owner under the action (each such loss is another
                // thread's progress).
                let target = self.target(Some(name));
                if target.overflow {
                    // No room for it: remembered, refused from the overflow
                    // and forced when it gets a partition; never the shared
                    // overflow partition (that would isolate innocent tenants).
                    t.force_unplaced(name);
                    // An insert of this tenant racing the action reads the
                    // mark after publishing itself (`Table::settle_forced`)
                    // or is found here, after the mark's fence.
                    if let Some(r) = t.lookup(name) {
                        if apply(r.slot, r.part, r.owner) == Operated::Lost {
                            continue;
                        }
                        return Ok(());
                    }
                    self.announce(kind, name.to_string(), State::Closed, State::ForcedOpen);
                    return Ok(());
                }
                if apply(target.slot, target.part, target.owner) != Operated::Lost {
                    t.forget_override(name);
                    return Ok(());
                }
            },
            (Parts::Tenant(..), Some(name)) if action != Action::Reset => loop {
                // A trip or half-open of one tenant acts on its own
                // partition, made if need be (an unseen tenant's is a
                // fresh one), resolved again as for a force. With no room
                // for it nothing is done: the shared overflow partition
                // serves other tenants too.
                let target = self.target(Some(name));
                if target.overflow
                    || apply(target.slot, target.part, target.owner) != Operated::Lost
                {
                    return Ok(());
                }
            },
            (Parts::Tenant(t, _), Some(name)) => {
                // Recorded first, so that a partition t gets from here on
                // (an insert racing this reset included, by the fence in
                // `set_override` and `Table::settle_forced`'s) starts closed.
                let before = self.fresh_state(Some(name));
                t.reset_one(name);
                // Evicted before the CAS: fresh, which a reset makes; held
                // by a racing insert: it settles closed by the rule above.
                let done = t
                    .lookup(name)
                    .is_some_and(|r| matches!(apply(r.slot, r.part, r.owner), Operated::Done(_)));
                if !done {
                    // Recorded as an event all the same (C11, C16), as a
                    // force of a tenant with no partition is: it may end
                    // that force.
                    self.announce(kind, name.to_string(), before, State::Closed);
                }
            }
            (Parts::Tenant(t, shared), None) => {
                // An insert racing this walk sees the new rule or is seen
                // by the walk (`Table::settle_forced`). A trip or half-open
                // leaves no rule: it acts on the partitions there are.
                if matches!(action, Action::Reset | Action::ForceOpen) {
                    t.operate_all(action == Action::ForceOpen);
                }
                for (slot, part, _) in t.live() {
                    apply(slot, part, NO_OWNER);
                }
                // `<overflow>` is reset with the rest but never forced: it
                // also serves tenants reset one by one while the force
                // holds; the others it refuses by `Table::starts_forced`.
                // It is tripped or made half-open with the rest once it
                // has served anyone (when the snapshot lists it).
                // Judged by the admissions it took, not by its word (a
                // reset gives it a new generation) or counters a reset
                // leaves behind (C19).
                let in_use = || {
                    // Relaxed: a count; an admission racing the action may
                    // or may not see it.
                    inner
                        .shared_stats
                        .partition_overflow_total
                        .load(std::sync::atomic::Ordering::Relaxed)
                        != 0
                };
                if action == Action::Reset
                    || (matches!(action, Action::Trip | Action::HalfOpen) && in_use())
                {
                    apply(0, shared, NO_OWNER);
                }
                // Announced once as an action on every partition, those
                // that do not exist yet included (C11, C16).
                let at = inner.clock.now();
                let to = match action {
                    Action::ForceOpen => State::ForcedOpen,
                    Action::Trip => State::Open,
                    Action::HalfOpen => State::HalfOpen,
                    Action::Reset => State::Closed,
                };
                inner.events.emit(|| Event {
                    kind,
                    dependency: inner.name.clone(),
                    partition: "*".to_string(),
                    at,
                    from: None,
                    to: Some(to),
                });
            }
        }
        Ok(())
    }

    /// An operator action's event for a tenant that has no partition:
    /// from the state it read as, to the one the action gives it.
    pub(crate) fn announce(&self, kind: EventKind, partition: String, from: State, to: State) {
        let inner = &*self.inner;
        let at = inner.clock.now();
        inner.events.emit(|| Event {
            kind,
            dependency: inner.name.clone(),
            partition,
            at,
            from: Some(from),
            to: Some(to),
        });
    }

    /// Forces a partition closed: new generation, counters cleared (C11).
    /// `None` (or `Some("")`) on a tenant-scoped dependency resets every
    /// partition and ends a dependency-wide `force_open`. A tenant id
    /// longer than [`MAX_TENANT_LEN`] bytes names no partition: nothing is
    /// done ([`try_reset`](Self::try_reset) says so).
    pub fn reset(&self, tenant: Option<&str>) {
        let _ = self.try_reset(tenant);
    }

    /// [`reset`](Self::reset), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_reset(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, Action::Reset)
    }

    /// Isolates a partition until [`reset`](Self::reset) (C11). `None` (or
    /// `Some("")`) on a tenant-scoped dependency isolates every partition,
    /// including tenants first seen afterwards. A tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes names no partition: nothing is done (and
    /// nothing created; [`try_force_open`](Self::try_force_open) says so).
    pub fn force_open(&self, tenant: Option<&str>) {
        let _ = self.try_force_open(tenant);
    }

    /// [`force_open`](Self::force_open), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_force_open(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, Action::ForceOpen)
    }

    /// Opens a breaker as if its trip policy had fired (C19): new
    /// generation, the open period (and backoff) of the profile, then the
    /// probe cycle of C7 and C8; unlike [`force_open`](Self::force_open) it
    /// ends by itself. From half-open it is a re-trip (the backoff grows);
    /// on an open breaker the open period restarts from now; a forced-open
    /// breaker stays forced (only a reset ends a force). Counted in
    /// `opened_total` and announced as [`EventKind::Trip`].
    ///
    /// `None` (or `Some("")`) on a tenant-scoped dependency trips every
    /// partition there is (`<overflow>` too once it has served anyone);
    /// tenants first seen afterwards start closed. One tenant's partition
    /// is made if it has none (nothing is done if the table has no room
    /// for it). A tenant id longer than [`MAX_TENANT_LEN`] bytes names no
    /// partition: nothing is done ([`try_trip`](Self::try_trip) says so).
    ///
    /// ```
    /// # use breakerbank::{Bank, ManualClock, Profile, State};
    /// # use std::time::Duration;
    /// # let bank = Bank::with_clock(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap(), ManualClock::new());
    /// let svc = bank.dependency("svc_client").unwrap();
    /// svc.trip(None);
    /// assert_eq!(svc.state(None).unwrap(), State::Open);
    /// bank.manual_clock().unwrap().advance(Duration::from_secs(30));
    /// assert_eq!(svc.state(None).unwrap(), State::HalfOpen, "it ends by itself");
    /// ```
    pub fn trip(&self, tenant: Option<&str>) {
        let _ = self.try_trip(tenant);
    }

    /// [`trip`](Self::trip), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_trip(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, Action::Trip)
    }

    /// Starts a probe cycle now (C19): half-open, new generation, at most
    /// `probe_budget` probes, `success_threshold` successes to close (C7,
    /// C8). On an open breaker the open period ends early; on a closed one
    /// full traffic waits for the probes; a half-open breaker is left in
    /// the cycle it is in, and a forced-open one stays forced (only a
    /// reset ends a force). Counted in `half_opened_total` and announced
    /// as [`EventKind::HalfOpen`]. Tenant rules as for [`trip`](Self::trip).
    pub fn half_open(&self, tenant: Option<&str>) {
        let _ = self.try_half_open(tenant);
    }

    /// [`half_open`](Self::half_open), refusing a tenant id longer than
    /// [`MAX_TENANT_LEN`] bytes with [`AdmitError::InvalidTenant`] (C9).
    pub fn try_half_open(&self, tenant: Option<&str>) -> Result<(), AdmitError> {
        self.operate(tenant, Action::HalfOpen)
    }

    pub(crate) fn resolve_existing<'t>(
        &self,
        tenant: Option<&'t str>,
    ) -> (u32, &Partition, PartitionName<'t>, u64) {
        match (self.parts(), tenant) {
            (Parts::Global(p), _) => (0, p, PartitionName::Global, 0),
            (Parts::Tenant(t, shared), Some(name)) => match t.lookup(name) {
                Some(r) => (
                    r.slot,
                    r.part,
                    PartitionName::Tenant(name),
                    r.owner.generation,
                ),
                None => (0, shared, PartitionName::Overflow, 0),
            },
            (Parts::Tenant(_, shared), None) => (0, shared, PartitionName::Overflow, 0),
        }
    }

    /// The partition that serves a tenant just admitted or rejected: the
    /// tenant id, `global`, or `<overflow>` when the tenant is not in the
    /// table (C9), as for a missing tenant or one longer than
    /// [`MAX_TENANT_LEN`] bytes, which no partition is named after.
    /// Read-only: never creates a partition.
    pub fn partition_of(&self, tenant: Option<&str>) -> String {
        self.partition_name(tenant).as_str().to_owned()
    }

    /// [`partition_of`](Self::partition_of), borrowed.
    pub(crate) fn partition_name<'t>(&self, tenant: Option<&'t str>) -> PartitionName<'t> {
        let tenant = self.tenant(tenant).ok().flatten();
        self.resolve_existing(tenant).2
    }

    /// The partition a call for `tenant` would be served by, by name,
    /// without touching the table: the tenant's own (whether or not it has
    /// one yet), `global`, or `<overflow>` when the table is known to be
    /// full of partitions that cannot be evicted (or the tenant is missing
    /// or invalid). What an expired deadline's error names (C10): such a
    /// call never reaches a partition.
    pub fn breaker_of(&self, tenant: Option<&str>) -> String {
        match (self.parts(), self.tenant(tenant)) {
            (Parts::Global(_), _) => GLOBAL.to_string(),
            (Parts::Tenant(t, _), Ok(Some(name))) => {
                if t.lookup(name).is_none() && t.known_full() {
                    OVERFLOW.to_string()
                } else {
                    name.to_string()
                }
            }
            (Parts::Tenant(..), _) => OVERFLOW.to_string(),
        }
    }

    pub(crate) fn snapshot(&self, now: Instant) -> DependencyMetrics {
        let inner = &*self.inner;
        let bound = inner.tuning().config.recovery_bound;
        // Before the partitions: see `DepCounts::totals`.
        let gone = inner
            .table
            .as_ref()
            .map(|t| PartitionMetrics::gone(&t.gone));
        let mut partitions = Vec::new();
        let read = |slot: u32, part: &Partition, name: String| {
            self.check_stuck(slot, part);
            PartitionMetrics::new(
                name,
                self.phase_now(part),
                self.current_counters(slot, part, &pin_for(slot)),
                now,
                bound,
            )
        };
        match self.parts() {
            Parts::Global(p) => partitions.push(read(0, p, GLOBAL.to_string())),
            Parts::Tenant(t, o) => {
                for (slot, part, key, since) in t.live_tenures() {
                    let m = read(slot, part, key.to_string());
                    // A slot that changed owner while it was read is left
                    // out: what was read may be the new owner's, under the
                    // old owner's name (the next snapshot lists it).
                    if t.tenure(slot) == since {
                        partitions.push(m);
                    }
                }
                // Listed once something happened to it (its side part is
                // made with it, counters and all).
                if !inner.shared_stats.is_clear() || o.cell.load() != Word::FRESH {
                    partitions.push(read(0, o, OVERFLOW.to_string()));
                }
            }
        }
        let timed = inner.tuning().config.slow_call.is_some();
        DependencyMetrics {
            name: inner.name.clone(),
            totals: inner.counts.totals(&partitions, gone, timed),
            partitions,
        }
    }

    pub(crate) fn stuck_list(&self, out: &mut Vec<Stuck>) {
        let mut push = |name: String, open_for: Option<Duration>| {
            if let Some(open_for) = open_for {
                out.push(Stuck {
                    dependency: self.inner.name.clone(),
                    partition: name,
                    open_for,
                });
            }
        };
        match self.parts() {
            Parts::Global(p) => push(GLOBAL.to_string(), self.check_stuck(0, p)),
            Parts::Tenant(t, shared) => {
                for (slot, part, key, since) in t.live_tenures() {
                    let open_for = self.check_stuck(slot, part);
                    // As in `snapshot`: a slot that changed owner while it
                    // was read is left out.
                    if t.tenure(slot) == since {
                        push(key.to_string(), open_for);
                    }
                }
                push(OVERFLOW.to_string(), self.check_stuck(0, shared));
            }
        }
    }
}
