use super::*;

struct TestEnv {
    now: Instant,
    until: Option<(u64, Instant)>,
    reads: u32,
}
impl Env for TestEnv {
    fn now(&mut self) -> Instant {
        self.reads += 1;
        self.now
    }
    fn open_until(&self, g: u64) -> Option<Instant> {
        self.until.filter(|(gen, _)| *gen == g).map(|(_, t)| t)
    }
}
fn env(now_s: u64) -> TestEnv {
    TestEnv {
        now: Instant::from_nanos(now_s * 1_000_000_000),
        until: None,
        reads: 0,
    }
}
fn policy() -> Policy {
    Policy {
        consecutive_failures: Some(3),
        probe_budget: 2,
        success_threshold: 2,
        open_duration: Duration::from_secs(30),
        backoff: Some((2.0, Duration::from_secs(100))),
        probe_timeout: Duration::from_secs(300),
        observe: false,
    }
}

#[test]
fn c5_consecutive_failures_trip_at_threshold() {
    let p = policy();
    let mut e = env(0);
    let mut w = Word::FRESH;
    for i in 1..3 {
        let (n, r) = record(w, &p, 0, false, Verdict::Failure, false, &mut e);
        assert_eq!(r, Recorded::Applied);
        w = n.unwrap();
        assert_eq!(w.count(), i);
    }
    let (n, r) = record(w, &p, 0, false, Verdict::Failure, false, &mut e);
    let w = n.unwrap();
    assert_eq!(w.phase(), Phase::Open);
    assert_eq!(w.generation(), 1);
    match r {
        Recorded::Transition(t) => {
            assert_eq!(t.open_until, Some(Instant::from_nanos(30_000_000_000)))
        }
        other => panic!("expected a trip, got {other:?}"),
    }
}

#[test]
fn c5_success_clears_consecutive_failures() {
    let p = policy();
    let mut e = env(0);
    let w = Word::FRESH.with_count(2);
    let (n, _) = record(w, &p, 0, false, Verdict::Success, false, &mut e);
    assert_eq!(n.unwrap().count(), 0);
}

#[test]
fn healthy_path_writes_nothing_and_reads_no_clock() {
    let p = policy();
    let mut e = env(0);
    let (n, a) = admit(Word::FRESH, &p, &mut e);
    assert_eq!(n, None);
    assert_eq!(
        a,
        Admission::Admit {
            generation: 0,
            probe: false
        }
    );
    let (n, r) = record(Word::FRESH, &p, 0, false, Verdict::Success, false, &mut e);
    assert_eq!((n, r), (None, Recorded::Applied));
    assert_eq!(e.reads, 0);
}

#[test]
fn c7_half_open_admits_at_most_budget_probes() {
    let p = policy();
    let mut e = env(0);
    let mut w = Word::FRESH.with_phase(Phase::HalfOpen);
    for _ in 0..2 {
        let (n, a) = admit(w, &p, &mut e);
        assert!(matches!(a, Admission::Admit { probe: true, .. }));
        w = n.unwrap();
    }
    let (n, a) = admit(w, &p, &mut e);
    assert_eq!(n, None);
    assert_eq!(
        a,
        Admission::Refuse {
            refusal: Refusal::ProbeBudget,
            retry_after: None
        }
    );
}

#[test]
fn c12_open_period_end_goes_half_open_never_closed() {
    let p = policy();
    let w = Word::FRESH.transition(Phase::Open);
    let mut e = env(36_000); // ten hours later
    e.until = Some((w.generation(), Instant::from_nanos(30_000_000_000)));
    let (n, a) = admit(w, &p, &mut e);
    let n = n.unwrap();
    assert_eq!(n.phase(), Phase::HalfOpen);
    assert_eq!(n.probes(), 1);
    assert!(matches!(a, Admission::Admit { probe: true, .. }));
}

struct LaggingEnv {
    coarse: Instant,
    precise: Instant,
    until: Instant,
    precise_reads: u32,
}
impl Env for LaggingEnv {
    fn now(&mut self) -> Instant {
        self.precise_reads += 1;
        self.precise
    }
    fn now_coarse(&mut self) -> Instant {
        self.coarse
    }
    fn open_until(&self, _: u64) -> Option<Instant> {
        Some(self.until)
    }
}

#[test]
fn c12_coarse_reading_keeps_refusing_without_a_precise_read() {
    let p = policy();
    let w = Word::FRESH.transition(Phase::Open);
    let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
    let mut e = LaggingEnv {
        coarse: ms(9_996),
        precise: ms(10_000),
        until: ms(10_000),
        precise_reads: 0,
    };
    let (n, a) = admit(w, &p, &mut e);
    assert_eq!(
        n, None,
        "a lagging reading ends the period late, never early"
    );
    assert_eq!(
        a,
        Admission::Refuse {
            refusal: Refusal::Open,
            retry_after: Some(Duration::from_millis(4))
        }
    );
    assert_eq!(e.precise_reads, 0);
    e.coarse = ms(10_000);
    let (n, _) = admit(w, &p, &mut e);
    assert_eq!(n.map(Word::phase), Some(Phase::HalfOpen));
    assert_eq!(e.precise_reads, 1);
}

#[test]
fn c12_unpublished_open_until_stays_open() {
    let p = policy();
    let w = Word::FRESH.transition(Phase::Open);
    let mut e = env(36_000);
    let (n, a) = admit(w, &p, &mut e);
    assert_eq!(n, None);
    assert!(matches!(
        a,
        Admission::Refuse {
            refusal: Refusal::Open,
            ..
        }
    ));
}

#[test]
fn c8_threshold_two_needs_two_successes() {
    let p = policy();
    let mut e = env(0);
    let w = Word::FRESH.transition(Phase::HalfOpen).with_probes(2);
    let g = w.generation();
    let (n, r) = record(w, &p, g, true, Verdict::Success, false, &mut e);
    let w = n.unwrap();
    assert_eq!(r, Recorded::Applied);
    assert_eq!(w.phase(), Phase::HalfOpen);
    let (n, r) = record(w, &p, g, true, Verdict::Success, false, &mut e);
    let w = n.unwrap();
    assert!(matches!(r, Recorded::Transition(_)));
    assert_eq!(w.phase(), Phase::Closed);
    assert_eq!(w.probes(), 0);
}

#[test]
fn c8_probe_failure_reopens_with_backoff() {
    let p = policy();
    let mut e = env(10);
    let w = Word::FRESH.transition(Phase::HalfOpen).with_probes(1);
    let (n, r) = record(w, &p, w.generation(), true, Verdict::Failure, false, &mut e);
    let n = n.unwrap();
    assert_eq!(n.phase(), Phase::Open);
    assert_eq!(n.trips(), 1);
    match r {
        Recorded::Transition(t) => {
            assert_eq!(t.open_until, Some(Instant::from_nanos(70_000_000_000)))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn c6_backoff_is_capped() {
    let p = policy();
    assert_eq!(p.open_duration_for(0), Duration::from_secs(30));
    assert_eq!(p.open_duration_for(1), Duration::from_secs(60));
    assert_eq!(p.open_duration_for(2), Duration::from_secs(100));
    assert_eq!(p.open_duration_for(63), Duration::from_secs(100));
}

/// An env whose youngest probe is `expired` (C7's `probe_timeout`).
struct ProbeEnv(bool);
impl Env for ProbeEnv {
    fn now(&mut self) -> Instant {
        Instant::from_nanos(0)
    }
    fn open_until(&self, _: u64) -> Option<Instant> {
        Some(Instant::from_nanos(0))
    }
    fn probes_expired(&mut self, timeout: Duration) -> bool {
        assert_eq!(timeout, policy().probe_timeout);
        self.0
    }
}

#[test]
fn c7_a_spent_budget_of_expired_probes_is_reclaimed_in_three_steps() {
    let p = policy();
    let half = Word::FRESH
        .transition(Phase::HalfOpen)
        .with_probes(2)
        .with_count(1)
        .with_trips(3);
    // Not expired, or budget not spent: no reclaim.
    let (n, a) = admit(half, &p, &mut ProbeEnv(false));
    assert!(n.is_none());
    assert!(matches!(
        a,
        Admission::Refuse {
            refusal: Refusal::ProbeBudget,
            ..
        }
    ));
    let (_, a) = admit(half.with_probes(1), &p, &mut ProbeEnv(true));
    assert!(matches!(a, Admission::Admit { probe: true, .. }));
    // Expired: frozen in a new generation, every slot still counted.
    let (n, a) = admit(half, &p, &mut ProbeEnv(true));
    assert_eq!(a, Admission::Reclaim { probes: 2 });
    let frozen = n.unwrap();
    assert_eq!(frozen.phase(), Phase::Checking);
    assert_eq!(frozen.generation(), half.generation() + 1);
    assert_eq!(frozen.probes(), 2);
    // A frozen word admits no one.
    let (n, a) = admit(frozen, &p, &mut ProbeEnv(true));
    assert!(n.is_none());
    assert!(matches!(a, Admission::Refuse { .. }));
    // Given up: half-open again, slots, successes and backoff kept.
    let kept = decide_reclaim(frozen, false);
    assert_eq!(kept.phase(), Phase::HalfOpen);
    assert_eq!(kept.generation(), frozen.generation() + 1);
    assert_eq!((kept.probes(), kept.count(), kept.trips()), (2, 1, 3));
    // Decided, then finished: no slot held, successes and backoff kept.
    let decided = decide_reclaim(frozen, true);
    assert_eq!(decided.phase(), Phase::Reclaiming);
    assert_eq!(decided.generation(), frozen.generation());
    let done = finish_reclaim(decided);
    assert_eq!(done.phase(), Phase::HalfOpen);
    assert_eq!(done.generation(), frozen.generation() + 1);
    assert_eq!((done.probes(), done.count(), done.trips()), (0, 1, 3));
    // An open word whose period is over, every slot held by expired
    // probes of earlier episodes: half-open first (a transition), the
    // reclaim on the next admission.
    let open = half.transition(Phase::Open);
    let mut e = ProbeEnv(true);
    let (n, a) = admit(open, &p, &mut e);
    let n = n.unwrap();
    assert_eq!(a, Admission::Reclaim { probes: 2 });
    assert_eq!(n.phase(), Phase::HalfOpen);
    assert!(admit_transition(open, Some(n)).is_some());
    // ... but a slot free, or the probes young: half-open and a probe
    // taken, or refused for the budget.
    let (n, a) = admit(half.with_probes(1).transition(Phase::Open), &p, &mut e);
    assert!(matches!(a, Admission::Admit { probe: true, .. }), "{a:?}");
    assert_eq!(
        n.map(|n| (n.phase(), n.probes())),
        Some((Phase::HalfOpen, 2))
    );
    let (n, a) = admit(open, &p, &mut ProbeEnv(false));
    assert!(
        matches!(
            a,
            Admission::Refuse {
                refusal: Refusal::ProbeBudget,
                ..
            }
        ),
        "{a:?}"
    );
    assert_eq!(
        n.map(|n| (n.phase(), n.probes())),
        Some((Phase::HalfOpen, 2))
    );
    assert!(
        admit_transition(half, Some(frozen)).is_none(),
        "frozen reads half-open"
    );
    assert_eq!(Phase::Checking.seen(), Phase::HalfOpen);
    assert_eq!(Phase::Reclaiming.seen(), Phase::HalfOpen);
}

#[test]
fn c13_late_record_only_returns_the_probe_slot() {
    let p = policy();
    let mut e = env(0);
    let w = Word::FRESH.transition(Phase::HalfOpen).with_probes(1);
    let old = w.generation();
    let w = w.transition(Phase::Open); // probe failed elsewhere, new episode
    let (n, r) = record(w, &p, old, true, Verdict::Success, false, &mut e);
    assert_eq!(r, Recorded::Late);
    let n = n.unwrap();
    assert_eq!(n.probes(), 0);
    assert_eq!(n.phase(), Phase::Open);
    assert_eq!(n.count(), 0);
    let (n, r) = record(w, &p, old, false, Verdict::Failure, false, &mut e);
    assert_eq!((n, r), (None, Recorded::Late));
}

#[test]
fn c10_cancelled_counts_neither_and_returns_slot() {
    let p = policy();
    let mut e = env(0);
    let w = Word::FRESH
        .transition(Phase::HalfOpen)
        .with_probes(1)
        .with_count(1);
    let (n, r) = record(
        w,
        &p,
        w.generation(),
        true,
        Verdict::Cancelled,
        false,
        &mut e,
    );
    let n = n.unwrap();
    assert_eq!(r, Recorded::Applied);
    assert_eq!(n.probes(), 0);
    assert_eq!(n.count(), 1);
    assert_eq!(n.phase(), Phase::HalfOpen);
}

#[test]
fn c11_reset_and_force_open_bump_generation() {
    let w = Word::FRESH
        .transition(Phase::Open)
        .with_trips(3)
        .with_probes(1);
    let (r, t) = reset(w).unwrap();
    assert_eq!(r.phase(), Phase::Closed);
    assert_eq!(r.trips(), 0);
    assert_eq!(r.probes(), 1, "in-flight probes keep their slots");
    assert_eq!(t.generation, w.generation() + 1);
    let (f, _) = force_open(r).unwrap();
    assert_eq!(f.phase(), Phase::ForcedOpen);
    assert_eq!(f.generation(), r.generation() + 1);
    assert!(reset(Word::FRESH.with_phase(Phase::Vacant)).is_none());
}

#[test]
fn c19_trip_opens_from_every_phase_but_forced_open() {
    let p = policy();
    let now = Instant::from_nanos(5_000_000_000);
    let at = |s: u64| Some(Instant::from_nanos(s * 1_000_000_000));
    // Closed, failures counted: open for the base period, no backoff.
    let closed = Word::FRESH.with_count(2).with_probes(1);
    let (w, t) = trip(closed, now, &p).expect("trips");
    assert_eq!(
        (w.phase(), w.trips(), w.count(), w.probes()),
        (Phase::Open, 0, 0, 1)
    );
    assert_eq!(
        (t.from, t.to, t.generation),
        (Phase::Closed, Phase::Open, 1)
    );
    assert_eq!(t.open_until, at(35));
    // Half-open: a re-trip, like a probe failure (backoff exponent up).
    let half = Word::FRESH
        .with_phase(Phase::HalfOpen)
        .with_count(1)
        .with_trips(1);
    let (w, t) = trip(half, now, &p).expect("re-trips");
    assert_eq!((w.phase(), w.trips(), w.count()), (Phase::Open, 2, 0));
    assert_eq!(t.open_until, at(5 + 100), "30 s × 2² capped at 100 s");
    // Open: the period restarts from now, the backoff kept.
    let open = Word::FRESH.with_phase(Phase::Open).with_trips(1);
    let (w, t) = trip(open, now, &p).expect("restarts");
    assert_eq!((w.phase(), w.trips()), (Phase::Open, 1));
    assert_eq!(w.generation(), open.generation() + 1);
    assert_eq!((t.from, t.open_until), (Phase::Open, at(5 + 60)));
    // Forced open holds until a reset; a slot in a hand-over is no one's.
    for p2 in [Phase::ForcedOpen, Phase::Vacant, Phase::Pending] {
        assert_eq!(trip(Word::FRESH.with_phase(p2), now, &p), None, "{p2:?}");
    }
}

#[test]
fn c19_half_open_starts_a_probe_cycle_from_closed_or_open() {
    let p = policy();
    let closed = Word::FRESH.with_count(2);
    let (w, t) = half_open(closed, &p).expect("from closed");
    assert_eq!(
        (w.phase(), w.count(), w.generation()),
        (Phase::HalfOpen, 0, 1)
    );
    assert_eq!(
        (t.from, t.to, t.open_until),
        (Phase::Closed, Phase::HalfOpen, None)
    );
    let open = Word::FRESH
        .with_phase(Phase::Open)
        .with_trips(2)
        .with_probes(1);
    let (w, _) = half_open(open, &p).expect("from open");
    assert_eq!((w.phase(), w.trips(), w.probes()), (Phase::HalfOpen, 2, 1));
    for p2 in [
        Phase::HalfOpen,
        Phase::ForcedOpen,
        Phase::Vacant,
        Phase::Pending,
    ] {
        assert_eq!(half_open(Word::FRESH.with_phase(p2), &p), None, "{p2:?}");
    }
}

#[test]
fn c22_an_observed_trip_keeps_the_word_closed_in_its_generation_and_restarts_the_count() {
    let p = Policy {
        observe: true,
        ..policy()
    };
    let mut e = env(0);
    let w = Word::FRESH.with_count(2);
    let (n, r) = record(w, &p, 0, false, Verdict::Failure, false, &mut e);
    assert_eq!(r, Recorded::WouldTrip);
    let w = n.expect("the count restarts");
    assert_eq!(
        (w.phase(), w.generation(), w.count()),
        (Phase::Closed, 0, 0)
    );
    assert_eq!(e.reads, 0, "no open period, so no clock");
    // The failure-rate window's verdict, on a failure and on a success.
    let rate = Policy {
        consecutive_failures: None,
        ..p
    };
    for verdict in [Verdict::Failure, Verdict::Success] {
        let (n, r) = record(Word::FRESH, &rate, 0, false, verdict, true, &mut e);
        assert_eq!((n, r), (None, Recorded::WouldTrip), "{verdict:?}");
    }
    // A probe failure of a cycle an operator started still reopens.
    let half = Word::FRESH.transition(Phase::HalfOpen).with_probes(1);
    let (n, r) = record(
        half,
        &p,
        half.generation(),
        true,
        Verdict::Failure,
        false,
        &mut e,
    );
    assert_eq!(n.map(Word::phase), Some(Phase::Open));
    assert!(matches!(r, Recorded::Transition(_)), "{r:?}");
}
