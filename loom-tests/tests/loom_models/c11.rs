//! C11: operator actions (`reset`, `force_open`) racing records,
//! admissions, inserts and evictions leave every partition as the action
//! says.

use crate::support::{explore, explore_bounded, profile, Scope, World};
use breakerbank::{Decision, Outcome, RejectReason, State};
use loom::thread;

/// Setup (budget 1, threshold 1): a probe `p` holds the only slot of a
/// half-open breaker. Concurrently: an operator resets; `p` records a
/// failure; a caller admits and, if admitted, records a failure. Every
/// interleaving must end closed or open (never half-open, never forced),
/// a fresh admission must behave as that state says, and the probe slot
/// must be back (reset keeps in-flight slots; `p`'s record, late or
/// not, returns it).
#[test]
fn c11_reset_racing_record_and_admit() {
    let profile = profile(Scope::Global, 1, 1, 1);
    explore("c11_reset_racing_record_and_admit", move || {
        let w = World::new(&profile);
        w.open_period_over(None);
        let p = w.probe(None);

        let dep = w.dep.clone();
        let operator = thread::spawn(move || dep.reset(None));
        let dep = w.dep.clone();
        let recorder = thread::spawn(move || {
            dep.record_raw(p, Outcome::Failure);
        });
        let dep = w.dep.clone();
        let caller = thread::spawn(move || {
            if let Decision::Admitted(c) = dep.admit(None, None).unwrap() {
                assert!(
                    !c.is_probe(),
                    "a probe admitted while the only slot was held or after reset"
                );
                c.record(Outcome::Failure);
            }
        });
        for t in [operator, recorder, caller] {
            t.join().unwrap();
        }
        match w.dep.state(None).unwrap() {
            State::Closed => match w.dep.admit(None, None).unwrap() {
                Decision::Admitted(c) => assert!(!c.is_probe(), "closed admitted a probe"),
                Decision::Rejected(r) => panic!("closed breaker refused: {:?}", r.reason),
            },
            State::Open => match w.dep.admit(None, None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::Open),
                Decision::Admitted(_) => panic!("open breaker admitted before its period ended"),
            },
            s => panic!("C11 violated: inconsistent state {s:?} after reset raced record/admit"),
        }
        w.assert_no_slot_leak(None, 1);
    });
}

// Ids longer than a partition keeps (15 bytes): the tenant is found and
// walked through the shard path (see `c9.rs`), which keeps these models
// small; `Table::settle_forced` and the operator's walk are the same code
// for either kind of id.
const NEW: &str = "tenant-n/by-shard-path";
const A: &str = "tenant-a/by-shard-path";
const B: &str = "tenant-b/by-shard-path";

/// The decision of an admission of a new tenant while a dependency-wide
/// action races its insert: admitted on a closed word (the insert came
/// first), or refused as forced open. Returns the permit, if admitted.
fn admitted_or_forced(d: Decision<'_>) -> Option<breakerbank::RawPermit> {
    match d {
        Decision::Admitted(p) => {
            assert!(!p.is_probe(), "a new tenant admitted as a probe");
            Some(p.into_raw())
        }
        Decision::Rejected(r) => {
            assert_eq!(
                r.reason,
                RejectReason::ForcedOpen,
                "a new tenant refused, but not as forced open"
            );
            None
        }
    }
}

/// `force_open(None)` on a tenant-scoped dependency racing the insert of
/// a new tenant (`max_tenants: 1`, empty table). C11: "tenants first seen
/// afterwards are isolated too", and one inserted during the call is not
/// missed: either the operator's walk finds the new partition, or the
/// insert reads the dependency-wide flag after publishing itself (the
/// `SeqCst` fences of `Table::settle_forced` and `Dependency::operate`).
/// After the join the tenant reads forced open and is refused as such;
/// a permit its thread got before the action is of an older generation,
/// so its failure (which would trip a current closed word) is late and
/// leaves the tenant forced open.
///
/// Capped at bound 1, where it fails if `settle_forced` leaves the word
/// as the insert made it, and on the first execution without the two
/// fences. Bound 2 passes too (`make loom-uncapped`), outside
/// `make test`'s time budget.
#[test]
fn c11_force_open_all_racing_an_insert_isolates_the_newcomer() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 1, 1, 1);
    explore_bounded(
        "c11_force_open_all_racing_an_insert_isolates_the_newcomer",
        1,
        move || {
            let w = World::new(&profile);
            let dep = w.dep.clone();
            let newcomer =
                thread::spawn(move || admitted_or_forced(dep.admit(Some(NEW), None).unwrap()));
            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.force_open(None));
            let permit = newcomer.join().unwrap();
            operator.join().unwrap();
            assert_eq!(
                w.dep.state(Some(NEW)).unwrap(),
                State::ForcedOpen,
                "C11 violated: a tenant inserted during force_open(None) escaped it"
            );
            match w.dep.admit(Some(NEW), None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ForcedOpen),
                Decision::Admitted(_) => {
                    panic!("C11 violated: a tenant forced open (dependency-wide) was admitted")
                }
            }
            if let Some(p) = permit {
                w.dep.record_raw(p, Outcome::Failure);
                assert_eq!(
                    w.dep.state(Some(NEW)).unwrap(),
                    State::ForcedOpen,
                    "C13 violated: a permit from before force_open changed the forced state"
                );
            }
        },
    );
}

/// `reset(None)` ending a dependency-wide `force_open` (made in setup)
/// racing the insert of a new tenant (`max_tenants: 1`, empty table). The
/// insert may read the flag still set and make the tenant forced open;
/// then the walk finds it, or the insert reads the flag again after
/// publishing itself and closes it (C11: reset forces every partition
/// closed, so none is left forced open). After the join the tenant reads
/// closed and is admitted.
///
/// Capped at bound 1, as the model above, and failing the same ways
/// without `settle_forced` or the fences; bound 2 passes too.
#[test]
fn c11_reset_all_racing_an_insert_never_leaves_the_newcomer_forced() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 1, 1, 1);
    explore_bounded(
        "c11_reset_all_racing_an_insert_never_leaves_the_newcomer_forced",
        1,
        move || {
            let w = World::new(&profile);
            w.dep.force_open(None);
            let dep = w.dep.clone();
            let newcomer =
                thread::spawn(move || admitted_or_forced(dep.admit(Some(NEW), None).unwrap()));
            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.reset(None));
            let permit = newcomer.join().unwrap();
            operator.join().unwrap();
            assert_eq!(
                w.dep.state(Some(NEW)).unwrap(),
                State::Closed,
                "C11 violated: a tenant inserted during reset(None) stayed forced open"
            );
            match w.dep.admit(Some(NEW), None).unwrap() {
                Decision::Admitted(p) => {
                    assert!(!p.is_probe(), "closed admitted a probe");
                    p.record(Outcome::Success);
                }
                Decision::Rejected(r) => {
                    panic!("C11 violated: a reset tenant refused: {:?}", r.reason)
                }
            }
            if let Some(p) = permit {
                w.dep.record_raw(p, Outcome::Success);
            }
            assert_eq!(w.dep.state(Some(NEW)).unwrap(), State::Closed);
        },
    );
}

/// `reset(Some(t))` of one tenant while a dependency-wide `force_open`
/// holds (made in setup), racing t's own insert (`max_tenants: 1`, empty
/// table). The insert may read the force without t's reset and make t
/// forced open; then the reset's lookup finds t's partition, or the
/// insert reads t's reset after publishing itself (the fences of
/// `Table::set_override` and `Table::settle_forced`) and closes it. After
/// the join t reads closed and is admitted: the reset is never lost to
/// the race (C11), while a tenant never reset stays forced.
#[test]
fn c11_reset_one_tenant_racing_its_insert_under_a_force_of_all_is_not_lost() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 1, 1, 1);
    explore_bounded(
        "c11_reset_one_tenant_racing_its_insert_under_a_force_of_all_is_not_lost",
        1,
        move || {
            let w = World::new(&profile);
            w.dep.force_open(None);
            let dep = w.dep.clone();
            let newcomer =
                thread::spawn(move || admitted_or_forced(dep.admit(Some(NEW), None).unwrap()));
            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.reset(Some(NEW)));
            let permit = newcomer.join().unwrap();
            operator.join().unwrap();
            assert_eq!(
                w.dep.state(Some(NEW)).unwrap(),
                State::Closed,
                "C11 violated: reset(t) racing t's insert left it forced open"
            );
            match w.dep.admit(Some(NEW), None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Success),
                Decision::Rejected(r) => {
                    panic!("C11 violated: a reset tenant refused: {:?}", r.reason)
                }
            }
            if let Some(p) = permit {
                w.dep.record_raw(p, Outcome::Success);
            }
            assert_eq!(
                w.dep.state(Some(A)).unwrap(),
                State::ForcedOpen,
                "C11 violated: a tenant never reset escaped the force of all"
            );
        },
    );
}

/// A per-tenant `force_open(Some(t))` racing t's first admission, which
/// inserts it. `max_tenants: 3`. The operator's own lookup may complete
/// the insert (published, still pending) and force the word before the
/// inserter settles it against the dependency-wide rule: the settle must
/// leave a word of a later episode alone. After the join t reads forced
/// open and is refused as such.
#[test]
fn c11_force_open_one_tenant_racing_its_insert_is_not_lost() {
    let profile = profile(Scope::Tenant { max_tenants: 3 }, 1, 1, 1);
    explore_bounded(
        "c11_force_open_one_tenant_racing_its_insert_is_not_lost",
        2,
        move || {
            let w = World::new(&profile);
            let dep = w.dep.clone();
            let newcomer =
                thread::spawn(move || admitted_or_forced(dep.admit(Some(NEW), None).unwrap()));
            w.dep.force_open(Some(NEW));
            let permit = newcomer.join().unwrap();
            let state = w.dep.state(Some(NEW)).unwrap();
            assert_eq!(
                state,
                State::ForcedOpen,
                "C11 violated: force_open(t) racing t's insert lost; t reads {state:?}"
            );
            match w.dep.admit(Some(NEW), None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ForcedOpen),
                Decision::Admitted(_) => panic!("C11 violated: a forced-open tenant was admitted"),
            }
            if let Some(p) = permit {
                w.dep.record_raw(p, Outcome::Success);
            }
        },
    );
}

/// A per-tenant `force_open(Some(a))` racing an owner change of `a`'s
/// slot. `max_tenants: 1`; setup: `a` holds the only slot, closed and
/// idle. Concurrently: the operator forces `a` open while new tenant `b`
/// admits (it may evict idle `a`, and take `a`'s slot or the one beside
/// it). C11: the action isolates `a` until reset, so after the join `a`
/// reads forced open and is refused as such, whichever slot holds it (a
/// forced-open partition is never evicted; an evicted `a` forced open
/// must come back forced). The action must not be dropped because the
/// slot it resolved changed owner before its compare-and-swap.
///
/// Fails if `Dependency::operate` gives up when the slot it resolved is no
/// longer `a`'s at its CAS (it must resolve `a` again).
#[test]
fn c11_force_open_one_tenant_racing_an_owner_change_is_not_lost() {
    let profile = profile(Scope::Tenant { max_tenants: 1 }, 1, 1, 1);
    explore_bounded(
        "c11_force_open_one_tenant_racing_an_owner_change_is_not_lost",
        1,
        move || {
            let w = World::new(&profile);
            let a_slot = match w.dep.admit(Some(A), None).unwrap() {
                Decision::Admitted(p) => {
                    let p = p.into_raw();
                    let slot = p.slot();
                    w.dep.record_raw(p, Outcome::Success);
                    slot
                }
                Decision::Rejected(r) => panic!("fresh tenant refused: {:?}", r.reason),
            };
            let dep = w.dep.clone();
            let operator = thread::spawn(move || dep.force_open(Some(A)));
            let dep = w.dep.clone();
            let newcomer = thread::spawn(move || match dep.admit(Some(B), None).unwrap() {
                Decision::Admitted(p) => p.into_raw(),
                Decision::Rejected(r) => panic!("closed tenant b refused: {:?}", r.reason),
            });
            operator.join().unwrap();
            let b = newcomer.join().unwrap();
            let a_state = w.dep.state(Some(A)).unwrap();
            assert_eq!(
                a_state,
                State::ForcedOpen,
                "C11 violated: force_open(a) lost; a reads {a_state:?}; a held slot {a_slot}, \
                 b was admitted in slot {} (0: overflow)",
                b.slot()
            );
            match w.dep.admit(Some(A), None).unwrap() {
                Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ForcedOpen),
                Decision::Admitted(_) => panic!("C11 violated: a forced-open tenant was admitted"),
            }
            w.dep.record_raw(b, Outcome::Success);
        },
    );
}
