//! Serving a call that was not admitted: every choice (stale value, degraded
//! behaviour, error) and every count is the core's `Refused::serve_as`;
//! this module only hands it Python values.

use crate::errors::{unavailable, unavailable_value, Error, Kept, Raised};
use crate::held::Cached;
use breakerbank::{Dependency, FallbackKind, NotServed, Refused};
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

/// C17: a `fallback=` that the declared fallback never uses (only
/// `degraded` runs one) is the caller's mistake, refused before
/// admission rather than ignored.
pub fn check_fallback(dep: &Dependency, fallback: Option<&Bound<'_, PyAny>>) -> Result<(), Error> {
    match fallback {
        Some(_) if dep.fallback().kind() != FallbackKind::Degraded => Err(unused_fallback(dep)),
        _ => Ok(()),
    }
}

#[cold]
#[inline(never)]
fn unused_fallback(dep: &Dependency) -> Error {
    Error::Type(format!(
        "fallback= is for a `degraded` fallback, and `{}` declares `{}`: nothing would run it \
         (an `error` fallback raises DependencyUnavailable, a `stale` one serves the value \
         kept under cache_key); leave fallback= out",
        dep.name(),
        dep.fallback().kind().as_str()
    ))
}

/// Serves the declared fallback of a refused call through the core's
/// `Refused::serve_as`, or raises (`args` None: no positional arguments).
///
/// `deadline_expired` raises `DeadlineExpired` (C10: no fallback hides it).
/// For `degraded`, `fallback(*args, **kwargs)` is the degraded behaviour; an
/// `Exception` it raises becomes the `__cause__` of `DependencyUnavailable`
/// (C4), while a `BaseException` that is not an `Exception` (cancellation,
/// interrupt) propagates as is.
pub fn serve<'py>(
    py: Python<'py>,
    refused: Refused<'_>,
    fallback: Option<&Bound<'py, PyAny>>,
    args: Option<&Bound<'py, PyTuple>>,
    kwargs: Option<&Bound<'py, PyDict>>,
    cache_key: Option<&str>,
    kept: Kept<'_, 'py>,
) -> Result<Bound<'py, PyAny>, Raised<'py>> {
    let (dep, tenant) = (refused.dependency(), refused.tenant());
    let mut raised: Option<PyErr> = None;
    let degraded = fallback.map(|f| {
        let raised = &mut raised;
        move || match call_args(f, args, kwargs) {
            Ok(v) => Some(v),
            Err(e) => {
                *raised = Some(e);
                None
            }
        }
    });
    // The stale cache holds tickets of the bank's values: `None` once the
    // bank's values were cleared (it is being collected), served as
    // nothing cached.
    let from_cache = |c: Cached| c.value(py).map(|v| v.into_bound(py));
    match refused.serve_as(cache_key, degraded, from_cache) {
        Ok(v) => Ok(v),
        Err(NotServed::DeadlineExpired) => Err(deadline_expired(dep, tenant).into()),
        Err(NotServed::Unavailable(refused)) => {
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
