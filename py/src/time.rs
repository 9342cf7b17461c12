//! Seconds (Python floats) to and from the core's `Duration` / `Instant`.
//! Only unit conversion lives here: every comparison and every reading of
//! the clock is the core's.

use crate::errors::Error;
use breakerbank::Instant;
use std::time::Duration;

/// A non-negative, finite number of seconds as a `Duration`.
pub fn duration(seconds: f64, what: &str) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        Error::Value(format!(
            "{what} must be a finite number of seconds >= 0, got {seconds}"
        ))
    })
}

/// A deadline in seconds on the bank's clock as an `Instant`.
///
/// A deadline before the clock's start is the clock's start (already
/// expired, C10); `inf` is the far future; NaN is refused.
pub fn deadline(seconds: f64) -> Result<Instant, Error> {
    if seconds.is_nan() {
        return Err(Error::Value(
            "deadline must be seconds on the bank's clock (see bank.now()), got nan".into(),
        ));
    }
    if seconds <= 0.0 {
        return Ok(Instant::ZERO);
    }
    // `as` saturates: +inf and huge values become the far future.
    Ok(Instant::from_nanos((seconds * 1e9) as u64))
}

/// An optional deadline.
pub fn opt_deadline(seconds: Option<f64>) -> Result<Option<Instant>, Error> {
    seconds.map(deadline).transpose()
}

/// An `Instant` as seconds on the bank's clock.
pub fn instant_secs(t: Instant) -> f64 {
    t.as_nanos() as f64 / 1e9
}
