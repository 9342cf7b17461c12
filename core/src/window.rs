//! The rolling failure-rate window of the `failure_rate` policy (C5).

use crate::sync::{thread_index, AtomicBool, AtomicU64, CachePadded, Ordering};
use std::time::Duration;

/// The rolling failure-rate window: `BUCKETS` buckets of `window / BUCKETS`.
///
/// Approximation: the rate covers the current bucket and the nine before it,
/// so the effective window is between 90% and 100% of `window`.
pub(crate) const BUCKETS: usize = 10;
const B_EPOCH_SHIFT: u32 = 40;
const B_CALLS_SHIFT: u32 = 20;
const B_FIELD: u64 = (1 << 20) - 1;
/// Bits of a bucket's epoch: 24 (the `narrow` feature keeps 7, so that
/// tests cross the epoch's wrap within a hundred buckets).
const B_EPOCH_BITS: u32 = if cfg!(feature = "narrow") { 7 } else { 24 };
const B_EPOCH: u64 = (1 << B_EPOCH_BITS) - 1;
/// Ticks from one scrub to the next (see [`Window::scrubbed`]): a quarter
/// of the epoch's range, so that every bucket a scrub leaves is younger
/// than half the range when the next one runs.
const SCRUB_TICKS: u64 = 1 << (B_EPOCH_BITS - 2);
/// A scrub empties the buckets at least this many ticks old: two windows,
/// so that a call read up to a window late still finds the window it
/// was read in (C13).
const STALE_TICKS: u64 = 2 * BUCKETS as u64;
/// A scrub this far behind the last one finds every bucket stale.
const LONG_TICKS: u64 = 2 * SCRUB_TICKS + BUCKETS as u64;
// A scrub's reach (see `Window::scrub`): a scrub `LONG_TICKS` after the
// last one finds nothing written since younger than `STALE_TICKS`; one
// sooner finds every bucket younger than the epoch range; and a record
// between two scrubs finds every bucket within half the range, where
// `newer_than` is exact.
const _: () = assert!(
    SCRUB_TICKS >= BUCKETS as u64
        && LONG_TICKS + STALE_TICKS <= B_EPOCH
        && SCRUB_TICKS + STALE_TICKS < B_EPOCH / 2
);

/// The rolling failure-rate window of one partition.
///
/// Each bucket is one word: (bucket epoch, calls, failures). A global
/// partition keeps one copy of the buckets per core (cache-padded): a
/// thread holding [`thread_index`] `i` below that count is the only writer
/// of copy `i` and counts there with a plain load and store; every other
/// thread (and every thread of a tenant partition, which has no owned
/// copies) counts in the shared copy by CAS. The rate is judged over the
/// sum of all copies, on a failure (and on a success only when armed or
/// the window slid: see [`Window::record_and_judge`]); a judgement well below the
/// threshold leaves passes, so the failures after it need not sum again
/// (see [`Window::pass`]).
#[derive(Debug)]
pub(crate) struct Window {
    /// `owned` per-thread copies, then the shared one.
    pub(crate) stripes: Box<[CachePadded<[AtomicU64; BUCKETS]>]>,
    pub(crate) owned: usize,
    width_ns: u64,
    /// ⌈2^64 / width_ns⌉ (`u64::MAX` for a width of 1), for `epoch`.
    width_inv: u64,
    /// The last judgement saw the rate at or above the threshold with too
    /// few calls: only then can a success trip (by completing `min_calls`),
    /// so only then do successes judge.
    armed: AtomicBool,
    /// The tick whose first success judged the window (see
    /// [`Window::record_and_judge`]); none at first. The whole tick, not
    /// its epoch: a success a whole epoch range after the last one judged
    /// still finds the window slid.
    slid: AtomicU64,
    /// The tick of the last scrub: the bucket epochs are 24 bits, so a
    /// bucket written an epoch range ago (194 days of 1 s buckets) reads
    /// as current again. A record whose tick is [`SCRUB_TICKS`] past this
    /// one first scrubs (see [`Window::scrub`]): every bucket two windows
    /// old is emptied (the shared copy's zeroed, an owned copy's
    /// cancelled by its baseline) and the passes voided. So every count
    /// the window keeps is of a bucket younger than half the epoch range,
    /// whose age the 24 bits tell exactly; and a window not written for
    /// longer than a scrub's reach holds nothing in its window at all
    /// (see [`Window::totals`]).
    scrubbed: AtomicU64,
    /// Per owned copy, each bucket as the last clear (or scrub) found it:
    /// what the sum subtracts from a bucket still of that epoch. Owned
    /// copies are not zeroed by a clear, because their owner's plain load
    /// and store could straddle the zeroing and write the old counts back;
    /// counted from a snapshot instead, such a write-back adds only its
    /// own call. The owner drops a bucket's baseline when it starts the
    /// bucket in a new epoch.
    baseline: Box<[[AtomicU64; BUCKETS]]>,
    /// Failures that may be counted without a judgement (see
    /// [`Window::pass`]): a judgement that finds the rate well below the
    /// threshold leaves the number of further failures, all in its bucket
    /// epoch, that cannot raise it to the threshold even if no success
    /// came between, so they need not sum the window again.
    spare: AtomicU64,
    /// For a tenant slot's window, the generation of the closed episode
    /// it counts (see `SidePart::episodes`); `u64::MAX` otherwise.
    pub(crate) episode: u64,
}

// The `spare` word: version (bits 36..64) | bucket epoch (12..36) | passes
// left (0..12).
const S_PASSES: u64 = (1 << 12) - 1;
const S_EPOCH_SHIFT: u32 = 12;
const S_VERSION_SHIFT: u32 = 36;

/// Bucket width from which a coarse clock reading (a few ms behind) is
/// precise enough to pick the bucket.
pub(crate) const COARSE_BUCKET_NS: u64 = 10_000_000;

/// Owned copies for a global partition's window: one per core, within
/// what [`thread_index`] hands out (none under loom).
pub(crate) fn window_stripes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(thread_index::MAX))
}

/// Whether bucket word `cur` is of a later epoch than `e`: then a call of
/// `e` is at least a window older than the bucket (both have the same
/// index), out of the window, and must not start the bucket afresh (C5,
/// C13). Exact within half the epoch range, which the scrubs keep every
/// bucket within (see `Window::scrubbed`).
#[inline]
fn newer_than(cur: u64, e: u64) -> bool {
    let ahead = (cur >> B_EPOCH_SHIFT).wrapping_sub(e) & B_EPOCH;
    cur != 0 && ahead != 0 && ahead <= B_EPOCH / 2
}

/// The usual count, as one add: `cur` plus one call of epoch `e`, when the
/// bucket is of that epoch and not full (failures never outnumber calls,
/// so neither count carries); `None` for every other case, which
/// [`bucket_plus`] decides.
#[inline(always)]
fn bucket_fast(cur: u64, e: u64, failed: bool) -> Option<u64> {
    (cur >> B_EPOCH_SHIFT == e && (cur >> B_CALLS_SHIFT) & B_FIELD < B_FIELD)
        .then(|| cur + (1 << B_CALLS_SHIFT) + u64::from(failed))
}

/// A bucket word after counting one call of epoch `e` into `cur`, and
/// whether that dropped counts a judgement may have summed: a full bucket
/// halved, or the calls of an earlier epoch the bucket held. A judgement
/// made at a late reading (C13) summed that bucket while it was still in
/// the reading's window, so the passes it installed (failures it let
/// through unjudged) assumed calls that are gone. `cur` itself when the
/// bucket is of a later epoch (see [`newer_than`]: the call counts
/// nowhere).
#[inline(always)]
fn bucket_plus(cur: u64, e: u64, failed: bool) -> (u64, bool) {
    if let Some(next) = bucket_fast(cur, e, failed) {
        return (next, false);
    }
    if newer_than(cur, e) {
        return (cur, false);
    }
    let restarted = cur >> B_EPOCH_SHIFT != e;
    let dropped = restarted && (cur >> B_CALLS_SHIFT) & B_FIELD != 0;
    let (calls, fails) = if restarted {
        (0, 0)
    } else {
        ((cur >> B_CALLS_SHIFT) & B_FIELD, cur & B_FIELD)
    };
    // A full bucket halves both counts: the rate is kept (and recent calls
    // weigh more) instead of one count saturating while the other climbs.
    let halved = calls >= B_FIELD;
    let (calls, fails) = if halved {
        (calls / 2, fails / 2)
    } else {
        (calls, fails)
    };
    let calls = calls + 1;
    let fails = fails + u64::from(failed);
    (
        (e << B_EPOCH_SHIFT) | (calls << B_CALLS_SHIFT) | fails,
        halved || dropped,
    )
}

impl Window {
    /// A window of `window`, with `owned` per-thread copies of the buckets.
    pub(crate) fn new(window: Duration, owned: usize) -> Self {
        let width = u64::try_from(window.as_nanos() / BUCKETS as u128).unwrap_or(u64::MAX);
        let owned = owned.min(thread_index::MAX);
        Self {
            stripes: (0..=owned)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            owned,
            width_ns: width.max(1),
            width_inv: u64::try_from((1u128 << 64).div_ceil(u128::from(width.max(1))))
                .unwrap_or(u64::MAX),
            armed: AtomicBool::new(false),
            slid: AtomicU64::new(u64::MAX),
            scrubbed: AtomicU64::new(0),
            baseline: (0..owned)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            spare: AtomicU64::new(0),
            episode: u64::MAX,
        }
    }

    /// A tenant slot's window for the closed episode of `generation`: no
    /// owned copies, so every count is a CAS on the shared one.
    pub(crate) fn new_episode(window: Duration, generation: u64) -> Self {
        Self {
            episode: generation,
            ..Self::new(window, 0)
        }
    }

    /// The window's length.
    pub(crate) fn width(&self) -> Duration {
        Duration::from_nanos(self.width_ns.saturating_mul(BUCKETS as u64))
    }

    /// The tick of `now_ns`: `now_ns / width_ns`, by a multiply
    /// with the width's rounded-up reciprocal instead of a division (the
    /// division was a tenth of a failure-rate call). The quotient can come
    /// out one too high only for `now_ns` within `now_ns / 2^64` widths of
    /// a bucket's end (under 0.1 µs of a 1 ms bucket after a year of
    /// uptime): such a call is counted in the next bucket. Monotone in
    /// `now_ns` like the division, so buckets still follow time.
    #[inline]
    pub(crate) fn tick(&self, now_ns: u64) -> u64 {
        ((u128::from(now_ns) * u128::from(self.width_inv)) >> 64) as u64
    }

    /// The bucket epoch of `now_ns` as the buckets store it: [`Window::tick`]
    /// in 24 bits. Ages are taken modulo 2^24, exact for every bucket the
    /// scrubs keep (see [`Window::scrubbed`]), so a bucket is out of the
    /// window once its age reaches `BUCKETS`.
    #[inline]
    pub(crate) fn epoch(&self, now_ns: u64) -> u64 {
        self.tick(now_ns) & B_EPOCH
    }

    /// Counts one call; its tick, or `None` for a call read at least a
    /// window before its bucket's latest (a late call: counted nowhere,
    /// see [`newer_than`]).
    #[cfg(test)]
    pub(crate) fn record(&self, now_ns: u64, failed: bool) -> Option<u64> {
        let t = self.tick(now_ns);
        self.record_tick(t, failed).then_some(t)
    }

    /// Counts one call of tick `t`, scrubbing first if one is due; false
    /// for a late call (see [`Window::record`]).
    #[inline(always)]
    fn record_tick(&self, t: u64, failed: bool) -> bool {
        // Acquire: see the buckets as the last scrub left them.
        if t.saturating_sub(self.scrubbed.load(Ordering::Acquire)) >= SCRUB_TICKS {
            self.scrub(t);
        }
        self.count_and_void(t, failed)
    }

    /// [`Window::count`], voiding the passes after it dropped counts (a
    /// halving, a restarted bucket: see [`bucket_plus`]); false for a late
    /// call.
    #[inline(always)]
    fn count_and_void(&self, t: u64, failed: bool) -> bool {
        match self.count(t, failed) {
            Some(false) => true,
            Some(true) => {
                self.void_passes();
                true
            }
            None => false,
        }
    }

    /// Empties every bucket two windows old at tick `t` and voids the
    /// passes, before a record of `t` counts (see [`Window::scrubbed`]).
    /// Any number of threads may scrub at once, each the whole way: no
    /// one waits for another. A bucket is judged by its epoch when the
    /// last scrub is under [`LONG_TICKS`] behind (every bucket kept is
    /// then younger than the range), and as stale when it is further
    /// behind (every bucket is then older than two windows). A
    /// bucket written after another scrub finished is never emptied: a
    /// scrubber that reads such a bucket sees that scrub's tick after it
    /// (the writer stored the bucket after it saw that tick, `Release`),
    /// and starts over from it.
    #[cold]
    #[inline(never)]
    fn scrub(&self, t: u64) {
        'again: loop {
            // Acquire: see the buckets as the scrub of `prev` left them.
            let prev = self.scrubbed.load(Ordering::Acquire);
            if t.saturating_sub(prev) < SCRUB_TICKS {
                return;
            }
            let long = t - prev >= LONG_TICKS;
            let e = t & B_EPOCH;
            let stale = |v: u64| {
                v != 0 && (long || (e.wrapping_sub(v >> B_EPOCH_SHIFT) & B_EPOCH) >= STALE_TICKS)
            };
            // Acquire: a scrub finished since `prev` (see above).
            let moved = || self.scrubbed.load(Ordering::Acquire) != prev;
            // The shared copy: its writers CAS, so a stale bucket is zeroed.
            for b in self.stripes[self.owned].iter() {
                // Acquire: pairs with the writer's Release.
                let mut v = b.load(Ordering::Acquire);
                loop {
                    if moved() {
                        continue 'again;
                    }
                    if !stale(v) {
                        break;
                    }
                    match b.compare_exchange(v, 0, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => break,
                        Err(seen) => v = seen,
                    }
                }
            }
            // The owned copies: their owners store without a CAS, so a
            // stale bucket is cancelled by a baseline equal to it (and a
            // baseline of an epoch its bucket no longer holds is dropped,
            // so that it cannot come to match a later one).
            for (stripe, base) in self.stripes.iter().zip(self.baseline.iter()) {
                for (b, z) in stripe.iter().zip(base.iter()) {
                    // Acquire: pairs with the owner's Release.
                    let v = b.load(Ordering::Acquire);
                    let was = z.load(Ordering::Acquire);
                    if moved() {
                        continue 'again;
                    }
                    let want = if stale(v) {
                        v
                    } else if was >> B_EPOCH_SHIFT != v >> B_EPOCH_SHIFT {
                        0
                    } else {
                        was
                    };
                    if want != was {
                        // A failed exchange: a clear or the owner wrote
                        // a newer baseline; it stands.
                        let _ = z.compare_exchange(was, want, Ordering::AcqRel, Ordering::Relaxed);
                    }
                }
            }
            self.void_passes();
            // AcqRel: publish the emptied buckets with the tick. A failed
            // exchange: another scrub finished first; look again.
            if self
                .scrubbed
                .compare_exchange(prev, t, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Counts one call of tick `t` in its bucket; whether that dropped
    /// counts (see [`bucket_plus`]), or `None` for a late call (see
    /// [`newer_than`]).
    #[inline(always)]
    pub(crate) fn count(&self, t: u64, failed: bool) -> Option<bool> {
        // The bucket follows the whole tick, not its 24-bit epoch: 2^24 is
        // not a multiple of `BUCKETS`, so at the epoch's wrap the masked
        // value would reuse a bucket only six ticks old, dropping calls
        // still in the window.
        let at = (t % BUCKETS as u64) as usize;
        let e = t & B_EPOCH;
        // Relaxed loads: the counts are statistics; the trip itself is
        // decided by the word's CAS. Release stores: a scrub that reads
        // the bucket sees the scrub tick this record saw (see `scrub`).
        if self.owned > 0 {
            if let Some(i) = thread_index::get().filter(|&i| i < self.owned) {
                // This thread is the copy's only writer (see `thread_index`).
                let b = &self.stripes[i][at];
                let cur = b.load(Ordering::Relaxed);
                if let Some(next) = bucket_fast(cur, e, failed) {
                    b.store(next, Ordering::Release);
                    return Some(false);
                }
                return self.count_owned_slow(i, at, cur, e, failed);
            }
        }
        let b = &self.stripes[self.owned][at];
        let mut cur = b.load(Ordering::Relaxed);
        loop {
            let (next, halved) = match bucket_fast(cur, e, failed) {
                Some(next) => (next, false),
                None => match bucket_plus(cur, e, failed) {
                    (next, _) if next == cur => return None, // a late call
                    other => other,
                },
            };
            match b.compare_exchange_weak(cur, next, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Some(halved),
                Err(seen) => cur = seen,
            }
        }
    }

    /// [`Window::count`] in owned copy `i`'s bucket `at`, holding `cur`,
    /// past the one add: a new epoch, a full bucket, a late call.
    #[cold]
    #[inline(never)]
    fn count_owned_slow(
        &self,
        i: usize,
        at: usize,
        cur: u64,
        e: u64,
        failed: bool,
    ) -> Option<bool> {
        let cur = if cur >> B_EPOCH_SHIFT != e {
            self.restart_owned(i, at, cur, e)?
        } else {
            cur
        };
        let (next, halved) = bucket_plus(cur, e, failed);
        // Release: see `count`.
        self.stripes[i][at].store(next, Ordering::Release);
        Some(halved)
    }

    /// Owned copy `i`'s bucket `at`, holding `cur` of another epoch than
    /// `e`, as its owner is about to count a call of `e` in it: `None` for
    /// a late call (the bucket is newer, see [`newer_than`]), else what to
    /// count into. A bucket a scrub cancelled (its baseline equals it) is
    /// of no age its epoch can tell, and starts afresh. The baseline is
    /// dropped first: it is for the counts it was taken of, and must not
    /// come to match a later epoch of the bucket (see `baseline`,
    /// `scrub`); a clear that snapshots the bucket meanwhile keeps its
    /// snapshot.
    fn restart_owned(&self, i: usize, at: usize, cur: u64, e: u64) -> Option<u64> {
        let z = &self.baseline[i][at];
        // Relaxed: the exchange orders nothing else; see `clear`.
        let was = z.load(Ordering::Relaxed);
        let cancelled = was == cur;
        if newer_than(cur, e) && !cancelled {
            return None;
        }
        if was != 0 {
            let _ = z.compare_exchange(was, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
        Some(if cancelled { 0 } else { cur })
    }

    /// Voids every pass granted so far (a new version of `spare`): after a
    /// clear, and after a full bucket halved its counts, which can raise
    /// the window's rate without a failure (the halved bucket may have
    /// held mostly successes). A failure that takes a pass between the
    /// halving store and this void is not judged: passes are exact for
    /// the window's counts except across that step, and a halving takes
    /// 2^20 calls in one bucket (window / 10).
    #[cold]
    pub(crate) fn void_passes(&self) {
        // AcqRel: as every step on `spare` (see `pass`).
        let _ = self
            .spare
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |cur| {
                Some(((cur >> S_VERSION_SHIFT) + 1) << S_VERSION_SHIFT)
            });
    }

    /// (calls, failures) over the window ending now.
    pub(crate) fn totals(&self, now_ns: u64) -> (u64, u64) {
        // Both counts side by side in one sum (calls in the high half:
        // at most 2^20 per bucket, under 2^29 in all), a mask instead of a
        // branch per bucket, ages in 32 bits: every judgement sums all
        // the buckets.
        let t = self.tick(now_ns);
        let e = (t & B_EPOCH) as u32;
        let limit = BUCKETS as u32;
        let both = |v: u64| ((v << (32 - B_CALLS_SHIFT)) & (B_FIELD << 32)) | (v & B_FIELD);
        let mut sum = 0u64;
        let mut below = 0u64;
        for (i, stripe) in self.stripes.iter().enumerate() {
            let base = self.baseline.get(i);
            for (k, b) in stripe.iter().enumerate() {
                // Relaxed: see `record`.
                let v = b.load(Ordering::Relaxed);
                let age = e.wrapping_sub((v >> B_EPOCH_SHIFT) as u32) & B_EPOCH as u32;
                let keep = u64::from(age < limit).wrapping_neg();
                sum += both(v) & keep;
                if let Some(base) = base {
                    // Relaxed: a snapshot of this copy; see `clear`.
                    let z = base[k].load(Ordering::Relaxed);
                    if z != 0 && z >> B_EPOCH_SHIFT == v >> B_EPOCH_SHIFT {
                        below += both(z) & keep;
                    }
                }
            }
        }
        // Acquire, after the buckets: a bucket written after a scrub
        // shows that scrub's tick here. Nothing written since the last
        // scrub is younger than `SCRUB_TICKS` past it (a later record
        // scrubs first), so a window whose last scrub is further behind
        // than that and the window's length holds no call in the window,
        // whatever the epochs of its old buckets say.
        if t.saturating_sub(self.scrubbed.load(Ordering::Acquire)) >= SCRUB_TICKS + BUCKETS as u64 {
            return (0, 0);
        }
        // A halved bucket can hold less than its snapshot: count it as 0.
        let calls = (sum >> 32).saturating_sub(below >> 32);
        let fails = (sum & 0xffff_ffff).saturating_sub(below & 0xffff_ffff);
        (calls, fails.min(calls))
    }

    /// Whether no call is counted in the window ending now (C9: such a
    /// partition is idle, as far as its window goes).
    pub(crate) fn is_empty(&self, now_ns: u64) -> bool {
        self.totals(now_ns).0 == 0
    }

    /// Counts a call and judges the rule of C5: trip when failures / calls
    /// ≥ `rate` with at least `min_calls` calls in the window.
    ///
    /// A success lowers the rate of the window it joins, so it trips only
    /// by completing `min_calls` while the rate is already high (when the
    /// last judgement left the window armed), or when the window has slid
    /// since the last success judged it: old buckets dropping out can
    /// raise the rate without a failure (old successes leave, failures
    /// stay). The window moves a bucket at a time, so the first success
    /// of each bucket epoch judges (see `slid`); the others find it judged.
    #[inline(always)]
    pub(crate) fn record_and_judge(
        &self,
        now_ns: u64,
        failed: bool,
        rate: f64,
        min_calls: u64,
    ) -> bool {
        let t = self.tick(now_ns);
        // Acquire: a success that finds `slid` at its tick sees the buckets
        // as the success that moved it there left them, after its scrub.
        if failed || self.slid.load(Ordering::Acquire) != t {
            return self.record_and_judge_first(t, now_ns, failed, rate, min_calls);
        }
        // A success of a tick a success already judged: that one looked
        // for a due scrub (and made it) first, so this one need not. The
        // one add, else the whole way.
        if !self.add_success(t) {
            return self.record_and_judge_first(t, now_ns, failed, rate, min_calls);
        }
        // Relaxed: a hint; a success that misses the arming leaves the
        // trip to the next call that judges.
        self.armed.load(Ordering::Relaxed) && self.judge(now_ns, rate, min_calls, None)
    }

    /// A success of tick `t` counted by the one add ([`bucket_fast`]) in
    /// this thread's copy, or by one CAS in the shared one; false, having
    /// counted nothing, in every other case ([`Window::count`] decides it).
    #[inline(always)]
    fn add_success(&self, t: u64) -> bool {
        let at = (t % BUCKETS as u64) as usize;
        let e = t & B_EPOCH;
        // Orderings: as in `count`.
        if self.owned > 0 {
            if let Some(i) = thread_index::get().filter(|&i| i < self.owned) {
                let b = &self.stripes[i][at];
                return match bucket_fast(b.load(Ordering::Relaxed), e, false) {
                    Some(next) => {
                        b.store(next, Ordering::Release);
                        true
                    }
                    None => false,
                };
            }
        }
        let b = &self.stripes[self.owned][at];
        let cur = b.load(Ordering::Relaxed);
        bucket_fast(cur, e, false).is_some_and(|next| {
            b.compare_exchange(cur, next, Ordering::Release, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// [`Window::record_and_judge`] for a failure, or for a success whose
    /// tick no success judged yet: scrubs if one is due, counts, judges.
    #[inline(never)]
    fn record_and_judge_first(
        &self,
        t: u64,
        now_ns: u64,
        failed: bool,
        rate: f64,
        min_calls: u64,
    ) -> bool {
        if !self.record_tick(t, failed) {
            // A late call changes nothing, the judgement included (C13).
            return false;
        }
        if failed {
            return self.judge_failure(now_ns, rate, min_calls);
        }
        // Relaxed: as in `record_and_judge`.
        if self.armed.load(Ordering::Relaxed) {
            return self.judge(now_ns, rate, min_calls, None);
        }
        let seen = self.slid.load(Ordering::Relaxed);
        seen != t && self.judge_slid(seen, t, now_ns, rate, min_calls)
    }

    /// The first success of tick `e` (the last one judged by a success
    /// was `seen`) judges the slid window; of racing successes, the one
    /// that moves `slid` on.
    #[inline(never)]
    pub(crate) fn judge_slid(
        &self,
        seen: u64,
        e: u64,
        now_ns: u64,
        rate: f64,
        min_calls: u64,
    ) -> bool {
        // Release: a success that sees `e` here skips the scrub this one
        // looked for (see `record_and_judge`); which success judges
        // depends on nothing else.
        self.slid
            .compare_exchange(seen, e, Ordering::Release, Ordering::Relaxed)
            .is_ok()
            && self.judge(now_ns, rate, min_calls, None)
    }

    /// A counted failure's pass or judgement; out of line, so that the
    /// success before it stays a few instructions in the caller.
    #[inline(never)]
    pub(crate) fn judge_failure(&self, now_ns: u64, rate: f64, min_calls: u64) -> bool {
        match self.pass(self.epoch(now_ns)) {
            Ok(()) => false,
            Err(marked) => self.judge(now_ns, rate, min_calls, Some(marked)),
        }
    }

    /// Every failure's one step on `spare`, after counting itself: takes a
    /// pass (`Ok`: no judgement needed) or, when none is left for its
    /// epoch, marks the word with a new version and returns it (`Err`).
    ///
    /// Why that is exact: all failures go through this word one after
    /// another (AcqRel read-modify-writes), and each wrote its bucket
    /// before. A judgement follows its own mark, so it sums every failure
    /// marked or passed before it; it installs passes only if the word is
    /// still its mark, so no failure came between its sum and the
    /// install; and each later failure takes one pass or marks again.
    /// Successes only lower the rate. A stale install would need the
    /// version (28 bits) to come round between a judgement's mark and its
    /// install within one bucket epoch.
    #[inline]
    pub(crate) fn pass(&self, e: u64) -> Result<(), u64> {
        let mut cur = self.spare.load(Ordering::Relaxed);
        loop {
            let open = (cur >> S_EPOCH_SHIFT) & B_EPOCH == e && cur & S_PASSES != 0;
            let next = if open {
                cur - 1
            } else {
                ((cur >> S_VERSION_SHIFT) + 1) << S_VERSION_SHIFT
            };
            // AcqRel: see above.
            match self
                .spare
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if open => return Ok(()),
                Ok(_) => return Err(next),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The judgement of [`Window::record_and_judge`], out of line: the
    /// unarmed success and the failure with a pass are the common calls.
    /// `marked`: the failure's mark on `spare` (`None` for a success).
    #[inline(never)]
    pub(crate) fn judge(
        &self,
        now_ns: u64,
        rate: f64,
        min_calls: u64,
        marked: Option<u64>,
    ) -> bool {
        let (calls, fails) = self.totals(now_ns);
        // The rate as a quotient, compared with `rate`: both are the
        // nearest doubles to their exact values, so a window whose rate
        // equals the profile's decimal exactly compares equal (C5: ≥ R
        // trips), where `rate * calls` can round above `fails` (0.07 × 100
        // is a little over 7).
        let high = |calls: u64, fails: u64| fails > 0 && fails as f64 / calls as f64 >= rate;
        let is_high = high(calls, fails);
        let trip = is_high && calls >= min_calls;
        let armed = is_high && !trip;
        if self.armed.load(Ordering::Relaxed) != armed {
            self.armed.store(armed, Ordering::Relaxed);
        }
        if let (Some(marked), false) = (marked, is_high) {
            // The rate after j more failures and no success is
            // (fails + j) / (calls + j), rising with j; the passes are
            // the j that keep it below the threshold, checked with the
            // very comparison above.
            let room = if rate < 1.0 {
                ((rate * calls as f64 - fails as f64) / (1.0 - rate)).max(0.0)
            } else {
                f64::INFINITY
            };
            let mut n = if room >= S_PASSES as f64 {
                S_PASSES
            } else {
                room as u64
            };
            while n > 0 && high(calls + n, fails + n) {
                n -= 1;
            }
            if n > 0 {
                let e = self.epoch(now_ns);
                let passes =
                    (marked >> S_VERSION_SHIFT) << S_VERSION_SHIFT | e << S_EPOCH_SHIFT | n;
                // Relaxed: only the value matters (see `pass`); a failed
                // exchange means a failure came between, and leaves it.
                let _ = self.spare.compare_exchange(
                    marked,
                    passes,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
        trip
    }

    /// Forgets what earlier judgements concluded under a rate and
    /// `min_calls` a reload has since replaced (C20): the passes they
    /// granted (failures that could not reach the old threshold may reach
    /// the new one) and the arming (a success may now complete
    /// `min_calls` at a rate the old threshold did not call high). The
    /// next call judges afresh; the counts stay.
    pub(crate) fn retuned(&self) {
        self.void_passes();
        // Relaxed: a hint, as in `judge`; the next success judges and
        // sets it from the new rule.
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Whether a coarse clock reading is good enough for this window.
    pub(crate) fn coarse_ok(&self) -> bool {
        self.width_ns >= COARSE_BUCKET_NS
    }

    /// Forgets every call: a closed episode starts (a close, a reset, a
    /// slot's new tenant) and counts from its first call (C5, C11). The
    /// shared copy is zeroed (its writers CAS, so none writes an old count
    /// back); the owned copies are snapshotted (see `baseline`).
    pub(crate) fn clear(&self) {
        self.void_passes();
        // Relaxed throughout: see `record`.
        for (stripe, base) in self.stripes.iter().zip(self.baseline.iter()) {
            for (b, z) in stripe.iter().zip(base.iter()) {
                z.store(b.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        for b in self.stripes[self.owned].iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.armed.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
