//! Tenant tables under churn and operator actions: C5, C9, C10, C11, C14.
//! Each test is a defect an audit found in a tenant table, named for the
//! clause it broke.

mod common;
use breakerbank::{Bank, Instant, ManualClock, Outcome, State};
use common::*;
use std::time::Duration;

/// Tenant-scoped `payments_client`, failure-rate policy: 50% over `min_calls`.
fn rate_bank(min_calls: u32, max_tenants: u32) -> (Bank, ManualClock) {
    let p = profile(
        "payments_client",
        "tenant",
        &format!("{{failure_rate: 0.5, min_calls: {min_calls}, window: 60s}}"),
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        &format!("max_tenants: {max_tenants}"),
    );
    let clock = ManualClock::new();
    (Bank::with_clock(p, clock.clone()), clock)
}

/// Admissions the dependency routed to its overflow partition.
fn overflowed(bank: &Bank) -> u64 {
    bank.metrics().dependencies[0]
        .partitions
        .iter()
        .map(|p| p.partition_overflow_total)
        .sum()
}

/// Names of the partitions the dependency lists in its metrics.
fn partitions(bank: &Bank) -> Vec<String> {
    let mut v: Vec<String> = bank.metrics().dependencies[0]
        .partitions
        .iter()
        .map(|p| p.partition.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn c10_c9_an_expired_deadline_neither_inserts_nor_evicts() {
    let bank = tenant_bank(3, 1);
    let clock = bank.manual_clock().expect("manual").clone();
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("a"), 2);
    clock.advance(Duration::from_secs(1));
    let now = clock.now();
    for deadline in [now, Instant::from_nanos(0)] {
        let r = rejected(dep.admit(Some("b"), Some(deadline)).unwrap());
        assert_eq!(r.reason, breakerbank::RejectReason::DeadlineExpired);
    }
    assert_eq!(partitions(&bank), ["a"], "b was not inserted");
    fail(&dep, Some("a"), 1);
    assert_eq!(
        dep.state(Some("a")).unwrap(),
        State::Open,
        "a's third consecutive failure trips: its two were kept"
    );
}

#[test]
fn c9_c10_a_new_tenant_is_named_for_the_overflow_only_while_the_table_is_known_full() {
    let bank = tenant_bank(1, 2);
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("a"), 1);
    assert_eq!(dep.breaker_of(Some("z")), "z", "room left");
    fail(&dep, Some("b"), 1);
    assert_eq!(
        dep.breaker_of(Some("z")),
        "z",
        "full of open partitions, but no admission has found it so yet"
    );
    admitted(dep.admit(Some("c"), None).unwrap()).record(Outcome::Success);
    assert_eq!(overflowed(&bank), 1, "c went to the overflow");
    assert_eq!(dep.breaker_of(Some("z")), "<overflow>");
    assert_eq!(dep.breaker_of(Some("a")), "a", "a tenant in the table");
    dep.reset(Some("a"));
    assert_eq!(dep.breaker_of(Some("z")), "z", "a reset made a evictable");
}

#[test]
fn c9_a_failure_rate_tenant_with_calls_in_its_window_is_not_idle() {
    // 40 tables: a failing tenant must never be evicted while an idle one
    // stays (the scan order varies with each table's seed).
    for round in 0..40 {
        let (bank, _clock) = rate_bank(10, 2);
        let dep = bank.dependency("payments_client").unwrap();
        fail(&dep, Some("failing"), 3);
        // Admitted and cancelled: nothing counted, idle.
        admitted(dep.admit(Some("idle"), None).unwrap()).record(Outcome::Cancelled);
        admitted(dep.admit(Some("newcomer"), None).unwrap()).record(Outcome::Cancelled);
        assert_eq!(
            partitions(&bank),
            ["failing", "newcomer"],
            "round {round}: the idle tenant goes first"
        );
    }
}

#[test]
fn c9_the_least_recently_used_closed_tenant_goes_first() {
    // Both tenants closed with a call in their windows (not idle); a was
    // used before b and not since.
    let (bank, _clock) = rate_bank(10, 2);
    let dep = bank.dependency("payments_client").unwrap();
    for t in ["a", "b"] {
        admitted(dep.admit(Some(t), None).unwrap()).record(Outcome::Success);
    }
    admitted(dep.admit(Some("c"), None).unwrap()).record(Outcome::Success);
    assert_eq!(partitions(&bank), ["b", "c"]);
}

#[test]
fn c9_a_full_table_of_closed_partitions_evicts_rather_than_overflowing() {
    for round in 0..50 {
        let bank = tenant_bank(5, 3);
        let dep = bank.dependency("payments_client").unwrap();
        for t in ["a", "b", "c"] {
            fail(&dep, Some(t), 1); // closed with a count: evictable, not idle
        }
        for i in 0..20 {
            let t = format!("n{i}");
            admitted(dep.admit(Some(&t), None).unwrap()).record(Outcome::Failure);
            assert_eq!(dep.partition_of(Some(&t)), t, "round {round}, {t}");
        }
        assert_eq!(overflowed(&bank), 0, "round {round}");
    }
}

#[test]
fn c9_racing_inserters_into_a_full_table_of_closed_partitions_never_overflow() {
    // Two threads insert new tenants into a full table of closed
    // partitions with counts (all evictable): when both pick the same
    // least recently used victim, the loser must choose again, not send
    // its tenant to the overflow.
    for round in 0..20 {
        let bank = tenant_bank(1000, 4);
        let dep = bank.dependency("payments_client").unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let dep = &dep;
                s.spawn(move || {
                    for i in 0..2000 {
                        let id = format!("t{t}-{i}");
                        admitted(dep.admit(Some(&id), None).unwrap()).record(Outcome::Failure);
                    }
                });
            }
        });
        assert_eq!(overflowed(&bank), 0, "round {round}");
    }
}

#[test]
fn c11_force_open_and_reset_of_all_never_miss_a_tenant_inserted_meanwhile() {
    // One thread inserts new tenants while the other forces every
    // partition open (then resets all): when the operator call returns,
    // every tenant inserted before it, or during it, is forced open
    // (then closed).
    for round in 0..300 {
        let bank = tenant_bank(3, 64);
        let dep = bank.dependency("payments_client").unwrap();
        let gate = std::sync::Barrier::new(2);
        let inserted = std::thread::scope(|s| {
            let ins = s.spawn(|| {
                gate.wait();
                (0..8)
                    .map(|i| {
                        let id = format!("r{round}-{i}");
                        if let breakerbank::Decision::Admitted(p) =
                            dep.admit(Some(&id), None).unwrap()
                        {
                            p.record(Outcome::Cancelled);
                        }
                        id
                    })
                    .collect::<Vec<_>>()
            });
            gate.wait();
            dep.force_open(None);
            ins.join().unwrap()
        });
        for id in &inserted {
            assert_eq!(
                dep.state(Some(id)).unwrap(),
                State::ForcedOpen,
                "round {round}: {id}"
            );
        }
        let gate = std::sync::Barrier::new(2);
        let inserted = std::thread::scope(|s| {
            let ins = s.spawn(|| {
                gate.wait();
                (8..16)
                    .map(|i| {
                        let id = format!("r{round}-{i}");
                        let _ = dep.admit(Some(&id), None).unwrap();
                        id
                    })
                    .collect::<Vec<_>>()
            });
            gate.wait();
            dep.reset(None);
            ins.join().unwrap()
        });
        for id in inserted.iter() {
            assert_eq!(
                dep.state(Some(id)).unwrap(),
                State::Closed,
                "round {round}: {id}"
            );
        }
    }
}

#[test]
fn c11_c9_forcing_a_tenant_served_by_the_overflow_isolates_that_tenant_alone() {
    let bank = tenant_bank(1, 1);
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("a"), 1); // open: the only partition, not evictable
    assert_eq!(dep.partition_of(Some("b")), "<overflow>");
    dep.force_open(Some("b"));
    assert_eq!(dep.state(Some("b")).unwrap(), State::ForcedOpen);
    let r = rejected(dep.admit(Some("b"), None).unwrap());
    assert_eq!(r.reason, breakerbank::RejectReason::ForcedOpen);
    // Another tenant of the overflow is not isolated with it.
    admitted(dep.admit(Some("c"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.state(Some("c")).unwrap(), State::Closed);
    // b gets a partition of its own once there is room: still forced.
    dep.reset(Some("a"));
    let r = rejected(dep.admit(Some("b"), None).unwrap());
    assert_eq!(r.reason, breakerbank::RejectReason::ForcedOpen);
    assert_eq!(dep.partition_of(Some("b")), "b");
    // Until its reset.
    dep.reset(Some("b"));
    assert_eq!(dep.state(Some("b")).unwrap(), State::Closed);
    admitted(dep.admit(Some("b"), None).unwrap()).record(Outcome::Success);
    // A reset while it is served by the overflow ends it too.
    let bank = tenant_bank(1, 1);
    let dep = bank.dependency("payments_client").unwrap();
    fail(&dep, Some("a"), 1);
    dep.force_open(Some("b"));
    dep.reset(Some("b"));
    assert_eq!(dep.state(Some("b")).unwrap(), State::Closed);
    admitted(dep.admit(Some("b"), None).unwrap()).record(Outcome::Success);
}

#[test]
fn c11_forcing_a_tenant_open_holds_while_its_slot_changes_owner() {
    for round in 0..300 {
        let bank = tenant_bank(3, 1);
        let dep = bank.dependency("payments_client").unwrap();
        admitted(dep.admit(Some("a"), None).unwrap()).record(Outcome::Success);
        let gate = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                gate.wait();
                for i in 0..4 {
                    let id = format!("n{i}");
                    if let breakerbank::Decision::Admitted(p) = dep.admit(Some(&id), None).unwrap()
                    {
                        p.record(Outcome::Success);
                    }
                }
            });
            gate.wait();
            dep.force_open(Some("a"));
        });
        assert_eq!(
            dep.state(Some("a")).unwrap(),
            State::ForcedOpen,
            "round {round}"
        );
    }
}

#[test]
fn c9_c13_a_late_failure_of_an_evicted_tenant_never_trips_the_next_owner() {
    // Failure-rate policy, one partition: tenant a's failure, recorded
    // while new tenant c takes a's slot, must not count in c's window.
    for round in 0..400 {
        let (bank, _clock) = rate_bank(3, 1);
        let dep = bank.dependency("payments_client").unwrap();
        let held = admitted(dep.admit(Some("a"), None).unwrap());
        let gate = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                gate.wait();
                held.record(Outcome::Failure);
            });
            gate.wait();
            admitted(dep.admit(Some("c"), None).unwrap()).record(Outcome::Success);
        });
        // c's own calls: two successes and a failure, 1 of 3 (with a's
        // failure in c's window it would be 2 of 4, and trip).
        for o in [Outcome::Success, Outcome::Failure] {
            if let breakerbank::Decision::Admitted(p) = dep.admit(Some("c"), None).unwrap() {
                p.record(o);
            }
        }
        assert_ne!(dep.state(Some("c")).unwrap(), State::Open, "round {round}");
    }
}

#[test]
fn c9_one_tenant_inserted_by_three_threads_gets_one_partition() {
    // Three threads admit the same new tenant at once and each records a
    // failure; three failures trip it, so all must land in the one
    // partition the tenant keeps (a permit of a losing inserter's slot,
    // found by a lookup before that inserter lost, would be a late
    // record, and the tenant would stay closed).
    let mut split = 0;
    for _ in 0..10_000 {
        let bank = tenant_bank(3, 8);
        let dep = bank.dependency("payments_client").unwrap();
        let gate = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    gate.wait();
                    let p = admitted(dep.admit(Some("acme"), None).unwrap());
                    gate.wait();
                    p.record(Outcome::Failure);
                });
            }
        });
        if dep.state(Some("acme")).unwrap() != State::Open {
            split += 1;
        }
    }
    assert_eq!(
        split, 0,
        "rounds where the two calls went to different partitions"
    );
}

#[test]
fn c9_a_newcomer_finds_the_one_evictable_partition_however_large_the_table() {
    // 20,000 tenants, all open but one (closed, with a count): a newcomer
    // must evict that one, wherever it sits, not go to the overflow.
    let n = 20_000;
    let bank = tenant_bank(2, n);
    let dep = bank.dependency("payments_client").unwrap();
    for i in 0..n {
        let id = format!("t{i}");
        fail(&dep, Some(&id), if i == n / 3 { 1 } else { 2 });
    }
    let spared = format!("t{}", n / 3);
    assert_eq!(dep.state(Some(&spared)).unwrap(), State::Closed);
    admitted(dep.admit(Some("newcomer"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("newcomer")), "newcomer");
    assert_eq!(dep.partition_of(Some(&spared)), "<overflow>", "evicted");
    // Now every partition is open: newcomers share the overflow.
    fail(&dep, Some("newcomer"), 2);
    let r = dep.admit(Some("late-comer"), None).unwrap();
    admitted(r).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("late-comer")), "<overflow>");
}

#[test]
fn c11_reset_of_an_unseen_tenant_after_force_open_of_all_closes_it() {
    let bank = tenant_bank(3, 8);
    let dep = bank.dependency("payments_client").unwrap();
    dep.force_open(None);
    assert_eq!(dep.state(Some("hooli")).unwrap(), State::ForcedOpen);
    dep.reset(Some("hooli"));
    assert_eq!(dep.state(Some("hooli")).unwrap(), State::Closed);
    admitted(dep.admit(Some("hooli"), None).unwrap()).record(Outcome::Success);
    assert_eq!(
        dep.state(Some("other")).unwrap(),
        State::ForcedOpen,
        "others stay isolated"
    );
}

#[test]
fn c11_c9_a_tenant_reset_after_force_open_of_all_stays_closed_across_an_eviction() {
    // One slot. After force_open(None), resetting `hooli` alone closes it;
    // evicting its idle partition must lose nothing (C9), so when it
    // comes back it is still the tenant the operator reset, not one
    // "first seen afterwards".
    let bank = tenant_bank(3, 1);
    let dep = bank.dependency("payments_client").unwrap();
    dep.force_open(None);
    dep.reset(Some("hooli"));
    admitted(dep.admit(Some("hooli"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("hooli")), "hooli");
    // `initech`, reset too, takes the one slot from idle `hooli`.
    dep.reset(Some("initech"));
    admitted(dep.admit(Some("initech"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("initech")), "initech");
    assert_eq!(dep.partition_of(Some("hooli")), "<overflow>", "evicted");
    assert_eq!(dep.state(Some("hooli")).unwrap(), State::Closed);
    // Back again (evicting idle `initech`): still closed, still admitted.
    admitted(dep.admit(Some("hooli"), None).unwrap()).record(Outcome::Success);
    assert_eq!(dep.partition_of(Some("hooli")), "hooli");
    assert_eq!(dep.state(Some("hooli")).unwrap(), State::Closed);
    assert_eq!(
        dep.state(Some("other")).unwrap(),
        State::ForcedOpen,
        "tenants never reset stay isolated"
    );
}

/// The overflow partition's metrics, if it is listed.
fn overflow_metrics(bank: &Bank) -> Option<breakerbank::PartitionMetrics> {
    bank.metrics().dependencies[0]
        .partitions
        .iter()
        .find(|p| p.partition == "<overflow>")
        .cloned()
}

#[test]
fn c13_c9_a_late_record_of_an_evicted_tenant_counts_with_the_dependency_never_the_new_owner() {
    // Two tenants' room, one of them forced open: the newcomer evicts a,
    // and takes a's very slot whenever its homes are the forced tenant's
    // line (about one round in eight, by the table's random hash keys).
    for trip in [
        "{consecutive_failures: 3}",
        "{failure_rate: 0.5, min_calls: 3, window: 60s}",
    ] {
        for outcome in [Outcome::Failure, Outcome::Success, Outcome::Cancelled] {
            for round in 0..96 {
                let p = profile(
                    "payments_client",
                    "tenant",
                    trip,
                    "{probe_budget: 1, success_threshold: 1}",
                    "{kind: error, code: X}",
                    "max_tenants: 2",
                );
                let bank = Bank::with_clock(p, ManualClock::new());
                let dep = bank.dependency("payments_client").unwrap();
                let f = format!("f{round}");
                admitted(dep.admit(Some(&f), None).unwrap()).record(Outcome::Success);
                dep.force_open(Some(&f));
                let held = admitted(dep.admit(Some("a"), None).unwrap());
                let c = format!("c{round}");
                admitted(dep.admit(Some(&c), None).unwrap()).record(Outcome::Success);
                let mut want = vec![c.clone(), f.clone()];
                want.sort();
                assert_eq!(partitions(&bank), want, "{trip}: a was evicted");
                held.record(outcome);
                let m = bank.metrics().dependencies[0].partitions.clone();
                let mc = m.iter().find(|p| p.partition == c).expect("c listed");
                assert_eq!(
                    (mc.late_records_total, mc.failures_total, mc.cancelled_total),
                    (0, 0, 0),
                    "{trip}, {outcome:?}, round {round}: a's late record reached {c}: {mc:?}"
                );
                let o = overflow_metrics(&bank).expect("the overflow lists the late record");
                assert_eq!(o.late_records_total, 1, "{trip}, {outcome:?}: {o:?}");
            }
        }
    }
}
