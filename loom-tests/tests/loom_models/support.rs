//! What every model shares: a profile, a fresh bank on a loom-visible
//! clock, and the post-join checks.

use breakerbank::{
    Bank, Decision, Dependency, ManualClock, MetricsSnapshot, Outcome, PartitionMetrics, Profile,
    RejectReason, State,
};
use std::time::{Duration, Instant};

/// The one dependency of every model.
pub const DEP: &str = "payments_client";
/// Its open period; models move the [`ManualClock`] by exactly this much.
pub const OPEN: Duration = Duration::from_secs(1);

/// Isolation of the dependency under test.
#[derive(Clone, Copy, Debug)]
pub enum Scope {
    /// One `global` partition.
    Global,
    /// One partition per tenant, at most `max_tenants` of them.
    Tenant { max_tenants: u32 },
}

/// How long a probe of [`profile_timed`]'s dependency may go unrecorded.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A profile with one dependency: trips after `failures` consecutive
/// failures, open for [`OPEN`], no backoff.
pub fn profile(scope: Scope, failures: u32, probe_budget: u32, success_threshold: u32) -> Profile {
    profile_with(scope, failures, probe_budget, success_threshold, "")
}

/// [`profile`] whose probes give their slots back after [`PROBE_TIMEOUT`].
pub fn profile_timed(
    scope: Scope,
    failures: u32,
    probe_budget: u32,
    success_threshold: u32,
) -> Profile {
    let extra = format!("    probe_timeout: {}s\n", PROBE_TIMEOUT.as_secs());
    profile_with(scope, failures, probe_budget, success_threshold, &extra)
}

fn profile_with(
    scope: Scope,
    failures: u32,
    probe_budget: u32,
    success_threshold: u32,
    extra: &str,
) -> Profile {
    let scope = match scope {
        Scope::Global => "isolation: global".to_string(),
        Scope::Tenant { max_tenants } => {
            format!("isolation: tenant\n    max_tenants: {max_tenants}")
        }
    };
    let yaml = format!(
        "dependencies:
  {DEP}:
    {scope}
    trip: {{consecutive_failures: {failures}}}
    open_duration: {}ms
    half_open: {{probe_budget: {probe_budget}, success_threshold: {success_threshold}}}
    fallback: {{kind: error, code: UNAVAILABLE}}
    recovery_bound: 5m
{extra}",
        OPEN.as_millis()
    );
    Profile::from_yaml(&yaml).expect("model profile is valid")
}

/// One execution's bank. Built inside `loom::model` so the clock's and
/// the breakers' atomics are loom's, fresh for every execution.
#[derive(Debug)]
pub struct World {
    pub bank: Bank,
    pub clock: ManualClock,
    pub dep: Dependency,
}

impl World {
    pub fn new(profile: &Profile) -> Self {
        let clock = ManualClock::new();
        let bank = Bank::with_clock(profile.clone(), clock.clone());
        let dep = bank.dependency(DEP).expect("declared");
        Self { bank, clock, dep }
    }

    /// Records failures through closed admissions until the breaker is open.
    pub fn trip(&self, tenant: Option<&str>) {
        for _ in 0..64 {
            if self.dep.state(tenant).unwrap() == State::Open {
                return;
            }
            match self.dep.admit(tenant, None).unwrap() {
                Decision::Admitted(p) => p.record(Outcome::Failure),
                Decision::Rejected(r) => panic!("trip: closed breaker refused: {:?}", r.reason),
            }
        }
        panic!("trip: breaker never opened");
    }

    /// Trips the breaker and lets its open period end: the next admission
    /// turns it half-open (that Open → HalfOpen CAS is part of every model).
    pub fn open_period_over(&self, tenant: Option<&str>) {
        self.trip(tenant);
        self.clock.advance(OPEN);
    }

    /// A probe admitted in setup, as plain data so a spawned thread can
    /// record it with its own `Dependency` handle.
    pub fn probe(&self, tenant: Option<&str>) -> breakerbank::RawPermit {
        match self.dep.admit(tenant, None).unwrap() {
            Decision::Admitted(p) => {
                assert!(p.is_probe(), "setup: expected a probe permit");
                p.into_raw()
            }
            Decision::Rejected(r) => panic!("setup: probe refused: {:?}", r.reason),
        }
    }

    /// After every thread has stopped: brings the breaker to half-open
    /// and checks that exactly `budget` probes are admitted at once, i.e.
    /// no probe slot leaked (C7, C13) and the budget still holds.
    pub fn assert_no_slot_leak(&self, tenant: Option<&str>, budget: u32) {
        match self.dep.state(tenant).unwrap() {
            State::HalfOpen => {}
            State::Open => self.clock.advance(OPEN),
            State::Closed => self.open_period_over(tenant),
            State::ForcedOpen => {
                self.dep.reset(tenant);
                self.open_period_over(tenant);
            }
        }
        let mut held = Vec::new();
        for i in 0..budget {
            match self.dep.admit(tenant, None).unwrap() {
                Decision::Admitted(p) => {
                    assert!(p.is_probe(), "half-open admitted a non-probe");
                    held.push(p);
                }
                Decision::Rejected(r) => panic!(
                    "C7/C13 slot leak: probe {} of budget {budget} refused ({:?}) after all threads stopped",
                    i + 1,
                    r.reason
                ),
            }
        }
        match self.dep.admit(tenant, None).unwrap() {
            Decision::Rejected(r) => assert_eq!(r.reason, RejectReason::ProbeBudget),
            Decision::Admitted(_) => {
                panic!("C7: probe {} admitted over budget {budget}", budget + 1)
            }
        }
        drop(held);
    }

    /// The metrics of one partition (`global` or a tenant id).
    pub fn partition(&self, name: &str) -> Option<PartitionMetrics> {
        find(&self.bank.metrics(), name)
    }
}

fn find(m: &MetricsSnapshot, name: &str) -> Option<PartitionMetrics> {
    m.dependencies
        .iter()
        .flat_map(|d| d.partitions.iter())
        .find(|p| p.partition == name)
        .cloned()
}

/// Runs `f` under `loom::model` (bound from `LOOM_MAX_PREEMPTIONS`) and
/// prints how many executions it took and how long.
pub fn explore<F>(name: &str, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    run(name, None, f)
}

/// [`explore`] with the preemption bound capped at `max_bound`, for a
/// model too large to run at the suite's bound (its docs say why).
/// `LOOM_UNCAPPED` set lifts the cap (`make loom-uncapped`): a race that
/// needs one preemption more than the cap is found only so.
pub fn explore_bounded<F>(name: &str, max_bound: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    run(name, Some(max_bound), f)
}

fn run<F>(name: &str, cap: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let start = Instant::now();
    let mut builder = loom::model::Builder::new();
    // Tearing down a tenant table drops every slot of its arena, one modelled
    // atomic load per partition: more branches than loom's default 1000
    // in one execution, none of them a spin loop.
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        builder.max_branches = 20_000;
    }
    if let Some(cap) = cap.filter(|_| std::env::var_os("LOOM_UNCAPPED").is_none()) {
        builder.preemption_bound = Some(builder.preemption_bound.map_or(cap, |b| b.min(cap)));
    }
    let bound = builder.preemption_bound;
    builder.check(move || {
        let n = counted.fetch_add(1, Ordering::Relaxed);
        if std::env::var_os("BB_LOOM_TRACE").is_some() {
            eprintln!("execution {n}");
        }
        f();
    });
    eprintln!(
        "loom model {name}: {} executions in {:.2?} (preemption bound {})",
        runs.load(Ordering::Relaxed),
        start.elapsed(),
        bound.map_or_else(|| "unbounded".to_string(), |b| b.to_string())
    );
}
