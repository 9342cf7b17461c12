//! Exactly-once redemption of `bb_permit`s, without shared writes on admission.
//!
//! A C permit is a plain value that can be copied, so a second `bb_record`
//! of the same permit cannot be told apart by looking at the permit. The
//! core's `record_raw` has no per-permit state (it counts probes in flight
//! and consecutive failures in its word), so recording twice would count
//! twice: a failure twice toward the trip, a probe success twice toward
//! `success_threshold` (C8), and a probe slot returned twice (C7).
//!
//! The ledger gives every admitted permit a ticket that can be redeemed once:
//!
//! * Each thread that admits owns a [`Ledger`]: a counter and `ENTRIES`
//!   atomic slots. Issuing writes only the owner's ledger: the next sequence
//!   number `seq` (never reused, u64) goes into slot `seq % ENTRIES` if that
//!   slot is free (0); an occupied slot (a long-outstanding permit) is
//!   skipped by taking the next `seq`. No read-modify-write, no write to any
//!   line another thread writes on the healthy path.
//! * Redeeming is one `compare_exchange(seq, 0)` on that slot, from whatever
//!   thread records: exactly one of any number of racing records of copies
//!   of the same permit wins; every other one fails and changes nothing.
//!   Because `seq` is never reused within a ledger, a slot refilled with a
//!   later permit cannot be redeemed by an old copy (no ABA).
//! * A thread that holds `ENTRIES` unrecorded permits, or a process with more
//!   than `MAX_LEDGERS` threads alive at once, falls back to a mutex-guarded
//!   set ("spill"): still exactly once, only slower.
//! * Ledgers are leaked on purpose (bounded by the most threads ever alive at
//!   once) and recycled: when a thread exits, its ledger goes back to a free
//!   list with its counter, so a permit issued by an exited thread can still
//!   be redeemed and sequence numbers still never repeat.

// This crate is not loom-modelled: the atomics here come from std directly
// (clippy.toml steers only the core's imports through `crate::sync`).
#![allow(clippy::disallowed_types)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Slots per ledger: permits one thread may hold unrecorded before it spills.
const ENTRIES: usize = 1024;
/// Ledgers that can exist at once (threads alive and admitting at once).
const MAX_LEDGERS: usize = 4096;
/// The ledger id meaning "kept in the spill set".
pub(crate) const SPILL: u32 = u32::MAX;

struct Ledger {
    /// Last sequence number issued. Read and written only by the owning
    /// thread (Relaxed load + store, no RMW); handed over with the ledger
    /// through the `FREE` mutex, which orders it for the next owner.
    last: AtomicU64,
    /// `seq` of the outstanding permit in each slot, or 0.
    slots: [AtomicU64; ENTRIES],
}

/// Every ledger ever made, by id; an entry once set never changes.
static LEDGERS: [AtomicPtr<Ledger>; MAX_LEDGERS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_LEDGERS];
/// How many ids of `LEDGERS` are taken.
static MADE: AtomicU32 = AtomicU32::new(0);
/// Ledgers of exited threads, ready for reuse.
static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Tickets of the spill path.
static SPILLED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
static SPILL_SEQ: AtomicU64 = AtomicU64::new(0);

/// The ledger this thread owns; given back to `FREE` when the thread exits.
struct Owned {
    id: u32,
    ledger: &'static Ledger,
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Ok(mut free) = FREE.lock() {
            free.push(self.id);
        }
    }
}

thread_local! {
    static MINE: Option<Owned> = acquire();
}

fn get(id: u32) -> Option<&'static Ledger> {
    let p = LEDGERS.get(id as usize)?.load(Ordering::Acquire);
    // SAFETY: a non-null entry was stored (Release, in `acquire`) from
    // `Box::leak`, so it points to a fully initialised `Ledger` that is never
    // freed or moved; the Acquire load orders its initialisation before use.
    // Only shared references are ever made; its fields are atomics.
    unsafe { p.as_ref() }
}

fn acquire() -> Option<Owned> {
    if let Some(id) = FREE.lock().ok().and_then(|mut f| f.pop()) {
        return get(id).map(|ledger| Owned { id, ledger });
    }
    // Relaxed: the id is only a unique index; publication of the ledger
    // itself is by the Release store below.
    let id = MADE.fetch_add(1, Ordering::Relaxed);
    if id as usize >= MAX_LEDGERS {
        MADE.fetch_sub(1, Ordering::Relaxed);
        return None;
    }
    let ledger: &'static Ledger = Box::leak(Box::new(Ledger {
        last: AtomicU64::new(0),
        slots: [const { AtomicU64::new(0) }; ENTRIES],
    }));
    // Release: pairs with the Acquire in `get` on a recording thread.
    LEDGERS[id as usize].store(std::ptr::from_ref(ledger).cast_mut(), Ordering::Release);
    Some(Owned { id, ledger })
}

/// Issues a ticket: `(ledger id, seq)`, `seq` ≠ 0.
#[inline]
pub(crate) fn issue() -> (u32, u64) {
    let fast = MINE.try_with(|mine| {
        let mine = mine.as_ref()?;
        let l = mine.ledger;
        // Relaxed: only this thread writes `last` (see its docs).
        let mut seq = l.last.load(Ordering::Relaxed);
        for _ in 0..8 {
            seq += 1;
            let slot = &l.slots[(seq % ENTRIES as u64) as usize];
            // Relaxed load and store: only the owner turns a 0 into a seq,
            // and recorders only turn a seq into 0, so reading 0 here means
            // the slot is ours to fill. The permit reaches a recording thread
            // through the caller's own synchronisation, which orders this
            // store before that thread's compare_exchange.
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(seq, Ordering::Relaxed);
                l.last.store(seq, Ordering::Relaxed);
                return Some((mine.id, seq));
            }
        }
        l.last.store(seq, Ordering::Relaxed);
        None
    });
    match fast {
        Ok(Some(t)) => t,
        _ => issue_spill(),
    }
}

#[cold]
fn issue_spill() -> (u32, u64) {
    // Relaxed: uniqueness only.
    let seq = SPILL_SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let mut set = SPILLED.lock().unwrap_or_else(|e| e.into_inner());
    set.get_or_insert_with(HashSet::new).insert(seq);
    (SPILL, seq)
}

/// Redeems a ticket: `true` exactly once per issued ticket, `false` for a
/// ticket already redeemed or never issued.
#[inline]
pub(crate) fn redeem(ledger: u32, seq: u64) -> bool {
    if seq == 0 {
        return false;
    }
    if ledger == SPILL {
        return redeem_spill(seq);
    }
    let Some(l) = get(ledger) else { return false };
    // Relaxed: exactly-once comes from the atomicity of the RMW on this one
    // location; no other memory is published through it.
    l.slots[(seq % ENTRIES as u64) as usize]
        .compare_exchange(seq, 0, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

#[cold]
fn redeem_spill(seq: u64) -> bool {
    let mut set = SPILLED.lock().unwrap_or_else(|e| e.into_inner());
    set.as_mut().is_some_and(|s| s.remove(&seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticket_redeems_exactly_once() {
        let (l, s) = issue();
        assert!(redeem(l, s));
        assert!(!redeem(l, s));
        assert!(!redeem(l, 0));
        assert!(!redeem(12345, s));
    }

    #[test]
    fn full_ledger_spills_and_stays_exactly_once() {
        let tickets: Vec<_> = (0..3 * ENTRIES).map(|_| issue()).collect();
        assert!(tickets.iter().any(|t| t.0 == SPILL));
        let mut unique = tickets.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), tickets.len());
        for &(l, s) in &tickets {
            assert!(redeem(l, s));
        }
        for &(l, s) in &tickets {
            assert!(!redeem(l, s));
        }
    }

    #[test]
    fn racing_redeems_win_once() {
        for _ in 0..200 {
            let (l, s) = issue();
            let wins: usize = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..4)
                    .map(|_| sc.spawn(move || redeem(l, s) as usize))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(wins, 1);
        }
    }

    #[test]
    fn ledger_of_exited_thread_is_reused_without_repeating_seqs() {
        let (l1, s1) = std::thread::spawn(issue).join().unwrap();
        let (l2, s2) = std::thread::spawn(issue).join().unwrap();
        if l1 == l2 {
            assert!(s2 > s1);
        }
        assert!(redeem(l1, s1));
        assert!(redeem(l2, s2));
    }
}
