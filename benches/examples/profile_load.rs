//! Profile loading at 1k … 51k dependencies: the time to read and check
//! the text (`Profile::from_yaml`) and to build a bank from it
//! (`Bank::new`), the median of `--runs` runs each, with the text's size.
//! Loading is linear in the size when the time per dependency stays flat
//! down the table. The 51,709-dependency row is a 10 MB profile.
//!
//! `make bench-profile`, or `cargo run --release -p breakerbank-benches
//! --example profile_load -- --runs 5`.

use breakerbank::{Bank, Profile};
use std::time::{Duration, Instant};

/// A profile of `n` dependencies, alternating the policies and fallbacks
/// a real one mixes.
fn profile(n: usize) -> String {
    let mut text = String::from("memory_limit: 64GiB\ndependencies:\n");
    for i in 0..n {
        let dep = match i % 3 {
            0 => format!(
                "  dep_{i:06}_client:\n    isolation: tenant\n    trip:\n      consecutive_failures: 5\n      slow_call: 2s\n    open_duration: 30s\n    backoff: {{multiplier: 2.0, max: 5m}}\n    half_open:\n      probe_budget: 2\n      success_threshold: 3\n    fallback:\n      kind: error\n      code: DEP_{i}_UNAVAILABLE\n    recovery_bound: 5m\n    max_tenants: 16\n"
            ),
            1 => format!(
                "  dep_{i:06}_client:\n    isolation: global\n    trip: {{failure_rate: 0.5, min_calls: 20, window: 10s}}\n    open_duration: 15s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: degraded}}\n    recovery_bound: 2m\n"
            ),
            _ => format!(
                "  dep_{i:06}_client:\n    isolation: global\n    trip: {{consecutive_failures: 3}}\n    open_duration: 250ms\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: stale, max_staleness: 10m}}\n    recovery_bound: 1h\n"
            ),
        };
        text.push_str(&dep);
    }
    text
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut runs = 5usize;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--runs", Some(n)) => runs = n.parse().expect("--runs N"),
            _ => panic!("usage: profile_load [--runs N]"),
        }
    }
    println!("dependencies  text MiB  from_yaml ms  µs/dep  Bank::new ms  µs/dep");
    for n in [1_000, 4_000, 8_000, 16_000, 32_000, 51_709] {
        let text = profile(n);
        let mut parse = Vec::new();
        let mut build = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let p = Profile::from_yaml(&text).expect("valid profile");
            parse.push(t.elapsed());
            let t = Instant::now();
            let bank = Bank::new(p);
            build.push(t.elapsed());
            drop(bank);
        }
        let (parse, build) = (median(parse), median(build));
        let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
        println!(
            "{n:>12}  {:>8.1}  {:>12.1}  {:>6.1}  {:>12.1}  {:>6.1}",
            text.len() as f64 / f64::from(1u32 << 20),
            parse.as_secs_f64() * 1e3,
            per(parse),
            build.as_secs_f64() * 1e3,
            per(build),
        );
    }
}
