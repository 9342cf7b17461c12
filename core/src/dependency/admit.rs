//! Admission (C7, C10, C12): the fast paths on one load of the word, and
//! the general path through the cell.

use crate::clock::Instant;
use crate::dependency::*;
use crate::events::EventKind;
use crate::metrics::{bump, Hot};
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
        // with the decisions `machine::admit` makes for a closed word and
        // for an open one whose period is not over; a known tenant's the
        // same way from the word that confirmed its lookup. Each path
        // builds its decision itself: merged into one `Answer` first, the
        // admitted path paid for packing it and testing its kind again.
        // Always inlined: left to `#[inline]` this grew past LLVM's
        // threshold and returned its decision through memory (141 -> 181
        // instructions a tenant call; 130 inlined).
        if let (true, None) = (self.inner.admit_fast, deadline) {
            let p = &*self.inner.zero;
            let w = p.cell.load();
            if w.phase() == Phase::Closed {
                return Ok(self.admitted(closed_permit(0, w), Some(p)));
            }
            if w.phase() == Phase::Open {
                return self.decode(self.answer_open(p, w));
            }
        }
        if let (Some(t), Some(name), None) = (&self.inner.table, tenant, deadline) {
            if let Some(d) = self.admit_known(t, name) {
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
    ) -> Option<Result<Decision<'t>, AdmitError>> {
        let (r, w) = t.lookup_known(tenant)?;
        if let Some(raw) = self.admit_closed(r.slot, w) {
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
    ) -> Option<Answer> {
        let retry_ns = self.refuse_open(slot, part, w)?;
        part.touch(|| t.tick());
        Some(Answer::refused_open(retry_ns))
    }

    /// An open global word: refused here while the period runs, else the
    /// general path. Out of line, so the closed path above stays small
    /// enough to inline into every caller.
    #[inline(never)]
    pub(crate) fn answer_open(&self, p: &Partition, w: Word) -> Answer {
        match self.refuse_open(0, p, w) {
            Some(retry_ns) => Answer::refused_open(retry_ns),
            None => self.admit_slow(None, None),
        }
    }

    /// Rebuilds an out-of-line path's answer in the caller, from
    /// registers. Its permit finds its partition by slot when recorded.
    #[inline(always)]
    pub(crate) fn decode(&self, a: Answer) -> Result<Decision<'_>, AdmitError> {
        match a.kind() {
            AnswerKind::Admitted => Ok(self.admitted(a.raw(), None)),
            AnswerKind::Rejected(reason) => Ok(Decision::Rejected(Rejection {
                reason,
                fallback: &self.inner.config.fallback,
                retry_after: a.retry_after(),
            })),
            AnswerKind::TenantRequired => Err(AdmitError::TenantRequired),
            AnswerKind::InvalidTenant(len) => Err(AdmitError::InvalidTenant { len }),
        }
    }

    /// An open partition (at `slot`) whose period is not over, decided
    /// without the CAS loop: the tagged open-until, one coarse reading and
    /// `machine::still_open`, the same rule `machine::admit` applies.
    /// Returns the retry-after (ns) of the refusal it counted.
    #[inline(always)]
    pub(crate) fn refuse_open(&self, slot: u32, p: &Partition, w: Word) -> Option<u64> {
        if w.phase() != Phase::Open {
            return None;
        }
        let until = p.cell.open_until(w.generation())?;
        let now = self.now_coarse();
        let retry_after = machine::still_open_ns(until, now)?;
        let pin = pin_for(slot);
        if let Some(stats) = self.counters(slot, p, w.generation(), &pin) {
            stats.hot(Hot::Open);
            if stats.stuck_due(now) {
                self.check_stuck(slot, p);
            }
        }
        Some(retry_after)
    }

    /// A closed word of the partition at `slot` admits without a clock
    /// (unless `slow_call` times it).
    #[inline]
    pub(crate) fn admit_closed(&self, slot: u32, w: Word) -> Option<PermitData> {
        (w.phase() == Phase::Closed && !self.inner.timed).then(|| closed_permit(slot, w))
    }

    #[inline(never)]
    pub(crate) fn admit_slow(&self, tenant: Option<&str>, deadline: Option<Instant>) -> Answer {
        let tenant = match self.tenant(tenant) {
            Ok(t) => t,
            Err(e) => return Answer::refused_tenant(e),
        };
        let inner = &*self.inner;
        if let Some(d) = deadline {
            if inner.clock.now() >= d {
                self.count_expired(tenant);
                return Answer::rejected(RejectReason::DeadlineExpired, None);
            }
        }
        let mut target = self.target(tenant);
        let mut lost = 0u32;
        loop {
            if target.overflow {
                let stats = &inner.zero_stats;
                bump(&stats.partition_overflow_total);
                if let (Some(name), Some(t)) = (tenant, &inner.table) {
                    if t.starts_forced(name) {
                        stats.hot(Hot::ForcedOpen);
                        return Answer::rejected(RejectReason::ForcedOpen, None);
                    }
                }
            }
            let owner = target.owner;
            let part = target.part;
            if target.made_closed {
                // Admitted on the closed word this call installed.
                let started_ns = if inner.timed {
                    inner.clock.now().as_nanos()
                } else {
                    NOT_TIMED
                };
                return Answer::admitted(PermitData {
                    slot: target.slot,
                    generation: owner.generation,
                    probe: false,
                    started_ns,
                });
            }
            // A closed partition of this tenant admits on one load, as a
            // global one does: the decision `machine::admit` makes for a
            // closed word, with the same ownership check as the CAS loop.
            let w = part.cell.load();
            if let Some(raw) = self.admit_closed(target.slot, w) {
                if part.owned_by(w, owner) {
                    return Answer::admitted(raw);
                }
            }
            // The generation of the word decided on: whose counters a
            // refusal goes to.
            let seen = std::cell::Cell::new(owner.generation);
            let Some(decided) = part.cell.admit(&inner.policy, &*inner.clock, |w| {
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
                    let started_ns = if inner.config.slow_call.is_some() {
                        inner.clock.now().as_nanos()
                    } else {
                        NOT_TIMED
                    };
                    Answer::admitted(PermitData {
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
                    let hot = |kind| stats.inspect(|s| s.hot(kind));
                    let reason = match refusal {
                        Refusal::Open => {
                            hot(Hot::Open);
                            // One load and compare; the announcement is cold.
                            if at.is_some_and(|now| stats.is_some_and(|s| s.stuck_due(now))) {
                                self.check_stuck(target.slot, part);
                            }
                            RejectReason::Open
                        }
                        Refusal::ProbeBudget => {
                            hot(Hot::ProbeBudget);
                            RejectReason::ProbeBudget
                        }
                        Refusal::ForcedOpen => {
                            hot(Hot::ForcedOpen);
                            RejectReason::ForcedOpen
                        }
                    };
                    Answer::rejected(reason, retry_after)
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
