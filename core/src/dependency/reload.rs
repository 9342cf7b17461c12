//! Live reload of one dependency (C20): its [`Tuning`], everything of the
//! profile a decision reads, replaced as a whole; and the retirement of a
//! dependency a reload removed.
//!
//! What the healthy path reads is one relaxed load of [`DepInner::fast`],
//! as it read one flag before reload existed: the closed admit and the
//! success record use no threshold, duration or budget, only the word.
//! Everything else is read through the tuning pointer, once per decision,
//! so a decision never mixes two profiles' values (a probe budget of one
//! with a success threshold of the other). Tunings are never freed before
//! their dependency: a [`Rejection`] borrows its fallback for as long as
//! it borrows the handle. A reload keeps one more (a few hundred bytes)
//! for an entry the dependency has not had before, and reuses the one it
//! has for an entry it has (a profile reloaded unchanged costs nothing).

use crate::dependency::*;
use crate::state::machine::Policy;

/// The bits of [`DepInner::fast`].
pub(crate) mod fast {
    /// Global and no `slow_call`: a closed word admits on one load.
    pub(crate) const GLOBAL_UNTIMED: u32 = 1;
    /// `slow_call` is set: admissions read the clock.
    pub(crate) const TIMES_CALLS: u32 = 1 << 1;
    /// Global, failure-rate policy, no `slow_call`, and a window whose
    /// buckets a coarse reading places: closed outcomes go to the window
    /// without the cell's CAS loop (see `record_windowed`).
    pub(crate) const COARSE_WINDOW: u32 = 1 << 2;
    /// Consecutive policy and no `slow_call`: a closed success with no
    /// failures counted is a no-op, decidable with one load.
    pub(crate) const SUCCESS_BY_LOAD: u32 = 1 << 3;
    /// A reload removed the dependency (or started it afresh): every
    /// fast path is off, and the general path refuses with
    /// `UnknownDependency`.
    pub(crate) const RETIRED: u32 = 1 << 4;
}

/// What a dependency's profile entry says, as decisions read it.
pub(crate) struct Tuning {
    pub(crate) config: DependencyConfig,
    pub(crate) policy: Policy,
    /// The failure-rate policy's `(rate, min_calls)`.
    pub(crate) rate: Option<(f64, u64)>,
    /// The [`fast`] bits this tuning makes (never [`fast::RETIRED`]).
    pub(crate) fast: u32,
}

impl Tuning {
    /// The tuning of `config`, for a dependency with (`tenant`) or
    /// without a tenant table whose shared window, if any, a coarse
    /// reading places (`coarse_window`).
    pub(crate) fn of(config: DependencyConfig, tenant: bool, coarse_window: bool) -> Self {
        let (consecutive, rate) = match config.trip {
            TripPolicy::ConsecutiveFailures(n) => (Some(n), None),
            TripPolicy::FailureRate {
                rate, min_calls, ..
            } => (None, Some((rate, u64::from(min_calls)))),
        };
        let policy = Policy {
            consecutive_failures: consecutive,
            probe_budget: config.probe_budget,
            success_threshold: config.success_threshold,
            open_duration: config.open_duration,
            backoff: config.backoff.map(|b| (b.multiplier, b.max)),
            probe_timeout: config.probe_timeout,
            observe: config.mode == Mode::Observe,
        };
        let untimed = config.slow_call.is_none();
        let mut bits = 0;
        if !untimed {
            bits |= fast::TIMES_CALLS;
        }
        if !tenant && untimed {
            bits |= fast::GLOBAL_UNTIMED;
            if coarse_window {
                bits |= fast::COARSE_WINDOW;
            }
        }
        if consecutive.is_some() && untimed {
            bits |= fast::SUCCESS_BY_LOAD;
        }
        Tuning {
            config,
            policy,
            rate,
            fast: bits,
        }
    }
}

/// Whether a dependency whose trip policy is `trip` and whose tenant
/// table (if any) was built for `capacity` tenants can take `new` in
/// place, keeping its partitions. A trip policy of another kind or
/// window keeps its counts in another shape, and a `max_tenants` above
/// the table's size needs a larger table: either needs new partitions,
/// so a reload starts the dependency afresh, as for a changed isolation.
pub(crate) fn fits(trip: &TripPolicy, capacity: Option<u32>, new: &DependencyConfig) -> bool {
    let shape = |t: &TripPolicy| match t {
        TripPolicy::ConsecutiveFailures(_) => None,
        TripPolicy::FailureRate { window, .. } => Some(*window),
    };
    shape(trip) == shape(&new.trip) && capacity.is_none_or(|c| new.max_tenants <= c)
}

impl DepInner {
    /// The tuning in force: read once per decision.
    #[inline]
    pub(crate) fn tuning(&self) -> &Tuning {
        // Acquire: pairs with the Release in `retune`; the tuning is seen
        // as it was built.
        let p = self.tuning.load(Ordering::Acquire);
        // SAFETY: every pointer stored in `tuning` comes from a box that
        // `tunings` owns and never drops before `self` (see `retune`), so
        // it is valid for as long as `&self` is; tunings are never written
        // after they are published.
        unsafe { &*p }
    }

    /// The [`fast`] bits: which paths the next decision may take.
    #[inline(always)]
    pub(crate) fn fast(&self) -> u32 {
        // Relaxed: a path choice only. A fast path uses nothing of the
        // tuning; a decision that reads the old bits is one made before
        // the reload.
        self.fast.load(Ordering::Relaxed)
    }
}

impl Dependency {
    /// Whether a reload removed this dependency from its bank (C20).
    #[inline]
    pub(crate) fn is_retired(&self) -> bool {
        self.inner.fast() & fast::RETIRED != 0
    }

    /// Whether `config` can replace this dependency's own in place (see
    /// [`fits`]): the caller has already matched name and isolation.
    pub(crate) fn fits(&self, config: &DependencyConfig) -> bool {
        let capacity = self.inner.table.as_ref().map(Table::capacity);
        fits(&self.inner.tuning().config.trip, capacity, config)
    }

    /// Puts `config` in force (C20), when it [`fits`](Self::fits): every
    /// partition keeps its word (state, generation, open-until, probes
    /// in flight), counters and window; the next decision reads the new
    /// values. A lower `max_tenants` evicts in C9's order at once.
    pub(crate) fn retune(&self, config: DependencyConfig) {
        let inner = &*self.inner;
        if let Fallback::Stale { max_staleness } = config.fallback {
            inner
                .stale
                .get_or_init(|| StaleCache::new(STALE_CACHE_CAPACITY, max_staleness))
                .set_max_staleness(max_staleness);
        }
        let max_tenants = config.max_tenants;
        let probe_timeout = config.probe_timeout;
        let coarse = inner.shared.window().is_some_and(|w| w.coarse_ok());
        let tuning = Tuning::of(config, inner.table.is_some(), coarse);
        let rule_changed = tuning.rate != inner.tuning().rate;
        let mode_changed = tuning.config.mode != inner.tuning().config.mode;
        let bits = tuning.fast;
        {
            let mut all = inner.tunings.lock().unwrap_or_else(|e| e.into_inner());
            // An entry seen before has its tuning already (the same
            // config makes the same tuning for this dependency): reusing
            // it keeps one per distinct entry, so a service that reloads
            // an unchanged profile every minute does not grow.
            let kept = match all.iter().position(|t| t.config == tuning.config) {
                Some(i) => &all[i],
                None => {
                    all.push(Box::new(tuning));
                    &all[all.len() - 1]
                }
            };
            let ptr = std::ptr::from_ref::<Tuning>(kept).cast_mut();
            // Release: pairs with the Acquire in `tuning()`.
            inner.tuning.store(ptr, Ordering::Release);
        }
        // Release: a thread that sees the new bits and then reads the
        // tuning sees this one or a later one.
        inner.fast.store(bits, Ordering::Release);
        if rule_changed {
            // Judgements made under the old rate left passes and arming
            // that the new one may not grant: every window judges afresh
            // (after the store above, so a judgement that starts now
            // reads the new rule).
            if let Some(w) = inner.shared.window() {
                w.retuned();
            }
            if let Some(t) = &inner.table {
                t.for_each_slot(|p| {
                    p.with_episode_window(Window::retuned);
                });
            }
        }
        if mode_changed {
            // After the store above: a trip decided from here on reads
            // the new mode (C22).
            self.restart_for_mode();
        }
        if let Some(t) = &inner.table {
            t.set_probe_timeout(probe_timeout);
            t.set_limit(max_tenants, &|| self.now_coarse().as_nanos());
        }
        // Sweep everything again: the new recovery bound may make an
        // episode stuck sooner.
        // Relaxed: a hint, as in `schedule`.
        inner.sweep_due.store(0, Ordering::Relaxed);
    }

    /// Takes the dependency out of service (C20): every handle's
    /// admissions, state reads and operator actions refuse with
    /// [`AdmitError::UnknownDependency`]. Permits already issued can
    /// still be recorded (into partitions no one reads) or dropped.
    pub(crate) fn retire(&self) {
        // Release: as in `retune`.
        self.inner.fast.store(fast::RETIRED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use crate::{Bank, ManualClock, Profile};

    fn profile(failures: u32) -> Profile {
        Profile::from_yaml(&format!(
            "dependencies:\n  svc_client:\n    isolation: global\n    trip: {{consecutive_failures: {failures}}}\n    open_duration: 30s\n    half_open: {{probe_budget: 1, success_threshold: 1}}\n    fallback: {{kind: error, code: DOWN}}\n    recovery_bound: 5m\n"
        ))
        .expect("valid")
    }

    /// C20: a service that reloads its profile periodically, changed or
    /// not, keeps one tuning per distinct entry, not one per reload.
    #[test]
    fn c20_reloads_keep_one_tuning_per_distinct_entry() {
        let bank = Bank::with_clock(profile(3), ManualClock::new());
        let dep = bank.dependency("svc_client").expect("declared");
        for i in 0..1_000 {
            bank.reload(profile(3 + i % 2)).expect("valid");
        }
        let kept = dep.inner.tunings.lock().expect("not poisoned").len();
        assert_eq!(kept, 2, "tunings kept after 1000 reloads of two entries");
        assert_eq!(dep.config().trip, profile(4).dependencies()[0].trip);
    }
}
