//! The exception hierarchy of API.md and the one mapping from binding
//! errors to Python exceptions.
//!
//! `BreakerError` is created with `create_exception!`; the subclasses need
//! two bases (`ConfigError(BreakerError, ValueError)`, …), which
//! `create_exception!` cannot express, so they are built once with
//! `type(name, bases, namespace)` and kept in a `PyOnceLock`. Every raise
//! builds a fresh instance (no shared exception object, so no traceback
//! growth across raises).

use breakerbank::{AdmitError, ConfigError, DependencyUnavailable};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyList, PyString, PyTuple, PyType};
use std::time::Duration;

create_exception!(
    breakerbank,
    BreakerError,
    PyException,
    "Base class of every error raised by breakerbank."
);

/// A lazily created subclass of `BreakerError` with extra bases.
struct Subclass {
    cell: PyOnceLock<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
    /// Attributes set to `None` on the class, overwritten per instance.
    attrs: &'static [&'static str],
}

impl Subclass {
    const fn new(name: &'static str, doc: &'static str, attrs: &'static [&'static str]) -> Self {
        Self {
            cell: PyOnceLock::new(),
            name,
            doc,
            attrs,
        }
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        extra: Option<Bound<'py, PyType>>,
    ) -> PyResult<Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let mut bases = vec![py.get_type::<BreakerError>().into_any()];
            if let Some(extra) = extra {
                bases.push(extra.into_any());
            }
            let ns = PyDict::new(py);
            ns.set_item("__module__", "breakerbank")?;
            ns.set_item("__doc__", self.doc)?;
            for attr in self.attrs {
                ns.set_item(*attr, py.None())?;
            }
            let ty = py
                .get_type::<PyType>()
                .call1((self.name, PyTuple::new(py, bases)?, ns))?
                .cast_into::<PyType>()?;
            Ok(ty.unbind())
        })?;
        Ok(ty.bind(py).clone())
    }
}

static CONFIG_ERROR: Subclass = Subclass::new(
    "ConfigError",
    "The profile is invalid. `.problems` lists every problem found, each naming the \
     dependency and the field.",
    &["problems"],
);
static UNKNOWN_DEPENDENCY: Subclass = Subclass::new(
    "UnknownDependency",
    "No dependency of that name in the bank's profile (a KeyError).",
    &["dependency"],
);
static TENANT_REQUIRED: Subclass = Subclass::new(
    "TenantRequired",
    "A tenant-scoped dependency was used without a tenant (None or \"\").",
    &["dependency"],
);
static INVALID_TENANT: Subclass = Subclass::new(
    "InvalidTenant",
    "A tenant id longer than 256 bytes of UTF-8 on a tenant-scoped dependency (C9): \
     nothing was done or counted for it.",
    &["dependency"],
);
static DEPENDENCY_UNAVAILABLE: Subclass = Subclass::new(
    "DependencyUnavailable",
    "The call was not admitted and the declared fallback could not serve it (C4). \
     Carries `.dependency`, `.partition`, `.code` (the declared error code or None) and \
     `.retry_after` (seconds until the breaker next admits a probe, or None).",
    &["dependency", "partition", "code", "retry_after"],
);
static DEADLINE_EXPIRED: Subclass = Subclass::new(
    "DeadlineExpired",
    "The call's deadline had already expired at admission (C10): nothing was called and \
     nothing was counted against the dependency.",
    &["dependency", "partition"],
);
static OUTCOME_ALREADY_RECORDED: Subclass = Subclass::new(
    "OutcomeAlreadyRecorded",
    "A decision's outcome was already recorded; the second one changed nothing.",
    &["dependency"],
);

/// `breakerbank.ConfigError`.
pub fn config_error(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    CONFIG_ERROR.get(py, Some(py.get_type::<PyValueError>()))
}
/// `breakerbank.UnknownDependency`.
pub fn unknown_dependency(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    UNKNOWN_DEPENDENCY.get(py, Some(py.get_type::<PyKeyError>()))
}
/// `breakerbank.TenantRequired`.
pub fn tenant_required(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    TENANT_REQUIRED.get(py, Some(py.get_type::<PyValueError>()))
}
/// `breakerbank.InvalidTenant`.
pub fn invalid_tenant(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    INVALID_TENANT.get(py, Some(py.get_type::<PyValueError>()))
}
/// `breakerbank.DependencyUnavailable`.
pub fn dependency_unavailable(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    DEPENDENCY_UNAVAILABLE.get(py, None)
}
/// `breakerbank.DeadlineExpired`.
pub fn deadline_expired(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    DEADLINE_EXPIRED.get(py, None)
}
/// `breakerbank.OutcomeAlreadyRecorded`.
pub fn outcome_already_recorded(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    OUTCOME_ALREADY_RECORDED.get(py, Some(py.get_type::<PyRuntimeError>()))
}

/// Everything the bindings can fail with, mapped to Python in one place
/// (`From<Error> for PyErr`).
#[derive(Debug)]
pub enum Error {
    /// The profile did not load.
    Config(ConfigError),
    /// `bank[name]` for a name the profile does not declare.
    UnknownDependency { name: String, known: Vec<String> },
    /// A handle whose dependency a reload removed (or restarted with
    /// another isolation): C20.
    Removed { dependency: String },
    /// Tenant-scoped dependency, no tenant.
    TenantRequired { dependency: String },
    /// Tenant-scoped dependency, a tenant id over the core's length limit.
    InvalidTenant {
        dependency: String,
        error: AdmitError,
    },
    /// Not admitted, and the fallback could not serve.
    Unavailable(DependencyUnavailable),
    /// Admission refused because the deadline had expired.
    DeadlineExpired {
        dependency: String,
        partition: String,
    },
    /// A second outcome for one decision.
    AlreadyRecorded {
        dependency: String,
        outcome: &'static str,
    },
    /// An outcome for a decision that was not admitted.
    NotAdmitted {
        dependency: String,
        reason: &'static str,
    },
    /// A bad argument value (→ `ValueError`).
    Value(String),
    /// A bad argument type (→ `TypeError`).
    Type(String),
}

impl Error {
    /// Maps a core admission error, naming the dependency.
    pub fn admit(dependency: &str, e: AdmitError) -> Self {
        match e {
            AdmitError::TenantRequired => Error::TenantRequired {
                dependency: dependency.to_owned(),
            },
            AdmitError::InvalidTenant { .. } => Error::InvalidTenant {
                dependency: dependency.to_owned(),
                error: e,
            },
            AdmitError::UnknownDependency => Error::Removed {
                dependency: dependency.to_owned(),
            },
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl From<DependencyUnavailable> for Error {
    fn from(e: DependencyUnavailable) -> Self {
        Error::Unavailable(e)
    }
}

/// Seconds as a Python float, for `retry_after` and friends.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn instantiate<'py>(
    ty: Bound<'py, PyType>,
    msg: String,
    attrs: &[(&Bound<'py, PyString>, Bound<'py, PyAny>)],
) -> PyResult<PyErr> {
    let value = ty.call1((msg,))?;
    for (name, v) in attrs {
        value.setattr(*name, v)?;
    }
    Ok(PyErr::from_value(value))
}

fn to_py(py: Python<'_>, e: Error) -> PyResult<PyErr> {
    let s = |v: &str| PyString::new(py, v).into_any();
    let opt_s = |v: Option<&str>| v.map_or_else(|| py.None().into_bound(py), s);
    Ok(match e {
        Error::Config(e) => {
            let problems = PyList::new(py, e.problems())?.into_any();
            instantiate(
                config_error(py)?,
                e.to_string(),
                &[(intern!(py, "problems"), problems)],
            )?
        }
        Error::UnknownDependency { name, known } => {
            let msg = format!(
                "unknown dependency `{name}`: the profile declares {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            );
            instantiate(
                unknown_dependency(py)?,
                msg,
                &[(intern!(py, "dependency"), s(&name))],
            )?
        }
        Error::TenantRequired { dependency } => {
            let msg =
                format!("dependency `{dependency}` is tenant-scoped: pass tenant=<non-empty str>");
            instantiate(
                tenant_required(py)?,
                msg,
                &[(intern!(py, "dependency"), s(&dependency))],
            )?
        }
        Error::Removed { dependency } => instantiate(
            unknown_dependency(py)?,
            format!(
                "dependency `{dependency}` was removed from the bank's profile by a reload, or started afresh by one (its isolation, trip policy kind, window or table size changed): get it again with bank[{dependency:?}]"
            ),
            &[(intern!(py, "dependency"), s(&dependency))],
        )?,
        Error::InvalidTenant { dependency, error } => instantiate(
            invalid_tenant(py)?,
            format!("dependency `{dependency}`: {error}"),
            &[(intern!(py, "dependency"), s(&dependency))],
        )?,
        Error::Unavailable(u) => {
            let retry_after = match u.retry_after {
                Some(d) => PyFloat::new(py, secs(d)).into_any(),
                None => py.None().into_bound(py),
            };
            let attrs = [
                (intern!(py, "dependency"), s(&u.dependency)),
                (intern!(py, "partition"), s(&u.partition)),
                (intern!(py, "code"), opt_s(u.code.as_deref())),
                (intern!(py, "retry_after"), retry_after),
            ];
            instantiate(dependency_unavailable(py)?, u.to_string(), &attrs)?
        }
        Error::DeadlineExpired {
            dependency,
            partition,
        } => {
            let msg = format!(
                "deadline expired before admission to `{dependency}` (partition `{partition}`): \
                 not called, not counted against the dependency"
            );
            let attrs = [
                (intern!(py, "dependency"), s(&dependency)),
                (intern!(py, "partition"), s(&partition)),
            ];
            instantiate(deadline_expired(py)?, msg, &attrs)?
        }
        Error::AlreadyRecorded {
            dependency,
            outcome,
        } => {
            let msg = format!(
                "this decision for `{dependency}` already recorded `{outcome}`; \
                 a second outcome changes nothing"
            );
            instantiate(
                outcome_already_recorded(py)?,
                msg,
                &[(intern!(py, "dependency"), s(&dependency))],
            )?
        }
        Error::NotAdmitted { dependency, reason } => PyErr::new::<BreakerError, _>(format!(
            "this decision for `{dependency}` was not admitted ({reason}): \
             there is no permit to record an outcome for"
        )),
        Error::Value(msg) => PyValueError::new_err(msg),
        Error::Type(msg) => PyTypeError::new_err(msg),
    })
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        // Building the exception can itself fail (e.g. MemoryError): raise that.
        Python::attach(|py| to_py(py, e).unwrap_or_else(|err| err))
    }
}
