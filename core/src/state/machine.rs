//! Pure transitions over a [`Word`]: no atomics, no clock of their own.
//!
//! Each function takes the current word and returns the word to install
//! (or `None` when nothing changes) plus what happened. [`super::cell`]
//! runs them inside its single compare-and-swap loop; unit tests and the
//! proptest model drive them directly.

use super::word::{Phase, Word, GEN_MASK};
use crate::clock::Instant;
use std::time::Duration;

/// The per-dependency knobs the transitions need (built from the profile).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `Some(n)`: trip after `n` consecutive failures. `None`: the caller
    /// decides trips (failure-rate window) and passes `trip` to [`record`].
    pub consecutive_failures: Option<u32>,
    /// Most probes in flight at once (C7).
    pub probe_budget: u32,
    /// Probe successes that close a half-open breaker (C8).
    pub success_threshold: u32,
    /// Base open period (C6).
    pub open_duration: Duration,
    /// Optional `(multiplier, max)` applied per re-trip from half-open (C6).
    pub backoff: Option<(f64, Duration)>,
    /// How long a probe may go unrecorded before its slot is taken back (C7).
    pub probe_timeout: Duration,
    /// Observe mode (C22): when the trip policy fires, [`record`] leaves
    /// the breaker closed and reports [`Recorded::WouldTrip`].
    pub observe: bool,
}

impl Policy {
    /// Open period after `trips` re-trips from half-open, capped by the backoff max.
    pub fn open_duration_for(&self, trips: u32) -> Duration {
        match self.backoff {
            None => self.open_duration,
            Some((mult, max)) => {
                let secs = self.open_duration.as_secs_f64() * mult.powi(trips as i32);
                if !secs.is_finite() || secs >= max.as_secs_f64() {
                    max
                } else {
                    Duration::from_secs_f64(secs).max(self.open_duration)
                }
            }
        }
    }
}

/// What the cell must know of the world to run a transition.
pub trait Env {
    /// The bank's clock; called only on paths that need time.
    fn now(&mut self) -> Instant;
    /// A reading that may lag `now` but never leads it (see `Clock::now_coarse`).
    fn now_coarse(&mut self) -> Instant {
        self.now()
    }
    /// End of the open period of generation `generation`, if already published.
    fn open_until(&self, generation: u64) -> Option<Instant>;
    /// Whether every probe in flight was admitted at least `timeout` ago
    /// (C7): asked only when the probe budget is spent.
    fn probes_expired(&mut self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }
}

/// Why an admission was refused by the word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Open, open period not over.
    Open,
    /// Half-open and every probe slot is taken.
    ProbeBudget,
    /// Forced open by an operator.
    ForcedOpen,
}

/// Result of an admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Admitted under `generation`; `probe` when it holds a probe slot.
    Admit {
        /// Generation the permit belongs to.
        generation: u64,
        /// Holds a probe slot.
        probe: bool,
    },
    /// Refused, with the time until the next probe can be admitted (open only).
    Refuse {
        /// The reason.
        refusal: Refusal,
        /// Time until a probe can be admitted, for `Open`.
        retry_after: Option<Duration>,
    },
    /// The slot is being recycled; look the tenant up again.
    Vacant,
    /// The budget was spent by probes that all outlived `probe_timeout`:
    /// install the word (a half-open one frozen by [`begin_reclaim`], or
    /// an open one just made half-open), then admit again, which takes
    /// their `probes` slots back (C7).
    Reclaim {
        /// Probe slots to take back.
        probes: u32,
    },
}

/// Outcome as the word sees it (slow calls already turned into failures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The call succeeded.
    Success,
    /// The call failed.
    Failure,
    /// The caller gave up; counts as neither.
    Cancelled,
}

/// A state change the cell must publish (events, metrics, open-until).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Phase before.
    pub from: Phase,
    /// Phase after.
    pub to: Phase,
    /// Generation after.
    pub generation: u64,
    /// For a trip into `Open`: when the open period ends.
    pub open_until: Option<Instant>,
}

/// What a record did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Applied to the current episode without a transition.
    Applied,
    /// From an older generation: counted as late only (C13).
    Late,
    /// Applied and caused a transition.
    Transition(Transition),
    /// Applied; the trip policy fired in observe mode (C22): the word
    /// stays closed in its generation with its count restarted, and the
    /// caller restarts the failure-rate window.
    WouldTrip,
}

/// A closed word whose trip policy fired: open, or in observe mode (C22)
/// closed with its count restarted, as after a close. Only the trip
/// decision reads `observe`, so the paths that cannot trip never do.
fn trip_closed(w: Word, policy: &Policy, env: &mut impl Env) -> (Option<Word>, Recorded) {
    if policy.observe {
        return (
            (w.count() != 0).then(|| w.with_count(0)),
            Recorded::WouldTrip,
        );
    }
    let now = env.now();
    let (next, t) = transition(w, Phase::Open, Some(now), policy);
    (Some(next), Recorded::Transition(t))
}

fn transition(w: Word, to: Phase, now: Option<Instant>, policy: &Policy) -> (Word, Transition) {
    let trips = match (w.phase(), to) {
        (Phase::HalfOpen, Phase::Open) => w.trips() + 1,
        (_, Phase::Open) => 0,
        (_, Phase::HalfOpen) => w.trips(),
        _ => 0,
    };
    let next = w.transition(to).with_trips(trips);
    let open_until = match (to, now) {
        (Phase::Open, Some(now)) => Some(now + policy.open_duration_for(next.trips())),
        _ => None,
    };
    let t = Transition {
        from: w.phase(),
        to,
        generation: next.generation(),
        open_until,
    };
    (next, t)
}

/// Admission (C7, C12). A closed word is admitted without reading the clock.
pub fn admit(w: Word, policy: &Policy, env: &mut impl Env) -> (Option<Word>, Admission) {
    match w.phase() {
        Phase::Closed => (
            None,
            Admission::Admit {
                generation: w.generation(),
                probe: false,
            },
        ),
        Phase::ForcedOpen => (
            None,
            Admission::Refuse {
                refusal: Refusal::ForcedOpen,
                retry_after: None,
            },
        ),
        Phase::Vacant | Phase::Pending => (None, Admission::Vacant),
        Phase::HalfOpen => {
            if w.probes() >= policy.probe_budget && env.probes_expired(policy.probe_timeout) {
                return (
                    Some(begin_reclaim(w)),
                    Admission::Reclaim { probes: w.probes() },
                );
            }
            take_probe_within(w, policy, false)
        }
        // The cell finishes a reclaim before it asks (`Cell::update`);
        // a word caught in one admits no one meanwhile.
        Phase::Reclaiming | Phase::Checking => (
            None,
            Admission::Refuse {
                refusal: Refusal::ProbeBudget,
                retry_after: None,
            },
        ),
        Phase::Open => {
            let Some(until) = env.open_until(w.generation()) else {
                // The trip is being published right now: still open.
                let retry = policy.open_duration_for(w.trips());
                return (
                    None,
                    Admission::Refuse {
                        refusal: Refusal::Open,
                        retry_after: Some(retry),
                    },
                );
            };
            // The coarse reading never leads: if it says "before", so would
            // the precise one, a tick later at most. Only the end of the
            // period pays for a precise reading.
            let coarse = env.now_coarse();
            let now = if coarse < until { coarse } else { env.now() };
            if let Some(retry_ns) = refuses_open(w, until, now) {
                return (
                    None,
                    Admission::Refuse {
                        refusal: Refusal::Open,
                        retry_after: Some(Duration::from_nanos(retry_ns)),
                    },
                );
            }
            // The open period is over (however far the clock jumped): go
            // half-open. Never closed here: closing needs probes (C12, C8).
            let (half, _) = transition(w, Phase::HalfOpen, None, policy);
            if half.probes() >= policy.probe_budget && env.probes_expired(policy.probe_timeout) {
                // Probes of earlier episodes hold every slot and are all
                // probe_timeout old: half-open first, then take them back.
                return (
                    Some(half),
                    Admission::Reclaim {
                        probes: half.probes(),
                    },
                );
            }
            take_probe_within(half, policy, true)
        }
    }
}

fn take_probe_within(half: Word, policy: &Policy, changed: bool) -> (Option<Word>, Admission) {
    if half.probes() >= policy.probe_budget {
        return (
            changed.then_some(half),
            Admission::Refuse {
                refusal: Refusal::ProbeBudget,
                retry_after: None,
            },
        );
    }
    (
        Some(half.with_probes(half.probes() + 1)),
        Admission::Admit {
            generation: half.generation(),
            probe: true,
        },
    )
}

/// The first step of taking back the probe slots of a half-open word
/// (C7): frozen in a new generation (`Checking`), so that the permits of
/// every probe in flight are of an older one and none is admitted or
/// returned until the reclaim is decided ([`decide_reclaim`]).
pub fn begin_reclaim(half: Word) -> Word {
    half.with_phase(Phase::Checking).next_generation()
}

/// The second step, on the frozen word: when every probe it counts has
/// outlived `probe_timeout` (`expired`, judged after the freeze), the
/// reclaim is decided (`Reclaiming`, same generation); otherwise it is
/// given up: half-open in a newer generation, every slot kept.
pub fn decide_reclaim(checking: Word, expired: bool) -> Word {
    if expired {
        checking.with_phase(Phase::Reclaiming)
    } else {
        checking.with_phase(Phase::HalfOpen).next_generation()
    }
}

/// The last step: half-open again, in another new generation, with no
/// probe in flight, the episode's successes and backoff kept. Probe
/// permits below the reclaiming word's generation hold no slot from here
/// on ([`record`]'s `probe` is false for them).
pub fn finish_reclaim(reclaiming: Word) -> Word {
    reclaiming
        .with_phase(Phase::HalfOpen)
        .next_generation()
        .with_probes(0)
}

/// What [`admit`] decides for a closed word, without the cell: admitted
/// in its generation (returned), never as a probe. `None`: not closed. The
/// admission fast paths decide a closed word by this alone.
#[inline(always)]
pub fn admits_closed(w: Word) -> Option<u64> {
    (w.phase() == Phase::Closed).then(|| w.generation())
}

/// What [`admit`] decides for an open word whose period ends at `until`,
/// read at `now`, without the cell: refused, retry after the nanoseconds
/// returned ([`still_open_ns`]). `None`: not open, or the period is over
/// (then [`admit`] moves the word to half-open, which takes the cell).
#[inline(always)]
pub fn refuses_open(w: Word, until: Instant, now: Instant) -> Option<u64> {
    if w.phase() != Phase::Open {
        return None;
    }
    still_open_ns(until, now)
}

/// Whether [`admit`] refuses word `w` as forced open (C11): without a
/// clock, a retry-after or a change to the word, so the cell is not
/// needed.
#[inline(always)]
pub fn refuses_forced(w: Word) -> bool {
    w.phase() == Phase::ForcedOpen
}

/// Whether [`record`] leaves word `w` as it is for the outcome of a permit
/// of `generation` (`probe`: a probe permit), trips aside: a non-probe
/// permit on a closed word of its own generation with no failure counted.
/// A success there changes nothing under either policy; under the
/// failure-rate policy, which keeps no count on the word, neither does a
/// failure unless its window trips. The record fast paths decide by this.
#[inline(always)]
pub fn record_leaves_word(w: Word, generation: u64, probe: bool) -> bool {
    !probe && w.is_quiet_closed(generation)
}

/// The open-period rule (C6, C12): before `until` a breaker stays open,
/// and the answer is the time left. `now` may be a reading that lags (a
/// coarse clock): it can only keep the breaker open a little longer.
#[inline]
pub fn still_open(until: Instant, now: Instant) -> Option<Duration> {
    still_open_ns(until, now).map(Duration::from_nanos)
}

/// [`still_open`] in nanoseconds, for paths that carry the answer as a
/// number.
#[inline(always)]
pub fn still_open_ns(until: Instant, now: Instant) -> Option<u64> {
    (now < until).then(|| until.as_nanos() - now.as_nanos())
}

/// The end of an open period that no admission has seen yet (C14): an
/// open word whose period is over goes half-open, taking no probe; any
/// other word, or an open one still in its period, stays.
pub fn expire(w: Word, policy: &Policy, env: &mut impl Env) -> Option<(Word, Transition)> {
    if w.phase() != Phase::Open {
        return None;
    }
    let until = env.open_until(w.generation())?;
    still_open(until, env.now())
        .is_none()
        .then(|| transition(w, Phase::HalfOpen, None, policy))
}

/// Whether a transition happened during [`admit`] (Open → HalfOpen).
pub fn admit_transition(old: Word, new: Option<Word>) -> Option<Transition> {
    let new = new?;
    // A reclaim's frozen word is half-open to everyone: no transition.
    (new.phase().seen() != old.phase().seen()).then(|| Transition {
        from: old.phase(),
        to: new.phase(),
        generation: new.generation(),
        open_until: None,
    })
}

/// Recording an outcome (C5, C8, C10, C13).
///
/// `trip` is the failure-rate window's verdict for a closed call (success
/// or failure); it is ignored under the consecutive policy. `now` is read only when tripping.
pub fn record(
    w: Word,
    policy: &Policy,
    generation: u64,
    probe: bool,
    verdict: Verdict,
    trip: bool,
    env: &mut impl Env,
) -> (Option<Word>, Recorded) {
    let same = w.generation() == (generation & GEN_MASK);
    if !same || w.phase().is_held() || matches!(w.phase(), Phase::Open | Phase::ForcedOpen) {
        // Late: never counted, but a probe still returns its slot (C7, C13).
        let next = (probe && w.probes() > 0).then(|| w.with_probes(w.probes() - 1));
        return (next, Recorded::Late);
    }
    match (w.phase(), verdict) {
        (Phase::Closed, Verdict::Cancelled) => (None, Recorded::Applied),
        (Phase::Closed, Verdict::Success) if trip && policy.consecutive_failures.is_none() => {
            // The failure-rate window reached `min_calls` on a success with
            // the rate already at or above the threshold.
            trip_closed(w, policy, env)
        }
        (Phase::Closed, Verdict::Success) => {
            if w.count() == 0 {
                (None, Recorded::Applied)
            } else {
                (Some(w.with_count(0)), Recorded::Applied)
            }
        }
        (Phase::Closed, Verdict::Failure) => {
            if let Some(next) = count_failure(w, policy, generation) {
                return (Some(next), Recorded::Applied);
            }
            // A closed word of this generation that does not just count:
            // the consecutive threshold is reached, or the window decides.
            if policy.consecutive_failures.is_some() || trip {
                trip_closed(w, policy, env)
            } else {
                (None, Recorded::Applied)
            }
        }
        (Phase::HalfOpen, v) => {
            let w = if probe {
                w.with_probes(w.probes().saturating_sub(1))
            } else {
                w
            };
            match v {
                Verdict::Cancelled => (Some(w), Recorded::Applied),
                Verdict::Success => {
                    let successes = w.count().saturating_add(1);
                    if successes >= policy.success_threshold {
                        let (next, t) = transition(w, Phase::Closed, None, policy);
                        (Some(next), Recorded::Transition(t))
                    } else {
                        (Some(w.with_count(successes)), Recorded::Applied)
                    }
                }
                Verdict::Failure => {
                    let now = env.now();
                    let (next, t) = transition(w, Phase::Open, Some(now), policy);
                    (Some(next), Recorded::Transition(t))
                }
            }
        }
        _ => (None, Recorded::Late),
    }
}

/// A failure that only counts (C5): under the consecutive policy, on a
/// closed word of `generation`, below the threshold, the word with one
/// more failure; `None` when the failure does anything else (trips, is
/// late, falls under the failure-rate policy). [`record`] decides such a
/// failure the same way; this is its one-CAS fast path.
#[inline]
pub fn count_failure(w: Word, policy: &Policy, generation: u64) -> Option<Word> {
    let n = policy.consecutive_failures?;
    let failures = w.count().saturating_add(1);
    (w.phase() == Phase::Closed && w.generation() == generation & GEN_MASK && failures < n)
        .then(|| w.with_count(failures))
}

/// Operator reset (C11): closed, new generation, counters and backoff cleared.
/// Probes in flight keep their slots; their records will be late.
pub fn reset(w: Word) -> Option<(Word, Transition)> {
    if w.phase().is_held() {
        return None;
    }
    let next = w.transition(Phase::Closed).with_trips(0);
    Some((
        next,
        Transition {
            from: w.phase(),
            to: Phase::Closed,
            generation: next.generation(),
            open_until: None,
        },
    ))
}

/// Operator force-open (C11): isolated until reset, new generation.
pub fn force_open(w: Word) -> Option<(Word, Transition)> {
    if w.phase().is_held() {
        return None;
    }
    let next = w.transition(Phase::ForcedOpen);
    Some((
        next,
        Transition {
            from: w.phase(),
            to: Phase::ForcedOpen,
            generation: next.generation(),
            open_until: None,
        },
    ))
}

/// Operator trip (C19): open as if the trip policy had fired, at `now`,
/// new generation. From closed, a trip (no backoff); from half-open, a
/// re-trip like a probe failure (backoff exponent up); from open, the open
/// period restarts from `now` with the backoff it had. A forced-open
/// breaker stays forced (only a reset ends a force, C11); a slot in a
/// hand-over has no breaker: `None`, nothing changes.
pub fn trip(w: Word, now: Instant, policy: &Policy) -> Option<(Word, Transition)> {
    match w.phase() {
        Phase::Closed | Phase::HalfOpen => Some(transition(w, Phase::Open, Some(now), policy)),
        Phase::Open => {
            let next = w.transition(Phase::Open);
            Some((
                next,
                Transition {
                    from: Phase::Open,
                    to: Phase::Open,
                    generation: next.generation(),
                    open_until: Some(now + policy.open_duration_for(next.trips())),
                },
            ))
        }
        _ => None,
    }
}

/// Operator half-open (C19): a probe cycle starts now, new generation, no
/// success counted yet. From open, the open period ends early (backoff
/// kept, as when it ends by itself); from closed, the breaker probes
/// before it takes full traffic again. Already half-open: `None`, its
/// cycle is under way. A forced-open breaker stays forced (C11); a slot in
/// a hand-over has no breaker: `None`.
pub fn half_open(w: Word, policy: &Policy) -> Option<(Word, Transition)> {
    match w.phase() {
        Phase::Closed | Phase::Open => Some(transition(w, Phase::HalfOpen, None, policy)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
