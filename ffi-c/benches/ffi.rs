//! What the C ABI costs: `bb_admit` + `bb_record` through the `extern "C"`
//! functions against the same calls on the Rust core, in one run.
//!
//! Scenarios (one criterion group each, `rust` and `ffi` side by side):
//! * `closed_global`: a closed, globally scoped dependency; admit + record success.
//! * `closed_tenant_100k`: a closed, tenant-scoped dependency with 100 000
//!   live tenants, admitting round-robin across them; admit + record success.
//! * `open_reject`: an open global dependency; admit only (rejected, no permit).
//! * `call_closed_global`, `call_closed_tenant_100k`: the same breakers,
//!   the call through Rust's `dep.call` of a closure that succeeds against
//!   `bb_call` of a C function that does (`rust`, `ffi`).
//! * `ticket`: the exactly-once ledger alone (issue + redeem), the part of
//!   the ABI's cost that buys "a permit recorded twice never counts twice".
//!
//! Both sides use the very same bank and breakers (`__bench_bank`).
//!
//! The machine is two cores shared with other builds, so `rust` and `ffi`
//! are measured *interleaved*: each criterion sample runs both, alternating
//! chunks of 1024 calls, and reports one side's time, counted in the
//! thread's CPU time (CLOCK_THREAD_CPUTIME_ID on Linux) so that time spent
//! descheduled by other processes is not counted. Both sides see the same
//! load; their difference is the ABI's cost.
//!
//! Run: `cargo bench -p breakerbank-ffi --features bench-internals --bench ffi`
//! (or `make ffi-bench`).

mod common;

use breakerbank::{Bank, Decision, Outcome};
use breakerbank_ffi::{
    bb_admit, bb_bank, bb_bank_free, bb_bank_from_yaml, bb_decision, bb_dependency_id, bb_outcome,
    bb_record, bb_status,
};
use common::{ffi_admit_record, ffi_call, rust_call, PROFILE};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

const TENANTS: usize = 100_000;

struct FfiBank(*mut bb_bank);

impl FfiBank {
    fn new() -> Self {
        let mut p = std::ptr::null_mut();
        let s = bb_bank_from_yaml(PROFILE.as_ptr().cast(), PROFILE.len(), false.into(), &mut p);
        assert_eq!(s, bb_status::BB_OK);
        FfiBank(p)
    }
    /// The same bank, through the Rust API.
    fn rust(&self) -> &Bank {
        // SAFETY: `self.0` is a live bank until `Drop`, and the borrow is
        // tied to `&self`.
        unsafe { breakerbank_ffi::__bench_bank(self.0) }
    }
    fn id(&self, name: &str) -> u32 {
        let mut id = 0;
        let s = bb_dependency_id(self.0, name.as_ptr().cast(), name.len(), &mut id);
        assert_eq!(s, bb_status::BB_OK);
        id
    }
}

impl Drop for FfiBank {
    fn drop(&mut self) {
        let _ = bb_bank_free(self.0);
    }
}

fn empty_decision() -> bb_decision {
    // SAFETY: bb_decision is repr(C) of integers, bools and u32-repr enums
    // whose 0 is a valid variant; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The calling thread's CPU time (wall time where that is not available).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn cpu_now() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime is the C library's (64-bit Linux: `struct
    // timespec` is two i64s, matching `Timespec`), and `ts` is a valid,
    // writable timespec for the duration of the call.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn cpu_now() -> Duration {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Runs `iters` calls of each side, alternating chunks, and returns the
/// CPU time spent in the side that is being measured.
fn paired(
    iters: u64,
    mut rust: impl FnMut(),
    mut ffi: impl FnMut(),
    measure_ffi: bool,
) -> Duration {
    const CHUNK: u64 = 1024;
    let (mut t_rust, mut t_ffi) = (Duration::ZERO, Duration::ZERO);
    let mut done = 0;
    let mut rust_first = true;
    while done < iters {
        let n = CHUNK.min(iters - done);
        // Alternate which side goes first, so neither always inherits the
        // other's cache state.
        let t0 = cpu_now();
        for _ in 0..n {
            if rust_first {
                rust()
            } else {
                ffi()
            }
        }
        let t1 = cpu_now();
        for _ in 0..n {
            if rust_first {
                ffi()
            } else {
                rust()
            }
        }
        let t2 = cpu_now();
        let (first, second) = (t1 - t0, t2 - t1);
        if rust_first {
            t_rust += first;
            t_ffi += second;
        } else {
            t_ffi += first;
            t_rust += second;
        }
        rust_first = !rust_first;
        done += n;
    }
    if measure_ffi {
        t_ffi
    } else {
        t_rust
    }
}

/// Benchmarks `rust` and `ffi` as one group, interleaved (see [`paired`]).
fn side_by_side(c: &mut Criterion, group: &str, mut rust: impl FnMut(), mut ffi: impl FnMut()) {
    let mut g = c.benchmark_group(group);
    for (name, measure_ffi) in [("rust", false), ("ffi", true)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| paired(iters, &mut rust, &mut ffi, measure_ffi))
        });
    }
    g.finish();
}

fn closed_global(c: &mut Criterion) {
    let ffi = FfiBank::new();
    let dep = ffi.rust().dependency("email_client").unwrap();
    let id = ffi.id("email_client");
    let mut d = empty_decision();
    side_by_side(
        c,
        "closed_global",
        || match dep.admit(black_box(None), None) {
            Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
            _ => unreachable!(),
        },
        || ffi_admit_record(ffi.0, black_box(id), "", &mut d),
    );
}

fn closed_tenant_100k(c: &mut Criterion) {
    let tenants: Vec<String> = (0..TENANTS).map(|i| format!("tenant-{i:06}")).collect();
    let ffi = FfiBank::new();
    let dep = ffi.rust().dependency("payments_client").unwrap();
    let id = ffi.id("payments_client");
    let mut d = empty_decision();
    for t in &tenants {
        // Make every tenant's partition live (one failure: not idle, so
        // nothing is evicted).
        let s = bb_admit(ffi.0, id, t.as_ptr().cast(), t.len(), 0, &mut d);
        assert_eq!(s, bb_status::BB_OK);
        let s = bb_record(ffi.0, d.permit, bb_outcome::BB_OUTCOME_FAILURE.into());
        assert_eq!(s, bb_status::BB_OK);
    }
    // Both sides walk the same 100k partitions of the same bank in
    // lockstep: each chunk of 1024 tenants is admitted by one side, then by
    // the other (which side goes first alternates, see `paired`), so both
    // see the same keys and, on average, the same cache state.
    let (mut i, mut j) = (0usize, 0usize);
    side_by_side(
        c,
        "closed_tenant_100k",
        || {
            let t = &tenants[i];
            i = if i + 1 == TENANTS { 0 } else { i + 1 };
            match dep.admit(Some(black_box(t.as_str())), None) {
                // Success: the ordinary healthy path (it clears the one
                // failure counted during setup the first time round).
                Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
                _ => unreachable!(),
            }
        },
        || {
            let t = &tenants[j];
            j = if j + 1 == TENANTS { 0 } else { j + 1 };
            ffi_admit_record(ffi.0, black_box(id), t, &mut d);
        },
    );
}

fn open_reject(c: &mut Criterion) {
    let ffi = FfiBank::new();
    let dep = ffi.rust().dependency("search_client").unwrap();
    let id = ffi.id("search_client");
    let mut d = empty_decision();
    ffi_admit_failure(&ffi, id, &mut d);
    side_by_side(
        c,
        "open_reject",
        || match dep.admit(black_box(None), None) {
            Ok(Decision::Rejected(r)) => {
                black_box(r.retry_after);
            }
            _ => unreachable!(),
        },
        || {
            let s = bb_admit(ffi.0, black_box(id), std::ptr::null(), 0, 0, &mut d);
            debug_assert!(s == bb_status::BB_OK && !d.admitted);
            black_box(d.retry_after_ns);
        },
    );
}

fn ffi_admit_failure(ffi: &FfiBank, id: u32, d: &mut bb_decision) {
    assert_eq!(
        bb_admit(ffi.0, id, std::ptr::null(), 0, 0, d),
        bb_status::BB_OK
    );
    assert!(d.admitted);
    assert_eq!(
        bb_record(ffi.0, d.permit, bb_outcome::BB_OUTCOME_FAILURE.into()),
        bb_status::BB_OK
    );
}

fn call_closed_global(c: &mut Criterion) {
    let ffi = FfiBank::new();
    let dep = ffi.rust().dependency("email_client").unwrap();
    let id = ffi.id("email_client");
    let mut d = empty_decision();
    side_by_side(
        c,
        "call_closed_global",
        || rust_call(&dep, black_box(None)),
        || ffi_call(ffi.0, black_box(id), "", &mut d),
    );
}

fn call_closed_tenant_100k(c: &mut Criterion) {
    let tenants: Vec<String> = (0..TENANTS).map(|i| format!("tenant-{i:06}")).collect();
    let ffi = FfiBank::new();
    let dep = ffi.rust().dependency("payments_client").unwrap();
    let id = ffi.id("payments_client");
    let mut d = empty_decision();
    for t in &tenants {
        let s = bb_admit(ffi.0, id, t.as_ptr().cast(), t.len(), 0, &mut d);
        assert_eq!(s, bb_status::BB_OK);
        let s = bb_record(ffi.0, d.permit, bb_outcome::BB_OUTCOME_FAILURE.into());
        assert_eq!(s, bb_status::BB_OK);
    }
    let (mut i, mut j) = (0usize, 0usize);
    side_by_side(
        c,
        "call_closed_tenant_100k",
        || {
            let t = &tenants[i];
            i = if i + 1 == TENANTS { 0 } else { i + 1 };
            rust_call(&dep, Some(black_box(t.as_str())));
        },
        || {
            let t = &tenants[j];
            j = if j + 1 == TENANTS { 0 } else { j + 1 };
            ffi_call(ffi.0, black_box(id), t, &mut d);
        },
    );
}

fn ticket(c: &mut Criterion) {
    c.bench_function("ticket/issue_redeem", |b| {
        b.iter_custom(|iters| {
            let t0 = cpu_now();
            for _ in 0..iters {
                black_box(breakerbank_ffi::__bench_ticket_roundtrip());
            }
            cpu_now() - t0
        })
    });
}

fn config() -> Criterion {
    // Two shared cores: short, repeated samples; medians are what we report.
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = closed_global, closed_tenant_100k, open_reject, call_closed_global, call_closed_tenant_100k, ticket
}
criterion_main!(benches);
