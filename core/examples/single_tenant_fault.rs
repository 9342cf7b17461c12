//! A single-tenant fault through the real core on a ManualClock: tenant
//! `acme` of a tenant-scoped dependency fails for two minutes while 49
//! other tenants stay healthy. Prints open time, probe rejects, fallback
//! use and false global trips (partitions other than acme's that changed).
//!
//! `cargo run --release -p breakerbank --example single_tenant_fault`

use breakerbank::{Bank, Decision, ManualClock, Outcome, Profile, State};
use std::time::Duration;

const PROFILE: &str = r#"
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 5}
    open_duration: 10s
    backoff: {multiplier: 2.0, max: 40s}
    half_open: {probe_budget: 2, success_threshold: 3}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 5m
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    let bank = Bank::with_clock(Profile::from_yaml(PROFILE)?, clock.clone());
    let pay = bank
        .dependency("payments_client")
        .ok_or("payments_client not declared")?;
    let tenants: Vec<String> = std::iter::once("acme".to_string())
        .chain((1..50).map(|i| format!("tenant-{i:02}")))
        .collect();
    let fault = Duration::from_secs(60)..Duration::from_secs(180);
    let tick = Duration::from_millis(100); // each tenant calls 10 times a second
    let mut t = Duration::ZERO;
    let mut false_trips = 0;
    while t < Duration::from_secs(300) {
        for tenant in &tenants {
            let faulty = tenant == "acme" && fault.contains(&t);
            match pay.admit(Some(tenant), None)? {
                Decision::Admitted(p) => p.record(if faulty {
                    Outcome::Failure
                } else {
                    Outcome::Success
                }),
                Decision::Rejected(r) => {
                    // Serve the declared fallback, as a service would.
                    let _ = pay.serve_fallback::<()>(
                        Some(tenant),
                        &r,
                        None,
                        None::<fn() -> Option<()>>,
                    );
                }
            }
            if tenant != "acme" && pay.state(Some(tenant))? != State::Closed {
                false_trips += 1;
            }
        }
        clock.advance(tick);
        t += tick;
    }
    let m = bank.metrics();
    let dep = &m.dependencies[0];
    let acme = dep
        .partitions
        .iter()
        .find(|p| p.partition == "acme")
        .ok_or("acme missing")?;
    println!("single-tenant fault: acme fails from 60s to 180s; 49 other tenants healthy");
    println!("  acme state now            {}", acme.state.as_str());
    println!(
        "  open time                 {:.1}s over {} trips",
        acme.open_seconds_total, acme.opened_total
    );
    println!("  rejected while open       {}", acme.rejected_open_total);
    println!("  probe rejects             {}", acme.probe_rejects_total);
    println!("  fallback use (error)      {}", acme.fallback_error_total);
    println!("  recovered through probes  {}", acme.closed_total);
    println!("  false global trips        {false_trips}");
    if false_trips != 0 || acme.state != State::Closed {
        return Err("isolation or recovery failed".into());
    }
    Ok(())
}
