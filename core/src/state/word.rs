//! The packed breaker word: one partition's whole admission state in 64 bits.
//!
//! | bits    | field        | meaning                                                         |
//! |---------|--------------|-----------------------------------------------------------------|
//! | 0..3    | `state`      | [`Phase`]: closed, open, half-open, forced-open, vacant, pending, checking, reclaiming |
//! | 3..10   | `probes`     | probe permits in flight (all half-open episodes), ≤ 127         |
//! | 10..15  | `trips`      | re-trips from half-open since the last close (backoff exponent) |
//! | 15..25  | `count`      | closed: consecutive failures; half-open: probe successes        |
//! | 25..64  | `generation` | changes on every transition and slot hand-over; permits carry it |
//!
//! Counters saturate at their field's maximum instead of wrapping into the
//! neighbouring field; the profile caps thresholds and budgets at those
//! maxima (`probe_budget` ≤ 127, thresholds ≤ 1023) so saturation never
//! changes a decision. The open-until time does not fit here: it lives
//! beside the word in a side word written before the trip that needs it
//! (see [`super::cell`]).
//!
//! Why 39 bits of generation are enough (C13: no wrap a caller can reach).
//! A permit passes for a current one only if its partition's generation
//! came round the whole 2^39 (5.5 × 10^11) while the permit was held. Every
//! step of the generation is a compare-and-swap that also does the work of
//! a transition (an event built and queued, a clock read) or of a slot
//! hand-over (a shard copied and swapped), each well over 100 ns: one
//! partition cannot take 2^39 of them in less than 15 hours, and a call
//! would have to hold its permit through all of them. The counters pay
//! for those bits: budgets and thresholds above a thousand are not what
//! a breaker is configured with.
//!
//! `Word` is a plain `Copy` value: every transition is a pure function over
//! it ([`super::machine`]), and only [`super::cell`] touches the atomic.

#[cfg(loom)]
use crate::sync::{AtomicU64, Ordering};

use bytemuck::NoUninit;

/// Phase of a partition, the 3-bit `state` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// Traffic flows; failures are being counted.
    Closed = 0,
    /// Tripped: calls get the fallback until the open period ends.
    Open = 1,
    /// Probing: at most `probe_budget` calls in flight.
    HalfOpen = 2,
    /// Isolated by an operator until `reset`.
    ForcedOpen = 3,
    /// A tenant slot being recycled by eviction; never seen through the API.
    Vacant = 4,
    /// A tenant slot held for a named newcomer whose entry is being
    /// published: admits no one until the insert (or a lookup that found
    /// the entry) completes it; never seen through the API.
    Pending = 5,
    /// Half-open, its probe slots being taken back from probes that
    /// outlived `probe_timeout` (C7): any thread that meets it finishes
    /// the reclaim before doing anything else (see [`super::cell`]); read
    /// as half-open.
    Reclaiming = 6,
    /// Half-open, frozen while a reclaim is decided: any thread that
    /// meets it decides (reclaim, or give up if a probe might be young)
    /// before doing anything else; read as half-open.
    Checking = 7,
}

impl Phase {
    /// Vacant or pending: a slot in a hand-over, no one's partition yet.
    #[inline]
    pub const fn is_held(self) -> bool {
        matches!(self, Phase::Vacant | Phase::Pending)
    }

    /// The phase a reader reports: a reclaim in progress is half-open.
    #[inline]
    pub const fn seen(self) -> Phase {
        match self {
            Phase::Reclaiming | Phase::Checking => Phase::HalfOpen,
            p => p,
        }
    }
}

const STATE_BITS: u32 = 3;
const PROBE_BITS: u32 = 7;
const TRIP_BITS: u32 = 5;
const COUNT_BITS: u32 = 10;
/// Width of the generation field.
pub const GEN_BITS: u32 = 39;

const STATE_SHIFT: u32 = 0;
const PROBE_SHIFT: u32 = STATE_SHIFT + STATE_BITS;
const TRIP_SHIFT: u32 = PROBE_SHIFT + PROBE_BITS;
const COUNT_SHIFT: u32 = TRIP_SHIFT + TRIP_BITS;
const GEN_SHIFT: u32 = COUNT_SHIFT + COUNT_BITS;
const _: () = assert!(GEN_SHIFT + GEN_BITS == 64);

const fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// Largest probe budget the word can hold.
pub const MAX_PROBES: u32 = mask(PROBE_BITS) as u32;
/// Largest failure or success threshold the word can hold.
pub const MAX_COUNT: u32 = mask(COUNT_BITS) as u32;
/// Largest backoff exponent kept; beyond it the cap `max` applies anyway.
pub const MAX_TRIPS: u32 = mask(TRIP_BITS) as u32;
/// The generation field's largest value.
pub const GEN_MASK: u64 = mask(GEN_BITS);

/// One partition's packed state (see the module docs for the bit layout).
#[derive(Clone, Copy, PartialEq, Eq, Hash, NoUninit)]
#[repr(transparent)]
pub struct Word(u64);

impl Word {
    /// A fresh partition: closed, generation 0, nothing counted.
    pub const FRESH: Word = Word(0);

    /// The raw bits (loom's atomic word stores them).
    #[cfg(any(loom, test))]
    #[inline]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// From raw bits.
    #[cfg(any(loom, test))]
    #[inline]
    pub const fn from_bits(bits: u64) -> Word {
        Word(bits)
    }

    #[inline]
    const fn field(self, shift: u32, bits: u32) -> u32 {
        ((self.0 >> shift) & mask(bits)) as u32
    }

    #[inline]
    const fn with_field(self, shift: u32, bits: u32, v: u32) -> Word {
        let m = mask(bits) << shift;
        Word((self.0 & !m) | (((v as u64) & mask(bits)) << shift))
    }

    /// The phase.
    #[inline]
    pub const fn phase(self) -> Phase {
        match self.field(STATE_SHIFT, STATE_BITS) {
            0 => Phase::Closed,
            1 => Phase::Open,
            2 => Phase::HalfOpen,
            3 => Phase::ForcedOpen,
            5 => Phase::Pending,
            6 => Phase::Reclaiming,
            7 => Phase::Checking,
            _ => Phase::Vacant,
        }
    }

    /// Probe permits in flight.
    #[inline]
    pub const fn probes(self) -> u32 {
        self.field(PROBE_SHIFT, PROBE_BITS)
    }

    /// Re-trips since the last close.
    #[inline]
    pub const fn trips(self) -> u32 {
        self.field(TRIP_SHIFT, TRIP_BITS)
    }

    /// Consecutive failures (closed) or probe successes (half-open).
    #[inline]
    pub const fn count(self) -> u32 {
        self.field(COUNT_SHIFT, COUNT_BITS)
    }

    /// The generation.
    #[inline]
    pub const fn generation(self) -> u64 {
        self.0 >> GEN_SHIFT
    }

    /// With another phase.
    #[inline]
    pub const fn with_phase(self, p: Phase) -> Word {
        self.with_field(STATE_SHIFT, STATE_BITS, p as u32)
    }

    /// With `probes` set, saturating at [`MAX_PROBES`].
    #[inline]
    pub const fn with_probes(self, n: u32) -> Word {
        let n = if n > MAX_PROBES { MAX_PROBES } else { n };
        self.with_field(PROBE_SHIFT, PROBE_BITS, n)
    }

    /// With `trips` set, saturating at [`MAX_TRIPS`].
    #[inline]
    pub const fn with_trips(self, n: u32) -> Word {
        let n = if n > MAX_TRIPS { MAX_TRIPS } else { n };
        self.with_field(TRIP_SHIFT, TRIP_BITS, n)
    }

    /// With `count` set, saturating at [`MAX_COUNT`].
    #[inline]
    pub const fn with_count(self, n: u32) -> Word {
        let n = if n > MAX_COUNT { MAX_COUNT } else { n };
        self.with_field(COUNT_SHIFT, COUNT_BITS, n)
    }

    /// The next generation, everything else kept (see the module docs for
    /// why the field does not come round in practice).
    #[inline]
    pub const fn next_generation(self) -> Word {
        Word(self.0.wrapping_add(1 << GEN_SHIFT))
    }

    /// A transition: new phase, next generation, count cleared.
    #[inline]
    pub const fn transition(self, p: Phase) -> Word {
        self.with_phase(p).next_generation().with_count(0)
    }

    /// Closed in generation `generation` with no failure counted: a success
    /// of that generation changes nothing (one mask and compare, for the
    /// healthy path).
    #[inline(always)]
    pub const fn is_quiet_closed(self, generation: u64) -> bool {
        const QUIET: u64 = mask(STATE_BITS) << STATE_SHIFT
            | mask(COUNT_BITS) << COUNT_SHIFT
            | mask(GEN_BITS) << GEN_SHIFT;
        // Closed is phase 0, so the expected bits are the generation's alone.
        self.0 & QUIET == (generation & GEN_MASK) << GEN_SHIFT
    }

    /// Closed with nothing counted and nothing in flight: equal to a fresh
    /// partition but for the generation, so evicting it loses nothing (C9).
    #[inline]
    pub const fn is_idle(self) -> bool {
        matches!(self.phase(), Phase::Closed) && self.count() == 0 && self.probes() == 0
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Word")
            .field("phase", &self.phase())
            .field("probes", &self.probes())
            .field("trips", &self.trips())
            .field("count", &self.count())
            .field("generation", &self.generation())
            .finish()
    }
}

/// The typed atomic cell type for the packed word.
#[cfg(not(loom))]
pub(crate) type AtomicWord = atomic::Atomic<Word>;

// The packed word must be lock-free: with the `fallback` feature off a
// non-native size would not even provide the operations, and this makes
// the promise explicit at compile time.
#[cfg(not(loom))]
const _: () = assert!(atomic::Atomic::<Word>::is_lock_free());

/// Loom stand-in for `atomic::Atomic<Word>`: the methods the core uses (no
/// plain store: every write of a live word is a CAS), loom's `AtomicU64` inside.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct AtomicWord(AtomicU64);

#[cfg(loom)]
impl AtomicWord {
    pub(crate) fn new(w: Word) -> Self {
        Self(AtomicU64::new(w.bits()))
    }
    pub(crate) fn load(&self, order: Ordering) -> Word {
        Word::from_bits(self.0.load(order))
    }
    pub(crate) fn compare_exchange_weak(
        &self,
        current: Word,
        new: Word,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word, Word> {
        self.0
            .compare_exchange_weak(current.bits(), new.bits(), success, failure)
            .map(Word::from_bits)
            .map_err(Word::from_bits)
    }
    pub(crate) fn compare_exchange(
        &self,
        current: Word,
        new: Word,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word, Word> {
        self.0
            .compare_exchange(current.bits(), new.bits(), success, failure)
            .map(Word::from_bits)
            .map_err(Word::from_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_and_the_raw_bits_round_trip() {
        for p in [
            Phase::Closed,
            Phase::Open,
            Phase::HalfOpen,
            Phase::ForcedOpen,
            Phase::Vacant,
            Phase::Pending,
            Phase::Reclaiming,
            Phase::Checking,
        ] {
            let w = Word::FRESH.with_phase(p).with_probes(3).next_generation();
            assert_eq!(w.phase(), p);
            assert_eq!(Word::from_bits(w.bits()), w);
            assert_eq!(w.bits() & 0b111, p as u64, "{p:?} in the low bits");
        }
        let w = Word::from_bits(0xDEAD_BEEF_1234_5678);
        assert_eq!(w.bits(), 0xDEAD_BEEF_1234_5678);
        let shown = format!("{:?}", Word::FRESH.with_probes(7).with_count(9));
        assert!(
            shown.contains("probes: 7") && shown.contains("count: 9"),
            "{shown}"
        );
    }

    #[test]
    fn counters_saturate_above_their_maximum_instead_of_wrapping() {
        let w = Word::FRESH;
        assert_eq!(w.with_probes(MAX_PROBES + 9).probes(), MAX_PROBES);
        assert_eq!(w.with_trips(MAX_TRIPS + 9).trips(), MAX_TRIPS);
        assert_eq!(w.with_count(MAX_COUNT + 9).count(), MAX_COUNT);
        assert_eq!(w.with_trips(MAX_TRIPS + 9).phase(), Phase::Closed);
    }

    #[test]
    fn quiet_closed_is_closed_of_that_generation_with_nothing_counted() {
        let w = Word::FRESH.next_generation().next_generation();
        let g = w.generation();
        assert!(w.is_quiet_closed(g));
        // Probes of an earlier episode and backoff do not make it loud.
        assert!(w.with_probes(2).with_trips(1).is_quiet_closed(g));
        assert!(!w.with_count(1).is_quiet_closed(g), "a failure counted");
        assert!(!w.with_count(MAX_COUNT).is_quiet_closed(g));
        assert!(!w.is_quiet_closed(g + 1) && !w.is_quiet_closed(g - 1));
        assert!(!w.is_quiet_closed(g | 1 << 20), "generation bits above 19");
        for p in [
            Phase::Open,
            Phase::HalfOpen,
            Phase::ForcedOpen,
            Phase::Vacant,
        ] {
            assert!(!w.with_phase(p).is_quiet_closed(g), "{p:?}");
        }
        let high = Word::from_bits((GEN_MASK - 1) << GEN_SHIFT);
        assert!(high.is_quiet_closed(GEN_MASK - 1));
        assert!(!high.is_quiet_closed(GEN_MASK));
    }

    #[test]
    fn fields_round_trip_without_touching_neighbours() {
        let w = Word::FRESH
            .with_phase(Phase::HalfOpen)
            .with_probes(MAX_PROBES)
            .with_trips(MAX_TRIPS)
            .with_count(MAX_COUNT);
        assert_eq!(w.phase(), Phase::HalfOpen);
        assert_eq!(w.probes(), MAX_PROBES);
        assert_eq!(w.trips(), MAX_TRIPS);
        assert_eq!(w.count(), MAX_COUNT);
        assert_eq!(w.generation(), 0);
    }

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        let w = Word::FRESH
            .with_count(MAX_COUNT + 5)
            .with_probes(MAX_PROBES + 1);
        assert_eq!(w.count(), MAX_COUNT);
        assert_eq!(w.probes(), MAX_PROBES);
        assert_eq!(
            w.generation(),
            0,
            "saturation must not spill into the generation"
        );
        assert_eq!(w.trips(), 0);
    }

    #[test]
    fn c13_generation_has_39_bits_and_stays_in_its_field() {
        let mut w = Word::FRESH.with_phase(Phase::Open);
        for _ in 0..3 {
            w = w.next_generation();
        }
        assert_eq!(w.generation(), 3);
        let top = Word::from_bits(u64::MAX)
            .with_phase(Phase::Closed)
            .with_probes(0);
        assert_eq!(top.generation(), GEN_MASK);
        let wrapped = top.next_generation();
        assert_eq!(wrapped.generation(), 0);
        assert_eq!(wrapped.count(), top.count());
    }

    #[test]
    fn c9_idle_means_fresh_but_for_generation() {
        assert!(Word::FRESH.is_idle());
        assert!(Word::FRESH.next_generation().is_idle());
        assert!(!Word::FRESH.with_count(1).is_idle());
        assert!(!Word::FRESH.with_probes(1).is_idle());
        assert!(!Word::FRESH.with_phase(Phase::Open).is_idle());
    }
}
