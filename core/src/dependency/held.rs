//! A permit held past a borrow, for holders that outlive one (a binding's
//! decision object, a response future): recorded exactly once through a
//! shared reference, from any thread.

use super::permit::{Permit, PermitData};
use super::Dependency;
use crate::outcome::Outcome;
use crate::sync::Mutex;
use std::fmt;
use std::mem::ManuallyDrop;

/// An admitted call's permit that owns a handle of its dependency, so it
/// can be kept anywhere and recorded through `&self` (C13): the first
/// [`record`](HeldPermit::record) counts, a later one is refused with the
/// outcome already counted, and a permit dropped unrecorded records
/// [`Outcome::Cancelled`].
///
/// ```
/// use breakerbank::{Bank, Decision, HeldPermit, Outcome, Profile};
/// let bank = Bank::new(Profile::from_yaml(r#"
/// dependencies:
///   svc_client:
///     isolation: global
///     trip: {consecutive_failures: 3}
///     open_duration: 30s
///     half_open: {probe_budget: 1, success_threshold: 1}
///     fallback: {kind: error, code: DOWN}
///     recovery_bound: 5m
/// "#).unwrap());
/// let svc = bank.dependency("svc_client").unwrap();
/// let Decision::Admitted(p) = svc.admit(None, None).unwrap() else { unreachable!() };
/// let held = HeldPermit::new(p);
/// assert_eq!(held.record(Outcome::Success), Ok(Outcome::Success));
/// assert_eq!(held.record(Outcome::Failure), Err(Outcome::Success), "counted once");
/// ```
pub struct HeldPermit {
    dep: Dependency,
    probe: bool,
    /// The permit until it is recorded, then the outcome as counted.
    state: Mutex<Result<PermitData, Outcome>>,
}

impl fmt::Debug for HeldPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldPermit")
            .field("dep", &self.dep)
            .field("probe", &self.probe)
            .field("outcome", &self.outcome())
            .finish()
    }
}

impl HeldPermit {
    /// Holds `permit`, with a handle of its dependency.
    pub fn new(permit: Permit<'_>) -> Self {
        let permit = ManuallyDrop::new(permit);
        Self {
            dep: permit.dep.clone(),
            probe: permit.raw.probe,
            state: Mutex::new(Ok(permit.raw)),
        }
    }

    /// The dependency the permit was admitted by.
    pub fn dependency(&self) -> &Dependency {
        &self.dep
    }

    /// Whether the call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// Records the call's outcome, the first time: `Ok` with the outcome
    /// as counted (a success at least `slow_call` long is a failure, C5);
    /// afterwards `Err` with that counted outcome, and nothing changes.
    pub fn record(&self, outcome: Outcome) -> Result<Outcome, Outcome> {
        let mut state = self.lock();
        let raw = (*state)?;
        // Recording is lock-free and runs no caller code: fine under the lock.
        let counted = self.dep.record_data(raw, outcome);
        *state = Err(counted);
        Ok(counted)
    }

    /// Gives the permit back uncounted, the first time (see
    /// [`Running::not_run`](crate::Running::not_run)): it then reads as
    /// cancelled. `false` if an outcome was recorded already.
    pub fn withdraw(&self) -> bool {
        let mut state = self.lock();
        let Ok(raw) = *state else {
            return false;
        };
        self.dep.withdraw(raw);
        *state = Err(Outcome::Cancelled);
        true
    }

    /// The outcome as counted, once recorded.
    pub fn outcome(&self) -> Option<Outcome> {
        (*self.lock()).err()
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Result<PermitData, Outcome>> {
        // A panic while the lock was held cannot leave the state half
        // written: it is one value, replaced whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for HeldPermit {
    fn drop(&mut self) {
        // `&mut self`: no one else can record now, so the state is read
        // without taking the lock (two atomic writes fewer per decision).
        #[cfg(not(loom))]
        let state = *self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        #[cfg(loom)]
        let state = *self.lock();
        if let Ok(raw) = state {
            let _ = self.dep.record_data(raw, Outcome::Cancelled);
        }
    }
}
