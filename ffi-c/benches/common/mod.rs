//! What `benches/ffi.rs` and `examples/callgrind.rs` share: the profile,
//! one admit + record and one `bb_call` through the C ABI, and the Rust
//! call they are measured against.

use breakerbank_ffi::{
    bb_admit, bb_bank, bb_call, bb_decision, bb_outcome, bb_outcome_raw, bb_record, bb_status,
};
use std::ffi::c_void;

/// Three dependencies: `email_client` (global, closed), `payments_client`
/// (tenant-scoped, up to 100 000 tenants), `search_client` (global, trips
/// on one failure and stays open an hour).
pub const PROFILE: &str = include_str!("profile.yaml");

/// `bb_admit`, then `bb_record` of a success when admitted, as a C caller
/// writes it.
#[inline(always)]
pub fn ffi_admit_record(bank: *const bb_bank, dep: u32, tenant: &str, d: &mut bb_decision) {
    // A C caller passes (NULL, 0) for "no tenant", as the Rust side passes None.
    let ptr = if tenant.is_empty() {
        std::ptr::null()
    } else {
        tenant.as_ptr().cast()
    };
    let s = bb_admit(bank, dep, ptr, tenant.len(), 0, d);
    debug_assert_eq!(s, bb_status::BB_OK);
    if d.admitted {
        let s = bb_record(bank, d.permit, bb_outcome::BB_OUTCOME_SUCCESS.into());
        debug_assert_eq!(s, bb_status::BB_OK);
    }
}

/// The call `bb_call` runs in the benchmarks: it does nothing and
/// succeeds, as the closure of [`rust_call`] does.
pub extern "C" fn succeed(_ctx: *mut c_void, _probe: bool) -> bb_outcome_raw {
    bb_outcome_raw(bb_outcome::BB_OUTCOME_SUCCESS as u32)
}

/// `bb_call` of [`succeed`], as a C caller writes it.
#[inline(always)]
pub fn ffi_call(bank: *const bb_bank, dep: u32, tenant: &str, d: &mut bb_decision) {
    let ptr = if tenant.is_empty() {
        std::ptr::null()
    } else {
        tenant.as_ptr().cast()
    };
    let s = bb_call(
        bank,
        dep,
        ptr,
        tenant.len(),
        0,
        Some(succeed),
        std::ptr::null_mut(),
        d,
    );
    debug_assert_eq!(s, bb_status::BB_OK);
}

/// Rust's `dep.call` of a closure that succeeds: what `bb_call` is
/// measured against.
#[inline(always)]
pub fn rust_call(dep: &breakerbank::Dependency, tenant: Option<&str>) {
    let r = dep.call(tenant, None, || Ok::<(), ()>(()));
    debug_assert!(r.is_ok());
}
