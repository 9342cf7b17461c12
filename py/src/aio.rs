//! `Dependency.acall`'s awaitable: the admission when it is first awaited,
//! the call's coroutine awaited in place (as `yield from` awaits it), and
//! the outcome recorded when that ends, without a Python coroutine of our
//! own around it. What the breaker decides and counts is the `Decision`'s
//! (the core's), as for `call`; a refused call whose degraded fallback may
//! be async is `_aio._serve`'s coroutine, awaited the same way.

use crate::decision::PyDecision;
use crate::dependency::PyDependency;
use crate::fallback::call_args;
use crate::time::opt_deadline;
use pyo3::exceptions::{
    PyGeneratorExit, PyRuntimeError, PyRuntimeWarning, PyStopIteration, PyTypeError, PyValueError,
};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

/// The awaitable of `dep.acall(coro_fn, ...)`: await it once, as the
/// coroutine it stands for (it has `send`, `throw` and `close`, so asyncio
/// takes it for a coroutine: `asyncio.create_task` runs it).
#[pyclass(module = "breakerbank", name = "AsyncCall")]
#[derive(Debug)]
pub struct PyAsyncCall {
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    /// Not awaited yet: nothing admitted.
    Start(Pending),
    /// Admitted: awaiting the call's coroutine; the decision records how
    /// it ends, and keeps a returned value under `cache_key`.
    Call {
        decision: PyDecision,
        inner: Py<PyAny>,
        cache_key: Option<Py<PyString>>,
        classify_ok: Option<Py<PyAny>>,
    },
    /// Refused: awaiting `_aio._serve`'s coroutine (the fallback).
    Serve { inner: Py<PyAny> },
    /// Inside `send`, `throw` or `close`.
    Running,
    /// Returned or raised.
    Done,
}

/// A call as `acall` took it, checked.
#[derive(Debug)]
pub struct Pending {
    pub dep: Py<PyDependency>,
    pub f: Py<PyAny>,
    pub args: Py<PyTuple>,
    pub kwargs: Option<Py<PyDict>>,
    pub tenant: Option<Py<PyString>>,
    pub deadline: Option<f64>,
    pub fallback: Option<Py<PyAny>>,
    pub cache_key: Option<Py<PyString>>,
    pub classify: Option<Py<PyAny>>,
    pub classify_ok: Option<Py<PyAny>>,
}

/// How the awaited coroutine is resumed.
enum Resume<'py> {
    Send(Option<Bound<'py, PyAny>>),
    /// `throw`'s arguments, as given.
    Throw(Bound<'py, PyTuple>),
}

/// How one step of the awaited coroutine ended.
enum Step<'py> {
    Yielded(Bound<'py, PyAny>),
    Returned(Bound<'py, PyAny>),
    Raised(PyErr),
}

static CORO_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static AIO: PyOnceLock<[Py<PyAny>; 3]> = PyOnceLock::new();

/// `types.CoroutineType`, and `_aio`'s `_serve`, `_await` and
/// `inspect.isawaitable`.
fn aio(py: Python<'_>) -> PyResult<&[Py<PyAny>; 3]> {
    AIO.get_or_try_init(py, || {
        let m = py.import("breakerbank._aio")?;
        let inspect = py.import("inspect")?;
        Ok([
            m.getattr("_serve")?.unbind(),
            m.getattr("_await")?.unbind(),
            inspect.getattr("isawaitable")?.unbind(),
        ])
    })
}

fn coroutine_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CORO_TYPE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("types")?
                    .getattr("CoroutineType")?
                    .cast_into::<PyType>()?
                    .unbind(),
            )
        })
        .map(|t| t.bind(py))
}

/// What ends a coroutine that returned `value`: the exception instance
/// made here, where pyo3's lazy error (below Python 3.12) would box its
/// arguments, raise them and normalise them back into an instance.
fn stop(value: Bound<'_, PyAny>) -> PyErr {
    let py = value.py();
    match py.get_type::<PyStopIteration>().call1((value,)) {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

impl PyAsyncCall {
    /// The awaitable of `pending`.
    pub fn new(pending: Pending) -> Self {
        Self {
            stage: Stage::Start(pending),
        }
    }
}

impl Drop for PyAsyncCall {
    fn drop(&mut self) {
        if matches!(self.stage, Stage::Start(_)) {
            // As CPython warns of a coroutine never awaited: the call never
            // ran, which is rarely what the caller meant. Not at shutdown.
            Python::try_attach(|py| {
                let warned = PyErr::warn(
                    py,
                    &py.get_type::<PyRuntimeWarning>(),
                    c"coroutine 'Dependency.acall' was never awaited",
                    1,
                );
                if let Err(e) = warned {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

/// Runs the coroutine `slf` stands for up to its next suspension: the
/// value it yields, or `StopIteration` with what it returned, or what it
/// raised.
fn step<'py>(slf: &Bound<'py, PyAsyncCall>, resume: Resume<'py>) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let stage = std::mem::replace(&mut slf.borrow_mut().stage, Stage::Running);
    let result = match stage {
        Stage::Start(p) => match resume {
            Resume::Send(Some(v)) if !v.is_none() => {
                slf.borrow_mut().stage = Stage::Start(p);
                Err(PyTypeError::new_err(
                    "can't send non-None value to a just-started coroutine",
                ))
            }
            Resume::Send(_) => start(slf, p),
            // Thrown before it started: raised at once; nothing admitted.
            Resume::Throw(args) => Err(thrown(&args)),
        },
        Stage::Call {
            decision,
            inner,
            cache_key,
            classify_ok,
        } => resume_call(
            slf,
            decision,
            inner.into_bound(py),
            cache_key,
            classify_ok,
            resume,
        ),
        Stage::Serve { inner } => resume_serve(slf, inner.into_bound(py), resume),
        // Another step is under way (the call resumed this awaitable):
        // its stage stays.
        Stage::Running => return Err(PyValueError::new_err("coroutine already executing")),
        Stage::Done => match resume {
            Resume::Throw(args) => Err(thrown(&args)),
            Resume::Send(_) => Err(PyRuntimeError::new_err(
                "cannot reuse already awaited coroutine",
            )),
        },
    };
    finish_stage(slf);
    result
}

/// A step that did not put a suspended stage back has ended the
/// coroutine.
fn finish_stage(slf: &Bound<'_, PyAsyncCall>) {
    let mut this = slf.borrow_mut();
    if matches!(this.stage, Stage::Running) {
        this.stage = Stage::Done;
    }
}

/// The first step: admission, then the call (admitted) or the fallback
/// (refused), as `dep.call` serves them.
fn start<'py>(slf: &Bound<'py, PyAsyncCall>, p: Pending) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let dep = p.dep.bind(py).get();
    let tenant = p.tenant.as_ref().map(|t| t.bind(py));
    let text = crate::tenant::opt_text(&dep.dep, tenant)?;
    let decision = PyDecision::admit(
        py,
        &dep.dep,
        dep.bank(),
        tenant.zip(text),
        opt_deadline(p.deadline)?,
        p.classify.map(|c| c.into_bound(py)),
    )?;
    let args = p.args.bind(py);
    let kwargs = p.kwargs.as_ref().map(|k| k.bind(py));
    let cache_key = p.cache_key.as_ref().map(|k| k.bind(py));
    if !decision.admitted() {
        let Some(fallback) = p.fallback else {
            // Nothing to await: served (or raised) as `dep.call` would.
            let key = cache_key.map(|k| k.to_str()).transpose()?;
            return Err(stop(decision.serve_fallback(
                py,
                None,
                Some(args),
                kwargs,
                key,
            )?));
        };
        let [serve, _, _] = aio(py)?;
        let decision = Bound::new(py, decision)?;
        let inner = serve
            .bind(py)
            .call1((decision, fallback, args, kwargs, cache_key))?;
        return resume_serve(slf, inner, Resume::Send(None));
    }
    let awaitable = match call_args(p.f.bind(py), Some(args), kwargs) {
        Ok(a) => a,
        Err(e) => return Err(raised(py, &decision, e)),
    };
    let inner = if awaitable.get_type().is(coroutine_type(py)?) {
        awaitable
    } else {
        let [_, await_, isawaitable] = aio(py)?;
        if !isawaitable.bind(py).call1((&awaitable,))?.is_truthy()? {
            // C17: the wrong form; what it returned is no dependency's
            // answer, so the permit goes back uncounted.
            decision.not_run(py)?;
            let name =
                p.f.bind(py)
                    .getattr("__qualname__")
                    .and_then(|n| n.repr())
                    .or_else(|_| p.f.bind(py).repr())?;
            return Err(PyTypeError::new_err(format!(
                "Dependency.acall needs a coroutine function; {name} returned {}",
                awaitable.get_type().name()?
            )));
        }
        await_.bind(py).call1((awaitable,))?
    };
    resume_call(
        slf,
        decision,
        inner,
        p.cache_key,
        p.classify_ok,
        Resume::Send(None),
    )
}

/// Resumes an admitted call's coroutine; records how it ended.
fn resume_call<'py>(
    slf: &Bound<'py, PyAsyncCall>,
    decision: PyDecision,
    inner: Bound<'py, PyAny>,
    cache_key: Option<Py<PyString>>,
    classify_ok: Option<Py<PyAny>>,
    resume: Resume<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    match resume_inner(&inner, resume) {
        Step::Yielded(v) => {
            slf.borrow_mut().stage = Stage::Call {
                decision,
                inner: inner.unbind(),
                cache_key,
                classify_ok,
            };
            Ok(v)
        }
        Step::Returned(v) => {
            let key = cache_key
                .as_ref()
                .map(|k| k.bind(py).to_str())
                .transpose()?;
            let classify_ok = classify_ok.as_ref().map(|f| f.bind(py));
            decision.returned(py, &v, key, classify_ok)?;
            Err(stop(v))
        }
        Step::Raised(e) => Err(raised(py, &decision, e)),
    }
}

/// Resumes a refused call's fallback coroutine.
fn resume_serve<'py>(
    slf: &Bound<'py, PyAsyncCall>,
    inner: Bound<'py, PyAny>,
    resume: Resume<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    match resume_inner(&inner, resume) {
        Step::Yielded(v) => {
            slf.borrow_mut().stage = Stage::Serve {
                inner: inner.unbind(),
            };
            Ok(v)
        }
        Step::Returned(v) => Err(stop(v)),
        Step::Raised(e) => Err(e),
    }
}

/// Records the outcome of a call that raised `err` (C17's rule); returns
/// what the caller gets: `err`, or the classifier's own error if it
/// failed (carrying `err` as its context).
fn raised(py: Python<'_>, decision: &PyDecision, err: PyErr) -> PyErr {
    match decision.finish_with(py, Some(err.value(py).as_any())) {
        Ok(_) => err,
        Err(failed) => failed,
    }
}

/// One step of the awaited coroutine `inner`.
fn resume_inner<'py>(inner: &Bound<'py, PyAny>, resume: Resume<'py>) -> Step<'py> {
    let py = inner.py();
    match resume {
        Resume::Send(value) => {
            let value = value.unwrap_or_else(|| py.None().into_bound(py));
            let mut result: *mut ffi::PyObject = std::ptr::null_mut();
            // SAFETY: `inner` and `value` are live objects; CPython writes a
            // new reference (or null, with an exception set) to `result`.
            let status = unsafe { ffi::PyIter_Send(inner.as_ptr(), value.as_ptr(), &mut result) };
            match status {
                ffi::PySendResult::PYGEN_ERROR => Step::Raised(PyErr::fetch(py)),
                ffi::PySendResult::PYGEN_RETURN => {
                    // SAFETY: a new reference, as `PyIter_Send` documents.
                    Step::Returned(unsafe { Bound::from_owned_ptr(py, result) })
                }
                ffi::PySendResult::PYGEN_NEXT => {
                    // SAFETY: as above.
                    Step::Yielded(unsafe { Bound::from_owned_ptr(py, result) })
                }
            }
        }
        Resume::Throw(args) => match inner.call_method1(pyo3::intern!(py, "throw"), args) {
            Ok(v) => Step::Yielded(v),
            Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
                let value = e.value(py).getattr(pyo3::intern!(py, "value"));
                match value {
                    Ok(v) => Step::Returned(v),
                    Err(e) => Step::Raised(e),
                }
            }
            Err(e) => Step::Raised(e),
        },
    }
}

/// The exception `throw(*args)` raises in a coroutine that is not
/// suspended: an instance as is; a class made with the value.
fn thrown(args: &Bound<'_, PyTuple>) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let typ = args.get_item(0)?;
        let val = args.get_item(1).ok().filter(|v| !v.is_none());
        if let Ok(t) = typ.cast::<PyType>() {
            if t.is_subclass_of::<pyo3::exceptions::PyBaseException>()? {
                let exc = match val {
                    Some(v) if v.is_instance(t)? => v,
                    Some(v) => t.call1((v,))?,
                    None => t.call0()?,
                };
                return Ok(PyErr::from_value(exc));
            }
        }
        if typ.is_instance_of::<pyo3::exceptions::PyBaseException>() {
            return Ok(PyErr::from_value(typ));
        }
        Err(PyTypeError::new_err(format!(
            "exceptions must be classes or instances deriving from BaseException, not {}",
            typ.get_type().name()?
        )))
    };
    make().unwrap_or_else(|e| e)
}

#[pymethods]
impl PyAsyncCall {
    fn __await__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        step(slf, Resume::Send(None))
    }

    /// Resumes the call with `value`; returns what it yields next, or
    /// raises StopIteration with what it returned.
    fn send<'py>(slf: &Bound<'py, Self>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        step(slf, Resume::Send(Some(value)))
    }

    /// Raises an exception inside the awaited call, as `coroutine.throw`.
    #[pyo3(signature = (typ, val=None, tb=None))]
    fn throw<'py>(
        slf: &Bound<'py, Self>,
        typ: Bound<'py, PyAny>,
        val: Option<Bound<'py, PyAny>>,
        tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let args = match (val, tb) {
            (None, None) => PyTuple::new(py, [typ])?,
            (val, None) => {
                PyTuple::new(py, [typ, val.unwrap_or_else(|| py.None().into_bound(py))])?
            }
            (val, Some(tb)) => PyTuple::new(
                py,
                [typ, val.unwrap_or_else(|| py.None().into_bound(py)), tb],
            )?,
        };
        step(slf, Resume::Throw(args))
    }

    /// Stops the awaited call with GeneratorExit, as `coroutine.close`.
    fn close(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let suspended = matches!(slf.borrow().stage, Stage::Call { .. } | Stage::Serve { .. });
        if !suspended {
            let mut this = slf.borrow_mut();
            if !matches!(this.stage, Stage::Running) {
                this.stage = Stage::Done;
            }
            return Ok(());
        }
        let exit = PyTuple::new(py, [py.get_type::<PyGeneratorExit>()])?;
        match step(slf, Resume::Throw(exit)) {
            Ok(_) => Err(PyRuntimeError::new_err("coroutine ignored GeneratorExit")),
            Err(e)
                if e.is_instance_of::<PyGeneratorExit>(py)
                    || e.is_instance_of::<PyStopIteration>(py) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        match &self.stage {
            Stage::Start(p) => {
                visit.call(&p.dep)?;
                visit.call(&p.f)?;
                visit.call(&p.args)?;
                visit.call(&p.kwargs)?;
                visit.call(&p.tenant)?;
                visit.call(&p.fallback)?;
                visit.call(&p.cache_key)?;
                visit.call(&p.classify)?;
                visit.call(&p.classify_ok)
            }
            Stage::Call {
                decision,
                inner,
                cache_key,
                classify_ok,
            } => {
                decision.traverse(&visit)?;
                visit.call(inner)?;
                visit.call(cache_key)?;
                visit.call(classify_ok)
            }
            Stage::Serve { inner } => visit.call(inner),
            Stage::Running | Stage::Done => Ok(()),
        }
    }

    fn __clear__(&mut self) {
        if !matches!(self.stage, Stage::Running) {
            self.stage = Stage::Done;
        }
    }
}

/// An awaitable whose answer is known already: what `Decision.__aenter__`
/// and `__aexit__` return, so `async with dep.admit(...)` is the `with`
/// form in a coroutine. Awaiting it never suspends.
#[pyclass(module = "breakerbank", name = "Ready")]
#[derive(Debug)]
pub struct PyReady {
    /// The value to return, or the error to raise; taken by the await.
    answer: Option<PyResult<Py<PyAny>>>,
}

impl PyReady {
    /// An awaitable that returns (or raises) `answer`.
    pub fn new(answer: PyResult<Py<PyAny>>) -> Self {
        Self {
            answer: Some(answer),
        }
    }
}

#[pymethods]
impl PyReady {
    fn __await__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.answer.take() {
            Some(Ok(v)) => Err(stop(v.into_bound(py))),
            Some(Err(e)) => Err(e),
            None => Err(PyRuntimeError::new_err(
                "cannot reuse already awaited coroutine",
            )),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(Ok(v)) = &self.answer {
            visit.call(v)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.answer = None;
    }
}
