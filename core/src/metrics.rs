//! Metrics (C14): per-partition counters, the snapshot, Prometheus text.
//!
//! Counters live in a [`Stats`] block that a partition allocates the first
//! time something other than a healthy call happens to it, so a healthy
//! partition costs no counter memory and the closed healthy path writes no
//! shared memory at all. Healthy admissions are not counted.

use crate::clock::Instant;
use crate::outcome::State;
use crate::profile::PartitionSeries;
use crate::state::word::Phase;
use crate::sync::{thread_index, AtomicBool, AtomicU64, CachePadded, Mutex, Ordering};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use prometheus_client::registry::Unit;
use std::fmt;
use std::sync::PoisonError;
use std::time::Duration;

/// Sentinel for "no episode under way".
const NO_EPISODE: u64 = u64::MAX;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// One partition's event counters. Relaxed throughout: they order
        /// nothing and are read only by snapshots.
        #[derive(Debug)]
        pub(crate) struct Stats {
            /// The generation its owner's tenure of a tenant slot began at
            /// (see `Table::tenure`); 0 for a partition outside a table.
            /// Counters are never handed from one owner to the next: a new
            /// owner gets a block of its own, so a count racing the
            /// hand-over can only reach the block of the owner it was for.
            pub(crate) since: u64,
            $(pub(crate) $name: AtomicU64,)*
            /// Sum of finished trip-to-close episodes, ns.
            pub(crate) open_ns_total: AtomicU64,
            /// Start of the current trip-to-close episode, or `NO_EPISODE`.
            pub(crate) episode_start: AtomicU64,
            /// When the current episode of any phase began (C18): the
            /// last close or reset, forced open, or the trip that began
            /// an open / half-open one; `NO_EPISODE` until the first.
            pub(crate) began: AtomicU64,
            /// Episode start a stuck alert was announced for, or `NO_EPISODE`.
            pub(crate) stuck_announced: AtomicU64,
            /// When the current episode becomes stuck (C15), or `NO_EPISODE`.
            pub(crate) stuck_after: AtomicU64,
            /// Per-thread stripes of the flood counters (see [`Flood`]);
            /// empty but for global partitions.
            owned: Box<[CachePadded<[AtomicU64; FLOOD_KINDS]>]>,
            /// What the episode fields account for; held while they are
            /// updated (see [`Stats::on_transition`]).
            accounted: Mutex<Accounted>,
            /// Whether these counts were added to the dependency's
            /// counts of owners gone (see [`Stats::absorb_into`]).
            absorbed: AtomicBool,
        }

        impl Default for Stats {
            fn default() -> Self {
                Self {
                    since: 0,
                    $($name: AtomicU64::new(0),)*
                    open_ns_total: AtomicU64::new(0),
                    episode_start: AtomicU64::new(NO_EPISODE),
                    began: AtomicU64::new(NO_EPISODE),
                    stuck_announced: AtomicU64::new(NO_EPISODE),
                    stuck_after: AtomicU64::new(NO_EPISODE),
                    owned: Box::default(),
                    accounted: Mutex::new(Accounted::default()),
                    absorbed: AtomicBool::new(false),
                }
            }
        }

        impl Stats {
            /// The counters of a tenant slot's owner whose tenure began at
            /// generation `since`.
            pub(crate) fn for_owner(since: u64) -> Self {
                Self {
                    since,
                    ..Self::default()
                }
            }

            /// Whether nothing was ever counted here.
            pub(crate) fn is_clear(&self) -> bool {
                $(self.$name.load(Ordering::Relaxed) == 0 &&)*
                    self.open_ns_total.load(Ordering::Relaxed) == 0
                    && self.episode_start.load(Ordering::Relaxed) == NO_EPISODE
                    && self
                        .owned
                        .iter()
                        .flat_map(|s| s.iter())
                        .all(|c| c.load(Ordering::Relaxed) == 0)
            }

            /// Adds these counts to `gone`, the dependency's counts of
            /// owners gone, once: the owner of these counts has left its
            /// slot (evicted), so the dependency's sums keep them (C14:
            /// a per-dependency counter never goes down). Its time open
            /// is all finished: only a closed partition is evicted.
            pub(crate) fn absorb_into(&self, gone: &Stats) {
                // AcqRel: one absorber, which sees every count made
                // before another thread's absorb attempt.
                if self.absorbed.swap(true, Ordering::AcqRel) {
                    return;
                }
                // Relaxed: statistics, as every count.
                $(gone.$name.fetch_add(
                    self.$name.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );)*
                gone.open_ns_total
                    .fetch_add(self.open_ns_total.load(Ordering::Relaxed), Ordering::Relaxed);
                for kind in [Flood::Open, Flood::ProbeBudget, Flood::ForcedOpen, Flood::Failure] {
                    let striped: u64 = self
                        .owned
                        .iter()
                        .map(|s| s[kind as usize].load(Ordering::Relaxed))
                        .fold(0, u64::wrapping_add);
                    gone.shared_flood(kind).fetch_add(striped, Ordering::Relaxed);
                }
            }
        }
    };
}

counters!(
    opened_total,
    half_opened_total,
    closed_total,
    rejected_open_total,
    probe_rejects_total,
    forced_open_rejects_total,
    deadline_expired_total,
    failures_total,
    cancelled_total,
    late_records_total,
    fallback_stale_total,
    fallback_degraded_total,
    fallback_error_total,
    fallback_failures_total,
    partition_overflow_total,
    would_trip_total,
);

#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    // Relaxed: a statistic, orders nothing.
    c.fetch_add(1, Ordering::Relaxed);
}

/// The counters a breaker bumps on every call of a kind that can come in
/// floods: refusals of an open, half-open or forced-open breaker, and the
/// failures before a trip. They decide what those calls cost.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flood {
    Open = 0,
    ProbeBudget = 1,
    ForcedOpen = 2,
    Failure = 3,
}
const FLOOD_KINDS: usize = 4;

/// A dependency's successes (`calls_total{outcome="success"}`, C14): the
/// one count on the healthy path, which the other outcomes' counters
/// cannot give. Per-thread stripes: the holder of a thread index counts
/// with a plain load and store on a line no other thread writes, so a
/// success stays free of read-modify-writes and of shared lines.
///
/// Its atomics are std's even under loom: a statistic that orders nothing,
/// on the path every model takes most, where a modelled one would only
/// multiply the executions to explore.
pub(crate) struct Successes {
    /// Sized by the type, so the index's check against `MAX` is the
    /// bounds check.
    stripes: Box<[CachePadded<StatU64>; thread_index::MAX]>,
    /// Threads without an index count here.
    shared: StatU64,
}

/// A counter's atomic that need not be modelled (see [`Successes`]).
#[allow(clippy::disallowed_types)]
type StatU64 = std::sync::atomic::AtomicU64;

impl Successes {
    pub(crate) fn new() -> Self {
        Self {
            stripes: Box::new(std::array::from_fn(|_| CachePadded::new(StatU64::new(0)))),
            shared: StatU64::new(0),
        }
    }

    /// Counts one success.
    #[inline(always)]
    pub(crate) fn count(&self) {
        match self.stripes.get(thread_index::cached()) {
            Some(c) => Self::count_in(c),
            None => self.count_first(),
        }
    }

    #[inline(always)]
    fn count_in(c: &StatU64) {
        // This thread is the stripe's only writer (see `thread_index`):
        // a load and a store count exactly.
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// A thread's first count, or one of a thread without an index.
    #[cold]
    #[inline(never)]
    fn count_first(&self) {
        match self.stripes.get(thread_index::cached_first()) {
            Some(c) => Self::count_in(c),
            None => {
                // Relaxed: a statistic.
                self.shared.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Successes so far, every stripe included.
    pub(crate) fn total(&self) -> u64 {
        self.stripes
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .fold(self.shared.load(Ordering::Relaxed), u64::wrapping_add)
    }
}

/// The upper bounds (seconds) of `call_duration_seconds`' buckets, `+Inf`
/// aside: Prometheus's default buckets, which span what a `slow_call` of
/// milliseconds to seconds needs.
pub const DURATION_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A dependency's call durations, where calls are timed anyway (a
/// dependency with `slow_call` reads the clock at admission and record).
pub(crate) struct Durations {
    /// Per bucket of [`DURATION_BUCKETS`], then `+Inf`: calls whose
    /// duration falls in it (not cumulative).
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Durations {
    pub(crate) fn new() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Counts one call that took `took`.
    pub(crate) fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let i = DURATION_BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(DURATION_BUCKETS.len());
        bump(&self.buckets[i]);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: a statistic.
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn read(&self) -> Histogram {
        let mut cumulative = 0;
        let buckets = DURATION_BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(&self.buckets)
            .map(|(le, n)| {
                cumulative += n.load(Ordering::Relaxed);
                (le, cumulative)
            })
            .collect();
        Histogram {
            count: cumulative,
            sum_seconds: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)).as_secs_f64(),
            buckets,
        }
    }
}

/// What a dependency keeps for its per-dependency series (C14), besides
/// its partitions' counters.
pub(crate) struct DepCounts {
    pub(crate) successes: Successes,
    pub(crate) durations: Durations,
    /// The counter sums last reported, in [`METRICS`] order: a sum read
    /// while a partition is being evicted may miss it for that read (its
    /// counts are on their way to the counts of owners gone), and a
    /// counter must never be seen to go down.
    reported: Mutex<Vec<f64>>,
}

impl DepCounts {
    pub(crate) fn new() -> Self {
        Self {
            successes: Successes::new(),
            durations: Durations::new(),
            reported: Mutex::new(vec![0.0; METRICS.len()]),
        }
    }

    /// The per-dependency totals of `partitions` (the live ones), with
    /// `gone` (the counts of owners evicted, as [`PartitionMetrics::gone`]
    /// reads them, if the dependency has a table); `timed`: whether the dependency times its calls.
    ///
    /// `gone` is read before the partitions: a block absorbed in between
    /// is then missed rather than counted twice, and the high-water mark
    /// hides the miss until the next read counts it.
    pub(crate) fn totals(
        &self,
        partitions: &[PartitionMetrics],
        gone: Option<PartitionMetrics>,
        timed: bool,
    ) -> DependencyTotals {
        let mut sums: Vec<(&'static str, f64)> = METRICS.iter().map(|m| (m.name, 0.0)).collect();
        for p in partitions.iter().chain(gone.as_ref()) {
            for (sum, (_, v)) in sums.iter_mut().zip(p.values()) {
                sum.1 += v;
            }
        }
        {
            let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
            for ((name, sum), last) in sums.iter_mut().zip(reported.iter_mut()) {
                // Gauges (the current episode, stuck) may go down.
                if name.ends_with("_total") {
                    *sum = sum.max(*last);
                    *last = *sum;
                }
            }
        }
        let get = |name: &str| {
            sums.iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |&(_, v)| v as u64)
        };
        let calls = Calls {
            success: self.successes.total(),
            failure: get("failures_total"),
            cancelled: get("cancelled_total"),
            refused: get("rejected_open_total")
                + get("probe_rejects_total")
                + get("forced_open_rejects_total"),
        };
        let partitions = State::ALL
            .iter()
            .map(|&s| (s, partitions.iter().filter(|p| p.state == s).count() as u64))
            .collect();
        let durations = self.durations.read();
        DependencyTotals {
            sums,
            partitions,
            calls,
            call_durations: (timed || durations.count > 0).then_some(durations),
        }
    }
}

impl Stats {
    /// Counters whose hot counts have per-thread stripes: for a global
    /// partition, where every caller meets the same breaker.
    pub(crate) fn striped() -> Self {
        Self {
            owned: (0..thread_index::MAX)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            ..Self::default()
        }
    }

    /// Counts one call of a hot `kind`.
    #[inline]
    pub(crate) fn count_flood(&self, kind: Flood) {
        if !self.owned.is_empty() {
            if let Some(stripe) = thread_index::get().and_then(|i| self.owned.get(i)) {
                let c = &stripe[kind as usize];
                // This thread is the stripe's only writer (see
                // `thread_index`): a load and a store count exactly.
                c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                return;
            }
        }
        bump(self.shared_flood(kind));
    }

    /// The shared (unstriped) counter of a hot `kind`.
    fn shared_flood(&self, kind: Flood) -> &AtomicU64 {
        match kind {
            Flood::Open => &self.rejected_open_total,
            Flood::ProbeBudget => &self.probe_rejects_total,
            Flood::ForcedOpen => &self.forced_open_rejects_total,
            Flood::Failure => &self.failures_total,
        }
    }

    /// Calls of a hot `kind` so far, every stripe included.
    pub(crate) fn flood_total(&self, kind: Flood) -> u64 {
        let shared = self.shared_flood(kind);
        self.owned
            .iter()
            .map(|s| s[kind as usize].load(Ordering::Relaxed))
            .fold(shared.load(Ordering::Relaxed), u64::wrapping_add)
    }
    /// Accounts a transition into `to` (of `generation`) at `now`:
    /// transition counts, and the trip-to-close episode (C14, C15).
    ///
    /// Threads account their transitions after their CASes, so two can
    /// arrive out of order (a close after the trip that followed it).
    /// The episode fields are updated under a lock, taken only here (the
    /// refusal path reads them without it), and only by the newest
    /// transition: one older than what is already accounted changes the
    /// counts alone, but for a trip whose episode nothing began and no
    /// close accounted since has ended (its half-open came first), which
    /// begins it. A trip that finds an episode still running (its close
    /// came late and was skipped) first adds that episode's time.
    pub(crate) fn on_transition(
        &self,
        from: Phase,
        to: Phase,
        now: Instant,
        bound: Duration,
        generation: u64,
    ) {
        match to {
            Phase::Open => bump(&self.opened_total),
            Phase::HalfOpen => bump(&self.half_opened_total),
            Phase::Closed if from != Phase::Closed => bump(&self.closed_total),
            _ => {}
        }
        let mut accounted = self
            .accounted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if generation <= accounted.newest {
            // Overtaken by a later transition's account. A trip still
            // begins its episode if no close accounted since ended it
            // and nothing began one: else a breaker whose half-open
            // (or re-trip) was accounted first would never be stuck and
            // count no open time (C14, C15).
            let trip = matches!(
                (from, to),
                (
                    Phase::Closed | Phase::ForcedOpen,
                    Phase::Open | Phase::HalfOpen
                )
            );
            if trip
                && generation > accounted.ended
                && self.episode_start.load(Ordering::Relaxed) == NO_EPISODE
            {
                self.began.store(now.as_nanos(), Ordering::Relaxed);
                self.episode_start.store(now.as_nanos(), Ordering::Relaxed);
                self.stuck_after
                    .store((now + bound).as_nanos(), Ordering::Relaxed);
            }
            return;
        }
        accounted.newest = generation;
        if matches!(to, Phase::Closed | Phase::ForcedOpen) {
            accounted.ended = generation;
        }
        if begins_episode(from, to) {
            self.began.store(now.as_nanos(), Ordering::Relaxed);
        }
        // Episodes run from the trip to the close (half-open included).
        match (from, to) {
            (Phase::Closed | Phase::ForcedOpen, Phase::Open | Phase::HalfOpen) => {
                let start = self.episode_start.swap(now.as_nanos(), Ordering::Relaxed);
                if start != NO_EPISODE {
                    let d = now.as_nanos().saturating_sub(start);
                    self.open_ns_total.fetch_add(d, Ordering::Relaxed);
                }
                let due = (now + bound).as_nanos();
                self.stuck_after.store(due, Ordering::Relaxed);
            }
            (_, Phase::Closed | Phase::ForcedOpen) => {
                self.stuck_after.store(NO_EPISODE, Ordering::Relaxed);
                let start = self.episode_start.swap(NO_EPISODE, Ordering::Relaxed);
                if start != NO_EPISODE {
                    let d = now.as_nanos().saturating_sub(start);
                    self.open_ns_total.fetch_add(d, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// Whether the current episode may have reached its recovery bound.
    #[inline]
    pub(crate) fn stuck_due(&self, now: Instant) -> bool {
        now.as_nanos() >= self.stuck_after.load(Ordering::Relaxed)
    }

    /// When the current episode of any phase began (see
    /// [`begins_episode`]), if this block saw it begin.
    pub(crate) fn began(&self) -> Option<Instant> {
        let s = self.began.load(Ordering::Relaxed);
        (s != NO_EPISODE).then(|| Instant::from_nanos(s))
    }

    /// Start of the current trip-to-close episode.
    pub(crate) fn episode_start(&self) -> Option<Instant> {
        let s = self.episode_start.load(Ordering::Relaxed);
        (s != NO_EPISODE).then(|| Instant::from_nanos(s))
    }

    /// When the current episode becomes stuck under `bound`, the recovery
    /// bound in force now, if its alert is still to come.
    ///
    /// The due time is computed from `bound` rather than read back from
    /// `stuck_after`, which holds the bound of the episode's trip: a
    /// reload may have changed it since (C20), and an alert must come at
    /// the bound in force (C15). `stuck_after` is brought up to date on
    /// the way, so the refusal path's check follows the new bound too.
    pub(crate) fn stuck_pending(&self, bound: Duration) -> Option<u64> {
        // Relaxed throughout: `stuck_after` is a hint for the refusal
        // path, and the sweep decides with `check_stuck`, which reads
        // the phase and the episode again.
        let seen = self.stuck_after.load(Ordering::Relaxed);
        let start = self.episode_start.load(Ordering::Relaxed);
        if start == NO_EPISODE || self.stuck_announced.load(Ordering::Relaxed) == start {
            return None;
        }
        let due = (Instant::from_nanos(start) + bound).as_nanos();
        if seen != NO_EPISODE && seen != due {
            // From the value read before the episode start: a transition
            // in between stores its own due and this CAS fails.
            let _ =
                self.stuck_after
                    .compare_exchange(seen, due, Ordering::Relaxed, Ordering::Relaxed);
        }
        Some(due)
    }

    /// True exactly once per episode once it has lasted `bound` (C15).
    pub(crate) fn take_stuck_alert(&self, now: Instant, bound: Duration) -> bool {
        let Some(start) = self.episode_start() else {
            return false;
        };
        if now.saturating_duration_since(start) < bound {
            return false;
        }
        let prev = self
            .stuck_announced
            .swap(start.as_nanos(), Ordering::Relaxed);
        prev != start.as_nanos()
    }
}

/// What a partition's episode fields account for (see
/// [`Stats::on_transition`]): the generation of the newest transition
/// accounted, and of the newest close or forced open among them (the
/// end of the last episode).
#[derive(Debug, Default)]
struct Accounted {
    newest: u64,
    ended: u64,
}

/// Whether a transition from `from` to `to` begins an episode as
/// `inspect` reports it (C18): every close (a reset of a closed breaker
/// included) and every forced open begins one; so does leaving closed or
/// forced open for open or half-open (a trip, an operator's half-open).
/// Re-trips from half-open and the end of an open period do not: they
/// are part of the trip-to-close episode.
pub(crate) fn begins_episode(from: Phase, to: Phase) -> bool {
    match to {
        Phase::Closed | Phase::ForcedOpen => true,
        Phase::Open | Phase::HalfOpen => matches!(from, Phase::Closed | Phase::ForcedOpen),
        _ => false,
    }
}

/// One partition's metrics, with the names of API.md.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionMetrics {
    /// Tenant id, `global` or `<overflow>`.
    pub partition: String,
    /// Current state.
    pub state: State,
    /// Time open, all episodes, trip to close (half-open included).
    pub open_seconds_total: f64,
    /// Time open in the current episode (0 when closed).
    pub open_episode_seconds: f64,
    /// Transitions into open (trips and re-trips).
    pub opened_total: u64,
    /// Transitions into half-open.
    pub half_opened_total: u64,
    /// Transitions into closed (recoveries and resets).
    pub closed_total: u64,
    /// Calls refused because the breaker was open.
    pub rejected_open_total: u64,
    /// Calls refused because every probe slot was taken.
    pub probe_rejects_total: u64,
    /// Calls refused because of a forced open.
    pub forced_open_rejects_total: u64,
    /// Admissions whose deadline had expired.
    pub deadline_expired_total: u64,
    /// Failures recorded (slow calls included).
    pub failures_total: u64,
    /// Cancelled outcomes (and dropped permits).
    pub cancelled_total: u64,
    /// Outcomes of permits from an older generation.
    pub late_records_total: u64,
    /// Stale values served.
    pub fallback_stale_total: u64,
    /// Degraded behaviours served.
    pub fallback_degraded_total: u64,
    /// Error fallbacks served.
    pub fallback_error_total: u64,
    /// Fallbacks that could not serve (C4).
    pub fallback_failures_total: u64,
    /// Admissions routed to the overflow partition.
    pub partition_overflow_total: u64,
    /// Times the trip policy fired in observe mode and the breaker stayed
    /// closed (C22).
    pub would_trip_total: u64,
    /// Open past the recovery bound (C15).
    pub stuck: bool,
}

impl PartitionMetrics {
    pub(crate) fn new(
        partition: String,
        phase: Phase,
        stats: Option<&Stats>,
        now: Instant,
        bound: Duration,
    ) -> Self {
        let state = State::from_phase(phase);
        let get = |f: fn(&Stats) -> &AtomicU64| stats.map_or(0, |s| f(s).load(Ordering::Relaxed));
        let hot = |kind| stats.map_or(0, |s| s.flood_total(kind));
        let episode = stats
            .and_then(Stats::episode_start)
            .filter(|_| matches!(state, State::Open | State::HalfOpen))
            .map(|s| now.saturating_duration_since(s));
        let finished = Duration::from_nanos(get(|s| &s.open_ns_total));
        let current = episode.unwrap_or_default();
        PartitionMetrics {
            partition,
            state,
            open_seconds_total: (finished + current).as_secs_f64(),
            open_episode_seconds: current.as_secs_f64(),
            opened_total: get(|s| &s.opened_total),
            half_opened_total: get(|s| &s.half_opened_total),
            closed_total: get(|s| &s.closed_total),
            rejected_open_total: hot(Flood::Open),
            probe_rejects_total: hot(Flood::ProbeBudget),
            forced_open_rejects_total: hot(Flood::ForcedOpen),
            deadline_expired_total: get(|s| &s.deadline_expired_total),
            failures_total: hot(Flood::Failure),
            cancelled_total: get(|s| &s.cancelled_total),
            late_records_total: get(|s| &s.late_records_total),
            fallback_stale_total: get(|s| &s.fallback_stale_total),
            fallback_degraded_total: get(|s| &s.fallback_degraded_total),
            fallback_error_total: get(|s| &s.fallback_error_total),
            fallback_failures_total: get(|s| &s.fallback_failures_total),
            partition_overflow_total: get(|s| &s.partition_overflow_total),
            would_trip_total: get(|s| &s.would_trip_total),
            stuck: episode.is_some_and(|d| d >= bound),
        }
    }

    /// The counts of a dependency's owners gone (`Table::gone`), read as
    /// a closed partition's: no episode runs in them.
    pub(crate) fn gone(gone: &Stats) -> Self {
        Self::new(
            String::new(),
            Phase::Closed,
            Some(gone),
            Instant::from_nanos(0),
            Duration::MAX,
        )
    }

    /// Every metric but `state`, as (API.md name, value), in API.md order
    /// (see [`METRICS`]).
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        METRICS
            .iter()
            .map(|m| (m.name, (m.read)(self).as_f64()))
            .collect()
    }
}

/// One dependency's live partitions and its per-dependency totals.
#[derive(Clone, Debug, PartialEq)]
pub struct DependencyMetrics {
    /// The dependency.
    pub name: String,
    /// Live partitions (evicted ones are gone).
    pub partitions: Vec<PartitionMetrics>,
    /// The dependency as a whole, evicted partitions included: the
    /// partition key `*` of the Python and C snapshots.
    pub totals: DependencyTotals,
}

/// A dependency's calls by outcome (C14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// Outcomes counted as successes.
    pub success: u64,
    /// Outcomes counted as failures (slow calls included).
    pub failure: u64,
    /// Cancelled outcomes (and dropped permits).
    pub cancelled: u64,
    /// Calls not admitted by the breaker: refused while open, for lack of
    /// a probe slot, or while forced open (an expired deadline is not a
    /// refusal: C10).
    pub refused: u64,
}

/// A histogram of call durations, as Prometheus reads one.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Calls observed.
    pub count: u64,
    /// Their durations summed, in seconds.
    pub sum_seconds: f64,
    /// `(upper bound in seconds, calls at most that long)`, cumulative,
    /// ending with `f64::INFINITY` (whose count is `count`).
    pub buckets: Vec<(f64, u64)>,
}

/// A dependency's series as a whole (C14): every partition metric summed
/// over its partitions, evicted ones included, so a counter never goes
/// down; how many partitions are in each state; calls by outcome; call
/// durations where the calls are timed.
#[derive(Clone, Debug, PartialEq)]
pub struct DependencyTotals {
    /// Every metric of [`METRICS`], in its order, summed (`stuck`: how
    /// many partitions are stuck now).
    pub sums: Vec<(&'static str, f64)>,
    /// Live partitions per state, in [`State::ALL`] order.
    pub partitions: Vec<(State, u64)>,
    /// Calls by outcome.
    pub calls: Calls,
    /// `call_duration_seconds`: only for a dependency whose calls are
    /// timed (one with `slow_call`), the only ones whose durations are
    /// measured anyway.
    pub call_durations: Option<Histogram>,
}

impl DependencyTotals {
    /// The sum of the metric `name` (a name of [`METRICS`]).
    pub fn get(&self, name: &str) -> Option<f64> {
        self.sums.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }
}

/// A point-in-time copy of every live partition's metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Per dependency, in profile order.
    pub dependencies: Vec<DependencyMetrics>,
    /// Which partitions the Prometheus exposition lists one by one (the
    /// profile's `metrics.partitions`).
    pub partition_series: PartitionSeries,
    /// Events the bank's bounded queue dropped since it was made
    /// ([`crate::Bank::events_dropped`]): listeners missed them (C16).
    /// Exposed as `breakerbank_events_dropped_total`, without labels.
    pub events_dropped: u64,
}

/// A metric's value in one partition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetricValue {
    /// A count of events.
    Count(u64),
    /// A duration in seconds.
    Seconds(f64),
    /// A condition, 0 or 1 where a number is needed.
    Flag(bool),
}

impl MetricValue {
    /// The value as a number (a flag is 0 or 1).
    pub fn as_f64(self) -> f64 {
        match self {
            MetricValue::Count(n) => n as f64,
            MetricValue::Seconds(s) => s,
            MetricValue::Flag(b) => f64::from(u8::from(b)),
        }
    }
}

/// One metric of a partition, `state` aside: its API.md name, its
/// Prometheus help text, and how to read it from [`PartitionMetrics`].
#[derive(Clone, Copy)]
pub struct Metric {
    /// The name, as every surface spells it.
    pub name: &'static str,
    /// What it counts, for the Prometheus exposition.
    pub help: &'static str,
    /// Its value in a partition.
    pub read: fn(&PartitionMetrics) -> MetricValue,
}

impl fmt::Debug for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metric").field("name", &self.name).finish()
    }
}

/// Every metric of a partition but `state`, in API.md order: the one list
/// the snapshot's values, the Prometheus exposition and the bindings name
/// them from.
pub const METRICS: [Metric; 19] = [
    Metric {
        name: "open_seconds_total",
        help: "Seconds open, trip to close, half-open included",
        read: |m| MetricValue::Seconds(m.open_seconds_total),
    },
    Metric {
        name: "open_episode_seconds",
        help: "Seconds open in the current episode",
        read: |m| MetricValue::Seconds(m.open_episode_seconds),
    },
    Metric {
        name: "opened_total",
        help: "Transitions into open",
        read: |m| MetricValue::Count(m.opened_total),
    },
    Metric {
        name: "half_opened_total",
        help: "Transitions into half-open",
        read: |m| MetricValue::Count(m.half_opened_total),
    },
    Metric {
        name: "closed_total",
        help: "Transitions into closed",
        read: |m| MetricValue::Count(m.closed_total),
    },
    Metric {
        name: "rejected_open_total",
        help: "Calls refused while open",
        read: |m| MetricValue::Count(m.rejected_open_total),
    },
    Metric {
        name: "probe_rejects_total",
        help: "Calls refused for lack of a probe slot",
        read: |m| MetricValue::Count(m.probe_rejects_total),
    },
    Metric {
        name: "forced_open_rejects_total",
        help: "Calls refused while forced open",
        read: |m| MetricValue::Count(m.forced_open_rejects_total),
    },
    Metric {
        name: "deadline_expired_total",
        help: "Admissions whose deadline had expired",
        read: |m| MetricValue::Count(m.deadline_expired_total),
    },
    Metric {
        name: "failures_total",
        help: "Failures recorded",
        read: |m| MetricValue::Count(m.failures_total),
    },
    Metric {
        name: "cancelled_total",
        help: "Cancelled outcomes",
        read: |m| MetricValue::Count(m.cancelled_total),
    },
    Metric {
        name: "late_records_total",
        help: "Outcomes from an older generation",
        read: |m| MetricValue::Count(m.late_records_total),
    },
    Metric {
        name: "fallback_stale_total",
        help: "Stale fallbacks served",
        read: |m| MetricValue::Count(m.fallback_stale_total),
    },
    Metric {
        name: "fallback_degraded_total",
        help: "Degraded fallbacks served",
        read: |m| MetricValue::Count(m.fallback_degraded_total),
    },
    Metric {
        name: "fallback_error_total",
        help: "Error fallbacks served",
        read: |m| MetricValue::Count(m.fallback_error_total),
    },
    Metric {
        name: "fallback_failures_total",
        help: "Fallbacks that could not serve",
        read: |m| MetricValue::Count(m.fallback_failures_total),
    },
    Metric {
        name: "partition_overflow_total",
        help: "Admissions routed to the overflow partition",
        read: |m| MetricValue::Count(m.partition_overflow_total),
    },
    Metric {
        name: "would_trip_total",
        help: "Times the trip policy fired in observe mode, the breaker left closed",
        read: |m| MetricValue::Count(m.would_trip_total),
    },
    Metric {
        name: "stuck",
        help: "1 when open past the recovery bound",
        read: |m| MetricValue::Flag(m.stuck),
    },
];

type Labels = Vec<(&'static str, String)>;
type CounterFamily = Family<Labels, Counter<f64, AtomicU64F>>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64F>>;

enum Fam {
    Counter(CounterFamily),
    Gauge(GaugeFamily),
}

/// A family of counters or gauges, per [`Metric`]'s name.
fn family(registry: &mut Registry, name: &str, help: &str) -> Fam {
    match name.strip_suffix("_total") {
        Some(stem) => {
            let fam = CounterFamily::default();
            registry.register(stem, help, fam.clone());
            Fam::Counter(fam)
        }
        None => {
            let fam = GaugeFamily::default();
            registry.register(name, help, fam.clone());
            Fam::Gauge(fam)
        }
    }
}

impl Fam {
    fn put(&self, labels: &Labels, v: f64) {
        match self {
            Fam::Counter(f) => {
                f.get_or_create(labels).inc_by(v);
            }
            Fam::Gauge(f) => {
                f.get_or_create(labels).set(v);
            }
        }
    }
}

/// `call_duration_seconds` of every timed dependency: histograms whose
/// counts were kept by the bank, which prometheus-client's own
/// `Histogram` (fed by `observe`) cannot carry.
#[derive(Debug)]
struct Histograms(Vec<(Labels, Histogram)>);

impl EncodeMetric for Histograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        for (labels, h) in &self.0 {
            // The encoder takes each bucket's own count and sums them.
            let mut below = 0;
            let buckets: Vec<(f64, u64)> = h
                .buckets
                .iter()
                .map(|&(le, n)| {
                    let own = n - below;
                    below = n;
                    (le, own)
                })
                .collect();
            encoder
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl MetricsSnapshot {
    /// Prometheus text exposition (OpenMetrics text format, served as
    /// [`OPENMETRICS_CONTENT_TYPE`]), encoded by prometheus-client so
    /// label values are escaped correctly. Bounded whatever the number of
    /// tenants (C14): every metric per dependency
    /// (`breakerbank_dependency_<name>{dependency}`), and per partition
    /// only for partitions not closed, unless
    /// [`partition_series`](Self::partition_series) says
    /// [`PartitionSeries::All`].
    pub fn prometheus(&self) -> String {
        let mut registry = Registry::with_prefix("breakerbank");
        let state: Family<Labels, Gauge> = Family::default();
        registry.register(
            "state",
            "1 for the partition's current state",
            state.clone(),
        );
        let families: Vec<Fam> = METRICS
            .iter()
            .map(|m| family(&mut registry, m.name, m.help))
            .collect();
        for dep in &self.dependencies {
            let listed = dep.partitions.iter().filter(|p| {
                self.partition_series == PartitionSeries::All || p.state != State::Closed
            });
            for p in listed {
                let base: Labels = vec![
                    ("dependency", dep.name.clone()),
                    ("partition", p.partition.clone()),
                ];
                for s in State::ALL {
                    let mut l = base.clone();
                    l.push(("state", s.as_str().to_string()));
                    state.get_or_create(&l).set(i64::from(p.state == s));
                }
                // `values()` lists the metrics in `METRICS` order.
                for ((_, v), fam) in p.values().into_iter().zip(&families) {
                    fam.put(&base, v);
                }
            }
        }
        let per_dep: Vec<Fam> = METRICS
            .iter()
            .map(|m| {
                let help = format!("{}, the dependency's partitions summed", m.help);
                family(&mut registry, &format!("dependency_{}", m.name), &help)
            })
            .collect();
        let partitions: Family<Labels, Gauge> = Family::default();
        registry.register(
            "dependency_partitions",
            "The dependency's partitions in each state",
            partitions.clone(),
        );
        let calls = CounterFamily::default();
        registry.register(
            "dependency_calls",
            "Calls by outcome: success, failure, cancelled, refused",
            calls.clone(),
        );
        let mut histograms = Vec::new();
        for dep in &self.dependencies {
            let t = &dep.totals;
            let base: Labels = vec![("dependency", dep.name.clone())];
            for ((_, v), fam) in t.sums.iter().zip(&per_dep) {
                fam.put(&base, *v);
            }
            for &(s, n) in &t.partitions {
                let mut l = base.clone();
                l.push(("state", s.as_str().to_string()));
                partitions.get_or_create(&l).set(n as i64);
            }
            let c = t.calls;
            for (outcome, n) in [
                ("success", c.success),
                ("failure", c.failure),
                ("cancelled", c.cancelled),
                ("refused", c.refused),
            ] {
                let mut l = base.clone();
                l.push(("outcome", outcome.to_string()));
                calls.get_or_create(&l).inc_by(n as f64);
            }
            if let Some(h) = &t.call_durations {
                histograms.push((base, h.clone()));
            }
        }
        if !histograms.is_empty() {
            registry.register_with_unit(
                "dependency_call_duration",
                "Durations of the dependency's timed calls",
                Unit::Seconds,
                Histograms(histograms),
            );
        }
        let dropped = Counter::<u64>::default();
        registry.register(
            "events_dropped",
            "Events the bank's bounded queue dropped: listeners missed them",
            dropped.clone(),
        );
        dropped.inc_by(self.events_dropped);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &registry);
        out
    }
}

/// The content type to serve [`MetricsSnapshot::prometheus`]'s text with:
/// OpenMetrics 1.0.0 text (a `/metrics` handler's `Content-Type`).
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// prometheus-client's atomic for f64 values (it is not a breaker atomic,
/// so it need not come from `crate::sync`).
#[allow(clippy::disallowed_types)]
type AtomicU64F = std::sync::atomic::AtomicU64;

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;

    #[test]
    fn c14_c15_a_close_accounted_after_the_trip_that_followed_it_changes_no_episode() {
        let s = Stats::default();
        let bound = Duration::from_secs(300);
        let at = |m: u64| Instant::from_nanos(m * MIN);
        s.on_transition(Phase::Closed, Phase::Open, at(0), bound, 1);
        s.on_transition(Phase::Open, Phase::HalfOpen, at(1), bound, 2);
        // Generation 3 closes, generation 4 trips again at once; the
        // trip's thread accounts first, the close's after it.
        s.on_transition(Phase::Closed, Phase::Open, at(1), bound, 4);
        s.on_transition(Phase::HalfOpen, Phase::Closed, at(1), bound, 3);
        assert_eq!(s.episode_start(), Some(at(1)), "the new episode runs");
        assert!(s.stuck_due(at(6)), "and becomes stuck past its bound");
        assert!(s.take_stuck_alert(at(6), bound));
        // The first episode's minute is counted: the trip found it running.
        assert_eq!(s.open_ns_total.load(Ordering::Relaxed), MIN);
        s.on_transition(Phase::Open, Phase::HalfOpen, at(7), bound, 5);
        s.on_transition(Phase::HalfOpen, Phase::Closed, at(8), bound, 6);
        assert_eq!(s.episode_start(), None);
        assert_eq!(s.open_ns_total.load(Ordering::Relaxed), 8 * MIN);
        assert_eq!(
            s.closed_total.load(Ordering::Relaxed),
            2,
            "both closes counted"
        );
        assert_eq!(s.opened_total.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn c14_c15_a_trip_accounted_after_the_half_open_that_followed_it_begins_its_episode() {
        let s = Stats::default();
        let bound = Duration::from_secs(300);
        let at = |m: u64| Instant::from_nanos(m * MIN);
        // Generation 1 trips, generation 2 goes half-open at once (an
        // operator's half_open); the half-open's thread accounts first.
        s.on_transition(Phase::Open, Phase::HalfOpen, at(0), bound, 2);
        s.on_transition(Phase::Closed, Phase::Open, at(0), bound, 1);
        assert_eq!(s.episode_start(), Some(at(0)), "the trip's episode runs");
        assert_eq!(s.began(), Some(at(0)));
        assert!(!s.stuck_due(at(4)));
        assert!(s.stuck_due(at(6)), "and becomes stuck past its bound");
        s.on_transition(Phase::HalfOpen, Phase::Closed, at(10), bound, 3);
        assert_eq!(s.episode_start(), None);
        assert_eq!(s.open_ns_total.load(Ordering::Relaxed), 10 * MIN);
        // A trip whose episode a close accounted since has ended begins
        // nothing when its account comes last.
        let t = Stats::default();
        t.on_transition(Phase::Open, Phase::HalfOpen, at(0), bound, 2);
        t.on_transition(Phase::HalfOpen, Phase::Closed, at(1), bound, 3);
        t.on_transition(Phase::Closed, Phase::Open, at(1), bound, 1);
        assert_eq!(t.episode_start(), None, "the episode is over");
        assert!(!t.stuck_due(at(60)));
    }
}
