//! The atomic cell: the packed word, and a pointer to a side part made on
//! first need that holds, among what its owner keeps there, the
//! generation-tagged open-until.
//!
//! Ordering argument. The word is loaded with `Acquire` and replaced with
//! an `AcqRel` compare-and-swap: a thread that sees a word also sees what
//! the writer did before installing it (the slot owner and key written by
//! eviction, see `partition.rs`). The open-until time cannot fit in the
//! word, so the thread whose CAS tripped the breaker publishes it after the
//! CAS in a side word tagged with the generation it belongs to. A reader
//! that sees `Open(g)` but a side word tagged with another generation
//! treats the period as not yet published and stays open: a late or
//! missing publication can only keep a breaker open a moment longer,
//! never let a probe through early. Publication only moves the tag
//! forward (a stale publisher of an older generation backs off), so a
//! newer episode's time is never overwritten by an older one.
//!
//! The side part is made by the first thread that needs it (a trip's
//! publisher, a counter's first bump) and installed by one compare-and-swap
//! from null; it lives until the cell is dropped. Keeping it out of the
//! cell leaves a tenant slot room for its owner's key beside the word
//! (`partition.rs`): a lookup confirms the tenant and reads the word on
//! one line. A reader that finds no side part sees no open-until, which
//! is the unpublished case above: the breaker stays open.

use super::machine::{self, Admission, Env, Policy, Recorded, Transition, Verdict};
use super::word::{Word, GEN_MASK};
use crate::clock::{Clock, Instant};
use crate::sync::{spin_hint, AtomicU64, AtomicWord, Installed, Ordering};

const TAG_SHIFT: u32 = 39;
const MS_MASK: u64 = (1 << TAG_SHIFT) - 1;
const NS_PER_MS: u64 = 1_000_000;

/// What an update closure decides for one observed word.
#[derive(Debug)]
pub enum Step<R> {
    /// Install this word (by CAS), then return `R`.
    Install(Word, R),
    /// Change nothing, return `R`.
    Keep(R),
}

/// The open-until side word: `(generation << 39) | open-until in ms`,
/// rounded up.
#[derive(Debug)]
pub struct Until(AtomicU64);

impl Default for Until {
    fn default() -> Self {
        // Tag of a generation no fresh word has: nothing published yet.
        Self(AtomicU64::new(u64::from(GEN_MASK) << TAG_SHIFT))
    }
}

/// What a cell keeps beside its word, made on first need: at least the
/// open-until; the owner of the cell may keep more there. `Send + Sync`:
/// every thread that shares the cell may reach it.
pub trait Side: Default + Send + Sync {
    /// The open-until side word.
    fn until(&self) -> &Until;
}

impl Side for Until {
    fn until(&self) -> &Until {
        self
    }
}

/// One partition's word, and its side part once something needed one.
#[derive(Debug)]
pub struct Cell<S: Side = Until> {
    word: AtomicWord,
    side: Installed<S>,
}

impl<S: Side> Default for Cell<S> {
    fn default() -> Self {
        Self::new(Word::FRESH)
    }
}

/// Adapts a cell and a clock to [`machine::Env`]; reads the clock at most once.
struct CellEnv<'a, S: Side> {
    cell: &'a Cell<S>,
    clock: &'a dyn Clock,
    now: Option<Instant>,
    coarse: Option<Instant>,
}

impl<S: Side> CellEnv<'_, S> {
    /// The latest reading taken, if any.
    fn reading(&self) -> Option<Instant> {
        self.now.or(self.coarse)
    }
}

impl<S: Side> Env for CellEnv<'_, S> {
    fn now(&mut self) -> Instant {
        *self.now.get_or_insert_with(|| self.clock.now())
    }
    fn now_coarse(&mut self) -> Instant {
        match (self.now, self.coarse) {
            (Some(now), _) | (None, Some(now)) => now,
            (None, None) => *self.coarse.get_or_insert_with(|| self.clock.now_coarse()),
        }
    }
    fn open_until(&self, generation: u32) -> Option<Instant> {
        self.cell.open_until(generation)
    }
}

impl<S: Side> Cell<S> {
    /// A cell holding `w`, with no side part yet.
    pub fn new(w: Word) -> Self {
        Self {
            word: AtomicWord::new(w),
            side: Installed::empty(),
        }
    }

    /// A cell holding `w` with `side` already made.
    pub fn with_side(w: Word, side: S) -> Self {
        Self {
            word: AtomicWord::new(w),
            side: Installed::with(side),
        }
    }

    /// The side part if one was made.
    #[inline]
    pub fn side_if_any(&self) -> Option<&S> {
        self.side.get()
    }

    /// The side part, made with `S::default()` if there is none yet.
    #[inline]
    pub fn side(&self) -> &S {
        self.side.get_or_install_with(S::default)
    }

    /// The current word.
    #[inline]
    pub fn load(&self) -> Word {
        // Acquire: pairs with the AcqRel CAS / Release store of the writer.
        self.word.load(Ordering::Acquire)
    }

    /// Overwrites the word: only for a slot that no one else can be
    /// admitted to (a vacant slot being handed to a new tenant).
    pub fn store(&self, w: Word) {
        // Release: the new owner's key and counters are visible to anyone
        // who sees this word.
        self.word.store(w, Ordering::Release)
    }

    /// The one compare-and-swap loop: `f` sees each observed word and
    /// decides; it may run several times under contention.
    #[inline]
    pub fn update<R>(&self, mut f: impl FnMut(Word) -> Step<R>) -> R {
        let mut cur = self.load();
        loop {
            match f(cur) {
                Step::Keep(r) => return r,
                Step::Install(next, r) => {
                    // AcqRel: publish our transition and see the one we replace.
                    match self.word.compare_exchange_weak(
                        cur,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return r,
                        Err(seen) => {
                            cur = seen;
                            spin_hint();
                        }
                    }
                }
            }
        }
    }

    /// End of the open period of `generation`, if published.
    #[inline]
    pub fn open_until(&self, generation: u32) -> Option<Instant> {
        // Acquire: pairs with the publisher's Release; the tag says whose it is.
        let v = self.side_if_any()?.until().0.load(Ordering::Acquire);
        ((v >> TAG_SHIFT) as u32 == generation & GEN_MASK)
            .then(|| Instant::from_nanos((v & MS_MASK).saturating_mul(NS_PER_MS)))
    }

    /// Publishes the open-until of a trip this thread's CAS made.
    pub fn publish_open_until(&self, generation: u32, until: Instant) {
        let ms = until.as_nanos().div_ceil(NS_PER_MS).min(MS_MASK);
        let new = (u64::from(generation & GEN_MASK) << TAG_SHIFT) | ms;
        let until = &self.side().until().0;
        let mut cur = until.load(Ordering::Acquire);
        loop {
            let tag = (cur >> TAG_SHIFT) as u32;
            let ahead = tag.wrapping_sub(generation) & GEN_MASK;
            if ahead != 0 && ahead < (GEN_MASK >> 1) {
                return; // a newer episode already published its own time
            }
            // Release: readers that match the tag see a complete value.
            match until.compare_exchange_weak(cur, new, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Admission; `valid` is re-checked on every observed word (slot
    /// ownership for tenant partitions). Returns `None` when `valid` fails;
    /// otherwise the admission, its transition, and the clock reading it
    /// used (if it read the clock).
    #[inline]
    pub fn admit(
        &self,
        policy: &Policy,
        clock: &dyn Clock,
        valid: impl Fn(Word) -> bool,
    ) -> Option<(Admission, Option<Transition>, Option<Instant>)> {
        let mut env = CellEnv {
            cell: self,
            clock,
            now: None,
            coarse: None,
        };
        let r = self.update(|w| {
            if !valid(w) {
                return Step::Keep(None);
            }
            match machine::admit(w, policy, &mut env) {
                (None, a) => Step::Keep(Some((a, None))),
                (Some(next), a) => {
                    Step::Install(next, Some((a, machine::admit_transition(w, Some(next)))))
                }
            }
        });
        r.map(|(a, t)| (a, t, env.reading()))
    }

    /// Records an outcome for a permit of `generation`.
    #[inline]
    pub fn record(
        &self,
        policy: &Policy,
        clock: &dyn Clock,
        generation: u32,
        probe: bool,
        verdict: Verdict,
        trip: bool,
    ) -> Recorded {
        let mut env = CellEnv {
            cell: self,
            clock,
            now: None,
            coarse: None,
        };
        let r = self.update(|w| {
            match machine::record(w, policy, generation, probe, verdict, trip, &mut env) {
                (None, r) => Step::Keep(r),
                (Some(next), r) => Step::Install(next, r),
            }
        });
        if let Recorded::Transition(t) = r {
            self.publish(&t);
        }
        r
    }

    /// Applies an operator action (`machine::reset` or `machine::force_open`)
    /// if `valid` holds for the observed word.
    pub fn operate(
        &self,
        action: fn(Word) -> Option<(Word, Transition)>,
        valid: impl Fn(Word) -> bool,
    ) -> Option<Transition> {
        self.update(|w| {
            if !valid(w) {
                return Step::Keep(None);
            }
            match action(w) {
                Some((next, t)) => Step::Install(next, Some(t)),
                None => Step::Keep(None),
            }
        })
    }

    /// Publishes what a transition needs beside the word.
    pub fn publish(&self, t: &Transition) {
        if let Some(until) = t.open_until {
            self.publish_open_until(t.generation, until);
        }
    }

    /// CAS from an observed word to another, once: for eviction, and for
    /// fast paths that fall back to [`Cell::update`] when it fails.
    pub fn try_replace(&self, current: Word, new: Word) -> bool {
        // AcqRel: as in `update`.
        self.word
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::state::word::Phase;
    use std::time::Duration;

    #[test]
    fn c12_open_until_is_tagged_by_generation() {
        let c: Cell = Cell::default();
        assert_eq!(c.open_until(0), None);
        c.publish_open_until(5, Instant::from_nanos(1_500_001));
        assert_eq!(c.open_until(5), Some(Instant::from_nanos(2_000_000)));
        assert_eq!(c.open_until(4), None);
        // A stale publisher of an older generation does not overwrite.
        c.publish_open_until(3, Instant::from_nanos(9_000_000));
        assert_eq!(c.open_until(5), Some(Instant::from_nanos(2_000_000)));
        c.publish_open_until(6, Instant::from_nanos(9_000_000));
        assert_eq!(c.open_until(6), Some(Instant::from_nanos(9_000_000)));
    }

    #[test]
    fn c5_trip_publishes_open_until() {
        let c: Cell = Cell::default();
        let clock = ManualClock::new();
        let p = Policy {
            consecutive_failures: Some(1),
            probe_budget: 1,
            success_threshold: 1,
            open_duration: Duration::from_secs(1),
            backoff: None,
        };
        let r = c.record(&p, &clock, 0, false, Verdict::Failure, false);
        assert!(matches!(r, Recorded::Transition(_)));
        let w = c.load();
        assert_eq!(w.phase(), Phase::Open);
        assert_eq!(
            c.open_until(w.generation()),
            Some(Instant::from_nanos(1_000_000_000))
        );
    }
}
