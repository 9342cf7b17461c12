//! Loom models of breakerbank's concurrent core, one module per clause
//! (`c13_ledger`: the C ABI's permit ledger).
//! What each proves and at what bound: see the `breakerbank-loom-tests`
//! crate docs (`loom-tests/src/lib.rs`).
//!
//! ```text
//! RUSTFLAGS="--cfg loom --cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
//!   CARGO_TARGET_DIR=target/loom cargo test --release -p breakerbank-loom-tests
//! ```
#![cfg(loom)]

mod support;

mod c11;
mod c12;
mod c13;
mod c13_ledger;
mod c19;
mod c20;
mod c22;
mod c5;
mod c7;
mod c8;
mod c9;
