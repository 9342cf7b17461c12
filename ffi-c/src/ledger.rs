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
//! * The owning thread redeems a record that changes nothing (the common
//!   case: admitted and recorded on one thread, a success on a healthy
//!   breaker) with a load and a store instead ([`Ledger::redeem_quiet`]
//!   says why that is still exactly once).
//! * A thread that holds `ENTRIES` unrecorded permits, or a process with more
//!   than `MAX_LEDGERS` threads alive at once, falls back to a mutex-guarded
//!   set ("spill"): still exactly once, only slower.
//! * Ledgers are leaked on purpose (bounded by the most threads ever alive at
//!   once) and recycled: when a thread exits, its ledger goes back to a free
//!   list with its counter, so a permit issued by an exited thread can still
//!   be redeemed and sequence numbers still never repeat.
//!
//! The loom models `c13_ledger_*` (`loom-tests/tests/loom_models/c13_ledger.rs`)
//! check the first three points (issue and the two redeems) on one
//! [`Ledger`] of 4 slots, with `bb_record`'s choice between the redeems
//! (`record_checked`) on the real core; `docs/loom-models.md` says what
//! they leave out (the spill and the recycling among it).

// The atomics here come from std directly (clippy.toml steers only the
// core's imports through `crate::sync`), except a ledger's own under
// `--cfg loom` (`Slot`): the loom models drive one explicit [`Ledger`]'s
// protocol (`crate::__loom`), not the process-wide statics, which stay std
// (loom's atomics are not const-constructible, and an execution must not
// share state with the next).
#![allow(clippy::disallowed_types)]

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// A ledger's counter and slots: std's atomic, loom's under `--cfg loom`.
#[cfg(not(loom))]
type Slot = AtomicU64;
#[cfg(loom)]
type Slot = loom::sync::atomic::AtomicU64;

/// Slots per ledger: permits one thread may hold unrecorded before it
/// spills. Four under loom, so that a model's few issues wrap the ledger
/// and meet occupied slots.
pub(crate) const ENTRIES: usize = if cfg!(loom) { 4 } else { 1024 };
/// Ledgers that can exist at once (threads alive and admitting at once).
const MAX_LEDGERS: usize = 4096;
/// The ledger id meaning "kept in the spill set".
pub(crate) const SPILL: u32 = u32::MAX;

/// One thread's tickets: the protocol of issuing, redeeming and quietly
/// redeeming, on this ledger alone (the statics below find a ticket's
/// ledger by id and pick the owner's).
pub(crate) struct Ledger {
    /// Last sequence number issued. Read and written only by the owning
    /// thread (Relaxed load + store, no RMW); handed over with the ledger
    /// through the `FREE` mutex, which orders it for the next owner.
    last: Slot,
    /// `seq` of the outstanding permit in each slot, or 0.
    slots: [Slot; ENTRIES],
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

/// The ledger this thread owns, as the fast paths read it.
#[derive(Clone, Copy)]
pub(crate) struct Mine {
    id: u32,
    ledger: &'static Ledger,
}

/// Gives this thread's ledger (if it got one) back to `FREE` when the
/// thread exits.
struct Owned(Option<Mine>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(mine) = self.0 {
            // First forget it here: a record or admission made later on
            // this thread (by another thread-local's destructor) must not
            // use a ledger that another thread may own by then.
            MINE.set(None);
            if let Ok(mut free) = FREE.lock() {
                free.push(mine.id);
            }
        }
    }
}

thread_local! {
    /// This thread's ledger for the fast paths: const-initialised and
    /// without a destructor, so reading it is one thread-local load, with
    /// no lazy-initialisation check, and it stays readable while the
    /// thread's other thread-locals are destroyed. Set by `OWNED`'s
    /// initialiser, cleared by its destructor.
    static MINE: Cell<Option<Mine>> = const { Cell::new(None) };
    /// Owns this thread's ledger: set up lazily by the first admission on
    /// the thread (the slow path), so that its destructor gives the
    /// ledger back when the thread exits.
    static OWNED: Owned = {
        let mine = acquire();
        MINE.set(mine);
        Owned(mine)
    };
}

fn get(id: u32) -> Option<&'static Ledger> {
    let p = LEDGERS.get(id as usize)?.load(Ordering::Acquire);
    // SAFETY: a non-null entry was stored (Release, in `acquire`) from
    // `Box::leak`, so it points to a fully initialised `Ledger` that is never
    // freed or moved; the Acquire load orders its initialisation before use.
    // Only shared references are ever made; its fields are atomics.
    unsafe { p.as_ref() }
}

fn acquire() -> Option<Mine> {
    if let Some(id) = FREE.lock().ok().and_then(|mut f| f.pop()) {
        return get(id).map(|ledger| Mine { id, ledger });
    }
    // Relaxed: the id is only a unique index; publication of the ledger
    // itself is by the Release store below.
    let id = MADE.fetch_add(1, Ordering::Relaxed);
    if id as usize >= MAX_LEDGERS {
        MADE.fetch_sub(1, Ordering::Relaxed);
        return None;
    }
    let ledger: &'static Ledger = Box::leak(Box::new(Ledger::new()));
    // Release: pairs with the Acquire in `get` on a recording thread.
    LEDGERS[id as usize].store(std::ptr::from_ref(ledger).cast_mut(), Ordering::Release);
    Some(Mine { id, ledger })
}

/// Issues a ticket: `(ledger id, seq)`, `seq` ≠ 0.
#[inline]
pub(crate) fn issue() -> (u32, u64) {
    match MINE.get() {
        Some(mine) => mine.issue(),
        None => issue_slow(),
    }
}

impl Mine {
    #[inline]
    fn issue(self) -> (u32, u64) {
        match self.ledger.issue() {
            Some(seq) => (self.id, seq),
            None => issue_spill(),
        }
    }
}

impl Ledger {
    /// A ledger with no ticket issued.
    pub(crate) fn new() -> Ledger {
        Ledger {
            last: Slot::new(0),
            #[cfg(not(loom))]
            slots: [const { Slot::new(0) }; ENTRIES],
            #[cfg(loom)]
            slots: std::array::from_fn(|_| Slot::new(0)),
        }
    }

    /// The slot of ticket `seq`.
    #[inline(always)]
    fn slot(&self, seq: u64) -> &Slot {
        &self.slots[(seq % ENTRIES as u64) as usize]
    }

    /// Issues the next ticket, `seq` ≠ 0, or `None` when the next 8
    /// slots are all occupied (the caller spills). Only the owning thread
    /// may call it.
    #[inline]
    pub(crate) fn issue(&self) -> Option<u64> {
        // Relaxed: only this thread writes `last` (see its docs).
        let mut seq = self.last.load(Ordering::Relaxed);
        for _ in 0..8 {
            seq += 1;
            let slot = self.slot(seq);
            // Relaxed load and store: only the owner turns a 0 into a seq,
            // and recorders only turn a seq into 0, so reading 0 here means
            // the slot is ours to fill. The permit reaches a recording thread
            // through the caller's own synchronisation, which orders this
            // store before that thread's compare_exchange.
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(seq, Ordering::Relaxed);
                self.last.store(seq, Ordering::Relaxed);
                return Some(seq);
            }
        }
        self.last.store(seq, Ordering::Relaxed);
        None
    }
}

/// The first admission on a thread (which takes a ledger for it), or one
/// on a thread that has none: past `MAX_LEDGERS`, or exiting.
#[cold]
#[inline(never)]
fn issue_slow() -> (u32, u64) {
    match OWNED.try_with(|owned| owned.0) {
        Ok(Some(mine)) => mine.issue(),
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

/// This thread's ledger, when it is ledger `id`.
#[inline]
pub(crate) fn mine(id: u32) -> Option<&'static Ledger> {
    MINE.get().filter(|m| m.id == id).map(|m| m.ledger)
}

impl Ledger {
    /// Redeems ticket `seq` of this thread's own ledger without a
    /// read-modify-write: `true` when it was outstanding, `false` for one
    /// already redeemed (or never issued).
    ///
    /// Only for a record that changes nothing. Unlike [`redeem`], it is
    /// not exactly-once on its own: a copy's `compare_exchange` on another
    /// thread may win between the load and the store, and then both
    /// return `true`. That copy's record is then the one that counts, and
    /// this one, which changes nothing, is a duplicate that is a no-op
    /// (C13 allows a second record to be a no-op, never a double count).
    /// A copy arriving after the store fails its `compare_exchange`. The
    /// store never erases a later ticket: only the owner (this thread)
    /// writes a seq into a slot, and it is busy here.
    #[inline]
    pub(crate) fn redeem_quiet(&self, seq: u64) -> bool {
        match self.outstanding(seq) {
            Some(slot) => {
                // Relaxed: one location; see above for why no RMW is needed.
                slot.store(0, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// The slot of ticket `seq` while it is outstanding (the load of
    /// [`Ledger::redeem_quiet`]).
    #[inline(always)]
    fn outstanding(&self, seq: u64) -> Option<&Slot> {
        let slot = self.slot(seq);
        // Relaxed: one location, as in `redeem_quiet`.
        (seq != 0 && slot.load(Ordering::Relaxed) == seq).then_some(slot)
    }

    /// Redeems ticket `seq` of this ledger from any thread: `true` exactly
    /// once per issued ticket, `false` for one already redeemed or never
    /// issued.
    #[inline]
    pub(crate) fn redeem(&self, seq: u64) -> bool {
        // Relaxed: exactly-once comes from the atomicity of the RMW on this
        // one location; no other memory is published through it.
        seq != 0
            && self
                .slot(seq)
                .compare_exchange(seq, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
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
    get(ledger).is_some_and(|l| l.redeem(seq))
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

    /// The interleaving a stress test rarely hits: a copy's
    /// compare-exchange on another thread between the owner's quiet load
    /// and store. Both redeem (the copy's record counts, the owner's
    /// changes nothing); afterwards the ticket is spent for everyone, and
    /// the slot's next ticket redeems once. (The loom model
    /// `c13_ledger_the_owners_quiet_redeem_racing_a_copys_failure_never_counts_twice`
    /// explores this race among the others.)
    #[test]
    fn c13_a_copy_redeemed_between_the_owners_quiet_load_and_store() {
        let (id, seq) = issue();
        let mine = mine(id).expect("this thread's ledger");
        let slot = mine.outstanding(seq).expect("outstanding");
        assert!(std::thread::spawn(move || redeem(id, seq)).join().unwrap());
        slot.store(0, Ordering::Relaxed);
        assert!(!redeem(id, seq));
        assert!(!mine.redeem_quiet(seq));
        let next = loop {
            let (id2, s) = issue();
            assert_eq!(id2, id);
            if s % ENTRIES as u64 == seq % ENTRIES as u64 {
                break s;
            }
            assert!(redeem(id2, s));
        };
        assert!(!redeem(id, seq));
        assert!(mine.redeem_quiet(next));
        assert!(!redeem(id, next));
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
