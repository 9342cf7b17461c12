//! C5: under the failure-rate policy, failures that skip the window's
//! judgement on a pass never hide the failure that reaches the threshold.

use crate::support::{explore, World, DEP};
use breakerbank::{Decision, Dependency, Outcome, Profile, State};
use loom::thread;

/// The models' profile: failure rate 0.5 over at least 4 calls in 10 s.
fn rate_profile() -> Profile {
    let yaml = format!(
        "dependencies:
  {DEP}:
    isolation: global
    trip: {{failure_rate: 0.5, min_calls: 4, window: 10s}}
    open_duration: 1s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
"
    );
    Profile::from_yaml(&yaml).expect("model profile is valid")
}

/// One admitted call recording `outcome`; the breaker must still be closed.
fn call(dep: &Dependency, outcome: Outcome) {
    match dep.admit(None, None).unwrap() {
        Decision::Admitted(p) => p.record(outcome),
        Decision::Rejected(r) => panic!("refused before the trip: {:?}", r.reason),
    }
}

/// Spawns one thread per entry of `failures`, each recording that many
/// failures, and joins them.
fn fail_concurrently(w: &World, failures: &[u32]) {
    let threads: Vec<_> = failures
        .iter()
        .map(|&n| {
            let dep = w.dep.clone();
            thread::spawn(move || {
                for _ in 0..n {
                    call(&dep, Outcome::Failure);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Rate 0.5 over at least 4 calls. Setup: 4 successes and 1 failure, so
/// the judgement leaves 2 passes (7 calls, 3 failures stays below 50%).
/// Then two threads record 3 failures between them (2 and 1): the third
/// in any order makes 4 of 8 and must trip, whether the two before it
/// passed or judged, and whichever thread's judgement installs the
/// passes. After the join the breaker must be open.
#[test]
fn c5_rate_passes_racing_failures_never_hide_the_trip() {
    let profile = rate_profile();
    explore(
        "c5_rate_passes_racing_failures_never_hide_the_trip",
        move || {
            let w = World::new(&profile);
            for _ in 0..4 {
                call(&w.dep, Outcome::Success);
            }
            call(&w.dep, Outcome::Failure);
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Closed,
                "1 of 5 is below 50%"
            );
            fail_concurrently(&w, &[2, 1]);
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Open,
                "C5 violated: 4 failures in 8 calls at rate 0.5 did not trip"
            );
        },
    );
}

/// Rate 0.5 over at least 4 calls. Setup: 1 failure, then 6 successes:
/// 7 calls, 1 failure, and no passes (the failure judged the rate high
/// with too few calls). Then two threads record 5 failures between them
/// (3 and 2): the fifth in any order makes 6 of 12 and must trip. Both
/// threads' first failures judge, and each may install passes: one
/// computed without the other's failure must not be installed, or the
/// fifth would pass unjudged.
#[test]
fn c5_rate_racing_judgements_never_grant_a_pass_past_the_trip() {
    let profile = rate_profile();
    explore(
        "c5_rate_racing_judgements_never_grant_a_pass_past_the_trip",
        move || {
            let w = World::new(&profile);
            call(&w.dep, Outcome::Failure);
            for _ in 0..6 {
                call(&w.dep, Outcome::Success);
            }
            assert_eq!(w.dep.state(None).unwrap(), State::Closed);
            fail_concurrently(&w, &[3, 2]);
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Open,
                "C5 violated: 6 failures in 12 calls at rate 0.5 did not trip"
            );
        },
    );
}

/// Rate 0.5 over at least 2 calls. Setup: 3 successes, then the clock
/// moves on exactly 2^24 buckets, where their bucket's 24-bit epoch reads
/// as current again. Two threads then record one failure each; each
/// record's tick is far past the window's last scrub, so both scrub,
/// racing each other and each other's count. The window must hold the
/// two failures and nothing older: 2 of 2 trips. Fails if the old
/// successes pass for current (no scrub: 2 of 5), or if a scrub empties
/// a bucket another thread counted in after its own scrub (1 of 1).
#[test]
fn c5_c12_scrubs_racing_records_lose_no_call_and_keep_no_old_one() {
    let yaml = format!(
        "dependencies:
  {DEP}:
    isolation: global
    trip: {{failure_rate: 0.5, min_calls: 2, window: 10s}}
    open_duration: 1s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
"
    );
    let profile = Profile::from_yaml(&yaml).expect("model profile is valid");
    explore(
        "c5_c12_scrubs_racing_records_lose_no_call_and_keep_no_old_one",
        move || {
            let w = World::new(&profile);
            for _ in 0..3 {
                call(&w.dep, Outcome::Success);
            }
            w.clock.advance(std::time::Duration::from_secs(1 << 24));
            fail_concurrently(&w, &[1, 1]);
            assert_eq!(
                w.dep.state(None).unwrap(),
                State::Open,
                "C5 violated: 2 failures of 2 calls in the window did not trip"
            );
        },
    );
}
