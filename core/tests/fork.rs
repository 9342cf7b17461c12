//! C16: a process that forks keeps a working bank in the child. The
//! child is made with `libc::fork`, as gunicorn's `--preload`, prefork
//! workers and `multiprocessing` make theirs; it reports through its exit
//! status, since its test harness is the parent's.
#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_types)] // tests use std sync types directly

use breakerbank::{Bank, Event, EventKind, Profile, State};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROFILE: &str = "dependencies:
  svc_client:
    isolation: global
    trip: {consecutive_failures: 1}
    open_duration: 300ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: SVC_DOWN}
    recovery_bound: 700ms
  tenants_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: TENANTS_DOWN}
    recovery_bound: 5m
";

type Seen = Arc<Mutex<Vec<Event>>>;

fn waits_for(seen: &Seen, within: Duration, what: impl Fn(&Event) -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if seen.lock().unwrap().iter().any(&what) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// What the child checks; each failure is its own exit status.
fn child(bank: &Bank, seen: &Seen) -> i32 {
    let svc = bank.dependency("svc_client").unwrap();
    let tenants = bank.dependency("tenants_client").unwrap();
    // The state the parent had at the fork.
    if svc.inspect(None).unwrap().state != State::Open {
        return 10;
    }
    if tenants.state(Some("acme")).unwrap() != State::ForcedOpen {
        return 11;
    }
    // The sweep goes on: the open period ends and is announced without a
    // call, then the episode passes its recovery bound (C14, C15).
    let half_open = |e: &Event| {
        e.kind == EventKind::Transition
            && e.dependency == "svc_client"
            && e.to == Some(State::HalfOpen)
    };
    if !waits_for(seen, Duration::from_secs(3), half_open) {
        return 12;
    }
    let stuck = |e: &Event| e.kind == EventKind::Stuck && e.dependency == "svc_client";
    if !waits_for(seen, Duration::from_secs(3), stuck) {
        return 13;
    }
    // Listeners fire for what the child does, and flushing works.
    tenants.reset(Some("acme"));
    if !bank.flush_events(Duration::from_secs(2)) {
        return 14;
    }
    let reset = |e: &Event| e.kind == EventKind::Reset && e.partition == "acme";
    if !seen.lock().unwrap().iter().any(reset) {
        return 15;
    }
    // A listener added in the child hears too.
    let late: Seen = Arc::default();
    let l = late.clone();
    bank.subscribe(move |e| l.lock().unwrap().push(e.clone()));
    tenants.force_open(Some("globex"));
    if !bank.flush_events(Duration::from_secs(2)) {
        return 16;
    }
    if !late.lock().unwrap().iter().any(|e| e.partition == "globex") {
        return 17;
    }
    if bank.events_dropped() != 0 {
        return 18;
    }
    0
}

#[test]
fn c16_a_forked_child_keeps_events_the_sweep_and_stuck_alerts() {
    let bank = Bank::new(Profile::from_yaml(PROFILE).unwrap());
    let seen: Seen = Arc::default();
    let s = seen.clone();
    bank.subscribe(move |e| s.lock().unwrap().push(e.clone()));
    let svc = bank.dependency("svc_client").unwrap();
    let tenants = bank.dependency("tenants_client").unwrap();
    let _ = svc.call(None, None, || Err::<(), _>("down"));
    tenants.force_open(Some("acme"));
    assert!(bank.flush_events(Duration::from_secs(2)));
    assert_eq!(svc.state(None).unwrap(), State::Open);
    // The child starts with what the parent heard, and hears the rest itself.
    seen.lock().unwrap().clear();

    // SAFETY: the child runs only this test's code on its own copy of the
    // bank and leaves with `_exit`, never returning into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(&bank, &seen)))
            .unwrap_or(99);
        // SAFETY: ends the child at once, running no destructor or atexit
        // handler of the parent's harness.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `pid` is this process's child; `status` is writable.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "the child died: status {status}");
    let code = libc::WEXITSTATUS(status);
    let what = match code {
        0 => "",
        10 => "the child did not see the parent's open breaker",
        11 => "the child did not see the parent's forced tenant",
        12 => "no open -> half-open announcement in the child (sweep)",
        13 => "no stuck alert in the child (sweep)",
        14 => "flush_events timed out in the child",
        15 => "a listener subscribed before the fork heard nothing in the child",
        16 => "flush_events timed out after a second listener",
        17 => "a listener subscribed in the child heard nothing",
        18 => "events dropped in the child",
        _ => "the child panicked",
    };
    assert_eq!(code, 0, "{what}");
    // The parent's bank is unaffected by its child.
    tenants.reset(Some("acme"));
    assert!(bank.flush_events(Duration::from_secs(2)));
}
