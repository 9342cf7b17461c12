//! C13, C7: the C ABI's permit ledger redeems every `bb_permit` once,
//! however many copies of it are recorded and on which threads.
//!
//! A C permit is a plain 16-byte value naming a ledger entry; `bb_record`
//! makes it count once through the ticket and fields `bb_admit` wrote into
//! that entry of the admitting thread's ledger (`ffi-c/src/ledger.rs`).
//! These models drive that code, through `breakerbank_ffi::__loom`: the
//! ledger's issue, peek, compare-exchange take and quiet redeem, and
//! `bb_record`'s choice between the two (`record_entry`: the quiet redeem
//! for the owner's record that changes nothing, else the compare-exchange,
//! then `record_raw` on the real core, of the fields the entry holds).
//! Under loom a ledger has 4 entries and its tickets are its sequence
//! numbers. Not modelled: how `bb_record` finds a permit's ledger by id
//! and the thread's own (a static table and thread-locals, std's), and
//! the spill map (a mutex).

use crate::support::{explore, profile, Scope, World};
use breakerbank::{Decision, Outcome};
use breakerbank_ffi::__loom::{record, Ledger};
use breakerbank_ffi::{bb_permit, bb_status};
use loom::sync::Arc;
use loom::thread;

const OK: bb_status = bb_status::BB_OK;
const REFUSED: bb_status = bb_status::BB_ERR_INVALID_ARGUMENT;

/// A permit admitted on the calling thread, with its ticket issued into
/// `ledger` as `bb_admit` does: the calling thread is the ledger's owner.
fn admitted(w: &World, ledger: &Ledger) -> bb_permit {
    let raw = match w.dep.admit(None, None).unwrap() {
        Decision::Admitted(p) => p.into_raw(),
        Decision::Rejected(r) => panic!("setup: closed breaker refused: {:?}", r.reason),
    };
    ledger.issue_permit(raw).expect("setup: a free entry")
}

/// The failures the breaker counted: the total, and the consecutive ones
/// (which a counted success resets).
fn failures(w: &World) -> (u64, u32) {
    let total = w.partition("global").expect("global").failures_total;
    let consecutive = w.dep.inspect(None).unwrap().consecutive_failures;
    (total, consecutive)
}

/// After the race: no copy of `permit` redeems its ticket again, by
/// either redeem, nor records again on any thread, owner (the calling
/// thread) or not; the breaker's counters stay as they are.
fn assert_spent(w: &World, ledger: &Ledger, permit: &bb_permit) {
    let before = failures(w);
    assert!(
        !ledger.redeem(permit.opaque[0]),
        "C13: a spent ticket redeemed"
    );
    assert!(
        !ledger.redeem_quiet(permit.opaque[0]),
        "C13: a spent ticket redeemed quietly"
    );
    for (outcome, owner) in [
        (Outcome::Failure, false),
        (Outcome::Failure, true),
        (Outcome::Success, true),
    ] {
        assert_eq!(
            record(&w.dep, permit, outcome, ledger, owner),
            REFUSED,
            "C13: a spent permit recorded again ({outcome:?}, owner {owner})"
        );
    }
    assert_eq!(failures(w), before, "C13: a refused record counted");
}

/// Consecutive failures 3 (one failure does not trip). The admitting
/// thread (the ledger's owner) and two other threads record the permit
/// and two copies of it as failures at once: all through the
/// compare-exchange (a failure changes something, so even the owner does
/// not take the quiet redeem). Exactly one returns `BB_OK`, the others
/// `BB_ERR_INVALID_ARGUMENT`, and the breaker counts exactly one failure;
/// afterwards the permit is spent. Fails if the redeem is a load and a
/// store instead of a compare-exchange (two count), or if the owner took
/// the quiet redeem for a record that changes something (its failure
/// would go uncounted, or count beside a copy's).
#[test]
fn c13_ledger_a_permit_and_its_copies_failing_at_once_count_once() {
    let profile = profile(Scope::Global, 3, 1, 1);
    explore(
        "c13_ledger_a_permit_and_its_copies_failing_at_once_count_once",
        move || {
            let w = World::new(&profile);
            let ledger = Arc::new(Ledger::new());
            let permit = admitted(&w, &ledger);

            let copies: Vec<_> = (0..2)
                .map(|_| {
                    let (dep, l) = (w.dep.clone(), ledger.clone());
                    thread::spawn(move || record(&dep, &permit, Outcome::Failure, &l, false))
                })
                .collect();
            let owner = record(&w.dep, &permit, Outcome::Failure, &ledger, true);
            let mut statuses = vec![owner];
            statuses.extend(copies.into_iter().map(|c| c.join().unwrap()));

            let mut sorted = statuses.clone();
            sorted.sort_by_key(|s| *s as u32);
            assert_eq!(
                sorted,
                [OK, REFUSED, REFUSED],
                "C13: a permit and its copies (owner first): {statuses:?}"
            );
            assert_eq!(
                failures(&w),
                (1, 1),
                "C13: one permit's failure counted other than once"
            );
            assert_spent(&w, &ledger, &permit);
        },
    );
}

/// Consecutive failures 3. The owner records its permit as a success on
/// the healthy closed breaker (a record that changes nothing: the quiet
/// redeem, a load and a store) while another thread records a copy as a
/// failure (compare-exchange, then `record_raw`). Whichever interleaving,
/// including the copy's compare-exchange between the owner's load and
/// store and the copy's failure landing before the owner asks whether its
/// success changes nothing:
///
/// * at least one record returns `BB_OK` (the permit is not lost);
/// * the failure is counted once if the copy returned `BB_OK`, else never;
/// * the owner's record is a no-op or refused whenever the failure
///   counted: the consecutive count still holds it (no success counted
///   beside it);
/// * afterwards the permit is spent for every thread and either redeem.
///
/// Fails if the owner's record took the quiet redeem and then recorded
/// as well (its success, counted after the copy's failure, resets the
/// consecutive count).
#[test]
fn c13_ledger_the_owners_quiet_redeem_racing_a_copys_failure_never_counts_twice() {
    let profile = profile(Scope::Global, 3, 1, 1);
    explore(
        "c13_ledger_the_owners_quiet_redeem_racing_a_copys_failure_never_counts_twice",
        move || {
            let w = World::new(&profile);
            let ledger = Arc::new(Ledger::new());
            let permit = admitted(&w, &ledger);

            let (dep, l) = (w.dep.clone(), ledger.clone());
            let copy = thread::spawn(move || record(&dep, &permit, Outcome::Failure, &l, false));
            let owner = record(&w.dep, &permit, Outcome::Success, &ledger, true);
            let copy = copy.join().unwrap();

            for s in [owner, copy] {
                assert!(s == OK || s == REFUSED, "unexpected status {s:?}");
            }
            assert!(
                owner == OK || copy == OK,
                "C13: neither record of the permit was taken"
            );
            let counted = u64::from(copy == OK);
            assert_eq!(
                failures(&w),
                (counted, counted as u32),
                "C13: the copy's failure (status {copy:?}) counted wrongly, or the \
                 owner's success (status {owner:?}) counted beside it"
            );
            assert_spent(&w, &ledger, &permit);
        },
    );
}

/// The ledger alone, 4 slots. Setup on the owner: ticket 1 (slot 1) is
/// issued and quietly redeemed, ticket 2 (slot 2) is issued and handed to
/// another thread. That thread redeems a stale copy of ticket 1 and then
/// ticket 2, while the owner issues three tickets (3, 4, then 5 into slot
/// 1 again), quietly redeems its own stale copy of ticket 1 and then
/// ticket 3, issues a fourth (6 into slot 2 if ticket 2's redeem is
/// visible, else it skips that occupied slot: 7 into slot 3), and
/// quietly redeems every ticket it holds.
///
/// * the stale copies of ticket 1 never redeem, though slot 1 holds
///   ticket 5 by then (no ABA), on the other thread or the owner;
/// * ticket 2 redeems, once: no issue overwrote it while outstanding;
/// * every ticket the owner issued is new, sits in its own slot and
///   redeems once; afterwards no ticket redeems again.
///
/// Fails if issue fills a slot without checking it is free (ticket 2 is
/// overwritten), if the quiet redeem stores 0 without checking the slot
/// holds its ticket (ticket 5 is erased by the stale copy), or if it
/// leaves the slot set (ticket 5 finds slot 1 taken).
#[test]
fn c13_ledger_slot_reuse_never_redeems_a_newer_ticket() {
    explore("c13_ledger_slot_reuse_never_redeems_a_newer_ticket", || {
        let ledger = Arc::new(Ledger::new());
        let stale = ledger.issue().expect("setup: slot free");
        assert!(ledger.redeem_quiet(stale));
        let held = ledger.issue().expect("setup: slot free");
        assert_eq!((stale, held), (1, 2), "setup: first tickets");

        let l = ledger.clone();
        let other = thread::spawn(move || (l.redeem(stale), l.redeem(held)));

        // The owner's side; checked after the join, so that a failure
        // reports with the other thread stopped.
        let mut mine: Vec<Option<u64>> = (0..3).map(|_| ledger.issue()).collect();
        let stale_quiet = ledger.redeem_quiet(stale);
        let mut redeemed = vec![mine[0].is_some_and(|t| ledger.redeem_quiet(t))];
        mine.push(ledger.issue());
        redeemed.extend(
            mine[1..]
                .iter()
                .map(|t| t.is_some_and(|t| ledger.redeem_quiet(t))),
        );

        let (stale_redeemed, held_redeemed) = other.join().unwrap();
        assert_eq!(
            mine[..3],
            [Some(3), Some(4), Some(5)],
            "tickets 3..5 fill the free slots 3, 0, 1"
        );
        assert!(
            mine[3] == Some(6) || mine[3] == Some(7),
            "C13/C7: the fourth ticket {:?} is not 6 in slot 2 (free once ticket 2 \
             is redeemed) or 7 in slot 3 (freed by ticket 3)",
            mine[3]
        );
        assert!(
            !stale_quiet,
            "C13: a stale copy redeemed quietly a newer ticket in its slot"
        );
        for (t, r) in mine.iter().zip(&redeemed) {
            if let Some(t) = t {
                assert!(r, "C13/C7: the owner's ticket {t} was lost");
            }
        }
        assert!(
            !stale_redeemed,
            "C13: a stale copy redeemed a newer ticket in its slot (ABA)"
        );
        assert!(
            held_redeemed,
            "C13/C7: an outstanding ticket was overwritten by a later issue"
        );
        for t in [stale, held].into_iter().chain(mine.into_iter().flatten()) {
            assert!(!ledger.redeem(t), "C13: ticket {t} redeemed twice");
            assert!(
                !ledger.redeem_quiet(t),
                "C13: ticket {t} redeemed twice quietly"
            );
        }
    });
}
