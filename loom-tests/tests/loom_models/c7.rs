//! C7: at most `probe_budget` probes in flight, under any interleaving.

use crate::support::{
    explore, explore_bounded, profile, profile_timed, Scope, World, PROBE_TIMEOUT,
};
use breakerbank::{Decision, Outcome};
use loom::sync::atomic::{AtomicU32, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

/// Three threads admit on a breaker whose open period is over (the first
/// admission turns it half-open). A thread holding a probe counts itself
/// in `in_flight` between admission and record, and asserts the count is
/// within the budget. One thread then drops its permit (cancelled), one
/// records a success (threshold 2: stays half-open), one a failure
/// (reopens): slots come back and are taken again within the run.
fn probe_budget_three_threads(name: &str, budget: u32) {
    let profile = profile(Scope::Global, 1, budget, 2);
    explore(name, move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let in_flight = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..3)
            .map(|i| {
                let dep = w.dep.clone();
                let in_flight = in_flight.clone();
                thread::spawn(move || {
                    let Decision::Admitted(permit) = dep.admit(None, None).unwrap() else {
                        return;
                    };
                    if permit.is_probe() {
                        let now = in_flight.fetch_add(1, SeqCst) + 1;
                        assert!(
                            now <= budget,
                            "C7 violated: {now} probes in flight with probe_budget {budget}"
                        );
                        in_flight.fetch_sub(1, SeqCst);
                    }
                    match i {
                        0 => drop(permit),
                        1 => permit.record(Outcome::Success),
                        _ => permit.record(Outcome::Failure),
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        w.assert_no_slot_leak(None, budget);
    });
}

#[test]
fn c7_probe_budget_one_three_threads() {
    probe_budget_three_threads("c7_probe_budget_one_three_threads", 1);
}

#[test]
fn c7_probe_budget_two_three_threads() {
    probe_budget_three_threads("c7_probe_budget_two_three_threads", 2);
}

/// A probe lost by its caller (a C permit never recorded) is reclaimed
/// once it is `probe_timeout` old, while its own record arrives at the
/// same moment (C7's `probe_timeout`, C13). Budget 1, threshold 2; setup:
/// half-open, probe `a` admitted and held as plain data, the clock moved
/// on by the timeout. Concurrently: two threads admit (one reclaims
/// `a`'s slot, or finds it returned) and keep what they got; a third
/// records `a` with `outcome`. After the join at most one probe is held:
/// a record of `a` that returned a slot after the reclaim (for instance
/// by reading the no-slot generation before the reclaim published it)
/// would have let both admitters in. The next admission is refused
/// `probe_budget` while a probe is held, and once it is dropped exactly
/// one probe is admitted again (no slot leaked).
fn reclaim_racing_the_lost_probes_record(name: &str, outcome: Outcome, cap: Option<usize>) {
    let profile = profile_timed(Scope::Global, 1, 1, 2);
    let model = move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let a = w.probe(None);
        w.clock.advance(PROBE_TIMEOUT);
        let admitters: Vec<_> = (0..2)
            .map(|_| {
                let dep = w.dep.clone();
                thread::spawn(move || match dep.admit(None, None).unwrap() {
                    Decision::Admitted(p) => {
                        assert!(p.is_probe(), "half-open admitted a non-probe");
                        Some(p.into_raw())
                    }
                    Decision::Rejected(_) => None,
                })
            })
            .collect();
        let dep = w.dep.clone();
        let recorder = thread::spawn(move || {
            dep.record_raw(a, outcome);
        });
        let held: Vec<_> = admitters
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        recorder.join().unwrap();
        assert!(
            held.len() <= 1,
            "C7 violated: {} probes held with probe_budget 1",
            held.len()
        );
        assert_eq!(
            held.len(),
            1,
            "C7 violated: every admission refused past probe_timeout"
        );
        match w.dep.admit(None, None).unwrap() {
            Decision::Rejected(r) => assert_eq!(r.reason, breakerbank::RejectReason::ProbeBudget),
            Decision::Admitted(_) => {
                panic!("C7 violated: a second probe admitted with probe_budget 1 while one is held")
            }
        }
        for b in held {
            w.dep.record_raw(b, Outcome::Cancelled);
        }
        w.assert_no_slot_leak(None, 1);
    };
    match cap {
        Some(bound) => explore_bounded(name, bound, model),
        None => explore(name, model),
    }
}

#[test]
fn c7_c13_a_reclaim_racing_a_lost_probes_cancel_keeps_the_budget() {
    reclaim_racing_the_lost_probes_record(
        "c7_c13_a_reclaim_racing_a_lost_probes_cancel_keeps_the_budget",
        Outcome::Cancelled,
        None,
    );
}

/// Capped at bound 1 in `make loom`: at bound 2 it is the suite's second
/// longest model, and the cancel above checks the reclaim's race at bound
/// 2; `make loom-uncapped` runs it at bound 2.
#[test]
fn c7_c13_a_reclaim_racing_a_lost_probes_success_keeps_the_budget() {
    reclaim_racing_the_lost_probes_record(
        "c7_c13_a_reclaim_racing_a_lost_probes_success_keeps_the_budget",
        Outcome::Success,
        Some(1),
    );
}
