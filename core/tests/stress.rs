//! Real-thread stress of the half-open path (C7, C13, C11).
//!
//! Four workers hammer one global breaker (consecutive_failures 1,
//! threshold 2) on a shared [`ManualClock`]: closed calls fail and trip
//! it, refused-open callers advance the clock past the open period, and
//! probes end in every way a permit can (success, failure, cancelled,
//! dropped, recorded late through a raw permit after a reset). A worker
//! holding a probe counts itself in `in_flight` from admission to just
//! before its record, so the maximum of that count is a lower bound of
//! the probes the breaker had out at once: it must never pass the budget.
//! The run stops after enough half-open episodes (`half_opened_total`)
//! or a deadline (a bound on a hang); afterwards the breaker must still
//! admit exactly `probe_budget` probes (no slot leaked).
//!
//! loom (`loom-tests/`) proves the same properties exhaustively for two or
//! three threads at a bounded preemption depth; this test covers long
//! runs, four threads and real memory ordering on the host.

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

use breakerbank::{Bank, Decision, Dependency, ManualClock, Outcome, Profile, RejectReason, State};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const OPEN: Duration = Duration::from_secs(1);
const WORKERS: usize = 4;
/// Half-open episodes the run must reach.
const MIN_EPISODES: f64 = 10_000.0;
/// The run stops here even if the episodes were not reached (then fails):
/// a bound on a hang, not a speed test. Unloaded, the episodes take a
/// tenth of a second; on a machine running other jobs, a worker holding
/// a probe can be descheduled for a whole time slice while the others
/// wait for its slot, and one run took 8 s for 4,000.
const DEADLINE: Duration = Duration::from_secs(120);

fn profile(budget: u32) -> Profile {
    Profile::from_yaml(&format!(
        "dependencies:
  payments_client:
    isolation: global
    trip: {{consecutive_failures: 1}}
    open_duration: 1s
    half_open: {{probe_budget: {budget}, success_threshold: 2}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
"
    ))
    .expect("valid profile")
}

/// xorshift64: a cheap per-thread choice of outcome, seeded per worker.
fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

fn half_opened(bank: &Bank) -> f64 {
    bank.metrics().dependencies[0].partitions[0]
        .values()
        .into_iter()
        .find(|(name, _)| *name == "half_opened_total")
        .map_or(0.0, |(_, v)| v)
}

struct Shared {
    dep: Dependency,
    clock: ManualClock,
    budget: u32,
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
    probes: AtomicU64,
    stop: AtomicBool,
}

fn worker(s: &Shared, id: usize) {
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ ((id as u64 + 1) << 32);
    let mut late = Vec::new();
    let mut i = 0u64;
    while !s.stop.load(SeqCst) {
        i += 1;
        // Now and then worker 0 resets: probes in flight keep their slots
        // and their records turn late (C11, C13).
        if id == 0 && i % 4096 == 0 {
            s.dep.reset(None);
        }
        match s.dep.admit(None, None).unwrap() {
            Decision::Admitted(p) if p.is_probe() => {
                s.probes.fetch_add(1, SeqCst);
                let now = s.in_flight.fetch_add(1, SeqCst) + 1;
                s.max_in_flight.fetch_max(now, SeqCst);
                assert!(
                    now <= s.budget,
                    "C7 violated: {now} probes in flight, budget {}",
                    s.budget
                );
                if next(&mut rng) % 4 == 0 {
                    std::thread::yield_now(); // widen the window
                }
                s.in_flight.fetch_sub(1, SeqCst);
                match next(&mut rng) % 8 {
                    0..=2 => p.record(Outcome::Success),
                    3 | 4 => p.record(Outcome::Failure),
                    5 => p.record(Outcome::Cancelled),
                    6 => drop(p),
                    // Kept and recorded a little later, often in another
                    // episode. Counted out of `in_flight` already: it still
                    // holds its slot, so this only under-counts.
                    _ => late.push(p.into_raw()),
                }
            }
            Decision::Admitted(p) => p.record(if next(&mut rng) % 4 == 0 {
                Outcome::Success
            } else {
                Outcome::Failure
            }),
            Decision::Rejected(r) => match r.reason {
                RejectReason::Open => s.clock.advance(OPEN),
                RejectReason::ProbeBudget => std::thread::yield_now(),
                other => panic!("unexpected refusal {other:?}"),
            },
        }
        if late.len() > 2 || (!late.is_empty() && next(&mut rng) % 16 == 0) {
            for raw in late.drain(..) {
                s.dep.record_raw(raw, Outcome::Success);
            }
        }
    }
    for raw in late.drain(..) {
        s.dep.record_raw(raw, Outcome::Success);
    }
}

/// After every thread stopped: bring the breaker to half-open and check
/// that exactly `budget` probes are admitted at once.
fn assert_no_slot_leak(dep: &Dependency, clock: &ManualClock, budget: u32) {
    for _ in 0..4 {
        match dep.state(None).unwrap() {
            State::HalfOpen => break,
            State::Open => {
                clock.advance(OPEN);
                break;
            }
            State::Closed => {
                if let Decision::Admitted(p) = dep.admit(None, None).unwrap() {
                    p.record(Outcome::Failure);
                }
            }
            State::ForcedOpen => dep.reset(None),
        }
    }
    let mut held = Vec::new();
    for i in 0..budget {
        match dep.admit(None, None).unwrap() {
            Decision::Admitted(p) => {
                assert!(p.is_probe());
                held.push(p);
            }
            Decision::Rejected(r) => panic!(
                "slot leak: probe {} of budget {budget} refused ({:?}) after the run",
                i + 1,
                r.reason
            ),
        }
    }
    match dep.admit(None, None).unwrap() {
        Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ProbeBudget),
        Decision::Admitted(_) => panic!("probe admitted over budget {budget}"),
    }
}

fn stress(budget: u32) {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile(budget), clock.clone());
    let shared = Arc::new(Shared {
        dep: bank.dependency("payments_client").unwrap(),
        clock: clock.clone(),
        budget,
        in_flight: AtomicU32::new(0),
        max_in_flight: AtomicU32::new(0),
        probes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let start = Instant::now();
    let threads: Vec<_> = (0..WORKERS)
        .map(|id| {
            let s = shared.clone();
            std::thread::spawn(move || worker(&s, id))
        })
        .collect();
    let mut episodes = 0.0;
    while start.elapsed() < DEADLINE && episodes < MIN_EPISODES * 1.2 {
        std::thread::sleep(Duration::from_millis(20));
        episodes = half_opened(&bank);
    }
    shared.stop.store(true, SeqCst);
    for t in threads {
        t.join().expect("a worker panicked");
    }
    let episodes = half_opened(&bank);
    let max = shared.max_in_flight.load(SeqCst);
    eprintln!(
        "stress budget {budget}: {episodes} half-open episodes, {} probes, max {max} in flight, {:.2?}",
        shared.probes.load(SeqCst),
        start.elapsed()
    );
    assert!(
        episodes >= MIN_EPISODES,
        "only {episodes} half-open episodes in {DEADLINE:?}"
    );
    assert!(max <= budget, "C7: {max} probes in flight, budget {budget}");
    assert!(max >= 1, "no probe was ever in flight");
    assert_no_slot_leak(&shared.dep, &clock, budget);
}

#[test]
fn c7_stress_probe_budget_one_four_threads() {
    stress(1);
}

#[test]
fn c7_stress_probe_budget_two_four_threads() {
    stress(2);
}
