//! The C ABI called through its Rust `extern "C"` definitions with
//! arbitrary arguments.
//!
//! Arguments are arbitrary but the harness is a correct C caller: every
//! (pointer, length) string points at a readable buffer of that length
//! (arbitrary bytes, possibly invalid UTF-8, or up to 64 KiB of zeros, or
//! 1 MiB of them), every
//! non-null out-pointer at writable memory, every buffer's `cap` at most
//! its real size. Pointers may be null or misaligned, ids unknown, outcome
//! numbers outside `bb_outcome`, permits copied, altered or made up.
//!
//! Checked on every call:
//! - nothing panics or aborts, and `BB_ERR_PANIC` is never returned;
//! - the status is the one the documentation gives for the arguments (when
//!   several arguments are wrong, any of their statuses);
//! - C7: a probe is admitted only while fewer than `probe_budget` probe
//!   permits of that partition are out with the harness, whatever permits
//!   were forged or altered before;
//! - C13: a permit that was altered, made up or issued by another bank is
//!   refused and changes no metric; a second record of a copy changes no
//!   metric either. (Reported at the end of an input, so that an input
//!   that also breaks C7 is reported as C7.)
//!
//! Partitions are named with the Rust API behind the bank
//! (`__bench_bank`): the C ABI has no way to ask which partition served a
//! tenant, and the probe budget is per partition.
#![no_main]

use arbitrary::Arbitrary;
use breakerbank::Isolation;
use breakerbank_ffi::{
    __bench_bank, bb_admit, bb_bank, bb_bank_free, bb_bank_from_yaml, bb_bool_raw,
    bb_breaker_state, bb_clock_advance, bb_clock_now_ns, bb_decision, bb_dependency_id,
    bb_fallback_code, bb_force_open, bb_last_error, bb_metrics_prometheus, bb_outcome_raw,
    bb_permit, bb_reason, bb_record, bb_reset, bb_state, bb_status,
};
use breakerbank_fuzz::{PROFILE, TENANTS};
use libfuzzer_sys::fuzz_target;
use std::ffi::c_char;
use std::mem::MaybeUninit;

use bb_status::*;

const MAX_OPS: usize = 300;
/// Longest run of zeros a string argument gets.
const ZEROS_MAX: usize = 1 << 20;
static ZEROS: [u8; ZEROS_MAX] = [0; ZEROS_MAX];
const NAMES: [&str; 5] = [
    "payments_client",
    "email_client",
    "catalog_client",
    "ledger_client",
    "search_client",
];

#[derive(Arbitrary, Debug, Clone)]
enum StrArg {
    /// A dependency name or tenant id the profile knows.
    Known(u8),
    /// Arbitrary bytes (often invalid UTF-8).
    Bytes(Vec<u8>),
    /// `n` zero bytes (valid UTF-8).
    Zeros(u16),
    /// 1 MiB of zero bytes.
    ZerosHuge,
    /// NULL with a non-zero length: invalid.
    NullLen(u32),
    /// NULL with length 0: none.
    Null,
    /// A non-null pointer with length 0: the empty string.
    Empty,
}

/// How an out-pointer is passed.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum OutPtr {
    Valid,
    Null,
    /// One byte past a valid, aligned place: misaligned for any type
    /// wider than a byte.
    Misaligned,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BankSel {
    Main,
    /// A second bank from the same profile: its permits are not Main's.
    Other,
    Null,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum DepSel {
    Known(u8),
    Any(u32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum DeadlineSel {
    None,
    Past(u32),
    Now,
    Future(u32),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum OutcomeSel {
    Success,
    Failure,
    Cancelled,
    Raw(u32),
}

/// A change to one of a permit's two opaque words (`[ticket, place]`).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Change {
    Ticket(u64),
    TicketDelta(i8),
    Place(u64),
    /// The next or previous entries of the same ledger.
    EntryDelta(i8),
    /// Another ledger, the same entry.
    Ledger(u32),
    /// One bit of either word.
    FlipBit(u8),
}

#[derive(Arbitrary, Debug, Clone)]
enum PermitSel {
    /// A held permit exactly as issued: its genuine record.
    Genuine(u8),
    /// A copy of a permit already recorded.
    Again(u8),
    /// A held or recorded permit with its words changed.
    Altered(u8, Vec<Change>),
    /// Words made up: a ticket, and the place of a held or recorded
    /// permit (a live ledger) or any.
    MadeUp {
        ticket: u64,
        place_of_pool: Option<u8>,
        place: u64,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BufSel {
    /// `(NULL, 0)`: asks the size.
    NullZero,
    /// NULL with a non-zero cap: invalid.
    NullCap(u16),
    /// A real buffer of this many bytes.
    Cap(u16),
    /// A real buffer of the size the text needs, asked first.
    Exact,
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    FromYaml {
        yaml: StrArg,
        /// Any byte, as `bool` may arrive from another language.
        manual: u8,
        out: OutPtr,
    },
    DependencyId {
        bank: BankSel,
        name: StrArg,
        out: OutPtr,
    },
    Admit {
        bank: BankSel,
        dep: DepSel,
        tenant: StrArg,
        deadline: DeadlineSel,
        out: OutPtr,
    },
    Record {
        bank: BankSel,
        permit: PermitSel,
        outcome: OutcomeSel,
    },
    State {
        bank: BankSel,
        dep: DepSel,
        tenant: StrArg,
        out: OutPtr,
    },
    Reset {
        bank: BankSel,
        dep: DepSel,
        tenant: StrArg,
    },
    ForceOpen {
        bank: BankSel,
        dep: DepSel,
        tenant: StrArg,
    },
    ClockNow {
        bank: BankSel,
        out: OutPtr,
    },
    ClockAdvance {
        bank: BankSel,
        ns: u64,
    },
    Prometheus {
        bank: BankSel,
        buf: BufSel,
        written: OutPtr,
    },
    FallbackCode {
        bank: BankSel,
        dep: DepSel,
        buf: BufSel,
        written: OutPtr,
    },
    LastError {
        buf: BufSel,
        written: OutPtr,
    },
}

/// A string argument as the call sees it, and what it decodes to.
struct Str {
    /// Keeps `Bytes` alive.
    _owned: Vec<u8>,
    ptr: *const c_char,
    len: usize,
    /// `Err(())`: the ABI must call it invalid. `Ok(None)`: no string.
    decoded: Result<Option<String>, ()>,
}

fn string(arg: &StrArg, known: &[&str]) -> Str {
    match arg {
        StrArg::Known(i) => {
            let s = known[*i as usize % known.len()];
            Str {
                _owned: Vec::new(),
                ptr: s.as_ptr().cast(),
                len: s.len(),
                decoded: Ok(Some(s.to_string())),
            }
        }
        StrArg::Bytes(b) => {
            let owned = b.clone();
            let decoded = match std::str::from_utf8(&owned) {
                Ok(s) => Ok(Some(s.to_string())),
                Err(_) => Err(()),
            };
            // An empty Vec's pointer is dangling but non-null: `(p, 0)` is "".
            Str {
                ptr: owned.as_ptr().cast(),
                len: owned.len(),
                _owned: owned,
                decoded,
            }
        }
        StrArg::Zeros(_) | StrArg::ZerosHuge => {
            let n = match arg {
                StrArg::Zeros(n) => usize::from(*n),
                _ => ZEROS_MAX,
            };
            Str {
                _owned: Vec::new(),
                ptr: ZEROS.as_ptr().cast(),
                len: n,
                decoded: Ok(Some("\0".repeat(n))),
            }
        }
        StrArg::NullLen(n) => {
            let n = (*n as usize).max(1);
            Str {
                _owned: Vec::new(),
                ptr: std::ptr::null(),
                len: n,
                decoded: Err(()),
            }
        }
        StrArg::Null => Str {
            _owned: Vec::new(),
            ptr: std::ptr::null(),
            len: 0,
            decoded: Ok(None),
        },
        StrArg::Empty => Str {
            _owned: Vec::new(),
            ptr: "".as_ptr().cast(),
            len: 0,
            decoded: Ok(Some(String::new())),
        },
    }
}

/// Storage for one out-value, passed as `out` says.
struct OutSlot<T> {
    /// Two values' worth, so that a misaligned pointer still has room.
    buf: [MaybeUninit<T>; 2],
    sel: OutPtr,
}

impl<T> OutSlot<T> {
    fn new(sel: OutPtr) -> Self {
        OutSlot {
            buf: [const { MaybeUninit::uninit() }; 2],
            sel,
        }
    }

    fn ptr(&mut self) -> *mut T {
        match self.sel {
            OutPtr::Valid => self.buf[0].as_mut_ptr(),
            OutPtr::Null => std::ptr::null_mut(),
            // In bounds: one byte into a two-value buffer.
            OutPtr::Misaligned => self.buf.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
        }
    }

    fn ok(&self) -> bool {
        matches!(self.sel, OutPtr::Valid) || std::mem::align_of::<T>() == 1
    }

    /// The value written by a successful call.
    ///
    /// # Safety
    ///
    /// The call returned `BB_OK` with this slot's valid pointer, so it
    /// wrote a `T` there.
    unsafe fn get(&self) -> T
    where
        T: Copy,
    {
        // SAFETY: by this function's contract buf[0] was initialised.
        unsafe { self.buf[0].assume_init() }
    }
}

/// A permit the harness got from `bb_admit`, with where it was admitted.
#[derive(Clone, Debug)]
struct Issued {
    permit: bb_permit,
    bank: usize,
    /// The dependency id and probe flag of the decision.
    dep: u32,
    probe: bool,
    part: String,
    /// Another form of this permit was accepted (a C13 breach): its
    /// ticket is spent, though the call it stands for is still in flight.
    spent: bool,
}

/// Main, and Other once an operation names it (each bank costs a parse).
struct Banks {
    ptrs: [*mut bb_bank; 2],
}

impl Banks {
    fn get(&mut self, i: usize) -> *mut bb_bank {
        if self.ptrs[i].is_null() {
            let got = bb_bank_from_yaml(
                PROFILE.as_ptr().cast(),
                PROFILE.len(),
                true.into(),
                &mut self.ptrs[i],
            );
            assert_eq!(got, BB_OK);
        }
        self.ptrs[i]
    }
}

impl Drop for Banks {
    fn drop(&mut self) {
        for b in self.ptrs {
            // NULL (a bank never made) is a no-op.
            assert_eq!(bb_bank_free(b), BB_OK);
        }
    }
}

struct Harness {
    banks: Banks,
    ndeps: u32,
    /// Genuine permits out with the harness (a call in flight).
    held: Vec<Issued>,
    /// Permits already given to `bb_record` in their genuine form.
    done: Vec<Issued>,
    /// The first C13 breach of this input, reported at its end.
    c13: Option<String>,
}

/// Asserts that `got` is allowed: `errors` are the statuses the arguments
/// call for (any of them when several apply), `ok` the status otherwise.
#[track_caller]
fn expect(what: &str, got: bb_status, errors: &[bb_status], ok: bb_status) {
    assert_ne!(got, BB_ERR_PANIC, "{what}: BB_ERR_PANIC");
    if errors.is_empty() {
        assert_eq!(got, ok, "{what}: expected {ok:?}, got {got:?}");
    } else {
        assert!(
            errors.contains(&got),
            "{what}: expected one of {errors:?}, got {got:?}"
        );
    }
}

impl Harness {
    fn bank(&mut self, sel: BankSel) -> (*const bb_bank, Option<usize>) {
        match sel {
            BankSel::Main => (self.banks.get(0), Some(0)),
            BankSel::Other => (self.banks.get(1), Some(1)),
            BankSel::Null => (std::ptr::null(), None),
        }
    }

    fn rust(&self, i: usize) -> &breakerbank::Bank {
        // SAFETY: both banks are live until `Banks` drops, after the
        // harness's last use of them.
        unsafe { __bench_bank(self.banks.ptrs[i]) }
    }

    fn dep(sel: DepSel) -> u32 {
        match sel {
            DepSel::Known(i) => u32::from(i) % NAMES.len() as u32,
            DepSel::Any(id) => id,
        }
    }

    fn prometheus(&self, i: usize) -> String {
        self.rust(i).prometheus()
    }

    /// Every partition's metrics, in a fixed order (the snapshot's order
    /// of tenants is the table's).
    fn metrics(&self, i: usize) -> Vec<breakerbank::PartitionMetrics> {
        let mut all: Vec<_> = self
            .rust(i)
            .metrics()
            .dependencies
            .into_iter()
            .flat_map(|d| {
                d.partitions.into_iter().map(move |mut p| {
                    p.partition = format!("{}/{}", d.name, p.partition);
                    p
                })
            })
            .collect();
        all.sort_by(|a, b| a.partition.cmp(&b.partition));
        all
    }

    /// The permit a selection stands for, and whether it is a held one
    /// exactly as issued (its index) or recorded before.
    fn permit(&self, sel: &PermitSel) -> (bb_permit, Option<usize>, bool) {
        let pool = |i: u8| -> Option<&Issued> {
            let n = self.held.len() + self.done.len();
            if n == 0 {
                return None;
            }
            let i = i as usize % n;
            Some(if i < self.held.len() {
                &self.held[i]
            } else {
                &self.done[i - self.held.len()]
            })
        };
        let p = match sel {
            PermitSel::Genuine(i) if !self.held.is_empty() => {
                self.held[*i as usize % self.held.len()].permit
            }
            PermitSel::Again(i) if !self.done.is_empty() => {
                self.done[*i as usize % self.done.len()].permit
            }
            PermitSel::Altered(i, changes) => {
                let mut p = pool(*i).map_or(bb_permit::default(), |x| x.permit);
                let [ticket, place] = &mut p.opaque;
                for c in changes.iter().take(8) {
                    match *c {
                        Change::Ticket(t) => *ticket = t,
                        Change::TicketDelta(d) => *ticket = ticket.wrapping_add_signed(d.into()),
                        Change::Place(w) => *place = w,
                        Change::EntryDelta(d) => {
                            *place = place.wrapping_add_signed(i64::from(d) << 32)
                        }
                        Change::Ledger(l) => *place = (*place & !0xFFFF_FFFF) | u64::from(l),
                        Change::FlipBit(b) => {
                            let w = if b & 64 == 0 {
                                &mut *ticket
                            } else {
                                &mut *place
                            };
                            *w ^= 1 << (b % 64);
                        }
                    }
                }
                p
            }
            PermitSel::MadeUp {
                ticket,
                place_of_pool,
                place,
            } => bb_permit {
                opaque: [
                    *ticket,
                    place_of_pool
                        .and_then(pool)
                        .map_or(*place, |x| x.permit.opaque[1]),
                ],
            },
            _ => bb_permit::default(),
        };
        // Whatever the selection, a value equal to a held permit is that
        // permit's genuine record, and one equal to a recorded permit is a
        // second record.
        let held = self.held.iter().position(|x| x.permit == p);
        let again = self.done.iter().any(|x| x.permit == p);
        (p, held, again)
    }

    fn c13(&mut self, msg: String) {
        self.c13.get_or_insert(msg);
    }

    fn step(&mut self, op: &Op) {
        match op {
            Op::FromYaml { yaml, manual, out } => {
                let s = string(yaml, &[PROFILE]);
                let mut slot = OutSlot::<*mut bb_bank>::new(*out);
                // Only profiles whose tables are small get built: the
                // profile target checks the loader, and a bank of a
                // million-tenant table would only measure memory.
                let text_ok = s.decoded.as_ref().ok().and_then(|o| o.as_deref());
                if let Some(text) = text_ok {
                    if let Ok(p) = breakerbank::Profile::from_yaml(text) {
                        let big = p
                            .dependencies()
                            .iter()
                            .any(|d| d.isolation == Isolation::Tenant && d.max_tenants > 4096);
                        if big {
                            return;
                        }
                    }
                }
                let got = bb_bank_from_yaml(s.ptr, s.len, bb_bool_raw(*manual), slot.ptr());
                let mut errors = Vec::new();
                if !slot.ok() || s.decoded.is_err() || matches!(s.decoded, Ok(None)) {
                    errors.push(BB_ERR_INVALID_ARGUMENT);
                }
                let ok = match text_ok.map(breakerbank::Profile::from_yaml) {
                    Some(Ok(_)) => BB_OK,
                    _ => BB_ERR_CONFIG,
                };
                if !errors.is_empty() && ok != BB_OK {
                    errors.push(ok);
                }
                expect("bb_bank_from_yaml", got, &errors, ok);
                if got == BB_OK {
                    // SAFETY: BB_OK with a valid out-pointer wrote the bank.
                    let b = unsafe { slot.get() };
                    assert_eq!(bb_bank_free(b), BB_OK);
                }
            }
            Op::DependencyId { bank, name, out } => {
                let (b, _) = self.bank(*bank);
                let s = string(name, &NAMES);
                let mut slot = OutSlot::<u32>::new(*out);
                let got = bb_dependency_id(b, s.ptr, s.len, slot.ptr());
                let mut errors = Vec::new();
                if b.is_null() || !slot.ok() || !matches!(s.decoded, Ok(Some(_))) {
                    errors.push(BB_ERR_INVALID_ARGUMENT);
                }
                let known = match &s.decoded {
                    Ok(Some(n)) => NAMES.iter().position(|k| k == n),
                    _ => None,
                };
                let ok = if known.is_some() {
                    BB_OK
                } else {
                    BB_ERR_UNKNOWN_DEPENDENCY
                };
                if !errors.is_empty() && ok != BB_OK {
                    errors.push(ok);
                }
                expect("bb_dependency_id", got, &errors, ok);
                if got == BB_OK {
                    // SAFETY: BB_OK with a valid out-pointer wrote the id.
                    let id = unsafe { slot.get() };
                    assert_eq!(Some(id as usize), known);
                }
            }
            Op::Admit {
                bank,
                dep,
                tenant,
                deadline,
                out,
            } => self.admit(*bank, Self::dep(*dep), tenant, *deadline, *out),
            Op::Record {
                bank,
                permit,
                outcome,
            } => self.record(*bank, permit, *outcome),
            Op::State {
                bank,
                dep,
                tenant,
                out,
            } => {
                let (b, _) = self.bank(*bank);
                let dep = Self::dep(*dep);
                let s = string(tenant, &TENANTS);
                let mut slot = OutSlot::<bb_breaker_state>::new(*out);
                let got = bb_state(b, dep, s.ptr, s.len, slot.ptr());
                let errors = self.errors(b, dep, &s, slot.ok(), true);
                let ok = self.tenant_status(dep, &s);
                expect("bb_state", got, &errors, ok);
            }
            Op::Reset { bank, dep, tenant } | Op::ForceOpen { bank, dep, tenant } => {
                let (b, _) = self.bank(*bank);
                let dep = Self::dep(*dep);
                let s = string(tenant, &TENANTS);
                let got = if matches!(op, Op::Reset { .. }) {
                    bb_reset(b, dep, s.ptr, s.len)
                } else {
                    bb_force_open(b, dep, s.ptr, s.len)
                };
                let errors = self.errors(b, dep, &s, true, false);
                // An empty tenant means every partition; a too long one is
                // refused (C9).
                let ok = match self.tenant_status(dep, &s) {
                    BB_ERR_INVALID_TENANT => BB_ERR_INVALID_TENANT,
                    _ => BB_OK,
                };
                expect("bb_reset/bb_force_open", got, &errors, ok);
            }
            Op::ClockNow { bank, out } => {
                let (b, _) = self.bank(*bank);
                let mut slot = OutSlot::<u64>::new(*out);
                let got = bb_clock_now_ns(b, slot.ptr());
                let errors = if b.is_null() || !slot.ok() {
                    vec![BB_ERR_INVALID_ARGUMENT]
                } else {
                    vec![]
                };
                expect("bb_clock_now_ns", got, &errors, BB_OK);
            }
            Op::ClockAdvance { bank, ns } => {
                let (b, _) = self.bank(*bank);
                let got = bb_clock_advance(b, *ns);
                let errors = if b.is_null() {
                    vec![BB_ERR_INVALID_ARGUMENT]
                } else {
                    vec![]
                };
                expect("bb_clock_advance", got, &errors, BB_OK);
            }
            Op::Prometheus { bank, buf, written } => {
                let (b, i) = self.bank(*bank);
                let need = i.map(|i| self.prometheus(i).len());
                self.text_call(
                    "bb_metrics_prometheus",
                    b.is_null(),
                    *buf,
                    *written,
                    need,
                    |p, c, w| bb_metrics_prometheus(b, p, c, w),
                );
            }
            Op::FallbackCode {
                bank,
                dep,
                buf,
                written,
            } => {
                let (b, i) = self.bank(*bank);
                let dep = Self::dep(*dep);
                if !b.is_null() && dep >= self.ndeps {
                    let mut w = 0usize;
                    let got = bb_fallback_code(b, dep, std::ptr::null_mut(), 0, &mut w);
                    expect("bb_fallback_code", got, &[], BB_ERR_UNKNOWN_DEPENDENCY);
                    return;
                }
                let need = i.map(|i| {
                    let bank = self.rust(i);
                    let d = bank.dependency_by_id(dep).expect("known id");
                    d.fallback().code().unwrap_or("").len()
                });
                self.text_call(
                    "bb_fallback_code",
                    b.is_null(),
                    *buf,
                    *written,
                    need,
                    |p, c, w| bb_fallback_code(b, dep, p, c, w),
                );
            }
            Op::LastError { buf, written } => {
                let mut probe_len = 0usize;
                let got = bb_last_error(std::ptr::null_mut(), 0, &mut probe_len);
                assert!(got == BB_OK || got == BB_ERR_BUFFER_TOO_SMALL, "{got:?}");
                let need = Some(probe_len);
                self.text_call("bb_last_error", false, *buf, *written, need, |p, c, w| {
                    bb_last_error(p, c, w)
                });
            }
        }
    }

    /// A text-returning call with the buffer rules of `copy_out`.
    fn text_call(
        &self,
        what: &str,
        null_bank: bool,
        buf: BufSel,
        written: OutPtr,
        need: Option<usize>,
        call: impl Fn(*mut c_char, usize, *mut usize) -> bb_status,
    ) {
        let mut store = Vec::<u8>::new();
        let (ptr, cap): (*mut c_char, usize) = match buf {
            BufSel::NullZero => (std::ptr::null_mut(), 0),
            BufSel::NullCap(c) => (std::ptr::null_mut(), usize::from(c).max(1)),
            BufSel::Cap(c) => {
                store.resize(usize::from(c), 0xAA);
                (store.as_mut_ptr().cast(), store.len())
            }
            BufSel::Exact => {
                store.resize(need.unwrap_or(0), 0xAA);
                (store.as_mut_ptr().cast(), store.len())
            }
        };
        let mut slot = OutSlot::<usize>::new(written);
        let got = call(ptr, cap, slot.ptr());
        let mut errors = Vec::new();
        if null_bank || !slot.ok() || (ptr.is_null() && cap != 0) {
            errors.push(BB_ERR_INVALID_ARGUMENT);
        }
        let Some(need) = need else {
            expect(what, got, &errors, BB_OK);
            return;
        };
        let ok = if cap < need {
            BB_ERR_BUFFER_TOO_SMALL
        } else {
            BB_OK
        };
        if !errors.is_empty() && ok != BB_OK {
            errors.push(ok);
        }
        expect(what, got, &errors, ok);
        if got == BB_OK || got == BB_ERR_BUFFER_TOO_SMALL {
            // SAFETY: both statuses write `*written` through a valid pointer
            // (an invalid one would have been refused first).
            let w = unsafe { slot.get() };
            assert_eq!(w, need, "{what}: *written {w}, text is {need} bytes");
        }
        if got == BB_OK && cap > need {
            assert_eq!(store[need], 0, "{what}: no NUL after the text");
        }
    }

    /// The argument errors of a (bank, dep, tenant) call.
    fn errors(
        &self,
        b: *const bb_bank,
        dep: u32,
        s: &Str,
        out_ok: bool,
        tenant_matters: bool,
    ) -> Vec<bb_status> {
        let mut errors = Vec::new();
        if b.is_null() || !out_ok || s.decoded.is_err() {
            errors.push(BB_ERR_INVALID_ARGUMENT);
        }
        // Bytes that are not UTF-8 are a tenant id that is not one (C9).
        if !s.ptr.is_null() && s.decoded.is_err() {
            errors.push(BB_ERR_INVALID_TENANT);
        }
        if dep >= self.ndeps {
            errors.push(BB_ERR_UNKNOWN_DEPENDENCY);
        } else if !errors.is_empty() && tenant_matters {
            let t = self.tenant_status(dep, s);
            if t != BB_OK {
                errors.push(t);
            }
        }
        errors
    }

    /// `BB_ERR_TENANT_REQUIRED` for a missing or empty tenant on a
    /// tenant-scoped dependency, `BB_ERR_INVALID_TENANT` for one that is
    /// not a tenant id (C9), else `BB_OK`.
    fn tenant_status(&self, dep: u32, s: &Str) -> bb_status {
        let Some(d) = self.rust(0).dependency_by_id(dep) else {
            return BB_ERR_UNKNOWN_DEPENDENCY;
        };
        let empty =
            matches!(&s.decoded, Ok(None)) || matches!(&s.decoded, Ok(Some(t)) if t.is_empty());
        // C9: 1 to MAX_TENANT_LEN bytes, no control character, not a
        // reserved name.
        let invalid = matches!(&s.decoded, Ok(Some(t)) if t.len() > breakerbank::MAX_TENANT_LEN
            || breakerbank::RESERVED_TENANT_IDS.contains(&t.as_str())
            || t.chars().any(char::is_control));
        if d.is_tenant_scoped() && empty {
            BB_ERR_TENANT_REQUIRED
        } else if d.is_tenant_scoped() && invalid {
            BB_ERR_INVALID_TENANT
        } else {
            BB_OK
        }
    }

    fn admit(
        &mut self,
        bank: BankSel,
        dep: u32,
        tenant: &StrArg,
        deadline: DeadlineSel,
        out: OutPtr,
    ) {
        let (b, bi) = self.bank(bank);
        let s = string(tenant, &TENANTS);
        let now = bi.map_or(0, |i| self.rust(i).now().as_nanos());
        let deadline_ns = match deadline {
            DeadlineSel::None => 0,
            DeadlineSel::Past(d) => now.saturating_sub(u64::from(d)).max(1),
            DeadlineSel::Now => now.max(1),
            DeadlineSel::Future(d) => now.saturating_add(1 + u64::from(d)),
            DeadlineSel::Raw(r) => r,
        };
        let mut slot = OutSlot::<bb_decision>::new(out);
        let got = bb_admit(b, dep, s.ptr, s.len, deadline_ns, slot.ptr());
        let errors = self.errors(b, dep, &s, slot.ok(), true);
        let ok = self.tenant_status(dep, &s);
        expect("bb_admit", got, &errors, ok);
        if got != BB_OK {
            return;
        }
        let bi = bi.expect("BB_OK needs a bank");
        // SAFETY: BB_OK with a valid out-pointer wrote the decision.
        let d = unsafe { slot.get() };
        let expired = deadline_ns != 0 && deadline_ns <= now;
        if expired {
            assert!(
                !d.admitted && d.reason == bb_reason::BB_REASON_DEADLINE_EXPIRED,
                "C10: an expired deadline gave {d:?}"
            );
            return;
        }
        if !d.admitted {
            return;
        }
        let rust = self.rust(bi);
        let dep_ref = rust.dependency_by_id(dep).expect("admitted on a known id");
        let t = s.decoded.as_ref().ok().and_then(|o| o.as_deref());
        let part = dep_ref.partition_of(t);
        // Once an altered permit was accepted, the probe count it corrupted
        // is not checked: the C13 breach is what the input reports.
        if d.probe && self.c13.is_none() {
            let budget = dep_ref.config().probe_budget as usize;
            let held = self
                .held
                .iter()
                .filter(|x| x.bank == bi && x.dep == dep && x.part == part && x.probe)
                .count();
            assert!(
                held < budget,
                "C7: a probe of bank {bi} dependency {dep} partition `{part}` admitted with \
                 {held} of {budget} probe permits already out"
            );
        }
        self.held.push(Issued {
            permit: d.permit,
            bank: bi,
            dep,
            probe: d.probe,
            part,
            spent: false,
        });
    }

    fn record(&mut self, bank: BankSel, sel: &PermitSel, outcome: OutcomeSel) {
        let (b, bi) = self.bank(bank);
        let (p, held, again) = self.permit(sel);
        let raw = match outcome {
            OutcomeSel::Success => 0,
            OutcomeSel::Failure => 1,
            OutcomeSel::Cancelled => 2,
            OutcomeSel::Raw(r) => r,
        };
        let before = bi.map(|i| self.metrics(i));
        let got = bb_record(b, p, bb_outcome_raw(raw));
        assert_ne!(got, BB_ERR_PANIC, "bb_record: BB_ERR_PANIC");
        let mut errors = Vec::new();
        if b.is_null() || raw > 2 {
            errors.push(BB_ERR_INVALID_ARGUMENT);
        }
        let genuine = held.filter(|&i| Some(self.held[i].bank) == bi);
        match genuine {
            Some(i) if errors.is_empty() => {
                let x = self.held.swap_remove(i);
                if x.spent {
                    // Its ticket went to an altered copy (already reported).
                    assert!(got == BB_OK || got == BB_ERR_INVALID_ARGUMENT, "{got:?}");
                } else {
                    expect("bb_record (a held permit, as issued)", got, &[], BB_OK);
                }
                self.done.push(x);
            }
            _ => {
                // Refused (or, for a second copy, a no-op): nothing changes.
                let allowed_ok = again && errors.is_empty();
                if !allowed_ok && got == BB_OK {
                    self.c13(format!(
                        "C13: bb_record accepted a permit this bank did not issue in this form \
                         ({p:?}; held permits: {:?})",
                        self.held.iter().map(|x| x.permit).collect::<Vec<_>>()
                    ));
                    for x in &mut self.held {
                        if x.permit == p {
                            x.spent = true;
                        }
                    }
                } else if got != BB_OK {
                    let mut allowed = errors.clone();
                    allowed.push(BB_ERR_INVALID_ARGUMENT);
                    allowed.push(BB_ERR_UNKNOWN_DEPENDENCY);
                    assert!(allowed.contains(&got), "bb_record: {got:?}");
                }
                if let (Some(i), Some(before)) = (bi, before) {
                    if self.metrics(i) != before {
                        self.c13(format!(
                            "C13: a refused or repeated record ({p:?}, outcome {raw}, status \
                             {got:?}) changed the metrics"
                        ));
                    }
                }
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut banks = Banks {
        ptrs: [std::ptr::null_mut(); 2],
    };
    banks.get(0);
    let mut h = Harness {
        banks,
        ndeps: NAMES.len() as u32,
        held: Vec::new(),
        done: Vec::new(),
        c13: None,
    };
    for op in ops.iter().take(MAX_OPS) {
        h.step(op);
    }
    if let Some(msg) = h.c13.take() {
        panic!("{msg}");
    }
    // Give back what is still held, as a correct C caller would.
    for x in std::mem::take(&mut h.held) {
        let got = bb_record(h.banks.ptrs[x.bank], x.permit, bb_outcome_raw(2));
        assert!(got == BB_OK || got == BB_ERR_INVALID_ARGUMENT);
    }
});
