//! C19: operator trips and half-opens, on one partition or all of them,
//! announced and counted like their automatic counterparts.

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;
use breakerbank::{AdmitError, Bank, Event, EventKind, ManualClock, Outcome, RejectReason, State};
use common::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The operator events delivered so far: (kind, partition, from, to).
fn operator_events(
    bank: &Bank,
    events: &Mutex<Vec<Event>>,
) -> Vec<(EventKind, String, Option<State>, Option<State>)> {
    assert!(bank.flush_events(Duration::from_secs(5)));
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind != EventKind::Transition)
        .map(|e| (e.kind, e.partition.clone(), e.from, e.to))
        .collect()
}

fn part_metrics(bank: &Bank, partition: &str) -> breakerbank::PartitionMetrics {
    bank.metrics().dependencies[0]
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .unwrap_or_else(|| panic!("{partition} listed"))
        .clone()
}

#[test]
fn c19_trip_opens_as_the_policy_would_and_ends_by_itself() {
    let (bank, clock, dep) = bank(3, 1, 1, "");
    let events = recorder(&bank);
    fail(&dep, None, 2);
    let Ok(breakerbank::Decision::Admitted(before)) = dep.admit(None, None) else {
        panic!("closed admits")
    };
    dep.trip(None);
    let r = rejected(dep.admit(None, None).unwrap());
    assert_eq!(
        (r.reason, r.retry_after),
        (RejectReason::Open, Some(SECS30))
    );
    before.record(Outcome::Failure); // of the closed episode: late (C13)
    let m = part_metrics(&bank, "global");
    assert_eq!((m.opened_total, m.late_records_total), (1, 1));
    assert_eq!(
        operator_events(&bank, &events),
        [(
            EventKind::Trip,
            "global".to_string(),
            Some(State::Closed),
            Some(State::Open)
        )]
    );
    // Unlike force_open it ends by itself: the probe cycle of C7 and C8.
    clock.advance(SECS30);
    let probe = admitted(dep.admit(None, None).unwrap());
    assert!(probe.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    probe.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    // A new closed episode counts from zero.
    fail(&dep, None, 2);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[test]
fn c19_trip_from_half_open_backs_off_and_on_open_restarts_the_period() {
    let (bank, clock, dep) = bank(1, 1, 1, "backoff: {multiplier: 2.0, max: 5m}");
    fail(&dep, None, 1);
    clock.advance(SECS30);
    let probe = admitted(dep.admit(None, None).unwrap());
    dep.trip(None);
    let seen = dep.inspect(None).unwrap();
    assert_eq!((seen.state, seen.retrips), (State::Open, 1), "a re-trip");
    assert_eq!(seen.retry_after, Some(Duration::from_secs(60)));
    probe.record(Outcome::Success); // of the half-open episode: late
    assert_eq!(dep.state(None).unwrap(), State::Open);
    clock.advance(Duration::from_secs(50));
    dep.trip(None);
    let seen = dep.inspect(None).unwrap();
    assert_eq!(seen.retry_after, Some(Duration::from_secs(60)), "restarted");
    assert_eq!(seen.retrips, 1, "the backoff kept");
    assert_eq!(part_metrics(&bank, "global").opened_total, 3);
}

#[test]
fn c19_a_forced_open_breaker_stays_forced_until_reset() {
    let (bank, clock, dep) = bank(3, 1, 1, "");
    let events = recorder(&bank);
    dep.force_open(None);
    dep.trip(None);
    dep.half_open(None);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(dep.state(None).unwrap(), State::ForcedOpen);
    let m = part_metrics(&bank, "global");
    assert_eq!((m.opened_total, m.half_opened_total), (0, 0));
    assert_eq!(
        operator_events(&bank, &events)
            .iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        [EventKind::ForcedOpen],
        "no trip or half-open happened"
    );
    dep.reset(None);
    dep.trip(None);
    assert_eq!(dep.state(None).unwrap(), State::Open);
}

#[test]
fn c19_half_open_ends_the_open_period_now() {
    let (bank, _clock, dep) = bank(1, 2, 2, "backoff: {multiplier: 2.0, max: 5m}");
    let events = recorder(&bank);
    fail(&dep, None, 1);
    dep.half_open(None);
    let seen = dep.inspect(None).unwrap();
    assert_eq!((seen.state, seen.retry_after), (State::HalfOpen, None));
    let (p1, p2) = (
        admitted(dep.admit(None, None).unwrap()),
        admitted(dep.admit(None, None).unwrap()),
    );
    assert!(p1.is_probe() && p2.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    // Already half-open: the cycle under way is kept.
    dep.half_open(None);
    p1.record(Outcome::Success);
    p2.record(Outcome::Success);
    assert_eq!(dep.state(None).unwrap(), State::Closed, "two successes");
    assert_eq!(part_metrics(&bank, "global").half_opened_total, 1);
    assert_eq!(
        operator_events(&bank, &events),
        [(
            EventKind::HalfOpen,
            "global".to_string(),
            Some(State::Open),
            Some(State::HalfOpen)
        )]
    );
}

#[test]
fn c19_half_open_of_a_closed_breaker_probes_before_full_traffic() {
    let (bank, clock, dep) = bank(3, 1, 1, "");
    fail(&dep, None, 2);
    dep.half_open(None);
    let seen = dep.inspect(None).unwrap();
    assert_eq!(
        (seen.state, seen.consecutive_failures, seen.since),
        (State::HalfOpen, 0, bank.now())
    );
    let probe = admitted(dep.admit(None, None).unwrap());
    assert!(probe.is_probe());
    assert_eq!(
        rejected(dep.admit(None, None).unwrap()).reason,
        RejectReason::ProbeBudget
    );
    // The episode it begins is one that can become stuck (C15).
    clock.advance(Duration::from_secs(300));
    assert_eq!(bank.stuck().len(), 1);
    probe.record(Outcome::Failure);
    assert_eq!(
        dep.state(None).unwrap(),
        State::Open,
        "a probe failure reopens"
    );
}

#[test]
fn c19_no_tenant_acts_on_every_partition_there_is() {
    let bank = tenant_bank(3, 10);
    let pay = bank.dependency("payments_client").unwrap();
    let events = recorder(&bank);
    fail(&pay, Some("acme"), 1);
    fail(&pay, Some("globex"), 2);
    pay.trip(None);
    for t in ["acme", "globex"] {
        assert_eq!(pay.state(Some(t)).unwrap(), State::Open, "{t}");
        assert_eq!(part_metrics(&bank, t).opened_total, 1, "{t}");
    }
    assert_eq!(
        pay.state(Some("first-seen-later")).unwrap(),
        State::Closed,
        "no rule for tenants first seen afterwards"
    );
    pay.half_open(Some(""));
    for t in ["acme", "globex"] {
        assert_eq!(pay.state(Some(t)).unwrap(), State::HalfOpen, "{t}");
    }
    let evs = operator_events(&bank, &events);
    let mut named: Vec<_> = evs.iter().map(|e| (e.0.as_str(), e.1.as_str())).collect();
    named.sort_by_key(|&(k, p)| (k != "trip", p));
    assert_eq!(
        named,
        [
            ("trip", "*"),
            ("trip", "acme"),
            ("trip", "globex"),
            ("half_open", "*"),
            ("half_open", "acme"),
            ("half_open", "globex"),
        ]
    );
    assert!(
        !evs.iter().any(|e| e.1 == "<overflow>"),
        "the unused overflow partition is left alone"
    );
}

#[test]
fn c19_one_tenant_only_and_an_unseen_one_gets_its_partition() {
    let bank = tenant_bank(3, 10);
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("globex"), 1);
    pay.trip(Some("acme"));
    assert_eq!(pay.state(Some("acme")).unwrap(), State::Open);
    assert_eq!(pay.state(Some("globex")).unwrap(), State::Closed);
    assert_eq!(pay.inspect(Some("globex")).unwrap().consecutive_failures, 1);
    pay.half_open(Some("newcomer"));
    assert_eq!(pay.state(Some("newcomer")).unwrap(), State::HalfOpen);
    let long = "x".repeat(300);
    assert_eq!(
        pay.try_trip(Some(&long)),
        Err(AdmitError::InvalidTenant {
            problem: breakerbank::TenantProblem::TooLong { len: 300 }
        })
    );
    assert_eq!(
        pay.try_half_open(Some(&long)),
        Err(AdmitError::InvalidTenant {
            problem: breakerbank::TenantProblem::TooLong { len: 300 }
        })
    );
    assert_eq!(bank.metrics().dependencies[0].partitions.len(), 3);
}

#[test]
fn c19_c7_operator_transitions_racing_calls_lose_nothing_and_never_exceed_the_budget() {
    const BUDGET: u32 = 2;
    const TRIPS: u32 = 300;
    // The clock moves about 55 minutes in all: a probe held by a
    // descheduled worker must not time out and give its slot back (C7
    // allows that), or a worker could count three with none over budget.
    let (bank, clock, dep) = bank(2, BUDGET, 2, "probe_timeout: 100h");
    let events = recorder(&bank);
    let stop = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let calls = Arc::new(AtomicU32::new(0));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (dep, stop, held, most, calls) = (
                dep.clone(),
                stop.clone(),
                held.clone(),
                most.clone(),
                calls.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    calls.fetch_add(1, Ordering::Relaxed);
                    if let Ok(breakerbank::Decision::Admitted(p)) = dep.admit(None, None) {
                        if p.is_probe() {
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            held.fetch_sub(1, Ordering::SeqCst);
                        }
                        p.record(if (n + i) % 3 == 0 {
                            Outcome::Failure
                        } else {
                            Outcome::Success
                        });
                    }
                }
            })
        })
        .collect();
    for k in 0..TRIPS {
        // Let the callers in between operator actions.
        let seen = calls.load(Ordering::Relaxed);
        for _ in 0..10_000 {
            if calls.load(Ordering::Relaxed) >= seen + 20 {
                break;
            }
            std::thread::yield_now();
        }
        dep.trip(None);
        if k % 2 == 0 {
            dep.half_open(None);
        }
        clock.advance(Duration::from_secs(if k % 3 == 0 { 31 } else { 1 }));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let trips = operator_events(&bank, &events)
        .iter()
        .filter(|e| e.0 == EventKind::Trip)
        .count();
    assert_eq!(bank.events_dropped(), 0);
    assert_eq!(trips, TRIPS as usize, "every trip made its transition");
    assert!(most.load(Ordering::SeqCst) >= 1, "probes were admitted");
    assert!(
        most.load(Ordering::SeqCst) <= BUDGET,
        "probes in flight {} > budget {BUDGET}",
        most.load(Ordering::SeqCst)
    );
    let m = part_metrics(&bank, "global");
    assert!(m.opened_total >= u64::from(TRIPS));
    assert_eq!(
        dep.inspect(None).unwrap().probes_in_flight,
        0,
        "no slot leaked"
    );
}

#[test]
fn c19_trip_of_a_tenant_with_no_room_leaves_the_overflow_alone() {
    let p = profile(
        "payments_client",
        "tenant",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        "max_tenants: 1",
    );
    let bank = Bank::with_clock(p, ManualClock::new());
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 1); // open: cannot be evicted
    pay.trip(Some("globex"));
    assert_eq!(pay.state(Some("globex")).unwrap(), State::Closed);
    assert!(
        matches!(
            pay.admit(Some("other"), None).unwrap(),
            breakerbank::Decision::Admitted(_)
        ),
        "the overflow partition still serves"
    );
}

/// C11, C16: a reset is recorded as an event also for a tenant with no
/// partition, whose state it changes (forced open one by one while the
/// table had no room for it, then closed), as its force was.
#[test]
fn c11_c16_reset_of_a_tenant_with_no_partition_is_an_event() {
    let p = profile(
        "payments_client",
        "tenant",
        "{consecutive_failures: 1}",
        "{probe_budget: 1, success_threshold: 1}",
        "{kind: error, code: X}",
        "max_tenants: 1",
    );
    let bank = Bank::with_clock(p, ManualClock::new());
    let events = recorder(&bank);
    let pay = bank.dependency("payments_client").unwrap();
    fail(&pay, Some("acme"), 1); // open: cannot be evicted
    pay.force_open(Some("globex"));
    assert_eq!(pay.state(Some("globex")).unwrap(), State::ForcedOpen);
    pay.reset(Some("globex"));
    assert_eq!(pay.state(Some("globex")).unwrap(), State::Closed);
    let seen: Vec<_> = operator_events(&bank, &events)
        .into_iter()
        .map(|(kind, partition, ..)| (kind, partition))
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::ForcedOpen, "globex".to_string()),
            (EventKind::Reset, "globex".to_string()),
        ]
    );
}
