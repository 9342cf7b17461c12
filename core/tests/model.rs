//! Model test (C5–C8, C10–C13): random sequences of admit / record / drop /
//! advance / reset / force_open drive the real breaker and a plain
//! sequential reference model; decisions and states must agree.

#![allow(clippy::disallowed_types)] // tests use std sync types directly; the rule is for core's own code

mod common;
use breakerbank::{Bank, Decision, ManualClock, Outcome, Permit, RejectReason, State};
use proptest::prelude::*;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
struct Cfg {
    failures: u32,
    budget: u32,
    threshold: u32,
    open_ms: u64,
    backoff: bool,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Admit,
    Record(usize, Outcome),
    Drop(usize),
    Advance(u64),
    Reset,
    ForceOpen,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Admitted {
        probe: bool,
    },
    Rejected {
        reason: RejectReason,
        retry_after: Option<Duration>,
    },
}

#[derive(Clone, Copy, Debug)]
struct MPermit {
    generation: u64,
    probe: bool,
}

/// The reference: the contract written as plainly as possible.
struct Model {
    cfg: Cfg,
    state: State,
    generation: u64,
    failures: u32,
    successes: u32,
    probes: u32,
    retrips: u32,
    open_until_ms: u64,
}

impl Model {
    fn new(cfg: Cfg) -> Self {
        Model {
            cfg,
            state: State::Closed,
            generation: 0,
            failures: 0,
            successes: 0,
            probes: 0,
            retrips: 0,
            open_until_ms: 0,
        }
    }

    fn open_ms(&self) -> u64 {
        if !self.cfg.backoff {
            return self.cfg.open_ms;
        }
        let max = self.cfg.open_ms * 3;
        (self.cfg.open_ms << self.retrips.min(10)).min(max)
    }

    fn go(&mut self, s: State) {
        self.state = s;
        self.generation += 1;
        self.failures = 0;
        self.successes = 0;
    }

    fn trip(&mut self, now: u64, retrip: bool) {
        self.retrips = if retrip { self.retrips + 1 } else { 0 };
        self.go(State::Open);
        self.open_until_ms = now + self.open_ms();
    }

    fn admit(&mut self, now: u64) -> (Seen, Option<MPermit>) {
        if self.state == State::Open && now >= self.open_until_ms {
            self.go(State::HalfOpen);
        }
        let g = self.generation;
        match self.state {
            State::Closed => (
                Seen::Admitted { probe: false },
                Some(MPermit {
                    generation: g,
                    probe: false,
                }),
            ),
            State::ForcedOpen => (
                Seen::Rejected {
                    reason: RejectReason::ForcedOpen,
                    retry_after: None,
                },
                None,
            ),
            State::Open => (
                Seen::Rejected {
                    reason: RejectReason::Open,
                    retry_after: Some(Duration::from_millis(self.open_until_ms - now)),
                },
                None,
            ),
            State::HalfOpen if self.probes < self.cfg.budget => {
                self.probes += 1;
                (
                    Seen::Admitted { probe: true },
                    Some(MPermit {
                        generation: g,
                        probe: true,
                    }),
                )
            }
            State::HalfOpen => (
                Seen::Rejected {
                    reason: RejectReason::ProbeBudget,
                    retry_after: None,
                },
                None,
            ),
        }
    }

    fn record(&mut self, p: MPermit, o: Outcome, now: u64) {
        if p.probe {
            self.probes -= 1;
        }
        if p.generation != self.generation {
            return; // late
        }
        match (self.state, o) {
            (_, Outcome::Cancelled) => {}
            (State::Closed, Outcome::Success) => self.failures = 0,
            (State::Closed, Outcome::Failure) => {
                self.failures += 1;
                if self.failures >= self.cfg.failures {
                    self.trip(now, false);
                }
            }
            (State::HalfOpen, Outcome::Success) => {
                self.successes += 1;
                if self.successes >= self.cfg.threshold {
                    self.go(State::Closed);
                    self.retrips = 0;
                }
            }
            (State::HalfOpen, Outcome::Failure) => self.trip(now, true),
            _ => {}
        }
    }

    fn reset(&mut self) {
        self.go(State::Closed);
        self.retrips = 0;
    }
}

fn op() -> impl Strategy<Value = Op> {
    let outcome = prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Failure),
        Just(Outcome::Cancelled)
    ];
    prop_oneof![
        6 => Just(Op::Admit),
        5 => (any::<usize>(), outcome).prop_map(|(i, o)| Op::Record(i, o)),
        1 => any::<usize>().prop_map(Op::Drop),
        3 => prop_oneof![0u64..5, 0u64..4_000, 0u64..40_000].prop_map(Op::Advance),
        1 => Just(Op::Reset),
        1 => Just(Op::ForceOpen),
    ]
}

fn cfg() -> impl Strategy<Value = Cfg> {
    (1u32..4, 1u32..4, 1u32..4, 1u64..30, any::<bool>()).prop_map(
        |(failures, budget, threshold, open_s, backoff)| Cfg {
            failures,
            budget,
            threshold,
            open_ms: open_s * 1000,
            backoff,
        },
    )
}

fn seen(d: &Decision<'_>) -> Seen {
    match d {
        Decision::Admitted(p) => Seen::Admitted {
            probe: p.is_probe(),
        },
        Decision::Rejected(r) => Seen::Rejected {
            reason: r.reason,
            retry_after: r.retry_after,
        },
    }
}

fn run(cfg: Cfg, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let backoff = if cfg.backoff {
        format!("backoff: {{multiplier: 2.0, max: {}ms}}", cfg.open_ms * 3)
    } else {
        String::new()
    };
    let profile = breakerbank::Profile::from_yaml(&format!(
        "dependencies:\n  svc_client:\n    isolation: global\n    trip: {{consecutive_failures: {}}}\n    open_duration: {}ms\n    half_open: {{probe_budget: {}, success_threshold: {}}}\n    fallback: {{kind: error, code: X}}\n    recovery_bound: 1h\n    {backoff}\n",
        cfg.failures, cfg.open_ms, cfg.budget, cfg.threshold
    ))
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile, clock.clone());
    let dep = bank.dependency("svc_client").expect("declared");
    let mut model = Model::new(cfg);
    let mut now_ms = 0u64;
    let mut live: Vec<(Permit<'_>, MPermit)> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Admit => {
                let d = dep.admit(None, None).expect("global");
                let (want, mp) = model.admit(now_ms);
                prop_assert_eq!(seen(&d), want, "step {} {:?}", step, op);
                if let (Decision::Admitted(p), Some(mp)) = (d, mp) {
                    live.push((p, mp));
                }
            }
            Op::Record(i, o) if !live.is_empty() => {
                let (p, mp) = live.swap_remove(i % live.len());
                p.record(o);
                model.record(mp, o, now_ms);
            }
            Op::Drop(i) if !live.is_empty() => {
                let (p, mp) = live.swap_remove(i % live.len());
                drop(p);
                model.record(mp, Outcome::Cancelled, now_ms);
            }
            Op::Record(..) | Op::Drop(_) => {}
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                now_ms += ms;
            }
            Op::Reset => {
                dep.reset(None);
                model.reset();
            }
            Op::ForceOpen => {
                dep.force_open(None);
                model.go(State::ForcedOpen);
            }
        }
        // C14: an open breaker whose period has ended reads half-open.
        let expected = match model.state {
            State::Open if now_ms >= model.open_until_ms => State::HalfOpen,
            s => s,
        };
        prop_assert_eq!(
            dep.state(None).expect("global"),
            expected,
            "state after step {} {:?}",
            step,
            op
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn c5_c8_c10_c13_breaker_matches_reference_model(cfg in cfg(), ops in prop::collection::vec(op(), 1..80)) {
        run(cfg, ops)?;
    }
}
