//! `breakerbank.ManualClock`: the core's `ManualClock`, moved from Python.

use crate::errors::Error;
use crate::time::{duration, instant_secs};
use pyo3::prelude::*;

/// A clock that moves only when told to, for tests and simulations.
///
/// Starts at 0.0 seconds. Pass it to `Bank.from_yaml(..., clock=clock)`;
/// the bank reads this very clock (copies share one time), so
/// `clock.advance(30)` ends a 30 s open period.
#[pyclass(frozen, module = "breakerbank", name = "ManualClock")]
#[derive(Debug)]
pub struct PyManualClock {
    pub(crate) inner: breakerbank::ManualClock,
}

#[pymethods]
impl PyManualClock {
    #[new]
    fn new() -> Self {
        Self {
            inner: breakerbank::ManualClock::new(),
        }
    }

    /// Moves time forward by `seconds` (finite, >= 0).
    fn advance(&self, seconds: f64) -> Result<(), Error> {
        self.inner
            .advance(duration(seconds, "ManualClock.advance(seconds)")?);
        Ok(())
    }

    /// Now, in seconds since the clock's start.
    fn now(&self) -> f64 {
        instant_secs(self.inner.now())
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now={})", self.now())
    }
}
