use super::*;
use crate::clock::ManualClock;
use crate::state::word::Phase;
use std::time::Duration;

fn trip_on_first_failure() -> Policy {
    Policy {
        consecutive_failures: Some(1),
        probe_budget: 1,
        success_threshold: 1,
        open_duration: Duration::from_secs(30),
        backoff: None,
        probe_timeout: Duration::from_secs(300),
        observe: false,
    }
}

#[test]
fn c7_a_cell_takes_back_a_probe_slot_only_once_it_is_probe_timeout_old() {
    let p = trip_on_first_failure();
    let clock = ManualClock::new();
    let c: Cell = Cell::default();
    tripped_at(&c, 0, &clock);
    clock.advance(Duration::from_secs(30));
    let a = c.admit(&p, &clock, |_| true).expect("valid");
    assert!(matches!(a.admission, Admission::Admit { probe: true, .. }));
    assert_eq!(a.reclaimed, None);
    let lost = c.load().generation();
    clock.advance(p.probe_timeout - Duration::from_nanos(1));
    let r = c.admit(&p, &clock, |_| true).expect("valid");
    assert!(
        matches!(r.admission, Admission::Refuse { .. }),
        "{:?}: the probe is not yet probe_timeout old",
        r.admission
    );
    clock.advance(Duration::from_nanos(1));
    let b = c.admit(&p, &clock, |_| true).expect("valid");
    assert!(matches!(b.admission, Admission::Admit { probe: true, .. }));
    let (n, from) = b.reclaimed.expect("one slot taken back");
    assert_eq!(n, 1);
    assert!(from > lost, "counted at the frozen word's generation");
    // The lost probe's record is late and returns no slot.
    let late = c.record(&p, &clock, lost, true, Verdict::Success, false);
    assert_eq!(late, Recorded::Late);
    assert_eq!(c.load().probes(), 1, "the new probe's slot is still held");
}

#[test]
fn an_admission_reports_the_clock_reading_it_decided_with() {
    let p = trip_on_first_failure();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    let c: Cell = Cell::default();
    let closed = c.admit(&p, &clock, |_| true).expect("valid");
    assert_eq!(closed.reading, None, "a closed admission reads no clock");
    tripped_at(&c, 0, &clock);
    clock.advance(Duration::from_secs(1));
    let open = c.admit(&p, &clock, |_| true).expect("valid");
    assert!(matches!(open.admission, Admission::Refuse { .. }));
    assert_eq!(open.reading, Some(clock.now()));
}

/// A closed cell at generation `g`, tripped by one failure at `clock`'s
/// time: the open word.
fn tripped_at(c: &Cell, g: u64, clock: &ManualClock) -> Word {
    let r = c.record(
        &trip_on_first_failure(),
        clock,
        g,
        false,
        Verdict::Failure,
        false,
    );
    assert!(matches!(r, Recorded::Transition(_)), "{r:?}");
    let w = c.load();
    assert_eq!(w.phase(), Phase::Open);
    w
}

fn closed_at(g: u64) -> Word {
    Word::from_bits(g << 25)
}

#[test]
fn c12_a_trip_after_millions_of_generations_still_has_its_period() {
    // Generations 2^24 and 2^25 on: the side word of a slot that has
    // seen that many transitions or hand-overs.
    for g in [(1u64 << 24) + 1, (1 << 25) + 7, (1 << 38) + 3] {
        let clock = ManualClock::new();
        let c: Cell = Cell::new(closed_at(g));
        assert_eq!(c.load().generation(), g);
        let w = tripped_at(&c, g, &clock);
        assert_eq!(
            c.open_until(w.generation()),
            Some(Instant::from_nanos(30_000_000_000)),
            "generation {g}"
        );
        let a = c
            .admit(&trip_on_first_failure(), &clock, |_| true)
            .expect("valid")
            .admission;
        assert_eq!(
            a,
            Admission::Refuse {
                refusal: machine::Refusal::Open,
                retry_after: Some(Duration::from_secs(30))
            },
            "generation {g}"
        );
    }
}

#[test]
fn c12_an_open_period_lasts_its_duration_on_a_clock_decades_old() {
    for years in [17u64, 20, 100, 500] {
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(years * 365 * 86_400));
        let c: Cell = Cell::default();
        tripped_at(&c, 0, &clock);
        let a = c
            .admit(&trip_on_first_failure(), &clock, |_| true)
            .expect("valid")
            .admission;
        assert_eq!(
            a,
            Admission::Refuse {
                refusal: machine::Refusal::Open,
                retry_after: Some(Duration::from_secs(30))
            },
            "{years} years"
        );
        clock.advance(Duration::from_secs(30));
        let a = c
            .admit(&trip_on_first_failure(), &clock, |_| true)
            .expect("valid")
            .admission;
        assert!(matches!(a, Admission::Admit { probe: true, .. }), "{a:?}");
    }
}

#[test]
fn c12_a_trip_that_lost_its_race_writes_no_period() {
    let clock = ManualClock::new();
    let c: Cell = Cell::default();
    let before = c.load();
    let open = tripped_at(&c, 0, &clock);
    // A rival that saw the closed word, late: the word moved on, so it
    // leaves the published period alone.
    clock.advance(Duration::from_secs(10));
    assert!(!c.prepublish(before, open.generation(), Instant::from_nanos(1)));
    assert_eq!(
        c.open_until(open.generation()),
        Some(Instant::from_nanos(30_000_000_000))
    );
    // Rivals of the same trip keep the later end.
    let d: Cell = Cell::default();
    let w = d.load();
    assert!(d.prepublish(w, 1, Instant::from_nanos(5_000_000)));
    assert!(d.prepublish(w, 1, Instant::from_nanos(2_000_000)));
    assert_eq!(d.open_until(1), Some(Instant::from_nanos(5_000_000)));
    assert!(d.prepublish(w, 1, Instant::from_nanos(7_000_001)));
    assert_eq!(d.open_until(1), Some(Instant::from_nanos(8_000_000)));
    assert_eq!(d.open_until(2), None, "another generation's tag");
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
        probe_timeout: Duration::from_secs(300),
        observe: false,
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

/// A closed word `n` generations on from a fresh one (the state of a
/// partition whose slot has seen `n` transitions and hand-overs).
fn closed_after(n: u64) -> Word {
    let mut w = Word::FRESH;
    for _ in 0..n {
        w = w.next_generation();
    }
    w
}

#[test]
fn c12_a_slot_past_2_pow_24_generations_still_ends_its_open_period() {
    let clock = ManualClock::new();
    let policy = trip_on_first_failure();
    let w = closed_after((1 << 24) + 3);
    let c: Cell = Cell::new(w);
    c.record(
        &policy,
        &clock,
        w.generation(),
        false,
        Verdict::Failure,
        false,
    );
    let admit = || c.admit(&policy, &clock, |_| true).expect("valid").admission;
    assert!(matches!(admit(), Admission::Refuse { .. }), "tripped");
    clock.advance(Duration::from_secs(30));
    assert!(
        matches!(admit(), Admission::Admit { probe: true, .. }),
        "the open period ends: a probe goes through, not open forever"
    );
}

#[test]
fn c13_a_permit_2_pow_25_generations_old_is_late() {
    let clock = ManualClock::new();
    let old = Word::FRESH.generation();
    let c: Cell = Cell::new(closed_after(1 << 25));
    let r = c.record(
        &trip_on_first_failure(),
        &clock,
        old,
        false,
        Verdict::Failure,
        false,
    );
    assert_eq!(r, Recorded::Late);
    assert_eq!(c.load().phase(), Phase::Closed);
}

/// A trip at generation `g` at `clock`'s time, with an open period of
/// `open`, on a cell whose word is closed at `g - 1`: the open word.
fn tripped_for(c: &Cell, open: Duration, clock: &ManualClock) -> Word {
    let p = Policy {
        open_duration: open,
        ..trip_on_first_failure()
    };
    let g = c.load().generation();
    let r = c.record(&p, clock, g, false, Verdict::Failure, false);
    assert!(matches!(r, Recorded::Transition(_)), "{r:?}");
    c.load()
}

#[test]
fn c6_c12_a_trip_a_whole_tag_of_generations_after_a_longer_one_has_its_own_period() {
    // A trip whose open period ends late, then the slot's generation goes
    // round the side word's whole tag (hand-overs: tenants coming and
    // going through the slot), then a trip with a shorter period: it
    // must end when its own period does, not inherit the earlier end.
    let clock = ManualClock::new();
    let c: Cell = Cell::default();
    let first = tripped_for(&c, Duration::from_secs(59), &clock);
    let mut w = c.hand_over(Phase::Closed);
    while w.generation() + 1 != first.generation() + (1 << TAG_BITS) {
        w = c.hand_over(Phase::Closed);
    }
    clock.advance(Duration::from_millis(330));
    let second = tripped_for(&c, Duration::from_secs(30), &clock);
    assert_eq!(tag_of(second.generation()), tag_of(first.generation()));
    assert_eq!(
        c.open_until(second.generation()),
        Some(Instant::from_nanos(30_330_000_000)),
        "the second trip's own period"
    );
    clock.advance(Duration::from_secs(30));
    let a = c
        .admit(&trip_on_first_failure(), &clock, |_| true)
        .expect("valid")
        .admission;
    assert!(
        matches!(a, Admission::Admit { probe: true, .. }),
        "{a:?}: 30 s after the trip the open period is over"
    );
}
