//! Single-thread costs of breakerbank, recloser and failsafe, in one run,
//! beside the raw floor of the machine (issue 7, item 1).
//!
//! One criterion entry (`harness = false`), one submodule per operation;
//! each registers one criterion group whose functions are the
//! implementations, so a report row compares like with like:
//!
//! | group            | what one iteration is                                         |
//! |------------------|---------------------------------------------------------------|
//! | `floor`          | `AtomicU64` load, `fetch_add`, `Instant::now()`, bank clocks  |
//! | `closed_success` | admit + record success on a closed breaker (or `call(Ok)`)    |
//! | `closed_failure` | admit + record failure on a closed breaker that cannot trip   |
//! | `closed_mixed`   | failure-rate policies, alternating success and failure (50%)  |
//! | `open_reject`    | admission refused by an open breaker (real monotonic clock)   |
//! | `half_open`      | admission refused by a half-open breaker's probe budget       |
//!
//! recloser and failsafe have no probe budget (half-open admits every
//! call), so `half_open` measures breakerbank only. Every breaker runs on
//! the real monotonic clock: the cost of reading time is part of what is
//! measured. Run: `cargo bench -p breakerbank-benches --bench breakerbank`
//! (defaults: 1 s warm-up, 2 s measurement; criterion flags override).

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

/// The peers, built the same way in every module.
mod peers {
    use failsafe::{backoff, failure_policy, Config};
    use std::time::Duration;

    pub const HOUR: Duration = Duration::from_secs(3600);

    /// recloser: the ring buffer of 100 calls; `error_rate` as given
    /// (above 1.0 it can never trip).
    pub fn recloser(error_rate: f32) -> recloser::Recloser {
        recloser::Recloser::custom()
            .error_rate(error_rate)
            .closed_len(100)
            .half_open_len(10)
            .open_wait(HOUR)
            .build()
    }

    /// failsafe, consecutive failures.
    pub fn failsafe_consecutive(
        n: u32,
    ) -> failsafe::StateMachine<failure_policy::ConsecutiveFailures<backoff::Constant>, ()> {
        Config::new()
            .failure_policy(failure_policy::consecutive_failures(
                n,
                backoff::constant(HOUR),
            ))
            .build()
    }

    /// failsafe, success rate over a 10 s window.
    pub fn failsafe_rate(
        required_success_rate: f64,
    ) -> failsafe::StateMachine<failure_policy::SuccessRateOverTimeWindow<backoff::Constant>, ()>
    {
        Config::new()
            .failure_policy(failure_policy::success_rate_over_time_window(
                required_success_rate,
                1,
                Duration::from_secs(10),
                backoff::constant(HOUR),
            ))
            .build()
    }
}

#[inline(always)]
fn ok() -> Result<(), ()> {
    black_box(Ok(()))
}

#[inline(always)]
fn err() -> Result<(), ()> {
    black_box(Err(()))
}

/// The machine's floor, in the same run.
mod floor {
    use super::*;

    // The floor is std's own atomic, whatever the workspace's loom rule says.
    #[allow(clippy::disallowed_types)]
    type AtomicU64 = std::sync::atomic::AtomicU64;

    pub fn bench(c: &mut Criterion) {
        use breakerbank::{Clock, MonotonicClock};
        use std::sync::atomic::Ordering;
        let mut g = c.benchmark_group("floor");
        let a = AtomicU64::new(0);
        g.bench_function("atomic_load_acquire", |b| {
            b.iter(|| black_box(&a).load(Ordering::Acquire))
        });
        g.bench_function("atomic_fetch_add_relaxed", |b| {
            b.iter(|| black_box(&a).fetch_add(1, Ordering::Relaxed))
        });
        g.bench_function("std_instant_now", |b| b.iter(std::time::Instant::now));
        let (bank, _dep) =
            breakerbank_benches::bank(&breakerbank_benches::consecutive_yaml(5, "1h", 1));
        g.bench_function("bank_clock_now", |b| b.iter(|| black_box(&bank).now()));
        let clock = MonotonicClock::new();
        g.bench_function("monotonic_clock_now_coarse", |b| {
            b.iter(|| black_box(&clock).now_coarse())
        });
        g.finish();
    }
}

/// Admit + record success on a closed breaker.
mod closed_success {
    use super::*;
    use breakerbank::{Decision, Outcome};
    use failsafe::CircuitBreaker;

    pub fn bench(c: &mut Criterion) {
        let mut g = c.benchmark_group("closed_success");
        let (_b1, dep) =
            breakerbank_benches::bank(&breakerbank_benches::consecutive_yaml(5, "1h", 1));
        g.bench_function("breakerbank_consecutive", |b| {
            b.iter(|| match black_box(&dep).admit(None, None) {
                Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
                _ => unreachable!("closed"),
            })
        });
        g.bench_function("breakerbank_consecutive_call", |b| {
            b.iter(|| black_box(&dep).call(None, None, ok))
        });
        let (_b2, rate) =
            breakerbank_benches::bank(&breakerbank_benches::rate_yaml(0.5, 20, "10s"));
        g.bench_function("breakerbank_rate", |b| {
            b.iter(|| match black_box(&rate).admit(None, None) {
                Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
                _ => unreachable!("closed"),
            })
        });
        let r = peers::recloser(0.5);
        g.bench_function("recloser", |b| b.iter(|| black_box(&r).call(ok)));
        let f = peers::failsafe_consecutive(5);
        g.bench_function("failsafe_consecutive", |b| {
            b.iter(|| black_box(&f).call(ok))
        });
        let fr = peers::failsafe_rate(0.5);
        g.bench_function("failsafe_rate", |b| b.iter(|| black_box(&fr).call(ok)));
        g.finish();
    }
}

/// Admit + record failure on a closed breaker that cannot trip.
mod closed_failure {
    use super::*;
    use breakerbank::MAX_COUNT;
    use breakerbank::{Decision, Outcome};
    use failsafe::CircuitBreaker;

    /// Failures between two resets of the consecutive counter: below the
    /// largest threshold the word holds (`MAX_COUNT`, 1023), and the reset
    /// amortised over a thousand calls.
    const RESET_EVERY: u32 = 1000;

    pub fn bench(c: &mut Criterion) {
        let mut g = c.benchmark_group("closed_failure");
        let (_b1, dep) =
            breakerbank_benches::bank(&breakerbank_benches::consecutive_yaml(MAX_COUNT, "1h", 1));
        let mut n = 0u32;
        g.bench_function("breakerbank_consecutive", |b| {
            b.iter(|| {
                match black_box(&dep).admit(None, None) {
                    Ok(Decision::Admitted(p)) => p.record(Outcome::Failure),
                    _ => unreachable!("closed"),
                }
                n += 1;
                if n == RESET_EVERY {
                    n = 0;
                    dep.reset(None);
                }
            })
        });
        let r = peers::recloser(2.0);
        g.bench_function("recloser", |b| b.iter(|| black_box(&r).call(err)));
        let f = peers::failsafe_consecutive(u32::MAX);
        g.bench_function("failsafe_consecutive", |b| {
            b.iter(|| black_box(&f).call(err))
        });
        g.finish();
    }
}

/// Failure-rate policies at 50% failures (success and failure alternate),
/// below every threshold: the per-call cost of the rolling window.
mod closed_mixed {
    use super::*;
    use breakerbank::{Decision, Outcome};
    use failsafe::CircuitBreaker;

    pub fn bench(c: &mut Criterion) {
        let mut g = c.benchmark_group("closed_mixed");
        // Success first, so the failure rate is never above 50%. A short
        // window keeps each bucket (window / 10) near or under the 2^20
        // calls it counts before it halves its counts.
        let (_b1, dep) =
            breakerbank_benches::bank(&breakerbank_benches::rate_yaml(1.0, 100, "100ms"));
        let mut i = 0u64;
        g.bench_function("breakerbank_rate", |b| {
            b.iter(|| {
                i += 1;
                let outcome = if i & 1 == 1 {
                    Outcome::Success
                } else {
                    Outcome::Failure
                };
                match black_box(&dep).admit(None, None) {
                    Ok(Decision::Admitted(p)) => p.record(outcome),
                    _ => unreachable!("closed"),
                }
            })
        });
        let r = peers::recloser(1.0);
        let mut i = 0u64;
        g.bench_function("recloser", |b| {
            b.iter(|| {
                i += 1;
                black_box(&r).call(if i & 1 == 1 { ok } else { err })
            })
        });
        let f = peers::failsafe_rate(0.1);
        let mut i = 0u64;
        g.bench_function("failsafe_rate", |b| {
            b.iter(|| {
                i += 1;
                black_box(&f).call(if i & 1 == 1 { ok } else { err })
            })
        });
        g.finish();
    }
}

/// Admission refused by an open breaker, on the real monotonic clock.
mod open_reject {
    use super::*;
    use breakerbank::{Decision, Outcome, RejectReason};
    use failsafe::CircuitBreaker;

    pub fn bench(c: &mut Criterion) {
        let mut g = c.benchmark_group("open_reject");
        let (_b1, dep) =
            breakerbank_benches::bank(&breakerbank_benches::consecutive_yaml(1, "1h", 1));
        if let Ok(Decision::Admitted(p)) = dep.admit(None, None) {
            p.record(Outcome::Failure);
        }
        g.bench_function("breakerbank", |b| {
            b.iter(|| match black_box(&dep).admit(None, None) {
                Ok(Decision::Rejected(r)) => {
                    debug_assert_eq!(r.reason, RejectReason::Open);
                    black_box(r.retry_after)
                }
                _ => unreachable!("open"),
            })
        });
        let r = recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(1)
            .open_wait(peers::HOUR)
            .build();
        let _ = r.call(err);
        let _ = r.call(err);
        assert!(matches!(r.call(ok), Err(recloser::Error::Rejected)));
        g.bench_function("recloser", |b| b.iter(|| black_box(&r).call(ok)));
        let f = peers::failsafe_consecutive(1);
        let _ = f.call(err);
        assert!(matches!(f.call(ok), Err(failsafe::Error::Rejected)));
        g.bench_function("failsafe", |b| b.iter(|| black_box(&f).call(ok)));
        g.finish();
    }
}

/// Admission refused by the half-open probe budget (breakerbank only:
/// the peers admit every half-open call).
mod half_open {
    use super::*;
    use breakerbank::{Decision, Outcome, RejectReason};

    pub fn bench(c: &mut Criterion) {
        let mut g = c.benchmark_group("half_open");
        let (_b1, dep) =
            breakerbank_benches::bank(&breakerbank_benches::consecutive_yaml(1, "1ms", 1));
        if let Ok(Decision::Admitted(p)) = dep.admit(None, None) {
            p.record(Outcome::Failure);
        }
        // The open period ends on the coarse clock, up to a tick late: wait.
        let mut waited = 0;
        let probe = loop {
            std::thread::sleep(Duration::from_millis(5));
            waited += 5;
            match dep.admit(None, None) {
                Ok(Decision::Admitted(p)) if p.is_probe() => break p,
                Ok(Decision::Rejected(r)) if r.reason == RejectReason::Open && waited < 2000 => {}
                other => panic!("expected a probe, got {other:?}"),
            }
        };
        // The one probe slot stays taken for the whole measurement.
        g.bench_function("breakerbank_probe_budget", |b| {
            b.iter(|| match black_box(&dep).admit(None, None) {
                Ok(Decision::Rejected(r)) => {
                    debug_assert_eq!(r.reason, RejectReason::ProbeBudget);
                    black_box(r.retry_after)
                }
                _ => unreachable!("probe budget"),
            })
        });
        probe.record(Outcome::Cancelled);
        g.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = floor::bench, closed_success::bench, closed_failure::bench,
        closed_mixed::bench, open_reject::bench, half_open::bench
}
criterion_main!(benches);
