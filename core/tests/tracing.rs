//! Breaker events as `tracing` events (feature `tracing`), caught by a
//! `tracing-subscriber` layer that keeps every event's fields, level and
//! thread. Installed globally (events come from the dispatcher thread);
//! each test has its own dependency name and reads only its events.

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

use breakerbank::{Bank, Decision, ManualClock, Outcome, Profile, State};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

#[derive(Clone, Debug)]
struct Caught {
    level: Level,
    target: String,
    thread: String,
    fields: BTreeMap<String, String>,
}

impl Caught {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

struct Collector;

impl<S: Subscriber> Layer<S> for Collector {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        caught().lock().unwrap().push(Caught {
            level: *event.metadata().level(),
            target: event.metadata().target().to_string(),
            thread: std::thread::current().name().unwrap_or("").to_string(),
            fields,
        });
    }
}

fn caught() -> &'static Mutex<Vec<Caught>> {
    static CAUGHT: OnceLock<Mutex<Vec<Caught>>> = OnceLock::new();
    CAUGHT.get_or_init(|| Mutex::new(Vec::new()))
}

/// Installs the collector once for the test binary.
fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Collector))
            .expect("no other global subscriber");
    });
}

/// The events caught so far for `dependency`, once the bank's queue is
/// delivered.
fn events_of(bank: &Bank, dependency: &str) -> Vec<Caught> {
    assert!(bank.flush_events(Duration::from_secs(10)));
    caught()
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.field("dependency") == Some(dependency))
        .cloned()
        .collect()
}

/// A bank of one dependency `name` on a manual clock, traced.
fn traced_bank(name: &str, isolation: &str) -> (Bank, ManualClock) {
    install();
    let clock = ManualClock::new();
    let profile = Profile::from_yaml(&format!(
        "dependencies:
  {name}:
    isolation: {isolation}
    trip: {{consecutive_failures: 2}}
    open_duration: 10s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: DOWN}}
    recovery_bound: 1m
"
    ))
    .unwrap();
    let bank = Bank::with_clock(profile, clock.clone());
    bank.subscribe(breakerbank::tracing::emit);
    (bank, clock)
}

fn record(bank: &Bank, name: &str, tenant: Option<&str>, outcome: Outcome) {
    let dep = bank.dependency(name).unwrap();
    match dep.admit(tenant, None).unwrap() {
        Decision::Admitted(p) => p.record(outcome),
        Decision::Rejected(r) => panic!("refused: {r:?}"),
    };
}

/// acme's transitions as [`summary`] lists them.
const TRIP: [&str; 5] = ["transition", "acme", "closed", "open", "trip_policy"];
const HALF_OPEN: [&str; 5] = [
    "transition",
    "acme",
    "open",
    "half_open",
    "open_period_ended",
];
const REOPEN: [&str; 5] = ["transition", "acme", "half_open", "open", "probe_failed"];
const CLOSE: [&str; 5] = [
    "transition",
    "acme",
    "half_open",
    "closed",
    "probes_succeeded",
];

/// (kind, partition, from, to, reason) of each event.
fn summary(events: &[Caught]) -> Vec<[&str; 5]> {
    events
        .iter()
        .map(|c| ["kind", "partition", "from", "to", "reason"].map(|f| c.field(f).unwrap_or("-")))
        .collect()
}

#[test]
fn c16_transitions_are_tracing_events_with_dependency_partition_and_states() {
    let name = "traced_transitions_client";
    let (bank, clock) = traced_bank(name, "tenant");
    for _ in 0..2 {
        record(&bank, name, Some("acme"), Outcome::Failure);
    }
    clock.advance(Duration::from_secs(10));
    record(&bank, name, Some("acme"), Outcome::Failure); // the probe fails
    clock.advance(Duration::from_secs(10));
    record(&bank, name, Some("acme"), Outcome::Success); // this one closes
    record(&bank, name, Some("globex"), Outcome::Success);
    let dep = bank.dependency(name).unwrap();
    assert_eq!(dep.state(Some("acme")).unwrap(), State::Closed);

    let events = events_of(&bank, name);
    assert_eq!(
        summary(&events),
        [TRIP, HALF_OPEN, REOPEN, HALF_OPEN, CLOSE]
    );
    let levels: Vec<Level> = events.iter().map(|c| c.level).collect();
    use Level as L;
    assert_eq!(levels, [L::WARN, L::INFO, L::WARN, L::INFO, L::INFO]);
    for c in &events {
        assert_eq!(c.target, "breakerbank");
        assert!(c.field("at_ns").is_some_and(|n| n.parse::<u64>().is_ok()));
        assert!(c.field("message").is_some());
    }
    assert_eq!(events[0].field("at_ns"), Some("0"));
    assert_eq!(events[1].field("at_ns"), Some("10000000000"));
}

#[test]
fn c11_resets_and_forced_opens_are_tracing_events() {
    let name = "traced_operator_client";
    let (bank, _clock) = traced_bank(name, "global");
    let dep = bank.dependency(name).unwrap();
    dep.force_open(None);
    dep.reset(None);
    let events = events_of(&bank, name);
    assert_eq!(
        summary(&events),
        [
            ["forced_open", "global", "closed", "forced_open", "operator"],
            ["reset", "global", "forced_open", "closed", "operator"],
        ]
    );
    assert_eq!(events[0].level, Level::WARN);
    assert_eq!(events[1].level, Level::INFO);
}

#[test]
fn c20_a_reload_is_an_info_event_naming_each_dependency() {
    let name = "traced_reload_client";
    let (bank, _clock) = traced_bank(name, "global");
    let profile = Profile::from_yaml(&format!(
        "dependencies:
  {name}:
    isolation: global
    trip: {{consecutive_failures: 4}}
    open_duration: 10s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {{kind: error, code: DOWN}}
    recovery_bound: 1m
"
    ))
    .unwrap();
    bank.reload(profile).unwrap();
    let events = events_of(&bank, name);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].field("kind"), Some("reload"));
    assert_eq!(events[0].field("reason"), Some("reload"));
    assert_eq!(events[0].field("partition"), Some("*"));
    assert_eq!(events[0].level, Level::INFO);
}

#[test]
fn c15_a_stuck_alert_is_an_error_event() {
    let name = "traced_stuck_client";
    let (bank, clock) = traced_bank(name, "global");
    for _ in 0..2 {
        record(&bank, name, None, Outcome::Failure);
    }
    clock.advance(Duration::from_secs(61));
    let events = events_of(&bank, name);
    let stuck: Vec<&Caught> = events
        .iter()
        .filter(|c| c.field("kind") == Some("stuck"))
        .collect();
    assert_eq!(stuck.len(), 1, "{events:?}");
    assert_eq!(stuck[0].level, Level::ERROR);
    assert_eq!(stuck[0].field("partition"), Some("global"));
    assert_eq!(stuck[0].field("reason"), Some("recovery_bound"));
    assert_eq!(
        stuck[0].field("from"),
        None,
        "a stuck alert is no change of state"
    );
}

#[test]
fn c16_the_admission_path_emits_no_tracing_event() {
    let name = "traced_hot_path_client";
    let (bank, clock) = traced_bank(name, "tenant");
    let dep = bank.dependency(name).unwrap();
    let tenants = ["acme", "globex", "initech", "umbrella"];
    // A million admissions: healthy ones for three tenants, and acme's,
    // tripped early, refused while open.
    for _ in 0..2 {
        record(&bank, name, Some("acme"), Outcome::Failure);
    }
    let mut refused = 0u64;
    for i in 0..1_000_000usize {
        match dep.admit(Some(tenants[i % 4]), None).unwrap() {
            Decision::Admitted(p) => p.record(Outcome::Success),
            Decision::Rejected(_) => refused += 1,
        }
    }
    assert_eq!(refused, 250_000);
    clock.advance(Duration::from_secs(10));
    record(&bank, name, Some("acme"), Outcome::Success);

    let events = events_of(&bank, name);
    assert_eq!(summary(&events), [TRIP, HALF_OPEN, CLOSE]);
    for c in &events {
        assert_eq!(
            c.thread, "breakerbank-events",
            "emitted off the admission path"
        );
    }
}
