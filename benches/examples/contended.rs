//! Contention: std threads on ONE shared breaker, total calls per second
//! for breakerbank, recloser and failsafe in the same run (issue 7, item 2).
//!
//! Scenarios (every call is admit + record, or the peer's `call`):
//! - `healthy_consecutive`: every call succeeds; breakerbank and failsafe
//!   on a consecutive-failures policy, recloser on its ring buffer (the
//!   only policy it has);
//! - `healthy_rate`: every call succeeds, failure-rate policies;
//! - `fail10_rate`: one call in ten fails, failure-rate policies with a
//!   threshold of 50% over a 1 s window, so nothing should trip (checked:
//!   rejections are counted and printed).
//!
//! Each run gives every thread the same breaker and `--ms` milliseconds;
//! a run's rate is the sum of the threads' own rates. Runs of the
//! implementations are interleaved (a, b, c, a, b, c, …) so machine noise
//! falls on all of them alike; the table shows the median of `--runs`.
//!
//! ```text
//! cargo run --release -p breakerbank-benches --example contended -- [--runs 7] [--ms 300] [--threads 1,2]
//! ```

// The stop flag is a std atomic: this binary is not loom-checked.
#![allow(clippy::disallowed_types)]

use breakerbank::{Decision, Dependency, Outcome};
use breakerbank_benches::{bank, consecutive_yaml, rate_yaml};
use failsafe::{backoff, failure_policy, CircuitBreaker, Config};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);
/// Calls between two looks at the stop flag.
const BATCH: u64 = 1024;

fn fails<const FAIL_ONE_IN: u64>(i: u64) -> bool {
    // A constant divisor: a multiply, not a division, per call.
    FAIL_ONE_IN != 0 && i % FAIL_ONE_IN == 0
}

/// breakerbank: admit + record. True if admitted.
fn bb_op<const F: u64>(dep: &Dependency) -> impl Fn(u64) -> bool + Sync + '_ {
    move |i| match dep.admit(None, None) {
        Ok(Decision::Admitted(p)) => {
            p.record(if fails::<F>(i) {
                Outcome::Failure
            } else {
                Outcome::Success
            });
            true
        }
        _ => false,
    }
}

fn call_result<const F: u64>(i: u64) -> Result<u64, u64> {
    if fails::<F>(i) {
        black_box(Err(i))
    } else {
        black_box(Ok(i))
    }
}

fn recloser_op<const F: u64>(r: &recloser::Recloser) -> impl Fn(u64) -> bool + Sync + '_ {
    move |i| {
        !matches!(
            r.call(|| call_result::<F>(i)),
            Err(recloser::Error::Rejected)
        )
    }
}

fn failsafe_op<const F: u64, C: CircuitBreaker + Sync>(f: &C) -> impl Fn(u64) -> bool + Sync + '_ {
    move |i| {
        !matches!(
            f.call(|| call_result::<F>(i)),
            Err(failsafe::Error::Rejected)
        )
    }
}

/// One timed run: `threads` threads calling `op` for `dur`; (calls/s, rejected).
fn run(op: &(impl Fn(u64) -> bool + Sync), threads: usize, dur: Duration) -> (f64, u64) {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (stop, start) = (&stop, &start);
                s.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    let (mut i, mut rejected) = (0u64, 0u64);
                    // Relaxed: a stop hint, checked once per batch.
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..BATCH {
                            i += 1;
                            rejected += u64::from(!op(i));
                        }
                    }
                    (i as f64 / t0.elapsed().as_secs_f64(), rejected)
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(dur);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0.0, u64::MAX)))
            .fold((0.0, 0), |(r, x), (r2, x2)| (r + r2, x + x2))
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Args {
    runs: usize,
    ms: u64,
    threads: Vec<usize>,
}

fn args() -> Args {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut threads = vec![1, 2];
    if cores > 2 {
        threads.push(cores);
    }
    let mut a = Args {
        runs: 7,
        ms: 300,
        threads,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_default();
        match flag.as_str() {
            "--runs" => a.runs = val.parse().unwrap_or(a.runs),
            "--ms" => a.ms = val.parse().unwrap_or(a.ms),
            "--threads" => a.threads = val.split(',').filter_map(|t| t.parse().ok()).collect(),
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
    }
    a
}

fn main() {
    let a = args();
    let dur = Duration::from_millis(a.ms);
    println!(
        "contended: {} runs x {} ms per row; cores {}",
        a.runs,
        a.ms,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<22} {:>3}  {:>12} {:>12} {:>12}  {:>8} {:>8}  rejected",
        "scenario", "thr", "breakerbank", "recloser", "failsafe", "÷recl", "÷fsafe"
    );
    // (scenario, failure-rate policy?, one failure in N calls)
    let scenarios = [
        ("healthy_consecutive", false, 0u64),
        ("healthy_rate", true, 0),
        ("fail10_rate", true, 10),
    ];
    for (name, rate, fail_one_in) in scenarios {
        for &threads in &a.threads {
            // Fresh breakers per row so one row's state never leaks into another.
            let (_bank, dep) = if rate {
                bank(&rate_yaml(0.5, 20, "1s"))
            } else {
                bank(&consecutive_yaml(5, "1h", 1))
            };
            let r = recloser::Recloser::custom()
                .error_rate(0.5)
                .closed_len(100)
                .half_open_len(10)
                .open_wait(HOUR)
                .build();
            let f_consecutive = Config::new()
                .failure_policy(failure_policy::consecutive_failures(
                    5,
                    backoff::constant(HOUR),
                ))
                .build();
            let f_rate = Config::new()
                .failure_policy(failure_policy::success_rate_over_time_window(
                    0.5,
                    20,
                    Duration::from_secs(1),
                    backoff::constant(HOUR),
                ))
                .build();
            let mut rates: [Vec<f64>; 3] = Default::default();
            let mut rejected = [0u64; 3];
            let mut record = |k: usize, (ops_s, rej): (f64, u64)| {
                rates[k].push(ops_s);
                rejected[k] += rej;
            };
            // Interleaved: a, b, c, a, b, c, ...
            for _ in 0..a.runs {
                match (fail_one_in, rate) {
                    (0, false) => {
                        record(0, run(&bb_op::<0>(&dep), threads, dur));
                        record(1, run(&recloser_op::<0>(&r), threads, dur));
                        record(2, run(&failsafe_op::<0, _>(&f_consecutive), threads, dur));
                    }
                    (0, true) => {
                        record(0, run(&bb_op::<0>(&dep), threads, dur));
                        record(1, run(&recloser_op::<0>(&r), threads, dur));
                        record(2, run(&failsafe_op::<0, _>(&f_rate), threads, dur));
                    }
                    _ => {
                        record(0, run(&bb_op::<10>(&dep), threads, dur));
                        record(1, run(&recloser_op::<10>(&r), threads, dur));
                        record(2, run(&failsafe_op::<10, _>(&f_rate), threads, dur));
                    }
                }
            }
            let m: Vec<f64> = rates.iter_mut().map(|v| median(v)).collect();
            println!(
                "{:<22} {:>3}  {:>10.1} M {:>10.1} M {:>10.1} M  {:>7.2}x {:>7.2}x  {:?}",
                name,
                threads,
                m[0] / 1e6,
                m[1] / 1e6,
                m[2] / 1e6,
                m[0] / m[1],
                m[0] / m[2],
                rejected
            );
        }
    }
}
