//! A bank of breakers built from a profile: [`Bank`].

use crate::clock::Advanced;
use crate::clock::{Clock, Instant, ManualClock, MonotonicClock};
use crate::dependency::*;
use crate::events::{Event, EventBus, EventKind};
use crate::metrics::MetricsSnapshot;
use crate::profile::{ConfigError, DependencyConfig, PartitionSeries, Profile};
use crate::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering, StdArc};
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// A bank of breakers built from a profile: one per dependency and
/// partition. `Send + Sync`; share it by reference or `Arc`.
pub struct Bank {
    /// Every dependency the bank has had, by id.
    ids: Ids,
    /// The profile in force: which ids it names. Held through a reload,
    /// so reloads are one at a time.
    live: Mutex<Live>,
    clock: StdArc<dyn Clock>,
    events: StdArc<EventBus>,
    sweeper: StdArc<Sweeper>,
}

/// The dependencies of the profile in force.
#[derive(Clone, Default)]
struct Live {
    /// Ids in profile order.
    order: Vec<u32>,
    by_name: HashMap<String, u32>,
    /// The profile's `metrics.partitions` (C14).
    partition_series: PartitionSeries,
}

/// Every dependency a bank has had, by id: the profile's own, then those
/// reloads added (or started afresh). Ids are never reused and entries
/// never removed, so a `&Dependency` lives as long as the bank and a C
/// caller's id of a removed dependency still finds it (to be refused with
/// `UnknownDependency`, and its outstanding permits recorded harmlessly).
/// The first profile's dependencies are a plain slice: looking one up by
/// id costs what indexing a vector does.
struct Ids {
    first: Box<[Dependency]>,
    /// Segment `k` holds `SEGMENT << k` ids, from `first.len() +
    /// SEGMENT * (2^k - 1)`.
    more: [OnceLock<Box<[OnceLock<Dependency>]>>; SEGMENTS],
    /// Ids given so far.
    len: AtomicU32,
}

const SEGMENT: usize = 8;
const SEGMENTS: usize = 20;

impl Ids {
    fn new(first: Vec<Dependency>) -> Self {
        let len = AtomicU32::new(first.len() as u32);
        Ids {
            first: first.into_boxed_slice(),
            more: [const { OnceLock::new() }; SEGMENTS],
            len,
        }
    }

    /// The segment and index of the `n`th id after the first profile's.
    fn locate(n: usize) -> (usize, usize) {
        let k = (n / SEGMENT + 1).ilog2() as usize;
        (k, n - SEGMENT * ((1 << k) - 1))
    }

    #[inline]
    fn get(&self, id: u32) -> Option<&Dependency> {
        let id = id as usize;
        if let Some(d) = self.first.get(id) {
            return Some(d);
        }
        let (k, i) = Self::locate(id - self.first.len());
        self.more.get(k)?.get()?.get(i)?.get()
    }

    /// The id the next [`Ids::push`] gives.
    fn next(&self) -> u32 {
        // Relaxed: pushes are serialised by the bank's `live` lock.
        self.len.load(Ordering::Relaxed)
    }

    /// Adds `d`, whose id is [`Ids::next`]. Only under the `live` lock.
    fn push(&self, d: Dependency) {
        let id = self.next();
        debug_assert_eq!(d.id(), id);
        let (k, i) = Self::locate(id as usize - self.first.len());
        let segment = self.more[k].get_or_init(|| {
            (0..SEGMENT << k)
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        let _ = segment[i].set(d);
        // Relaxed: as in `next`; readers find the entry through its
        // `OnceLock`, which publishes it.
        self.len.store(id + 1, Ordering::Relaxed);
    }

    /// The ids a reload may still add: every segment's worth.
    fn room(&self) -> usize {
        let total = self.first.len() + SEGMENT * ((1 << SEGMENTS) - 1);
        total - self.next() as usize
    }
}

impl fmt::Debug for Bank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bank")
            .field("dependencies", &self.dependency_names())
            .finish()
    }
}

/// What a reload does with one dependency of the new profile.
enum Plan {
    /// Same name and isolation, and it fits the partitions it has: the
    /// new config in place.
    Retune(u32, DependencyConfig),
    /// New, or it needs new partitions (its isolation, trip policy kind or
    /// `window` changed, or its `max_tenants` outgrew its table): a fresh
    /// dependency (and the old one, if any, retired).
    Fresh(DependencyConfig, Option<u32>),
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
            deps: Default::default(),
            running: AtomicU64::new(0),
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
        sweeper.add(&deps);
        if let Some(manual) = clock.as_manual() {
            let observer: StdArc<dyn Advanced> = sweeper.clone();
            manual.observe(StdArc::downgrade(&observer));
        }
        let live = Live {
            order: deps.iter().map(Dependency::id).collect(),
            by_name: deps
                .iter()
                .map(|d| (d.name().to_string(), d.id()))
                .collect(),
            partition_series: profile.partition_series(),
        };
        Ok(Bank {
            ids: Ids::new(deps),
            live: Mutex::new(live),
            clock,
            events,
            sweeper,
        })
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The dependencies in force, in profile order.
    fn live_deps(&self) -> Vec<&Dependency> {
        let order = self.live().order.clone();
        order
            .into_iter()
            .filter_map(|id| self.ids.get(id))
            .collect()
    }

    /// A dependency by name; resolve once, then clone the handle freely.
    /// After a reload, the dependency the profile in force names (C20).
    pub fn dependency(&self, name: &str) -> Option<Dependency> {
        self.dependency_id(name)
            .and_then(|i| self.dependency_by_id(i))
            .cloned()
    }

    /// A dependency's id: its index in the profile the bank was built
    /// with; a dependency a reload added (or started afresh, C20) gets the
    /// next unused id. Ids are never reused.
    pub fn dependency_id(&self, name: &str) -> Option<u32> {
        self.live().by_name.get(name).copied()
    }

    /// A dependency by id, borrowed. A dependency a reload removed is
    /// still found, retired: it refuses with
    /// [`AdmitError::UnknownDependency`](crate::AdmitError::UnknownDependency).
    #[inline]
    pub fn dependency_by_id(&self, id: u32) -> Option<&Dependency> {
        self.ids.get(id)
    }

    /// The dependency names, in the order of the profile in force.
    pub fn dependency_names(&self) -> Vec<&str> {
        self.live_deps().into_iter().map(Dependency::name).collect()
    }

    /// Puts a new profile in force without losing what the breakers know
    /// (C20). All or nothing: every problem is found before anything
    /// changes, and the error names each one. A valid profile is refused
    /// only when the allocator refuses a new partition table (the error
    /// names the dependency) or the bank has used up its ids.
    ///
    /// - A dependency whose name and isolation are unchanged keeps every
    ///   partition's state, counters, permits in flight and stale cache;
    ///   the next decision uses its new thresholds, durations, budgets and
    ///   fallback. An open breaker keeps the open-until it has.
    /// - A lower `max_tenants` evicts at once in C9's order, never an open,
    ///   half-open or forced-open partition (newcomers go to the overflow
    ///   until the table is within the bound).
    /// - A removed dependency refuses with
    ///   [`AdmitError::UnknownDependency`](crate::AdmitError::UnknownDependency)
    ///   through every handle taken before; its permits can still be
    ///   recorded or dropped, harmlessly.
    /// - An added dependency starts fresh, under a new id. So does one
    ///   that needs new partitions: its `isolation` changed, its trip
    ///   policy changed kind (`consecutive_failures` ↔ `failure_rate`) or
    ///   `window`, or its `max_tenants` rose above the size its table was
    ///   built with. Its old handles refuse as a removed one's do (their
    ///   permits are recorded harmlessly), its state and counters start
    ///   over, and [`Bank::dependency`] finds the new one. (A `max_tenants`
    ///   within the table's size is applied in place, as above.)
    ///
    /// Memory: a removed (or restarted) dependency's partitions stay
    /// allocated until the bank is dropped, since its id keeps answering
    /// (C callers resolve by id on every call), and each reload keeps the
    /// previous tuning of every dependency it kept (a few hundred bytes);
    /// a bank whose reloads add and remove (or restart) dependencies
    /// without end grows with them. The new profile's `memory_limit`
    /// bounds its own tables: a restarted dependency's old table comes on
    /// top.
    ///
    /// Listeners receive a [`EventKind::Reload`](crate::EventKind::Reload)
    /// event for each dependency kept, added or removed. The healthy
    /// admission path reads nothing a reload writes but one flag word.
    ///
    /// ```
    /// use breakerbank::{Bank, Profile};
    /// let profile = |n: u32| Profile::from_yaml(&format!(r#"
    /// dependencies:
    ///   payments_client:
    ///     isolation: global
    ///     trip: {{consecutive_failures: {n}}}
    ///     open_duration: 30s
    ///     half_open: {{probe_budget: 1, success_threshold: 1}}
    ///     fallback: {{kind: error, code: PAYMENT_UNAVAILABLE}}
    ///     recovery_bound: 5m
    /// "#)).unwrap();
    /// let bank = Bank::new(profile(5));
    /// let payments = bank.dependency("payments_client").unwrap();
    /// bank.reload(profile(3)).unwrap();
    /// assert_eq!(payments.config().trip, breakerbank::TripPolicy::ConsecutiveFailures(3));
    /// ```
    pub fn reload(&self, profile: Profile) -> Result<(), ConfigError> {
        let mut live = self.live();
        let mut problems = Vec::new();
        let mut plans = Vec::new();
        let mut fresh = 0usize;
        for c in profile.dependencies() {
            let old = live.by_name.get(&c.name).and_then(|&id| self.ids.get(id));
            match old {
                Some(d) if d.inner.isolation == c.isolation && d.fits(c) => {
                    plans.push(Plan::Retune(d.id(), c.clone()));
                }
                _ => {
                    fresh += 1;
                    plans.push(Plan::Fresh(c.clone(), old.map(Dependency::id)));
                }
            }
        }
        if fresh > self.ids.room() {
            problems.push(format!(
                "this reload adds {fresh} dependencies; the bank has ids for {} more",
                self.ids.room()
            ));
        }
        if !problems.is_empty() {
            return Err(ConfigError::many(problems));
        }
        // Fresh dependencies are built before anything changes: a table
        // the allocator refuses leaves the bank as it was.
        let mut next = self.ids.next();
        let mut built = Vec::with_capacity(plans.len());
        for plan in plans {
            built.push(match plan {
                Plan::Retune(id, c) => (id, Some(c), None, None),
                Plan::Fresh(c, old) => {
                    let d = Dependency::try_new(
                        next,
                        c,
                        self.clock.clone(),
                        self.events.clone(),
                        self.sweeper.clone(),
                    )?;
                    next += 1;
                    (d.id(), None, Some(d), old)
                }
            });
        }
        // Commit: nothing below can fail.
        let mut new = Live {
            partition_series: profile.partition_series(),
            ..Live::default()
        };
        let mut touched = Vec::new();
        let mut added = Vec::new();
        for (id, retune, fresh, replaced) in built {
            if let Some(d) = fresh {
                added.push(d.clone());
                self.ids.push(d);
            }
            if let Some(old) = replaced.and_then(|id| self.ids.get(id)) {
                old.retire();
            }
            let d = self.ids.get(id).expect("kept or just pushed");
            if let Some(c) = retune {
                d.retune(c);
            }
            new.order.push(id);
            new.by_name.insert(d.name().to_string(), id);
            touched.push(d.name().to_string());
        }
        self.sweeper.add(&added);
        for &id in &live.order {
            let d = self.ids.get(id).expect("live");
            if !new.by_name.contains_key(d.name()) {
                d.retire();
                touched.push(d.name().to_string());
            }
        }
        *live = new;
        drop(live);
        let at = self.now();
        for dependency in touched {
            self.events.emit(|| Event {
                kind: EventKind::Reload,
                dependency,
                partition: "*".to_string(),
                at,
                from: None,
                to: None,
            });
        }
        Ok(())
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
        let partition_series = self.live().partition_series;
        MetricsSnapshot {
            partition_series,
            dependencies: self
                .live_deps()
                .into_iter()
                .map(|d| d.snapshot(now))
                .collect(),
            events_dropped: self.events_dropped(),
        }
    }

    /// The metrics as Prometheus text exposition (C14): OpenMetrics text,
    /// to be served with [`OPENMETRICS_CONTENT_TYPE`](crate::OPENMETRICS_CONTENT_TYPE).
    pub fn prometheus(&self) -> String {
        self.metrics().prometheus()
    }

    /// Breakers open past their recovery bound (C15).
    pub fn stuck(&self) -> Vec<Stuck> {
        let mut out = Vec::new();
        for d in self.live_deps() {
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
