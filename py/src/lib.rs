//! Python bindings for breakerbank (`breakerbank._native`).
//!
//! A thin translation layer over the Rust core: every breaker decision,
//! every clock reading and every fallback choice is the core's. This crate
//! converts arguments, maps errors to the exception hierarchy
//! (one `From<Error> for PyErr`), and hands Python objects to the core's
//! stale cache. Pure-Python conveniences (the `guard` decorator, asyncio,
//! the harness) live in `python/breakerbank/`.
//!
//! The crate is never modelled by loom, so it uses `std::sync` directly.
#![allow(clippy::disallowed_types)]

mod aio;
mod bank;
mod clock;
mod decision;
mod dependency;
mod errors;
mod fallback;
mod fastcall;
mod held;
mod outcome;
mod tenant;
mod time;

use pyo3::prelude::*;

/// The native half of the `breakerbank` package; import `breakerbank`.
#[pymodule(name = "_native", gil_used = false)]
mod native {
    use super::*;

    #[pymodule_export]
    use crate::bank::PyBank;
    #[pymodule_export]
    use crate::clock::PyManualClock;
    #[pymodule_export]
    use crate::decision::PyDecision;
    #[pymodule_export]
    use crate::dependency::PyDependency;
    #[pymodule_export]
    use crate::errors::Unavailable;
    #[pymodule_export]
    use crate::fallback::PyFallback;

    /// Every problem of the profile `text` (empty when it is valid), and,
    /// given the `running` profile, every problem reloading `text` into a
    /// bank built from it would meet (C20): a dry run that builds no bank.
    #[pyfunction]
    #[pyo3(signature = (text, running=None))]
    fn check_profile(text: &str, running: Option<&str>) -> Vec<String> {
        use breakerbank::Profile;
        let next = match Profile::from_yaml(text) {
            Ok(p) => p,
            Err(e) => return e.problems().to_vec(),
        };
        let Some(running) = running else {
            return Vec::new();
        };
        match Profile::from_yaml(running) {
            Ok(r) => r
                .check_reload(&next)
                .err()
                .map(|e| e.problems().to_vec())
                .unwrap_or_default(),
            Err(e) => e
                .problems()
                .iter()
                .map(|p| format!("the running profile: {p}"))
                .collect(),
        }
    }

    /// C21's advice for the profile `text`: one dict per piece, with
    /// `dependency` (None for the profile as a whole), `field`, `kind`,
    /// `suggested` (seconds, or None) and `message` (what to change and
    /// why). Empty for an invalid profile: its problems come first
    /// (`check_profile`).
    #[pyfunction]
    fn profile_advice<'py>(
        py: Python<'py>,
        text: &str,
    ) -> PyResult<Vec<Bound<'py, pyo3::types::PyDict>>> {
        let Ok(profile) = breakerbank::Profile::from_yaml(text) else {
            return Ok(Vec::new());
        };
        profile
            .advice()
            .iter()
            .map(|a| {
                let d = pyo3::types::PyDict::new(py);
                d.set_item("dependency", a.dependency.as_deref())?;
                d.set_item("field", a.field)?;
                d.set_item("kind", a.kind.as_str())?;
                d.set_item("suggested", a.suggested.map(|s| s.as_secs_f64()))?;
                d.set_item("message", a.to_string())?;
                Ok(d)
            })
            .collect()
    }

    /// In a forked child, once Python has made itself whole: starts the
    /// banks' event dispatchers and sweeps again (C16). Called by
    /// `os.register_at_fork(after_in_child=…)`, registered at import.
    #[pyfunction]
    fn _after_fork_in_child() {
        breakerbank::fork::restart();
    }

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        let py = m.py();
        // The core's own fork handler runs inside `fork()`, before Python
        // has rebuilt its thread state in the child: a bank thread started
        // there could call a listener into a half-made interpreter.
        breakerbank::fork::defer_restart();
        let hook = m.getattr("_after_fork_in_child")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("after_in_child", hook)?;
        // Absent where there is no fork (Windows).
        if let Ok(register) = py.import("os")?.getattr("register_at_fork") {
            register.call((), Some(&kwargs))?;
        }
        dependency::install_methods(py)?;
        decision::install_methods(py)?;
        m.add("BreakerError", py.get_type::<errors::BreakerError>())?;
        m.add("ConfigError", errors::config_error(py)?)?;
        m.add("UnknownDependency", errors::unknown_dependency(py)?)?;
        m.add("TenantRequired", errors::tenant_required(py)?)?;
        m.add("InvalidTenant", errors::invalid_tenant(py)?)?;
        m.add("DependencyUnavailable", errors::dependency_unavailable(py)?)?;
        m.add("DeadlineExpired", errors::deadline_expired(py)?)?;
        m.add(
            "OutcomeAlreadyRecorded",
            errors::outcome_already_recorded(py)?,
        )?;
        Ok(())
    }
}
