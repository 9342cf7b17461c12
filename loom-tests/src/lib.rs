//! Loom models of breakerbank's concurrent core (issue 4).
//!
//! The models live in `tests/loom_models/` (one module per clause) and are
//! compiled only under `--cfg loom`; this library is empty. They drive the
//! **real** `breakerbank` crate through its public API (`Bank::with_clock`
//! with a `ManualClock`, `Dependency::admit` / `record_raw` / `reset` /
//! `state`, `Permit::record` / `into_raw` / drop): under `--cfg loom`,
//! `core/src/sync.rs` hands the core loom's atomics, `Arc` and `Mutex`, and
//! crossbeam-epoch runs on loom through `--cfg crossbeam_loom` and its `loom`
//! feature. Nothing of the algorithm is copied here.
//!
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test --release -p breakerbank-loom-tests
//! ```
//! (`make loom`; `make loom-deep` runs bound 3.)
//!
//! Every model builds a fresh bank per execution, reaches the state it
//! needs single-threaded (a breaker is made half-open cheaply: a profile
//! with `consecutive_failures: 1`, one failure, the clock moved by the open
//! period; the first admission then turns it half-open, inside the race),
//! spawns two or three threads, and checks after the join. Most also end
//! with the *no slot leak* check: the breaker is brought to half-open and
//! must admit exactly `probe_budget` probes, then refuse the next.
//!
//! Bound: `LOOM_MAX_PREEMPTIONS=2` (every interleaving with at most two
//! preemptions; yields and blocking are free), except where a model caps
//! it (`support::explore_bounded`). Executions at that bound, and times
//! with the tests run two at a time on the 2-core dev machine (`make loom`
//! within `make test`, at 7b8074e; the counts grew since 896fab0,
//! `notes/loom-report.md`, as the core's paths did):
//!
//! | model | threads | bound | proves | executions | time |
//! |---|---|---|---|---|---|
//! | `c7_probe_budget_one_three_threads` | 3 | 2 | **C7**: with budget 1, three threads admitting (and then cancelling, succeeding, failing) never have two probes in flight at once, counted inside the model from admission to record; and no slot leaks | 100 707 | 23.3 s |
//! | `c7_probe_budget_two_three_threads` | 3 | 2 | the same with budget 2: never three | 255 946 | 54.9 s |
//! | `c8_success_threshold_two_needs_two_successes` | 3 | 2 | **C8**: two probers and an observer never see `closed` before two successes were recorded; two successes do close | 23 697 | 5.9 s |
//! | `c13_late_success_and_dropped_permit_change_nothing` | 3 | 2 | **C13**: a probe of an earlier episode recording *success* during a new episode is only counted late (the breaker does not close on it), a dropped permit returns its slot, and the old probe's slot comes back | 11 274 | 3.2 s |
//! | `c13_late_failure_does_not_reopen` | 2 | 2 | **C13**: an older-generation *failure* does not reopen a breaker that a current probe closes | 47 | 0.014 s |
//! | `c11_reset_racing_record_and_admit` | 3 | 2 | **C11**: `reset` racing a probe's failure and a fresh admission always ends closed or open (never half-open or forced), the next admission behaves as that state says, and the probe slot held across the reset is returned | 9 789 | 2.8 s |
//! | `c9_same_tenant_inserted_twice_shares_one_partition` | 2 | 1 | **C9**: two threads inserting the same new tenant get permits for the same slot and generation; one's failure trips the breaker the tenant maps to; one partition bears its name | 38 504 | 4.0 s |
//! | `c9_eviction_racing_trip_never_evicts_open` | 2 | 2 | **C9**: with `max_tenants: 1`, a new tenant's eviction racing the trip of the only (closed, evictable) partition never evicts it once open (one inserter: the trip is recorded with a permit from setup) | 278 493 | 67.8 s |
//! | `c9_eviction_racing_admission_never_evicts_open` | 2 | 1 | **C9**, two inserters: with `max_tenants: 1`, tenant `a` (one failure counted) admits and fails while new tenant `b` admits. Every admission finishes, in the threads and alone afterwards; closed tenants are admitted (the overflow partition is allowed); an open `a` stays open, refuses `a`, and sends `b` and later newcomers to the overflow partition; `a`'s failure never changes `b`'s state; overflow admissions are counted; at most `max_tenants` tenants | 150 904 | 51.3 s |
//! | `c5_rate_passes_racing_failures_never_hide_the_trip` | 2 | 2 | **C5**, failure rate 0.5 over ≥ 4 calls: with two passes left by the setup's judgement, two threads record three failures (2 + 1); whichever pass or judge, the one that makes 4 of 8 trips. Fails if a failure takes its pass with a Relaxed exchange (a later judgement may then miss its count) | 345 | 0.1 s |
//! | `c5_rate_racing_judgements_never_grant_a_pass_past_the_trip` | 2 | 2 | **C5**, same rate, no passes left: two threads record five failures (3 + 2), both first failures judge and may grant passes; the fifth (6 of 12) trips. Fails if a judgement installs its passes with a plain store instead of exchanging its own mark (passes computed without the other thread's failure) | 185 597 | 56.9 s |
//! | `c11_force_open_all_racing_an_insert_isolates_the_newcomer` | 2 | 1 | **C11**: `force_open(None)` racing a new tenant's insert (`max_tenants: 1`): the tenant ends forced open and is refused as such; a permit it got before the action records late. Fails without `Table::settle_forced`'s re-check, and without the two `SeqCst` fences | 6 779 | 1.6 s |
//! | `c11_reset_all_racing_an_insert_never_leaves_the_newcomer_forced` | 2 | 1 | **C11**: `reset(None)` ending a dependency-wide `force_open`, racing a new tenant's insert: the tenant ends closed and is admitted. Fails the same ways | 7 076 | 1.7 s |
//! | `c11_force_open_one_tenant_racing_an_owner_change_is_not_lost` | 2 | 1 | **C11**: `max_tenants: 1`, `force_open(Some(a))` racing new tenant `b`, who may evict idle `a`; `a` ends forced open and is refused as such. Fails if the action gives up when the slot it resolved changed owner | 34 744 | 2.8 s |
//! | `c12_a_reopen_racing_a_probe_and_its_cancel_keeps_its_period` | 3 | 2 | **C12**: a half-open breaker's failing probe racing another caller's probe and its cancel: the reopening's period ends. Fails if the trip's CAS is tried from a word that came back after its open-until was not written | 81 | 0.004 s |
//! | `c12_trip_racing_an_admission_never_admits_a_probe_early` | 3 | 2 | **C12**, **C7**, **C14**: the tripping failure racing two callers (each admits and reads `state`), the clock past an earlier trip's period: no probe and no `half_open` before the trip's period has passed, every open refusal has a `retry_after` within (0, period]; after the join exact refusals until the period's end, then the probe budget (no slot leak). Fails if the period is written after the trip's CAS and read without its generation tag | 2 213 | 0.35 s |
//!
//! Outside `make test` (`make loom-index`, and `make loom-deep`):
//! `c9_index_hint_racing_recycle_never_admits_the_wrong_tenant`, bound 1,
//! 488 982 executions in 59.1 s alone at 7b8074e: a lookup through a
//! tenant-index hint racing the slot's eviction and re-use by another
//! tenant never admits the wrong tenant.
//!
//! The rows of the C11 dependency-wide models and the C12 model come from
//! one `make loom` run on the same machine, shared with other builds.
//! The C11 ones are capped at bound 1: they fail there when broken (at
//! execution 2 566 without the re-check, at the first without the
//! fences); bound 2 passes too, 145 757 and 153 588 executions, about
//! 20 s each alone.
//!
//! Outside `make test`, expected to fail until their defects are fixed
//! (`make loom-known`, which fails if one of them passes; `make loom-deep`
//! skips them; `notes/loom-needs.md` has each interleaving):
//!
//! * `c9_late_rate_failure_racing_a_recycle_never_reaches_the_new_owner`,
//!   bound 1 (issue 21 item 4, N4): **C9**, **C13**, failure-rate policy,
//!   `a`'s late failure racing newcomer `c`, who takes `a`'s slot; `c`
//!   must show no failure, no late record and no foreign call in its
//!   window. Fails on `c`'s `late_records_total` (1): a late record is
//!   counted on the slot's partition, whoever holds it now. (`a`'s
//!   failure no longer reaches `c`'s window: tenant windows are per
//!   closed episode.)
//! * `c9_late_rate_failure_below_min_calls_racing_a_recycle_never_reaches_the_new_owner`,
//!   bound 1 (issue 21 item 4, N4): the same with `min_calls: 2`, so
//!   `a`'s failure never trips `a` and `c` always takes its slot. Fails
//!   at execution 0 (`c`'s `failures_total` 1): `a`'s failure, applied
//!   to `a`'s word with no change of it, bumps the partition's failure
//!   counter after `c`'s hand-over has cleared it.
//!
//! `c9_eviction_racing_admission_never_evicts_open` is the model N1
//! (`notes/loom-needs.md`) had forced down to the one-inserter model
//! above it. Restored, it found N5 (an eviction
//! through a stale shard snapshot, after which an admission could spin
//! forever in `Table::get_or_insert`; fixed in 896fab0) and fails on any
//! core without that fix. It is capped at bound 1: at bound 2 it runs to
//! millions of executions.
//!
//! What loom does not prove here. *Freed memory*: loom checks its own
//! cells and atomics, not plain heap reads, so a read of a freed shard
//! would go unnoticed; and in these small models crossbeam-epoch never
//! frees a shard before the execution ends (it collects only on a
//! participant's first pin and every 128th after, and a bag needs two
//! epoch advances), so reclamation is not interleaved with readers at
//! all. The arena of partitions is never freed before the table, by
//! design. Use-after-free would need a run under a sanitizer with forced
//! reclamation (see `notes/loom-report.md`). *Progress* is checked only
//! as far as loom's branch limit goes: an unbounded retry within the
//! explored interleavings fails the model. *Determinism*: a path whose
//! count of modelled operations depends on a hash breaks loom's replay
//! ("Reached unexpected exploration state") unless the hash is the same in
//! every execution; under loom the tenant table uses a fixed-seed hasher
//! since 896fab0 (N6 in `notes/loom-needs.md`).
//!
//! Set `BB_LOOM_TRACE=1` to print each execution's number (to find where a
//! model stops being deterministic or runs out of branches).
//! A failing model that uses the tenant table aborts the whole test binary
//! right after printing its panic (crossbeam-epoch's thread-local handle is
//! dropped outside the loom execution: "panic in a destructor during
//! cleanup"), so the models after it do not report; run it alone.
