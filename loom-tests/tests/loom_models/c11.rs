//! C11: `reset` racing `record` and `admit` leaves a consistent breaker.

use crate::support::{explore, profile, Scope, World};
use breakerbank::{Decision, Outcome, RejectReason, State};
use loom::thread;

/// Setup (budget 1, threshold 1): a probe `p` holds the only slot of a
/// half-open breaker. Concurrently: an operator resets; `p` records a
/// failure; a caller admits and, if admitted, records a failure. Every
/// interleaving must end closed or open (never half-open, never forced),
/// a fresh admission must behave as that state says, and the probe slot
/// must be back (reset keeps in-flight slots; `p`'s record, late or
/// not, returns it).
#[test]
fn c11_reset_racing_record_and_admit() {
    let profile = profile(Scope::Global, 1, 1, 1);
    explore("c11_reset_racing_record_and_admit", move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let p = w.probe(None);

        let dep = w.dep.clone();
        let operator = thread::spawn(move || dep.reset(None));
        let dep = w.dep.clone();
        let recorder = thread::spawn(move || {
            dep.record_raw(p, Outcome::Failure);
        });
        let dep = w.dep.clone();
        let caller = thread::spawn(move || {
            if let Decision::Admitted(c) = dep.admit(None, None).unwrap() {
                assert!(
                    !c.is_probe(),
                    "a probe admitted while the only slot was held or after reset"
                );
                c.record(Outcome::Failure);
            }
        });
        for t in [operator, recorder, caller] {
            t.join().unwrap();
        }
        match w.dep.state(None).unwrap() {
            State::Closed => match w.dep.admit(None, None).unwrap() {
                Decision::Admitted(c) => assert!(!c.is_probe(), "closed admitted a probe"),
                Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
            },
            State::Open => match w.dep.admit(None, None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
                Decision::Admitted(_) => panic!("open breaker admitted before its period ended"),
            },
            s => panic!("C11 violated: inconsistent state {s:?} after reset raced record/admit"),
        }
        w.assert_no_slot_leak(None, 1);
    });
}
