//! Admission (C7, C10, C12): the fast paths on one load of the word, and
//! the general path through the cell.

use crate::clock::Instant;
use crate::dependency::*;
use crate::events::EventKind;
use crate::metrics::{bump, Flood};
use crate::partition::Partition;
use crate::state::machine::{self, Admission, Refusal};
use crate::state::word::{Phase, Word};
use crate::sync::Ordering;
use crate::table::Table;

impl Dependency {
    /// Asks to make one call (C7, C10, C12).
    ///
    /// On a closed breaker this is one atomic load (plus the tenant lookup
    /// for tenant-scoped dependencies); it reads the clock only for a
    /// deadline, a `slow_call` policy, or an open breaker.
    ///
    /// ```
    /// use breakerbank::{Bank, Decision, Outcome, Profile};
    /// let bank = Bank::new(Profile::from_yaml(r#"
    /// dependencies:
    ///   payments_client:
    ///     isolation: tenant
    ///     trip: {consecutive_failures: 5}
    ///     open_duration: 30s
    ///     half_open: {probe_budget: 2, success_threshold: 3}
    ///     fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    ///     recovery_bound: 5m
    /// "#).unwrap());
    /// let payments = bank.dependency("payments_client").unwrap();
    /// match payments.admit(Some("acme"), None).unwrap() {
    ///     Decision::Admitted(permit) => permit.record(Outcome::Success),
    ///     Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
    /// };
    /// ```
    #[inline(always)]
    pub fn admit(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<Decision<'_>, AdmitError> {
        // A global breaker's common cases come from one load of its word,
        // decided by `machine::admits_closed` and, for an open word,
        // `machine::refuses_open`; a known tenant's the same way from the
        // word that confirmed its lookup. Each path builds its decision
        // itself: merged into one packed answer first, the admitted path
        // paid for packing it and testing its kind again. Always inlined:
        // left to `#[inline]`, this outgrew LLVM's threshold and returned
        // its decision through memory.
        let fast = self.inner.fast();
        if let (true, None) = (fast & fast::GLOBAL_UNTIMED != 0, deadline) {
            let p = &*self.inner.shared;
            let w = p.cell.load();
            if let Some(generation) = machine::admits_closed(w) {
                return Ok(self.admitted(closed_permit(0, generation), Some(p)));
            }
            if matches!(w.phase(), Phase::Open | Phase::ForcedOpen) {
                return self.decode(self.answer_open(p, w));
            }
        }
        if let (Some(t), Some(name), None, false) = (
            &self.inner.table,
            tenant,
            deadline,
            fast & fast::RETIRED != 0,
        ) {
            if let Some(d) = self.admit_known(t, name, fast) {
                return d;
            }
        }
        self.decode(self.admit_slow(tenant, deadline))
    }

    /// A tenant the index knows, decided on the word that confirmed the
    /// lookup as the global fast path decides: closed admits (unless
    /// `slow_call` times it), open refuses while the period runs. Anything
    /// else is `admit_slow`'s.
    #[inline(always)]
    pub(crate) fn admit_known<'t>(
        &'t self,
        t: &'t Table,
        tenant: &str,
        fast: u32,
    ) -> Option<Result<Decision<'t>, AdmitError>> {
        let (r, w) = t.lookup_known(tenant)?;
        if let Some(raw) = self.admit_closed(r.slot, w, fast) {
            r.part.touch(|| t.tick());
            return Some(Ok(self.admitted(raw, Some(r.part))));
        }
        match w.phase() {
            Phase::Open => Some(self.decode(self.refuse_known(t, r.slot, r.part, w)?)),
            _ => None,
        }
    }

    /// An admitted call's decision; with the partition when a fast path
    /// resolved it (see `Permit::part`).
    #[inline(always)]
    pub(crate) fn admitted<'a>(
        &'a self,
        raw: PermitData,
        part: Option<&'a Partition>,
    ) -> Decision<'a> {
        Decision::Admitted(Permit {
            dep: self,
            raw,
            part,
        })
    }

    /// `admit_known` for an open word. Out of line, so the closed case
    /// stays small enough to inline; slot and partition apart, in
    /// registers (a `Resolved` went through the stack on every call).
    #[inline(never)]
    pub(crate) fn refuse_known(
        &self,
        t: &Table,
        slot: u32,
        part: &Partition,
        w: Word,
    ) -> Option<PackedAnswer> {
        let retry_ns = self.refuse_open(slot, part, w)?;
        part.touch(|| t.tick());
        Some(PackedAnswer::refused_open(retry_ns))
    }

    /// An open or forced-open global word: refused here (an open one
    /// while the period runs, as `machine::admit` would), else the
    /// general path. Out of line, so the closed path above stays small
    /// enough to inline into every caller.
    #[inline(never)]
    pub(crate) fn answer_open(&self, p: &Partition, w: Word) -> PackedAnswer {
        if machine::refuses_forced(w) {
            let pin = pin_for(0);
            if let Some(stats) = self.counters(0, p, w.generation(), &pin) {
                stats.count_flood(Flood::ForcedOpen);
            }
            return PackedAnswer::rejected(RejectReason::ForcedOpen, None);
        }
        match self.refuse_open(0, p, w) {
            Some(retry_ns) => PackedAnswer::refused_open(retry_ns),
            None => self.admit_slow(None, None),
        }
    }

    /// Rebuilds an out-of-line path's answer in the caller, from
    /// registers. Its permit finds its partition by slot when recorded.
    #[inline(always)]
    pub(crate) fn decode(&self, a: PackedAnswer) -> Result<Decision<'_>, AdmitError> {
        match a.kind() {
            AnswerKind::Admitted => Ok(self.admitted(a.raw(), None)),
            AnswerKind::Rejected(reason) => Ok(Decision::Rejected(Rejection {
                reason,
                fallback: &self.inner.tuning().config.fallback,
                retry_after: a.retry_after(),
            })),
            AnswerKind::TenantRequired => Err(AdmitError::TenantRequired),
            AnswerKind::InvalidTenant(problem) => Err(AdmitError::InvalidTenant { problem }),
            AnswerKind::UnknownDependency => Err(AdmitError::UnknownDependency),
        }
    }

    /// An open partition (at `slot`) whose period is not over, decided
    /// without the CAS loop by `machine::refuses_open` on the tagged
    /// open-until and one coarse reading. Returns the retry-after (ns) of
    /// the refusal it counted.
    #[inline(always)]
    pub(crate) fn refuse_open(&self, slot: u32, p: &Partition, w: Word) -> Option<u64> {
        let until = p.cell.open_until(w.generation())?;
        let now = self.now_coarse();
        let retry_after = machine::refuses_open(w, until, now)?;
        let pin = pin_for(slot);
        if let Some(stats) = self.counters(slot, p, w.generation(), &pin) {
            stats.count_flood(Flood::Open);
            if stats.stuck_due(now) {
                self.check_stuck(slot, p);
            }
        }
        Some(retry_after)
    }

    /// A closed word of the partition at `slot` admits without a clock
    /// (unless `slow_call` times the call, as `fast` says):
    /// `machine::admits_closed`.
    #[inline]
    pub(crate) fn admit_closed(&self, slot: u32, w: Word, fast: u32) -> Option<PermitData> {
        if fast & fast::TIMES_CALLS != 0 {
            return None;
        }
        machine::admits_closed(w).map(|generation| closed_permit(slot, generation))
    }

    #[inline(never)]
    pub(crate) fn admit_slow(
        &self,
        tenant: Option<&str>,
        deadline: Option<Instant>,
    ) -> PackedAnswer {
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            Err(e) => return PackedAnswer::refused_tenant(e),
        };
        let inner = &*self.inner;
        // One tuning for the whole decision (C20).
        let tuning = inner.tuning();
        if let Some(d) = deadline {
            if inner.clock.now() >= d {
                self.count_expired(tenant);
                return PackedAnswer::rejected(RejectReason::DeadlineExpired, None);
            }
        }
        let mut target = self.target(tenant);
        let mut lost = 0u32;
        loop {
            if target.overflow {
                let stats = &inner.shared_stats;
                bump(&stats.partition_overflow_total);
                if let (Some(name), Some(t)) = (tenant, &inner.table) {
                    if t.starts_forced(name) {
                        stats.count_flood(Flood::ForcedOpen);
                        return PackedAnswer::rejected(RejectReason::ForcedOpen, None);
                    }
                }
            }
            let owner = target.owner;
            let part = target.part;
            if target.made_closed {
                // Admitted on the closed word this call installed.
                let started_ns = if tuning.fast & fast::TIMES_CALLS != 0 {
                    inner.clock.now().as_nanos()
                } else {
                    NOT_TIMED
                };
                return PackedAnswer::admitted(PermitData {
                    slot: target.slot,
                    generation: owner.generation,
                    probe: false,
                    started_ns,
                });
            }
            // A closed partition of this tenant admits on one load, as a
            // global one does (`admit_closed`), with the same ownership
            // check as the CAS loop.
            let w = part.cell.load();
            if let Some(raw) = self.admit_closed(target.slot, w, tuning.fast) {
                if part.owned_by(w, owner) {
                    return PackedAnswer::admitted(raw);
                }
            }
            // The generation of the word decided on: whose counters a
            // refusal goes to.
            let seen = std::cell::Cell::new(owner.generation);
            let Some(decided) = part.cell.admit(&tuning.policy, &*inner.clock, |w| {
                seen.set(w.generation());
                part.owned_by(w, owner)
            }) else {
                // The slot was recycled under us: resolve the tenant again.
                target = self.retarget(tenant, &mut lost);
                continue;
            };
            let (adm, t, at) = (decided.admission, decided.transition, decided.reading);
            if let Some((probes, generation)) = decided.reclaimed {
                // C7: probes that outlived `probe_timeout` count as
                // cancelled, with the owner they were admitted for.
                let pin = pin_for(target.slot);
                if let Some(stats) = self.counters(target.slot, part, generation, &pin) {
                    stats
                        .cancelled_total
                        .fetch_add(u64::from(probes), Ordering::Relaxed);
                }
            }
            if let Some(t) = t {
                self.on_transition(target.slot, part, &t, EventKind::Transition);
            }
            return match adm {
                Admission::Admit { generation, probe } => {
                    let started_ns = if tuning.config.slow_call.is_some() {
                        inner.clock.now().as_nanos()
                    } else {
                        NOT_TIMED
                    };
                    PackedAnswer::admitted(PermitData {
                        slot: target.slot,
                        generation,
                        probe,
                        started_ns,
                    })
                }
                Admission::Refuse {
                    refusal,
                    retry_after,
                } => {
                    let pin = pin_for(target.slot);
                    let stats = self.counters(target.slot, part, seen.get(), &pin);
                    let count = |kind| stats.inspect(|s| s.count_flood(kind));
                    let reason = match refusal {
                        Refusal::Open => {
                            count(Flood::Open);
                            // One load and compare; the announcement is cold.
                            if at.is_some_and(|now| stats.is_some_and(|s| s.stuck_due(now))) {
                                self.check_stuck(target.slot, part);
                            }
                            RejectReason::Open
                        }
                        Refusal::ProbeBudget => {
                            count(Flood::ProbeBudget);
                            RejectReason::ProbeBudget
                        }
                        Refusal::ForcedOpen => {
                            count(Flood::ForcedOpen);
                            RejectReason::ForcedOpen
                        }
                    };
                    PackedAnswer::rejected(reason, retry_after)
                }
                Admission::Vacant => {
                    target = self.retarget(tenant, &mut lost);
                    continue;
                }
                // `Cell::admit` admits again after a reclaim.
                Admission::Reclaim { .. } => unreachable!("Cell::admit never returns a reclaim"),
            };
        }
    }

    /// Counts an expired deadline (C10) on the partition the tenant already
    /// has, without touching the table: such an admission neither inserts
    /// nor evicts (C9). A tenant with no partition has no breaker to count
    /// it against.
    #[cold]
    pub(crate) fn count_expired(&self, tenant: Option<&str>) {
        let part = match (self.parts(), tenant) {
            (Parts::Global(p), _) => Some((0, p, 0)),
            (Parts::Tenant(t, _), Some(name)) => {
                t.lookup(name).map(|r| (r.slot, r.part, r.owner.generation))
            }
            (Parts::Tenant(..), None) => None,
        };
        if let Some((slot, p, generation)) = part {
            let pin = pin_for(slot);
            if let Some(stats) = self.counters(slot, p, generation, &pin) {
                bump(&stats.deadline_expired_total);
            }
        }
    }
}
