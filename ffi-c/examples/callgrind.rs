//! A driver for counting the C ABI's instructions under callgrind: runs one
//! path `N` times through the Rust core, then `N` times through the
//! `extern "C"` functions (the very same bank, as `benches/ffi.rs`).
//!
//! ```text
//! cargo build --release -p breakerbank-ffi --features bench-internals --example callgrind
//! valgrind --tool=callgrind target/release/examples/callgrind closed_global 100000
//! callgrind_annotate --inclusive=yes callgrind.out.* | grep _loop
//! ```
//!
//! Both loops run in one process on one bank (so a tenant table's layout,
//! which depends on the process's random hash seed, is the same for both):
//! instructions per call are the inclusive counts of `rust_loop` and
//! `ffi_loop` divided by `N`. Paths: `closed_global`, `closed_tenant_100k`
//! (100 000 live tenants, round-robin), `open_reject`; with `call_` before
//! the first two, `dep.call` against `bb_call` (`rust_call_loop`,
//! `ffi_call_loop`).

use breakerbank::{Decision, Outcome};
use breakerbank_ffi::{
    bb_admit, bb_bank, bb_bank_from_yaml, bb_decision, bb_dependency_id, bb_outcome, bb_record,
    bb_status,
};
use std::hint::black_box;

#[path = "../benches/common/mod.rs"]
mod common;
use common::{ffi_admit_record, ffi_call, rust_call, PROFILE};

const TENANTS: usize = 100_000;

/// The Rust core's loop: `N` admits (and records) of `dep` for `tenants`
/// round-robin (`[""]`: no tenant).
#[inline(never)]
fn rust_loop(dep: &breakerbank::Dependency, tenants: &[String], n: usize) {
    for i in 0..n {
        let t = tenants[i % tenants.len()].as_str();
        let t = (!t.is_empty()).then_some(t);
        match dep.admit(black_box(t), None) {
            Ok(Decision::Admitted(p)) => p.record(Outcome::Success),
            Ok(Decision::Rejected(r)) => {
                black_box(r.retry_after);
            }
            Err(_) => unreachable!(),
        }
    }
}

/// The Rust core's loop through `dep.call` of a closure that succeeds.
#[inline(never)]
fn rust_call_loop(dep: &breakerbank::Dependency, tenants: &[String], n: usize) {
    for i in 0..n {
        let t = tenants[i % tenants.len()].as_str();
        rust_call(dep, black_box((!t.is_empty()).then_some(t)));
    }
}

/// The same loop through `bb_call`.
#[inline(never)]
fn ffi_call_loop(bank: *const bb_bank, id: u32, tenants: &[String], n: usize, d: &mut bb_decision) {
    for i in 0..n {
        ffi_call(bank, black_box(id), &tenants[i % tenants.len()], d);
    }
}

/// The same loop through `bb_admit` and `bb_record`.
#[inline(never)]
fn ffi_loop(bank: *const bb_bank, id: u32, tenants: &[String], n: usize, d: &mut bb_decision) {
    for i in 0..n {
        ffi_admit_record(bank, black_box(id), &tenants[i % tenants.len()], d);
        black_box(d.retry_after_ns);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, n] = &args[..] else {
        panic!("usage: callgrind [call_]closed_global|[call_]closed_rate_global|[call_]closed_tenant_100k|open_reject N");
    };
    let n: usize = n.parse().expect("N");
    let mut p = std::ptr::null_mut();
    let s = bb_bank_from_yaml(PROFILE.as_ptr().cast(), PROFILE.len(), false.into(), &mut p);
    assert_eq!(s, bb_status::BB_OK);
    let bank = p.cast_const();
    // SAFETY: `p` is a live bank, never freed here.
    let rust = unsafe { breakerbank_ffi::__bench_bank(bank) };
    // SAFETY: bb_decision is repr(C) of integers, bools and u32-repr enums
    // whose 0 is a valid variant; all-zero is a valid value.
    let mut d: bb_decision = unsafe { std::mem::zeroed() };
    let (call, path) = match path.strip_prefix("call_") {
        Some(rest) => (true, rest.to_owned()),
        None => (false, path.clone()),
    };
    let (name, tenants) = match path.as_str() {
        "closed_global" => ("email_client", vec![String::new()]),
        "closed_rate_global" => ("reports_client", vec![String::new()]),
        "closed_tenant_100k" => (
            "payments_client",
            (0..TENANTS).map(|i| format!("tenant-{i:06}")).collect(),
        ),
        "open_reject" => ("search_client", vec![String::new()]),
        other => panic!("unknown path {other}"),
    };
    let dep = rust.dependency(name).unwrap();
    let mut id = 0;
    let s = bb_dependency_id(bank, name.as_ptr().cast(), name.len(), &mut id);
    assert_eq!(s, bb_status::BB_OK);
    for t in &tenants {
        ffi_admit_record(bank, id, t, &mut d);
    }
    if path == "open_reject" {
        assert_eq!(
            bb_admit(bank, id, std::ptr::null(), 0, 0, &mut d),
            bb_status::BB_OK
        );
        let s = bb_record(bank, d.permit, bb_outcome::BB_OUTCOME_FAILURE.into());
        assert_eq!(s, bb_status::BB_OK);
    }
    if call {
        rust_call_loop(&dep, &tenants, n);
        ffi_call_loop(bank, id, &tenants, n, &mut d);
    } else {
        rust_loop(&dep, &tenants, n);
        ffi_loop(bank, id, &tenants, n, &mut d);
    }
}
