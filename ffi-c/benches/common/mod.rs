//! What `benches/ffi.rs` and `examples/callgrind.rs` share: the profile
//! and one admit + record through the C ABI.

use breakerbank_ffi::{bb_admit, bb_bank, bb_decision, bb_outcome, bb_record, bb_status};

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
