//! Recording an outcome (C5, C6, C13): the fast paths (a success that
//! changes nothing, the window's count, a counted failure) and the general
//! path.

use crate::clock::Instant;
use crate::dependency::*;
use crate::events::EventKind;
use crate::metrics::{bump, Flood};
use crate::partition::Partition;
use crate::state::machine::{self, Recorded, Verdict};
use crate::state::word::Phase;
use crate::window::Window;

/// An outcome as the state machine takes it (before `slow_call` may turn
/// a success into a failure).
#[inline(always)]
pub(crate) fn verdict_of(outcome: Outcome) -> Verdict {
    match outcome {
        Outcome::Success => Verdict::Success,
        Outcome::Failure => Verdict::Failure,
        Outcome::Cancelled => Verdict::Cancelled,
    }
}

impl Dependency {
    /// Records an outcome, deciding the healthy case with one load: under
    /// the consecutive policy a success on a closed word with no failures
    /// counted changes nothing (`machine::record`'s `(None, Applied)`).
    #[inline(always)]
    pub(crate) fn record_fast(
        &self,
        raw: PermitData,
        part: Option<&Partition>,
        outcome: Outcome,
    ) -> Outcome {
        if self.changes_nothing_on(raw, part, outcome) {
            self.inner.counts.successes.count();
            return outcome;
        }
        self.record_cold(raw.slot, raw.generation, raw.probe, raw.started_ns, outcome)
    }

    /// Whether recording `outcome` for `raw` would change nothing: a
    /// success under the consecutive policy (no `slow_call`) on a closed
    /// word of its generation with no failures counted. One load.
    #[inline(always)]
    pub(crate) fn changes_nothing(&self, raw: PermitData, outcome: Outcome) -> bool {
        self.changes_nothing_on(raw, None, outcome)
    }

    /// [`Dependency::changes_nothing`] on `part`, the partition `raw.slot`
    /// names, if the caller has it (else it is found by slot).
    #[inline(always)]
    pub(crate) fn changes_nothing_on(
        &self,
        raw: PermitData,
        part: Option<&Partition>,
        outcome: Outcome,
    ) -> bool {
        outcome == Outcome::Success
            && self.inner.fast() & fast::SUCCESS_BY_LOAD != 0
            && part
                .or_else(|| self.partition_by_slot(raw.slot))
                .is_some_and(|part| {
                    machine::record_leaves_word(part.cell.load(), raw.generation, raw.probe)
                })
    }

    /// Whether recording `outcome` with `permit` now would change nothing
    /// at all (no state, no counter, no event): a success under the
    /// consecutive policy (no `slow_call`) on a closed breaker of the
    /// permit's generation with no failures counted. One load.
    ///
    /// [`Dependency::record_raw`] asks exactly this first and returns at
    /// once when it holds, so a binding may skip such a record, and keep
    /// its own exactly-once bookkeeping cheaper for it (the C ABI's
    /// ledger), calling [`Dependency::count_unrecorded_success`] instead
    /// so the call is still counted. The answer is as of the load: the
    /// breaker may change after it.
    ///
    /// ```
    /// # use breakerbank::{Bank, Decision, Outcome, Profile};
    /// # let bank = Bank::new(Profile::from_yaml("dependencies:\n  svc_client:\n    isolation: global\n    trip: {consecutive_failures: 3}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: DOWN}\n    recovery_bound: 5m\n").unwrap());
    /// let svc = bank.dependency("svc_client").unwrap();
    /// let admit = || match svc.admit(None, None).unwrap() {
    ///     Decision::Admitted(p) => p.into_raw(),
    ///     Decision::Rejected(_) => unreachable!(),
    /// };
    /// let (a, b) = (admit(), admit());
    /// assert!(svc.record_changes_nothing(&a, Outcome::Success));
    /// assert!(!svc.record_changes_nothing(&a, Outcome::Failure));
    /// svc.record_raw(a, Outcome::Failure);
    /// // A success would now clear the failure counted.
    /// assert!(!svc.record_changes_nothing(&b, Outcome::Success));
    /// svc.record_raw(b, Outcome::Success);
    /// ```
    #[inline]
    pub fn record_changes_nothing(&self, permit: &RawPermit, outcome: Outcome) -> bool {
        self.changes_nothing(permit.0, outcome)
    }

    /// Counts the success of a permit whose record a binding skipped
    /// because [`Dependency::record_changes_nothing`] held: the record
    /// changes no state, but the call still counts in
    /// `calls_total{outcome="success"}` (C14). No read-modify-write.
    #[inline]
    pub fn count_unrecorded_success(&self) {
        self.inner.counts.successes.count();
    }

    /// Records the outcome of a permit given as plain data (C13).
    ///
    /// A permit of an older generation, or of a partition evicted since,
    /// is counted as late and changes nothing else; a probe permit always
    /// returns its slot. The permit is consumed: recorded once, by its type.
    ///
    /// Returns the outcome as counted: a success at least `slow_call` long
    /// is a failure (C5).
    #[inline]
    pub fn record_raw(&self, permit: RawPermit, outcome: Outcome) -> Outcome {
        self.record_data(permit.0, outcome)
    }

    /// [`Dependency::record_raw`] on the permit's fields.
    #[inline]
    pub(crate) fn record_data(&self, permit: PermitData, outcome: Outcome) -> Outcome {
        if self.changes_nothing(permit, outcome) {
            self.inner.counts.successes.count();
            return outcome;
        }
        self.record_cold(
            permit.slot,
            permit.generation,
            permit.probe,
            permit.started_ns,
            outcome,
        )
    }

    /// Everything but the success that changes nothing, kept out of line so the fast path
    /// before it stays a few instructions in the caller (the C ABI's
    /// `bb_record` included).
    /// (The permit in scalars: passed in registers, so the caller need not
    /// spill it to memory on the fast path just in case.)
    #[inline(never)]
    pub(crate) fn record_cold(
        &self,
        slot: u32,
        generation: u64,
        probe: bool,
        started_ns: u64,
        outcome: Outcome,
    ) -> Outcome {
        // The window's fast path takes the scalars: a `PermitData` built
        // here went through the stack, its slot and probe flag stored
        // apart and read back as one word, which stalled store forwarding
        // on every failure-rate record.
        if self.record_windowed(slot, generation, probe, outcome) {
            return outcome;
        }
        let permit = PermitData {
            slot,
            generation,
            probe,
            started_ns,
        };
        self.record_general(permit, outcome)
    }

    /// [`Dependency::record_cold`] past the failure-rate window's fast
    /// path: a function of its own, so the registers its general path
    /// needs are not saved on the window's every call. (The permit by
    /// value: a spill here costs nothing the fast paths pay.)
    #[inline(never)]
    pub(crate) fn record_general(&self, permit: PermitData, outcome: Outcome) -> Outcome {
        let inner = &*self.inner;
        // A timed call (`slow_call`): its duration, for the histogram and
        // the slow-call rule, from one reading.
        let took = (permit.started_ns != NOT_TIMED).then(|| {
            let took = inner
                .clock
                .now()
                .saturating_duration_since(Instant::from_nanos(permit.started_ns));
            inner.counts.durations.observe(took);
            took
        });
        if self.record_counted(permit, outcome) {
            return outcome;
        }
        // A dependency a reload removed is no longer in force: a permit it
        // issued before is recorded harmlessly, no transition and no event
        // for a dependency the profile no longer has (C20, C16). (Counting
        // a failure above changes nothing anyone reads.)
        if self.is_retired() {
            return outcome;
        }
        let Some(part) = self.partition_by_slot(permit.slot) else {
            return outcome;
        };
        // One tuning for the whole record (C20).
        let tuning = inner.tuning();
        let mut verdict = verdict_of(outcome);
        // C10: a call that ran `slow_call` is a slow failure, whether it
        // returned or was given up (a dependency that hangs trips).
        if let (Verdict::Success | Verdict::Cancelled, Some(slow), Some(took)) =
            (verdict, tuning.config.slow_call, took)
        {
            if took >= slow {
                verdict = Verdict::Failure;
            }
        }
        let mut trip = false;
        if let (Some((rate, min_calls)), false, false) =
            (tuning.rate, permit.probe, verdict == Verdict::Cancelled)
        {
            let w = part.cell.load();
            if w.phase() == Phase::Closed && w.generation() == permit.generation {
                let judge = |window: &Window| {
                    // A bucket is window / 10 wide: a coarse reading picks
                    // it well enough once buckets are ≥ 10 ms.
                    let now = if window.coarse_ok() {
                        self.now_coarse()
                    } else {
                        inner.clock.now()
                    }
                    .as_nanos();
                    window.record_and_judge(now, verdict == Verdict::Failure, rate, min_calls)
                };
                trip = match part.window() {
                    Some(window) => judge(window),
                    // A tenant slot's window of this permit's episode, or
                    // none: a window of a later episode (the word moved on
                    // since the load above) is not this record's to count
                    // in; the cell then finds the record late.
                    None => part
                        .with_episode_window(|window| {
                            window.episode == permit.generation && judge(window)
                        })
                        .unwrap_or(false),
                };
            }
        }
        self.apply(tuning, permit, part, verdict, trip)
    }

    /// A closed global failure-rate breaker's success or failure, counted
    /// in the window and judged without the cell's CAS loop. That is what
    /// the general path comes to for a closed word of the permit's
    /// generation with no count (the rate policy keeps none there):
    /// `machine::record` changes nothing unless the window trips, and a
    /// trip goes on through the cell. True when recorded.
    #[inline]
    pub(crate) fn record_windowed(
        &self,
        slot: u32,
        generation: u64,
        probe: bool,
        outcome: Outcome,
    ) -> bool {
        let inner = &*self.inner;
        if inner.fast() & fast::COARSE_WINDOW == 0 || slot != 0 || probe {
            return false;
        }
        let tuning = inner.tuning();
        let verdict = verdict_of(outcome);
        if verdict == Verdict::Cancelled {
            return false;
        }
        let part = &*inner.shared;
        let (Some((rate, min_calls)), Some(window)) = (tuning.rate, part.window()) else {
            return false;
        };
        if !machine::record_leaves_word(part.cell.load(), generation, probe) {
            return false;
        }
        let failed = verdict == Verdict::Failure;
        if window.record_and_judge(self.now_coarse().as_nanos(), failed, rate, min_calls) {
            let permit = PermitData {
                slot,
                generation,
                probe,
                started_ns: NOT_TIMED,
            };
            let _ = self.apply(tuning, permit, part, verdict, true);
        } else if failed {
            inner.shared_stats.count_flood(Flood::Failure);
        } else {
            inner.counts.successes.count();
        }
        true
    }

    /// A failure the consecutive policy only counts
    /// ([`machine::count_failure`]), installed by one CAS instead of the
    /// cell's loop; a lost race goes the general way. True when recorded.
    #[inline]
    pub(crate) fn record_counted(&self, permit: PermitData, outcome: Outcome) -> bool {
        if outcome != Outcome::Failure || permit.probe {
            return false;
        }
        let Some(part) = self.partition_by_slot(permit.slot) else {
            return false;
        };
        let w = part.cell.load();
        let policy = &self.inner.tuning().policy;
        let Some(next) = machine::count_failure(w, policy, permit.generation) else {
            return false;
        };
        if !part.cell.try_replace(w, next) {
            return false;
        }
        let pin = pin_for(permit.slot);
        if let Some(stats) = self.counters(permit.slot, part, permit.generation, &pin) {
            stats.count_flood(Flood::Failure);
        }
        self.touch_failed(permit.slot, part);
        true
    }

    /// A permit whose call never ran, the caller's mistake found after
    /// admission (C17): its probe slot is given back, nothing is counted.
    pub(crate) fn withdraw(&self, permit: PermitData) {
        let inner = &*self.inner;
        let Some(part) = self.partition_by_slot(permit.slot) else {
            return;
        };
        let r = part.cell.record(
            &inner.tuning().policy,
            &*inner.clock,
            permit.generation,
            permit.probe,
            Verdict::Cancelled,
            false,
        );
        if let (true, Some(table)) = (permit.probe, &inner.table) {
            table.note_evictable();
        }
        if let Recorded::Transition(t) = r {
            self.on_transition(permit.slot, part, &t, EventKind::Transition);
        }
    }

    /// Ranks a tenant partition that just counted a failure for LRU
    /// eviction: its side part, where the tick lives, exists by now.
    pub(crate) fn touch_failed(&self, slot: u32, part: &Partition) {
        if let (Some(t), true) = (&self.inner.table, slot != 0) {
            part.touch(|| t.tick());
        }
    }

    /// The cell's part of a record, after the window's: the word's change,
    /// the counters, the transition's event.
    pub(crate) fn apply(
        &self,
        tuning: &Tuning,
        permit: PermitData,
        part: &Partition,
        verdict: Verdict,
        trip: bool,
    ) -> Outcome {
        let inner = &*self.inner;
        let r = part.cell.record(
            &tuning.policy,
            &*inner.clock,
            permit.generation,
            permit.probe,
            verdict,
            trip,
        );
        let pin = pin_for(permit.slot);
        let stats = || self.counters(permit.slot, part, permit.generation, &pin);
        match r {
            Recorded::Late => {
                // A slot that changed owner since the permit was issued
                // (or has none) counts it with the dependency's overflow
                // partition, which lists it.
                bump(&stats().unwrap_or(&inner.shared_stats).late_records_total);
                // A returned probe slot can leave a closed partition with
                // none in flight: evictable again.
                if let (true, Some(table)) = (permit.probe, &inner.table) {
                    table.note_evictable();
                }
            }
            Recorded::Applied | Recorded::Transition(_) | Recorded::WouldTrip => match verdict {
                Verdict::Failure => {
                    if let Some(s) = stats() {
                        s.count_flood(Flood::Failure);
                    }
                    self.touch_failed(permit.slot, part);
                }
                Verdict::Cancelled => {
                    if let Some(s) = stats() {
                        bump(&s.cancelled_total);
                    }
                }
                Verdict::Success => inner.counts.successes.count(),
            },
        }
        if r == Recorded::WouldTrip {
            self.would_trip(permit, part, stats());
        }
        drop(pin);
        if let Recorded::Transition(t) = r {
            self.on_transition(permit.slot, part, &t, EventKind::Transition);
            if t.from == Phase::Closed {
                self.tripped_on(tuning, permit.slot, part);
            }
        }
        match verdict {
            Verdict::Success => Outcome::Success,
            Verdict::Failure => Outcome::Failure,
            Verdict::Cancelled => Outcome::Cancelled,
        }
    }
}
