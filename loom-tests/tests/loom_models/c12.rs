//! C12 (with C7): a trip racing admissions never yields an open breaker
//! without its period (or with one that never ends), nor a probe before
//! that period has passed.

use crate::support::{explore, profile, Scope, World, OPEN};
use breakerbank::{Decision, Dependency, Outcome, RawPermit, RejectReason, State};
use loom::thread;
use std::time::Duration;

/// Global, consecutive_failures 2, budget 1. Setup: one full cycle (trip
/// at 0, open period over at [`OPEN`], a probe's success closes), so the
/// partition's open-until side word holds a period that is already over
/// at the clock's time, tagged with an older generation; then one failure
/// counted and one closed call `p` in flight. The clock stays at
/// [`OPEN`], at or past the end of every earlier period. Concurrently:
/// `p` records the tripping failure (open until 2 × [`OPEN`]) while two
/// callers each admit and read `state`, in either order. Each is
/// admitted on the closed word before the trip, or refused as open with
/// a `retry_after` within (0, [`OPEN`]]; none is admitted as a probe (the
/// period from the trip has not passed: C12, "never zero"; C7: probes
/// only after the open period), and none reads half-open (C14). After
/// the join the breaker is open and refuses with exactly the period's
/// remainder, still refuses a millisecond before its end, and at its end
/// admits exactly the budget of probes (no slot leaked).
///
/// Fails if the trip's period is written after the trip's CAS *and* read
/// without its generation tag (a reader then takes the earlier, ended
/// period for the trip's); either layer alone holds it (a reader that
/// finds no period of its generation stays open).
#[test]
fn c12_trip_racing_an_admission_never_admits_a_probe_early() {
    let profile = profile(Scope::Global, 2, 1, 1);
    explore(
        "c12_trip_racing_an_admission_never_admits_a_probe_early",
        move || {
            let w = World::new(&profile);
            w.open_period_over(None);
            let probe = w.probe(None);
            w.dep.record_raw(probe, Outcome::Success);
            assert_eq!(w.dep.state(None).unwrap(), State::Closed);
            match w.dep.admit(None, None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Failure),
                Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
            }
            let p = match w.dep.admit(None, None).unwrap() {
                Decision::Admitted(p) => p.into_raw(),
                Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
            };

            let dep = w.dep.clone();
            let tripper = thread::spawn(move || {
                dep.record_raw(p, Outcome::Failure);
            });
            let callers: Vec<_> = (0..2)
                .map(|i| {
                    let dep = w.dep.clone();
                    thread::spawn(move || {
                        if i == 1 {
                            not_half_open(&dep);
                        }
                        let permit = admit_before_the_period(&dep);
                        if i == 0 {
                            not_half_open(&dep);
                        }
                        permit
                    })
                })
                .collect();
            tripper.join().unwrap();
            for t in callers {
                if let Some(c) = t.join().unwrap() {
                    // A closed call that gave up: counts neither way (C10).
                    w.dep.record_raw(c, Outcome::Cancelled);
                }
            }

            assert_eq!(w.dep.state(None).unwrap(), State::Open);
            let refused = |expected: Duration| match w.dep.admit(None, None).unwrap() {
                Decision::Rejected(r) => {
                    assert_eq!(r.reason, RejectReason::Open);
                    assert_eq!(
                        r.retry_after,
                        Some(expected),
                        "C12 violated: the open period is not its duration from the trip"
                    );
                }
                Decision::Admitted(_) => {
                    panic!("C12 violated: admitted before the open period passed")
                }
            };
            refused(OPEN);
            let ms = Duration::from_millis(1);
            w.clock.advance(OPEN - ms);
            refused(ms);
            w.clock.advance(ms);
            assert_eq!(w.dep.state(None).unwrap(), State::HalfOpen);
            w.assert_no_slot_leak(None, 1);
        },
    );
}

/// An admission while the clock is before the end of the trip's period:
/// a closed call (the trip has not happened), or an open refusal with a
/// `retry_after` within (0, [`OPEN`]]; never a probe.
fn admit_before_the_period(dep: &Dependency) -> Option<RawPermit> {
    match dep.admit(None, None).unwrap() {
        Decision::Admitted(c) => {
            assert!(
                !c.is_probe(),
                "C12 violated: a probe admitted before the open period from the trip passed"
            );
            Some(c.into_raw())
        }
        Decision::Rejected(r) => {
            assert_eq!(r.reason, RejectReason::Open);
            let retry = r
                .retry_after
                .expect("C4/C12 violated: an open refusal without retry_after");
            assert!(
                retry > Duration::ZERO && retry <= OPEN,
                "C12 violated: retry_after {retry:?} outside (0, {OPEN:?}] right after the trip"
            );
            None
        }
    }
}

/// C14: `state` reports what an admission would find now; before the end
/// of the trip's period that is never half-open (the period of the
/// earlier trip, over at this clock, must not stand in for it).
fn not_half_open(dep: &Dependency) {
    let s = dep.state(None).unwrap();
    assert!(
        matches!(s, State::Closed | State::Open),
        "C12/C14 violated: {s:?} read before the open period from the trip passed"
    );
}

/// Global, consecutive_failures 1, budget 2, threshold 1. Setup: the open
/// period is over and probe `p` is admitted (half-open, one slot taken).
/// Concurrently: `p` records a failure, which reopens the breaker (a new
/// open period from the clock's time), while a caller admits and, if
/// admitted as a probe, cancels (drops its permit): the word's probe
/// count goes up and back down under the reopening's compare-and-swap.
/// C12: the new open period lasts its duration, never forever. After the
/// join the breaker is open and refuses for the whole period; once the
/// period has passed it reads half-open and admits exactly the budget of
/// probes.
///
/// Fails if `Cell::update_with` tries the trip's CAS from the word it saw
/// after `prepublish` found the word moved on and wrote nothing: the
/// caller's probe and its cancel bring the word back to what the trip saw,
/// the CAS succeeds, and `Open` is installed with no open-until of its
/// generation (readers then stay open for good). The loop must decide
/// again on the new word instead.
#[test]
fn c12_a_reopen_racing_a_probe_and_its_cancel_keeps_its_period() {
    let profile = profile(Scope::Global, 1, 2, 1);
    explore(
        "c12_a_reopen_racing_a_probe_and_its_cancel_keeps_its_period",
        move || {
            let w = World::new(&profile);
            w.open_period_over(None);
            let p = w.probe(None);

            let dep = w.dep.clone();
            let failer = thread::spawn(move || {
                dep.record_raw(p, Outcome::Failure);
            });
            let dep = w.dep.clone();
            let caller = thread::spawn(move || {
                if let Decision::Admitted(c) = dep.admit(None, None).unwrap() {
                    drop(c);
                }
            });
            failer.join().unwrap();
            caller.join().unwrap();

            assert_eq!(w.dep.state(None).unwrap(), State::Open);
            match w.dep.admit(None, None).unwrap() {
                Decision::Rejected(r) => {
                    assert_eq!(r.reason, RejectReason::Open);
                    assert_eq!(r.retry_after, Some(OPEN));
                }
                Decision::Admitted(_) => panic!("admitted right after the reopening"),
            }
            w.clock.advance(OPEN);
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::HalfOpen,
                "C12 violated: the open period of the reopening has not ended after its duration"
            );
            w.assert_no_slot_leak(None, 2);
        },
    );
}
