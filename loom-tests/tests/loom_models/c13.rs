//! C13: permits of an older generation change nothing but their slot;
//! a dropped permit returns its slot.

use crate::support::{explore, profile, Scope, World};
use breakerbank::{Decision, Outcome, State};
use loom::thread;

/// Setup (budget 2, threshold 2): probe `old` is admitted in half-open
/// episode 1, another probe fails and reopens, the open period ends.
/// `old` still holds a slot (C7). Then, concurrently: `old` records a
/// *success* (late), a new-episode probe records a success, and a third
/// caller drops its permit. If the late success counted, two successes
/// would close the breaker; it must still be half-open, with exactly one
/// late record, and with every slot back (`old`'s and the dropped one's).
#[test]
fn c13_late_success_and_dropped_permit_change_nothing() {
    let profile = profile(Scope::Global, 1, 2, 2);
    explore(
        "c13_late_success_and_dropped_permit_change_nothing",
        move || {
            let w = World::new(&profile);
            w.open_period_over(None);
            let old = w.probe(None);
            let failing = w.probe(None);
            w.dep.record_raw(failing, Outcome::Failure);
            assert_eq!(w.dep.state(None).unwrap(), State::Open);
            w.clock.advance(crate::support::OPEN);

            let dep = w.dep.clone();
            let late = thread::spawn(move || {
                dep.record_raw(old, Outcome::Success);
            });
            let dep = w.dep.clone();
            let prober = thread::spawn(move || {
                if let Decision::Admitted(p) = dep.admit(None, None).unwrap() {
                    p.record(Outcome::Success);
                }
            });
            let dep = w.dep.clone();
            let dropper = thread::spawn(move || {
                if let Decision::Admitted(p) = dep.admit(None, None).unwrap() {
                    drop(p);
                }
            });
            for t in [late, prober, dropper] {
                t.join().unwrap();
            }
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::HalfOpen,
                "C13 violated: a late success counted towards closing"
            );
            let m = w.partition("global").expect("global partition");
            assert_eq!(m.late_records_total, 1, "exactly the old permit is late");
            w.assert_no_slot_leak(None, 2);
        },
    );
}

/// Budget 2, threshold 1: `old` (episode 1) records a *failure* while a
/// new-episode probe records a success. A counted late failure would
/// reopen the breaker; it must end closed, with one late record.
#[test]
fn c13_late_failure_does_not_reopen() {
    let profile = profile(Scope::Global, 1, 2, 1);
    explore("c13_late_failure_does_not_reopen", move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let old = w.probe(None);
        let failing = w.probe(None);
        w.dep.record_raw(failing, Outcome::Failure);
        w.clock.advance(crate::support::OPEN);

        let dep = w.dep.clone();
        let late = thread::spawn(move || {
            dep.record_raw(old, Outcome::Failure);
        });
        let dep = w.dep.clone();
        let prober = thread::spawn(move || match dep.admit(None, None).unwrap() {
            Decision::Admitted(p) => {
                assert!(p.is_probe());
                p.record(Outcome::Success);
            }
            Decision::Rejected(r) => panic!("a free slot was refused: {:?}", r.reason),
        });
        late.join().unwrap();
        prober.join().unwrap();
        assert_eq!(
            w.dep.state(None).unwrap(),
            State::Closed,
            "C13 violated: a late failure reopened the breaker"
        );
        let m = w.partition("global").expect("global partition");
        assert_eq!(m.late_records_total, 1);
        w.assert_no_slot_leak(None, 2);
    });
}
