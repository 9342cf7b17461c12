//! Real-thread stress of the tenant table under churn (C9): slots are
//! recycled all the time, so the tenant index's hints go stale, and no
//! call may ever land in another tenant's partition.
//!
//! `max_tenants: 8`, consecutive_failures 2, on a clock that never moves.
//! Four workers each own ten tenant ids (every lookup tries the index:
//! short ids are confirmed by the id kept in the partition, UUID-shaped
//! ones by their fingerprint) and call them in turn, 40 tenants for 8 slots: nearly every
//! call evicts another tenant. Each tenant's own calls alternate failure,
//! success, failure, success..., so in its own partition two failures
//! never follow each other and it never trips. A call resolved into
//! another tenant's partition would sooner or later put two failures in
//! a row there and trip it: a refusal. Calls served by the shared overflow
//! partition (when eviction loses its races) record successes only.
//!
//! Admission guards isolation in layers (hints cleared on eviction, the
//! id and generation check on each hint, the owner check of every word
//! admission sees): with all three removed by hand this test fails at
//! once. loom checks the hint race exhaustively for two threads
//! (`c9_index_hint_racing_recycle_never_admits_the_wrong_tenant`,
//! `make loom-index`).

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

mod common;
use breakerbank::{Decision, Outcome};
use common::tenant_bank;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

const WORKERS: usize = 4;
const TENANTS_PER_WORKER: usize = 10;
const ROUNDS: usize = 100_000;
const DEADLINE: Duration = Duration::from_secs(6);

#[test]
fn c9_stress_no_call_lands_in_another_tenants_partition_under_churn() {
    churn(|w, k| format!("w{w}-t{k}"));
}

#[test]
fn c9_stress_long_ids_never_land_in_another_tenants_partition_under_churn() {
    churn(|w, k| format!("{w:08x}-0000-4000-8000-{k:012x}"));
}

/// Runs the churn with tenant `k` of worker `w` named `id(w, k)`.
fn churn(id: impl Fn(usize, usize) -> String + Sync) {
    // On a manual clock that never moves: an open breaker stays open.
    let bank = tenant_bank(2, 8);
    let dep = bank.dependency("payments_client").expect("declared");

    let in_table = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (dep, in_table, id) = (&dep, &in_table, &id);
            s.spawn(move || {
                let ids: Vec<String> = (0..TENANTS_PER_WORKER).map(|k| id(w, k)).collect();
                // Per tenant: whether its next call records a failure.
                let mut fail_next = vec![true; ids.len()];
                for round in 0..ROUNDS {
                    if round % 1024 == 0 && start.elapsed() > DEADLINE {
                        break;
                    }
                    let k = (round * 7) % ids.len();
                    let id = &ids[k];
                    let raw = match dep.admit(Some(id), None).expect("tenant") {
                        Decision::Admitted(p) => p.into_raw(),
                        Decision::Rejected(r) => panic!(
                            "C9 violated: tenant {id} refused ({:?}): another tenant's \
                             failure reached its partition",
                            r.reason
                        ),
                    };
                    let outcome = if raw.slot() != 0 && fail_next[k] {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    };
                    if raw.slot() != 0 {
                        fail_next[k] = !fail_next[k];
                        in_table.fetch_add(1, Relaxed);
                    }
                    dep.record_raw(raw, outcome);
                }
            });
        }
    });
    // The calls were really spread over recycled table slots, not the overflow.
    assert!(
        in_table.load(Relaxed) > 100_000,
        "only {} calls went to table slots",
        in_table.load(Relaxed)
    );
}

/// An open or forced-open tenant reset and evicted over and over while
/// tenants that never fail churn through the same slots (C5, C9, C11): no
/// one but the failing tenant may ever be refused.
///
/// `max_tenants: 2`. The failing tenant's thread gives it a partition
/// (a forced open makes one), resets it and fails a call (one failure
/// trips); an operator thread resets it too, so its slot keeps passing
/// between an open or forced tenant, an idle one, newcomers, and back.
/// Any path that takes a word of one tenure for another tenant's refuses a
/// healthy tenant with the failing one's `open` or `forced_open`: a word
/// read before the key when the slot went away and came back
/// (`Partition::keyed`), or an insert whose completion a lookup made
/// first and which then named the word the slot held by the time it
/// looked, a later tenant's (`Table::insert`). The failing tenant's calls
/// served by the shared overflow partition record cancelled, so the
/// overflow never trips and nothing excuses a healthy tenant's refusal.
#[test]
fn c5_c9_stress_a_tenant_that_never_fails_is_never_refused_for_another_tenants_open() {
    // On a manual clock that never moves: an open breaker stays open.
    let bank = tenant_bank(1, 2);
    let dep = bank.dependency("payments_client").expect("declared");
    const BAD: &str = "failing";
    // The failing tenant's calls: in a slot (each one a trip), in the
    // overflow, refused.
    let (trips, overflow, refused) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let healthy = AtomicU64::new(0);
    let start = Instant::now();
    let done = || start.elapsed() > DEADLINE;
    std::thread::scope(|s| {
        // The failing tenant: given a partition (a forced open makes one),
        // reset, then tripped by its failure.
        s.spawn(|| {
            while !done() {
                dep.force_open(Some(BAD));
                dep.reset(Some(BAD));
                let Decision::Admitted(p) = dep.admit(Some(BAD), None).expect("tenant") else {
                    refused.fetch_add(1, Relaxed);
                    continue;
                };
                let raw = p.into_raw();
                let outcome = if raw.slot() == 0 {
                    overflow.fetch_add(1, Relaxed);
                    Outcome::Cancelled
                } else {
                    trips.fetch_add(1, Relaxed);
                    Outcome::Failure
                };
                dep.record_raw(raw, outcome);
            }
        });
        // The operator: resets it while it is open, so the open slot
        // becomes evictable under the readers.
        s.spawn(|| {
            while !done() {
                dep.reset(Some(BAD));
            }
        });
        for w in 0..WORKERS {
            let (dep, healthy, bank) = (&dep, &healthy, &bank);
            s.spawn(move || {
                // Shared by the workers: while one is held up between its
                // reads, another brings its tenant back to the slot.
                let ids: Vec<String> = (0..4).map(|k| format!("healthy-{k}")).collect();
                for round in w.. {
                    if round % 1024 == 0 && done() {
                        break;
                    }
                    let id = &ids[round % ids.len()];
                    match dep.admit(Some(id), None).expect("tenant") {
                        Decision::Admitted(p) => p.record(Outcome::Success),
                        Decision::Rejected(r) => {
                            let parts: Vec<_> = bank.metrics().dependencies[0]
                                .partitions
                                .iter()
                                .map(|p| (p.partition.clone(), p.state, p.opened_total))
                                .collect();
                            panic!(
                                "C5/C9 violated: {id} never failed but was refused ({:?}); \
                                 now served by {:?}; partitions (state, opened) {parts:?}",
                                r.reason,
                                dep.partition_of(Some(id)),
                            )
                        }
                    }
                    healthy.fetch_add(1, Relaxed);
                }
            });
        }
    });
    let counts = || {
        format!(
            "failing tenant: {} trips, {} calls in the overflow, {} refused; \
             {} healthy calls",
            trips.load(Relaxed),
            overflow.load(Relaxed),
            refused.load(Relaxed),
            healthy.load(Relaxed)
        )
    };
    assert!(trips.load(Relaxed) > 1_000, "{}", counts());
    assert!(healthy.load(Relaxed) > 100_000, "{}", counts());
    eprintln!("{}", counts());
}
