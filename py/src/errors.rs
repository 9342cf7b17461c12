//! The exception hierarchy (docs/guide/python.md) and the one mapping from binding
//! errors to Python exceptions.
//!
//! `BreakerError` is created with `create_exception!`; the subclasses need
//! two bases (`ConfigError(BreakerError, ValueError)`, …), which
//! `create_exception!` cannot express, so they are built once with
//! `type(name, bases, namespace)` and kept in a `PyOnceLock`. Every raise
//! builds a fresh instance (no shared exception object, so no traceback
//! growth across raises).

use crate::held::StrCache;
use breakerbank::{AdmitError, ConfigError, PartitionName, UnavailableRef, Unserved};
use pyo3::create_exception;
use pyo3::exceptions::{
    PyBaseException, PyException, PyKeyError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::{Interned, PyOnceLock};
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
    /// Whether instances carry an [`Unavailable`] read through [`Field`]s
    /// (`DependencyUnavailable`) rather than their attributes set.
    lazy: bool,
}

impl Subclass {
    const fn new(name: &'static str, doc: &'static str, attrs: &'static [&'static str]) -> Self {
        Self {
            cell: PyOnceLock::new(),
            name,
            doc,
            attrs,
            lazy: false,
        }
    }

    const fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        extra: Option<Bound<'py, PyType>>,
    ) -> PyResult<Bound<'py, PyType>> {
        self.get_ref(py, extra).cloned()
    }

    /// As [`Subclass::get`], borrowed from where it is kept.
    fn get_ref<'a, 'py>(
        &'a self,
        py: Python<'py>,
        extra: Option<Bound<'py, PyType>>,
    ) -> PyResult<&'a Bound<'py, PyType>> {
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
            if self.lazy {
                for (name, kind) in Field::ALL {
                    ns.set_item(name, Field(kind))?;
                }
                add_text_methods(py, &ns)?;
            }
            let ty = py
                .get_type::<PyType>()
                .call1((self.name, PyTuple::new(py, bases)?, ns))?
                .cast_into::<PyType>()?;
            Ok(ty.unbind())
        })?;
        Ok(ty.bind(py))
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
    "A tenant id that names no partition on a tenant-scoped dependency (C9): longer \
     than 256 bytes of UTF-8, holding a control character (NUL included), not valid \
     UTF-8 (a lone surrogate), or a reserved partition name (`global`, `<overflow>`, \
     `*`). The message says which; nothing was done or counted for it.",
    &["dependency"],
);
static DEPENDENCY_UNAVAILABLE: Subclass = Subclass::new(
    "DependencyUnavailable",
    "The call was not admitted and the declared fallback could not serve it (C4). \
     Carries `.dependency`, `.partition`, `.code` (the declared error code or None) and \
     `.retry_after` (seconds until the breaker next admits a probe, or None).",
    &["dependency", "partition", "code", "retry_after"],
)
.lazy();
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
    /// Tenant-scoped dependency, a tenant id the core refuses (C9).
    InvalidTenant {
        dependency: String,
        error: AdmitError,
    },
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

/// The Python strings a refusal's `DependencyUnavailable` is made of, where
/// the caller keeps them: none is made for the refusal then.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kept<'a, 'py> {
    /// The dependency's name.
    pub name: Option<&'a Py<PyString>>,
    /// The dependency's declared error code.
    pub code: Option<&'a StrCache>,
    /// The caller's tenant id, as it was given.
    pub tenant: Option<&'a Bound<'py, PyString>>,
}

static GLOBAL: Interned = Interned::new(PartitionName::Global.as_str());
static OVERFLOW: Interned = Interned::new(PartitionName::Overflow.as_str());

/// `DependencyUnavailable` for a refusal as the core reported it (C4): its
/// arguments carry the attributes as Python values (see [`Unavailable`]),
/// and the message is made when read; the strings come from `kept` where
/// it has them.
pub fn unavailable(py: Python<'_>, u: UnavailableRef<'_>, kept: Kept<'_, '_>) -> PyErr {
    // Building the exception can itself fail (e.g. MemoryError): raise that.
    unavailable_value(py, u, kept).map_or_else(|err| err, PyErr::from_value)
}

/// An error on its way to the interpreter: a `PyErr`, or an exception
/// instance not yet wrapped in one, which `Dependency.call` raises as it
/// is (a refusal then makes no `PyErr`).
#[derive(Debug)]
pub enum Raised<'py> {
    /// Any error.
    Err(PyErr),
    /// A fresh exception instance, with no traceback, cause or context.
    Exc(Bound<'py, PyAny>),
}

impl From<PyErr> for Raised<'_> {
    fn from(e: PyErr) -> Self {
        Raised::Err(e)
    }
}

impl From<Error> for Raised<'_> {
    fn from(e: Error) -> Self {
        Raised::Err(e.into())
    }
}

impl From<Raised<'_>> for PyErr {
    fn from(r: Raised<'_>) -> PyErr {
        match r {
            Raised::Err(e) => e,
            Raised::Exc(v) => PyErr::from_value(v),
        }
    }
}

impl Raised<'_> {
    /// Sets the interpreter's error indicator to this error.
    pub fn restore(self, py: Python<'_>) {
        match self {
            Raised::Err(e) => e.restore(py),
            // SAFETY: `PyErr_Restore` takes the two references it is
            // given (the type's, made here, and the instance's); a fresh
            // exception has no traceback to pass.
            Raised::Exc(v) => unsafe {
                ffi::PyErr_Restore(v.get_type().into_ptr(), v.into_ptr(), std::ptr::null_mut())
            },
        }
    }
}

/// The `DependencyUnavailable` instance of [`unavailable`].
pub fn unavailable_value<'py>(
    py: Python<'py>,
    u: UnavailableRef<'_>,
    kept: Kept<'_, 'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let dependency = match kept.name {
        Some(n) => n.bind(py).clone(),
        None => PyString::new(py, u.dependency),
    };
    let partition = match u.partition {
        PartitionName::Global => GLOBAL.get(py).clone(),
        PartitionName::Overflow => OVERFLOW.get(py).clone(),
        PartitionName::Tenant(t) => {
            match kept.tenant.filter(|k| k.to_str().is_ok_and(|v| v == t)) {
                Some(k) => k.clone(),
                None => PyString::new(py, t),
            }
        }
    };
    let code = u.code.map(|c| match kept.code {
        Some(k) => k.get(py, c),
        None => PyString::new(py, c),
    });
    let none = py.None().into_bound(py);
    let code = code.map_or(none.clone(), Bound::into_any);
    let retry_after = match u.retry_after {
        Some(d) => PyFloat::new(py, secs(d)).into_any(),
        None => none,
    };
    let why = why_value(py, u.why);
    let marker = MARKER.get_or_init(py, || py.get_type::<Unavailable>().unbind());
    let ty = DEPENDENCY_UNAVAILABLE.get_ref(py, None)?;
    // `PyTuple_Pack` and `PyObject_Call` rather than pyo3's tuple and
    // call: one tuple filled in one call, which becomes the exception's
    // arguments as it is.
    // SAFETY: five live objects, borrowed for the call; the tuple takes
    // its own references to them.
    let args = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyTuple_Pack(
                6,
                marker.as_ptr(),
                dependency.as_ptr(),
                partition.as_ptr(),
                code.as_ptr(),
                retry_after.as_ptr(),
                why.as_ptr(),
            ),
        )?
    };
    new_instance(ty, &args)
}

/// Why no fallback served (C4), as the exception carries it: a small
/// int for each reason (CPython keeps those made), the excess age in
/// seconds, a float, for a value too old.
fn why_value(py: Python<'_>, why: Unserved) -> Bound<'_, PyAny> {
    let n: u8 = match why {
        Unserved::TooOld { by } => return PyFloat::new(py, secs(by)).into_any(),
        Unserved::NoValueCached => 1,
        Unserved::NoDegraded => 2,
        Unserved::DegradedFailed => 3,
        Unserved::InvalidTenant => 4,
        // The error fallback, and any reason added later: its code says.
        _ => 0,
    };
    n.into_pyobject(py)
        .map_or_else(|e| match e {}, |v| v.into_any().to_owned())
}

/// [`why_value`] read back.
fn why_of(v: &Bound<'_, PyAny>) -> PyResult<Unserved> {
    if let Ok(by) = v.cast::<PyFloat>() {
        let by = Duration::try_from_secs_f64(by.value())
            .map_err(|e| PyValueError::new_err(format!("why: {e}")))?;
        return Ok(Unserved::TooOld { by });
    }
    Ok(match v.extract::<u8>()? {
        1 => Unserved::NoValueCached,
        2 => Unserved::NoDegraded,
        3 => Unserved::DegradedFailed,
        4 => Unserved::InvalidTenant,
        _ => Unserved::ErrorFallback,
    })
}

/// `BaseException`'s `tp_new` and `tp_init` slots (a static type's slots
/// never change).
fn base_slots() -> (usize, usize) {
    static SLOTS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    // SAFETY: `PyExc_BaseException` is a live static type object; reading
    // its slots changes nothing.
    *SLOTS.get_or_init(|| unsafe {
        let ty = ffi::PyExc_BaseException.cast();
        (
            ffi::PyType_GetSlot(ty, ffi::Py_tp_new) as usize,
            ffi::PyType_GetSlot(ty, ffi::Py_tp_init) as usize,
        )
    })
}

/// `ty(*args)` for `args` a tuple, as `type.__call__` makes it (the
/// type's `tp_new`, then its `tp_init` on an instance of the type),
/// without the generic call's dispatch to get there, and without
/// `BaseException`'s own `tp_init` after its own `tp_new`: it would store
/// the same arguments again.
fn new_instance<'py>(
    ty: &Bound<'py, PyType>,
    args: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = ty.py();
    let null = std::ptr::null_mut();
    // SAFETY: `ty` is a live type object; a slot read from it is null or
    // a function of the slot's signature, called with the arguments
    // `type.__call__` gives it (the type, or the new instance, then the
    // argument tuple and no keywords), all alive for the call.
    unsafe {
        let new = ffi::PyType_GetSlot(ty.as_type_ptr(), ffi::Py_tp_new);
        if new.is_null() {
            return Bound::from_owned_ptr_or_err(
                py,
                ffi::PyObject_Call(ty.as_ptr(), args.as_ptr(), null),
            );
        }
        let base = base_slots();
        let base_new = new as usize == base.0;
        let new: ffi::newfunc = std::mem::transmute(new);
        let obj = Bound::from_owned_ptr_or_err(py, new(ty.as_type_ptr(), args.as_ptr(), null))?;
        let of_ty = ffi::Py_TYPE(obj.as_ptr()) == ty.as_type_ptr()
            || ffi::PyType_IsSubtype(ffi::Py_TYPE(obj.as_ptr()), ty.as_type_ptr()) != 0;
        if of_ty {
            let init = ffi::PyType_GetSlot(ty.as_type_ptr(), ffi::Py_tp_init);
            // `BaseException.__init__` only stores the arguments, which its
            // `__new__` stored already.
            let stored = base_new && init as usize == base.1;
            if !init.is_null() && !stored {
                let init: ffi::initproc = std::mem::transmute(init);
                if init(obj.as_ptr(), args.as_ptr(), null) < 0 {
                    return Err(PyErr::fetch(py));
                }
            }
        }
        Ok(obj)
    }
}

/// [`Unavailable`]'s type, kept for the refusals.
static MARKER: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Marks the arguments of a `DependencyUnavailable` that breakerbank
/// raised: `(_Unavailable, dependency, partition, code, retry_after,
/// why)`, the
/// attributes as Python values, from which the message (`str`, `repr`,
/// `args`) is made when read, so a rejection formats nothing and makes no
/// object besides the exception and its arguments. A type, so that it
/// pickles (and copies) as itself with the exception.
#[pyclass(frozen, module = "breakerbank._native", name = "_Unavailable")]
#[derive(Debug)]
pub struct Unavailable;

/// The attributes a raised `DependencyUnavailable` carries (see
/// [`Unavailable`]).
struct Carried<'py> {
    dependency: Bound<'py, PyAny>,
    partition: Bound<'py, PyAny>,
    code: Bound<'py, PyAny>,
    retry_after: Bound<'py, PyAny>,
    why: Bound<'py, PyAny>,
}

impl<'py> Carried<'py> {
    /// What `raw`, an exception's stored arguments, carries, if they are
    /// breakerbank's.
    fn of(raw: &Bound<'py, PyAny>) -> Option<Self> {
        let t = raw.cast::<PyTuple>().ok()?;
        if t.len() != 6 || !t.get_item(0).ok()?.is(raw.py().get_type::<Unavailable>()) {
            return None;
        }
        Some(Self {
            dependency: t.get_item(1).ok()?,
            partition: t.get_item(2).ok()?,
            code: t.get_item(3).ok()?,
            retry_after: t.get_item(4).ok()?,
            why: t.get_item(5).ok()?,
        })
    }

    /// The message, as the core words it.
    fn message(&self) -> PyResult<String> {
        let dependency = self.dependency.cast::<PyString>()?;
        let partition = self.partition.cast::<PyString>()?;
        let code: Option<Bound<'py, PyString>> = self.code.extract()?;
        let code = code.as_ref().map(|c| c.to_str()).transpose()?;
        let retry_after = self
            .retry_after
            .extract::<Option<f64>>()?
            .map(Duration::try_from_secs_f64)
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("retry_after: {e}")))?;
        let u = UnavailableRef {
            dependency: dependency.to_str()?,
            partition: PartitionName::of(partition.to_str()?),
            code,
            retry_after,
            why: why_of(&self.why)?,
        };
        Ok(u.to_string())
    }
}

/// `DependencyUnavailable.__str__` / `__repr__`: the message for one
/// breakerbank raised, else `BaseException`'s.
#[pyfunction]
fn unavailable_text<'py>(exc: &Bound<'py, PyAny>, repr: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = exc.py();
    let raw = base_args(py)?.call_method1(intern!(py, "__get__"), (exc,))?;
    let Some(carried) = Carried::of(&raw) else {
        let method = if repr {
            intern!(py, "__repr__")
        } else {
            intern!(py, "__str__")
        };
        return py
            .get_type::<PyBaseException>()
            .getattr(method)?
            .call1((exc,));
    };
    let message = PyString::new(py, &carried.message()?);
    if !repr {
        return Ok(message.into_any());
    }
    let name = exc.get_type().name()?;
    Ok(PyString::new(py, &format!("{name}({})", message.repr()?)).into_any())
}

/// The methods `DependencyUnavailable` defines in Python, so that they
/// bind to the instance; they call [`unavailable_text`].
const TEXT_METHODS: &std::ffi::CStr = c"def __str__(self):
    return _text(self, False)


def __repr__(self):
    return _text(self, True)
";

/// Puts `__str__` and `__repr__` (see [`TEXT_METHODS`]) in `ns`.
fn add_text_methods(py: Python<'_>, ns: &Bound<'_, PyDict>) -> PyResult<()> {
    let globals = PyDict::new(py);
    globals.set_item("__name__", "breakerbank")?;
    globals.set_item("_text", wrap_pyfunction!(unavailable_text, py)?)?;
    py.run(TEXT_METHODS, Some(&globals), None)?;
    for name in ["__str__", "__repr__"] {
        let f = globals.as_any().get_item(name)?;
        f.setattr("__qualname__", format!("DependencyUnavailable.{name}"))?;
        ns.set_item(name, f)?;
    }
    Ok(())
}

/// Which attribute a [`Field`] reads.
#[derive(Clone, Copy, Debug)]
enum FieldKind {
    /// `args`: `(message,)`, as any exception built from its message.
    Args,
    Dependency,
    Partition,
    Code,
    RetryAfter,
}

/// A descriptor on `DependencyUnavailable` reading one attribute from the
/// arguments an instance carries (see [`Unavailable`]). A value assigned
/// to the attribute is kept in the instance's `__dict__` and read back
/// from there; an instance built from a plain message reads `None`, as the
/// class default.
#[pyclass(frozen, module = "breakerbank._native", name = "_UnavailableField")]
#[derive(Debug)]
struct Field(FieldKind);

static BASE_ARGS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `BaseException.args`, the descriptor of the stored arguments.
fn base_args(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    BASE_ARGS
        .get_or_try_init(py, || {
            py.get_type::<PyBaseException>()
                .getattr(intern!(py, "args"))
                .map(Bound::unbind)
        })
        .map(|d| d.bind(py))
}

impl Field {
    const ALL: [(&'static str, FieldKind); 5] = [
        ("args", FieldKind::Args),
        ("dependency", FieldKind::Dependency),
        ("partition", FieldKind::Partition),
        ("code", FieldKind::Code),
        ("retry_after", FieldKind::RetryAfter),
    ];

    fn name(&self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| std::mem::discriminant(k) == std::mem::discriminant(&self.0))
            .map_or("?", |(n, _)| n)
    }
}

#[pymethods]
impl Field {
    fn __get__<'py>(
        &self,
        py: Python<'py>,
        obj: Option<Bound<'py, PyAny>>,
        owner: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = owner;
        let base = base_args(py)?;
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            // On the class: what it showed before (`None`, or BaseException's).
            return Ok(match self.0 {
                FieldKind::Args => base.clone(),
                _ => py.None().into_bound(py),
            });
        };
        let raw = base.call_method1(intern!(py, "__get__"), (&obj,))?;
        let carried = Carried::of(&raw);
        if let FieldKind::Args = self.0 {
            return match carried {
                Some(c) => Ok(PyTuple::new(py, [c.message()?])?.into_any()),
                None => Ok(raw),
            };
        }
        if let Ok(dict) = obj.getattr(intern!(py, "__dict__")) {
            if let Some(v) = dict.cast::<PyDict>()?.get_item(self.name())? {
                return Ok(v);
            }
        }
        let Some(c) = carried else {
            return Ok(py.None().into_bound(py));
        };
        Ok(match self.0 {
            FieldKind::Dependency => c.dependency,
            FieldKind::Partition => c.partition,
            FieldKind::Code => c.code,
            FieldKind::RetryAfter => c.retry_after,
            FieldKind::Args => unreachable!("handled above"),
        })
    }

    fn __set__(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = obj.py();
        match self.0 {
            FieldKind::Args => {
                base_args(py)?.call_method1(intern!(py, "__set__"), (obj, value))?;
            }
            _ => obj
                .getattr(intern!(py, "__dict__"))?
                .set_item(self.name(), value)?,
        }
        Ok(())
    }
}
