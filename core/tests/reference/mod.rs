//! The reference breaker of the model tests: one partition's contract
//! (C5–C8, C10, C11, C13, C14) as plain sequential code, written from the
//! behaviour reference (docs/reference/behaviour.md) rather than from the
//! implementation. `tests/model.rs`
//! drives one of these against a global dependency, `tests/tenant_model.rs`
//! one per tenant partition plus one for `<overflow>`.
//!
//! Time is in milliseconds on the bank's manual clock.
#![allow(dead_code)] // each model test uses its own part of it

use breakerbank::{Outcome, PartitionMetrics, RejectReason, State};
use std::time::Duration;

/// A trip policy (C5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `consecutive_failures: n`.
    Consecutive(u32),
    /// `failure_rate: pct / 100`, `min_calls`, `window`.
    Rate {
        pct: u32,
        min_calls: u32,
        window_ms: u64,
    },
}

/// One dependency's profile, as far as the model needs it.
#[derive(Clone, Copy, Debug)]
pub struct Cfg {
    pub policy: Policy,
    pub budget: u32,
    pub threshold: u32,
    pub open_ms: u64,
    /// `backoff: {multiplier: 2.0, max: 3 × open_duration}` (C6).
    pub backoff: bool,
}

impl Cfg {
    /// The profile entry of `name` (indented under `dependencies:`).
    /// `recovery_bound` is far beyond any sequence's clock, so neither C7's
    /// probe timeout (which defaults to it) nor C15 takes part.
    pub fn yaml(&self, name: &str, isolation: &str, extra: &str) -> String {
        let trip = match self.policy {
            Policy::Consecutive(n) => format!("{{consecutive_failures: {n}}}"),
            Policy::Rate {
                pct,
                min_calls,
                window_ms,
            } => format!(
                "{{failure_rate: {}, min_calls: {min_calls}, window: {window_ms}ms}}",
                f64::from(pct) / 100.0
            ),
        };
        let backoff = if self.backoff {
            format!(
                "    backoff: {{multiplier: 2.0, max: {}ms}}\n",
                self.open_ms * 3
            )
        } else {
            String::new()
        };
        format!(
            "dependencies:\n  {name}:\n    isolation: {isolation}\n    trip: {trip}\n    open_duration: {}ms\n    half_open: {{probe_budget: {}, success_threshold: {}}}\n    fallback: {{kind: error, code: X}}\n    recovery_bound: 1000h\n{backoff}{extra}",
            self.open_ms, self.budget, self.threshold
        )
    }
}

/// What an admission looked like from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    Admitted {
        probe: bool,
    },
    Rejected {
        reason: RejectReason,
        retry_after: Option<Duration>,
    },
}

impl Seen {
    pub fn of(d: &breakerbank::Decision<'_>) -> Seen {
        match d {
            breakerbank::Decision::Admitted(p) => Seen::Admitted {
                probe: p.is_probe(),
            },
            breakerbank::Decision::Rejected(r) => Seen::Rejected {
                reason: r.reason,
                retry_after: r.retry_after,
            },
        }
    }

    pub const EXPIRED: Seen = Seen::Rejected {
        reason: RejectReason::DeadlineExpired,
        retry_after: None,
    };
}

/// The counters (docs/guide/metrics.md) the behaviour reference fixes for one partition.
/// (`half_opened_total` and `closed_total` are left out: when an open →
/// half-open transition is announced, and whether `reset` counts as a
/// close, are the implementation's to choose within C14.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub opened: u64,
    pub rejected_open: u64,
    pub probe_rejects: u64,
    pub forced_open_rejects: u64,
    pub deadline_expired: u64,
    pub failures: u64,
    pub cancelled: u64,
    pub late_records: u64,
    pub partition_overflow: u64,
}

impl Counters {
    pub fn of(m: &PartitionMetrics) -> Counters {
        Counters {
            opened: m.opened_total,
            rejected_open: m.rejected_open_total,
            probe_rejects: m.probe_rejects_total,
            forced_open_rejects: m.forced_open_rejects_total,
            deadline_expired: m.deadline_expired_total,
            failures: m.failures_total,
            cancelled: m.cancelled_total,
            late_records: m.late_records_total,
            partition_overflow: m.partition_overflow_total,
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Counters::default()
    }
}

/// How C9 may treat a partition when room is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evict {
    /// Equals a fresh one: closed, nothing counted, nothing in flight.
    Idle,
    /// Idle under one reading of the contract and not under another: a
    /// permit still in flight (C9's "nothing in flight" may or may not
    /// mean a closed call), or window calls only near the window's edge.
    MaybeIdle,
    /// Closed with counts: evicted least recently used first.
    Counted,
    /// Closed, with a probe of an earlier half-open episode still holding
    /// its slot (C7): C9 may evict it as a closed one with counts, or keep
    /// it until the probe comes back, as it keeps a half-open one.
    Held,
    /// Open, half-open or forced open: never evicted.
    Never,
}

/// Whether a failure-rate judgement is fixed by the contract or left to
/// the window's granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    No,
    Yes,
    EitherWay,
}

/// One breaker (partition), as the contract describes it.
#[derive(Clone, Debug)]
pub struct Breaker {
    pub cfg: Cfg,
    /// `Open` is stored as such; [`Breaker::state`] reads it as half-open
    /// once its period has ended (C14).
    phase: State,
    pub generation: u64,
    failures: u32,
    successes: u32,
    /// Probe slots held, by probes of any episode of this partition (C7).
    pub probes: u32,
    /// Permits of this partition not yet recorded (any generation).
    pub outstanding: u32,
    retrips: u32,
    open_until: u64,
    /// The current closed episode's calls: (record time, failed).
    window: Vec<(u64, bool)>,
    pub m: Counters,
    /// Transitions into each state, as events announce them (C16):
    /// (open, half-open, closed, forced open).
    pub entered: (u64, u64, u64, u64),
    /// Start of the current trip-to-close episode (C15), if one runs.
    pub episode: Option<u64>,
}

impl Breaker {
    pub fn new(cfg: Cfg) -> Breaker {
        Breaker {
            cfg,
            phase: State::Closed,
            generation: 0,
            failures: 0,
            successes: 0,
            probes: 0,
            outstanding: 0,
            retrips: 0,
            open_until: 0,
            window: Vec::new(),
            m: Counters::default(),
            entered: (0, 0, 0, 0),
            episode: None,
        }
    }

    /// A partition first seen while its dependency is forced open (C11).
    pub fn forced(cfg: Cfg) -> Breaker {
        let mut b = Breaker::new(cfg);
        b.phase = State::ForcedOpen;
        b
    }

    /// The state an admission would find now (C14).
    pub fn state(&self, now: u64) -> State {
        match self.phase {
            State::Open if now >= self.open_until => State::HalfOpen,
            s => s,
        }
    }

    /// The rolling window's tolerance: the contract fixes no granularity,
    /// so a call whose age is within a tenth of the window of the window's
    /// length may be in it or out of it. Calls clearly inside count.
    fn band(&self) -> u64 {
        match self.cfg.policy {
            Policy::Rate { window_ms, .. } => window_ms / 10,
            Policy::Consecutive(_) => 0,
        }
    }

    fn window_ms(&self) -> u64 {
        match self.cfg.policy {
            Policy::Rate { window_ms, .. } => window_ms,
            Policy::Consecutive(_) => 0,
        }
    }

    /// C9's view of this partition now.
    pub fn evict(&self, now: u64) -> Evict {
        if self.state(now) != State::Closed {
            return Evict::Never;
        }
        if self.probes > 0 {
            return Evict::Held;
        }
        let (w, band) = (self.window_ms(), self.band());
        let age = |t: u64| now - t;
        if self.failures > 0 || self.window.iter().any(|&(t, _)| age(t) + band < w) {
            return Evict::Counted;
        }
        if self.outstanding > 0 || self.window.iter().any(|&(t, _)| age(t) < w + band) {
            return Evict::MaybeIdle;
        }
        Evict::Idle
    }

    fn open_ms(&self) -> u64 {
        if !self.cfg.backoff {
            return self.cfg.open_ms;
        }
        (self.cfg.open_ms << self.retrips.min(10)).min(self.cfg.open_ms * 3)
    }

    /// Every transition: a new generation (C13), a new episode's counts,
    /// and an empty window (C5: a closed episode counts from its first
    /// call; C11: reset clears the window).
    fn go(&mut self, s: State) {
        match s {
            State::Open => self.entered.0 += 1,
            State::HalfOpen => self.entered.1 += 1,
            State::Closed => self.entered.2 += 1,
            State::ForcedOpen => self.entered.3 += 1,
        }
        if matches!(s, State::Closed | State::ForcedOpen) {
            self.episode = None;
        }
        self.phase = s;
        self.generation += 1;
        self.failures = 0;
        self.successes = 0;
        self.window.clear();
    }

    fn trip(&mut self, now: u64, retrip: bool) {
        self.episode.get_or_insert(now);
        self.retrips = if retrip { self.retrips + 1 } else { 0 };
        self.go(State::Open);
        self.open_until = now + self.open_ms();
        self.m.opened += 1;
    }

    /// Makes the open → half-open transition of an open period that has
    /// ended (C14: announced no later than the next admission or sweep).
    pub fn settle(&mut self, now: u64) {
        if self.state(now) != self.phase {
            self.go(State::HalfOpen);
        }
    }

    /// An admission whose deadline has not expired (C7, C12, C14).
    pub fn admit(&mut self, now: u64) -> (Seen, Option<(u64, bool)>) {
        self.settle(now);
        let g = self.generation;
        let refuse = |reason, retry_after| {
            (
                Seen::Rejected {
                    reason,
                    retry_after,
                },
                None,
            )
        };
        let out = match self.phase {
            State::Closed => (Seen::Admitted { probe: false }, Some((g, false))),
            State::ForcedOpen => {
                self.m.forced_open_rejects += 1;
                refuse(RejectReason::ForcedOpen, None)
            }
            State::Open => {
                self.m.rejected_open += 1;
                let left = Duration::from_millis(self.open_until - now);
                refuse(RejectReason::Open, Some(left))
            }
            State::HalfOpen if self.probes < self.cfg.budget => {
                self.probes += 1;
                (Seen::Admitted { probe: true }, Some((g, true)))
            }
            State::HalfOpen => {
                self.m.probe_rejects += 1;
                refuse(RejectReason::ProbeBudget, None)
            }
        };
        if out.1.is_some() {
            self.outstanding += 1;
        }
        out
    }

    /// An admission whose deadline had expired (C10): counted, nothing else.
    pub fn admit_expired(&mut self) -> Seen {
        self.m.deadline_expired += 1;
        Seen::EXPIRED
    }

    /// Records a permit of this partition (C5, C8, C10, C13). `tripped`
    /// answers, when the contract leaves it open (a call at the window's
    /// edge), whether the implementation's window tripped.
    pub fn record(
        &mut self,
        generation: u64,
        probe: bool,
        o: Outcome,
        now: u64,
        tripped: &mut dyn FnMut() -> bool,
    ) {
        self.outstanding -= 1;
        if probe {
            // Late or not, a probe gives its slot back (C7, C13).
            self.probes -= 1;
        }
        if generation != self.generation {
            self.m.late_records += 1;
            return;
        }
        match (self.phase, o) {
            (_, Outcome::Cancelled) => self.m.cancelled += 1,
            (State::Closed, o) => {
                let failed = o == Outcome::Failure;
                if failed {
                    self.m.failures += 1;
                }
                match self.cfg.policy {
                    Policy::Consecutive(n) => {
                        self.failures = if failed { self.failures + 1 } else { 0 };
                        if self.failures >= n {
                            self.trip(now, false);
                        }
                    }
                    Policy::Rate { .. } => {
                        self.window.push((now, failed));
                        let trip = match self.judge(now) {
                            Judged::Yes => true,
                            Judged::No => false,
                            Judged::EitherWay => tripped(),
                        };
                        if trip {
                            self.trip(now, false);
                        }
                    }
                }
            }
            (State::HalfOpen, Outcome::Success) => {
                self.successes += 1;
                if self.successes >= self.cfg.threshold {
                    self.go(State::Closed);
                    self.retrips = 0;
                }
            }
            (State::HalfOpen, Outcome::Failure) => {
                self.m.failures += 1;
                self.trip(now, true);
            }
            // A current permit exists only in a closed or half-open
            // generation: every other transition starts a new one.
            (s, o) => unreachable!("current permit recorded {o:?} in {s:?}"),
        }
    }

    /// C5's failure-rate rule: rate ≥ R with at least `min_calls` calls in
    /// the window, over every window length the tolerance allows.
    pub fn judge(&mut self, now: u64) -> Judged {
        let Policy::Rate {
            pct,
            min_calls,
            window_ms,
        } = self.cfg.policy
        else {
            return Judged::No;
        };
        let band = self.band();
        self.window.retain(|&(t, _)| now - t < window_ms + band);
        // A call of age `a` is in a window of length `len` when a < len.
        let mut lens = vec![window_ms - band];
        lens.extend(
            self.window
                .iter()
                .map(|&(t, _)| now - t + 1)
                .filter(|&l| l > window_ms - band),
        );
        let trips = |len: u64| {
            let (mut n, mut f) = (0u64, 0u64);
            for &(t, failed) in &self.window {
                if now - t < len {
                    n += 1;
                    f += u64::from(failed);
                }
            }
            n >= u64::from(min_calls) && 100 * f >= u64::from(pct) * n
        };
        let yes = lens.iter().filter(|&&l| trips(l)).count();
        match yes {
            0 => Judged::No,
            y if y == lens.len() => Judged::Yes,
            _ => Judged::EitherWay,
        }
    }

    /// C11: closed, a new generation, counters and window cleared. Probe
    /// slots stay held until their permits come back (C7, C13).
    pub fn reset(&mut self) {
        self.go(State::Closed);
        self.retrips = 0;
    }

    /// C11: isolated until reset.
    pub fn force_open(&mut self) {
        self.go(State::ForcedOpen);
    }

    /// C19: opens as if the trip policy had fired: from half-open it is a
    /// re-trip (the backoff grows), on an open breaker the period restarts
    /// from now; a forced-open breaker stays forced.
    pub fn operator_trip(&mut self, now: u64) {
        self.settle(now);
        match self.state(now) {
            State::ForcedOpen => {}
            State::HalfOpen => self.trip(now, true),
            State::Open => {
                let retrips = self.retrips;
                self.trip(now, false);
                self.retrips = retrips;
                self.open_until = now + self.open_ms();
            }
            State::Closed => self.trip(now, false),
        }
    }

    /// C19: starts a probe cycle now, from closed or open; a half-open
    /// breaker keeps its cycle, a forced-open one stays forced.
    pub fn operator_half_open(&mut self, now: u64) {
        self.settle(now);
        if matches!(self.state(now), State::Closed | State::Open) {
            self.go(State::HalfOpen);
            self.episode.get_or_insert(now);
        }
    }

    /// C20: a reload's new thresholds, durations and budgets apply from the
    /// next decision; state, counts, probes and open-until are kept.
    pub fn reload(&mut self, cfg: Cfg) {
        self.cfg = cfg;
    }

    /// C18: what `inspect` reports of the episode's counts:
    /// (consecutive failures, half-open successes, probes in flight).
    pub fn inspected(&self, now: u64) -> (u32, u32, u32) {
        match self.state(now) {
            State::Closed => (self.failures, 0, self.probes),
            State::HalfOpen if self.phase == State::HalfOpen => (0, self.successes, self.probes),
            _ => (0, 0, self.probes),
        }
    }
}
