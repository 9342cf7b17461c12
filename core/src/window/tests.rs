use super::*;
use proptest::strategy::Strategy as _;

#[test]
fn c5_window_saturation_keeps_the_rate() {
    let w = Window::new(Duration::from_secs(10), 3);
    for i in 0..3 * B_FIELD {
        w.record(0, i % 2 == 0);
    }
    let (calls, fails) = w.totals(0);
    let rate = fails as f64 / calls as f64;
    assert!((0.49..=0.51).contains(&rate), "{fails}/{calls}");
}

#[test]
fn c5_striped_window_sums_every_thread() {
    let w = Window::new(Duration::from_secs(10), 3);
    std::thread::scope(|s| {
        for t in 0..4 {
            let w = &w;
            s.spawn(move || {
                for i in 0..1000 {
                    w.record(0, (i + t) % 4 == 0);
                }
            });
        }
    });
    assert_eq!(w.totals(0), (4000, 1000));
}

#[test]
fn c5_live_threads_hold_different_indices() {
    // Regression: stripes picked by TLS address put every thread on one.
    let gate = std::sync::Barrier::new(4);
    let ids: Vec<Option<usize>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let i = thread_index::get();
                    gate.wait(); // all four alive at once
                    i
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    // Tests running beside this one may hold indices too: the ones we
    // got must differ, and at least two are left for us.
    let got: Vec<usize> = ids.iter().flatten().copied().collect();
    let mut distinct = got.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), got.len(), "indices {ids:?}");
    assert!(got.len() >= 2, "indices {ids:?}");
}

#[test]
fn c5_owned_copies_and_shared_copy_sum_exactly() {
    // More threads than owned copies: the first count alone, the rest
    // share by CAS; waves of threads hand their copies on.
    let w = Window::new(Duration::from_secs(10), 2);
    for _ in 0..3 {
        std::thread::scope(|s| {
            for t in 0..6 {
                let w = &w;
                s.spawn(move || {
                    for i in 0..40_000 {
                        w.record(0, (i + t) % 4 == 0);
                    }
                });
            }
        });
    }
    assert_eq!(w.totals(0), (720_000, 180_000));
}

#[test]
fn c5_the_thread_one_past_the_owned_copies_counts_in_the_shared_one_by_cas() {
    // The window has as many owned copies as the lowest index above 0
    // a thread here holds: that thread counts in the shared copy with
    // the threads of higher indices and those that hold none (there
    // are more threads than indices), all by CAS. A plain store of its
    // would lose theirs (in most rounds: the threads must overlap).
    const THREADS: usize = thread_index::MAX + 4;
    const CALLS: u64 = 200_000;
    for round in 0..5 {
        let window = std::sync::OnceLock::new();
        let held = std::sync::Mutex::new(Vec::new());
        let (ready, go) = (
            std::sync::Barrier::new(THREADS + 1),
            std::sync::Barrier::new(THREADS + 1),
        );
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    if let Some(i) = thread_index::get() {
                        held.lock().expect("not poisoned").push(i);
                    }
                    ready.wait();
                    go.wait();
                    let w: &Window = window.get().expect("made before go");
                    // Over all ten buckets, none near the count that
                    // halves.
                    for c in 0..CALLS {
                        w.record(c % 10 * w.width_ns, c % 4 == 0);
                    }
                });
            }
            ready.wait();
            let held = held.lock().expect("not poisoned");
            let owned = *held
                .iter()
                .filter(|&&i| i > 0)
                .min()
                .expect("a thread here holds an index above 0");
            assert!(held.len() < THREADS, "some threads hold no index");
            window
                .set(Window::new(Duration::from_secs(10), owned))
                .expect("set once");
            go.wait();
        });
        let n = THREADS as u64 * CALLS;
        let w = window.get().expect("made");
        assert_eq!(w.totals(9 * w.width_ns), (n, n / 4), "round {round}");
    }
}

#[test]
fn c5_epoch_by_reciprocal_matches_division_but_at_bucket_ends() {
    for window_ms in [1u64, 7, 10, 333, 10_000, 3_600_000] {
        let w = Window::new(Duration::from_millis(window_ms), 0);
        let width = w.width_ns;
        for now in [
            0,
            1,
            width - 1,
            width,
            width + 1,
            123_456_789_012,
            u64::MAX / 3,
        ] {
            let exact = (now / width) & B_EPOCH;
            let got = w.epoch(now);
            // One higher only right at a bucket's end.
            let early =
                got == ((now / width + 1) & B_EPOCH) && width - now % width <= now / (1 << 40) + 1;
            assert!(
                got == exact || early,
                "window {window_ms} ms, now {now}: {got} vs {exact}"
            );
        }
    }
}

#[test]
fn c11_a_clear_forgets_every_count_even_one_an_owner_writes_back() {
    let w = Window::new(Duration::from_secs(10), 2);
    for _ in 0..10 {
        w.record(0, true);
    }
    // An owner's load before the clear and its store after it: the
    // straddle writes the old bucket back with one more call.
    let copy = &w.stripes[0][0];
    let before = copy.load(Ordering::Relaxed);
    w.clear();
    assert_eq!(w.totals(500_000_000), (0, 0));
    assert!(w.is_empty(500_000_000));
    copy.store(bucket_plus(before, 0, true).0, Ordering::Relaxed);
    let (calls, fails) = w.totals(500_000_000);
    assert!(calls <= 1 && fails <= 1, "{calls} calls, {fails} failures");
    // The same bucket counts again at once: no blind interval (C5).
    w.record(600_000_000, false);
    w.record(600_000_000, true);
    let (calls, _) = w.totals(900_000_000);
    assert!(calls >= 2, "{calls}");
    // The next bucket starts from nothing but its own calls.
    w.record(1_200_000_000, false);
    assert_eq!(w.totals(1_300_000_000).0, calls + 1);
    // A tenant's window (no owned copies) is zeroed.
    let t = Window::new(Duration::from_secs(10), 0);
    t.record(0, true);
    t.clear();
    assert_eq!(t.totals(0), (0, 0));
    t.record(0, true);
    assert_eq!(t.totals(0), (1, 1));
}

/// Passes left for the window's epoch at `now_ns`.
fn passes(w: &Window, now_ns: u64) -> u64 {
    let v = w.spare.load(Ordering::Relaxed);
    if (v >> S_EPOCH_SHIFT) & B_EPOCH == w.epoch(now_ns) {
        v & S_PASSES
    } else {
        0
    }
}

#[test]
fn c5_failures_below_the_threshold_pass_and_the_one_that_reaches_it_trips() {
    for (rate, min_calls, successes) in [(0.5, 10, 100u64), (0.2, 5, 37), (0.9, 3, 9)] {
        let w = Window::new(Duration::from_secs(10), 1);
        for _ in 0..successes {
            w.record_and_judge(0, false, rate, min_calls);
        }
        let (mut calls, mut fails) = (successes, 0u64);
        let mut passed = 0;
        loop {
            let judged_before = passes(&w, 0);
            calls += 1;
            fails += 1;
            let reached = fails as f64 / calls as f64 >= rate && calls >= min_calls;
            let tripped = w.record_and_judge(0, true, rate, min_calls);
            assert_eq!(
                tripped, reached,
                "rate {rate}: failure {fails} of {calls} calls"
            );
            if judged_before > 0 {
                passed += 1;
            }
            if tripped {
                break;
            }
        }
        assert!(
            passed >= fails / 2,
            "rate {rate}: only {passed} of {fails} failures passed without a judgement"
        );
    }
}

#[test]
fn c5_passes_last_only_within_their_bucket_epoch_and_a_clear() {
    let s = 1_000_000_000;
    let w = Window::new(Duration::from_secs(10), 1);
    for _ in 0..10 {
        w.record_and_judge(0, false, 0.5, 4);
    }
    assert!(!w.record_and_judge(0, true, 0.5, 4));
    assert!(passes(&w, 0) > 0, "1 failure in 11 calls leaves passes");
    // The successes leave the window: four failures now trip, though
    // passes granted in the first bucket would have let them through.
    let later = 10 * s + 1;
    let trips: Vec<bool> = (0..4)
        .map(|_| w.record_and_judge(later, true, 0.5, 4))
        .collect();
    assert_eq!(trips, [false, false, false, true]);

    let w = Window::new(Duration::from_secs(10), 1);
    for _ in 0..10 {
        w.record_and_judge(0, false, 0.5, 1);
    }
    w.record_and_judge(0, true, 0.5, 1);
    assert!(passes(&w, 0) > 0);
    w.clear();
    assert_eq!(passes(&w, 0), 0, "a clear voids the passes");
    assert!(
        w.record_and_judge(0, true, 0.5, 1),
        "the first failure after the clear is judged: 1 of 1"
    );
}

#[test]
fn c5_a_halving_bucket_voids_the_passes() {
    let s = 1_000_000_000;
    let w = Window::new(Duration::from_secs(10), 1);
    // Second 0: 600k failures. Second 1: a bucket one call short of
    // full, all successes.
    for _ in 0..600_000 {
        w.record(0, true);
    }
    for _ in 0..B_FIELD - 1 {
        w.record(s, false);
    }
    assert!(!w.record_and_judge(s, true, 0.5, 1), "600,001 of 1,648,575");
    assert!(passes(&w, s) > 0);
    // The success that finds the bucket full halves it: half its
    // successes go, and the window's rate rises past 50% without a
    // failure.
    w.record(s, false);
    let (calls, fails) = w.totals(s);
    assert!(fails * 2 >= calls, "{fails} of {calls}");
    assert!(
        w.record_and_judge(s, true, 0.5, 1),
        "the next failure must be judged, and trip"
    );
}

#[test]
fn c5_success_judges_only_when_armed() {
    let w = Window::new(Duration::from_secs(10), 1);
    assert!(!w.record_and_judge(0, true, 0.5, 3), "1 call < min_calls");
    assert!(w.armed.load(Ordering::Relaxed), "rate high, too few calls");
    assert!(
        !w.record_and_judge(0, false, 0.5, 3),
        "1/2 but only 2 calls"
    );
    assert!(w.armed.load(Ordering::Relaxed), "still high");
    assert!(!w.record_and_judge(0, false, 0.5, 3), "1/3 < 50%");
    assert!(
        !w.armed.load(Ordering::Relaxed),
        "disarmed once the rate fell"
    );
    let w = Window::new(Duration::from_secs(10), 1);
    w.record_and_judge(0, true, 0.5, 2);
    assert!(
        w.record_and_judge(0, false, 0.5, 2),
        "the success completes min_calls at 50%"
    );
}

#[test]
fn c5_window_counts_within_the_window_only() {
    let w = Window::new(Duration::from_secs(10), 3);
    let s = 1_000_000_000;
    w.record(0, true);
    w.record(5 * s, false);
    assert_eq!(w.totals(5 * s), (2, 1));
    assert_eq!(
        w.totals(10 * s + 1),
        (1, 0),
        "the first bucket left the window"
    );
    w.clear();
    assert_eq!(w.totals(5 * s), (0, 0));
}

/// The window's rule, written plainly: ten buckets of `width` keyed by
/// `now / width`, a full bucket halving both counts before it counts,
/// and C5's judgement on every failure, and on a success while the last
/// judgement left it armed (a high rate short of `min_calls`) or when it
/// is the first success of its bucket epoch (the window slid).
struct ReferenceWindow {
    /// The window's tick: the division by the bucket width, as the window
    /// computes it (`c5_epoch_by_reciprocal_matches_division_but_at_bucket_ends`
    /// holds it to the division).
    width_inv: u64,
    buckets: [(u64, u64, u64); BUCKETS],
    armed: bool,
    slid: Option<u64>,
}

impl ReferenceWindow {
    fn new(w: &Window) -> Self {
        Self {
            width_inv: w.width_inv,
            buckets: [(0, 0, 0); BUCKETS],
            armed: false,
            slid: None,
        }
    }

    /// Counts a call read at `now`; false for a call whose bucket holds
    /// a later tick (it is a window or more old: counted nowhere).
    fn record(&mut self, now: u64, failed: bool) -> bool {
        let e = self.tick(now);
        let b = &mut self.buckets[(e % BUCKETS as u64) as usize];
        if b.0 > e && b.1 > 0 {
            return false;
        }
        if b.0 != e {
            *b = (e, 0, 0);
        }
        if b.1 >= B_FIELD {
            *b = (e, b.1 / 2, b.2 / 2);
        }
        b.1 += 1;
        b.2 += u64::from(failed);
        true
    }

    fn tick(&self, now: u64) -> u64 {
        ((u128::from(now) * u128::from(self.width_inv)) >> 64) as u64
    }

    fn totals(&self, now: u64) -> (u64, u64) {
        let e = self.tick(now);
        self.buckets
            .iter()
            .filter(|b| e.checked_sub(b.0).is_some_and(|age| age < BUCKETS as u64))
            .fold((0, 0), |(c, f), b| (c + b.1, f + b.2))
    }

    fn record_and_judge(&mut self, now: u64, failed: bool, rate: f64, min: u64) -> bool {
        if !self.record(now, failed) {
            return false;
        }
        if !failed && !self.armed {
            // The first success of each bucket epoch judges the slid window.
            let e = self.tick(now);
            if self.slid == Some(e) {
                return false;
            }
            self.slid = Some(e);
        }
        let (calls, fails) = self.totals(now);
        let high = fails > 0 && fails as f64 / calls as f64 >= rate;
        let trip = high && calls >= min;
        self.armed = high && !trip;
        trip
    }

    fn clear(&mut self) {
        self.buckets = [(0, 0, 0); BUCKETS];
        self.armed = false;
    }
}

#[derive(Clone, Debug)]
enum WindowOp {
    Advance(u64),
    Call(bool),
    /// A call whose clock reading is this many ms old (C13: it read the
    /// clock, then recorded late).
    Late(u64, bool),
    Clear,
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(1000))]

    /// Every count and every trip of the window, passes and owned
    /// copies included, is the plain rule's (C5, C11).
    #[test]
    #[allow(clippy::disallowed_types)] // `prop_oneof!` builds a std `Arc`
    fn c5_c11_the_window_counts_and_trips_as_its_plain_rule(
        rate in proptest::sample::select(vec![0.05, 0.1, 0.25, 1.0 / 3.0, 0.5, 0.75, 0.9, 1.0]),
        min_calls in 1u64..24,
        owned in proptest::sample::select(vec![0usize, 2]),
        // From the clock's start, or twelve buckets before the 24-bit
        // bucket epoch wraps (1 s buckets: after 194 days).
        start in proptest::sample::select(vec![0u64, B_EPOCH + 1 - 12]),
        ops in proptest::collection::vec(
            proptest::prop_oneof![
                12 => proptest::bool::weighted(0.4).prop_map(WindowOp::Call),
                3 => (0u64..1500).prop_map(WindowOp::Advance),
                1 => (8000u64..12_000).prop_map(WindowOp::Advance),
                // Round the bucket epoch's whole range (C12), give or
                // take a window.
                1 => (1u64..3, 0u64..20_000)
                    .prop_map(|(k, ms)| WindowOp::Advance(k * (B_EPOCH + 1) * 1000 + ms - 10_000)),
                2 => (0u64..=10_000, proptest::bool::weighted(0.6))
                    .prop_map(|(ms, failed)| WindowOp::Late(ms, failed)),
                1 => proptest::strategy::Just(WindowOp::Clear),
            ],
            1..300,
        ),
    ) {
        use proptest::prop_assert_eq;
        let w = Window::new(Duration::from_secs(10), owned);
        let mut r = ReferenceWindow::new(&w);
        let mut now = start * w.width_ns;
        let mut cleared = 0;
        for (i, op) in ops.iter().enumerate() {
            match *op {
                WindowOp::Advance(ms) => now += ms * 1_000_000,
                WindowOp::Call(failed) => {
                    let want = r.record_and_judge(now, failed, rate, min_calls);
                    let got = w.record_and_judge(now, failed, rate, min_calls);
                    prop_assert_eq!(got, want, "op {}: trip of {:?} at {} ns", i, op, now);
                }
                WindowOp::Late(ms, failed) => {
                    // Never read before the last clear: a call admitted
                    // after it reads the clock after it.
                    let then = now.saturating_sub(ms * 1_000_000).max(cleared);
                    let want = r.record_and_judge(then, failed, rate, min_calls);
                    let got = w.record_and_judge(then, failed, rate, min_calls);
                    prop_assert_eq!(got, want, "op {}: trip of {:?} at {} ns", i, op, now);
                }
                WindowOp::Clear => {
                    r.clear();
                    w.clear();
                    cleared = now;
                }
            }
            prop_assert_eq!(w.totals(now), r.totals(now), "op {}: totals at {} ns", i, now);
            prop_assert_eq!(w.is_empty(now), r.totals(now).0 == 0);
        }
    }
}

#[test]
fn c5_a_full_bucket_halves_both_counts_at_any_epoch() {
    let s = 1_000_000_000;
    for (owned, second) in [(0, 0), (0, 7), (1, 0), (1, 7)] {
        let w = Window::new(Duration::from_secs(10), owned);
        let mut r = ReferenceWindow::new(&w);
        // The bucket before counts on, untouched by the halving.
        if second > 0 {
            w.record((second - 1) * s, true);
            r.record((second - 1) * s, true);
        }
        let now = second * s + 5;
        for i in 0..B_FIELD + 3 {
            w.record(now, i % 4 == 0);
            r.record(now, i % 4 == 0);
        }
        let want = r.totals(now);
        assert!(want.0 < B_FIELD, "the reference halved: {want:?}");
        assert_eq!(w.totals(now), want, "owned {owned}, second {second}");
        // The next bucket starts from its own calls.
        w.record(now + s, false);
        assert_eq!(w.totals(now + s), (want.0 + 1, want.1));
    }
}

/// Marks as the failure path takes them, for the tests of `spare`.
fn mark(w: &Window, now: u64) -> u64 {
    w.pass(w.epoch(now)).expect_err("no pass is open")
}

#[test]
fn c5_a_judgement_grants_every_failure_that_cannot_reach_the_threshold() {
    for (rate, calls, fails) in [
        (0.5, 4u64, 1u64),
        (0.5, 100, 10),
        (0.25, 40, 3),
        (0.9, 30, 2),
    ] {
        let w = Window::new(Duration::from_secs(10), 0);
        for i in 0..calls {
            w.record(0, i < fails);
        }
        let m = mark(&w, 0);
        assert!(!w.judge(0, rate, 1_000, Some(m)));
        // The most failures in a row that keep the rate below it.
        let most = (0..S_PASSES)
            .take_while(|&n| ((fails + n) as f64 / (calls + n) as f64) < rate)
            .last()
            .unwrap_or(0);
        for n in 0..most {
            assert_eq!(
                w.pass(w.epoch(0)),
                Ok(()),
                "rate {rate}, {fails}/{calls}: pass {n}"
            );
        }
        assert!(
            w.pass(w.epoch(0)).is_err(),
            "rate {rate}, {fails}/{calls}: {most} passes"
        );
    }
}

#[test]
fn c5_c11_a_judgement_whose_mark_is_stale_installs_no_passes() {
    let succeed = |w: &Window| {
        for _ in 0..20 {
            w.record(0, false);
        }
    };
    // A clear after the mark.
    let w = Window::new(Duration::from_secs(10), 0);
    w.record(0, true);
    let m = mark(&w, 0);
    w.clear();
    succeed(&w);
    assert!(!w.judge(0, 0.5, 100, Some(m)));
    assert_eq!(passes(&w, 0), 0, "passes from a mark older than the clear");
    // A clear, then a newer mark.
    let w = Window::new(Duration::from_secs(10), 0);
    w.record(0, true);
    let m = mark(&w, 0);
    w.clear();
    w.record(0, true);
    let newer = mark(&w, 0);
    succeed(&w);
    assert!(!w.judge(0, 0.5, 100, Some(m)));
    assert_eq!(
        w.spare.load(Ordering::Relaxed),
        newer,
        "the older judgement wrote"
    );
    // Two failures' marks: the first's judgement comes after the second.
    let w = Window::new(Duration::from_secs(10), 0);
    w.record(0, true);
    let first = mark(&w, 0);
    w.record(0, true);
    let second = mark(&w, 0);
    succeed(&w);
    assert!(!w.judge(0, 0.5, 100, Some(first)));
    assert_eq!(
        w.spare.load(Ordering::Relaxed),
        second,
        "the first judgement wrote"
    );
    assert!(!w.judge(0, 0.5, 100, Some(second)));
    assert!(passes(&w, 0) > 0, "the second judgement grants");
    // Passes used up, then a new mark: never one a judgement still holds.
    while w.pass(w.epoch(0)).is_ok() {}
    let third = w.spare.load(Ordering::Relaxed);
    assert!(!w.judge(0, 0.5, 100, Some(first)));
    assert!(!w.judge(0, 0.5, 100, Some(second)));
    assert_eq!(
        w.spare.load(Ordering::Relaxed),
        third,
        "an older judgement wrote"
    );
}

#[test]
fn c5_a_coarse_clock_picks_buckets_of_10_ms_or_more() {
    assert!(Window::new(Duration::from_millis(100), 0).coarse_ok());
    assert!(Window::new(Duration::from_secs(60), 0).coarse_ok());
    assert!(!Window::new(Duration::from_millis(99), 0).coarse_ok());
    assert!(!Window::new(Duration::from_millis(1), 0).coarse_ok());
}

#[test]
fn c5_a_bucket_whose_epoch_wraps_starts_afresh() {
    // Bucket epochs are 24 bits: with 1 ms buckets they wrap after
    // 2^24 ms (4.7 hours). The first tick after the wrap counts in the
    // bucket tick 2^24 - 20 used, out of the window by then.
    let ms = 1_000_000u64;
    let w = Window::new(Duration::from_millis(10), 0);
    let before = (B_EPOCH + 1 - 20) * ms;
    let wrapped = (B_EPOCH + 1) * ms;
    assert_eq!(
        w.tick(before) % BUCKETS as u64,
        w.tick(wrapped) % BUCKETS as u64
    );
    for _ in 0..16 {
        w.record(before, false);
    }
    assert_eq!(w.totals(before), (16, 0));
    assert_eq!(w.epoch(wrapped), 0);
    w.record(wrapped, true);
    assert_eq!(w.totals(wrapped), (1, 1), "only the call of the new bucket");
}

#[test]
fn c5_c12_a_failure_a_whole_epoch_range_after_three_does_not_trip_on_them() {
    // Three failures, then one a whole epoch range of buckets later (194
    // days of 1 s buckets): the window holds the one failure, and one
    // failure of one call under `min_calls: 4` does not trip.
    for owned in [0, 2] {
        let w = Window::new(Duration::from_secs(10), owned);
        for _ in 0..3 {
            assert!(!w.record_and_judge(0, true, 0.5, 4));
        }
        let later = (B_EPOCH + 1) * w.width_ns;
        assert_eq!(w.epoch(later), w.epoch(0));
        assert!(
            !w.record_and_judge(later, true, 0.5, 4),
            "owned {owned}: tripped on failures an epoch range old"
        );
        assert_eq!(w.totals(later), (1, 1), "owned {owned}");
    }
}

#[test]
fn c5_c12_a_bucket_periodic_calls_never_rewrite_stays_out_of_the_window() {
    // Calls every fifth bucket use two of the ten buckets: the bucket of
    // an early burst of failures is never written again, and its epoch
    // comes round an epoch range later.
    for owned in [0, 2] {
        let w = Window::new(Duration::from_secs(10), owned);
        let at = |tick: u64| tick * w.width_ns;
        for _ in 0..3 {
            w.record_and_judge(at(3), true, 0.9, 4);
        }
        let mut tick = 5;
        while tick < B_EPOCH + 3 * BUCKETS as u64 {
            assert!(
                !w.record_and_judge(at(tick), false, 0.9, 4),
                "owned {owned}: tripped at tick {tick}"
            );
            if tick < 15 {
                tick += 5;
                continue;
            }
            assert_eq!(
                w.totals(at(tick)),
                (2, 0),
                "owned {owned}: tick {tick} sees the calls of ticks {} and {tick} only",
                tick - 5
            );
            tick += 5;
        }
    }
}

#[test]
fn c5_c13_a_call_read_a_window_ago_does_not_overwrite_the_current_bucket() {
    // Three failures at tick 10, then a record whose clock reading is one
    // window old (its call was admitted, read the clock and recorded
    // late): its bucket is the current one's, which it must leave alone.
    // It is out of the window, so it counts nowhere; the fourth failure
    // of the current bucket then trips (4 failures of 4 calls).
    for owned in [0, 2] {
        let w = Window::new(Duration::from_secs(10), owned);
        let at = |tick: u64| tick * w.width_ns;
        for _ in 0..3 {
            assert!(!w.record_and_judge(at(10), true, 0.5, 4));
        }
        assert!(!w.record_and_judge(at(0), true, 0.5, 4), "owned {owned}");
        assert_eq!(
            w.totals(at(10)),
            (3, 3),
            "owned {owned}: the late call left it"
        );
        assert!(
            w.record_and_judge(at(10), true, 0.5, 4),
            "owned {owned}: 4 failures of 4 calls trip"
        );
    }
}
