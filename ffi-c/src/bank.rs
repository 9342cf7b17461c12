//! `bb_bank` and the functions over it.

// Arc and one counter from std: only the permit ledger's slots are
// loom-modelled in this crate (see ledger.rs; clippy.toml steers only the
// core's imports through `crate::sync`).
#![allow(clippy::disallowed_types)]

use crate::boundary::{copy_out, opt_str_arg, str_arg, Fail, Out};
use crate::ledger::{self, Issued, Ledger, Place};
use crate::listener::{bb_listener_fn, ListenerSlot};
use crate::types::{
    bb_bool_raw, bb_breaker_state, bb_call_fn, bb_decision, bb_fallback_kind, bb_inspection,
    bb_outcome_raw, bb_permit, bb_reason, bb_status,
};
use breakerbank::{
    AdmitError, Bank, Decision, Dependency, Instant, ManualClock, Outcome, Profile, RawPermit,
    Rejection, Running,
};
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A bank of circuit breakers built from a YAML profile (opaque).
///
/// Ownership: created by `bb_bank_from_yaml`, owned by the caller, freed
/// exactly once with `bb_bank_free` after every other call on it has
/// returned. Thread safety: every function taking a `const bb_bank *` may be
/// called from any number of threads at once; `bb_set_listener` and
/// `bb_bank_free` take `bb_bank *`.
pub struct bb_bank {
    pub(crate) bank: Bank,
    listener: Arc<ListenerSlot>,
    /// Tags this bank's permits in the ledger.
    serial: u32,
}

impl std::fmt::Debug for bb_bank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("bb_bank")
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

/// Bank serials; 0 is never used, so a zeroed permit is never a bank's.
static SERIALS: AtomicU32 = AtomicU32::new(1);

fn dependency(bank: &bb_bank, id: u32) -> Result<&Dependency, Fail> {
    match bank.bank.dependency_by_id(id) {
        Some(d) => Ok(d),
        None => Err(unknown_id(id)),
    }
}

#[cold]
fn unknown_id(id: u32) -> Fail {
    Fail::new(
        bb_status::BB_ERR_UNKNOWN_DEPENDENCY,
        format!("no dependency with id {id}"),
    )
}

#[cold]
#[inline(never)]
fn not_issued() -> Fail {
    Fail::arg("`permit` was already recorded, or was not issued by this bank, or was altered")
}

#[cold]
#[inline(never)]
fn bad_outcome(outcome: bb_outcome_raw) -> Fail {
    Fail::arg(format!("`outcome` {} is not a bb_outcome", outcome.0))
}

#[cold]
#[inline(never)]
fn no_function() -> Fail {
    Fail::arg("`fn` is null")
}

#[cold]
#[inline(never)]
fn bad_returned_outcome(outcome: bb_outcome_raw) -> Fail {
    Fail::arg(format!(
        "`fn` returned {}, which is not a bb_outcome: the call was recorded as cancelled",
        outcome.0
    ))
}

/// The status and message of a tenant the core refused.
#[cold]
fn tenant_refused(dep: &Dependency, e: AdmitError) -> Fail {
    match e {
        AdmitError::TenantRequired => Fail::new(
            bb_status::BB_ERR_TENANT_REQUIRED,
            format!(
                "dependency `{}` is tenant-scoped: a non-empty tenant is required",
                dep.name()
            ),
        ),
        AdmitError::InvalidTenant { .. } => Fail::new(
            bb_status::BB_ERR_INVALID_TENANT,
            format!("dependency `{}`: {e}", dep.name()),
        ),
        AdmitError::UnknownDependency => Fail::new(
            bb_status::BB_ERR_UNKNOWN_DEPENDENCY,
            format!(
                "dependency `{}` (id {}) was removed from the bank's profile by a reload, or started afresh by one (its isolation, trip policy kind, window or table size changed); look its id up again with bb_dependency_id",
                dep.name(),
                dep.id()
            ),
        ),
    }
}

/// `BB_ERR_CONFIG` with the profile's problems.
#[cold]
fn config_error(e: breakerbank::ConfigError) -> Fail {
    Fail::new(bb_status::BB_ERR_CONFIG, e.to_string())
}

/// The profile in the `len` bytes at `yaml`: `BB_ERR_INVALID_ARGUMENT` for
/// a bad pointer or UTF-8, `BB_ERR_CONFIG` for a bad profile.
///
/// # Safety
///
/// `yaml` points to `len` readable bytes (or is NULL, refused).
unsafe fn profile_arg(yaml: *const c_char, len: usize) -> Result<Profile, Fail> {
    // SAFETY: forwarded from this function's contract.
    let text = unsafe { str_arg(yaml, len, "yaml") }?;
    Profile::from_yaml(text).map_err(config_error)
}

fn manual_clock(bank: &bb_bank) -> Result<&ManualClock, Fail> {
    bank.bank.manual_clock().ok_or_else(|| {
        Fail::new(
            bb_status::BB_ERR_NOT_MANUAL_CLOCK,
            "the bank was built without manual_clock",
        )
    })
}

/// Builds a bank from a YAML profile (CONTRACT.md, "The profile").
///
/// `manual_clock`: true gives the bank a manual clock starting at 0 that
/// only `bb_clock_advance` moves (for tests); false uses the system's
/// monotonic clock. On success `*out` receives a new bank that the caller
/// owns and must free with `bb_bank_free`; on `BB_ERR_CONFIG` the message
/// (from `bb_last_error`) names the dependency and field. Building never
/// aborts the process (C9): a profile whose partition tables exceed its
/// `memory_limit` is refused at load, and a table the allocator refuses
/// is `BB_ERR_CONFIG` naming its dependency.
///
/// # Safety
///
/// `yaml` points to `len` readable bytes; `out` is a valid `bb_bank **`.
#[no_mangle]
pub extern "C" fn bb_bank_from_yaml(
    yaml: *const c_char,
    len: usize,
    manual_clock: bb_bool_raw,
    out: *mut *mut bb_bank,
) -> bb_status {
    ffi_boundary! {
        let out = try_out!(out, "out");
        // SAFETY: the caller's contract: `yaml` has `len` readable bytes.
        let profile = unsafe { profile_arg(yaml, len) }?;
        let bank = if manual_clock.get() {
            Bank::try_with_clock(profile, ManualClock::new())
        } else {
            Bank::try_new(profile)
        }
        .map_err(config_error)?;
        let serial = loop {
            // Relaxed: a unique tag only; skip 0 when the counter wraps.
            let s = SERIALS.fetch_add(1, Ordering::Relaxed);
            if s != 0 {
                break s;
            }
        };
        let b = Box::new(bb_bank {
            bank,
            listener: Arc::default(),
            serial,
        });
        out.write(Box::into_raw(b));
        Ok(())
    }
}

/// Frees a bank made by `bb_bank_from_yaml`. NULL is a no-op.
///
/// Waits for a running listener callback to return; after this returns the
/// callback is never called again. Call it once, after every other call on
/// the bank has returned, and not from inside its listener callback
/// (`BB_ERR_INVALID_ARGUMENT`, nothing freed). Permits of the bank become
/// meaningless.
///
/// # Safety
///
/// `bank` is NULL or a bank from `bb_bank_from_yaml` not yet freed.
#[no_mangle]
pub extern "C" fn bb_bank_free(bank: *mut bb_bank) -> bb_status {
    ffi_boundary! {
        if bank.is_null() {
            return Ok(());
        }
        {
            let b = try_ref!(bank.cast_const(), "bank");
            b.listener.clear()?;
        }
        // SAFETY: `bank` came from `Box::into_raw` in `bb_bank_from_yaml`
        // and, by the contract, is freed only here and once, with no other
        // call on it running.
        drop(unsafe { Box::from_raw(bank) });
        Ok(())
    }
}

/// Puts a new YAML profile in force on a running bank (C20), all or
/// nothing: on `BB_ERR_CONFIG` nothing changed and `bb_last_error` names
/// every problem (the profile's errors, or a new partition table the
/// allocator refused).
///
/// A dependency whose name and isolation are unchanged, and which fits
/// the partitions it has, keeps its id and every partition's state,
/// counters and permits; the next decision uses
/// the new values, and an open breaker keeps the open-until it has. A
/// removed dependency's id answers `BB_ERR_UNKNOWN_DEPENDENCY` from then
/// on (`bb_admit`, `bb_state`, operator actions), while its permits
/// already issued are still accepted by `bb_record` (each once, counted
/// nowhere that matters). An added dependency gets a new id, and so does
/// one the reload starts afresh, with fresh state, because it needs new
/// partitions (its `isolation`, trip policy kind or `window` changed, or
/// its `max_tenants` rose above its table's size): its old id answers as
/// a removed one's does; look the new one up with `bb_dependency_id`.
/// Emits a `BB_EVENT_RELOAD` per dependency kept, added or removed.
/// Thread-safe: reloads are applied one at a time, and admission goes on
/// meanwhile.
///
/// # Safety
///
/// `bank` is a live bank; `yaml` points to `len` readable bytes.
#[no_mangle]
pub extern "C" fn bb_bank_reload(
    bank: *const bb_bank,
    yaml: *const c_char,
    len: usize,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        // SAFETY: the caller's contract: `yaml` has `len` readable bytes.
        let profile = unsafe { profile_arg(yaml, len) }?;
        bank.bank.reload(profile).map_err(config_error)
    }
}

/// Looks up a dependency's id by name: resolve once, then admit by id with
/// no string hashing of the name on the hot path.
///
/// `BB_ERR_UNKNOWN_DEPENDENCY` when the profile in force has no such
/// dependency. Thread-safe.
///
/// # Safety
///
/// `bank` is a live bank; `name` points to `len` readable bytes; `out_id` is
/// a valid `uint32_t *`.
#[no_mangle]
pub extern "C" fn bb_dependency_id(
    bank: *const bb_bank,
    name: *const c_char,
    len: usize,
    out_id: *mut u32,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let out = try_out!(out_id, "out_id");
        // SAFETY: the caller's contract: `name` has `len` readable bytes.
        let name = unsafe { str_arg(name, len, "name") }?;
        match bank.bank.dependency_id(name) {
            Some(id) => {
                out.write(id);
                Ok(())
            }
            None => Err(Fail::new(
                bb_status::BB_ERR_UNKNOWN_DEPENDENCY,
                format!("no dependency named `{name}`"),
            )),
        }
    }
}

/// Writes an admitted call's decision to `out`: `admitted`, `probe`,
/// `BB_REASON_NONE`, `BB_FALLBACK_NONE`, no retry-after, and `permit`.
///
/// Written in the pieces a caller's reads of it take. A C caller reads
/// `admitted` and then hands `d.permit` to `bb_record` by value, loading
/// its two words (or one 16-byte load) right after this call. A load that
/// spans several narrower stores cannot take its data from the store
/// buffer and waits until they reach the cache (a store-forwarding stall,
/// tens of cycles, more than all the instructions of an admit + record).
/// So on x86-64 the decision is written as a 16-byte store of its head,
/// an 8-byte one of the retry-after and a 16-byte one of the permit, each
/// of which such a load finds whole.
#[inline(always)]
fn write_admitted(out: Out<bb_decision>, probe: bool, permit: [u64; 2]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_set_epi64x, _mm_storeu_si128};
        use std::mem::offset_of;
        // The layout these stores assume (little-endian, repr(C)); the
        // reason and fallback of an admitted call are both 0.
        const _: () = {
            assert!(std::mem::size_of::<bb_decision>() == 40);
            assert!(offset_of!(bb_decision, admitted) == 0);
            assert!(offset_of!(bb_decision, probe) == 1);
            assert!(offset_of!(bb_decision, reason) == 4);
            assert!(offset_of!(bb_decision, fallback) == 8);
            assert!(offset_of!(bb_decision, retry_after_ns) == 16);
            assert!(offset_of!(bb_decision, permit) == 24);
            assert!(std::mem::size_of::<bb_permit>() == 16);
            assert!(bb_reason::BB_REASON_NONE as u32 == 0);
            assert!(bb_fallback_kind::BB_FALLBACK_NONE as u32 == 0);
        };
        let pair = |lo: u64, hi: u64| {
            // SAFETY: `_mm_set_epi64x` needs SSE2 only, which every
            // x86-64 CPU has (the target's baseline); it touches no memory.
            unsafe { _mm_set_epi64x(hi as i64, lo as i64) }
        };
        let head = pair(1 | u64::from(probe) << 8, 0);
        let words = pair(permit[0], permit[1]);
        let d = out.0.cast::<u8>();
        // SAFETY: `try_out!` checked that `out.0` is non-null and aligned,
        // and the caller's contract makes it valid for writes of one
        // `bb_decision` (40 bytes, asserted above); every store below is
        // inside those bytes. Unaligned stores need no alignment; bytes
        // written into padding are allowed. The values written are those
        // of the `bb_decision` the doc comment describes (layout asserted
        // above; `true` is the byte 1).
        unsafe {
            _mm_storeu_si128(d.cast(), head);
            d.add(16).cast::<u64>().write_unaligned(0);
            _mm_storeu_si128(d.add(offset_of!(bb_decision, permit)).cast(), words);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    out.write(bb_decision {
        admitted: true,
        probe,
        reason: bb_reason::BB_REASON_NONE,
        fallback: bb_fallback_kind::BB_FALLBACK_NONE,
        retry_after_ns: 0,
        permit: bb_permit { opaque: permit },
    });
}

/// Writes a refusal's decision to `out`: the reason, the fallback to take
/// (none for an expired deadline), the retry-after, no permit.
#[inline(always)]
fn write_rejected(out: Out<bb_decision>, r: &Rejection<'_>) {
    // The retry-after first, while the core's nanoseconds are at hand:
    // after the branches on the reason, LLVM no longer folds the
    // `Duration` made of them back (see `nanos`).
    let retry_after_ns = r.retry_after.map_or(0, nanos);
    // The declared kind read whatever the reason, then kept or not
    // (`fallback_to_serve`'s rule) with a select rather than a branch per
    // reason.
    let declared = bb_fallback_kind::from(r.fallback.kind());
    let fallback = match r.fallback_to_serve() {
        Some(_) => declared,
        None => bb_fallback_kind::BB_FALLBACK_NONE,
    };
    out.write(bb_decision {
        admitted: false,
        probe: false,
        reason: r.reason.into(),
        fallback,
        retry_after_ns,
        permit: NO_PERMIT,
    });
}

const NO_PERMIT: bb_permit = bb_permit { opaque: [0; 2] };

/// `d` in whole nanoseconds, saturating at `u64::MAX`.
///
/// Spelled with the `u64` parts of `d` rather than `as_nanos`: for a
/// `Duration` the core made from a nanosecond count (a refusal's
/// retry-after), LLVM folds `secs * 10^9 + subsec` back into that count,
/// where the `u128` of `as_nanos` left a division and a multiplication
/// on the rejection's path.
#[inline(always)]
fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

/// The deadline argument: 0 is none.
#[inline(always)]
fn deadline_arg(deadline_ns: u64) -> Option<Instant> {
    (deadline_ns != 0).then(|| Instant::from_nanos(deadline_ns))
}

/// Asks to make a call to dependency `dep` for `tenant` (C1, C3, C7, C9, C10).
///
/// `tenant` is `(NULL, 0)` for none; a global dependency ignores it, a
/// tenant-scoped one requires a non-empty one (`BB_ERR_TENANT_REQUIRED`)
/// of at most 256 bytes (`BB_ERR_INVALID_TENANT`, C9).
/// `deadline_ns` is the call's deadline in ns on the bank's clock, 0 for
/// none; a deadline at or before now is `BB_REASON_DEADLINE_EXPIRED`.
///
/// On `BB_OK`, `*out` says whether the call is admitted. An admitted call's
/// `out->permit` must be given to `bb_record` exactly once, also when the
/// caller gives up (`BB_OUTCOME_CANCELLED`). A rejected one names the
/// fallback to take instead; nothing waits on the dependency, a lock or a
/// timer. Thread-safe; lock-free for a closed breaker. A caller that runs
/// the call on the admitting thread can use `bb_call` instead, which needs
/// no permit.
///
/// # Safety
///
/// `bank` is a live bank; `tenant` points to `tenant_len` readable bytes (or
/// is NULL with 0); `out` is a valid `bb_decision *`.
#[no_mangle]
pub extern "C" fn bb_admit(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    deadline_ns: u64,
    out: *mut bb_decision,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let out = try_out!(out, "out");
        let d = dependency(bank, dep)?;
        // SAFETY: the caller's contract: `tenant` has `tenant_len` bytes.
        let tenant = unsafe { opt_str_arg(tenant, tenant_len, "tenant") }?;
        match d.admit(tenant, deadline_arg(deadline_ns)) {
            Ok(Decision::Admitted(permit)) => {
                let raw = permit.into_raw();
                let probe = raw.is_probe();
                let words = ledger::issue(&Issued {
                    bank: bank.serial,
                    dependency: dep,
                    slot: raw.slot(),
                    probe,
                    generation: raw.generation(),
                    started_ns: raw.started_ns(),
                });
                write_admitted(out, probe, words);
            }
            Ok(Decision::Rejected(r)) => write_rejected(out, &r),
            Err(e) => return Err(tenant_refused(d, e)),
        }
        Ok(())
    }
}

/// Makes a call to dependency `dep` for `tenant` through its breaker: admits
/// it, and if admitted runs `fn(ctx, probe)` on the calling thread and
/// records the outcome `fn` returns (C5, C7, C10, C13). The call's
/// duration, from admission to `fn`'s return, is judged against the
/// dependency's `slow_call`: a success that took that long counts as a
/// failure.
///
/// Arguments and tenant rules as for `bb_admit`. On `BB_OK`, `*out` says
/// whether the call was admitted (and `fn` run, and whether as a probe); a
/// refused call's `*out` names the fallback to take, as `bb_admit`'s does,
/// and `fn` is not called. `out->permit` is all zero: no permit leaves the
/// library, so there is nothing to record, copy or lose. `fn` returning a
/// value outside `bb_outcome` records the call as cancelled and returns
/// `BB_ERR_INVALID_ARGUMENT` (`*out` unwritten). Thread-safe.
///
/// `fn` must return normally: no unwinding (C++ exceptions, Rust panics)
/// and no `longjmp` out of it (see `bb_call_fn`).
///
/// # Safety
///
/// As `bb_admit`; `fn` is a function that may be called once with `ctx`
/// on the calling thread.
#[no_mangle]
pub extern "C" fn bb_call(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    deadline_ns: u64,
    r#fn: bb_call_fn,
    ctx: *mut c_void,
    out: *mut bb_decision,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let out = try_out!(out, "out");
        let Some(f) = r#fn else {
            return Err(no_function());
        };
        let d = dependency(bank, dep)?;
        // SAFETY: the caller's contract: `tenant` has `tenant_len` bytes.
        let tenant = unsafe { opt_str_arg(tenant, tenant_len, "tenant") }?;
        let deadline = deadline_arg(deadline_ns);
        // SAFETY: the caller's contract: `f` may be called once with `ctx`
        // on this thread.
        let run = |probe| unsafe { f(ctx, probe) };
        match call_through(d, tenant, deadline, run) {
            Ok(Called::Ran { probe }) => write_admitted(out, probe, NO_PERMIT.opaque),
            Ok(Called::Refused(r)) => write_rejected(out, &r),
            Ok(Called::BadOutcome(o)) => return Err(bad_returned_outcome(o)),
            Err(e) => return Err(tenant_refused(d, e)),
        }
        Ok(())
    }
}

/// What [`call_through`] did.
enum Called<'a> {
    /// Admitted, ran and recorded.
    Ran { probe: bool },
    /// Not admitted; the function did not run.
    Refused(Rejection<'a>),
    /// Admitted and ran, but returned this, which is no `bb_outcome`:
    /// recorded as cancelled.
    BadOutcome(bb_outcome_raw),
}

/// `bb_call`'s call through the breaker, driving the core's call: admit,
/// run `run(probe)`, end the running call with the outcome it returned
/// (`Running::end`: `slow_call` judged from the admission to the end, so
/// a `BB_OUTCOME_CANCELLED` after `slow_call` is a slow failure, C10), or
/// give it up when what it returned is no outcome. The one place the C ABI
/// runs a call.
#[inline(always)]
fn call_through<'a>(
    d: &'a Dependency,
    tenant: Option<&'a str>,
    deadline: Option<Instant>,
    run: impl FnOnce(bool) -> bb_outcome_raw,
) -> Result<Called<'a>, AdmitError> {
    // `Dependency::begin` spelled out (as the core's own `call`): the
    // admission's answer is matched where it is made, so the permit stays
    // in registers.
    match d.admit(tenant, deadline)? {
        Decision::Admitted(permit) => {
            let call = Running::new(tenant, permit);
            let probe = call.is_probe();
            let returned = run(probe);
            match returned.decode() {
                Some(outcome) => {
                    call.end(outcome);
                    Ok(Called::Ran { probe })
                }
                None => {
                    call.given_up();
                    Ok(Called::BadOutcome(returned))
                }
            }
        }
        Decision::Rejected(r) => Ok(Called::Refused(r)),
    }
}

/// Records the outcome of an admitted call (C5, C7, C8, C10, C13).
///
/// Each permit is recorded once: recording it (or a copy) again, a permit
/// never issued by this bank, or one with any byte altered, is
/// `BB_ERR_INVALID_ARGUMENT` and changes nothing (the message cannot tell
/// the three apart). (Copies recorded at the same moment on the admitting
/// thread and on another may both return `BB_OK` when the admitting
/// thread's record is a success that changes nothing: the other one is
/// then the record that counts. A permit never counts twice.) A permit
/// from an earlier generation of its breaker (the breaker changed state
/// since) is counted as a late record only, and a probe's slot is
/// returned. `outcome` outside `bb_outcome` is `BB_ERR_INVALID_ARGUMENT`
/// (the permit stays outstanding). A permit of a dependency a reload has
/// removed since is taken as usual and changes nothing that is still in
/// force (C20). Thread-safe; any thread may record a permit admitted on
/// another.
///
/// # Safety
///
/// `bank` is a live bank.
#[no_mangle]
pub extern "C" fn bb_record(
    bank: *const bb_bank,
    permit: bb_permit,
    outcome: bb_outcome_raw,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let Some(outcome) = outcome.decode() else {
            return Err(bad_outcome(outcome));
        };
        let [ticket, place] = permit.opaque;
        // The common case first: recorded on the admitting thread.
        if let Some(mine) = ledger::mine(place as u32) {
            return record_entry(bank.serial, |id| dependency(bank, id), mine, (place >> 32) as u32, ticket, outcome, true);
        }
        match ledger::place(permit.opaque) {
            Some(Place::Entry(l, at)) => record_entry(bank.serial, |id| dependency(bank, id), l, at, ticket, outcome, false),
            Some(Place::Spill) => {
                let issued = ledger::take_spilled(ticket, bank.serial).ok_or_else(not_issued)?;
                let d = dependency(bank, issued.dependency)?;
                d.record_raw(raw_permit(&issued), outcome);
                Ok(())
            }
            None => Err(not_issued()),
        }
    }
}

/// `bb_record` of the permit `(at, ticket)` of ledger `l` for the bank
/// whose serial is `bank`, its dependency found by `dependency` (C13): the
/// entry must hold the ticket and the bank's permit; then it is taken and
/// its fields recorded. `owner` says whether the recording thread owns
/// `l`: then a record that changes nothing frees the entry with a plain
/// store ([`ledger::Ledger::redeem_quiet`]). The loom models call it too
/// (`crate::__loom`), on a ledger of their own.
#[inline(always)]
pub(crate) fn record_entry<'d>(
    bank: u32,
    dependency: impl FnOnce(u32) -> Result<&'d Dependency, Fail>,
    l: &Ledger,
    at: u32,
    ticket: u64,
    outcome: Outcome,
    owner: bool,
) -> Result<(), Fail> {
    let issued = match l.peek(at, ticket) {
        Some(i) if i.bank == bank => i,
        _ => return Err(not_issued()),
    };
    let d = dependency(issued.dependency)?;
    let raw = raw_permit(&issued);
    // The common case, admitted and recorded on one thread and changing
    // nothing: no read-modify-write, and nothing to record (see
    // `Ledger::redeem_quiet` for why it stays exactly-once).
    if owner && d.record_changes_nothing(&raw, outcome) {
        l.redeem_quiet(at);
        d.count_unrecorded_success();
        return Ok(());
    }
    take_and_record(d, l, at, ticket, raw, outcome)
}

/// The rest of `record_entry`: take the entry with the ledger's
/// compare-exchange, then record. Out of line, so that the quiet path
/// before it keeps few values live.
#[inline(never)]
fn take_and_record(
    d: &Dependency,
    l: &Ledger,
    at: u32,
    ticket: u64,
    raw: RawPermit,
    outcome: Outcome,
) -> Result<(), Fail> {
    if !l.take(at, ticket) {
        return Err(not_issued());
    }
    d.record_raw(raw, outcome);
    Ok(())
}

/// The core's permit a ledger entry holds: to ask whether recording it
/// changes nothing, and to record it once its entry is taken.
#[inline(always)]
fn raw_permit(i: &Issued) -> RawPermit {
    // SAFETY: not memory safety: `from_parts`' contract that these are
    // the fields of one permit this dependency issued, recorded once.
    // They are what `bb_admit` wrote into the ledger entry (or spill map)
    // for this bank's dependency `i.dependency`, read while the entry held
    // the permit's ticket; `bb_record` records them only after taking the
    // entry (or the spilled permit) says this is their one record.
    unsafe { RawPermit::from_parts(i.slot, i.generation, i.probe, i.started_ns) }
}

/// Reads a breaker's state into `*out` (`BB_STATE_*`).
///
/// A tenant never seen, or evicted, reads as a fresh (closed) partition and
/// asking never creates one. Tenant rules as for `bb_admit`. Thread-safe.
///
/// # Safety
///
/// As `bb_admit`, with `out` a valid `bb_breaker_state *`.
#[no_mangle]
pub extern "C" fn bb_state(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    out: *mut bb_breaker_state,
) -> bb_status {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        read(bank, dep, tenant, tenant_len, out, |d, t| {
            d.state(t).map(Into::into)
        })
    }
}

/// The body of `bb_state` and `bb_inspect`: one partition read by `read`
/// into `*out`, written only on success.
///
/// # Safety
///
/// As `bb_admit`, with `out` a valid `R *`.
unsafe fn read<R>(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    out: *mut R,
    read: impl Fn(&Dependency, Option<&str>) -> Result<R, AdmitError>,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let out = try_out!(out, "out");
        let d = dependency(bank, dep)?;
        // SAFETY: the caller's contract: `tenant` has `tenant_len` bytes.
        let tenant = unsafe { opt_str_arg(tenant, tenant_len, "tenant") }?;
        match read(d, tenant) {
            Ok(v) => {
                out.write(v);
                Ok(())
            }
            Err(e) => Err(tenant_refused(d, e)),
        }
    }
}

/// Reads one breaker's state, counters and episode into `*out` (C18); see
/// `bb_inspection`. Changes nothing: a tenant never seen, or evicted, reads
/// as a fresh partition (forced open after a dependency-wide force), and
/// asking never creates one. Tenant rules as for `bb_state`. Thread-safe.
///
/// # Safety
///
/// As `bb_admit`, with `out` a valid `bb_inspection *`.
#[no_mangle]
pub extern "C" fn bb_inspect(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    out: *mut bb_inspection,
) -> bb_status {
    let inspect = |d: &Dependency, t: Option<&str>| {
        d.inspect(t).map(|i| bb_inspection {
            state: i.state.into(),
            consecutive_failures: i.consecutive_failures,
            half_open_successes: i.half_open_successes,
            probes_in_flight: i.probes_in_flight,
            retrips: i.retrips,
            since_ns: i.since.as_nanos(),
            has_retry_after: i.retry_after.is_some(),
            retry_after_ns: i.retry_after.map_or(0, nanos),
            window_calls: i.window_calls,
            window_failures: i.window_failures,
        })
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { read(bank, dep, tenant, tenant_len, out, inspect) }
}

/// Operator reset (C11): forces the breaker closed with counters cleared.
///
/// On a tenant-scoped dependency a tenant of length 0 means every partition
/// (tenants first seen afterwards included); one longer than 256 bytes is
/// `BB_ERR_INVALID_TENANT` and changes nothing. Emits a reset event.
/// Thread-safe.
///
/// # Safety
///
/// `bank` is a live bank; `tenant` points to `tenant_len` readable bytes (or
/// is NULL with 0).
#[no_mangle]
pub extern "C" fn bb_reset(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
) -> bb_status {
    // SAFETY: forwarded from this function's contract.
    unsafe { operate(bank, dep, tenant, tenant_len, Dependency::try_reset) }
}

/// The body of `bb_reset`, `bb_force_open`, `bb_trip` and `bb_half_open`:
/// an operator action on one
/// partition, or on every partition for an empty tenant.
///
/// # Safety
///
/// As `bb_reset`.
unsafe fn operate(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
    action: fn(&Dependency, Option<&str>) -> Result<(), AdmitError>,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let d = dependency(bank, dep)?;
        // SAFETY: the caller's contract: `tenant` has `tenant_len` bytes.
        let tenant = unsafe { opt_str_arg(tenant, tenant_len, "tenant") }?;
        action(d, tenant).map_err(|e| tenant_refused(d, e))
    }
}

/// Operator trip (C19): opens the breaker as if its trip policy had fired
/// (new generation, the profile's open period and backoff, then the probe
/// cycle); unlike `bb_force_open` it ends by itself. From half-open it is a
/// re-trip (the backoff grows); on an open breaker the open period restarts
/// from now; a forced-open breaker stays forced until `bb_reset`.
///
/// A tenant of length 0 on a tenant-scoped dependency means every
/// partition there is (tenants first seen afterwards start closed); one
/// tenant's partition is made if it has none. A tenant longer than 256
/// bytes is `BB_ERR_INVALID_TENANT` and changes nothing. Counted in
/// `opened_total`; emits a `BB_EVENT_TRIP` event. Thread-safe.
///
/// # Safety
///
/// As `bb_reset`.
#[no_mangle]
pub extern "C" fn bb_trip(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
) -> bb_status {
    // SAFETY: forwarded from this function's contract.
    unsafe { operate(bank, dep, tenant, tenant_len, Dependency::try_trip) }
}

/// Operator half-open (C19): starts a probe cycle now (at most
/// `probe_budget` probes, `success_threshold` successes to close). On an
/// open breaker the open period ends early; on a closed one full traffic
/// waits for the probes; a half-open breaker keeps the cycle it is in; a
/// forced-open one stays forced until `bb_reset`.
///
/// Tenant rules as for `bb_trip`. Counted in `half_opened_total`; emits a
/// `BB_EVENT_HALF_OPEN` event. Thread-safe.
///
/// # Safety
///
/// As `bb_reset`.
#[no_mangle]
pub extern "C" fn bb_half_open(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
) -> bb_status {
    // SAFETY: forwarded from this function's contract.
    unsafe { operate(bank, dep, tenant, tenant_len, Dependency::try_half_open) }
}

/// Operator force-open (C11): isolates the breaker until `bb_reset`.
///
/// Tenant rules as for `bb_reset`. Emits a forced-open event.
/// Thread-safe.
///
/// # Safety
///
/// As `bb_reset`.
#[no_mangle]
pub extern "C" fn bb_force_open(
    bank: *const bb_bank,
    dep: u32,
    tenant: *const c_char,
    tenant_len: usize,
) -> bb_status {
    // SAFETY: forwarded from this function's contract.
    unsafe { operate(bank, dep, tenant, tenant_len, Dependency::try_force_open) }
}

/// Reads the bank's clock (ns; the time base of `deadline_ns`). Thread-safe.
///
/// # Safety
///
/// `bank` is a live bank; `out` is a valid `uint64_t *`.
#[no_mangle]
pub extern "C" fn bb_clock_now_ns(bank: *const bb_bank, out: *mut u64) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let out = try_out!(out, "out");
        out.write(bank.bank.now().as_nanos());
        Ok(())
    }
}

/// Moves a manual clock forward by `ns` (C12; for tests).
///
/// `BB_ERR_NOT_MANUAL_CLOCK` on a bank built with `manual_clock = false`.
/// Thread-safe.
///
/// # Safety
///
/// `bank` is a live bank.
#[no_mangle]
pub extern "C" fn bb_clock_advance(bank: *const bb_bank, ns: u64) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        manual_clock(bank)?.advance(Duration::from_nanos(ns));
        Ok(())
    }
}

/// Writes the bank's metrics as Prometheus text exposition (C14, C15) into
/// `buf`: `breakerbank_<name>{dependency="…",partition="…"}` per metric of
/// API.md, for every live partition.
///
/// `*written` receives the text's length; a NUL follows when `cap` is
/// larger. `BB_ERR_BUFFER_TOO_SMALL` sets `*written` to the size needed
/// (`(NULL, 0)` asks for it; the text may grow between two calls).
/// Thread-safe.
///
/// # Safety
///
/// `bank` is a live bank; `buf` is NULL with `cap == 0` or valid for writes
/// of `cap` bytes; `written` is a valid `size_t *`.
#[no_mangle]
pub extern "C" fn bb_metrics_prometheus(
    bank: *const bb_bank,
    buf: *mut c_char,
    cap: usize,
    written: *mut usize,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let written = try_out!(written, "written");
        let text = bank.bank.prometheus();
        // SAFETY: `buf`/`cap` as the caller's contract says; `written` was
        // checked by `try_out!`.
        unsafe { copy_out(&text, buf, cap, written) }
    }
}

/// Writes the error code of dependency `dep`'s `error` fallback (as in the
/// profile's `fallback.code`) into `buf`; 0 bytes for other fallback kinds.
/// Buffer rules as for `bb_metrics_prometheus`. Thread-safe.
///
/// # Safety
///
/// As `bb_metrics_prometheus`.
#[no_mangle]
pub extern "C" fn bb_fallback_code(
    bank: *const bb_bank,
    dep: u32,
    buf: *mut c_char,
    cap: usize,
    written: *mut usize,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank, "bank");
        let written = try_out!(written, "written");
        let d = dependency(bank, dep)?;
        let code = d.fallback().code().unwrap_or("");
        // SAFETY: `buf`/`cap` as the caller's contract says; `written` was
        // checked by `try_out!`.
        unsafe { copy_out(code, buf, cap, written) }
    }
}

/// Sets (or, with `f` NULL, clears) the bank's event callback, replacing any
/// previous one. Events: transitions, resets, forced opens, operator trips
/// and half-opens, and stuck alerts of every breaker of the bank (C16,
/// C19).
///
/// When this returns, the previous callback is not running and will not be
/// called again. The callback runs on a thread of breakerbank's, never from
/// inside `bb_admit`/`bb_record` and never with a lock held, so a slow
/// callback never slows admission.
///
/// Takes `bb_bank *` (not const): do not call it concurrently with
/// `bb_bank_free`. It may be called while other threads admit.
///
/// # Safety
///
/// `bank` is a live bank from `bb_bank_from_yaml`. `f`, when not NULL, must
/// be safe to call with `user_data` from any thread, one call at a time,
/// until it is replaced or the bank is freed.
#[no_mangle]
pub extern "C" fn bb_set_listener(
    bank: *mut bb_bank,
    f: bb_listener_fn,
    user_data: *mut c_void,
) -> bb_status {
    ffi_boundary! {
        let bank = try_ref!(bank.cast_const(), "bank");
        bank.listener.set(&bank.bank, f, user_data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::bb_outcome;

    const PROFILE: &str = include_str!("../benches/common/profile.yaml");

    /// `bb_admit`'s decision written over memory filled with 0xA5 bytes,
    /// so that a field it leaves unwritten shows.
    fn admit_over_garbage(
        bank: *mut bb_bank,
        dep: u32,
        tenant: &str,
        deadline_ns: u64,
    ) -> bb_decision {
        let mut d = std::mem::MaybeUninit::<bb_decision>::uninit();
        // SAFETY: any bytes may be written over; read back only after
        // bb_admit wrote the whole decision.
        unsafe { d.as_mut_ptr().write_bytes(0xA5, 1) };
        let s = bb_admit(
            bank,
            dep,
            tenant.as_ptr().cast(),
            tenant.len(),
            deadline_ns,
            d.as_mut_ptr(),
        );
        assert_eq!(s, bb_status::BB_OK);
        // SAFETY: bb_admit returned BB_OK: it wrote every field.
        unsafe { d.assume_init() }
    }

    /// An admitted decision is written whole over whatever the caller's
    /// memory held (the 16-byte stores of `write_admitted`), and its
    /// permit is the one `bb_record` takes, probes included.
    #[test]
    fn an_admitted_decision_overwrites_every_field() {
        let mut bank = std::ptr::null_mut();
        let s = bb_bank_from_yaml(
            PROFILE.as_ptr().cast(),
            PROFILE.len(),
            true.into(),
            &mut bank,
        );
        assert_eq!(s, bb_status::BB_OK);
        let fresh = |dep: u32, tenant: &str| admit_over_garbage(bank, dep, tenant, 0);
        for (dep, tenant) in [(0, ""), (1, "acme")] {
            let d = fresh(dep, tenant);
            assert!(d.admitted && !d.probe, "{d:?}");
            assert_eq!(d.reason, bb_reason::BB_REASON_NONE);
            assert_eq!(d.fallback, bb_fallback_kind::BB_FALLBACK_NONE);
            assert_eq!(d.retry_after_ns, 0);
            assert_ne!(d.permit, NO_PERMIT);
            let s = bb_record(bank, d.permit, bb_outcome::BB_OUTCOME_FAILURE.into());
            assert_eq!(s, bb_status::BB_OK);
        }
        // A probe: search_client trips on one failure and then, an hour
        // later, admits one.
        let p = fresh(2, "").permit;
        assert_eq!(
            bb_record(bank, p, bb_outcome::BB_OUTCOME_FAILURE.into()),
            bb_status::BB_OK
        );
        assert_eq!(bb_clock_advance(bank, 3_600_000_000_000), bb_status::BB_OK);
        let d = fresh(2, "");
        assert!(d.admitted && d.probe, "{d:?}");
        let s = bb_record(bank, d.permit, bb_outcome::BB_OUTCOME_SUCCESS.into());
        assert_eq!(s, bb_status::BB_OK);
        assert_eq!(bb_bank_free(bank), bb_status::BB_OK);
    }

    /// `nanos` is exact up to `u64::MAX` nanoseconds and saturates above.
    #[test]
    fn nanos_is_exact_then_saturates() {
        for n in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            3_600_000_000_123,
            u64::MAX,
        ] {
            assert_eq!(nanos(Duration::from_nanos(n)), n);
        }
        let max = Duration::from_nanos(u64::MAX);
        assert_eq!(nanos(max + Duration::from_nanos(1)), u64::MAX);
        assert_eq!(
            nanos(Duration::from_secs(u64::MAX / 1_000_000_000 + 1)),
            u64::MAX
        );
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }

    /// A rejected decision is written whole over whatever the caller's
    /// memory held: reason, fallback (none for an expired deadline),
    /// retry-after (an open breaker's only) and an all-zero permit.
    #[test]
    fn a_rejected_decision_overwrites_every_field() {
        let mut bank = std::ptr::null_mut();
        let s = bb_bank_from_yaml(
            PROFILE.as_ptr().cast(),
            PROFILE.len(),
            true.into(),
            &mut bank,
        );
        assert_eq!(s, bb_status::BB_OK);
        let fresh = |dep: u32, tenant: &str, deadline_ns: u64| {
            admit_over_garbage(bank, dep, tenant, deadline_ns)
        };
        let rejected = |d: &bb_decision| {
            assert!(!d.admitted && !d.probe, "{d:?}");
            assert_eq!(d.permit, NO_PERMIT, "{d:?}");
        };
        // search_client (stale fallback) trips on one failure, open an hour.
        let p = fresh(2, "", 0).permit;
        assert_eq!(
            bb_record(bank, p, bb_outcome::BB_OUTCOME_FAILURE.into()),
            bb_status::BB_OK
        );
        let d = fresh(2, "", 0);
        rejected(&d);
        assert_eq!(d.reason, bb_reason::BB_REASON_OPEN);
        assert_eq!(d.fallback, bb_fallback_kind::BB_FALLBACK_STALE);
        assert!(d.retry_after_ns > 0 && d.retry_after_ns <= 3_600_000_000_000);
        // Forced open, per tenant (error fallback) and global (degraded).
        let acme = "acme";
        let s = bb_force_open(bank, 1, acme.as_ptr().cast(), acme.len());
        assert_eq!(s, bb_status::BB_OK);
        let d = fresh(1, acme, 0);
        rejected(&d);
        assert_eq!(d.reason, bb_reason::BB_REASON_FORCED_OPEN);
        assert_eq!(d.fallback, bb_fallback_kind::BB_FALLBACK_ERROR);
        assert_eq!(d.retry_after_ns, 0);
        assert_eq!(
            bb_force_open(bank, 0, std::ptr::null(), 0),
            bb_status::BB_OK
        );
        let d = fresh(0, "", 0);
        rejected(&d);
        assert_eq!(d.reason, bb_reason::BB_REASON_FORCED_OPEN);
        assert_eq!(d.fallback, bb_fallback_kind::BB_FALLBACK_DEGRADED);
        assert_eq!(d.retry_after_ns, 0);
        // An expired deadline gets no fallback.
        assert_eq!(bb_clock_advance(bank, 10), bb_status::BB_OK);
        let d = fresh(1, "other", 5);
        rejected(&d);
        assert_eq!(d.reason, bb_reason::BB_REASON_DEADLINE_EXPIRED);
        assert_eq!(d.fallback, bb_fallback_kind::BB_FALLBACK_NONE);
        assert_eq!(d.retry_after_ns, 0);
        assert_eq!(bb_bank_free(bank), bb_status::BB_OK);
    }

    /// C13: a permit with any one bit altered is refused and takes
    /// nothing, on the admitting thread and on another; the genuine permit
    /// is then recorded once. A permit of another bank is refused by this
    /// one and still recorded by its own.
    #[test]
    fn c13_a_permit_with_any_bit_altered_is_refused() {
        let new_bank = || {
            let mut bank = std::ptr::null_mut();
            let s = bb_bank_from_yaml(
                PROFILE.as_ptr().cast(),
                PROFILE.len(),
                true.into(),
                &mut bank,
            );
            assert_eq!(s, bb_status::BB_OK);
            bank
        };
        let (bank, other) = (new_bank(), new_bank());
        let admit = |bank| {
            // SAFETY: bb_decision is repr(C) of integers, bools and
            // u32-repr enums whose 0 is a valid variant; all-zero is valid.
            let mut d: bb_decision = unsafe { std::mem::zeroed() };
            assert_eq!(
                bb_admit(bank, 0, std::ptr::null(), 0, 0, &mut d),
                bb_status::BB_OK
            );
            assert!(d.admitted);
            d.permit
        };
        let p = admit(bank);
        let success = bb_outcome::BB_OUTCOME_SUCCESS.into();
        let failure = bb_outcome::BB_OUTCOME_FAILURE.into();
        let mut altered = Vec::new();
        for word in 0..2 {
            for bit in 0..64 {
                let mut a = p;
                a.opaque[word] ^= 1 << bit;
                altered.push(a);
            }
        }
        let refused = |a: bb_permit, outcome| {
            assert_eq!(
                bb_record(bank, a, outcome),
                bb_status::BB_ERR_INVALID_ARGUMENT,
                "{a:?}"
            );
        };
        for &a in &altered {
            refused(a, success);
            refused(a, failure);
        }
        let bank_addr = bank as usize;
        std::thread::spawn(move || {
            for a in altered {
                let s = bb_record(bank_addr as *const bb_bank, a, failure);
                assert_eq!(s, bb_status::BB_ERR_INVALID_ARGUMENT, "{a:?}");
            }
        })
        .join()
        .unwrap();
        assert_eq!(
            bb_record(other, p, failure),
            bb_status::BB_ERR_INVALID_ARGUMENT
        );
        let theirs = admit(other);
        refused(theirs, failure);
        assert_eq!(bb_record(other, theirs, success), bb_status::BB_OK);
        assert_eq!(bb_record(bank, p, success), bb_status::BB_OK);
        refused(p, success);
        refused(p, failure);
        assert_eq!(bb_bank_free(bank), bb_status::BB_OK);
        assert_eq!(bb_bank_free(other), bb_status::BB_OK);
    }
}
