//! C9: the tenant table under concurrency.

use crate::support::{explore_bounded, profile, Scope, World};
use breakerbank::{Decision, Outcome, RawPermit, RejectReason, State};
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

// Ids longer than a partition keeps (15 bytes): the models below check the
// shard path, with or without a racing eviction; ids of up to 15 bytes try
// their homes and the index first, modelled by
// `c9_index_hint_racing_recycle_never_admits_the_wrong_tenant`. (With
// short ids these models grow past millions of executions; long ids keep
// to the shard path under loom, see `Table::homes_first`.)
const A: &str = "tenant-a/by-shard-path";
const B: &str = "tenant-b/by-shard-path";
const C: &str = "tenant-c/by-shard-path";
const ACME: &str = "acme/by-the-shard-path";
const WARM: &str = "warm/by-the-shard-path";

/// Two threads admit the same new tenant at once (`max_tenants: 3`, so
/// both may allocate a slot and race to publish it) and keep their
/// permits as plain data. Both permits must name the same slot and
/// generation. Setup admits another tenant first, so the table is in use
/// before the threads start. Both inserters try the same home slots first
/// (by compare-and-swap on their words), so they may also race for a
/// slot, not only to publish. After the
/// join, one permit's failure trips the breaker (consecutive_failures 1)
/// that the tenant maps to: the other permit is then late, the tenant
/// reads open and is refused, and only one partition bears its name.
#[test]
fn c9_same_tenant_inserted_twice_shares_one_partition() {
    let profile = profile(Scope::Tenant { max_tenants: 3 }, 1, 1, 1);
    // Capped at bound 1 to keep `make loom` within its time budget (bound
    // 2 passes too: `make loom-uncapped`).
    explore_bounded(
        "c9_same_tenant_inserted_twice_shares_one_partition",
        1,
        move || {
            let w = World::new(&profile);
            match w.dep.admit(Some(WARM), None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Success),
                Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
            }
            let inserters: Vec<_> = (0..2)
                .map(|_| {
                    let dep = w.dep.clone();
                    thread::spawn(move || match dep.admit(Some(ACME), None).unwrap() {
                        Decision::Admitted(p) => p.into_raw(),
                        Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
                    })
                })
                .collect();
            let mut permits = inserters.into_iter().map(|t| t.join().unwrap());
            let (first, second) = (permits.next().unwrap(), permits.next().unwrap());
            assert_eq!(
                (first.slot(), first.generation()),
                (second.slot(), second.generation()),
                "C9 violated: one tenant admitted into two partitions"
            );
            w.dep.record_raw(first, Outcome::Failure);
            w.dep.record_raw(second, Outcome::Success);
            assert_eq!(w.dep.state(Some(ACME)).unwrap(), State::Open);
            match w.dep.admit(Some(ACME), None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
                Decision::Admitted(_) => {
                    panic!("C9 violated: tenant admitted into a second partition")
                }
            }
            let named = w.bank.metrics().dependencies[0]
                .partitions
                .iter()
                .filter(|p| p.partition == ACME)
                .count();
            assert_eq!(named, 1, "one partition per tenant");
            assert_eq!(w.partition(ACME).unwrap().late_records_total, 1);
        },
    );
}

/// `max_tenants: 1`, consecutive_failures 2. Tenant `a` holds the only
/// slot, closed with one failure counted (evictable, least recently
/// used), and a call of `a` is in flight (admitted in setup). Then,
/// concurrently: new tenant `b` arrives (it must evict `a` or go to the
/// overflow partition) while `a`'s call records its second failure,
/// which trips `a`. Eviction CASes from the word it saw, so once `a` is
/// open it stays open and mapped: if `a`'s thread saw it open, the main
/// thread must too, and an admission for `a` must be refused as open.
///
/// One inserter only (`a`'s thread records with a permit from setup).
/// Two inserters are [`c9_eviction_racing_admission_never_evicts_open`].
///
/// Capped at bound 1 in `make loom`: at bound 2 it is a quarter of the
/// suite's time, and the two-inserter model checks the same trip racing
/// an eviction at bound 1; `make loom-uncapped` runs it at bound 2.
#[test]
fn c9_eviction_racing_trip_never_evicts_open() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 2, 1, 1);
    explore_bounded("c9_eviction_racing_trip_never_evicts_open", 1, move || {
        let w = World::new(&profile);
        match w.dep.admit(Some(A), None).unwrap() {
            Decision::Admitted(p) => p.record(Outcome::Failure),
            Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
        }
        let in_flight = match w.dep.admit(Some(A), None).unwrap() {
            Decision::Admitted(p) => p.into_raw(),
            Decision::Rejected(r) => panic!("closed tenant refused: {:?}", r.reason),
        };
        let saw_open = Arc::new(AtomicBool::new(false));

        let dep = w.dep.clone();
        let newcomer = thread::spawn(move || {
            if let Decision::Admitted(p) = dep.admit(Some(B), None).unwrap() {
                drop(p);
            }
        });
        let dep = w.dep.clone();
        let seen = saw_open.clone();
        let failer = thread::spawn(move || {
            dep.record_raw(in_flight, Outcome::Failure);
            if dep.state(Some(A)).unwrap() == State::Open {
                seen.store(true, SeqCst);
            }
        });
        newcomer.join().unwrap();
        failer.join().unwrap();
        if saw_open.load(SeqCst) {
            assert_eq!(
                w.dep.state(Some(A)).unwrap(),
                State::Open,
                "C9 violated: an open partition was evicted"
            );
            match w.dep.admit(Some(A), None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
                Decision::Admitted(_) => panic!("C9 violated: evicted open tenant admitted"),
            }
        }
    });
}

/// The raw permit of an admission that must admit: a closed tenant, or
/// the overflow partition a tenant is routed to, never refuses.
fn admitted(d: Decision<'_>, tenant: &str) -> RawPermit {
    match d {
        Decision::Admitted(p) => p.into_raw(),
        Decision::Rejected(r) => panic!("closed tenant {tenant} refused: {:?}", r.reason),
    }
}

/// The two-inserter form of [`c9_eviction_racing_trip_never_evicts_open`]:
/// both threads admit, so both may insert and evict each other.
///
/// `max_tenants: 1`, consecutive_failures 2. Setup: tenant `a` holds the
/// only slot, closed with one failure counted (evictable, least recently
/// used). Then, concurrently: new tenant `b` admits (it must evict `a` or
/// go to the overflow partition; its success is recorded after the join,
/// which keeps the model small), while tenant `a` admits and records its
/// second failure, which trips `a` if both landed in the partition of
/// setup. Checked:
///
/// * every admission finishes: loom fails the model on a retry loop
///   without end (its branch limit), in the threads and in admissions
///   made alone after the join; and every admission of a closed tenant
///   admits (served by the overflow partition after lost races is
///   allowed, as C9 allows it when the table is full);
/// * an open partition is never evicted: if `a`'s thread saw `a` open, it
///   is still open after the join; if `a` is open, `b` was served by the
///   overflow partition (had the only slot been handed over, `a`'s count
///   would have restarted and one failure could not trip it), later
///   newcomers go there too, `a` is refused as open and stays open;
/// * isolation across recycling: `a`'s failure, recorded after `b` took
///   the slot, never changes `b`'s state (the new owner's counters are
///   checked by the late failure-rate models below);
/// * every admission routed to the overflow partition is counted there,
///   and the table never holds more than `max_tenants` tenants.
///
/// Capped at bound 1: at bound 2 it runs to millions of executions.
///
/// Fails if eviction may act on a stale shard snapshot: a tenant's entry
/// then names a slot it does not own, and a later admission of that
/// tenant, even alone, spins forever in `Table::get_or_insert` (loom
/// reports its branch limit).
#[test]
fn c9_eviction_racing_admission_never_evicts_open() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 2, 1, 1);
    explore_bounded(
        "c9_eviction_racing_admission_never_evicts_open",
        1,
        move || {
            let w = World::new(&profile);
            match w.dep.admit(Some(A), None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Failure),
                Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
            }

            let dep = w.dep.clone();
            let newcomer = thread::spawn(move || admitted(dep.admit(Some(B), None).unwrap(), B));
            let dep = w.dep.clone();
            let tenant_a = thread::spawn(move || {
                let p = admitted(dep.admit(Some(A), None).unwrap(), A);
                let slot = p.slot();
                dep.record_raw(p, Outcome::Failure);
                (slot, dep.state(Some(A)).unwrap() == State::Open)
            });
            let b_permit = newcomer.join().unwrap();
            let (a_slot, saw_open) = tenant_a.join().unwrap();
            let b_slot = b_permit.slot();
            w.dep.record_raw(b_permit, Outcome::Success);

            let open = w.dep.state(Some(A)).unwrap() == State::Open;
            if saw_open {
                assert!(open, "C9 violated: an open partition was evicted");
            }
            let snapshot = w.bank.metrics();
            let parts = &snapshot.dependencies[0].partitions;
            let tenants: Vec<_> = parts
                .iter()
                .filter(|p| p.partition != "<overflow>")
                .collect();
            assert!(
                tenants.len() <= 1,
                "C9: more tenants than max_tenants: {tenants:?}"
            );
            if let Some(b) = tenants.iter().find(|p| p.partition == B) {
                assert_eq!(
                    b.state,
                    State::Closed,
                    "C9 violated: b tripped by a's failure"
                );
            }
            let routed = u64::from(a_slot == 0) + u64::from(b_slot == 0);
            let counted = parts
                .iter()
                .find(|p| p.partition == "<overflow>")
                .map_or(0, |o| o.partition_overflow_total);
            assert_eq!(
                counted, routed,
                "C9: admissions routed to <overflow> not counted"
            );
            if open {
                assert_ne!(a_slot, 0, "a tripped by a failure recorded in the overflow");
                assert_eq!(
                    b_slot, 0,
                    "C9 violated: b admitted into the only slot, yet a kept its count and tripped"
                );
            }

            // Alone now: each admission must finish, and behave as the
            // state says (an open `a` is refused and keeps its slot).
            for t in [A, B, C, A] {
                match w.dep.admit(Some(t), None).unwrap() {
                    Decision::Admitted(p) => {
                        assert!(
                            !(open && t == A),
                            "C9 violated: open tenant a admitted (evicted?)"
                        );
                        let p = p.into_raw();
                        if open {
                            assert_eq!(p.slot(), 0, "C9 violated: an open partition was evicted");
                        }
                        w.dep.record_raw(p, Outcome::Success);
                    }
                    Decision::Rejected(r) => {
                        assert!(open && t == A, "closed tenant {t} refused: {:?}", r.reason);
                        assert_eq!(r.reason, RejectReason::Open);
                    }
                }
            }
            if open {
                assert_eq!(w.dep.state(Some(A)).unwrap(), State::Open);
            }
        },
    );
}

/// The fast lookup (ids of up to 15 bytes: the tenant's home slots, then
/// the index) racing a recycle of the slot it finds. `max_tenants: 1`,
/// consecutive_failures 1. Setup: tenant `a` holds one of the two slots
/// (one home line: both are every tenant's homes), closed and idle. Then,
/// concurrently: new tenant `b` admits (it evicts `a` and takes the free
/// slot beside it, as a newcomer takes a free home before the victim's
/// slot, or is served by the overflow partition) while `a` admits through
/// its homes, now possibly stale, and may take its old slot again. A slot
/// counts only once it confirms the id and the generation, so `a` must
/// never be admitted into `b`'s partition: its permit never carries the
/// slot and generation of `b`'s, and its failure, recorded after the
/// join, never trips `b`. (A tenant found through the index is confirmed
/// by the same code, `Table::confirm`.)
///
/// Bound 1, and too long for `make test`'s time budget: `make loom-index`
/// (and `make loom-deep`) run it; `core/tests/tenant_stress.rs` races the
/// same thing on real threads in every `make test`.
///
/// Not covered here: a lookup racing its own tenant's eviction *and*
/// re-insertion into the same slot, which the generation re-check in
/// `Table::confirm` guards (removing that check does not fail this
/// model; without it such a race could decide one admission on the
/// previous owner's word: a permit that records as late, or a refusal).
#[test]
#[ignore = "about a minute: make loom-index"]
fn c9_index_hint_racing_recycle_never_admits_the_wrong_tenant() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 1, 1, 1);
    explore_bounded(
        "c9_index_hint_racing_recycle_never_admits_the_wrong_tenant",
        1,
        move || {
            let w = World::new(&profile);
            match w.dep.admit(Some("a"), None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Success),
                Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
            }
            let dep = w.dep.clone();
            let newcomer =
                thread::spawn(move || admitted(dep.admit(Some("b"), None).unwrap(), "b"));
            let dep = w.dep.clone();
            let tenant_a =
                thread::spawn(move || admitted(dep.admit(Some("a"), None).unwrap(), "a"));
            let b = newcomer.join().unwrap();
            let a = tenant_a.join().unwrap();
            assert!(
                b.slot() == 0 || (a.slot(), a.generation()) != (b.slot(), b.generation()),
                "C9 violated: a admitted into b's partition"
            );
            w.dep.record_raw(a, Outcome::Failure);
            if b.slot() != 0 && w.dep.state(Some("b")).unwrap() == State::Open {
                panic!("C9 violated: b tripped by a's failure");
            }
            w.dep.record_raw(b, Outcome::Success);
        },
    );
}

/// A tenant-scoped failure-rate profile: rate 0.5 over at least
/// `min_calls` calls in 10 s, `max_tenants: 2`, open for 1 s.
fn rate_tenant_profile(min_calls: u32) -> breakerbank::Profile {
    let yaml = format!(
        "dependencies:
  {}:
    isolation: tenant
    max_tenants: 2
    trip: {{failure_rate: 0.5, min_calls: {min_calls}, window: 10s}}
    open_duration: 1s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
",
        crate::support::DEP
    );
    breakerbank::Profile::from_yaml(&yaml).expect("model profile is valid")
}

/// Ids placed for [`late_rate_failure_racing_a_recycle`]
/// (found by trying ids under loom's fixed-seed hasher): with `FORCED`
/// in one slot of a home line and `A` in the other, `RECYCLER`'s homes
/// are that line only, so once `A` is evicted it takes `A`'s slot.
const FORCED: &str = "tenant-x0/by-shard-path";
const RECYCLER: &str = "tenant-c5/by-shard-path";

/// A late record racing the recycle of its slot, under the failure-rate
/// policy (C9, C13). `max_tenants: 2`, rate 0.5 over at least 1 call.
/// Setup: a tenant forced open (never evicted) holds one slot of a home
/// line and tenant `a` the other, closed, with one call admitted and not
/// yet recorded (`p`): `a`'s word has no count and its window no call,
/// so `a` is idle and may be evicted. Concurrently: `p` records a
/// failure (which trips `a` if it lands first: 1 of 1) while new tenant
/// `c`, whose only homes are that line, admits, evicting `a` and taking
/// its slot unless `a` is already open (then `c` is served by the
/// overflow partition), and records a success. After the join, if `c`
/// holds a slot (it must be `a`'s: the ids are placed so, and the model
/// says so if the table's placement changes):
///
/// * `c` is closed, its `failures_total` is 0 and its
///   `late_records_total` 0: `a`'s failure never reaches the new owner's
///   word, counters or metrics (C9), and counts at most as one late
///   record of the dependency (C13);
/// * `c`'s window holds `c`'s calls only (C9): after one more success
///   and one failure of `c` (1 of 3, under 0.5) it is still closed; had
///   `a`'s failure reached the window, that failure would make 2 of 4
///   and trip `c`.
///
/// If `c` was served by the overflow partition, `a` kept its slot and
/// its failure tripped it: `a` is open.
///
/// What keeps `a` out of `c`'s counts: a count names the generation it
/// is for, and goes only to the counters of that generation's owner
/// (`Dependency::counters`, `Table::tenure`); a late record of an owner
/// gone since is the dependency's. What keeps it out of `c`'s window: a
/// window per closed episode (`SidePart::episodes`).
#[test]
fn c9_late_rate_failure_racing_a_recycle_never_reaches_the_new_owner() {
    late_rate_failure_racing_a_recycle(
        "c9_late_rate_failure_racing_a_recycle_never_reaches_the_new_owner",
        1,
    );
}

/// [`c9_late_rate_failure_racing_a_recycle_never_reaches_the_new_owner`]
/// with `min_calls: 2`: `a`'s failure never trips `a` (one call), so `a`
/// stays closed, with a call in its window once the failure is counted
/// there, and is evicted either way (idle, or the least recently used
/// closed partition); `c` always takes `a`'s slot. The same checks.
///
/// A failure judged on `a`'s word and applied to it with no change of
/// the word still bumps a failure counter: `a`'s, never `c`'s.
#[test]
fn c9_late_rate_failure_below_min_calls_racing_a_recycle_never_reaches_the_new_owner() {
    late_rate_failure_racing_a_recycle(
        "c9_late_rate_failure_below_min_calls_racing_a_recycle_never_reaches_the_new_owner",
        2,
    );
}

/// The model of the two tests above, at bound 1 at most.
fn late_rate_failure_racing_a_recycle(name: &str, min_calls: u32) {
    let profile = rate_tenant_profile(min_calls);
    explore_bounded(name, 1, move || {
        let w = World::new(&profile);
        w.dep.force_open(Some(FORCED));
        let p = admitted(w.dep.admit(Some(A), None).unwrap(), A);
        let (p_slot, p_generation) = (p.slot(), p.generation());

        let dep = w.dep.clone();
        let late = thread::spawn(move || {
            dep.record_raw(p, Outcome::Failure);
        });
        let dep = w.dep.clone();
        let newcomer = thread::spawn(move || {
            let c = admitted(dep.admit(Some(RECYCLER), None).unwrap(), RECYCLER);
            let seen = (c.slot(), c.generation());
            dep.record_raw(c, Outcome::Success);
            seen
        });
        late.join().unwrap();
        let (c_slot, c_generation) = newcomer.join().unwrap();
        assert!(
            c_slot == 0 || c_slot == p_slot,
            "model setup: c took slot {}, not a's ({}): the table places tenants \
                 differently now; choose FORCED and RECYCLER again",
            c_slot,
            p_slot
        );

        let snapshot = w.bank.metrics();
        let parts = &snapshot.dependencies[0].partitions;
        let late_total: u64 = parts.iter().map(|m| m.late_records_total).sum();
        let mut violations = Vec::new();
        if late_total > 1 {
            violations.push(format!("C13: {late_total} late records for one permit"));
        }
        if c_slot == 0 {
            if w.dep.state(Some(A)).unwrap() != State::Open {
                violations.push("C9: c sent to the overflow, yet a not open".to_string());
            }
        } else {
            match parts.iter().find(|m| m.partition == RECYCLER) {
                None => violations.push(format!("C9: c admitted in slot {}, not listed", c_slot)),
                Some(m) => {
                    if m.state != State::Closed {
                        violations.push(format!("C9: c reads {:?} after a's failure", m.state));
                    }
                    if m.failures_total != 0 {
                        violations.push(format!(
                            "C9: a's failure in c's failures_total ({})",
                            m.failures_total
                        ));
                    }
                    if m.late_records_total != 0 {
                        violations.push(format!(
                            "C9: a's late record in c's late_records_total ({})",
                            m.late_records_total
                        ));
                    }
                }
            }
            if w.dep.state(Some(RECYCLER)).unwrap() == State::Closed {
                let c2 = admitted(w.dep.admit(Some(RECYCLER), None).unwrap(), RECYCLER);
                w.dep.record_raw(c2, Outcome::Success);
                let c3 = admitted(w.dep.admit(Some(RECYCLER), None).unwrap(), RECYCLER);
                w.dep.record_raw(c3, Outcome::Failure);
                let s = w.dep.state(Some(RECYCLER)).unwrap();
                if s != State::Closed {
                    violations.push(format!(
                        "C9: c {s:?} on 1 failure in 3 calls: a's failure is in c's window"
                    ));
                }
            }
        }
        assert!(
            violations.is_empty(),
            "violated: {}; a's permit slot {} generation {}, c's slot {} generation {}",
            violations.join("; "),
            p_slot,
            p_generation,
            c_slot,
            c_generation
        );
    });
}

/// A closed partition kept by a probe of an earlier episode past
/// `probe_timeout` is evicted with its slot, racing that probe's record
/// (C7, C9, C13). `max_tenants: 2`, consecutive_failures 1, probe budget
/// 2, `probe_timeout` 10 s. Setup: a tenant forced open holds one slot of
/// a home line and tenant `a` the other; `a` trips, goes half-open, admits
/// two probes, one succeeds (closed) and the other is kept unrecorded
/// past `probe_timeout`. Concurrently: that probe records a success while
/// new tenant `c`, whose only homes are that line, admits (evicting `a`
/// either way: with its timed-out probe, or idle once the record landed)
/// and records a success. After the join `c` holds `a`'s old slot, and,
/// brought half-open, admits exactly its two probes: the slot came to it
/// with no probe in flight, and the late record took none of its slots.
#[test]
fn c7_c9_eviction_of_a_timed_out_probe_racing_its_record_keeps_the_next_owners_budget() {
    let yaml = format!(
        "dependencies:
  {}:
    isolation: tenant
    max_tenants: 2
    trip: {{consecutive_failures: 1}}
    open_duration: {}ms
    half_open: {{probe_budget: 2, success_threshold: 1}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
    probe_timeout: {}s
",
        crate::support::DEP,
        crate::support::OPEN.as_millis(),
        crate::support::PROBE_TIMEOUT.as_secs()
    );
    let profile = breakerbank::Profile::from_yaml(&yaml).expect("model profile is valid");
    explore_bounded(
        "c7_c9_eviction_of_a_timed_out_probe_racing_its_record_keeps_the_next_owners_budget",
        1,
        move || {
            let w = World::new(&profile);
            w.dep.force_open(Some(FORCED));
            w.open_period_over(Some(A));
            let closing = w.probe(Some(A));
            let lost = w.probe(Some(A));
            let a_slot = lost.slot();
            w.dep.record_raw(closing, Outcome::Success);
            assert_eq!(w.dep.state(Some(A)).unwrap(), State::Closed);
            w.clock.advance(crate::support::PROBE_TIMEOUT);

            let dep = w.dep.clone();
            let late = thread::spawn(move || {
                dep.record_raw(lost, Outcome::Success);
            });
            let dep = w.dep.clone();
            let newcomer = thread::spawn(move || {
                let c = admitted(dep.admit(Some(RECYCLER), None).unwrap(), RECYCLER);
                let slot = c.slot();
                dep.record_raw(c, Outcome::Success);
                slot
            });
            late.join().unwrap();
            let c_slot = newcomer.join().unwrap();
            assert_eq!(
                c_slot, a_slot,
                "C9: the newcomer did not take a's slot (0: the overflow)"
            );
            w.assert_no_slot_leak(Some(RECYCLER), 2);
        },
    );
}
