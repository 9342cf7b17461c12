//! Serving a call that was not admitted: every choice (stale value, degraded
//! behaviour, error) and every count is the core's
//! `Dependency::serve_fallback`; this module only hands it Python values.

use crate::errors::{unavailable, unavailable_value, Error, Kept, Raised};
use crate::held::Cached;
use breakerbank::{Dependency, Rejection};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// `breakerbank.Fallback`: the fallback a dependency declares.
#[pyclass(frozen, eq, module = "breakerbank", name = "Fallback")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyFallback {
    kind: &'static str,
    code: Option<String>,
}

impl PyFallback {
    /// `Fallback(kind='error', code='X')`.
    pub fn repr(&self) -> String {
        match &self.code {
            Some(c) => format!("Fallback(kind={:?}, code={c:?})", self.kind),
            None => format!("Fallback(kind={:?}, code=None)", self.kind),
        }
    }

    /// From the core's declaration.
    pub fn from_core(f: &breakerbank::Fallback) -> Self {
        Self {
            kind: f.kind().as_str(),
            code: f.code().map(str::to_owned),
        }
    }
}

#[pymethods]
impl PyFallback {
    #[new]
    #[pyo3(signature = (kind, code=None))]
    fn new(kind: &str, code: Option<String>) -> Result<Self, Error> {
        let kind = match kind {
            "stale" => "stale",
            "degraded" => "degraded",
            "error" => "error",
            other => {
                return Err(Error::Value(format!(
                    "Fallback kind must be \"stale\", \"degraded\" or \"error\", got {other:?}"
                )))
            }
        };
        Ok(Self { kind, code })
    }

    /// `"stale"`, `"degraded"` or `"error"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// The error code for `error`, else None.
    #[getter]
    fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    fn __repr__(&self) -> String {
        self.repr()
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.kind, &self.code).hash(&mut h);
        h.finish()
    }
}

/// `f(*args, **kwargs)`, where `args` None is no positional arguments:
/// without any arguments, `f()` (no argument tuple made).
pub fn call_args<'py>(
    f: &Bound<'py, PyAny>,
    args: Option<&Bound<'py, PyTuple>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    match args.filter(|a| !a.is_empty()) {
        None if kwargs.is_none() => f.call0(),
        None => f.call(PyTuple::empty(f.py()), kwargs),
        Some(a) => f.call(a, kwargs),
    }
}

/// What a refusal that serves no fallback raises (an expired deadline, C10).
pub fn deadline_expired(dep: &Dependency, tenant: Option<&str>) -> Error {
    Error::DeadlineExpired {
        dependency: dep.name().to_owned(),
        partition: dep.breaker_of(tenant),
    }
}

/// Serves the declared fallback for a rejected call, or raises (`args`
/// None: no positional arguments).
///
/// `deadline_expired` raises `DeadlineExpired` (C10: no fallback hides it).
/// For `degraded`, `fallback(*args, **kwargs)` is the degraded behaviour; an
/// `Exception` it raises becomes the `__cause__` of `DependencyUnavailable`
/// (C4), while a `BaseException` that is not an `Exception` (cancellation,
/// interrupt) propagates as is.
#[allow(clippy::too_many_arguments)]
pub fn serve<'py>(
    py: Python<'py>,
    dep: &Dependency,
    tenant: Option<&str>,
    rejection: &Rejection<'_>,
    fallback: Option<&Bound<'py, PyAny>>,
    args: Option<&Bound<'py, PyTuple>>,
    kwargs: Option<&Bound<'py, PyDict>>,
    cache_key: Option<&str>,
    kept: Kept<'_, 'py>,
) -> Result<Bound<'py, PyAny>, Raised<'py>> {
    if !rejection.reason.serves_fallback() {
        return Err(deadline_expired(dep, tenant).into());
    }
    let mut raised: Option<PyErr> = None;
    // The degraded behaviour's result stays here; the core hands back a
    // marker for it.
    let mut degraded_value: Option<Bound<'py, PyAny>> = None;
    let degraded = fallback.map(|f| {
        let raised = &mut raised;
        let value = &mut degraded_value;
        move || -> Option<Cached> {
            match call_args(f, args, kwargs) {
                Ok(v) => {
                    *value = Some(v);
                    Some(Cached::Degraded)
                }
                Err(e) => {
                    *raised = Some(e);
                    None
                }
            }
        }
    });
    let served = dep.serve_fallback_ref(tenant, rejection, cache_key, degraded);
    match served {
        Ok(Cached::Degraded) => match degraded_value {
            Some(v) => Ok(v),
            None => Err(unavailable(py, dep.unavailable_ref(tenant, rejection), kept).into()),
        },
        Ok(v) => match v.value(py) {
            Some(v) => Ok(v.into_bound(py)),
            // The bank's values were cleared: it is being collected.
            None => Err(unavailable(py, dep.unavailable_ref(tenant, rejection), kept).into()),
        },
        Err(refused) => {
            let Some(cause) = raised else {
                return Err(Raised::Exc(unavailable_value(py, refused, kept)?));
            };
            if !cause.is_instance_of::<PyException>(py) {
                return Err(cause.into());
            }
            let err = unavailable(py, refused, kept);
            err.set_cause(py, Some(cause));
            Err(err.into())
        }
    }
}
