//! Where a `bb_permit` lives: exactly-once redemption of the 16-byte opaque
//! permit, with everything `bb_record` needs kept here rather than in it.
//!
//! A C permit is a plain value that can be copied, altered or made up, so a
//! second `bb_record` of the same permit cannot be told apart by looking at
//! the permit. The core's `record_raw` has no per-permit state (it counts
//! probes in flight and consecutive failures in its word), so recording
//! twice would count twice: a failure twice toward the trip, a probe
//! success twice toward `success_threshold` (C8), and a probe slot returned
//! twice (C7).
//!
//! Invariant: a permit is `[ticket, ledger | entry << 32]`, and it is
//! recorded only if entry `entry` of ledger `ledger` holds `ticket` at the
//! moment its record takes it; what is recorded is what that entry holds,
//! never anything read from the permit.
//!
//! * Each thread that admits owns a [`Ledger`]: a counter and `ENTRIES`
//!   entries. Issuing writes only the owner's ledger: the next sequence
//!   number `seq` (never reused, u64) picks entry `seq % ENTRIES` if that
//!   entry is free (ticket 0), else the next `seq`; the entry gets the
//!   permit's fields (bank, dependency, slot, probe, generation, start),
//!   then its ticket, a keyed bijection of `seq` ([`Ledger::ticket_of`]).
//!   No read-modify-write, no write to a line another thread writes on the
//!   healthy path.
//! * A record reads the entry's ticket, compares it with the permit's, reads
//!   the fields, and takes the entry with one `compare_exchange(ticket, 0)`:
//!   exactly one of any number of racing records of copies of the same
//!   permit wins; every other one fails and changes nothing. A ticket is
//!   never reused within an entry (a bijection of a never-reused `seq`), so
//!   an entry refilled with a later permit cannot be taken by an old copy
//!   (no ABA), and a permit with either word altered names an entry that
//!   does not hold its ticket. The bijection is keyed per ledger, so a
//!   made-up permit names a live one by counting no more often than by
//!   chance.
//! * The owning thread takes an entry whose record changes nothing (the
//!   common case: admitted and recorded on one thread, a success on a
//!   healthy breaker) with a store instead ([`Ledger::redeem_quiet`] says
//!   why that is still exactly once).
//! * A thread that holds `ENTRIES` unrecorded permits, or a process with more
//!   than `MAX_LEDGERS` threads alive at once, falls back to a mutex-guarded
//!   map ("spill"): still exactly once, only slower.
//! * Ledgers are leaked on purpose (bounded by the most threads ever alive at
//!   once) and recycled: when a thread exits, its ledger goes back to a free
//!   list with its counter, so a permit issued by an exited thread can still
//!   be redeemed and sequence numbers still never repeat.
//!
//! The loom models `c13_ledger_*` (`loom-tests/tests/loom_models/c13_ledger.rs`)
//! check the issue, the compare-exchange and the quiet redeem on one
//! [`Ledger`] of 4 entries, with `bb_record`'s choice between the redeems
//! (`record_entry`) on the real core; `docs/design/loom-models.md` says what they
//! leave out (the spill and the recycling among it).

// The atomics here come from std directly (clippy.toml steers only the
// core's imports through `crate::sync`), except a ledger's own under
// `--cfg loom` (`Slot`): the loom models drive one explicit [`Ledger`]'s
// protocol (`crate::__loom`), not the process-wide statics, which stay std
// (loom's atomics are not const-constructible, and an execution must not
// share state with the next).
#![allow(clippy::disallowed_types)]

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// A ledger's counter and entries: std's atomic, loom's under `--cfg loom`.
#[cfg(not(loom))]
type Slot = AtomicU64;
#[cfg(loom)]
type Slot = loom::sync::atomic::AtomicU64;

/// Entries per ledger: permits one thread may hold unrecorded before it
/// spills. Four under loom, so that a model's few issues wrap the ledger
/// and meet occupied entries.
pub(crate) const ENTRIES: usize = if cfg!(loom) { 4 } else { 1024 };
/// Ledgers that can exist at once (threads alive and admitting at once).
const MAX_LEDGERS: usize = 4096;
/// The ledger id meaning "kept in the spill map".
pub(crate) const SPILL: u32 = u32::MAX;

/// What `bb_record` needs of an admitted call: kept in the entry that
/// issued its ticket, written at admission, read at record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Issued {
    /// The issuing bank's serial (never 0).
    pub(crate) bank: u32,
    /// The dependency id.
    pub(crate) dependency: u32,
    /// The partition's slot in its dependency.
    pub(crate) slot: u32,
    /// Whether the call holds a probe slot.
    pub(crate) probe: bool,
    /// The breaker generation at admission.
    pub(crate) generation: u64,
    /// The core's admission time (`slow_call`).
    pub(crate) started_ns: u64,
}

/// One outstanding permit's place. `ticket` is 0 when the entry is free;
/// the other words are meaningful while it is not. Every word is atomic
/// because a recording thread may read an entry its owner is refilling
/// (after another copy took it): such a read is then refused by the
/// ticket's compare-exchange, never used.
struct Entry {
    ticket: Slot,
    /// `bank | dependency << 32`.
    owner: Slot,
    /// `slot | probe << 32`.
    place: Slot,
    generation: Slot,
    started_ns: Slot,
}

impl Entry {
    #[cfg(loom)]
    fn new() -> Entry {
        Entry {
            ticket: Slot::new(0),
            owner: Slot::new(0),
            place: Slot::new(0),
            generation: Slot::new(0),
            started_ns: Slot::new(0),
        }
    }

    /// The fields as they are now (Relaxed: what the caller's Acquire load
    /// of the ticket ordered, or, for the owner, its own writes).
    #[inline(always)]
    fn read(&self) -> Issued {
        let owner = self.owner.load(Ordering::Relaxed);
        let place = self.place.load(Ordering::Relaxed);
        Issued {
            bank: owner as u32,
            dependency: (owner >> 32) as u32,
            slot: place as u32,
            probe: place >> 32 != 0,
            generation: self.generation.load(Ordering::Relaxed),
            started_ns: self.started_ns.load(Ordering::Relaxed),
        }
    }
}

/// One thread's permits: the protocol of issuing, taking and quietly
/// taking, on this ledger alone (the statics below find a permit's ledger
/// by id and pick the owner's).
pub(crate) struct Ledger {
    /// Last sequence number issued. Read and written only by the owning
    /// thread (Relaxed load + store, no RMW); handed over with the ledger
    /// through the `FREE` mutex, which orders it for the next owner.
    last: Slot,
    /// The key of this ledger's tickets ([`Ledger::ticket_of`]); set once
    /// when the ledger is made.
    key: [u64; 2],
    entries: [Entry; ENTRIES],
}

/// Every ledger ever made, by id; an entry once set never changes.
static LEDGERS: [AtomicPtr<Ledger>; MAX_LEDGERS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_LEDGERS];
/// How many ids of `LEDGERS` are taken.
static MADE: AtomicU32 = AtomicU32::new(0);
/// Ledgers of exited threads, ready for reuse.
static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Permits of the spill path, by ticket.
static SPILLED: Mutex<Option<HashMap<u64, Issued>>> = Mutex::new(None);
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
    // Only shared references are ever made; its fields are atomics or
    // never written after publication (`key`).
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
    let ledger: &'static Ledger = Box::leak(Ledger::boxed());
    // Release: pairs with the Acquire in `get` on a recording thread.
    LEDGERS[id as usize].store(std::ptr::from_ref(ledger).cast_mut(), Ordering::Release);
    Some(Mine { id, ledger })
}

/// Two random 64-bit values, different on every call.
fn random_pair() -> [u64; 2] {
    use std::hash::BuildHasher;
    let seed = foldhash::quality::RandomState::default();
    [seed.hash_one(0u64), seed.hash_one(1u64)]
}

/// The permit words of a ticket: `[ticket, ledger | entry << 32]`.
#[inline(always)]
pub(crate) fn words(ledger: u32, entry: u32, ticket: u64) -> [u64; 2] {
    [ticket, u64::from(ledger) | u64::from(entry) << 32]
}

/// Issues a permit for `what`: its two words.
#[inline]
pub(crate) fn issue(what: &Issued) -> [u64; 2] {
    match MINE.get() {
        Some(mine) => mine.issue(what),
        None => issue_slow(what),
    }
}

impl Mine {
    #[inline]
    fn issue(self, what: &Issued) -> [u64; 2] {
        match self.ledger.issue(what) {
            Some((entry, ticket)) => words(self.id, entry, ticket),
            None => issue_spill(what),
        }
    }
}

impl Ledger {
    /// A ledger with no permit issued, on the heap, made in place (an
    /// array of `ENTRIES` entries is too large for a small C thread's
    /// stack).
    #[cfg(not(loom))]
    pub(crate) fn boxed() -> Box<Ledger> {
        let layout = std::alloc::Layout::new::<Ledger>();
        // SAFETY: `Ledger` is not zero-sized, so `layout` is valid for
        // `alloc_zeroed`.
        let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Ledger>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` is a fresh allocation of the global allocator with
        // `Ledger`'s layout, as `Box` owns its memory. Every field of
        // `Ledger` is an `AtomicU64` or a `u64` (arrays of them included),
        // for which all-zero bytes are a valid value: the zeroed `Ledger`
        // is initialised, with every entry free.
        let mut ledger = unsafe { Box::from_raw(p) };
        let [k0, k1] = random_pair();
        ledger.key = [k0, k1 | 1];
        ledger
    }

    /// A ledger with no permit issued; inside a loom execution. Its
    /// tickets are its sequence numbers (the identity key), so that a
    /// model can say which ticket it expects.
    #[cfg(loom)]
    pub(crate) fn boxed() -> Box<Ledger> {
        Box::new(Ledger {
            last: Slot::new(0),
            key: [0, 1],
            entries: std::array::from_fn(|_| Entry::new()),
        })
    }

    /// The ticket of sequence number `seq`: a bijection of `seq` for this
    /// ledger's key (xor, then multiplication by an odd number, both
    /// invertible modulo 2^64), so tickets never repeat in an entry, and
    /// consecutive ones do not look consecutive.
    #[inline(always)]
    fn ticket_of(&self, seq: u64) -> u64 {
        (seq ^ self.key[0]).wrapping_mul(self.key[1])
    }

    /// The entry of sequence number `seq`.
    #[inline(always)]
    fn entry_of(seq: u64) -> usize {
        (seq % ENTRIES as u64) as usize
    }

    /// Issues a permit for `what`: its entry and ticket (≠ 0), or `None`
    /// when the next 8 entries are all occupied (the caller spills). Only
    /// the owning thread may call it.
    #[inline]
    pub(crate) fn issue(&self, what: &Issued) -> Option<(u32, u64)> {
        // Relaxed: only this thread writes `last` (see its docs).
        let mut seq = self.last.load(Ordering::Relaxed);
        for _ in 0..8 {
            seq += 1;
            let at = Self::entry_of(seq);
            let e = &self.entries[at];
            let ticket = self.ticket_of(seq);
            // Acquire: pairs with the Release of the compare-exchange that
            // freed the entry, so that recorder's reads of the fields are
            // done before they are overwritten below. Only the owner turns
            // a 0 into a ticket, so reading 0 means the entry is ours.
            if ticket != 0 && e.ticket.load(Ordering::Acquire) == 0 {
                // Relaxed: published by the Release store of the ticket.
                e.owner.store(
                    u64::from(what.bank) | u64::from(what.dependency) << 32,
                    Ordering::Relaxed,
                );
                e.place.store(
                    u64::from(what.slot) | u64::from(what.probe) << 32,
                    Ordering::Relaxed,
                );
                e.generation.store(what.generation, Ordering::Relaxed);
                e.started_ns.store(what.started_ns, Ordering::Relaxed);
                // Release: a recorder that reads this ticket (Acquire) reads
                // the fields above. The permit reaches another thread
                // through the caller's own synchronisation anyway.
                e.ticket.store(ticket, Ordering::Release);
                self.last.store(seq, Ordering::Relaxed);
                return Some((at as u32, ticket));
            }
        }
        self.last.store(seq, Ordering::Relaxed);
        None
    }

    /// The fields entry `at` holds while it holds `ticket`; `None` for an
    /// entry out of range or holding another ticket (or none).
    #[inline(always)]
    pub(crate) fn peek(&self, at: u32, ticket: u64) -> Option<Issued> {
        let e = self.entries.get(at as usize)?;
        // Acquire: pairs with the Release store of `issue`, so the fields
        // read next are the ones written for this ticket.
        (ticket != 0 && e.ticket.load(Ordering::Acquire) == ticket).then(|| e.read())
    }

    /// Takes entry `at` from any thread if it still holds `ticket`: `true`
    /// exactly once per issued ticket.
    #[inline]
    pub(crate) fn take(&self, at: u32, ticket: u64) -> bool {
        // Release on success: the fields this thread read before (`peek`)
        // are read before the owner's Acquire load of the 0 lets it write
        // them again. Exactly-once comes from the atomicity of the RMW.
        ticket != 0
            && self.entries.get(at as usize).is_some_and(|e| {
                e.ticket
                    .compare_exchange(ticket, 0, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
            })
    }

    /// Frees entry `at`, whose ticket this thread (the owner) has just
    /// seen with [`Ledger::peek`], without a read-modify-write.
    ///
    /// Only for a record that changes nothing. Unlike [`Ledger::take`], it
    /// is not exactly-once on its own: a copy's `compare_exchange` on
    /// another thread may win between the owner's peek and this store, and
    /// then both records return `BB_OK`. That copy's record is then the one
    /// that counts, and this one, which changes nothing, is a duplicate
    /// that is a no-op (C13 allows a second record to be a no-op, never a
    /// double count). A copy arriving after the store fails its
    /// `compare_exchange`. The store never erases a later ticket: only the
    /// owner (this thread) writes a ticket into an entry, and it is busy
    /// here.
    #[inline]
    pub(crate) fn redeem_quiet(&self, at: u32) {
        if let Some(e) = self.entries.get(at as usize) {
            // Relaxed: only the owner reads the 0 to refill the entry, and
            // it is this thread.
            e.ticket.store(0, Ordering::Relaxed);
        }
    }
}

/// The first admission on a thread (which takes a ledger for it), or one
/// on a thread that has none: past `MAX_LEDGERS`, or exiting.
#[cold]
#[inline(never)]
fn issue_slow(what: &Issued) -> [u64; 2] {
    match OWNED.try_with(|owned| owned.0) {
        Ok(Some(mine)) => mine.issue(what),
        _ => issue_spill(what),
    }
}

/// The key of the spill map's tickets.
fn spill_key() -> u64 {
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| random_pair()[0])
}

#[cold]
fn issue_spill(what: &Issued) -> [u64; 2] {
    let key = spill_key();
    let mut set = SPILLED.lock().unwrap_or_else(|e| e.into_inner());
    let map = set.get_or_insert_with(HashMap::new);
    loop {
        // Relaxed: uniqueness only. Xor with a key keeps tickets unique
        // and unlike a count.
        let ticket = (SPILL_SEQ.fetch_add(1, Ordering::Relaxed) + 1) ^ key;
        if ticket != 0 && !map.contains_key(&ticket) {
            map.insert(ticket, *what);
            return words(SPILL, 0, ticket);
        }
    }
}

/// This thread's ledger, when it is ledger `id`.
#[inline]
pub(crate) fn mine(id: u32) -> Option<&'static Ledger> {
    MINE.get().filter(|m| m.id == id).map(|m| m.ledger)
}

/// Where a permit's words say it lives.
#[derive(Clone, Copy)]
pub(crate) enum Place {
    /// Entry `at` of a ledger.
    Entry(&'static Ledger, u32),
    /// The spill map.
    Spill,
}

/// The ledger entry the words of a permit name, or `None` for words that
/// name no ledger.
#[inline]
pub(crate) fn place(words: [u64; 2]) -> Option<Place> {
    let (id, at) = (words[1] as u32, (words[1] >> 32) as u32);
    if id == SPILL {
        return (at == 0).then_some(Place::Spill);
    }
    get(id).map(|l| Place::Entry(l, at))
}

/// Takes the spilled permit `ticket` if `bank` issued it: its fields, once.
#[cold]
pub(crate) fn take_spilled(ticket: u64, bank: u32) -> Option<Issued> {
    let mut set = SPILLED.lock().unwrap_or_else(|e| e.into_inner());
    let map = set.as_mut()?;
    match map.get(&ticket) {
        Some(i) if i.bank == bank => map.remove(&ticket),
        _ => None,
    }
}

/// How many permits are kept in the spill map now (for tests).
#[cfg(test)]
pub(crate) fn spilled() -> usize {
    SPILLED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, HashMap::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what(bank: u32) -> Issued {
        Issued {
            bank,
            dependency: 3,
            slot: 7,
            probe: true,
            generation: 11,
            started_ns: 13,
        }
    }

    /// Takes a permit's entry (or spilled ticket) as `bb_record` would for
    /// `bank`, on any thread: its fields, exactly once.
    fn take_words(w: [u64; 2], bank: u32) -> Option<Issued> {
        match place(w)? {
            Place::Spill => take_spilled(w[0], bank),
            Place::Entry(l, at) => {
                let i = l.peek(at, w[0]).filter(|i| i.bank == bank)?;
                l.take(at, w[0]).then_some(i)
            }
        }
    }

    #[test]
    fn a_permit_is_taken_exactly_once_with_what_was_issued() {
        let w = issue(&what(5));
        assert_eq!(take_words(w, 5), Some(what(5)));
        assert_eq!(take_words(w, 5), None);
        assert_eq!(take_words([w[0], w[1] ^ 1], 5), None);
        assert_eq!(take_words([0, w[1]], 5), None);
    }

    #[test]
    fn another_banks_permit_is_refused_and_stays_outstanding() {
        let w = issue(&what(5));
        assert_eq!(take_words(w, 6), None);
        assert_eq!(take_words(w, 5), Some(what(5)));
    }

    #[test]
    fn a_full_ledger_spills_and_stays_exactly_once() {
        let permits: Vec<_> = (0..3 * ENTRIES).map(|_| issue(&what(9))).collect();
        assert!(permits.iter().any(|w| w[1] as u32 == SPILL));
        let mut unique = permits.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), permits.len());
        for &w in &permits {
            assert_eq!(take_words(w, 9), Some(what(9)), "{w:x?}");
        }
        for &w in &permits {
            assert_eq!(take_words(w, 9), None);
        }
    }

    #[test]
    fn racing_takes_win_once() {
        for _ in 0..200 {
            let w = issue(&what(1));
            let wins: usize = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..4)
                    .map(|_| sc.spawn(move || take_words(w, 1).is_some() as usize))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(wins, 1);
        }
    }

    /// The interleaving a stress test rarely hits: a copy's
    /// compare-exchange on another thread between the owner's peek and
    /// its quiet store. Both take it (the copy's record counts, the
    /// owner's changes nothing); afterwards the permit is spent for
    /// everyone, and the entry's next ticket is taken once.
    #[test]
    fn c13_a_copy_taken_between_the_owners_peek_and_quiet_store() {
        let w = issue(&what(2));
        let Some(Place::Entry(l, at)) = place(w) else {
            panic!("not in a ledger")
        };
        let mine = mine(w[1] as u32).expect("this thread's ledger");
        assert!(mine.peek(at, w[0]).is_some());
        assert!(std::thread::spawn(move || take_words(w, 2).is_some())
            .join()
            .unwrap());
        mine.redeem_quiet(at);
        assert_eq!(take_words(w, 2), None);
        let next = loop {
            let n = issue(&what(2));
            if (n[1] >> 32) as u32 == at {
                break n;
            }
            assert!(take_words(n, 2).is_some());
        };
        assert_ne!(next[0], w[0]);
        assert_eq!(take_words(w, 2), None);
        assert!(l.peek(at, next[0]).is_some());
        assert!(take_words(next, 2).is_some());
    }

    #[test]
    fn the_ledger_of_an_exited_thread_is_reused_without_repeating_tickets() {
        let w1 = std::thread::spawn(|| issue(&what(4))).join().unwrap();
        let w2 = std::thread::spawn(|| issue(&what(4))).join().unwrap();
        assert_ne!(w1, w2);
        assert_eq!(take_words(w1, 4), Some(what(4)));
        assert_eq!(take_words(w2, 4), Some(what(4)));
    }

    #[test]
    fn tickets_of_one_entry_never_repeat() {
        let l = Ledger::boxed();
        let mut seen = std::collections::HashSet::new();
        for seq in 1..10_000u64 {
            assert!(seen.insert(l.ticket_of(seq * ENTRIES as u64)));
        }
        let _ = spilled();
    }
}
