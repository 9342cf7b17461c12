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
