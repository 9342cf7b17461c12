//! C22: a reload switching the mode racing a record that trips.

use crate::support::{explore_bounded, World, DEP};
use breakerbank::{Decision, Outcome, Profile, State};
use loom::sync::Arc;
use loom::thread;

/// The one dependency, tripping on its first failure, in `mode`.
fn profile(mode: &str) -> Profile {
    Profile::from_yaml(&format!(
        "dependencies:
  {DEP}:
    isolation: global
    trip: {{consecutive_failures: 1}}
    open_duration: 1s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: DOWN}}
    recovery_bound: 5m
    mode: {mode}
"
    ))
    .expect("model profile is valid")
}

/// A reload from `enforce` to `observe` races the failure that trips a
/// closed breaker. Proves: once both are done the breaker is closed,
/// whichever profile the failure's decision read. Fails if the record
/// that read the old profile can open the breaker after the switch has
/// closed it (the switch's restart seen first, the trip's CAS after).
///
/// Capped at bound 1 under `make loom` (the race takes one preemption of
/// the failure, between its read of the profile and its CAS): at bound 2
/// its 277,017 executions took 78 s on the 2-core machine; `make
/// loom-uncapped` runs it at 2.
#[test]
fn c22_a_reload_to_observe_racing_a_trip_leaves_the_breaker_closed() {
    let enforce = profile("enforce");
    let observe = profile("observe");
    explore_bounded(
        "c22_a_reload_to_observe_racing_a_trip_leaves_the_breaker_closed",
        1,
        move || {
            let w = Arc::new(World::new(&enforce));
            let Decision::Admitted(p) = w.dep.admit(None, None).unwrap() else {
                panic!("a closed breaker admits");
            };
            let raw = p.into_raw();
            let failer = {
                let w = w.clone();
                thread::spawn(move || {
                    w.dep.record_raw(raw, Outcome::Failure);
                })
            };
            let reloader = {
                let (w, observe) = (w.clone(), observe.clone());
                thread::spawn(move || w.bank.reload(observe).expect("a valid reload"))
            };
            failer.join().unwrap();
            reloader.join().unwrap();
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Closed,
                "C22 violated: a breaker in observe mode is open after the switch"
            );
        },
    );
}
