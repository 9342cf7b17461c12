//! C7: at most `probe_budget` probes in flight, under any interleaving.

use crate::support::{explore, profile, Scope, World};
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
