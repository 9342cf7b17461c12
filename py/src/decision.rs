//! `breakerbank.Decision`: the result of `dep.admit(...)`.
//!
//! A decision is the core's call (`Dependency::begin`) kept in a Python
//! object: an admitted one holds the running call's permit as a
//! `HeldPermit`, which records its one outcome and, dropped without one,
//! records `cancelled` (C13), so no probe slot can leak; its ends go
//! through `Running::held`. A refused one keeps the refusal's parts and
//! serves through `Refused::of`.

use crate::aio::PyReady;
use crate::errors::{secs, unavailable, Error, Kept};
use crate::fallback::{deadline_expired, serve, PyFallback};
use crate::held::{BankHandle, DecisionBank};
use crate::outcome::{self, Rule};
use breakerbank::{
    Begun, Dependency, FallbackKind, HeldPermit, Instant, Outcome, Refused, RejectReason,
    Rejection, Running,
};
use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use std::sync::Arc;
use std::time::Duration;

/// The answer to one admission: admitted (with a permit to record exactly
/// one outcome on) or not (with the reason and the declared fallback).
///
/// Usable as a context manager: entering raises `DependencyUnavailable`
/// (or `DeadlineExpired`) if not admitted; leaving records success, or the
/// outcome of the exception: the admission's `classify`, the dependency's
/// rule, then breakerbank's exception rule (C17).
#[pyclass(frozen, weakref, module = "breakerbank", name = "Decision")]
#[derive(Debug)]
pub struct PyDecision {
    /// The permit of an admitted call (which holds the dependency), or
    /// the dependency of a refused one and why it was refused.
    call: Call,
    /// The bank `dep` belongs to, for the collector (see `held`).
    bank: DecisionBank,
    /// The caller's tenant id as it was given: holding the str costs a
    /// reference count where a copy of its text would cost an allocation.
    /// Reported to the collector: a str subclass can refer back.
    tenant: Option<Py<PyString>>,
    /// What few admissions have, boxed: the common decision (no deadline,
    /// classifier or rule) stays small to build and to move into its object.
    rare: Option<Box<Rare>>,
}

/// The parts of a decision most admissions leave unset.
#[derive(Debug)]
struct Rare {
    deadline: Option<Instant>,
    /// The admission's own `classify=` (C17).
    classify: Option<Py<PyAny>>,
    /// The dependency's rule as it was at admission, if it had one (not
    /// reported to the collector: the bank's `Rules` reports it).
    rule: Option<Arc<Rule>>,
}

pub fn reason_str(r: RejectReason) -> &'static str {
    r.as_str()
}

/// What a decision holds: one handle of its dependency either way (an
/// admitted call's inside its permit), so a decision costs one reference
/// count.
#[derive(Debug)]
enum Call {
    Admitted(HeldPermit),
    Refused {
        dep: Dependency,
        reason: RejectReason,
        retry_after: Option<Duration>,
    },
}

impl PyDecision {
    fn dep(&self) -> &Dependency {
        match &self.call {
            Call::Admitted(p) => p.dependency(),
            Call::Refused { dep, .. } => dep,
        }
    }

    fn permit(&self) -> Option<&HeldPermit> {
        match &self.call {
            Call::Admitted(p) => Some(p),
            Call::Refused { .. } => None,
        }
    }

    /// The tenant id's text (read once already, by the admission).
    fn tenant<'a>(&'a self, py: Python<'a>) -> PyResult<Option<&'a str>> {
        self.tenant
            .as_ref()
            .map(|t| t.bind(py).to_str())
            .transpose()
    }

    fn deadline(&self) -> Option<Instant> {
        self.rare.as_ref().and_then(|r| r.deadline)
    }

    /// Runs one admission through the core; `tenant` is the caller's str
    /// and its text, `classify` the call's own classifier, already checked
    /// to be callable.
    #[inline]
    pub fn admit<'py>(
        py: Python<'py>,
        dep: &Dependency,
        bank: &BankHandle,
        tenant: Option<(&Bound<'py, PyString>, &str)>,
        deadline: Option<Instant>,
        classify: Option<Bound<'py, PyAny>>,
    ) -> Result<Self, Error> {
        let (tenant, text) = tenant.unzip();
        let begun = dep
            .begin(text, deadline)
            .map_err(|e| Error::admit(dep.name(), e))?;
        let call = match begun {
            Begun::Running(call) => Call::Admitted(call.into_held()),
            Begun::Refused(r) => Call::Refused {
                dep: dep.clone(),
                reason: r.reason(),
                retry_after: r.rejection().retry_after,
            },
        };
        let rule = bank.rules().get(dep.id());
        let rare = (deadline.is_some() || classify.is_some() || rule.is_some()).then(|| {
            Box::new(Rare {
                deadline,
                classify: classify.map(Bound::unbind),
                rule,
            })
        });
        Ok(Self {
            bank: bank.for_decision(py, dep.fallback().kind() == FallbackKind::Stale),
            tenant: tenant.map(|t| t.clone().unbind()),
            rare,
            call,
        })
    }

    /// Reports the Python objects the decision holds to the collector.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(t) = &self.tenant {
            visit.call(t)?;
        }
        if let Some(f) = self.rare.as_ref().and_then(|r| r.classify.as_ref()) {
            visit.call(f)?;
        }
        self.bank.traverse(visit)
    }

    /// Records `outcome` once and returns the outcome as the core counted it
    /// (a success at least `slow_call` long is a failure); a second time
    /// raises and changes nothing.
    fn record(&self, outcome: Outcome) -> Result<Outcome, Error> {
        let Call::Admitted(permit) = &self.call else {
            return Err(self.not_admitted());
        };
        permit
            .record(outcome)
            .map_err(|prev| Error::AlreadyRecorded {
                dependency: self.dep().name().to_owned(),
                outcome: prev.as_str(),
            })
    }

    /// The admitted call, to end through the core (`None` if refused).
    fn running<'a>(&'a self, py: Python<'a>) -> PyResult<Option<Running<'a, &'a HeldPermit>>> {
        let Some(permit) = self.permit() else {
            return Ok(None);
        };
        Ok(Some(Running::held(permit, self.tenant(py)?)))
    }

    /// The call never ran (the caller's mistake, C17): the permit goes
    /// back uncounted, its probe slot returned.
    pub(crate) fn not_run(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(call) = self.running(py)? {
            call.not_run();
        }
        Ok(())
    }

    /// Ends an admitted call that returned `value` (C17: `classify_ok`,
    /// then the dependency's `result` rule, else a success; `slow_call`
    /// in the core) and keeps `value` for a `stale` fallback under
    /// `cache_key` if it counted as a success. Returns the outcome as
    /// counted, or the classifier's error.
    pub(crate) fn returned(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        cache_key: Option<&str>,
        classify_ok: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Outcome> {
        let Some(call) = self.running(py)? else {
            return Err(self.not_admitted().into());
        };
        // The dependency's rule as it was at admission, if it speaks of
        // returned values.
        let rule = self
            .rare
            .as_ref()
            .and_then(|r| r.rule.as_deref())
            .filter(|r| r.has_result());
        let (outcome, failed) = match (classify_ok, rule) {
            (None, None) => (Outcome::Success, None),
            _ => outcome::of_value(value, classify_ok, rule),
        };
        let ended = call.end(outcome);
        let counted = ended.counted();
        if let Some(err) = failed {
            return Err(err);
        }
        // Only a stale dependency's decision has a store: no other keeps.
        if let Some(values) = self.bank.values() {
            ended.keep(cache_key, || values.put(value.clone().unbind()));
        }
        Ok(counted)
    }

    #[cold]
    fn not_admitted(&self) -> Error {
        Error::NotAdmitted {
            dependency: self.dep().name().to_owned(),
            reason: self.reason().unwrap_or("not admitted"),
        }
    }

    /// Records the outcome of a call that returned (`None`) or raised `exc`
    /// (C17's rule, see `outcome::classify`). A classifier that failed
    /// still leaves the default outcome recorded; its error is returned.
    pub(crate) fn finish_with(
        &self,
        py: Python<'_>,
        exc: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Outcome> {
        let (outcome, raised) = match exc {
            None => (Outcome::Success, None),
            // Anything else is the caller's mistake, not a dependency
            // failure: it records nothing and the permit stays usable.
            Some(e) if !e.is_instance_of::<PyBaseException>() => {
                return Err(Error::Type(format!(
                    "an outcome for `{}` needs an exception instance or None, got {}",
                    self.dep().name(),
                    e.get_type()
                        .name()
                        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
                ))
                .into());
            }
            Some(e) => {
                let rare = self.rare.as_deref();
                outcome::classify(
                    py,
                    self.dep(),
                    e,
                    self.deadline(),
                    rare.and_then(|r| r.classify.as_ref()).map(|f| f.bind(py)),
                    rare.and_then(|r| r.rule.as_deref()),
                )
            }
        };
        let counted = self.record(outcome)?;
        match raised {
            Some(err) => Err(err),
            None => Ok(counted),
        }
    }

    /// Leaves the `with` block: records success (`exc` None) or the
    /// outcome of `exc`, unless an outcome was recorded inside the block;
    /// never suppresses the exception.
    fn exit(&self, py: Python<'_>, exc: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let Some(permit) = self.permit() else {
            return Ok(false);
        };
        // An outcome recorded by hand inside the block stands: a block
        // that returned records success unless one was (`record` then
        // changes nothing), in one lock of the permit.
        match exc {
            None => {
                Running::held(permit, None).end(Outcome::Success);
            }
            Some(_) if permit.outcome().is_none() => {
                self.finish_with(py, exc)?;
            }
            Some(_) => {}
        }
        Ok(false)
    }

    fn rejection(&self) -> Option<Rejection<'_>> {
        match &self.call {
            Call::Admitted(_) => None,
            Call::Refused {
                dep,
                reason,
                retry_after,
            } => Some(Rejection {
                reason: *reason,
                fallback: dep.fallback(),
                retry_after: *retry_after,
            }),
        }
    }
}

#[pymethods]
impl PyDecision {
    /// True when the call may go ahead.
    #[getter]
    pub(crate) fn admitted(&self) -> bool {
        matches!(self.call, Call::Admitted(_))
    }

    /// True when the call is a half-open probe (C7).
    #[getter]
    fn probe(&self) -> bool {
        self.permit().is_some_and(HeldPermit::is_probe)
    }

    /// None when admitted; else "open", "probe_budget", "forced_open" or
    /// "deadline_expired".
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.rejection().map(|r| reason_str(r.reason))
    }

    /// None when admitted or the deadline expired; else the declared fallback.
    #[getter]
    fn fallback(&self) -> Option<PyFallback> {
        self.rejection()?
            .fallback_to_serve()
            .map(PyFallback::from_core)
    }

    /// Seconds until the breaker next admits a probe (reason "open"), else None.
    #[getter]
    fn retry_after(&self) -> Option<f64> {
        self.rejection()?.retry_after.map(secs)
    }

    /// The outcome recorded so far ("success", "failure", "cancelled"), or None.
    #[getter]
    fn outcome(&self) -> Option<&'static str> {
        self.permit()
            .and_then(HeldPermit::outcome)
            .map(Outcome::as_str)
    }

    /// Records a success. A second outcome raises OutcomeAlreadyRecorded.
    fn success(&self) -> Result<(), Error> {
        self.record(Outcome::Success).map(drop)
    }

    /// Records a failure. A second outcome raises OutcomeAlreadyRecorded.
    fn failure(&self) -> Result<(), Error> {
        self.record(Outcome::Failure).map(drop)
    }

    /// Records a cancellation: neither failure nor success, the probe slot
    /// returns (C10). A second outcome raises OutcomeAlreadyRecorded.
    pub(crate) fn cancelled(&self) -> Result<(), Error> {
        self.record(Outcome::Cancelled).map(drop)
    }

    /// Records the outcome of a call that returned (`exc=None`: success, or
    /// failure if it took at least `slow_call`) or raised `exc` (by the
    /// admission's `classify`, the dependency's rule, then the exception
    /// rule: C17); returns the outcome recorded. An `exc` that is not an
    /// exception instance raises TypeError and records nothing.
    #[pyo3(signature = (exc=None))]
    fn finish(&self, py: Python<'_>, exc: Option<&Bound<'_, PyAny>>) -> PyResult<&'static str> {
        self.finish_with(py, exc).map(Outcome::as_str)
    }

    /// Records the outcome of a call that returned `value` and, on success
    /// with a `stale` fallback, keeps `value` for (partition, `cache_key`).
    /// Internal: what `dep.call` does for a call made elsewhere (the
    /// asyncio awaitable, the simulation harness).
    #[pyo3(signature = (value, cache_key=None))]
    pub(crate) fn _returned(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        cache_key: Option<&str>,
    ) -> PyResult<&'static str> {
        if self.outcome().is_some() {
            // Recorded already: refused as `finish` refuses it.
            return self.finish_with(py, None).map(Outcome::as_str);
        }
        self.returned(py, value, cache_key, None)
            .map(Outcome::as_str)
    }

    /// For a decision that was not admitted: serves the declared fallback as
    /// `dep.call` would (and counts it), or raises DependencyUnavailable /
    /// DeadlineExpired. `fallback(*args, **kwargs)` is the degraded behaviour.
    #[pyo3(signature = (fallback=None, args=None, kwargs=None, cache_key=None))]
    pub(crate) fn serve_fallback<'py>(
        &self,
        py: Python<'py>,
        fallback: Option<&Bound<'py, PyAny>>,
        args: Option<&Bound<'py, PyTuple>>,
        kwargs: Option<&Bound<'py, PyDict>>,
        cache_key: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(rejection) = self.rejection() else {
            return Err(Error::Value(format!(
                "this decision for `{}` was admitted: there is no fallback to serve",
                self.dep().name()
            ))
            .into());
        };
        serve(
            py,
            Refused::of(self.dep(), self.tenant(py)?, rejection),
            fallback,
            args,
            kwargs,
            cache_key,
            Kept::default(),
        )
        .map_err(PyErr::from)
    }

    fn __enter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        let Some(r) = this.rejection() else {
            return Ok(slf.clone());
        };
        let tenant = this.tenant(slf.py())?;
        Err(if r.reason.serves_fallback() {
            // Raised, not served: `unavailable_ref` counts no fallback (C14).
            unavailable(
                slf.py(),
                this.dep().unavailable_ref(tenant, &r),
                Kept::default(),
            )
        } else {
            deadline_expired(this.dep(), tenant).into()
        })
    }

    /// `async with dep.admit(...)`: as `__enter__`, awaited.
    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyReady>> {
        let entered = Self::__enter__(slf).map(|d| d.into_any().unbind());
        Bound::new(slf.py(), PyReady::new(entered))
    }

    /// `async with`'s exit: as `__exit__` (never suppresses), awaited.
    #[pyo3(signature = (exc_type=None, exc=None, traceback=None))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyType>>,
        exc: Option<&Bound<'py, PyAny>>,
        traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyReady>> {
        let _ = (exc_type, traceback);
        let exc = exc.filter(|e| !e.is_none());
        let exited = self.exit(py, exc).map(|suppress| {
            pyo3::types::PyBool::new(py, suppress)
                .to_owned()
                .into_any()
                .unbind()
        });
        Bound::new(py, PyReady::new(exited))
    }

    /// `__exit__` as pyo3 takes its arguments: Python sees
    /// `vectorcall::EXIT`, which calls this method's pyo3 wrapper for any
    /// call but a `with` statement's.
    #[pyo3(signature = (exc_type=None, exc=None, traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, traceback);
        self.exit(py, exc)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __repr__(&self) -> String {
        match self.rejection() {
            None => format!(
                "Decision(dependency={:?}, admitted=True, probe={})",
                self.dep().name(),
                if self.probe() { "True" } else { "False" }
            ),
            Some(r) => format!(
                "Decision(dependency={:?}, admitted=False, reason={:?}, retry_after={})",
                self.dep().name(),
                reason_str(r.reason),
                r.retry_after
                    .map_or("None".to_owned(), |d| format!("{}", d.as_secs_f64()))
            ),
        }
    }
}

/// `Decision.__exit__` as a vectorcall method (see `fastcall`), installed
/// on the class when the module loads: a `with` statement passes three
/// positional arguments, read here without pyo3's argument extraction;
/// any other call goes to the wrapper pyo3 made for the `#[pymethods]`
/// `__exit__`, so its arguments are taken, and refused, exactly as pyo3
/// takes them.
mod vectorcall {
    use super::*;
    use crate::fastcall::{self, MethodDef};
    use pyo3::ffi;
    use pyo3::types::PyBool;

    static ENTER: MethodDef =
        MethodDef::noargs(c"__enter__", enter, c"__enter__($self, /)\n--\n\n");

    static EXIT: MethodDef = MethodDef::new(
        c"__exit__",
        pyo3::impl_::trampoline::get_trampoline_function!(fastcall_cfunction_with_keywords, exit),
        c"__exit__($self, exc_type=None, exc=None, traceback=None)\n--\n\n",
    );

    /// Puts `__enter__` and `__exit__` on the `Decision` class.
    pub fn install(py: Python<'_>) -> PyResult<()> {
        let ty = py.get_type::<PyDecision>();
        fastcall::install(&ty, &ENTER)?;
        fastcall::install(&ty, &EXIT)
    }

    /// `__enter__` as CPython calls it. An admitted decision's only
    /// returns the decision: nothing that can fail, panic or need pyo3's
    /// bookkeeping, so it runs without pyo3's trampoline. A refused one
    /// goes to pyo3's wrapper of the `#[pymethods]` `__enter__`, through
    /// the trampoline, to raise.
    ///
    /// # Safety
    /// As CPython calls a `METH_NOARGS` method of `Decision`: the
    /// interpreter attached, `slf` an instance, borrowed.
    unsafe extern "C" fn enter(
        slf: *mut ffi::PyObject,
        args: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject {
        // SAFETY: CPython calls a method with the interpreter attached; the
        // token does not outlive this call.
        let py = unsafe { Python::assume_attached() };
        // SAFETY: the method's descriptor has checked that `slf` is a
        // `Decision`; borrowed for the call.
        let this = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<PyDecision>() }.get();
        if this.admitted() {
            // SAFETY: `slf` is a live object; the new reference is the
            // caller's.
            unsafe { ffi::Py_IncRef(slf) };
            return slf;
        }
        // SAFETY: as this function's; pyo3's wrapper takes what CPython
        // passes a `METH_NOARGS` method.
        unsafe {
            pyo3::impl_::trampoline::get_trampoline_function!(
                noargs,
                PyDecision::__pymethod___enter____
            )(slf, args)
        }
    }

    /// `__exit__` as pyo3's fastcall trampoline runs it.
    ///
    /// # Safety
    /// As CPython calls a `METH_FASTCALL | METH_KEYWORDS` method of
    /// `Decision`: `slf` an instance, `args` `nargs` positional values
    /// followed by one value per name of `kwnames` (a tuple of str, or
    /// null), all borrowed.
    unsafe fn exit(
        py: Python<'_>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: as this function's.
        let a = unsafe { fastcall::Args::new(py, args, nargs, kwnames) };
        if let Some([exc_type, exc, _]) = a.exactly::<3>() {
            // What pyo3 would refuse (an `exc_type` neither None nor a
            // type) goes to pyo3, which refuses it.
            if exc_type.is_none() || exc_type.is_instance_of::<PyType>() {
                // SAFETY: CPython passes the instance, borrowed; the
                // method's descriptor has checked it is a `Decision`.
                let this =
                    unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<PyDecision>() }.get();
                let exc = (!exc.is_none()).then_some(&*exc);
                let suppress = this.exit(py, exc)?;
                return Ok(PyBool::new(py, suppress).to_owned().into_ptr());
            }
        }
        // SAFETY: pyo3's wrapper of the `#[pymethods]` `__exit__` takes
        // what CPython passes a fastcall method, as this one does.
        unsafe { PyDecision::__pymethod___exit____(py, slf, args, nargs, kwnames) }
    }
}

pub use vectorcall::install as install_methods;
