//! C19: operator trips and half-opens racing admissions and records are
//! never lost, and never let the probe budget be exceeded.

use crate::support::{explore, profile, Scope, World};
use breakerbank::{Decision, Outcome, RejectReason, State};
use loom::thread;

/// Setup (budget 1, threshold 1): a probe `p` holds the only slot of a
/// half-open breaker. Concurrently: an operator trips it; `p` records a
/// success (which closes it if it comes first); a caller admits and, if
/// admitted, records a success. The trip is one CAS decided again on
/// every word a rival installs first, and nothing moves an open word in
/// its period: every interleaving must end open, for a whole open period
/// from the trip, with no probe slot leaked.
#[test]
fn c19_trip_racing_a_probe_record_and_an_admission_is_never_lost() {
    let profile = profile(Scope::Global, 1, 1, 1);
    explore(
        "c19_trip_racing_a_probe_record_and_an_admission_is_never_lost",
        move || {
            let w = World::new(&profile);
            w.open_period_over(None);
            let p = w.probe(None);

            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.trip(None));
            let dep = w.dep.clone();
            let recorder = thread::spawn(move || {
                dep.record_raw(p, Outcome::Success);
            });
            let dep = w.dep.clone();
            let caller = thread::spawn(move || {
                if let Decision::Admitted(c) = dep.admit(None, None).unwrap() {
                    assert!(
                        !c.is_probe(),
                        "a probe admitted while the only slot was held"
                    );
                    c.record(Outcome::Success);
                }
            });
            for t in [operator, recorder, caller] {
                t.join().unwrap();
            }
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Open,
                "C19 violated: the trip was lost to a racing record or admission"
            );
            match w.dep.admit(None, None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
                Decision::Admitted(_) => panic!("tripped breaker admitted in its open period"),
            }
            w.assert_no_slot_leak(None, 1);
        },
    );
}

/// Setup (one failure trips, budget 1): a closed breaker. Concurrently:
/// an operator starts a probe cycle; a caller admits and records a
/// failure. Either order ends in a probe cycle or in the trip that
/// follows a probe failure: half-open, or open; never closed (the
/// operator's half-open is not lost), and the single probe slot is
/// never held twice.
#[test]
fn c19_half_open_racing_a_failing_call_is_never_lost() {
    let profile = profile(Scope::Global, 1, 1, 1);
    explore(
        "c19_half_open_racing_a_failing_call_is_never_lost",
        move || {
            let w = World::new(&profile);

            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.half_open(None));
            let dep = w.dep.clone();
            let caller = thread::spawn(move || {
                if let Decision::Admitted(c) = dep.admit(None, None).unwrap() {
                    c.record(Outcome::Failure);
                }
            });
            for t in [operator, caller] {
                t.join().unwrap();
            }
            match w.dep.state(None).unwrap() {
                State::HalfOpen | State::Open => {}
                s => panic!("C19 violated: {s:?} after half_open raced a failing call"),
            }
            w.assert_no_slot_leak(None, 1);
        },
    );
}
