//! Python's exception rule: the classifier the binding gives the core
//! (`Permit::finish`'s `classify`, as `Outcome::of_error` is Rust's), shared
//! by `call`, `acall`, `guard`, the `with` form and `finish`.
//!
//! API.md: `asyncio.CancelledError` → cancelled; `TimeoutError` once the
//! call's deadline has passed on the bank's clock → cancelled;
//! `KeyboardInterrupt` / `SystemExit` / `GeneratorExit` → cancelled; any
//! other exception → failure. A call that returned is a success; the core
//! counts it as a failure when it took at least the dependency's
//! `slow_call` on the bank's clock (`finish` and `record_raw` return the
//! outcome as counted).

use breakerbank::{Dependency, Instant, Outcome};
use pyo3::exceptions::{PyGeneratorExit, PyKeyboardInterrupt, PySystemExit, PyTimeoutError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static CANCELLED_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn is_asyncio_cancelled(py: Python<'_>, exc: &Bound<'_, PyAny>) -> bool {
    match CANCELLED_ERROR.import(py, "asyncio", "CancelledError") {
        Ok(ty) => exc.is_instance(ty).unwrap_or(false),
        // asyncio cannot be imported: nothing can be its CancelledError.
        Err(_) => false,
    }
}

/// The outcome of a call that raised `exc` (an exception instance).
pub fn of_exception(
    py: Python<'_>,
    dep: &Dependency,
    exc: &Bound<'_, PyAny>,
    deadline: Option<Instant>,
) -> Outcome {
    if exc.is_instance_of::<PyKeyboardInterrupt>()
        || exc.is_instance_of::<PySystemExit>()
        || exc.is_instance_of::<PyGeneratorExit>()
        || is_asyncio_cancelled(py, exc)
    {
        return Outcome::Cancelled;
    }
    if exc.is_instance_of::<PyTimeoutError>() {
        if let Some(deadline) = deadline {
            // "A deadline equal to now has expired" (C10).
            if dep.now() >= deadline {
                return Outcome::Cancelled;
            }
        }
    }
    Outcome::Failure
}
