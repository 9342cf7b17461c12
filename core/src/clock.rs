//! Time: nanoseconds on the bank's clock, monotonic and injectable (C12).

use crate::sync::{Arc, AtomicU64, Ordering, StdArc};
use std::ops::{Add, AddAssign};
use std::sync::{Mutex as StdMutex, PoisonError, Weak};
use std::time::Duration;

/// A point on the bank's clock: nanoseconds since the clock's start.
///
/// ```
/// use breakerbank::Instant;
/// use std::time::Duration;
/// let t = Instant::ZERO + Duration::from_millis(250);
/// assert_eq!(t.as_nanos(), 250_000_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The clock's start.
    pub const ZERO: Instant = Instant(0);

    /// From nanoseconds on the bank's clock.
    #[inline]
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    /// Nanoseconds on the bank's clock.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero when `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the far future instead of overflowing.
    #[inline]
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// A source of monotonic time for a bank.
pub trait Clock: Send + Sync {
    /// Now, on this clock. Never goes backwards.
    fn now(&self) -> Instant;

    /// A cheaper reading that may lag [`now`](Clock::now) by a few
    /// milliseconds but is never ahead of it. Used only to keep refusing
    /// while a breaker is open: a lagging reading can end an open period a
    /// tick late, never early. Defaults to `now`.
    #[inline]
    fn now_coarse(&self) -> Instant {
        self.now()
    }

    /// Some(handle) when this is a [`ManualClock`]; lets bindings advance it.
    fn as_manual(&self) -> Option<&ManualClock> {
        None
    }

    /// Some(clock) when this is the system [`MonotonicClock`]; lets hot
    /// paths read it without a dynamic call.
    fn as_monotonic(&self) -> Option<&MonotonicClock> {
        None
    }
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`), counted from creation.
///
/// [`Clock::now_coarse`] is one load of a process-wide reading refreshed
/// about every millisecond by a background thread (see `ticker` in the
/// source: started on first use, stops when unused, fork-aware); until it
/// runs, `CLOCK_MONOTONIC_COARSE` on Linux, the same clock as of the last
/// scheduler tick (1–4 ms behind, never ahead).
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: u64,
}

#[cfg(target_os = "linux")]
fn raw_nanos(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and `id` is one of the two constant clock ids used below, both
    // supported by every Linux since 2.6.32.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(target_os = "linux")]
fn precise() -> u64 {
    raw_nanos(libc::CLOCK_MONOTONIC)
}

#[cfg(target_os = "linux")]
fn coarse() -> u64 {
    raw_nanos(libc::CLOCK_MONOTONIC_COARSE)
}

#[cfg(not(target_os = "linux"))]
fn precise() -> u64 {
    use std::sync::OnceLock;
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    duration_nanos(BASE.get_or_init(std::time::Instant::now).elapsed())
}

#[cfg(not(target_os = "linux"))]
fn coarse() -> u64 {
    precise()
}

impl MonotonicClock {
    /// A clock starting at zero now.
    pub fn new() -> Self {
        Self { start: precise() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant(precise().saturating_sub(self.start))
    }

    #[inline]
    fn now_coarse(&self) -> Instant {
        let ns = match ticker::recent() {
            0 => coarse(),
            recent => recent,
        };
        Instant(ns.saturating_sub(self.start))
    }

    fn as_monotonic(&self) -> Option<&MonotonicClock> {
        Some(self)
    }
}

impl MonotonicClock {
    /// [`Clock::now_coarse`] without the dynamic call, for hot paths that
    /// know their clock is this one.
    #[inline(always)]
    pub fn recent(&self) -> Instant {
        Clock::now_coarse(self)
    }
}

/// A process-wide recent reading of `CLOCK_MONOTONIC`, refreshed about
/// every millisecond by one background thread, so an open breaker's
/// refusal reads time with one load instead of a vDSO call.
///
/// The thread starts on the first coarse reading (a process whose breakers
/// never open never starts it) and stops after a few seconds in which
/// nobody read; readers then fall back to `CLOCK_MONOTONIC_COARSE` and
/// start it again. A value is a past reading of the precise clock, so it
/// is never ahead of `now()`: an open period can end a tick (or a stalled
/// ticker's delay) late, never early (C12). A forked child has no ticker
/// thread: a fork handler clears the value so the child falls back and
/// starts its own. Under loom there is no ticker (readers fall back).
// The ticker is a real thread outside every loom model: std atomics.
#[allow(clippy::disallowed_types)]
mod ticker {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Duration;

    const PERIOD: Duration = Duration::from_millis(1);
    /// Ticks between two looks at `WANTED`; the thread stops after
    /// `IDLE_ROUNDS` looks in a row find it unset (~4 s).
    const ROUND: u32 = 1024;
    const IDLE_ROUNDS: u32 = 4;

    /// The recent reading and the "somebody read it" flag share a cache
    /// line, so a reader's one miss per tick brings both.
    #[repr(align(64))]
    struct Shared {
        recent: AtomicU64,
        wanted: AtomicBool,
    }

    static SHARED: Shared = Shared {
        recent: AtomicU64::new(0),
        wanted: AtomicBool::new(false),
    };
    /// A ticker thread is running (or being started).
    static RUNNING: AtomicBool = AtomicBool::new(false);

    /// The recent reading in nanoseconds, or 0 when there is none yet (the
    /// caller reads the coarse clock; the ticker is started).
    #[inline(always)]
    pub(super) fn recent() -> u64 {
        if cfg!(loom) {
            return 0;
        }
        // Relaxed: the value orders nothing; it is a past clock reading.
        let r = SHARED.recent.load(Ordering::Relaxed);
        if r == 0 {
            start();
            return 0;
        }
        if !SHARED.wanted.load(Ordering::Relaxed) {
            SHARED.wanted.store(true, Ordering::Relaxed);
        }
        r
    }

    #[cold]
    fn start() {
        // AcqRel: one starter wins; a stopping ticker clears RUNNING last.
        if RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        crate::fork::watch();
        SHARED.wanted.store(true, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("breakerbank-clock".into())
            .spawn(run);
        if spawned.is_err() {
            // No thread: readers keep the coarse clock; try again later.
            RUNNING.store(false, Ordering::Release);
        }
    }

    fn run() {
        let mut idle = 0;
        loop {
            for _ in 0..ROUND {
                SHARED
                    .recent
                    .store(super::precise().max(1), Ordering::Relaxed);
                std::thread::sleep(PERIOD);
            }
            if SHARED.wanted.swap(false, Ordering::Relaxed) {
                idle = 0;
            } else {
                idle += 1;
                if idle >= IDLE_ROUNDS {
                    SHARED.recent.store(0, Ordering::Relaxed);
                    RUNNING.store(false, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// In a forked child: the ticker thread stayed in the parent, so
    /// readers fall back to the coarse clock and start one of their own.
    #[cfg_attr(any(loom, not(unix)), allow(dead_code))]
    pub(super) fn forked() {
        SHARED.recent.store(0, Ordering::Relaxed);
        RUNNING.store(false, Ordering::Relaxed);
    }
}

/// A forked child has no ticker thread (see `ticker`): called by the
/// fork module's child handler, which stores only to atomics here.
#[cfg_attr(any(loom, not(unix)), allow(dead_code))]
pub(crate) fn forked() {
    ticker::forked();
}

/// A clock moved only by [`ManualClock::advance`]; clones share one time.
///
/// ```
/// use breakerbank::ManualClock;
/// use std::time::Duration;
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(shared.now().as_nanos(), 10_000_000_000);
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    // From `crate::sync` so loom models see the clock's reads and writes.
    nanos: Arc<AtomicU64>,
    /// Told after every advance: the sweeps of the banks on this clock
    /// (C14, C15: what a system clock's sweeper thread does every
    /// fraction of a second, a manual clock does when it is moved).
    observers: StdArc<StdMutex<Vec<Weak<dyn Advanced>>>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

/// What a [`ManualClock`] tells after it moves (see `ManualClock::observers`).
pub(crate) trait Advanced: Send + Sync {
    /// The clock was advanced.
    fn advanced(&self);
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self {
            nanos: Arc::new(AtomicU64::new(0)),
            observers: StdArc::default(),
        }
    }

    /// Tells `observer` of every advance from now on, while it lives.
    pub(crate) fn observe(&self, observer: Weak<dyn Advanced>) {
        let mut list = self
            .observers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list.retain(|o| o.strong_count() > 0);
        list.push(observer);
    }

    /// Runs the observers, outside the list's lock (a sweep emits events
    /// and may take time; an observer may be dropped meanwhile).
    fn tell(&self) {
        let live: Vec<StdArc<dyn Advanced>> = {
            let list = self
                .observers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for o in live {
            o.advanced();
        }
    }

    /// Moves time forward (saturating at the far future).
    pub fn advance(&self, by: Duration) {
        let by = duration_nanos(by);
        // Relaxed: the clock orders nothing else; breaker state is published
        // through the word's own Release/Acquire.
        let mut cur = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(by);
            match self
                .nanos
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(seen) => cur = seen,
            }
        }
        self.tell();
    }

    /// Now.
    pub fn now(&self) -> Instant {
        // Relaxed: see `advance`.
        Instant(self.nanos.load(Ordering::Relaxed))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        ManualClock::now(self)
    }
    fn as_manual(&self) -> Option<&ManualClock> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c12_monotonic_never_goes_back_and_coarse_never_leads() {
        let c = MonotonicClock::new();
        let mut last = c.now();
        for _ in 0..10_000 {
            let coarse = c.now_coarse();
            let now = c.now();
            assert!(now >= last);
            assert!(coarse <= now, "coarse {coarse:?} ahead of {now:?}");
            last = now;
        }
    }

    #[test]
    fn c12_ticker_starts_on_first_reading_and_never_leads() {
        // The first reading starts the ticker; its value appears soon after.
        let mut waited = 0;
        while ticker::recent() == 0 {
            assert!(waited < 5_000, "the ticker never published a reading");
            std::thread::sleep(Duration::from_millis(1));
            waited += 1;
        }
        for _ in 0..1_000 {
            let recent = ticker::recent();
            assert!(recent <= precise(), "recent {recent} ahead of the clock");
        }
    }
}
