//! Scale: tenant-scoped admit + record at 1, 1k, 100k and 1M tenants;
//! memory per partition with a counting global allocator; memory after a
//! flood of 1M distinct tenants into `max_tenants: 10000` (issue 7, item 3).
//!
//! Cost: every tenant is inserted first (one admit + record each, with
//! `max_tenants` equal to the tenant count, so nothing is evicted); then
//! each pass makes 1M admit + record-success calls, four ways:
//!
//! - `scattered`: a fixed shuffled order (a random permutation, cycled),
//!   as uniformly spread traffic reaches the tenants: consecutive calls
//!   touch unrelated partitions and index buckets, and no prefetcher can
//!   guess the next.
//! - `listed`: the same calls in the same order, the ids read from a
//!   buffer laid out before the timing instead of formatted into the ring
//!   (see below).
//! - `zipf`: 1M calls drawn from a Zipf law of exponent one over the
//!   tenants, the popular ones scattered in the arena: traffic with a few
//!   large tenants, whose partitions stay in cache.
//! - `in order`: index += 3, mod N, over tenants numbered in insertion
//!   order. A tenant's slot follows its hash, not its arrival, so this
//!   walk reads the arena as scattered as the shuffled order does: the
//!   column shows that insertion order buys a lookup nothing.
//!
//! Tenant ids are 9 bytes (`t` + 8 letters), each written into a ring of
//! buffers 16 calls before its use (`IdRing` says why ahead); the
//! `id_floor` line is that loop alone. Formatting an id takes
//! register-writing instructions, and at 1M tenants how many calls overlap
//! their misses is bounded by the physical registers the loop's
//! instructions hold (`docs/design/tenant-table.md`): so `listed` reads each
//! call's id from one buffer made beforehand, in calling order, as a
//! service has its requests' ids in memory already; the
//! second `id_floor` figure is that loop alone. One more row repeats
//! 100k tenants with 36-byte, UUID-shaped ids (kept as a fingerprint in
//! the partition). The median pass is reported.
//!
//! Memory floor, measured right before each row: N 64-byte lines (one per
//! tenant, as each tenant's home line is), one word read per step in the same
//! shuffled order: `chase` makes each read's address depend on the last
//! read (the latency of one scattered line), `reads` leaves them
//! independent (what overlapping misses bring it down to). One scattered
//! line per call costs between the two. The floor's lines are a plain
//! `Vec` on 4 KiB pages; a table's arena of 4 MiB or more asks for huge
//! pages, so past the TLB's reach the chase also counts a page walk a
//! call does not pay where huge pages were given: `huge MB` is how much
//! of the process the kernel backed with them after the inserts
//! (`AnonHugePages` in /proc/self/smaps_rollup; `-` where there is none).
//!
//! Memory: live heap bytes (allocated minus freed) counted by the global
//! allocator below, after crossbeam-epoch garbage is flushed, divided by
//! the tenant count: `added/tenant` counts what inserting the tenants
//! added, `all/tenant` also what the bank allocated when it was made (the
//! table's arena, reserved for `max_tenants` up front, its index and
//! shards): the figure C9's budget is read against. `peak` is the
//! high-water mark during insertion.
//!
//! ```text
//! cargo run --release -p breakerbank-benches --example scale -- [--passes 3] [--max 1000000]
//! ```

// The allocator's counters are std atomics: this binary is not loom-checked.
#![allow(clippy::disallowed_types)]

use breakerbank::{Decision, Dependency, Outcome};
use breakerbank_benches::{bank, long_tenant_id, tenant_id, tenant_yaml, IdRing, RING};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            // Relaxed: statistics only.
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            // Relaxed: statistics only.
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as in `alloc`.
        unsafe { System.dealloc(p, l) };
        // Relaxed: statistics only.
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            // Relaxed: statistics only.
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            let now = LIVE.fetch_add(new, Ordering::Relaxed) + new;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Megabytes of the process on transparent huge pages, where Linux says.
fn huge_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<f64>()
        .ok()?;
    Some(kb / 1024.0)
}

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Runs deferred epoch destruction (old shards) until the live heap stops
/// shrinking, so `live()` counts what the table keeps, not garbage awaiting
/// reclamation, and the timed passes do not pay for reclaiming it.
fn flush_epoch() {
    let mut last = usize::MAX;
    while live() < last {
        last = live();
        for _ in 0..1024 {
            crossbeam_epoch::pin().flush();
        }
    }
}

fn call(dep: &Dependency, tenant: &str) {
    match dep.admit(Some(tenant), None) {
        Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
        other => panic!("tenant {tenant}: {other:?}"),
    }
}

/// Calls per timed pass (at 1M tenants: every tenant once).
const CALLS_PER_PASS: u64 = 1_000_000;

/// The next value of a xorshift64 generator: the fixed-seed sequences
/// below are the same in every run.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// The shuffled visiting order of `n` tenants: a permutation of 0..n,
/// the same in every run (Fisher-Yates).
fn shuffled(n: u32) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..order.len()).rev() {
        order.swap(i, (xorshift(&mut x) % (i as u64 + 1)) as usize);
    }
    order
}

/// `CALLS_PER_PASS` tenant indexes drawn from a Zipf law (exponent 1) over
/// n tenants: the k-th most popular gets calls in proportion to 1/k, as
/// traffic with a few large tenants would. Ranks are mapped to tenants
/// through `shuffled`, so popular tenants are not neighbours in the arena.
fn zipf(n: u32) -> Vec<u32> {
    let tenants = shuffled(n);
    let mut cdf = Vec::with_capacity(n as usize);
    let mut total = 0.0f64;
    for k in 1..=n {
        total += 1.0 / f64::from(k);
        cdf.push(total);
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..CALLS_PER_PASS)
        .map(|_| {
            let u = (xorshift(&mut x) >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cdf.partition_point(|&c| c < u).min(n as usize - 1);
            tenants[rank]
        })
        .collect()
}

/// The `in order` walk: index += 3, mod n (see the top).
fn every_third(n: u32) -> Vec<u32> {
    (0..u64::from(n))
        .map(|k| (k * 3 % u64::from(n)) as u32)
        .collect()
}

/// Tenant `i`'s id, short or UUID-shaped, in the caller's buffers.
#[inline]
fn id<'a>(i: u32, long_ids: bool, buf: &'a mut [u8; 9], long: &'a mut [u8; 36]) -> &'a str {
    if long_ids {
        long_tenant_id(i, long)
    } else {
        tenant_id(i, buf)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per call of `f(index)` over `CALLS_PER_PASS` indexes taken from
/// `order` (cycled); the median of `passes`.
fn time_passes(order: &[u32], passes: usize, mut f: impl FnMut(u32)) -> f64 {
    let calls = CALLS_PER_PASS;
    let mut samples = Vec::with_capacity(passes);
    for _ in 0..passes {
        let mut left = calls as usize;
        let t0 = Instant::now();
        while left > 0 {
            let take = left.min(order.len());
            for &i in &order[..take] {
                f(i);
            }
            left -= take;
        }
        samples.push(t0.elapsed().as_nanos() as f64 / calls as f64);
    }
    median(&mut samples)
}

/// Bytes between consecutive ids in [`time_listed`]'s buffer.
const fn id_stride(long_ids: bool) -> usize {
    if long_ids {
        48
    } else {
        16
    }
}

/// ns per call of `f(id)` over `CALLS_PER_PASS` tenants taken from
/// `order` (cycled), their ids laid out beforehand in one buffer in
/// calling order, [`id_stride`] bytes apart, and read from it: ids a
/// service has in memory already (its requests), nothing formatted on
/// the timed path. The buffer is read front to back, which the hardware
/// prefetcher streams. The median of `passes`.
fn time_listed(order: &[u32], passes: usize, long_ids: bool, mut f: impl FnMut(&str)) -> f64 {
    let stride = id_stride(long_ids);
    let width = if long_ids { 36 } else { 9 };
    let mut list = vec![0u8; CALLS_PER_PASS as usize * stride];
    let (mut buf, mut long) = ([0u8; 9], [0u8; 36]);
    for (c, at) in list.chunks_exact_mut(stride).enumerate() {
        at[..width]
            .copy_from_slice(id(order[c % order.len()], long_ids, &mut buf, &mut long).as_bytes());
    }
    let mut samples = Vec::with_capacity(passes);
    for _ in 0..passes {
        let t0 = Instant::now();
        for at in list.chunks_exact(stride) {
            // SAFETY: each chunk begins with an id copied from a `&str`
            // above, `width` bytes long.
            f(unsafe { std::str::from_utf8_unchecked(at.get_unchecked(..width)) });
        }
        samples.push(t0.elapsed().as_nanos() as f64 / CALLS_PER_PASS as f64);
    }
    median(&mut samples)
}

/// ns per call of `f(id)` over `CALLS_PER_PASS` tenants taken from
/// `order` (cycled), each id written into an [`IdRing`] [`RING`] calls
/// before its use; the median of `passes`.
fn time_ids(order: &[u32], passes: usize, long_ids: bool, mut f: impl FnMut(&str)) -> f64 {
    let n = order.len();
    let mut ring = IdRing::new(long_ids);
    let mut samples = Vec::with_capacity(passes);
    for _ in 0..passes {
        for k in 0..RING {
            ring.put(k, order[k % n]);
        }
        let mut ahead = RING % n;
        let t0 = Instant::now();
        for c in 0..CALLS_PER_PASS as usize {
            f(ring.get(c));
            ring.put(c, order[ahead]);
            ahead += 1;
            if ahead == n {
                ahead = 0;
            }
        }
        samples.push(t0.elapsed().as_nanos() as f64 / CALLS_PER_PASS as f64);
    }
    median(&mut samples)
}

/// One 64-byte line: the first word is the next line of the chase.
#[repr(align(64))]
struct Line([u64; 8]);

/// The memory floor at `n` lines: (chase, reads) in ns per step.
fn memory_floor(n: u32, passes: usize) -> (f64, f64) {
    let order = shuffled(n);
    let mut lines: Vec<Line> = (0..n).map(|_| Line([0; 8])).collect();
    // One cycle through every line, in the shuffled order.
    for (k, &i) in order.iter().enumerate() {
        lines[i as usize].0[0] = u64::from(order[(k + 1) % order.len()]);
    }
    let mut at = u64::from(order[0]);
    let chase = time_passes(&order, passes, |_| {
        at = lines[at as usize].0[0];
    });
    black_box(at);
    let mut sum = 0u64;
    let reads = time_passes(&order, passes, |i| {
        sum = sum.wrapping_add(lines[i as usize].0[0]);
    });
    black_box(sum);
    (chase, reads)
}

fn main() {
    let mut passes = 3;
    let mut max = 1_000_000u32;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_default();
        match flag.as_str() {
            "--passes" => passes = val.parse().unwrap_or(passes),
            "--max" => max = val.parse().unwrap_or(max),
            _ => {}
        }
    }
    println!(
        "partition slot: {} bytes, two a tenant (breakerbank::PARTITION_BYTES)",
        breakerbank::PARTITION_BYTES
    );
    let mut buf = [0u8; 9];
    let floor = time_ids(&shuffled(1_000_000), passes, false, |id| {
        black_box(id);
    });
    let listed_floor = time_listed(&shuffled(1_000_000), passes, false, |id| {
        black_box(id);
    });
    println!(
        "id_floor: {floor:.1} ns per id (the loop and the id ring alone), {listed_floor:.1} (the loop reading a list of ids)"
    );
    println!(
        "{:>9}  {:>8}  {:>10}  {:>8}  {:>8}  {:>10}  {:>8}  {:>8}  {:>10}  {:>12}  {:>15}  {:>8}  {:>8}",
        "tenants",
        "id bytes",
        "scattered",
        "listed",
        "zipf",
        "in order",
        "chase",
        "reads",
        "insert ns",
        "added/tenant",
        "all/tenant",
        "peak MB",
        "huge MB"
    );
    let mut long = [0u8; 36];
    let rows = [
        (1u32, false),
        (1_000, false),
        (100_000, false),
        (100_000, true),
        (1_000_000, false),
    ];
    for (n, long_ids) in rows {
        if n > max {
            break;
        }

        flush_epoch();
        let before_bank = live();
        let (_bank, dep) = bank(&tenant_yaml(n));
        let before = live();
        PEAK.store(before, Ordering::Relaxed);
        let t0 = Instant::now();
        for i in 0..n {
            call(&dep, id(i, long_ids, &mut buf, &mut long));
        }
        let insert_ns = t0.elapsed().as_nanos() as f64 / f64::from(n);
        let peak = PEAK.load(Ordering::Relaxed);
        flush_epoch();
        let after = live();
        let per = (after - before) as f64 / f64::from(n);
        let per_with_table = (after - before_bank) as f64 / f64::from(n);
        let huge = huge_mb().map_or_else(|| "-".to_string(), |mb| format!("{mb:.0}"));
        // Right before the row it frames: this host's caches change
        // from minute to minute (the L3 it shares comes and goes).
        let (chase, reads) = memory_floor(n, passes);
        let ns = time_ids(&shuffled(n), passes, long_ids, |id| call(&dep, id));
        let listed = time_listed(&shuffled(n), passes, long_ids, |id| call(&dep, id));
        let in_order = time_ids(&every_third(n), passes, long_ids, |id| call(&dep, id));
        let skewed = time_ids(&zipf(n), passes, long_ids, |id| call(&dep, id));
        println!(
            "{:>9}  {:>8}  {:>10.1}  {:>8.1}  {:>8.1}  {:>10.1}  {:>8.1}  {:>8.1}  {:>10.0}  {:>12.0}  {:>15.0}  {:>8.1}  {:>8}",
            n,
            if long_ids { 36 } else { 9 },
            ns,
            listed,
            skewed,
            in_order,
            chase,
            reads,
            insert_ns,
            per,
            per_with_table,
            (peak - before_bank) as f64 / 1e6,
            huge
        );
    }

    // Flood: 1M distinct tenants, one call each, into max_tenants 10000.
    let flood = 1_000_000u32.min(max.max(20_000));
    flush_epoch();
    let before_bank = live();
    let (bank_f, dep) = bank(&tenant_yaml(10_000));
    PEAK.store(live(), Ordering::Relaxed);
    let t0 = Instant::now();
    for i in 0..flood {
        call(&dep, tenant_id(i, &mut buf));
    }
    let flood_ns = t0.elapsed().as_nanos() as f64 / f64::from(flood);
    let peak = PEAK.load(Ordering::Relaxed) - before_bank;
    flush_epoch();
    let after = live() - before_bank;
    let snapshot = bank_f.metrics();
    let parts = &snapshot.dependencies[0].partitions;
    let overflow: f64 = parts
        .iter()
        .flat_map(|p| p.values())
        .filter(|(k, _)| *k == "partition_overflow_total")
        .map(|(_, v)| v)
        .sum();
    println!(
        "flood: {flood} distinct tenants into max_tenants 10000: {:.2} MB live after \
         ({:.0} bytes per table slot), peak {:.2} MB, {:.0} ns per call, \
         {} live partitions, partition_overflow_total {overflow}",
        after as f64 / 1e6,
        after as f64 / 10_000.0,
        peak as f64 / 1e6,
        flood_ns,
        parts.len()
    );
}
