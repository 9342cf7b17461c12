//! What an admission routed to the overflow partition costs when the
//! tenant table is full of open partitions (C9; issue 21 item 19): the
//! newcomer's lookup, the attempt to make room, and the overflow's own
//! decision, beside a known open tenant's refusal on the same bank.
//!
//! For each table size: `max_tenants` tenants are tripped (five failures
//! each), then newcomers that were never seen are admitted (each goes to
//! the overflow, which is closed: admitted and recorded), and then the
//! open tenants are asked again (refused). Median of `--runs` batches of
//! `--calls` calls each.
//!
//! ```text
//! cargo run --release -p breakerbank-benches --example overflow -- [--runs 5] [--calls 200000]
//! ```

use breakerbank::{Decision, Outcome};
use breakerbank_benches::{bank, tenant_id, tenant_yaml};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (mut runs, mut calls) = (5usize, 200_000u32);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_default();
        match flag.as_str() {
            "--runs" => runs = val.parse().unwrap_or(runs),
            "--calls" => calls = val.parse().unwrap_or(calls),
            other => eprintln!("unknown flag {other}"),
        }
    }
    println!("  tenants   overflow ns   known open ns   overflow admissions");
    for tenants in [1_000u32, 100_000, 1_000_000] {
        let (b, dep) = bank(&tenant_yaml(tenants));
        let mut buf = [0u8; 9];
        for i in 0..tenants {
            let id = tenant_id(i, &mut buf);
            for _ in 0..5 {
                if let Ok(Decision::Admitted(p)) = dep.admit(Some(id), None) {
                    p.record(Outcome::Failure);
                }
            }
        }
        let mut next = tenants;
        let mut over = Vec::new();
        let mut known = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            for _ in 0..calls {
                let id = tenant_id(next, &mut buf);
                next = next.wrapping_add(1);
                if let Ok(Decision::Admitted(p)) = black_box(&dep).admit(Some(id), None) {
                    p.record(Outcome::Success);
                }
            }
            over.push(t.elapsed().as_nanos() as f64 / f64::from(calls));
            let t = Instant::now();
            for k in 0..calls {
                let id = tenant_id(k % tenants, &mut buf);
                black_box(black_box(&dep).admit(Some(id), None).is_ok());
            }
            known.push(t.elapsed().as_nanos() as f64 / f64::from(calls));
        }
        let overflowed: u64 = b.metrics().dependencies[0]
            .partitions
            .iter()
            .map(|p| p.partition_overflow_total)
            .sum();
        println!(
            "{tenants:>9}   {:>11.1}   {:>13.1}   {overflowed:>19}",
            median(over),
            median(known)
        );
    }
}
