//! Loom models of breakerbank's concurrent core (issue 4).
//!
//! The models live in `tests/loom_models/` (one module per clause) and are
//! compiled only under `--cfg loom`; this library is empty. They drive the
//! **real** `breakerbank` crate through its public API (`Bank::with_clock`
//! with a `ManualClock`, `Dependency::admit` / `record_raw` / `reset` /
//! `force_open` / `trip` / `half_open` / `state`, `Bank::reload`,
//! `Permit::record` / `into_raw` / drop): under
//! `--cfg loom`, `core/src/sync.rs` hands the core loom's atomics, `Arc`
//! and `Mutex`, and crossbeam-epoch runs on loom through
//! `--cfg crossbeam_loom` and its `loom` feature. The C ABI's permit
//! ledger (`ffi-c/src/ledger.rs`) is driven the same way, through
//! `breakerbank_ffi::__loom` (hidden, `--cfg loom` only): under loom a
//! ledger's slots are loom's atomics, four of them. Nothing of the
//! algorithm is copied here.
//!
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test --release -p breakerbank-loom-tests
//! ```
//! (`make loom`; `make loom-deep` runs bound 3 and the ignored models,
//! `make loom-uncapped` every model at bound 2, `make loom-index` the
//! ignored tenant-lookup model.)
//!
//! Every model builds a fresh bank per execution, reaches the state it
//! needs single-threaded (a breaker is made half-open cheaply: a profile
//! with `consecutive_failures: 1`, one failure, the clock moved by the open
//! period; the first admission then turns it half-open, inside the race),
//! spawns two or three threads, and checks after the join. Most also end
//! with the *no slot leak* check: the breaker is brought to half-open and
//! must admit exactly `probe_budget` probes, then refuse the next.
//!
//! The models, by clause, with their preemption bound under `make loom`
//! (`LOOM_MAX_PREEMPTIONS=2`; 1 where `support::explore_bounded` caps a
//! model, which `make loom-uncapped` lifts). What each proves is in its
//! doc comment and, side by side, in `docs/design/loom-models.md`, with what the
//! models do not prove (freed memory, progress past loom's branch limit).
//!
//! | clause | model | bound |
//! |---|---|---:|
//! | C5 | `c5_rate_passes_racing_failures_never_hide_the_trip` | 2 |
//! | C5 | `c5_rate_racing_judgements_never_grant_a_pass_past_the_trip` | 2 |
//! | C7 | `c7_probe_budget_one_three_threads` | 2 |
//! | C7 | `c7_probe_budget_two_three_threads` | 2 |
//! | C7, C13 | `c7_c13_a_reclaim_racing_a_lost_probes_cancel_keeps_the_budget` | 2 |
//! | C7, C13 | `c7_c13_a_reclaim_racing_a_lost_probes_success_keeps_the_budget` | 2 |
//! | C8 | `c8_success_threshold_two_needs_two_successes` | 2 |
//! | C9 | `c9_same_tenant_inserted_twice_shares_one_partition` | 1 |
//! | C9 | `c9_eviction_racing_trip_never_evicts_open` | 2 |
//! | C9 | `c9_eviction_racing_admission_never_evicts_open` | 1 |
//! | C9 | `c9_index_hint_racing_recycle_never_admits_the_wrong_tenant` (ignored: `make loom-index`) | 1 |
//! | C9, C13 | `c9_late_rate_failure_racing_a_recycle_never_reaches_the_new_owner` | 1 |
//! | C9, C13 | `c9_late_rate_failure_below_min_calls_racing_a_recycle_never_reaches_the_new_owner` | 1 |
//! | C7, C9, C13 | `c7_c9_eviction_of_a_timed_out_probe_racing_its_record_keeps_the_next_owners_budget` | 1 |
//! | C11 | `c11_reset_racing_record_and_admit` | 2 |
//! | C11 | `c11_force_open_all_racing_an_insert_isolates_the_newcomer` | 1 |
//! | C11 | `c11_reset_all_racing_an_insert_never_leaves_the_newcomer_forced` | 1 |
//! | C11 | `c11_reset_one_tenant_racing_its_insert_under_a_force_of_all_is_not_lost` | 1 |
//! | C11 | `c11_force_open_one_tenant_racing_its_insert_is_not_lost` | 2 |
//! | C11 | `c11_force_open_one_tenant_racing_an_owner_change_is_not_lost` | 1 |
//! | C12, C7, C14 | `c12_trip_racing_an_admission_never_admits_a_probe_early` | 2 |
//! | C12 | `c12_a_reopen_racing_a_probe_and_its_cancel_keeps_its_period` | 2 |
//! | C13 | `c13_late_success_and_dropped_permit_change_nothing` | 2 |
//! | C13 | `c13_late_failure_does_not_reopen` | 2 |
//! | C13, C7 | `c13_ledger_a_permit_and_its_copies_failing_at_once_count_once` | 2 |
//! | C13, C7 | `c13_ledger_the_owners_quiet_redeem_racing_a_copys_failure_never_counts_twice` | 2 |
//! | C13, C7 | `c13_ledger_slot_reuse_never_redeems_a_newer_ticket` | 2 |
//! | C20, C7 | `c20_reload_racing_probes_keeps_every_decision_on_one_budget` | 1 |
//! | C20 | `c20_reload_removing_a_dependency_racing_its_fast_path` | 2 |
//! | C19 | `c19_trip_racing_a_probe_record_and_an_admission_is_never_lost` | 2 |
//! | C19 | `c19_half_open_racing_a_failing_call_is_never_lost` | 2 |
//! | C22, C20 | `c22_a_reload_to_observe_racing_a_trip_leaves_the_breaker_closed` | 1 |
//!
//! *Determinism*: a path whose count of modelled operations depends on a
//! hash breaks loom's replay ("Reached unexpected exploration state")
//! unless the hash is the same in every execution; under loom the tenant
//! table hashes with a fixed seed.
//!
//! Set `BB_LOOM_TRACE=1` to print each execution's number (to find where a
//! model stops being deterministic or runs out of branches).
//! A failing model that uses the tenant table aborts the whole test binary
//! right after printing its panic (crossbeam-epoch's thread-local handle is
//! dropped outside the loom execution: "panic in a destructor during
//! cleanup"), so the models after it do not report; run it alone.
