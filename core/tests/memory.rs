//! C9: memory per partition and after a flood, measured with a counting
//! global allocator (this test binary's own).

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

use breakerbank::{Bank, Decision, ManualClock, Outcome, Profile};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` was allocated by `System` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn bank(max_tenants: u32) -> Bank {
    let p = Profile::from_yaml(&format!(
        "dependencies:\n  payments_client:\n    isolation: tenant\n    trip: {{consecutive_failures: 1}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: X}}\n    recovery_bound: 5m\n    max_tenants: {max_tenants}\n"
    ))
    .expect("profile");
    Bank::with_clock(p, ManualClock::new())
}

fn call(bank: &Bank, tenant: &str, outcome: Outcome) {
    let dep = bank.dependency("payments_client").expect("declared");
    if let Decision::Admitted(p) = dep.admit(Some(tenant), None).expect("tenant") {
        p.record(outcome);
    };
}

// One test function: the allocator counts are process-wide.
#[test]
fn c9_memory_per_partition_and_after_a_flood() {
    // Bytes per partition: tenant ids are 12 bytes ("tenant-00000").
    const N: usize = 100_000;
    let names: Vec<String> = (0..N).map(|i| format!("tenant-{i:05}")).collect();
    // Counted from before the bank: the table's skeleton (shard pointers,
    // chunk pointers, the tenant index) is sized by max_tenants and belongs
    // to the partitions as much as the arena does.
    let empty = live();
    let b = bank(N as u32);
    let skeleton = live() - empty;
    for t in &names {
        call(&b, t, Outcome::Success);
    }
    let per = (live() - empty) as f64 / N as f64;
    println!(
        "bytes per healthy partition (12-byte tenant ids; key, map entry, arena, index, \
         bank and table skeleton ({skeleton} bytes) all included): {per:.1}"
    );
    // C9: at most 128 bytes per partition plus its key, all told.
    assert!(per <= 128.0 + 12.0, "{per} bytes per partition");
    drop(b);

    // A dropped bank gives back what its partitions' cold parts hold
    // (failure-rate windows of each episode, counters), not just the
    // table.
    let flush = || {
        for _ in 0..64 {
            crossbeam_epoch::pin().flush();
        }
    };
    flush();
    let before = live();
    {
        let p = Profile::from_yaml(
            "dependencies:\n  ledger_client:\n    isolation: tenant\n    trip: {failure_rate: 0.5, min_calls: 100, window: 10s}\n    open_duration: 30s\n    half_open: {probe_budget: 1, success_threshold: 1}\n    fallback: {kind: error, code: X}\n    recovery_bound: 5m\n    max_tenants: 10000\n",
        )
        .expect("profile");
        let b = Bank::with_clock(p, ManualClock::new());
        let dep = b.dependency("ledger_client").expect("declared");
        for t in &names[..10_000] {
            if let Decision::Admitted(p) = dep.admit(Some(t), None).expect("tenant") {
                p.record(Outcome::Failure);
            }
        }
        let held = live() - before;
        assert!(
            held > 10_000 * 128,
            "{held} bytes for 10,000 failing tenants"
        );
        // Tenants' own operator actions under a dependency-wide one: the
        // table keeps each in its override map, dropped with the bank.
        dep.force_open(None);
        let before_overrides = live();
        for t in &names[..4000] {
            dep.reset(Some(t));
        }
        flush();
        let overrides = live() - before_overrides;
        assert!(
            overrides > 64 * 1024,
            "{overrides} bytes for 4,000 tenants' resets"
        );
    }
    flush();
    let kept = live() - before;
    println!("a dropped bank of 10,000 failing tenants and 4,000 overrides kept {kept} bytes");
    assert!(kept < 64 * 1024, "a dropped bank kept {kept} bytes");

    // A flood of 1,000,000 distinct tenants into max_tenants 10000.
    let b = bank(10_000);
    call(&b, "victim", Outcome::Failure);
    let base = live();
    let mut peak_after_fill = 0;
    for i in 0..1_000_000u32 {
        call(&b, &format!("flood-{i}"), Outcome::Success);
        if i == 20_000 {
            peak_after_fill = live();
        }
        if [100_000, 300_000, 500_000, 700_000].contains(&i) {
            println!("  after {i}: {}", live() - base);
        }
    }
    let after = live();
    println!(
        "flood: {} bytes above the empty bank after 20k tenants, {} after 1M (max_tenants 10000)",
        peak_after_fill - base,
        after - base
    );
    assert!(
        after - base < 4 * 1024 * 1024,
        "flood grew memory to {} bytes",
        after - base
    );
    assert!(
        (after - peak_after_fill).abs() < 512 * 1024,
        "memory keeps growing with distinct tenants: {} → {}",
        peak_after_fill,
        after
    );
    let dep = b.dependency("payments_client").expect("declared");
    assert_eq!(
        dep.state(Some("victim")).expect("tenant"),
        breakerbank::State::Open
    );
}
