//! C9: building a bank never aborts the process. A profile within every
//! limit whose tables the process cannot allocate is a `ConfigError`.
//!
//! The allocation failure is real: a child process (this test binary,
//! run again for one test) lowers its own address-space limit with
//! `setrlimit(RLIMIT_AS)` and builds a bank larger than what is left, so
//! an abort shows up as the child's signal rather than ending the suite.

#![cfg(target_os = "linux")]

use breakerbank::{Bank, ManualClock, Profile};
use std::process::Command;

const CHILD: &str = "BREAKERBANK_ALLOC_FAILURE_CHILD";
const HEADROOM: u64 = 256 << 20;

/// Twelve tables of 1,000,000 tenants (about 800 MB) with `memory_limit`
/// raised past them.
fn large_profile() -> Profile {
    let mut yaml = String::from("memory_limit: 4GiB\ndependencies:\n");
    for i in 0..12 {
        yaml.push_str(&format!(
            "  client_{i:02}:\n    isolation: tenant\n    trip: {{consecutive_failures: 5}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: DOWN}}\n    recovery_bound: 5m\n    max_tenants: 1000000\n"
        ));
    }
    Profile::from_yaml(&yaml).expect("within every profile limit")
}

/// This process's address space now, in bytes.
fn address_space() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("statm's first field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).expect("a page size")
}

fn limit_address_space(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: `lim` is a valid rlimit for the call's duration.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// Runs `test` of this binary in a child with `CHILD` set; returns its
/// status and output.
fn in_child(test: &str) -> (std::process::ExitStatus, String) {
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the child");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status, text)
}

#[test]
fn c9_a_bank_whose_tables_cannot_be_allocated_is_a_config_error() {
    if std::env::var_os(CHILD).is_none() {
        let (status, out) =
            in_child("c9_a_bank_whose_tables_cannot_be_allocated_is_a_config_error");
        assert!(status.success(), "child {status}:\n{out}");
        return;
    }
    let profile = large_profile();
    limit_address_space(address_space() + HEADROOM);
    let err = Bank::try_with_clock(profile.clone(), ManualClock::new())
        .expect_err("the tables need more than the address space left");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot allocate")
            && msg.contains("client_")
            && msg.contains("the allocator refused"),
        "{msg}"
    );
    // `Bank::new`'s infallible form panics with the same message: a Rust
    // caller chose it, and a panic unwinds where an abort would not.
    let panicked = std::panic::catch_unwind(|| Bank::with_clock(profile, ManualClock::new()))
        .expect_err("with_clock cannot succeed either");
    let text = panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("allocate"), "{text}");
}

/// C20: a reload that needs a new table (here a `max_tenants` above the
/// running table's size) the allocator refuses is refused as a whole:
/// every dependency keeps its state and handles, the other changes of the
/// same profile included.
#[test]
fn c20_a_reload_whose_new_table_cannot_be_allocated_changes_nothing() {
    if std::env::var_os(CHILD).is_none() {
        let (status, out) =
            in_child("c20_a_reload_whose_new_table_cannot_be_allocated_changes_nothing");
        assert!(status.success(), "child {status}:\n{out}");
        return;
    }
    let entry = |name: &str, failures: u32, max_tenants: u32| {
        format!(
            "  {name}:\n    isolation: tenant\n    trip: {{consecutive_failures: {failures}}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: DOWN}}\n    recovery_bound: 5m\n    max_tenants: {max_tenants}\n"
        )
    };
    let profile = |big: u32, failures: u32| {
        let mut yaml = String::from("memory_limit: 4GiB\ndependencies:\n");
        yaml.push_str(&entry("payments_client", failures, 10));
        for i in 0..12 {
            yaml.push_str(&entry(&format!("client_{i:02}"), 5, big));
        }
        Profile::from_yaml(&yaml).expect("within every profile limit")
    };
    let bank = Bank::with_clock(profile(10, 2), ManualClock::new());
    let payments = bank.dependency("payments_client").unwrap();
    let client = bank.dependency("client_00").unwrap();
    let fail = |d: &breakerbank::Dependency, t: &str| match d.admit(Some(t), None).unwrap() {
        breakerbank::Decision::Admitted(p) => p.record(breakerbank::Outcome::Failure),
        breakerbank::Decision::Rejected(_) => panic!("{t} rejected"),
    };
    fail(&payments, "acme");
    fail(&client, "acme");
    let before = bank.metrics();
    limit_address_space(address_space() + HEADROOM);
    // A lower threshold for payments_client, and tables too large for
    // what is left for the others.
    let err = bank
        .reload(profile(1_000_000, 1))
        .expect_err("the new tables need more than the address space left");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot allocate") && msg.contains("client_"),
        "{msg}"
    );
    assert_eq!(bank.metrics(), before);
    assert_eq!(bank.dependency("client_00").unwrap().id(), client.id());
    assert_eq!(
        payments.config().trip,
        breakerbank::TripPolicy::ConsecutiveFailures(2)
    );
    // payments_client kept its count and its threshold of two.
    assert_eq!(
        payments.state(Some("acme")).unwrap(),
        breakerbank::State::Closed
    );
    fail(&payments, "acme");
    assert_eq!(
        payments.state(Some("acme")).unwrap(),
        breakerbank::State::Open
    );
    assert_eq!(
        client.state(Some("acme")).unwrap(),
        breakerbank::State::Closed
    );
}
