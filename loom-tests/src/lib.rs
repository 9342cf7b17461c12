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
//! preemptions; yields and blocking are free). Executions and times at
//! bound 2 on the 2-core dev machine, run in parallel (`notes/loom-report.md`):
//!
//! | model | threads | proves | executions |
//! |---|---|---|---|
//! | `c7_probe_budget_one_three_threads` | 3 | **C7**: with budget 1, three threads admitting (and then cancelling, succeeding, failing) never have two probes in flight at once, counted inside the model from admission to record; and no slot leaks | 28 447 |
//! | `c7_probe_budget_two_three_threads` | 3 | the same with budget 2: never three | 88 391 |
//! | `c8_success_threshold_two_needs_two_successes` | 3 | **C8**: two probers and an observer never see `closed` before two successes were recorded; two successes do close | 14 917 |
//! | `c13_late_success_and_dropped_permit_change_nothing` | 3 | **C13**: a probe of an earlier episode recording *success* during a new episode is only counted late (the breaker does not close on it), a dropped permit returns its slot, and the old probe's slot comes back | 5 531 |
//! | `c13_late_failure_does_not_reopen` | 2 | **C13**: an older-generation *failure* does not reopen a breaker that a current probe closes | 40 |
//! | `c11_reset_racing_record_and_admit` | 3 | **C11**: `reset` racing a probe's failure and a fresh admission always ends closed or open (never half-open or forced), the next admission behaves as that state says, and the probe slot held across the reset is returned | 5 057 |
//! | `c9_same_tenant_inserted_twice_shares_one_partition` | 2 | **C9**: two threads inserting the same new tenant get permits for the same slot and generation; one's failure trips the breaker the tenant maps to; one partition bears its name | 377 312 |
//! | `c9_eviction_racing_admission_never_evicts_open` | 2 | **C9**: with `max_tenants: 1`, a new tenant's eviction racing the trip of the only (closed, evictable) partition never evicts it once open | 197 244 |
//!
//! What loom does not prove here: use-after-free of the epoch-reclaimed
//! shards is only exercised (crossbeam-epoch runs on loom, so reclamation
//! is interleaved with the readers), not checked by a sanitizer; the arena
//! of partitions is never freed before the table, by design. Progress is
//! not proved either: a table full of idle partitions can make two new
//! tenants evict each other without end (see `notes/loom-needs.md`), so the
//! eviction model records with a permit from setup instead of admitting.
//!
//! Set `BB_LOOM_TRACE=1` to print each execution's number (to find where a
//! model stops being deterministic or runs out of branches).
