//! C8: with `success_threshold: 2`, one success never closes.

use crate::support::{explore, profile, Scope, World};
use breakerbank::{Decision, Outcome, State};
use loom::sync::atomic::{AtomicU32, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

fn assert_closed_only_after_two(successes: &AtomicU32, who: &str) {
    let n = successes.load(SeqCst);
    assert!(
        n >= 2,
        "C8 violated: {who} observed closed after {n} probe success(es), threshold 2"
    );
}

/// Two probers (budget 2) each record a success; each counts its success
/// *before* recording it, so "closed seen while fewer than two were
/// counted" is a closing on fewer than two successes. The probers and a
/// third, read-only observer check every `closed` they see. After the
/// join the breaker must be closed (two successes in one episode).
#[test]
fn c8_success_threshold_two_needs_two_successes() {
    let profile = profile(Scope::Global, 1, 2, 2);
    explore("c8_success_threshold_two_needs_two_successes", move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let successes = Arc::new(AtomicU32::new(0));
        let mut threads: Vec<_> = (0..2)
            .map(|_| {
                let dep = w.dep.clone();
                let successes = successes.clone();
                thread::spawn(move || {
                    match dep.admit(None, None).unwrap() {
                        Decision::Admitted(p) => {
                            assert!(p.is_probe(), "half-open admitted a non-probe");
                            successes.fetch_add(1, SeqCst);
                            p.record(Outcome::Success);
                        }
                        Decision::Rejected(r) => {
                            panic!("probe refused within budget: {:?}", r.reason)
                        }
                    }
                    if dep.state(None).unwrap() == State::Closed {
                        assert_closed_only_after_two(&successes, "a prober");
                    }
                })
            })
            .collect();
        let dep = w.dep.clone();
        let seen = successes.clone();
        threads.push(thread::spawn(move || {
            for _ in 0..2 {
                if dep.state(None).unwrap() == State::Closed {
                    assert_closed_only_after_two(&seen, "the observer");
                }
            }
        }));
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            w.dep.state(None).unwrap(),
            State::Closed,
            "two successes must close"
        );
        w.assert_no_slot_leak(None, 2);
    });
}
