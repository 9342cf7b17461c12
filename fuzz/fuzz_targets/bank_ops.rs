//! Random sequences of the bank's public operations on a manual clock,
//! with the contract's invariants checked after every step.
//!
//! The harness keeps its own model of what the contract fixes and the API
//! shows: the probe permits it holds per partition (C7), the successes of
//! each half-open episode (C8), the operator's forced-open set (C11), when
//! each trip's open period ends (C12, with C6's backoff), and which held
//! permits certainly belong to an earlier generation (C13). A partition is
//! named as the API names it (`global`, the tenant id, `<overflow>`), read
//! with `Dependency::partition_of` right after each admission.
//!
//! Checked after every step:
//! - C7: a probe is admitted only while the harness holds fewer than
//!   `probe_budget` probe permits of that partition, and `probe_budget`
//!   refusals happen only when it holds that many.
//! - C8: a half-open breaker closes only on the success that brings its
//!   episode to `success_threshold`; a current probe's failure reopens it.
//! - C10: an expired deadline (equal to now included) is `DeadlineExpired`
//!   and changes no metric of any partition but `deadline_expired_total`
//!   (so it neither inserts nor evicts a partition, C9).
//! - C11: after `force_open(t)` the state of `t` reads `forced_open` until
//!   a reset; right after `reset(t)` it reads `closed`.
//! - C12: a tripped breaker admits nothing before its open period (C6,
//!   backoff included) has passed on the clock; advancing the clock never
//!   changes a state.
//! - C13: a permit of a generation that has certainly ended (its partition
//!   changed state, was reset or forced open, or was evicted since) changes
//!   nothing but one `late_records_total` when recorded or dropped.
#![no_main]

use arbitrary::Arbitrary;
use breakerbank::{
    AdmitError, Bank, Decision, Dependency, Instant, Isolation, ManualClock, MetricsSnapshot,
    Outcome, PartitionMetrics, Permit, Profile, RejectReason, State,
};
use breakerbank_fuzz::{expected_open_period, PROFILE, STEPS, TENANTS};
use libfuzzer_sys::fuzz_target;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

/// Operations per input: enough for several trip-probe-close cycles.
const MAX_OPS: usize = 400;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum TenantSel {
    /// `None`.
    Missing,
    /// `Some("")`.
    Empty,
    /// One of the pool.
    Pool(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum DeadlineSel {
    None,
    /// `now - ms` (saturating at zero): expired.
    Past(u16),
    /// Exactly now: expired (C10).
    Now,
    /// `now + 1 ns + ms`: not expired.
    Future(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum OutcomeSel {
    Success,
    Failure,
    Cancelled,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum AdvanceSel {
    /// One of `STEPS`: on and around the profile's periods.
    Step(u8),
    /// Any number of milliseconds.
    Millis(u32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Admit {
        dep: u8,
        tenant: TenantSel,
        deadline: DeadlineSel,
    },
    Record {
        held: u8,
        outcome: OutcomeSel,
    },
    Drop {
        held: u8,
    },
    Advance(AdvanceSel),
    Reset {
        dep: u8,
        tenant: TenantSel,
    },
    ForceOpen {
        dep: u8,
        tenant: TenantSel,
    },
    State {
        dep: u8,
        tenant: TenantSel,
    },
    Metrics,
    Prometheus,
    Stuck,
}

/// A permit the harness holds, with what it knows about it.
struct Held<'a> {
    permit: Permit<'a>,
    dep: usize,
    part: String,
    /// Its generation has certainly ended (see the module docs).
    stale: bool,
    /// The step that admitted it: a transition seen at the end of that
    /// step (open to half-open) happened before it was issued.
    born: u32,
    /// A probe's slot is still its own: not taken back after
    /// `probe_timeout` (C7).
    slot: bool,
}

/// What the harness tracks per partition.
#[derive(Default, Debug)]
struct PartModel {
    /// Successes of current probes in this half-open episode (C8).
    successes: u32,
    /// A trip's open period ends here (C12), to the millisecond above;
    /// cleared by an operator.
    open_until: Option<Instant>,
    /// Re-trips from half-open since the last close (C6's exponent).
    retrips: u32,
}

/// The operator's forced-open state of one dependency (C11).
#[derive(Default, Debug)]
struct Forced {
    /// `force_open(None)` (every partition) since the last `reset(None)`.
    all: bool,
    /// Tenants forced one by one since their last reset.
    one: BTreeSet<String>,
    /// Tenants reset one by one since the last `force_open(None)`.
    unforced: BTreeSet<String>,
}

impl Forced {
    fn expects_forced(&self, tenant: &str) -> bool {
        self.one.contains(tenant) || (self.all && !self.unforced.contains(tenant))
    }
}

type Key = (usize, String);

fn flatten(m: &MetricsSnapshot) -> BTreeMap<Key, PartitionMetrics> {
    let mut out = BTreeMap::new();
    for (i, d) in m.dependencies.iter().enumerate() {
        for p in &d.partitions {
            let prev = out.insert((i, p.partition.clone()), p.clone());
            assert!(prev.is_none(), "partition `{}` listed twice", p.partition);
        }
    }
    out
}

fn state_of(m: &BTreeMap<Key, PartitionMetrics>, k: &Key) -> State {
    m.get(k).map_or(State::Closed, |p| p.state)
}

/// Partition of a tenant-scoped dependency shared by tenants that find no
/// room (C9).
const OVERFLOW: &str = "<overflow>";

/// `after` equals `before` but for one counter, which grows by one (or,
/// when `exactly` is false, by at most one) in one of the partitions
/// `allowed`. The overflow partition may appear with that count alone: it
/// is listed once something was counted in it.
fn only_counter_moved(
    before: &BTreeMap<Key, PartitionMetrics>,
    after: &BTreeMap<Key, PartitionMetrics>,
    counter: fn(&mut PartitionMetrics) -> &mut u64,
    allowed: &[Key],
    exactly: bool,
    what: &str,
) {
    let mut moved = 0;
    for (k, pa) in after {
        let mut pa = pa.clone();
        let Some(pb) = before.get(k) else {
            assert!(
                k.1 == OVERFLOW && *counter(&mut pa) == 1,
                "{what}: partition {k:?} appeared: {pa:?}"
            );
            *counter(&mut pa) = 0;
            assert!(
                pa.state == State::Closed
                    && pa.values().iter().all(|(n, v)| *n == "state" || *v == 0.0),
                "{what}: partition {k:?} appeared with more than the counter: {pa:?}"
            );
            assert!(
                allowed.contains(k),
                "{what}: counted in {k:?}, not in {allowed:?}"
            );
            moved += 1;
            continue;
        };
        let mut pb = pb.clone();
        let (ca, cb) = (*counter(&mut pa), *counter(&mut pb));
        assert!(
            ca >= cb && ca - cb <= 1,
            "{what}: counter of {k:?} went {cb} -> {ca}"
        );
        if ca != cb {
            assert!(
                allowed.contains(k),
                "{what}: counted in {k:?}, not in {allowed:?}"
            );
        }
        moved += ca - cb;
        *counter(&mut pa) = 0;
        *counter(&mut pb) = 0;
        assert_eq!(pb, pa, "{what}: partition {k:?} changed");
    }
    for k in before.keys() {
        assert!(
            after.contains_key(k),
            "{what}: partition {k:?} disappeared"
        );
    }
    if exactly {
        assert_eq!(moved, 1, "{what}: counted {moved} times, not once");
    } else {
        assert!(moved <= 1, "{what}: counted {moved} times");
    }
}

struct Harness<'a> {
    bank: &'a Bank,
    clock: &'a ManualClock,
    deps: &'a [Dependency],
    held: Vec<Held<'a>>,
    /// When each partition last admitted a probe (C7's `probe_timeout`
    /// counts from there); never forgotten, as the partition's own stamp.
    probe_admitted: BTreeMap<Key, Instant>,
    parts: BTreeMap<Key, PartModel>,
    forced: Vec<Forced>,
    metrics: BTreeMap<Key, PartitionMetrics>,
    /// Steps run so far.
    step_no: u32,
}

impl<'a> Harness<'a> {
    fn tenant(sel: TenantSel) -> Option<&'static str> {
        match sel {
            TenantSel::Missing => None,
            TenantSel::Empty => Some(""),
            TenantSel::Pool(i) => Some(TENANTS[i as usize % TENANTS.len()]),
        }
    }

    fn tenant_scoped(&self, dep: usize) -> bool {
        self.deps[dep].config().isolation == Isolation::Tenant
    }

    fn held_probes(&self, dep: usize, part: &str) -> u32 {
        self.held
            .iter()
            .filter(|h| h.dep == dep && h.part == part && h.permit.is_probe() && h.slot)
            .count() as u32
    }

    /// C7's `probe_timeout`: the budget's slots are taken back once the
    /// latest probe admitted on the partition is that old (every probe
    /// still in flight is then older).
    fn probes_expired(&self, key: &Key, now: Instant, timeout: Duration) -> bool {
        self.probe_admitted
            .get(key)
            .is_some_and(|at| now.saturating_duration_since(*at) >= timeout)
    }

    /// `mark_stale` of every partition of `dep` but `spared`.
    fn mark_stale_but(&mut self, dep: usize, spared: Option<&str>) {
        let step = self.step_no;
        for h in &mut self.held {
            if h.dep == dep && spared != Some(h.part.as_str()) && h.born < step {
                h.stale = true;
            }
        }
    }

    /// `forget` of every partition of `dep` but `spared`.
    fn forget_but(&mut self, dep: usize, spared: Option<&str>) {
        for ((d, p), m) in self.parts.iter_mut() {
            if *d == dep && spared != Some(p.as_str()) {
                m.successes = 0;
                m.open_until = None;
                m.retrips = 0;
            }
        }
    }

    /// Marks the permits of a partition (or of every partition of `dep`)
    /// issued before this step as late.
    fn mark_stale(&mut self, dep: usize, part: Option<&str>) {
        let step = self.step_no;
        for h in &mut self.held {
            if h.dep == dep && part.is_none_or(|p| h.part == p) && h.born < step {
                h.stale = true;
            }
        }
    }

    fn forget(&mut self, dep: usize, part: Option<&str>) {
        for ((d, p), m) in self.parts.iter_mut() {
            if *d == dep && part.is_none_or(|x| x == p) {
                m.successes = 0;
                m.open_until = None;
                m.retrips = 0;
            }
        }
    }

    fn step(&mut self, op: Op) {
        self.step_no += 1;
        let now = self.clock.now();
        let before = std::mem::take(&mut self.metrics);
        // What a record step did, for C8: (dep, partition, counted success).
        let mut recorded: Option<(Key, Outcome, bool)> = None;
        let mut operator: Option<usize> = None;
        match op {
            Op::Admit {
                dep,
                tenant,
                deadline,
            } => {
                let dep = dep as usize % self.deps.len();
                let t = Self::tenant(tenant);
                self.admit(dep, t, deadline, now, &before);
            }
            Op::Record { held, outcome } if !self.held.is_empty() => {
                let h = self.held.swap_remove(held as usize % self.held.len());
                let outcome = match outcome {
                    OutcomeSel::Success => Outcome::Success,
                    OutcomeSel::Failure => Outcome::Failure,
                    OutcomeSel::Cancelled => Outcome::Cancelled,
                };
                recorded = Some(self.record(h, Some(outcome), &before));
            }
            Op::Drop { held } if !self.held.is_empty() => {
                let h = self.held.swap_remove(held as usize % self.held.len());
                recorded = Some(self.record(h, None, &before));
            }
            Op::Record { .. } | Op::Drop { .. } => {}
            Op::Advance(a) => {
                let by = match a {
                    AdvanceSel::Step(i) => STEPS[i as usize % STEPS.len()],
                    AdvanceSel::Millis(ms) => Duration::from_millis(u64::from(ms)),
                };
                self.clock.advance(by);
            }
            Op::Reset { dep, tenant } => {
                let dep = dep as usize % self.deps.len();
                operator = Some(dep);
                self.reset(dep, Self::tenant(tenant), &before);
            }
            Op::ForceOpen { dep, tenant } => {
                let dep = dep as usize % self.deps.len();
                operator = Some(dep);
                self.force_open(dep, Self::tenant(tenant), &before);
            }
            Op::State { dep, tenant } => {
                let dep = dep as usize % self.deps.len();
                let t = Self::tenant(tenant);
                let r = self.deps[dep].state(t);
                if self.tenant_scoped(dep) && t.is_none_or(str::is_empty) {
                    assert_eq!(r, Err(AdmitError::TenantRequired));
                } else {
                    assert!(r.is_ok(), "state refused a valid tenant: {r:?}");
                }
            }
            Op::Metrics => {
                let _ = self.bank.metrics();
            }
            Op::Prometheus => {
                let text = self.bank.prometheus();
                for line in text.lines() {
                    assert!(
                        line.is_empty()
                            || line.starts_with('#')
                            || line.starts_with("breakerbank_"),
                        "unexpected Prometheus line `{line}`"
                    );
                }
            }
            Op::Stuck => {
                for s in self.bank.stuck() {
                    assert!(self.deps.iter().any(|d| d.name() == s.dependency));
                }
            }
        }
        self.metrics = flatten(&self.bank.metrics());
        self.after_step(&before, now, op, recorded, operator);
    }

    fn admit(
        &mut self,
        dep: usize,
        tenant: Option<&'static str>,
        deadline: DeadlineSel,
        now: Instant,
        before: &BTreeMap<Key, PartitionMetrics>,
    ) {
        let d: &'a Dependency = &self.deps[dep];
        let deadline = match deadline {
            DeadlineSel::None => None,
            DeadlineSel::Past(ms) => Some(Instant::from_nanos(
                now.as_nanos().saturating_sub(u64::from(ms) * 1_000_000),
            )),
            DeadlineSel::Now => Some(now),
            DeadlineSel::Future(ms) => {
                Some(now + Duration::from_nanos(1 + u64::from(ms) * 1_000_000))
            }
        };
        let expired = deadline.is_some_and(|dl| dl <= now);
        let scoped = self.tenant_scoped(dep);
        let r = d.admit(tenant, deadline);
        if scoped && tenant.is_none_or(str::is_empty) {
            assert!(
                matches!(r, Err(AdmitError::TenantRequired)),
                "a tenant-scoped admission without a tenant gave {r:?}"
            );
            return;
        }
        let decision = match r {
            Ok(d) => d,
            Err(e) => panic!("admission refused with {e:?} on a valid tenant"),
        };
        let part = d.partition_of(tenant);
        let key = (dep, part.clone());
        if expired {
            match &decision {
                Decision::Rejected(r) if r.reason == RejectReason::DeadlineExpired => {}
                other => panic!("C10: expired deadline (deadline <= now) gave {other:?}"),
            }
            let after = flatten(&self.bank.metrics());
            let allowed = [key, (dep, OVERFLOW.to_string())];
            only_counter_moved(
                before,
                &after,
                |p| &mut p.deadline_expired_total,
                &allowed,
                false,
                "C10: an expired admission",
            );
            return;
        }
        let budget = d.config().probe_budget;
        let timeout = d.config().probe_timeout;
        let held = self.held_probes(dep, &part);
        let t = tenant.filter(|_| scoped);
        match decision {
            Decision::Rejected(r) => {
                assert_ne!(
                    r.reason,
                    RejectReason::DeadlineExpired,
                    "C10: a deadline in the future was called expired"
                );
                if r.reason == RejectReason::ProbeBudget {
                    assert!(
                        held >= budget,
                        "C7: probe_budget refusal on {key:?} with {held} of {budget} probes held"
                    );
                    assert!(
                        !self.probes_expired(&key, now, timeout),
                        "C7: probe_budget refusal on {key:?} though its probes are probe_timeout old"
                    );
                }
            }
            Decision::Admitted(permit) => {
                if let Some(until) = self.parts.get(&key).and_then(|m| m.open_until) {
                    assert!(
                        now >= until,
                        "C12: {key:?} admitted at {now:?}, its open period ends at {until:?}"
                    );
                }
                let forced = match t {
                    Some(t) => self.forced[dep].expects_forced(t),
                    None => self.forced[dep].all,
                };
                assert!(!forced, "C11: forced-open {key:?} admitted a call");
                if permit.is_probe() {
                    if held >= budget {
                        assert!(
                            self.probes_expired(&key, now, timeout),
                            "C7: probe admitted on {key:?} with {held} of {budget} probes already held"
                        );
                        // Taken back: their records are late (a new
                        // generation) and return no slot.
                        for h in self.held.iter_mut() {
                            if h.dep == dep && h.part == part && h.permit.is_probe() {
                                h.slot = false;
                                h.stale = true;
                            }
                        }
                        self.mark_stale(dep, Some(&part));
                    }
                    self.probe_admitted.insert(key.clone(), now);
                }
                self.held.push(Held {
                    permit,
                    dep,
                    part,
                    stale: false,
                    born: self.step_no,
                    slot: true,
                });
            }
        }
    }

    /// Records `h` with `outcome`, or drops it unrecorded (`None`).
    fn record(
        &mut self,
        h: Held<'a>,
        outcome: Option<Outcome>,
        before: &BTreeMap<Key, PartitionMetrics>,
    ) -> (Key, Outcome, bool) {
        let key = (h.dep, h.part.clone());
        let probe = h.permit.is_probe();
        let stale = h.stale;
        match outcome {
            Some(o) => h.permit.record(o),
            None => drop(h.permit),
        }
        let outcome = outcome.unwrap_or(Outcome::Cancelled);
        if stale {
            let after = flatten(&self.bank.metrics());
            // Counted with its own partition, or with the dependency's
            // overflow when its slot went to another tenant (C9).
            let allowed = [key.clone(), (key.0, OVERFLOW.to_string())];
            only_counter_moved(
                before,
                &after,
                |p| &mut p.late_records_total,
                &allowed,
                true,
                "C13: a permit of an ended generation",
            );
        }
        let counted = !stale && probe;
        (key, outcome, counted)
    }

    fn reset(
        &mut self,
        dep: usize,
        tenant: Option<&'static str>,
        before: &BTreeMap<Key, PartitionMetrics>,
    ) {
        let d = &self.deps[dep];
        let t = tenant.filter(|t| !t.is_empty() && self.tenant_scoped(dep));
        d.reset(t);
        match t {
            Some(t) => {
                // A tenant in the table is reset (new generation); one that
                // is not has nothing to reset.
                if before.contains_key(&(dep, t.to_string())) {
                    self.mark_stale(dep, Some(t));
                    self.forget(dep, Some(t));
                }
                let f = &mut self.forced[dep];
                f.one.remove(t);
                f.unforced.insert(t.to_string());
                assert_eq!(
                    d.state(Some(t)),
                    Ok(State::Closed),
                    "C11: `{t}` does not read closed right after reset"
                );
            }
            None => {
                self.mark_stale(dep, None);
                self.forget(dep, None);
                self.forced[dep] = Forced::default();
                for t in TENANTS {
                    let s = d.state(self.tenant_scoped(dep).then_some(t));
                    assert_eq!(
                        s,
                        Ok(State::Closed),
                        "C11: `{t}` not closed after reset(all)"
                    );
                }
            }
        }
    }

    fn force_open(
        &mut self,
        dep: usize,
        tenant: Option<&'static str>,
        before: &BTreeMap<Key, PartitionMetrics>,
    ) {
        let _ = before;
        let d = &self.deps[dep];
        let t = tenant.filter(|t| !t.is_empty() && self.tenant_scoped(dep));
        d.force_open(t);
        match t {
            Some(t) => {
                // `t`'s own partition was forced (a new generation); with
                // no room for it, `t` alone is refused from the overflow,
                // whose word is not touched (C9).
                let part = d.partition_of(Some(t));
                if part != OVERFLOW {
                    self.mark_stale(dep, Some(&part));
                    self.forget(dep, Some(&part));
                }
                let f = &mut self.forced[dep];
                f.one.insert(t.to_string());
                f.unforced.remove(t);
            }
            None => {
                // Every partition is forced but a tenant-scoped
                // dependency's overflow, which also serves tenants reset
                // one by one while the force holds.
                let spared = self.tenant_scoped(dep).then_some(OVERFLOW);
                self.mark_stale_but(dep, spared);
                self.forget_but(dep, spared);
                let f = &mut self.forced[dep];
                f.all = true;
                f.one.clear();
                f.unforced.clear();
            }
        }
    }

    fn after_step(
        &mut self,
        before: &BTreeMap<Key, PartitionMetrics>,
        now: Instant,
        op: Op,
        recorded: Option<(Key, Outcome, bool)>,
        operator: Option<usize>,
    ) {
        let after = std::mem::take(&mut self.metrics);
        // Evicted partitions: their held permits are of an ended generation.
        for k in before.keys() {
            if !after.contains_key(k) {
                self.mark_stale(k.0, Some(&k.1));
                self.parts.remove(k);
            }
        }
        let keys: BTreeSet<Key> = before.keys().chain(after.keys()).cloned().collect();
        for k in keys {
            let (s0, s1) = (state_of(before, &k), state_of(&after, &k));
            if let Op::Advance(_) = op {
                // C12, C14: moving the clock changes nothing but an open
                // breaker whose period ended, which reads (and, by the
                // manual clock's sweep, becomes) half-open.
                let ended = s0 == State::Open && s1 == State::HalfOpen;
                assert!(
                    s0 == s1 || ended,
                    "C12: advancing the clock changed {k:?}: {s0:?} -> {s1:?}"
                );
            }
            if operator == Some(k.0) {
                // Operator steps were modelled where they ran.
                continue;
            }
            let cfg = self.deps[k.0].config();
            let is_recorded = recorded.as_ref().is_some_and(|(rk, _, _)| *rk == k);
            if s1 == State::Closed && s0 != State::Closed {
                // C8: only the success that completes the episode closes.
                let Some((_, Outcome::Success, true)) = recorded.as_ref().filter(|_| is_recorded)
                else {
                    panic!("C8: {k:?} went {s0:?} -> Closed on {op:?}, not on a current probe's success");
                };
                let m = self.parts.entry(k.clone()).or_default();
                m.successes += 1;
                assert!(
                    m.successes >= cfg.success_threshold,
                    "C8: {k:?} closed after {} of {} successes",
                    m.successes,
                    cfg.success_threshold
                );
            } else if s0 == State::HalfOpen && s1 == State::HalfOpen && is_recorded {
                if let Some((_, Outcome::Success, true)) = recorded.as_ref() {
                    self.parts.entry(k.clone()).or_default().successes += 1;
                }
                if let Some((_, Outcome::Failure, true)) = recorded.as_ref() {
                    panic!("C8: a current probe of {k:?} failed and it stayed half-open");
                }
            }
            if s0 == s1 {
                continue;
            }
            // A transition: every permit of this partition is now late.
            self.mark_stale(k.0, Some(&k.1));
            let m = self.parts.entry(k.clone()).or_default();
            m.successes = 0;
            match s1 {
                State::Open => {
                    m.retrips = if s0 == State::HalfOpen {
                        m.retrips + 1
                    } else {
                        0
                    };
                    // Kept in whole milliseconds, rounded up, so that the
                    // period never ends early (`state::cell`'s side word).
                    let end = (now + expected_open_period(cfg, m.retrips)).as_nanos();
                    m.open_until = Some(Instant::from_nanos(end.div_ceil(1_000_000) * 1_000_000));
                }
                State::Closed => {
                    m.retrips = 0;
                    m.open_until = None;
                }
                State::HalfOpen | State::ForcedOpen => {}
            }
        }
        // C11: forced-open tenants read forced_open until reset.
        for (i, d) in self.deps.iter().enumerate() {
            let f = &self.forced[i];
            if d.config().isolation == Isolation::Global {
                if f.all || !f.one.is_empty() {
                    assert_eq!(
                        d.state(None),
                        Ok(State::ForcedOpen),
                        "C11: global {i} not forced"
                    );
                }
                continue;
            }
            for t in TENANTS {
                if f.expects_forced(t) {
                    assert_eq!(
                        d.state(Some(t)),
                        Ok(State::ForcedOpen),
                        "C11: `{t}` of {} does not read forced_open before a reset",
                        d.name()
                    );
                }
            }
        }
        self.read_paths(&after);
        self.metrics = after;
    }

    /// C14, the read paths apart from admissions: `state()` and the
    /// metrics report the state an admission would find now. A partition
    /// whose open period has ended reads half-open in both, never open;
    /// one still in its period reads open; and `state()` of a tenant with
    /// a partition of its own (or of a global dependency) reads what the
    /// metrics list for that partition.
    fn read_paths(&self, after: &BTreeMap<Key, PartitionMetrics>) {
        let now = self.clock.now();
        for (k, pm) in after {
            let Some(until) = self.parts.get(k).and_then(|m| m.open_until) else {
                continue;
            };
            if now >= until {
                assert_ne!(
                    pm.state,
                    State::Open,
                    "C14: the metrics read {k:?} open at {now:?}, its open period ended at {until:?}"
                );
            } else {
                assert!(
                    matches!(pm.state, State::Open | State::ForcedOpen),
                    "C14: the metrics read {k:?} {:?} at {now:?}, inside its open period (until {until:?})",
                    pm.state
                );
            }
        }
        for (i, d) in self.deps.iter().enumerate() {
            let scoped = d.config().isolation != Isolation::Global;
            let tenants: Vec<Option<&str>> = if scoped {
                TENANTS.iter().map(|t| Some(*t)).collect()
            } else {
                vec![None]
            };
            for t in tenants {
                let part = d.partition_of(t);
                if scoped && t != Some(part.as_str()) {
                    // Served by the overflow: state() is the tenant's own
                    // (fresh, or forced), not the shared partition's.
                    continue;
                }
                let listed = state_of(after, &(i, part.clone()));
                assert_eq!(
                    d.state(t),
                    Ok(listed),
                    "C14: state({t:?}) of {} disagrees with the metrics' {listed:?} for `{part}`",
                    d.name()
                );
            }
        }
    }
}

/// The profile, parsed once: parsing is most of a fresh bank's cost.
fn profile() -> Profile {
    static PARSED: OnceLock<Profile> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            let p = Profile::from_yaml(PROFILE).expect("the harness profile is valid");
            for d in p.dependencies() {
                if let Some(b) = d.backoff {
                    assert_eq!(
                        b.multiplier.fract(),
                        0.0,
                        "expected_open_period needs whole multipliers"
                    );
                }
            }
            p
        })
        .clone()
}

fuzz_target!(|ops: Vec<Op>| {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile(), clock.clone());
    let deps: Vec<Dependency> = bank
        .dependency_names()
        .iter()
        .map(|n| bank.dependency(n).expect("listed"))
        .collect();
    let mut h = Harness {
        bank: &bank,
        clock: &clock,
        deps: &deps,
        held: Vec::new(),
        probe_admitted: BTreeMap::new(),
        parts: BTreeMap::new(),
        forced: deps.iter().map(|_| Forced::default()).collect(),
        metrics: flatten(&bank.metrics()),
        step_no: 0,
    };
    for op in ops.into_iter().take(MAX_OPS) {
        h.step(op);
    }
    // Dropping what is still held returns every slot; nothing may panic.
    h.held.clear();
});
