//! Soak: 10,000 tenants churning through two tenant-scoped dependencies of
//! 64 partitions each, under operator actions, checked while it runs
//! (C5, C7, C9, C11, C13).
//!
//! One bank, two dependencies side by side: `ledger_client` trips after
//! consecutive failures, `quota_client` on a failure rate. Eight workers
//! call random tenants of both. 16 tenant ids of the 10,000 always fail,
//! the others always succeed. A ninth thread, the operator, forces open
//! and resets single tenants (the failing ones and 8 of the succeeding
//! ones, its own) or every partition of a dependency. The test thread
//! advances the clock, spot-checks states and metrics, and samples the
//! resident set.
//!
//! The run lasts `BREAKERBANK_SOAK_SECS` seconds (20 by default; `make
//! soak` runs it for minutes). It runs once per process: each `#[test]`
//! below asserts one family of its checks, so a failing family names its
//! clause and leaves the others reporting.
//!
//! What is checked, and why each check is exact rather than statistical:
//!
//! - **A tenant that only succeeds is never open or half-open.** Its
//!   admissions are never refused with `open` or `probe_budget` and never
//!   admitted as probes; `state` never reads open or half-open; no event
//!   announces it opening. Tenants outside the table share the overflow
//!   partition (C9), so the failing tenants record calls served there as
//!   cancelled: the overflow partition counts no failure and cannot trip,
//!   and no refusal of a succeeding tenant is explained by it.
//! - **Forced opens match the operator's actions (C11).** The operator
//!   publishes, for every dependency and for each of its own tenants, a
//!   phase (free, forcing, forced, resetting) and a change count, after
//!   each call into the bank returns. A worker reads them before and after
//!   its admission: when both readings are equal the phase held for the
//!   whole admission, so a stable `forced` must refuse with `forced_open`
//!   and a stable `free` must not; readings that differ allow either.
//! - **An always-failing tenant trips within its policy (C5).** Failures
//!   are logged per episode, keyed by the permit's slot and generation
//!   (a generation changes on every transition and slot hand-over, so the
//!   key names one closed episode of one owner). Once the log holds
//!   `consecutive_failures` failures of an episode, or `min_calls` whose
//!   records began within 90% of the window (the rolling window covers at
//!   least that much) of a clock reading taken after they all returned,
//!   that episode is marked tripped; a worker that saw the mark before
//!   admitting must not get a closed permit of that episode. Eviction may
//!   lose counts (C9), but it ends the episode: the key is never current
//!   again, so it cannot excuse or fake a finding.
//! - **Probes in flight never exceed the budget (C7).** Per tenant and
//!   dependency, a counter goes up after a probe is admitted and down just
//!   before its outcome: a lower bound of the slots really held, so a value
//!   above the budget is a violation. Open, half-open and forced partitions
//!   and closed ones with probes out are never evicted (C9), so the tenant
//!   keeps the partition that holds those slots.
//! - **No probe slot leaks (C7, C13).** After the run, with every permit
//!   recorded or dropped, each failing tenant is brought open (tripped if
//!   it is closed), then half-open by time, and must admit exactly
//!   `probe_budget` probes and refuse the next with `probe_budget`; after
//!   those probes are dropped, exactly `probe_budget` again.
//! - **Memory stays flat (C9).** The live heap (a counting allocator,
//!   sampled every 100 ms) in the first and last tenths after a warm-up
//!   (medians) differ by less than [`HEAP_GROWTH_BOUND`] (judged in runs
//!   long enough for [`MIN_HEAP_SAMPLES`] a tenth; `memory.rs` tests what
//!   a dropped bank gives back);
//!   the metrics never list more than `max_tenants` partitions plus the
//!   overflow.
//!
//! The clock is a [`ManualClock`] advanced by the test thread in steps of
//! a quarter of the open period: an open period ends only when the test
//! moves time, so no check depends on how fast the machine runs, and the
//! open → half-open → open cycles of the failing tenants happen at the same
//! pace on a loaded 2-core machine as on an idle one. The total advance is
//! capped below `recovery_bound` (the default probe timeout of C7), so a
//! probe held by a descheduled worker never times out and the budget check
//! needs no allowance for it. There is no assertion on speed.

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

use breakerbank::{
    Bank, Decision, Dependency, DependencyMetrics, Event, EventKind, ManualClock, Outcome, Permit,
    Profile, RawPermit, RejectReason, State,
};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const WORKERS: usize = 8;
const TENANTS: usize = 10_000;
const MAX_TENANTS: usize = 64;
/// Tenant `i` always fails when `i % FAILING_EVERY == FAILING_AT`: 16 of
/// the 10,000. With the operator's 8 and a pending slot per worker, at most
/// 32 partitions are ever unevictable: the table never fills with them
/// unless every partition is forced open at once.
const FAILING_EVERY: usize = 625;
const FAILING_AT: usize = 7;
/// The operator's own succeeding tenants: 8 of the 10,000.
const OPERATED_EVERY: usize = 1250;
const OPERATED_AT: usize = 11;

const CONSECUTIVE: u32 = 5;
const MIN_CALLS: usize = 8;
const WINDOW: Duration = Duration::from_secs(60);
const OPEN: Duration = Duration::from_millis(250);
/// Clock step of the test thread, about once a millisecond.
const STEP: Duration = Duration::from_millis(62);
/// `recovery_bound` of both dependencies; the clock stops advancing at
/// 90% of it (after about 3.6 hours of wall time), see the module docs.
const RECOVERY_BOUND_H: u64 = 1000;
/// Allowed growth of the live heap from the start of the run after the
/// warm-up to its last tenth (the median of each: a sample can catch an
/// event backlog or the epoch collector's bags at their peak).
/// The run admits millions of calls into 64 slots per dependency: a leak of
/// even a few bytes per slot hand-over or per call would pass it within
/// seconds; allocator arenas and the epoch collector's bags stay below it.
const HEAP_GROWTH_BOUND: u64 = 16 << 20;
/// Samples each tenth needs before the heap's growth is judged (a run of
/// about 6 s or more): a median of fewer is one moment of the epoch
/// collector's backlog, which on a loaded machine (cargo-mutants' 2-second
/// soaks, two at once) passed the bound with no leak at all.
const MIN_HEAP_SAMPLES: usize = 5;
/// Findings kept in full per family (the rest are counted).
const KEPT: usize = 20;

fn profile() -> Profile {
    Profile::from_yaml(&format!(
        "dependencies:
  ledger_client:
    isolation: tenant
    max_tenants: {MAX_TENANTS}
    trip: {{consecutive_failures: {CONSECUTIVE}}}
    open_duration: {open}ms
    half_open: {{probe_budget: 2, success_threshold: 2}}
    fallback: {{kind: error, code: LEDGER_DOWN}}
    recovery_bound: {RECOVERY_BOUND_H}h
  quota_client:
    isolation: tenant
    max_tenants: {MAX_TENANTS}
    trip: {{failure_rate: 0.5, min_calls: {MIN_CALLS}, window: {window}s}}
    open_duration: {open}ms
    half_open: {{probe_budget: 3, success_threshold: 1}}
    fallback: {{kind: error, code: QUOTA_DOWN}}
    recovery_bound: {RECOVERY_BOUND_H}h
",
        open = OPEN.as_millis(),
        window = WINDOW.as_secs(),
    ))
    .expect("valid soak profile")
}

const DEPS: [&str; 2] = ["ledger_client", "quota_client"];
const BUDGETS: [u32; 2] = [2, 3];

fn soak_duration() -> Duration {
    let secs = std::env::var("BREAKERBANK_SOAK_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(20.0);
    Duration::from_secs_f64(secs)
}

/// xorshift64: cheap per-thread choices.
fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

fn tenant_name(i: usize) -> String {
    format!("tenant-{i:05}")
}

fn tenant_index(name: &str) -> Option<usize> {
    name.strip_prefix("tenant-")?.parse().ok()
}

fn is_failing(i: usize) -> bool {
    i % FAILING_EVERY == FAILING_AT
}

fn is_operated(i: usize) -> bool {
    i % OPERATED_EVERY == OPERATED_AT
}

// ---------------------------------------------------------------- findings

/// The check families, one `#[test]` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// A succeeding tenant admitted as a probe or refused with `open` or
    /// `probe_budget` (C5, C9).
    NeverOpen,
    /// A forced open that no operator action explains (C11).
    ForcedRefusal,
    /// A tenant forced open by the operator and not yet reset, admitted or
    /// read as not forced (C11).
    ForcedHolds,
    /// A failing tenant admitted past its trip (C5).
    Trip,
    /// More probes in flight than the budget (C7).
    Probes,
    /// A probe slot missing or extra after the run (C7, C13).
    SlotLeak,
    /// The resident set grew, or a metrics listing went past the arena's
    /// bound (C9).
    Memory,
    /// More than `max_tenants` partitions once the run is over (C9).
    PartitionCount,
    /// `state` or the metrics reading a succeeding tenant open or
    /// half-open (C14).
    Reads,
    /// A transition event naming a partition it did not happen to (C16).
    EventNames,
}

const FAMILIES: [Family; 10] = [
    Family::NeverOpen,
    Family::ForcedRefusal,
    Family::ForcedHolds,
    Family::Trip,
    Family::Probes,
    Family::SlotLeak,
    Family::Memory,
    Family::PartitionCount,
    Family::Reads,
    Family::EventNames,
];

#[derive(Default)]
struct Findings {
    counts: [AtomicU64; 10],
    kept: [Mutex<Vec<String>>; 10],
}

impl Findings {
    fn add(&self, family: Family, what: impl FnOnce() -> String) {
        let i = family as usize;
        if self.counts[i].fetch_add(1, SeqCst) < KEPT as u64 {
            self.kept[i].lock().unwrap().push(what());
        }
    }
}

// ---------------------------------------------------------- operator model

const FREE: u64 = 0;
const FORCING: u64 = 1;
const FORCED: u64 = 2;
const RESETTING: u64 = 3;

/// What the operator has done to one scope (a dependency's every partition,
/// or one tenant): `changes << 2 | phase`. Written by the operator only,
/// after each call into the bank returned (SeqCst, so a worker that reads
/// a phase also sees the bank changed by the call before it).
#[derive(Default)]
struct Scope(AtomicU64);

impl Scope {
    fn read(&self) -> u64 {
        self.0.load(SeqCst)
    }
    fn phase(&self) -> u64 {
        self.read() & 3
    }
    fn set(&self, phase: u64) {
        let v = self.0.load(SeqCst);
        self.0.store((((v >> 2) + 1) << 2) | phase, SeqCst);
    }
}

/// Whether a tenant was forced open for the whole of an admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forced {
    Surely,
    Never,
    Maybe,
}

/// Readings of the dependency's scope and the tenant's (0 for a tenant the
/// operator never acts on alone), before and after.
fn forced(all: (u64, u64), one: (u64, u64)) -> Forced {
    if all.0 != all.1 {
        return Forced::Maybe;
    }
    match all.0 & 3 {
        FORCED => Forced::Surely,
        FREE if one.0 == one.1 => match one.0 & 3 {
            FORCED => Forced::Surely,
            FREE => Forced::Never,
            _ => Forced::Maybe,
        },
        _ => Forced::Maybe,
    }
}

// ------------------------------------------------------------ failure logs

/// The failures of one closed episode: its key, their count, and the clock
/// readings taken before their records (the last `MIN_CALLS`).
struct EpisodeLog {
    key: (u32, u64),
    failures: u32,
    began: VecDeque<u64>,
}

/// One failing tenant's logs under one dependency. Bounded: the last few
/// episodes are enough, an older one is never current again.
#[derive(Default)]
struct FailLog {
    episodes: VecDeque<EpisodeLog>,
    tripped: VecDeque<(u32, u64)>,
}

const EPISODES_KEPT: usize = 8;

impl FailLog {
    /// Logs a failure of `key` whose record began at `began`; `now` is read
    /// after it returned. Whether the episode must have tripped by now.
    fn log(&mut self, key: (u32, u64), began: u64, now: u64, rate_policy: bool) -> bool {
        let pos = match self.episodes.iter().position(|e| e.key == key) {
            Some(p) => p,
            None => {
                if self.episodes.len() == EPISODES_KEPT {
                    self.episodes.pop_front();
                }
                self.episodes.push_back(EpisodeLog {
                    key,
                    failures: 0,
                    began: VecDeque::with_capacity(MIN_CALLS),
                });
                self.episodes.len() - 1
            }
        };
        let e = &mut self.episodes[pos];
        e.failures += 1;
        if e.began.len() == MIN_CALLS {
            e.began.pop_front();
        }
        e.began.push_back(began);
        let must_trip = if rate_policy {
            // Every one of the last MIN_CALLS failures began within 90% of
            // the window before `now`: all are in the window when the last
            // of them was judged (judged no later than `now`).
            let horizon = now.saturating_sub(WINDOW.as_nanos() as u64 * 9 / 10);
            e.began.len() == MIN_CALLS && e.began.iter().all(|&b| b >= horizon)
        } else {
            e.failures >= CONSECUTIVE
        };
        if must_trip && !self.tripped.contains(&key) {
            if self.tripped.len() == EPISODES_KEPT {
                self.tripped.pop_front();
            }
            self.tripped.push_back(key);
        }
        must_trip
    }
}

// ------------------------------------------------------------------ shared

struct Shared {
    deps: [Dependency; 2],
    clock: ManualClock,
    names: Vec<String>,
    /// Index into `one` and `logs` for the tenants the operator acts on
    /// alone (the failing ones and its own).
    single: Vec<Option<usize>>,
    /// The operator's single tenants, by that index.
    singles: Vec<usize>,
    all: [Scope; 2],
    one: [Vec<Scope>; 2],
    /// Per dependency and single index (only failing tenants use theirs).
    logs: [Vec<Mutex<FailLog>>; 2],
    in_flight: [Vec<AtomicU32>; 2],
    max_in_flight: [AtomicU32; 2],
    findings: Findings,
    stop_workers: AtomicBool,
    stop_operator: AtomicBool,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    admitted: AtomicU64,
    refused_open: AtomicU64,
    refused_budget: AtomicU64,
    refused_forced: AtomicU64,
    probes: AtomicU64,
    trips_checked: AtomicU64,
    overflow_calls: AtomicU64,
    operator_actions: AtomicU64,
    state_checks: AtomicU64,
    events: AtomicU64,
    clock_steps: AtomicU64,
    /// Most tenant partitions one metrics snapshot listed.
    listed_max: AtomicU64,
    /// Snapshots that listed more than `max_tenants`, or a tenant twice.
    listed_over: AtomicU64,
    listed_twice: AtomicU64,
}

impl Shared {
    fn readings(&self, d: usize, t: usize) -> (u64, u64) {
        let one = self.single[t].map_or(0, |s| self.one[d][s].read());
        (self.all[d].read(), one)
    }
}

/// A permit a worker keeps for a while before its outcome.
enum Held<'a> {
    Probe {
        d: usize,
        s: usize,
        permit: Permit<'a>,
    },
    Closed {
        d: usize,
        t: usize,
        raw: RawPermit,
    },
}

// ------------------------------------------------------------------ worker

fn worker(sh: &Shared, id: usize) {
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ ((id as u64 + 1) << 32);
    let mut held: Vec<Held<'_>> = Vec::with_capacity(4);
    while !sh.stop_workers.load(SeqCst) {
        let d = (next(&mut rng) % 2) as usize;
        let t = match next(&mut rng) % 16 {
            0..=3 => (next(&mut rng) as usize % 16) * FAILING_EVERY + FAILING_AT,
            4 => (next(&mut rng) as usize % 8) * OPERATED_EVERY + OPERATED_AT,
            _ => next(&mut rng) as usize % TENANTS,
        };
        call(sh, d, t, &mut rng, &mut held);
        if held.len() > 3 || (!held.is_empty() && next(&mut rng) % 8 == 0) {
            let h = held.remove(0);
            finish(sh, h, &mut rng);
        }
    }
    for h in held.drain(..) {
        finish(sh, h, &mut rng);
    }
}

fn call<'a>(sh: &'a Shared, d: usize, t: usize, rng: &mut u64, held: &mut Vec<Held<'a>>) {
    let dep = &sh.deps[d];
    let name = sh.names[t].as_str();
    let failing = is_failing(t);
    let before = sh.readings(d, t);
    // The episodes marked tripped before this admission began.
    let tripped: Vec<(u32, u64)> = match (failing, sh.single[t]) {
        (true, Some(s)) => sh.logs[d][s]
            .lock()
            .unwrap()
            .tripped
            .iter()
            .copied()
            .collect(),
        _ => Vec::new(),
    };
    let decision = dep.admit(Some(name), None).expect("valid tenant");
    let after = sh.readings(d, t);
    let forced = forced((before.0, after.0), (before.1, after.1));
    let dn = DEPS[d];
    match decision {
        Decision::Rejected(r) => {
            match r.reason {
                RejectReason::ForcedOpen => {
                    sh.stats.refused_forced.fetch_add(1, SeqCst);
                    if forced == Forced::Never {
                        sh.findings.add(Family::ForcedRefusal, || {
                            format!(
                                "{dn}/{name}: refused forced_open while no operator action \
                                 isolated it (operator phases all {:#x}, tenant {:#x})",
                                before.0, before.1
                            )
                        });
                    }
                }
                RejectReason::Open | RejectReason::ProbeBudget => {
                    if r.reason == RejectReason::Open {
                        sh.stats.refused_open.fetch_add(1, SeqCst);
                    } else {
                        sh.stats.refused_budget.fetch_add(1, SeqCst);
                    }
                    if !failing {
                        let part = dep.partition_of(Some(name));
                        sh.findings.add(Family::NeverOpen, || {
                            format!(
                                "{dn}/{name} only ever succeeded but was refused with {} \
                                 (now served by partition {part:?})",
                                r.reason.as_str()
                            )
                        });
                    }
                }
                RejectReason::DeadlineExpired => sh.findings.add(Family::NeverOpen, || {
                    format!("{dn}/{name}: deadline_expired without a deadline")
                }),
            }
            if forced == Forced::Surely && r.reason != RejectReason::ForcedOpen {
                sh.findings.add(Family::ForcedHolds, || {
                    format!(
                        "{dn}/{name}: forced open by the operator but refused with {}",
                        r.reason.as_str()
                    )
                });
            }
        }
        Decision::Admitted(permit) => {
            sh.stats.admitted.fetch_add(1, SeqCst);
            if forced == Forced::Surely {
                sh.findings.add(Family::ForcedHolds, || {
                    format!(
                        "{dn}/{name}: admitted (probe: {}, generation {}) while forced open \
                         by the operator (phases all {:#x}, tenant {:#x}); it now reads {:?} \
                         in partition {:?}",
                        permit.is_probe(),
                        permit.generation(),
                        before.0,
                        before.1,
                        dep.state(Some(name)),
                        dep.partition_of(Some(name)),
                    )
                });
            }
            if !failing {
                if permit.is_probe() {
                    sh.findings.add(Family::NeverOpen, || {
                        format!("{dn}/{name} only ever succeeded but was admitted as a probe")
                    });
                }
                finish_success(dep, permit, rng);
            } else if permit.is_probe() {
                sh.stats.probes.fetch_add(1, SeqCst);
                let s = sh.single[t].expect("failing tenants are single targets");
                let n = sh.in_flight[d][s].fetch_add(1, SeqCst) + 1;
                sh.max_in_flight[d].fetch_max(n, SeqCst);
                if n > BUDGETS[d] {
                    sh.findings.add(Family::Probes, || {
                        format!("{dn}/{name}: {n} probes in flight, budget {}", BUDGETS[d])
                    });
                }
                let h = Held::Probe { d, s, permit };
                if next(rng) % 4 == 0 {
                    held.push(h);
                } else {
                    if next(rng) % 4 == 0 {
                        std::thread::yield_now(); // widen the window
                    }
                    finish(sh, h, rng);
                }
            } else {
                let raw = permit.into_raw();
                let key = (raw.slot(), raw.generation());
                if raw.slot() != 0 && tripped.contains(&key) {
                    sh.findings.add(Family::Trip, || {
                        format!(
                            "{dn}/{name}: admitted a closed call in episode (slot {}, \
                             generation {}) after that episode's failures had reached \
                             its trip policy",
                            raw.slot(),
                            raw.generation()
                        )
                    });
                }
                let h = Held::Closed { d, t, raw };
                if next(rng) % 8 == 0 {
                    held.push(h);
                } else {
                    finish(sh, h, rng);
                }
            }
        }
    }
}

/// A succeeding tenant's outcome, by each of the ways a permit can end.
fn finish_success(dep: &Dependency, permit: Permit<'_>, rng: &mut u64) {
    match next(rng) % 32 {
        0 | 1 => drop(permit),
        2 | 3 => permit.record(Outcome::Cancelled),
        4 => {
            let raw = permit.into_raw();
            dep.record_raw(raw, Outcome::Success);
        }
        _ => permit.record(Outcome::Success),
    }
}

/// A failing tenant's outcome.
fn finish(sh: &Shared, h: Held<'_>, rng: &mut u64) {
    match h {
        Held::Probe { d, s, permit } => {
            sh.in_flight[d][s].fetch_sub(1, SeqCst);
            match next(rng) % 8 {
                0 => drop(permit),
                1 => permit.record(Outcome::Cancelled),
                _ => permit.record(Outcome::Failure),
            }
        }
        Held::Closed { d, t, raw } => {
            let dep = &sh.deps[d];
            if raw.slot() == 0 {
                // Served by the overflow partition, shared with succeeding
                // tenants: a failure there could trip them (as C9 allows);
                // cancelled, it counts for no one.
                sh.stats.overflow_calls.fetch_add(1, SeqCst);
                dep.record_raw(raw, Outcome::Cancelled);
                return;
            }
            let began = sh.clock.now().as_nanos();
            let episode = (raw.slot(), raw.generation());
            dep.record_raw(raw, Outcome::Failure);
            let s = sh.single[t].expect("failing tenants are single targets");
            let mut log = sh.logs[d][s].lock().unwrap();
            // Read under the lock, after this record and every one logged
            // before it returned.
            let now = sh.clock.now().as_nanos();
            if log.log(episode, began, now, d == 1) {
                sh.stats.trips_checked.fetch_add(1, SeqCst);
            }
        }
    }
}

// ---------------------------------------------------------------- operator

fn operator(sh: &Shared) {
    let mut rng = 0xD1B5_4A32_D192_ED03_u64;
    while !sh.stop_operator.load(SeqCst) {
        std::thread::sleep(Duration::from_micros(200 + next(&mut rng) % 3000));
        let d = (next(&mut rng) % 2) as usize;
        let dep = &sh.deps[d];
        sh.stats.operator_actions.fetch_add(1, SeqCst);
        if sh.all[d].phase() == FORCED {
            // While everything is forced the operator only ends it: a
            // single tenant's reset under it would make the model guess.
            if next(&mut rng) % 2 == 0 {
                reset_all(sh, d);
            }
            continue;
        }
        match next(&mut rng) % 16 {
            0 => {
                sh.all[d].set(FORCING);
                dep.force_open(None);
                sh.all[d].set(FORCED);
            }
            1 => reset_all(sh, d),
            _ => {
                let s = next(&mut rng) as usize % sh.singles.len();
                let name = Some(sh.names[sh.singles[s]].as_str());
                let scope = &sh.one[d][s];
                if scope.phase() == FREE && next(&mut rng) % 2 == 0 {
                    scope.set(FORCING);
                    dep.force_open(name);
                    scope.set(FORCED);
                } else {
                    scope.set(RESETTING);
                    dep.reset(name);
                    scope.set(FREE);
                }
            }
        }
    }
    // Leave no dependency-wide force behind: the checks after the run
    // handle single tenants one by one.
    for d in 0..2 {
        if sh.all[d].phase() == FORCED {
            reset_all(sh, d);
        }
    }
}

/// `reset(None)`: ends the dependency-wide force and every single one.
fn reset_all(sh: &Shared, d: usize) {
    let forced: Vec<&Scope> = sh.one[d].iter().filter(|s| s.phase() != FREE).collect();
    sh.all[d].set(RESETTING);
    for s in &forced {
        s.set(RESETTING);
    }
    sh.deps[d].reset(None);
    for s in &forced {
        s.set(FREE);
    }
    sh.all[d].set(FREE);
}

// ------------------------------------------------------------------ events

/// Transition events: one naming a failing tenant is expected; one naming
/// a succeeding tenant or the overflow (no failure reaches either, so
/// neither can open), or no tenant at all, misnames the partition it
/// happened to. The admissions above check the states themselves.
fn on_event(sh: &Shared, e: &Event) {
    sh.stats.events.fetch_add(1, SeqCst);
    if e.kind != EventKind::Transition {
        return;
    }
    let named_right = match tenant_index(&e.partition) {
        Some(t) => is_failing(t) || !matches!(e.to, Some(State::Open | State::HalfOpen)),
        None if e.partition == "<overflow>" => !matches!(e.to, Some(State::Open | State::HalfOpen)),
        None => false,
    };
    if !named_right {
        sh.findings.add(Family::EventNames, || {
            format!(
                "event: {}/{:?} went {:?} -> {:?} at {:?}",
                e.dependency, e.partition, e.from, e.to, e.at
            )
        });
    }
}

// ------------------------------------------------------------ monitoring

/// Resident set in bytes, from `/proc/self/statm` (its second field, in
/// pages); 0 where there is no such file.
/// Counts the heap bytes live in this test binary: what "memory stays
/// flat" is judged by. (The resident set is reported too, but glibc keeps
/// the pages of a passing peak, such as an event backlog, long after it
/// drains, so it would judge the allocator, not the bank.)
struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// count is a side effect.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as u64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as u64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes live now (see [`Counting`]).
fn live_heap() -> u64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * page_size()
}

#[cfg(target_os = "linux")]
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; _SC_PAGESIZE reads a constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096)
}

#[cfg(not(target_os = "linux"))]
fn page_size() -> u64 {
    4096
}

/// Reads `state` of a few random succeeding tenants and checks it against
/// the operator model; then the metrics' partitions.
fn spot_check(sh: &Shared, bank: &Bank, rng: &mut u64, with_metrics: bool) {
    for _ in 0..32 {
        let d = (next(rng) % 2) as usize;
        let t = next(rng) as usize % TENANTS;
        if is_failing(t) {
            continue;
        }
        let name = sh.names[t].as_str();
        let before = sh.readings(d, t);
        let state = sh.deps[d].state(Some(name)).expect("valid tenant");
        let after = sh.readings(d, t);
        sh.stats.state_checks.fetch_add(1, SeqCst);
        let dn = DEPS[d];
        match (state, forced((before.0, after.0), (before.1, after.1))) {
            (State::Open | State::HalfOpen, _) => sh.findings.add(Family::Reads, || {
                format!("{dn}/{name} only ever succeeded but state() read {state:?}")
            }),
            (State::ForcedOpen, Forced::Never) => sh.findings.add(Family::ForcedRefusal, || {
                format!("{dn}/{name}: state() read forced open, no operator action isolated it")
            }),
            (State::Closed, Forced::Surely) => sh.findings.add(Family::ForcedHolds, || {
                format!("{dn}/{name}: state() read closed while forced open by the operator")
            }),
            _ => {}
        }
    }
    if !with_metrics {
        return;
    }
    for (d, m) in bank.metrics().dependencies.iter().enumerate() {
        check_listing(sh, d, m, 2 * MAX_TENANTS);
        for p in &m.partitions {
            let succeeding = tenant_index(&p.partition).is_some_and(|t| !is_failing(t));
            if succeeding && matches!(p.state, State::Open | State::HalfOpen) {
                sh.findings.add(Family::Reads, || {
                    format!(
                        "{}/{} only ever succeeded but the metrics list it {:?}",
                        DEPS[d], p.partition, p.state
                    )
                });
            }
        }
    }
}

/// The metrics' tenant partitions of dependency `d`: at most `limit`
/// (C9: every output that names partitions is bounded). A snapshot walks
/// the slots while tenants move between them, so during the run it may
/// list a tenant evicted behind the walk and its successor ahead of it:
/// the bound there is the arena's two slots a tenant; once the run is
/// over it is `max_tenants`.
fn check_listing(sh: &Shared, d: usize, m: &DependencyMetrics, limit: usize) {
    let names: Vec<&str> = m
        .partitions
        .iter()
        .map(|p| p.partition.as_str())
        .filter(|p| *p != "<overflow>")
        .collect();
    let distinct: HashSet<&str> = names.iter().copied().collect();
    let st = &sh.stats;
    st.listed_max.fetch_max(names.len() as u64, SeqCst);
    if names.len() > MAX_TENANTS {
        st.listed_over.fetch_add(1, SeqCst);
    }
    if distinct.len() < names.len() {
        st.listed_twice.fetch_add(1, SeqCst);
    }
    if names.len() > limit {
        let family = if limit == MAX_TENANTS {
            Family::PartitionCount
        } else {
            Family::Memory
        };
        sh.findings.add(family, || {
            // Which of them a lookup still finds, and in which states.
            let stale: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| sh.deps[d].partition_of(Some(n)) != *n)
                .collect();
            let states: Vec<String> = m
                .partitions
                .iter()
                .map(|p| format!("{}={:?}", p.partition, p.state))
                .collect();
            format!(
                "{}: metrics list {} tenant partitions ({} distinct), bound {limit}; \
                 not found by a lookup: {stale:?}; listed: {}",
                DEPS[d],
                names.len(),
                distinct.len(),
                states.join(" ")
            )
        });
    }
}

// ------------------------------------------------------- after the run

/// Every failing tenant, brought open and then half-open by time, admits
/// exactly its budget of probes, twice (C7, C13).
fn check_slots(sh: &Shared) -> usize {
    let failing: Vec<usize> = (0..TENANTS).filter(|&t| is_failing(t)).collect();
    for dep in &sh.deps {
        for &t in &failing {
            let name = Some(sh.names[t].as_str());
            if dep.state(name).unwrap() == State::ForcedOpen {
                dep.reset(name);
            }
            // Trip a closed one: probes of earlier episodes that never
            // returned their slots would still be counted in its word.
            for _ in 0..10_000 {
                match dep.admit(name, None).unwrap() {
                    Decision::Admitted(p) if !p.is_probe() => p.record(Outcome::Failure),
                    Decision::Admitted(p) => {
                        drop(p);
                        break;
                    }
                    Decision::Rejected(_) => break,
                }
            }
        }
    }
    sh.clock.advance(OPEN);
    let mut checked = 0;
    for (d, dep) in sh.deps.iter().enumerate() {
        let budget = BUDGETS[d];
        for &t in &failing {
            let name = sh.names[t].as_str();
            let state = dep.state(Some(name)).unwrap();
            if state != State::HalfOpen {
                sh.findings.add(Family::SlotLeak, || {
                    format!(
                        "{}/{name}: tripped, then the open period passed, but it reads {state:?}",
                        DEPS[d]
                    )
                });
                continue;
            }
            checked += 1;
            for round in 0..2 {
                let mut probes = Vec::new();
                for i in 0..budget {
                    match dep.admit(Some(name), None).unwrap() {
                        Decision::Admitted(p) if p.is_probe() => probes.push(p),
                        other => sh.findings.add(Family::SlotLeak, || {
                            format!(
                                "{}/{name} (round {round}): probe {} of budget {budget} not \
                                 admitted as a probe after the run: {other:?}",
                                DEPS[d],
                                i + 1
                            )
                        }),
                    }
                }
                match dep.admit(Some(name), None).unwrap() {
                    Decision::Rejected(r) if r.reason == RejectReason::ProbeBudget => {}
                    other => sh.findings.add(Family::SlotLeak, || {
                        format!(
                            "{}/{name} (round {round}): call past the budget of {budget} \
                             not refused with probe_budget: {other:?}",
                            DEPS[d]
                        )
                    }),
                }
                drop(probes); // cancelled: the slots come back
            }
        }
    }
    checked
}

// ---------------------------------------------------------------- the run

struct Report {
    findings: [(u64, Vec<String>); 10],
    summary: String,
}

fn run() -> &'static Report {
    static RUN: OnceLock<Report> = OnceLock::new();
    RUN.get_or_init(soak)
}

fn soak() -> Report {
    let duration = soak_duration();
    let warm_up = (duration / 10).clamp(Duration::from_secs(1), Duration::from_secs(10));
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile(), clock.clone());
    let deps = DEPS.map(|n| bank.dependency(n).expect("declared"));
    let names: Vec<String> = (0..TENANTS).map(tenant_name).collect();
    let singles: Vec<usize> = (0..TENANTS)
        .filter(|&t| is_failing(t) || is_operated(t))
        .collect();
    let mut single = vec![None; TENANTS];
    for (s, &t) in singles.iter().enumerate() {
        single[t] = Some(s);
    }
    let n = singles.len();
    let sh = Arc::new(Shared {
        deps,
        clock: clock.clone(),
        names,
        single,
        singles,
        all: Default::default(),
        one: [(); 2].map(|_| (0..n).map(|_| Scope::default()).collect()),
        logs: [(); 2].map(|_| (0..n).map(|_| Mutex::default()).collect()),
        in_flight: [(); 2].map(|_| (0..n).map(|_| AtomicU32::new(0)).collect()),
        max_in_flight: Default::default(),
        findings: Findings::default(),
        stop_workers: AtomicBool::new(false),
        stop_operator: AtomicBool::new(false),
        stats: Stats::default(),
    });
    {
        let sh = sh.clone();
        bank.subscribe(move |e| on_event(&sh, e));
    }
    let cap = Duration::from_secs(RECOVERY_BOUND_H * 3600) * 9 / 10;
    let start = Instant::now();
    // Live heap samples after the warm-up, every 100 ms.
    let mut heap_samples: Vec<u64> = Vec::new();
    let mut rss_max = 0;
    // The resident set (MiB) at each tenth of the run, for the summary.
    let mut series: Vec<u64> = Vec::new();
    let mut panicked = Vec::new();
    let slots_checked = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|id| {
                let sh = &*sh;
                s.spawn(move || worker(sh, id))
            })
            .collect();
        let op = {
            let sh = &*sh;
            s.spawn(move || operator(sh))
        };
        let mut rng = 0x2545_F491_4F6C_DD1D_u64;
        let mut tick = 0u64;
        let mut advanced = Duration::ZERO;
        while start.elapsed() < duration {
            std::thread::sleep(Duration::from_millis(1));
            tick += 1;
            if advanced + STEP < cap {
                clock.advance(STEP);
                advanced += STEP;
                sh.stats.clock_steps.fetch_add(1, SeqCst);
            }
            if tick % 25 == 0 {
                spot_check(&sh, &bank, &mut rng, tick % 250 == 0);
            }
            if tick % 100 == 0 {
                let r = rss();
                if start.elapsed() >= warm_up {
                    heap_samples.push(live_heap());
                }
                rss_max = rss_max.max(r);
                if start.elapsed() >= duration * series.len() as u32 / 10 {
                    series.push(r >> 20);
                }
            }
        }
        sh.stop_operator.store(true, SeqCst);
        if op.join().is_err() {
            panicked.push("operator".to_string());
        }
        sh.stop_workers.store(true, SeqCst);
        for (id, w) in workers.into_iter().enumerate() {
            if w.join().is_err() {
                panicked.push(format!("worker {id}"));
            }
        }
        let checked = check_slots(&sh);
        // Quiescent now: the table holds at most max_tenants partitions.
        for (d, m) in bank.metrics().dependencies.iter().enumerate() {
            check_listing(&sh, d, m, MAX_TENANTS);
        }
        checked
    });
    let elapsed = start.elapsed();

    // Every permit is recorded or dropped: the test's own counts are back
    // to zero (else the budget check above counted wrong).
    for (dep, in_flight) in DEPS.iter().zip(&sh.in_flight) {
        for (s, c) in in_flight.iter().enumerate() {
            let left = c.load(SeqCst);
            if left != 0 {
                let name = &sh.names[sh.singles[s]];
                sh.findings.add(Family::Probes, || {
                    format!("{dep}/{name}: test bookkeeping left {left} probes in flight")
                });
            }
        }
    }
    if !panicked.is_empty() {
        for f in FAMILIES {
            sh.findings
                .add(f, || format!("threads panicked: {}", panicked.join(", ")));
        }
    }

    if heap_samples.is_empty() {
        heap_samples.push(live_heap());
    }
    let tenth = heap_samples.len().div_ceil(10);
    let median = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let heap_warm = median(&heap_samples[..tenth]);
    let heap_end = median(&heap_samples[heap_samples.len() - tenth..]);
    let growth = heap_end.saturating_sub(heap_warm);
    let judged = tenth >= MIN_HEAP_SAMPLES;
    if judged && growth >= HEAP_GROWTH_BOUND {
        sh.findings.add(Family::Memory, || {
            format!(
                "live heap grew by {growth} bytes from the first tenth after the warm-up \
                 ({heap_warm}, median) to the last ({heap_end}, median); bound {HEAP_GROWTH_BOUND}"
            )
        });
    }

    let st = &sh.stats;
    let g = |a: &AtomicU64| a.load(SeqCst);
    let overflow: Vec<u64> = bank
        .metrics()
        .dependencies
        .iter()
        .map(|m| {
            m.partitions
                .iter()
                .map(|p| p.partition_overflow_total)
                .sum()
        })
        .collect();
    bank.flush_events(Duration::from_secs(5));
    let summary = format!(
        "soak {elapsed:.1?} (asked {duration:?}, warm-up {warm_up:?}): {} admitted, \
         refused {} open / {} probe_budget / {} forced_open, {} probes (max in flight \
         {} of 2 ledger, {} of 3 quota), {} episodes that had to trip, {} failing calls \
         served by the overflow, overflow admissions {overflow:?}, {} operator actions, \
         {} state checks, {} events ({} dropped), {} clock steps of {STEP:?}, {slots_checked} \
         partitions checked for slot leaks; live heap {} KiB after warm-up, {} KiB in the last \
         tenth ({:+} KiB{}), resident set peak {} KiB, by tenths of the run {series:?} MiB; metrics listed at \
         most {} tenant partitions, {} snapshots more than max_tenants, {} a tenant twice",
        g(&st.admitted),
        g(&st.refused_open),
        g(&st.refused_budget),
        g(&st.refused_forced),
        g(&st.probes),
        sh.max_in_flight[0].load(SeqCst),
        sh.max_in_flight[1].load(SeqCst),
        g(&st.trips_checked),
        g(&st.overflow_calls),
        g(&st.operator_actions),
        g(&st.state_checks),
        g(&st.events),
        bank.events_dropped(),
        g(&st.clock_steps),
        heap_warm >> 10,
        heap_end >> 10,
        (heap_end as i64 - heap_warm as i64) >> 10,
        if judged {
            ""
        } else {
            ", not judged: too few samples"
        },
        rss_max >> 10,
        g(&st.listed_max),
        g(&st.listed_over),
        g(&st.listed_twice),
    );
    let counts: Vec<String> = FAMILIES
        .iter()
        .map(|&f| format!("{f:?} {}", sh.findings.counts[f as usize].load(SeqCst)))
        .collect();
    let summary = format!("{summary}; findings: {}", counts.join(", "));
    eprintln!("{summary}");
    let findings = FAMILIES.map(|f| {
        let i = f as usize;
        (
            sh.findings.counts[i].load(SeqCst),
            std::mem::take(&mut *sh.findings.kept[i].lock().unwrap()),
        )
    });
    if slots_checked == 0 {
        // Nothing was checked: say so rather than pass.
        let mut findings = findings;
        findings[Family::SlotLeak as usize].0 += 1;
        findings[Family::SlotLeak as usize]
            .1
            .push("no failing tenant could be brought half-open".into());
        return Report { findings, summary };
    }
    Report { findings, summary }
}

fn assert_clean(family: Family, clause: &str) {
    let r = run();
    let (count, kept) = &r.findings[family as usize];
    assert!(
        *count == 0,
        "{clause}: {count} violations in the soak (first {}):\n  {}\n{}",
        kept.len(),
        kept.join("\n  "),
        r.summary
    );
}

#[test]
fn c5_c9_soak_a_tenant_that_only_succeeds_is_never_open_or_half_open() {
    assert_clean(Family::NeverOpen, "C5/C9");
}

#[test]
fn c11_soak_no_forced_open_without_an_operator_action() {
    assert_clean(Family::ForcedRefusal, "C11");
}

#[test]
fn c5_soak_an_always_failing_tenant_trips_within_its_policy() {
    assert_clean(Family::Trip, "C5");
}

#[test]
fn c7_soak_probes_in_flight_never_exceed_the_budget() {
    assert_clean(Family::Probes, "C7");
}

#[test]
fn c7_c13_soak_no_probe_slot_leaks_after_the_run() {
    assert_clean(Family::SlotLeak, "C7/C13");
}

#[test]
fn c9_soak_memory_stays_flat_under_churn() {
    assert_clean(Family::Memory, "C9");
}

#[test]
fn c14_soak_state_and_metrics_never_read_a_succeeding_tenant_open() {
    assert_clean(Family::Reads, "C14");
}

#[test]
fn c11_soak_a_forced_tenant_stays_isolated_until_reset() {
    assert_clean(Family::ForcedHolds, "C11");
}

#[test]
fn c9_soak_at_most_max_tenants_partitions_after_the_churn() {
    assert_clean(Family::PartitionCount, "C9");
}

#[test]
fn c16_soak_transition_events_name_the_partition_they_happened_to() {
    assert_clean(Family::EventNames, "C16");
}
