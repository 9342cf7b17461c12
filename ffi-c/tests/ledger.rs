//! C13 through the C ABI when copies of one permit race: the admitting
//! thread's own record of a success that changes nothing redeems its
//! ticket without a read-modify-write, every other record with one, and
//! either way a permit counts once.

use breakerbank_ffi::{
    bb_admit, bb_bank, bb_bank_free, bb_bank_from_yaml, bb_decision, bb_inspect, bb_inspection,
    bb_outcome, bb_permit, bb_record, bb_reset, bb_status,
};
use std::sync::Barrier;

const PROFILE: &str = include_str!("../benches/common/profile.yaml");
/// `email_client`: global, trips after 5 consecutive failures.
const EMAIL: u32 = 0;

struct Bank(*mut bb_bank);

// SAFETY: every function taking `const bb_bank *` may be called from any
// number of threads at once (API.md); the bank is freed only in `Drop`,
// after the scoped threads using it have joined.
unsafe impl Sync for Bank {}

impl Bank {
    fn new() -> Bank {
        let mut p = std::ptr::null_mut();
        let s = bb_bank_from_yaml(PROFILE.as_ptr().cast(), PROFILE.len(), true.into(), &mut p);
        assert_eq!(s, bb_status::BB_OK);
        Bank(p)
    }

    fn admit(&self) -> bb_permit {
        // SAFETY: bb_decision is repr(C) of integers, bools and u32-repr
        // enums whose 0 is a valid variant; all-zero is a valid value.
        let mut d: bb_decision = unsafe { std::mem::zeroed() };
        let s = bb_admit(self.0, EMAIL, std::ptr::null(), 0, 0, &mut d);
        assert_eq!(s, bb_status::BB_OK);
        assert!(d.admitted);
        d.permit
    }

    fn record(&self, p: bb_permit, outcome: bb_outcome) -> bb_status {
        bb_record(self.0, p, outcome.into())
    }

    fn failures(&self) -> u32 {
        // SAFETY: as in `admit`: all-zero is a valid bb_inspection.
        let mut i: bb_inspection = unsafe { std::mem::zeroed() };
        let s = bb_inspect(self.0, EMAIL, std::ptr::null(), 0, &mut i);
        assert_eq!(s, bb_status::BB_OK);
        i.consecutive_failures
    }
}

impl Drop for Bank {
    fn drop(&mut self) {
        assert_eq!(bb_bank_free(self.0), bb_status::BB_OK);
    }
}

const OK: bb_status = bb_status::BB_OK;
const INVALID: bb_status = bb_status::BB_ERR_INVALID_ARGUMENT;
const SUCCESS: bb_outcome = bb_outcome::BB_OUTCOME_SUCCESS;
const FAILURE: bb_outcome = bb_outcome::BB_OUTCOME_FAILURE;

/// The admitting thread records a success that changes nothing (no
/// read-modify-write) while copies race it from other threads, with
/// failures and successes: among the other threads at most one record
/// goes through, and the failures counted are exactly the failure records
/// that went through, at most one (never a double count).
#[test]
fn c13_the_owners_quiet_record_racing_copies_counts_once() {
    let bank = Bank::new();
    const COPIES: [bb_outcome; 4] = [FAILURE, SUCCESS, FAILURE, FAILURE];
    let mut raced = [0usize; 3];
    for _ in 0..300 {
        assert_eq!(bb_reset(bank.0, EMAIL, std::ptr::null(), 0), OK);
        let p = bank.admit();
        let start = Barrier::new(COPIES.len() + 1);
        let (owner, copies) = std::thread::scope(|s| {
            let hs: Vec<_> = COPIES
                .iter()
                .map(|&o| {
                    let (bank, start) = (&bank, &start);
                    s.spawn(move || {
                        start.wait();
                        (o, bank.record(p, o))
                    })
                })
                .collect();
            start.wait();
            let owner = bank.record(p, SUCCESS);
            (
                owner,
                hs.into_iter()
                    .map(|h| h.join().unwrap())
                    .collect::<Vec<_>>(),
            )
        });
        assert!(owner == OK || owner == INVALID, "{owner:?}");
        assert!(copies.iter().all(|&(_, s)| s == OK || s == INVALID));
        let through = copies.iter().filter(|&&(_, s)| s == OK).count();
        let failed = copies
            .iter()
            .filter(|&&(o, s)| s == OK && o == FAILURE)
            .count();
        assert!(through <= 1, "{copies:?}");
        assert!(through + usize::from(owner == OK) >= 1);
        assert_eq!(bank.failures() as usize, failed, "{owner:?} {copies:?}");
        raced[usize::from(owner == OK) + through] += 1;
        // Redeemed now, whoever won: one more copy changes nothing.
        assert_eq!(bank.record(p, FAILURE), INVALID);
        assert_eq!(bank.record(p, SUCCESS), INVALID);
        assert_eq!(bank.failures() as usize, failed);
    }
    eprintln!("rounds by records that went through (0, 1, 2): {raced:?}");
}

/// Copies of one permit recorded with mixed outcomes from many threads,
/// none of them the admitting one: exactly one record goes through.
#[test]
fn c13_racing_copies_from_other_threads_record_exactly_once() {
    let bank = Bank::new();
    for round in 0..300 {
        assert_eq!(bb_reset(bank.0, EMAIL, std::ptr::null(), 0), OK);
        let p = bank.admit();
        let start = Barrier::new(4);
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|i| {
                    let (bank, start) = (&bank, &start);
                    let o = if (i + round) % 2 == 0 {
                        FAILURE
                    } else {
                        SUCCESS
                    };
                    s.spawn(move || {
                        start.wait();
                        (o, bank.record(p, o))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let through: Vec<_> = results.iter().filter(|&&(_, s)| s == OK).collect();
        assert_eq!(through.len(), 1, "{results:?}");
        let failed = u32::from(through[0].0 == FAILURE);
        assert_eq!(bank.failures(), failed);
        assert_eq!(bank.record(p, FAILURE), INVALID);
        assert_eq!(bank.failures(), failed);
    }
}

/// The admitting thread's quiet record and another thread's record of a
/// copy, one after the other in both orders: the second is refused and
/// changes nothing.
#[test]
fn c13_a_copy_recorded_after_the_owners_quiet_record_or_before_it_is_refused() {
    let bank = Bank::new();
    let p = bank.admit();
    assert_eq!(bank.record(p, SUCCESS), OK);
    let other = std::thread::scope(|s| s.spawn(|| bank.record(p, FAILURE)).join().unwrap());
    assert_eq!(other, INVALID);
    assert_eq!(bank.failures(), 0);

    let p = bank.admit();
    let other = std::thread::scope(|s| s.spawn(|| bank.record(p, FAILURE)).join().unwrap());
    assert_eq!(other, OK);
    assert_eq!(bank.failures(), 1);
    assert_eq!(bank.record(p, SUCCESS), INVALID);
    assert_eq!(bank.failures(), 1, "the refused success reset nothing");
}

/// A permit admitted on a thread that has exited is recorded once, also
/// by a thread that took over the exited thread's ledger (and so records
/// it as its owner, without a read-modify-write).
#[test]
fn c13_a_permit_of_an_exited_thread_records_once_on_the_ledgers_next_owner() {
    let bank = Bank::new();
    for _ in 0..20 {
        let p = std::thread::scope(|s| s.spawn(|| bank.admit()).join().unwrap());
        let (first, second, mine) = std::thread::scope(|s| {
            s.spawn(|| {
                let mine = bank.admit();
                (bank.record(p, SUCCESS), bank.record(p, SUCCESS), mine)
            })
            .join()
            .unwrap()
        });
        assert_eq!((first, second), (OK, INVALID));
        assert_eq!(bank.record(mine, SUCCESS), OK);
        assert_eq!(bank.record(mine, SUCCESS), INVALID);
    }
    assert_eq!(bank.failures(), 0);
}
