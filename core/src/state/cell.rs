//! The atomic cell: the packed word, and a pointer to a side part made on
//! first need that holds, among what its owner keeps there, the open-until
//! of the current trip.
//!
//! Ordering argument. The word is loaded with `Acquire` and replaced with
//! an `AcqRel` compare-and-swap: a thread that sees a word also sees what
//! the writer did before installing it (the slot owner and key written by
//! eviction, see `partition.rs`). The open-until time cannot fit in the
//! word, so a thread about to trip the breaker writes it first, into a
//! side word tagged with the generation the trip installs, and only then
//! tries its CAS on the word (the CAS loop does it for every trip it
//! installs). A reader that sees `Open(g)` therefore also sees the
//! open-until of `g`: no window in which an open word has no period, and
//! no stale period standing in for a missing one, however many
//! generations the partition has seen (C6, C12). The side word is written
//! only by a thread that has just seen the word it is about to replace,
//! by a CAS from the side value it read before that: a thread whose trip
//! has already lost (the word moved on) cannot overwrite a newer period.
//! Two threads making the same trip from the same word keep the later of
//! their two readings.
//!
//! The side part is made by the first thread that needs it (a trip's
//! publisher, a counter's first bump) and installed by one compare-and-swap
//! from null; it lives until the cell is dropped. Keeping it out of the
//! cell leaves a tenant slot room for its owner's key beside the word
//! (`partition.rs`): a lookup confirms the tenant and reads the word on
//! one line. A reader that finds no side part, or a tag that is not its
//! word's, sees no open-until and stays open (defensive: with the order
//! above it does not happen).
//!
//! Taking probe slots back (C7's `probe_timeout`). Every probe admission
//! writes its clock reading into the side part before its CAS, so a
//! thread that sees a word with `n` probes in flight also sees when the
//! youngest of them was admitted. When an admission finds the budget
//! spent and that youngest `probe_timeout` old, the slots are taken back
//! in three steps, each one CAS, and any thread that meets a word in the
//! middle does the next step itself before anything else (no one waits
//! on another). First the word is frozen (`Checking`) in a new
//! generation `r`: every permit in flight is now of an older one, and no
//! probe is admitted or returned until the next step. Then the reclaim
//! is decided on the frozen word: by an admission that reads the stamps
//! again (every probe the frozen word counts stamped before the CAS that
//! counted it) and still finds the youngest expired, it goes ahead
//! (`Reclaiming`, still `r`); by anyone else, or if a probe may be young
//! (the word the first check read can have come back to the same bits
//! with a new probe in it), it is given up: half-open in a newer
//! generation, every slot kept. Last, `r` is written to the side part as
//! the generation below which probe permits hold no slot (a `fetch_max`:
//! never lowered), and only then is the word made half-open, in a newer
//! generation, with no probe in flight. A record reads that generation
//! after the word it decides on: one that sees a word from after the
//! reclaim sees `r` too and returns no slot; one that saw a word from
//! before it may return a slot only by a CAS from that word, which fails
//! once the word is frozen. No slot is returned twice, none is taken from
//! a probe younger than `probe_timeout`, none is lost: probes in flight
//! never exceed the budget.

use super::machine::{self, Admission, Env, Policy, Recorded, Transition, Verdict};
use super::word::AtomicWord;
use super::word::{Phase, Word, GEN_MASK};
use crate::clock::{Clock, Instant};
use crate::sync::{spin_hint, AtomicU64, Installed, Ordering};
use std::time::Duration;

/// The side word: the generation's low 19 bits over the open-until in
/// milliseconds (45 bits: 1,115 years, past the 584 of a nanosecond
/// `Instant`, so no clock value is out of range). The tag only tells
/// which trip a value is of among trips a few generations apart; the
/// whole generation beside it ([`Until`]) tells the rest.
const TAG_SHIFT: u32 = 45;
/// Bits of the generation in the side word's tag (3 under the `narrow`
/// feature, so that tests go round the tag within a few transitions).
const TAG_BITS: u32 = if cfg!(feature = "narrow") {
    3
} else {
    64 - TAG_SHIFT
};
const MS_MASK: u64 = (1 << TAG_SHIFT) - 1;
const NS_PER_MS: u64 = 1_000_000;

/// The tag of generation `g` in the side word.
#[inline(always)]
const fn tag_of(generation: u64) -> u64 {
    generation & ((1 << TAG_BITS) - 1)
}

/// What [`Cell::admit`] decided.
#[derive(Clone, Copy, Debug)]
pub struct Admitted {
    /// The admission.
    pub admission: Admission,
    /// The transition it made (open to half-open), if any.
    pub transition: Option<Transition>,
    /// The clock reading it used, if it read the clock.
    pub reading: Option<Instant>,
    /// Probe slots taken back on the way (C7), and the generation of the
    /// word they were taken from (whose owner counts them as cancelled).
    pub reclaimed: Option<(u32, u64)>,
}

/// What [`Cell::operate`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operated {
    /// The action made this transition.
    Done(Transition),
    /// The action changes nothing on the word found.
    Unchanged,
    /// `valid` refused the word found (the slot changed owner).
    Lost,
}

#[cfg(test)]
impl Operated {
    /// The transition made, if any.
    pub fn done(self) -> Option<Transition> {
        match self {
            Operated::Done(t) => Some(t),
            _ => None,
        }
    }
}

/// What an update closure decides for one observed word.
#[derive(Debug)]
pub enum Step<R> {
    /// Install this word (by CAS), then return `R`.
    Install(Word, R),
    /// Change nothing, return `R`.
    Keep(R),
}

/// The open-until side words: `(generation tag << 45) | open-until in
/// ms`, rounded up so the period never ends early; and the whole
/// generation of the latest trip written there.
///
/// The tag alone comes round: a trip 2^19 generations after the one
/// whose period the side word still holds (a slot that tenants came and
/// went through) would read that period as its own, and a trip's writer
/// would take it for a rival's of the same trip (C6, C12). So a value
/// is a trip's only if the generation word names that trip too. The
/// generation word is raised (never lowered) after the value is in
/// place, and both are written before the trip's word CAS: a reader that
/// sees `Open(g)` finds `g` in both, or a later trip's generation in the
/// generation word (the word it read is then no longer current, and it
/// refuses as for a period being published).
#[derive(Debug, Default)]
pub struct Until {
    packed: AtomicU64,
    generation: AtomicU64,
}

/// The probe side words (see the module docs): when the youngest probe
/// in flight was admitted, and the generation below which probe permits
/// hold no slot.
#[derive(Debug, Default)]
pub struct Probes {
    /// Clock reading (ns) of the latest probe admission, written before
    /// its CAS; only ever raised.
    admitted_ns: AtomicU64,
    /// Probe permits of a generation below this one hold no slot: their
    /// slots were taken back. Only ever raised.
    slotless_below: AtomicU64,
}

/// A side part with nothing but what every cell needs.
#[derive(Debug, Default)]
pub struct Plain {
    until: Until,
    probes: Probes,
}

/// What a cell keeps beside its word, made on first need: at least the
/// open-until and the probe side words; the owner of the cell may keep
/// more there. `Send + Sync`: every thread that shares the cell may reach
/// it.
pub trait Side: Default + Send + Sync {
    /// The open-until side word.
    fn until(&self) -> &Until;

    /// The probe side words.
    fn probes(&self) -> &Probes;

    /// Called before the CAS that starts a closed episode (a close from
    /// half-open, a reset), while no call of the new episode can have
    /// been admitted yet: whatever counts toward the next trip starts
    /// afresh here (C5, C11). `generation` is the episode's.
    fn before_close(&self, generation: u64) {
        let _ = generation;
    }
}

impl Side for Plain {
    fn until(&self) -> &Until {
        &self.until
    }
    fn probes(&self) -> &Probes {
        &self.probes
    }
}

/// One partition's word, and its side part once something needed one.
#[derive(Debug)]
pub struct Cell<S: Side = Plain> {
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
    fn open_until(&self, generation: u64) -> Option<Instant> {
        self.cell.open_until(generation)
    }
    fn probes_expired(&mut self, timeout: Duration) -> bool {
        let now = self.now();
        youngest_expired(self.cell, now, timeout)
    }
}

/// What it takes to decide a reclaim (a clock and `probe_timeout`), and
/// where the decider reports the slots it took back and the generation
/// of the word it took them from. Only admissions judge: every other path
/// that meets a frozen word gives the reclaim up, which is always safe.
#[derive(Clone, Copy)]
struct Judge<'a> {
    clock: &'a dyn Clock,
    timeout: Duration,
    reclaimed: &'a std::cell::Cell<Option<(u32, u64)>>,
}

/// Whether the youngest probe admitted on `cell` is `timeout` old at `now`.
fn youngest_expired<S: Side>(cell: &Cell<S>, now: Instant, timeout: Duration) -> bool {
    // Acquire: pairs with the stamp written before the CAS of the
    // youngest probe counted in the word the caller read.
    let youngest = cell
        .side_if_any()
        .map_or(0, |s| s.probes().admitted_ns.load(Ordering::Acquire));
    let timeout = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    now.as_nanos().saturating_sub(youngest) >= timeout
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

    /// Moves a slot this thread holds (vacant, or just made fresh) to
    /// `phase` with a new generation and no backoff: how a slot is handed
    /// to a new tenant, taken back, or freed. A CAS like every other
    /// write of the word (its `Release` half publishes the new owner's
    /// key and counters to whoever sees the word), so nothing another
    /// thread wrote in between (a late probe's returned slot) is lost.
    /// Returns the word installed.
    pub fn hand_over(&self, phase: Phase) -> Word {
        self.update(|w| {
            let next = w.transition(phase).with_trips(0);
            Step::Install(next, next)
        })
    }

    /// The one compare-and-swap loop: `f` sees each observed word and
    /// decides; it may run several times under contention. `until` gives
    /// the open-until of a trip (`f`'s word is `Open` and `cur` was not):
    /// it is written beside the word before the CAS (see the module docs).
    #[inline]
    fn update_with<R>(
        &self,
        mut f: impl FnMut(Word) -> Step<R>,
        until: impl Fn(&R) -> Option<Instant>,
        judge: Option<Judge<'_>>,
    ) -> R {
        let mut cur = self.load();
        loop {
            match cur.phase() {
                Phase::Checking => {
                    cur = self.decide_reclaim(cur, judge);
                    continue;
                }
                Phase::Reclaiming => {
                    cur = self.finish_reclaim(cur);
                    continue;
                }
                _ => {}
            }
            match f(cur) {
                Step::Keep(r) => return r,
                Step::Install(next, r) => {
                    // Only a trip has an open-until: its word is Open, of
                    // a new generation (an operator's trip may replace an
                    // open word, C19).
                    if let Some(at) = until(&r) {
                        debug_assert!(
                            next.phase() == Phase::Open && next.generation() != cur.generation()
                        );
                        if !self.prepublish(cur, next.generation(), at) {
                            // The word moved on: decide again on the new
                            // one. (Not by CAS from `cur`: the word may
                            // come back to `cur`, probes returned and
                            // taken again, and the CAS would then install
                            // a trip whose period was never written.)
                            cur = self.load();
                            spin_hint();
                            continue;
                        }
                    }
                    if next.phase() == Phase::Closed && next.generation() != cur.generation() {
                        if let Some(side) = self.side_if_any() {
                            side.before_close(next.generation());
                        }
                    }
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

    /// The second step of a reclaim (see the module docs), by whichever
    /// thread meets the frozen word first: decided only by a thread that
    /// can read the clock (`judge`) and finds every probe the word counts
    /// `probe_timeout` old, given up by any other. The word found after it.
    #[cold]
    fn decide_reclaim(&self, checking: Word, judge: Option<Judge<'_>>) -> Word {
        // Read after the frozen word: every probe it counts wrote its
        // stamp before the CAS that counted it.
        let expired = judge.is_some_and(|j| youngest_expired(self, j.clock.now(), j.timeout));
        let next = machine::decide_reclaim(checking, expired);
        // AcqRel: as in `update_with`.
        match self
            .word
            .compare_exchange(checking, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                if let (true, Some(j)) = (expired, judge) {
                    j.reclaimed
                        .set(Some((checking.probes(), checking.generation())));
                }
                next
            }
            Err(seen) => seen,
        }
    }

    /// The last step of a reclaim (see the module docs), by whichever
    /// thread meets the `Reclaiming` word first; the word found after it.
    #[cold]
    fn finish_reclaim(&self, reclaiming: Word) -> Word {
        // AcqRel, before the CAS below: whoever sees the word that CAS
        // installs (or a later one) sees this generation too.
        self.side()
            .probes()
            .slotless_below
            .fetch_max(reclaiming.generation(), Ordering::AcqRel);
        let next = machine::finish_reclaim(reclaiming);
        // AcqRel: as in `update_with`.
        match self
            .word
            .compare_exchange(reclaiming, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => next,
            Err(seen) => seen,
        }
    }

    /// Whether a probe permit of `generation` still holds its slot: not
    /// if a reclaim took it back (see the module docs). Read after the
    /// word it is decided with.
    fn holds_slot(&self, generation: u64) -> bool {
        // Acquire: pairs with `finish_reclaim`'s write.
        let below = self
            .side_if_any()
            .map_or(0, |s| s.probes().slotless_below.load(Ordering::Acquire));
        generation & GEN_MASK >= below
    }

    /// Whether every probe permit this cell counts in flight was admitted
    /// `timeout` or longer before `now` (C7): the youngest one's stamp is
    /// that old.
    pub fn probes_timed_out(&self, now: Instant, timeout: Duration) -> bool {
        youngest_expired(self, now, timeout)
    }

    /// Probe permits of a generation below `generation` hold no slot from
    /// now on (as after a reclaim): for a slot taken by eviction with its
    /// timed-out probes, before anyone else can own it, so that their
    /// records, if they ever come, return nothing to the next owner.
    pub fn forget_probes_below(&self, generation: u64) {
        self.side()
            .probes()
            .slotless_below
            .fetch_max(generation & GEN_MASK, Ordering::AcqRel);
    }

    /// The plain CAS loop, for updates that never trip.
    #[inline]
    pub fn update<R>(&self, f: impl FnMut(Word) -> Step<R>) -> R {
        self.update_with(f, |_| None, None)
    }

    /// End of the open period of `generation`, if its side word is there.
    #[inline]
    pub fn open_until(&self, generation: u64) -> Option<Instant> {
        // Acquire: pairs with the writer's Release, made before the word
        // CAS this reader's `Open(generation)` came from.
        let until = self.side_if_any()?.until();
        let v = until.packed.load(Ordering::Acquire);
        // Acquire, after the value: the generation of the value read or
        // of a later trip (see `Until`).
        let of = until.generation.load(Ordering::Acquire);
        (v >> TAG_SHIFT == tag_of(generation) && of == generation)
            .then(|| Instant::from_nanos((v & MS_MASK).saturating_mul(NS_PER_MS)))
    }

    /// Writes the open-until of the trip from `expected` to `Open(generation)`
    /// before that trip's CAS. True once the side word holds it (or a later
    /// end of the same trip) while the word was still `expected`; false,
    /// writing nothing, once the word is no longer `expected`.
    fn prepublish(&self, expected: Word, generation: u64, until: Instant) -> bool {
        let ms = until.as_nanos().div_ceil(NS_PER_MS).min(MS_MASK);
        let tag = tag_of(generation);
        let new = (tag << TAG_SHIFT) | ms;
        let side = self.side().until();
        // Acquire: see what a rival of the same trip wrote.
        let mut cur = side.packed.load(Ordering::Acquire);
        loop {
            // Acquire, after the value: a rival raises the generation
            // only once its value is in place, so `generation` here means
            // the side word holds this trip's value (`cur` or a newer one
            // of the same trip: only this trip's rivals write while the
            // word is `expected`). A value of a trip a whole tag earlier
            // has an older generation beside it and is overwritten.
            let of = side.generation.load(Ordering::Acquire);
            // Loaded after the side word: a newer trip writes the side word
            // before its word CAS, so if the word is still `expected` here,
            // `cur` is no newer trip's period, and a newer one written
            // after this load makes the CAS below fail.
            if self.load() != expected {
                return false;
            }
            if of == generation && cur >> TAG_SHIFT == tag && cur & MS_MASK >= ms {
                return true; // a rival making the same trip wrote a later end
            }
            // Release: a reader that sees the trip's word sees this value.
            match side
                .packed
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // AcqRel: after the value (see `Until`); never
                    // lowered, so a slow rival of an older trip cannot
                    // take a newer trip's generation away.
                    side.generation.fetch_max(generation, Ordering::AcqRel);
                    return true;
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Admission; `valid` is re-checked on every observed word (slot
    /// ownership for tenant partitions). Returns `None` when `valid` fails;
    /// otherwise the admission, its transition, the clock reading it used
    /// (if it read the clock), and the probe slots it took back from
    /// probes that outlived `probe_timeout` (C7: each counts as
    /// cancelled), with the generation of the word they were taken from.
    #[inline]
    pub fn admit(
        &self,
        policy: &Policy,
        clock: &dyn Clock,
        valid: impl Fn(Word) -> bool,
    ) -> Option<Admitted> {
        let mut env = CellEnv {
            cell: self,
            clock,
            now: None,
            coarse: None,
        };
        let reclaimed = std::cell::Cell::new(None);
        // An open-to-half-open transition made on the way to a reclaim.
        let mut half_opened = None;
        let judge = Judge {
            clock,
            timeout: policy.probe_timeout,
            reclaimed: &reclaimed,
        };
        loop {
            let r = self.update_with(
                |w| {
                    if !valid(w) {
                        return Step::Keep(None);
                    }
                    match machine::admit(w, policy, &mut env) {
                        (None, a) => Step::Keep(Some((a, None))),
                        (Some(next), a) => {
                            if let Admission::Admit { probe: true, .. } = a {
                                self.stamp_probe(env.now());
                            }
                            let t = machine::admit_transition(w, Some(next));
                            Step::Install(next, Some((a, t)))
                        }
                    }
                },
                |_| None,
                Some(judge),
            )?;
            match r {
                // Installed: admit again, taking the slots back on the way.
                (Admission::Reclaim { .. }, t) => half_opened = half_opened.or(t),
                (a, t) => {
                    return Some(Admitted {
                        admission: a,
                        transition: t.or(half_opened),
                        reading: env.reading(),
                        reclaimed: reclaimed.get(),
                    })
                }
            }
        }
    }

    /// Writes a probe admission's clock reading before its CAS (see the
    /// module docs).
    #[cold]
    fn stamp_probe(&self, now: Instant) {
        // Release (AcqRel): whoever sees the probe's word sees the stamp.
        self.side()
            .probes()
            .admitted_ns
            .fetch_max(now.as_nanos(), Ordering::AcqRel);
    }

    /// Records an outcome for a permit of `generation`.
    #[inline]
    pub fn record(
        &self,
        policy: &Policy,
        clock: &dyn Clock,
        generation: u64,
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
        self.update_with(
            |w| {
                // Read after `w` (see the module docs).
                let probe = probe && self.holds_slot(generation);
                match machine::record(w, policy, generation, probe, verdict, trip, &mut env) {
                    (None, r) => Step::Keep(r),
                    (Some(next), r) => Step::Install(next, r),
                }
            },
            |r| match r {
                Recorded::Transition(t) => t.open_until,
                _ => None,
            },
            None,
        )
    }

    /// Ends an open period no admission has seen yet ([`machine::expire`]).
    pub fn expire(&self, policy: &Policy, clock: &dyn Clock) -> Option<Transition> {
        let mut env = CellEnv {
            cell: self,
            clock,
            now: None,
            coarse: None,
        };
        self.update(|w| match machine::expire(w, policy, &mut env) {
            Some((next, t)) => Step::Install(next, Some(t)),
            None => Step::Keep(None),
        })
    }

    /// Applies an operator action (`machine::reset`, `force_open`, `trip`
    /// or `half_open`) if `valid` holds for the observed word: one CAS,
    /// decided again on every word a rival installs first, so the action
    /// is never lost to a concurrent admission or record. A trip's
    /// open-until is written before its CAS, as for every trip.
    pub fn operate(
        &self,
        action: impl Fn(Word) -> Option<(Word, Transition)>,
        valid: impl Fn(Word) -> bool,
    ) -> Operated {
        self.update_with(
            |w| {
                if !valid(w) {
                    return Step::Keep(Operated::Lost);
                }
                match action(w) {
                    Some((next, t)) => Step::Install(next, Operated::Done(t)),
                    None => Step::Keep(Operated::Unchanged),
                }
            },
            |r| match r {
                Operated::Done(t) => t.open_until,
                _ => None,
            },
            None,
        )
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
mod tests;
