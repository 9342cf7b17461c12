//! Model test of the tenant table (C5–C14 as C9 applies them to tenant
//! partitions): random sequences of admit (with and without an expired
//! deadline) / record / drop / advance / reset and force_open (one tenant
//! or all) / a run of failures, over 6 to 12 tenant ids and a table of 1
//! to 3 partitions, so that eviction and overflow happen all the time,
//! under both trip policies. The reference is one `tests/reference`
//! breaker per partition the table holds, one for `<overflow>`, the set
//! of tenants holding partitions, and each tenant's own operator action
//! since the last dependency-wide one (C11: it outlives the tenant's
//! partition, C9: an eviction loses nothing).
//!
//! What C9 leaves open, the model does not guess: which idle partition
//! goes; which closed one with counts goes when none is idle ("least
//! recently used", where "used" may or may not include recording, and
//! recency is told apart only across insertions, see `Run::tick`);
//! whether a closed partition with a call in flight is idle; whether a
//! closed one whose earlier probe still holds its slot (C7) may go; where
//! the rolling window's edge lies (see `reference::Breaker::band`); and
//! whether an expired admission of a tenant with no partition is counted
//! with `<overflow>` or nowhere. After each step the model reads the
//! partitions the metrics snapshot lists, checks that the change it sees
//! is one C9 allows, and follows it. What must hold whatever the choice:
//! the table never holds more than `max_tenants`; an open, half-open or
//! forced partition is never evicted; `<overflow>` serves a tenant only
//! when nothing is evictable; a tenant's records and operator actions
//! change no other partition (an overflow-served tenant's included); a
//! late record (older generation, or an evicted partition's) changes
//! nothing but one `late_records_total`, never another tenant's; an
//! admission whose deadline has expired neither inserts nor evicts.
//!
//! After every step: the admission's decision, `state()` and
//! `partition_of` of every tenant (C14: half-open once the open period has
//! ended), and each listed partition's state and the counters the
//! contract fixes.

#![allow(clippy::disallowed_types)] // proptest's macros expand to std's Arc; the rule is for core's own code

mod reference;

/// Cases a model test runs: fewer under the `narrow` feature (its fields
/// wrap within a few dozen steps, so each case crosses their wraps; the
/// full count runs in the ordinary build).
const CASES: u32 = if cfg!(feature = "narrow") {
    2_000
} else {
    10_000
};
use breakerbank::{
    Bank, Decision, Dependency, Instant, ManualClock, Outcome, PartitionMetrics, Permit,
    RejectReason, State,
};
use proptest::prelude::*;
use reference::{Breaker, Cfg, Counters, Evict, Policy, Seen};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const OVERFLOW: &str = "<overflow>";

/// An admission's deadline, relative to now (C10: equal to now has expired).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dl {
    None,
    Past,
    Now,
    Later,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Admit(usize, Dl),
    Record(usize, Outcome),
    Drop(usize),
    Advance(u64),
    /// `None`: every partition (C11).
    Reset(Option<usize>),
    ForceOpen(Option<usize>),
    /// Admit and record a failure on one tenant, `n` times.
    Fail(usize, u32),
    /// C20: reload with new thresholds, budget, open duration and backoff
    /// (`n`: consecutive failures or `min_calls`; the policy's kind, its
    /// window and `max_tenants` kept, so every partition is kept).
    Reload {
        n: u32,
        pct: u32,
        half_open: (u32, u32, u64, bool),
    },
}

/// A table partition: its breaker, which incarnation of the tenant's
/// partition it is (an evicted one's permits are late), and its uses for
/// C9's least-recently-used order, as values of `Run::tick`:
/// `last_admit` is its insertion or last admission, `last_any` also
/// counts records, operator actions and expired admissions, so that the
/// order is checked under every reading of "used".
struct Part {
    inc: u64,
    b: Breaker,
    last_admit: u64,
    last_any: u64,
}

/// A permit as the model knows it: `inc` 0 is `<overflow>`.
#[derive(Clone, Copy, Debug)]
struct MPermit {
    inc: u64,
    tenant: usize,
    generation: u64,
    probe: bool,
}

struct Run<'a> {
    bank: &'a Bank,
    clock: ManualClock,
    dep: &'a Dependency,
    cfg: Cfg,
    max: usize,
    tenants: Vec<String>,
    held: BTreeMap<usize, Part>,
    overflow: Breaker,
    /// `force_open(None)` since the last `reset(None)`: the overflow's
    /// own breaker is not forced by it, the tenants it serves are.
    forced_all: bool,
    /// Each tenant's own action since the last dependency-wide one, where
    /// the tenant has no partition to carry it: forced open (`true`, while
    /// the table had no room for it) or reset (`false`, while `forced_all`
    /// held). Isolated or not until the next action (C11), whether it
    /// is served by `<overflow>` or gets partitions later.
    own: BTreeMap<usize, bool>,
    next_inc: u64,
    /// Insertions so far: the clock of C9's least-recently-used order.
    /// Recency is told apart only across an insertion (an approximate
    /// LRU, the sampled order of `core/src/table/evict.rs`): two
    /// partitions last used between the same two insertions may be
    /// evicted in either order, one used before an insertion the other was
    /// used after may not.
    tick: u64,
    now_ms: u64,
    live: Vec<(Permit<'a>, MPermit)>,
}

/// What the snapshot lists: tenant partitions by index, and `<overflow>`.
struct Listed {
    tenants: BTreeMap<usize, PartitionMetrics>,
    overflow: Option<PartitionMetrics>,
}

fn fail<T>(msg: String) -> Result<T, TestCaseError> {
    Err(TestCaseError::fail(msg))
}

impl<'a> Run<'a> {
    fn name(&self, t: usize) -> &str {
        &self.tenants[t]
    }

    fn listed(&self) -> Result<Listed, TestCaseError> {
        let mut m = self.bank.metrics();
        let mut out = Listed {
            tenants: BTreeMap::new(),
            overflow: None,
        };
        for p in m.dependencies.remove(0).partitions {
            if p.partition == OVERFLOW {
                out.overflow = Some(p);
            } else if let Some(i) = self.tenants.iter().position(|t| *t == p.partition) {
                out.tenants.insert(i, p);
            } else {
                return fail(format!("C9: the snapshot lists unknown partition {p:?}"));
            }
        }
        Ok(out)
    }

    /// C9's order for a victim `v` when room is needed: never open,
    /// half-open or forced; idle (or possibly idle) ones freely; a closed
    /// one with counts only when nothing is idle and nothing evictable was
    /// certainly used less recently.
    fn may_evict(&self, v: usize, classes: &BTreeMap<usize, Evict>) -> Result<(), String> {
        match classes[&v] {
            Evict::Never => Err(format!("{} is not evictable", self.name(v))),
            Evict::Idle | Evict::MaybeIdle => Ok(()),
            Evict::Counted | Evict::Held => {
                if let Some((i, _)) = classes.iter().find(|&(_, c)| *c == Evict::Idle) {
                    return Err(format!("{} is idle", self.name(*i)));
                }
                let lv = self.held[&v].last_admit;
                for (&c, &class) in classes {
                    let older = self.held[&c].last_any < lv;
                    let other = !matches!(class, Evict::Never | Evict::Held);
                    if c != v && other && older {
                        return Err(format!("{} was used less recently", self.name(c)));
                    }
                }
                Ok(())
            }
        }
    }

    /// Reads the table's partitions after a step, checks the change is one
    /// C9 allows and follows it. `cand`: the tenant the step may insert;
    /// `must_place`: whether it must get a partition when one can be had
    /// (an admission, a force_open) or may go without (a reset of a tenant
    /// the table does not hold). Returns whether `cand` was inserted.
    fn sync(
        &mut self,
        cand: Option<usize>,
        touched: Option<usize>,
        must_place: bool,
    ) -> Result<bool, TestCaseError> {
        let listed: BTreeSet<usize> = self.listed()?.tenants.into_keys().collect();
        let held: BTreeSet<usize> = self.held.keys().copied().collect();
        let added: Vec<usize> = listed.difference(&held).copied().collect();
        let removed: Vec<usize> = held.difference(&listed).copied().collect();
        if listed.len() > self.max {
            return fail(format!(
                "C9: {} partitions listed with max_tenants {}",
                listed.len(),
                self.max
            ));
        }
        if let Some(&a) = added.iter().find(|&&a| Some(a) != cand) {
            return fail(format!(
                "C9/C10: a partition appeared for {} without an admission that may insert it",
                self.name(a)
            ));
        }
        let inserted = !added.is_empty();
        let full = held.len() >= self.max;
        let classes: BTreeMap<usize, Evict> = self
            .held
            .iter()
            .map(|(&t, p)| (t, p.b.evict(self.now_ms)))
            .collect();
        let mut needed = inserted && full;
        for &v in &removed {
            // An idle partition loses nothing when it goes (C9), needed
            // or not; it cannot be the one this step just used.
            if classes[&v] == Evict::Idle && Some(v) != touched {
                continue;
            }
            if !needed {
                return fail(format!(
                    "C9: {} ({:?}) was evicted when no room was needed",
                    self.name(v),
                    classes[&v]
                ));
            }
            if let Err(why) = self.may_evict(v, &classes) {
                return fail(format!(
                    "C9: {} ({:?}) was evicted for {} but {why}",
                    self.name(v),
                    classes[&v],
                    self.name(cand.unwrap_or_default())
                ));
            }
            needed = false;
        }
        if let (Some(c), false, true) = (cand, inserted, must_place) {
            if !full {
                return fail(format!(
                    "C9: {} got no partition with {} of {} held",
                    self.name(c),
                    held.len(),
                    self.max
                ));
            }
            let evictable = |c: &Evict| !matches!(c, Evict::Never | Evict::Held);
            if let Some((v, class)) = classes.iter().find(|&(_, c)| evictable(c)) {
                return fail(format!(
                    "C9: {} got no partition while {} ({class:?}) was evictable",
                    self.name(c),
                    self.name(*v)
                ));
            }
        }
        for v in removed {
            self.held.remove(&v);
        }
        if let (Some(c), true) = (cand, inserted) {
            self.next_inc += 1;
            self.tick += 1;
            let b = if self.starts_forced(c) {
                Breaker::forced(self.cfg)
            } else {
                Breaker::new(self.cfg)
            };
            self.held.insert(
                c,
                Part {
                    inc: self.next_inc,
                    b,
                    last_admit: self.tick,
                    last_any: self.tick,
                },
            );
        }
        Ok(inserted)
    }

    fn admit(&mut self, t: usize, dl: Dl) -> Result<(), TestCaseError> {
        let now_ns = self.clock.now().as_nanos();
        let deadline = match dl {
            Dl::None => None,
            Dl::Past => Some(Instant::from_nanos(now_ns.saturating_sub(1))),
            Dl::Now => Some(Instant::from_nanos(now_ns)),
            Dl::Later => Some(Instant::from_nanos(now_ns + 1)),
        };
        let name = self.tenants[t].clone();
        let d = self.dep.admit(Some(&name), deadline).expect("valid tenant");
        let now = self.now_ms;
        let (want, mp) = if matches!(dl, Dl::Past | Dl::Now) {
            // C10: no side effect on the table, counted where the tenant is.
            self.sync(None, Some(t), false)?;
            if let Some(p) = self.held.get_mut(&t) {
                p.last_any = self.tick;
                (p.b.admit_expired(), None)
            } else {
                // A tenant without a partition: the expiry may be counted
                // with `<overflow>`, or nowhere.
                let seen = self
                    .listed()?
                    .overflow
                    .map_or(0, |o| o.deadline_expired_total);
                if seen == self.overflow.m.deadline_expired + 1 {
                    self.overflow.m.deadline_expired += 1;
                }
                (Seen::EXPIRED, None)
            }
        } else {
            let held = self.held.contains_key(&t);
            let inserted = !held && self.sync(Some(t), Some(t), true)?;
            if held {
                self.sync(None, Some(t), false)?;
            }
            let tick = self.tick;
            let forced = self.starts_forced(t);
            match self.held.get_mut(&t) {
                Some(p) if held || inserted => {
                    p.last_admit = tick;
                    p.last_any = tick;
                    let (seen, perm) = p.b.admit(now);
                    (seen, perm.map(|(g, probe)| (p.inc, g, probe)))
                }
                _ if forced => {
                    // C11: a tenant forced open, by itself or with all, stays isolated
                    // while `<overflow>` serves it.
                    self.overflow.m.partition_overflow += 1;
                    self.overflow.m.forced_open_rejects += 1;
                    let seen = Seen::Rejected {
                        reason: RejectReason::ForcedOpen,
                        retry_after: None,
                    };
                    (seen, None)
                }
                _ => {
                    self.overflow.m.partition_overflow += 1;
                    let (seen, perm) = self.overflow.admit(now);
                    (seen, perm.map(|(g, probe)| (0, g, probe)))
                }
            }
        };
        prop_assert_eq!(
            Seen::of(&d),
            want,
            "admission of {} (deadline {:?}, served by {})",
            name,
            dl,
            self.dep.partition_of(Some(&name))
        );
        if let (Decision::Admitted(p), Some((inc, generation, probe))) = (d, mp) {
            let mp = MPermit {
                inc,
                tenant: t,
                generation,
                probe,
            };
            self.live.push((p, mp));
        }
        Ok(())
    }

    fn record(&mut self, i: usize, o: Outcome, drop_it: bool) -> Result<(), TestCaseError> {
        if self.live.is_empty() {
            return Ok(());
        }
        let (p, mp) = self.live.swap_remove(i % self.live.len());
        if drop_it {
            drop(p);
        } else {
            p.record(o);
        }
        let (now, tick) = (self.now_ms, self.tick);
        let dep = self.dep;
        let name = self.tenants[mp.tenant].clone();
        if mp.inc == 0 {
            let bank = self.bank;
            self.overflow
                .record(mp.generation, mp.probe, o, now, &mut || {
                    let m = bank.metrics();
                    let parts = &m.dependencies[0].partitions;
                    parts
                        .iter()
                        .any(|p| p.partition == OVERFLOW && p.state == State::Open)
                });
        } else if let Some(p) = self.held.get_mut(&mp.tenant).filter(|p| p.inc == mp.inc) {
            p.last_any = tick;
            p.b.record(mp.generation, mp.probe, o, now, &mut || {
                dep.state(Some(&name)).expect("valid tenant") == State::Open
            });
        } else {
            self.late_of_evicted(mp)?;
        }
        self.sync(None, None, false)?;
        Ok(())
    }

    /// C9, C13: a record of a partition evicted since its admission is a
    /// late record of the dependency: `<overflow>` lists it (or the same
    /// tenant's new partition, which is no other tenant's); it reaches no
    /// other tenant's partition.
    fn late_of_evicted(&mut self, mp: MPermit) -> Result<(), TestCaseError> {
        let listed = self.listed()?;
        let mut grew = Vec::new();
        if listed.overflow.as_ref().map_or(0, |o| o.late_records_total)
            > self.overflow.m.late_records
        {
            grew.push(None);
        }
        for (t, p) in &listed.tenants {
            let want = self.held.get(t).map_or(0, |h| h.b.m.late_records);
            if p.late_records_total > want {
                grew.push(Some(*t));
            }
        }
        match grew[..] {
            [None] => self.overflow.m.late_records += 1,
            [Some(t)] if t == mp.tenant => {
                let p = self.held.get_mut(&t).expect("listed and synced");
                p.b.m.late_records += 1;
            }
            [Some(t)] => {
                return fail(format!(
                    "C9: a late record of evicted {}'s partition was counted on {}'s",
                    self.name(mp.tenant),
                    self.name(t)
                ))
            }
            _ => {
                return fail(format!(
                    "C9/C13: a record of evicted {}'s partition was not counted as one late record (grew: {grew:?})",
                    self.name(mp.tenant)
                ))
            }
        }
        Ok(())
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        let tick = self.tick;
        match op {
            Op::Admit(t, dl) => self.admit(t, dl)?,
            Op::Record(i, o) => self.record(i, o, false)?,
            Op::Drop(i) => self.record(i, Outcome::Cancelled, true)?,
            Op::Advance(ms) => {
                self.clock.advance(Duration::from_millis(ms));
                self.now_ms += ms;
                self.sync(None, None, false)?;
            }
            Op::Reset(Some(t)) => {
                let name = self.tenants[t].clone();
                self.dep.reset(Some(&name));
                // C11: closed from now on, also while a force of all holds,
                // wherever it is served; asking never makes a partition.
                if self.forced_all {
                    self.own.insert(t, false);
                } else {
                    self.own.remove(&t);
                }
                if let Some(p) = self.held.get_mut(&t) {
                    p.b.reset();
                    p.last_any = tick;
                }
                self.sync(None, Some(t), false)?;
            }
            Op::ForceOpen(Some(t)) => {
                let name = self.tenants[t].clone();
                self.dep.force_open(Some(&name));
                if let Some(p) = self.held.get_mut(&t) {
                    p.b.force_open();
                    p.last_any = tick;
                    self.own.remove(&t);
                    self.sync(None, Some(t), false)?;
                } else if self.sync(Some(t), Some(t), true)? {
                    self.held.get_mut(&t).expect("inserted").b.force_open();
                    self.own.remove(&t);
                } else {
                    // Not placed: the table is full of partitions that hold
                    // an outage, and the shared `<overflow>` must not be
                    // forced for one tenant (C9); `check` sees that it was
                    // not. The tenant alone stays isolated (C11).
                    self.own.insert(t, true);
                }
            }
            Op::Reload { n, pct, half_open } => {
                let (budget, threshold, open_ms, backoff) = half_open;
                let policy = match self.cfg.policy {
                    Policy::Consecutive(_) => Policy::Consecutive(n),
                    Policy::Rate { window_ms, .. } => Policy::Rate {
                        pct,
                        min_calls: n,
                        window_ms,
                    },
                };
                let cfg = Cfg {
                    policy,
                    budget,
                    threshold,
                    open_ms,
                    backoff,
                };
                let yaml = cfg.yaml(
                    "payments_client",
                    "tenant",
                    &format!("    max_tenants: {}\n", self.max),
                );
                let profile = breakerbank::Profile::from_yaml(&yaml)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.bank
                    .reload(profile)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.cfg = cfg;
                for p in self.held.values_mut() {
                    p.b.reload(cfg);
                }
                self.overflow.reload(cfg);
                self.sync(None, None, false)?;
            }
            Op::Reset(None) | Op::ForceOpen(None) => {
                let force = matches!(op, Op::ForceOpen(None));
                if force {
                    self.dep.force_open(None);
                } else {
                    self.dep.reset(None);
                }
                self.forced_all = force;
                self.own.clear();
                for p in self.held.values_mut() {
                    if force {
                        p.b.force_open();
                    } else {
                        p.b.reset();
                    }
                    p.last_any = tick;
                }
                // `<overflow>` is reset with the rest, never forced: it
                // also serves tenants reset one by one while the force
                // holds.
                if !force {
                    self.overflow.reset();
                }
                self.sync(None, None, false)?;
            }
            Op::Fail(t, n) => {
                for _ in 0..n {
                    let before = self.live.len();
                    self.admit(t, Dl::None)?;
                    if self.live.len() > before {
                        self.record(before, Outcome::Failure, false)?;
                    }
                    self.check()?;
                }
            }
        }
        self.check()
    }

    /// Whether tenant `t`, with no partition, is forced open: by its own
    /// action if it has one since the last dependency-wide one, else by
    /// that one (C11).
    fn starts_forced(&self, t: usize) -> bool {
        self.own.get(&t).copied().unwrap_or(self.forced_all)
    }

    /// Every tenant's state and serving partition, every listed
    /// partition's state and counters (C9, C14).
    fn check(&self) -> Result<(), TestCaseError> {
        let now = self.now_ms;
        for (t, name) in self.tenants.iter().enumerate() {
            let want = match self.held.get(&t) {
                Some(p) => p.b.state(now),
                // An unseen or evicted tenant reads as a fresh
                // partition (forced open after a dependency-wide force).
                // C11: forced open one by one, still isolated.
                None if self.starts_forced(t) => State::ForcedOpen,
                None => State::Closed,
            };
            let got = self.dep.state(Some(name)).expect("valid tenant");
            // C14: a tenant the full table has no room for is served by
            // `<overflow>` and reads its state (the core knows the table
            // full by a hint the model does not keep: either reading).
            let by_overflow = !self.held.contains_key(&t)
                && !self.starts_forced(t)
                && self.held.len() >= self.max
                && got == self.overflow.state(now);
            let want = if by_overflow { got } else { want };
            prop_assert_eq!(got, want, "state() of {}", name);
            let serving = if self.held.contains_key(&t) {
                name.as_str()
            } else {
                OVERFLOW
            };
            prop_assert_eq!(self.dep.partition_of(Some(name)), serving);
        }
        let listed = self.listed()?;
        let names = |s: &mut dyn Iterator<Item = &usize>| -> Vec<String> {
            s.map(|t| self.tenants[*t].clone()).collect()
        };
        prop_assert_eq!(
            names(&mut listed.tenants.keys()),
            names(&mut self.held.keys()),
            "partitions listed"
        );
        for (t, p) in &self.held {
            let m = &listed.tenants[t];
            prop_assert_eq!(m.state, p.b.state(now), "metrics state of {}", m.partition);
            prop_assert_eq!(Counters::of(m), p.b.m, "counters of {}", m.partition);
        }
        match &listed.overflow {
            Some(m) => {
                prop_assert_eq!(
                    m.state,
                    self.overflow.state(now),
                    "metrics state of <overflow>"
                );
                prop_assert_eq!(Counters::of(m), self.overflow.m, "counters of <overflow>");
            }
            None => {
                prop_assert_eq!(
                    self.overflow.state(now),
                    State::Closed,
                    "<overflow> unlisted"
                );
                prop_assert!(self.overflow.m.is_zero(), "<overflow> unlisted but counted");
            }
        }
        Ok(())
    }
}

fn run(cfg: Cfg, max: usize, n_tenants: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let yaml = cfg.yaml(
        "payments_client",
        "tenant",
        &format!("    max_tenants: {max}\n"),
    );
    let profile =
        breakerbank::Profile::from_yaml(&yaml).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile, clock.clone());
    let dep = bank.dependency("payments_client").expect("declared");
    let mut r = Run {
        bank: &bank,
        clock,
        dep: &dep,
        cfg,
        max,
        tenants: (0..n_tenants).map(|i| format!("t{i}")).collect(),
        held: BTreeMap::new(),
        overflow: Breaker::new(cfg),
        forced_all: false,
        own: BTreeMap::new(),
        next_inc: 0,
        tick: 0,
        now_ms: 0,
        live: Vec::new(),
    };
    for (step, op) in ops.into_iter().enumerate() {
        let op = match op {
            Op::Admit(t, dl) => Op::Admit(t % n_tenants, dl),
            Op::Reset(t) => Op::Reset(t.map(|t| t % n_tenants)),
            Op::ForceOpen(t) => Op::ForceOpen(t.map(|t| t % n_tenants)),
            Op::Fail(t, n) => Op::Fail(t % n_tenants, n),
            op => op,
        };
        r.step(op)
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
    }
    Ok(())
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Failure),
        Just(Outcome::Cancelled)
    ]
}

/// Low tenant indices come up more often, so the same few tenants meet
/// again after being evicted.
fn tenant() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..3, 0usize..12]
}

fn op() -> impl Strategy<Value = Op> {
    let dl = prop_oneof![
        8 => Just(Dl::None),
        1 => Just(Dl::Past),
        1 => Just(Dl::Now),
        1 => Just(Dl::Later),
    ];
    let advance = prop_oneof![0u64..5, 0u64..2_000, 0u64..20_000, 60_000u64..130_000];
    prop_oneof![
        8 => (tenant(), dl).prop_map(|(t, dl)| Op::Admit(t, dl)),
        5 => (any::<usize>(), outcome()).prop_map(|(i, o)| Op::Record(i, o)),
        1 => any::<usize>().prop_map(Op::Drop),
        3 => advance.prop_map(Op::Advance),
        1 => tenant().prop_map(|t| Op::Reset(Some(t))),
        1 => tenant().prop_map(|t| Op::ForceOpen(Some(t))),
        1 => prop_oneof![Just(Op::Reset(None)), Just(Op::ForceOpen(None))],
        2 => (tenant(), 1u32..5).prop_map(|(t, n)| Op::Fail(t, n)),
    ]
}

/// [`op`] with C20's reloads among them.
fn op_c20() -> impl Strategy<Value = Op> {
    let pct = prop_oneof![Just(25u32), Just(50), Just(75), Just(100)];
    let reload = (1u32..5, pct, half_open()).prop_map(|(n, pct, half_open)| Op::Reload {
        n,
        pct,
        half_open,
    });
    prop_oneof![
        20 => op(),
        1 => reload,
    ]
}

fn half_open() -> impl Strategy<Value = (u32, u32, u64, bool)> {
    let open = prop_oneof![Just(1u64), Just(1_000), Just(5_000), 1u64..30_000];
    (1u32..4, 1u32..3, open, any::<bool>())
}

fn consecutive_cfg() -> impl Strategy<Value = Cfg> {
    (1u32..4, half_open()).prop_map(|(n, (budget, threshold, open_ms, backoff))| Cfg {
        policy: Policy::Consecutive(n),
        budget,
        threshold,
        open_ms,
        backoff,
    })
}

fn rate_cfg() -> impl Strategy<Value = Cfg> {
    let pct = prop_oneof![Just(25u32), Just(50), Just(75), Just(100)];
    let window = prop_oneof![Just(1_000u64), Just(10_000), Just(60_000)];
    (pct, 1u32..5, window, half_open()).prop_map(
        |(pct, min_calls, window_ms, (budget, threshold, open_ms, backoff))| Cfg {
            policy: Policy::Rate {
                pct,
                min_calls,
                window_ms,
            },
            budget,
            threshold,
            open_ms,
            backoff,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn c9_c14_consecutive_tenant_table_matches_reference_model(
        cfg in consecutive_cfg(),
        max in 1usize..4,
        n_tenants in 6usize..13,
        ops in prop::collection::vec(op(), 1..100),
    ) {
        run(cfg, max, n_tenants, ops)?;
    }

    #[test]
    fn c9_c14_failure_rate_tenant_table_matches_reference_model(
        cfg in rate_cfg(),
        max in 1usize..4,
        n_tenants in 6usize..13,
        ops in prop::collection::vec(op(), 1..100),
    ) {
        run(cfg, max, n_tenants, ops)?;
    }

    #[test]
    fn c9_c20_consecutive_tenant_table_with_reloads(
        cfg in consecutive_cfg(),
        max in 1usize..4,
        n_tenants in 6usize..13,
        ops in prop::collection::vec(op_c20(), 1..100),
    ) {
        run(cfg, max, n_tenants, ops)?;
    }

    #[test]
    fn c9_c20_failure_rate_tenant_table_with_reloads(
        cfg in rate_cfg(),
        max in 1usize..4,
        n_tenants in 6usize..13,
        ops in prop::collection::vec(op_c20(), 1..100),
    ) {
        run(cfg, max, n_tenants, ops)?;
    }
}

/// A one-partition table of the consecutive policy (one failure trips).
fn one_slot_bank() -> Bank {
    let cfg = Cfg {
        policy: Policy::Consecutive(1),
        budget: 1,
        threshold: 1,
        open_ms: 1_000,
        backoff: false,
    };
    let yaml = cfg.yaml("payments_client", "tenant", "    max_tenants: 1\n");
    let profile = breakerbank::Profile::from_yaml(&yaml).expect("valid profile");
    Bank::with_clock(profile, ManualClock::new())
}

/// C11: `reset` forces one tenant's breaker closed, also a tenant with no
/// partition while a dependency-wide `force_open` holds and the table has
/// no room (every partition forced, so none evictable): it reads closed
/// and `<overflow>` admits it, while every other tenant, with a partition
/// or without, stays isolated. The model's shrunk case: `max_tenants: 1`,
/// `[Admit(0), ForceOpen(None), Reset(Some(1))]`.
#[test]
fn c11_reset_of_an_unseen_tenant_while_all_are_forced_and_none_evictable_closes_it() {
    let bank = one_slot_bank();
    let dep = bank.dependency("payments_client").expect("declared");
    let Decision::Admitted(p) = dep.admit(Some("t0"), None).expect("valid tenant") else {
        panic!("a fresh tenant is admitted");
    };
    p.record(Outcome::Success);
    dep.force_open(None);
    assert_eq!(dep.partition_of(Some("t0")), "t0");
    assert_eq!(
        dep.state(Some("t1")).expect("valid tenant"),
        State::ForcedOpen
    );
    dep.reset(Some("t1"));
    assert_eq!(
        dep.state(Some("t0")).expect("valid tenant"),
        State::ForcedOpen,
        "the other tenant stays isolated"
    );
    assert_eq!(
        dep.state(Some("t1")).expect("valid tenant"),
        State::Closed,
        "the tenant reset reads closed"
    );
    match dep.admit(Some("t1"), None).expect("valid tenant") {
        Decision::Admitted(p) => p.record(Outcome::Success),
        other => panic!("the tenant reset is refused: {other:?}"),
    }
    assert_eq!(dep.partition_of(Some("t1")), OVERFLOW, "no room: shared");
    for other in ["t0", "t2"] {
        match dep.admit(Some(other), None).expect("valid tenant") {
            Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ForcedOpen, "{other}"),
            Decision::Admitted(_) => panic!("{other}, never reset, was admitted"),
        }
    }
}
