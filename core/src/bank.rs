//! A bank of breakers built from a profile: [`Bank`].

use crate::clock::Advanced;
use crate::clock::{Clock, Instant, ManualClock, MonotonicClock};
use crate::dependency::*;
use crate::events::{Event, EventBus};
use crate::metrics::MetricsSnapshot;
use crate::profile::{ConfigError, Profile};
use crate::sync::{AtomicBool, StdArc};
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// A bank of breakers built from a profile: one per dependency and
/// partition. `Send + Sync`; share it by reference or `Arc`.
pub struct Bank {
    deps: Vec<Dependency>,
    by_name: HashMap<String, u32>,
    clock: StdArc<dyn Clock>,
    events: StdArc<EventBus>,
}

impl fmt::Debug for Bank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bank")
            .field("dependencies", &self.deps)
            .finish()
    }
}

impl Bank {
    /// A bank on the system's monotonic clock.
    ///
    /// # Panics
    ///
    /// When the allocator refuses a partition table (see
    /// [`Bank::try_new`], which returns that as a [`ConfigError`]).
    pub fn new(profile: Profile) -> Bank {
        Self::with_clock(profile, MonotonicClock::new())
    }

    /// A bank on the given clock (e.g. a [`ManualClock`] in tests).
    ///
    /// # Panics
    ///
    /// As [`Bank::new`]; [`Bank::try_with_clock`] does not.
    pub fn with_clock(profile: Profile, clock: impl Clock + 'static) -> Bank {
        Self::try_with_clock(profile, clock).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Bank::new`], with a partition table the allocator refuses
    /// returned as a [`ConfigError`] naming its dependency, never an abort
    /// or a panic (C9). What the C and Python constructors use.
    pub fn try_new(profile: Profile) -> Result<Bank, ConfigError> {
        Self::try_with_clock(profile, MonotonicClock::new())
    }

    /// [`Bank::with_clock`], fallible as [`Bank::try_new`] is.
    pub fn try_with_clock(
        profile: Profile,
        clock: impl Clock + 'static,
    ) -> Result<Bank, ConfigError> {
        let clock: StdArc<dyn Clock> = StdArc::new(clock);
        let events = StdArc::new(EventBus::new());
        let sweeper = StdArc::new(Sweeper {
            deps: OnceLock::new(),
            started: AtomicBool::new(false),
            manual: clock.as_manual().is_some(),
        });
        let deps = profile
            .dependencies()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Dependency::try_new(
                    i as u32,
                    c.clone(),
                    clock.clone(),
                    events.clone(),
                    sweeper.clone(),
                )
            })
            .collect::<Result<Vec<Dependency>, ConfigError>>()?;
        let _ = sweeper
            .deps
            .set(deps.iter().map(|d| StdArc::downgrade(&d.inner)).collect());
        if let Some(manual) = clock.as_manual() {
            let observer: StdArc<dyn Advanced> = sweeper.clone();
            manual.observe(StdArc::downgrade(&observer));
        }
        let by_name = deps
            .iter()
            .map(|d| (d.name().to_string(), d.id()))
            .collect();
        Ok(Bank {
            deps,
            by_name,
            clock,
            events,
        })
    }

    /// A dependency by name; resolve once, then clone the handle freely.
    pub fn dependency(&self, name: &str) -> Option<Dependency> {
        self.dependency_id(name)
            .and_then(|i| self.dependency_by_id(i))
            .cloned()
    }

    /// A dependency's id (its index in the profile).
    pub fn dependency_id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// A dependency by id, borrowed.
    #[inline]
    pub fn dependency_by_id(&self, id: u32) -> Option<&Dependency> {
        self.deps.get(id as usize)
    }

    /// The dependency names, in profile order.
    pub fn dependency_names(&self) -> Vec<&str> {
        self.deps.iter().map(Dependency::name).collect()
    }

    /// Now, on the bank's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The manual clock, if the bank runs on one.
    pub fn manual_clock(&self) -> Option<&ManualClock> {
        self.clock.as_manual()
    }

    /// Every live partition's metrics (C14).
    pub fn metrics(&self) -> MetricsSnapshot {
        let now = self.now();
        MetricsSnapshot {
            dependencies: self.deps.iter().map(|d| d.snapshot(now)).collect(),
        }
    }

    /// The metrics as Prometheus text exposition (C14).
    pub fn prometheus(&self) -> String {
        self.metrics().prometheus()
    }

    /// Breakers open past their recovery bound (C15).
    pub fn stuck(&self) -> Vec<Stuck> {
        let mut out = Vec::new();
        for d in &self.deps {
            d.stuck_list(&mut out);
        }
        out
    }

    /// Adds a listener for transitions, resets, forced opens, operator
    /// trips and half-opens, and stuck alerts (C16, C19). Listeners run on a dispatcher thread, in order; a slow
    /// listener delays other events, never admission. Events beyond the
    /// queue's bound are dropped and counted ([`Bank::events_dropped`]).
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        self.events.subscribe(StdArc::new(listener));
    }

    /// Waits until every event queued so far has been delivered to every
    /// listener, or `timeout` passes; true when delivered. For tests and
    /// shutdown, never for the hot path.
    pub fn flush_events(&self, timeout: Duration) -> bool {
        self.events.flush(timeout)
    }

    /// Events dropped because listeners fell behind.
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped()
    }
}
