//! `breakerbank.Dependency`: one dependency of a bank, resolved once.

use crate::aio::{Pending, PyAsyncCall};
use crate::decision::PyDecision;
use crate::errors::{secs, Error, Kept, Raised};
use crate::fallback::{call_args, check_fallback, serve, PyFallback};
use crate::held::{BankHandle, StrCache};
use crate::outcome;
use crate::tenant::opt_text;
use crate::time::{instant_secs, opt_deadline};
use breakerbank::{
    Decision, Dependency, Ended, Instant, Outcome, Permit, Refused, Running, TripPolicy,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A dependency of a bank (`bank["payments_client"]`): admission, calls,
/// state and operator control for its breakers.
///
/// Cheap to keep and share between threads; it stays valid as long as
/// anything refers to it.
#[pyclass(frozen, weakref, module = "breakerbank", name = "Dependency")]
#[derive(Debug)]
pub struct PyDependency {
    pub(crate) dep: Dependency,
    /// The dependency's name and its declared error code as Python
    /// strings, for the refusals' errors.
    name: Py<PyString>,
    code: StrCache,
    /// The bank this handle came from. `dep` keeps the core, and so the
    /// bank's listeners and stale values, alive; referring to the bank makes
    /// that visible to the collector (see `held`).
    bank: BankHandle,
}

/// The keyword options of `call` / `acall`, taken out of `**kwargs`.
#[derive(Default)]
struct CallOptions<'py> {
    tenant: Option<Bound<'py, PyString>>,
    deadline: Option<f64>,
    fallback: Option<Bound<'py, PyAny>>,
    cache_key: Option<Bound<'py, PyString>>,
    classify: Option<Bound<'py, PyAny>>,
    classify_ok: Option<Bound<'py, PyAny>>,
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn opt_str<'py>(v: Bound<'py, PyAny>, what: &str) -> Result<Option<Bound<'py, PyString>>, Error> {
    if v.is_none() {
        return Ok(None);
    }
    match v.cast_into::<PyString>() {
        Ok(s) => Ok(Some(s)),
        Err(e) => Err(Error::Type(format!(
            "{what} must be a str or None, got {}",
            type_name(&e.into_inner())
        ))),
    }
}

fn opt_callable<'py>(v: Bound<'py, PyAny>, what: &str) -> Result<Option<Bound<'py, PyAny>>, Error> {
    if v.is_none() {
        return Ok(None);
    }
    if !v.is_callable() {
        return Err(Error::Type(format!(
            "{what} must be callable or None, got {}",
            type_name(&v)
        )));
    }
    Ok(Some(v))
}

fn opt_seconds(v: Bound<'_, PyAny>, what: &str) -> Result<Option<f64>, Error> {
    if v.is_none() {
        return Ok(None);
    }
    v.extract::<f64>().map(Some).map_err(|_| {
        Error::Type(format!(
            "{what} must be seconds on the bank's clock (a float) or None, got {}",
            type_name(&v)
        ))
    })
}

/// The names of `call`'s own keywords, in the order of [`checked_options`].
static OPTION_NAMES: PyOnceLock<[Py<PyString>; 6]> = PyOnceLock::new();

/// [`OPTION_NAMES`], interned once: one check per call rather than one
/// per name.
fn option_names(py: Python<'_>) -> [&Bound<'_, PyString>; 6] {
    OPTION_NAMES
        .get_or_init(py, || {
            [
                "tenant",
                "deadline",
                "fallback",
                "cache_key",
                "classify",
                "classify_ok",
            ]
            .map(|n| PyString::intern(py, n).unbind())
        })
        .each_ref()
        .map(|n| n.bind(py))
}

/// Which of `names` the keyword `key` is: keyword names are interned, so a
/// pointer compare usually finds ours; a name built at run time is
/// compared by value.
fn option_index(names: &[&Bound<'_, PyString>; 6], key: &Bound<'_, PyAny>) -> Option<usize> {
    names
        .iter()
        .position(|n| key.is(n))
        .or_else(|| names.iter().position(|n| key.eq(n).unwrap_or(false)))
}

/// `call`'s keywords, found in the order of [`option_names`], checked in
/// that order; only those given are looked at.
fn checked_options<'py>(
    found: [Option<Borrowed<'_, 'py, PyAny>>; 6],
) -> PyResult<CallOptions<'py>> {
    let mut opts = CallOptions::default();
    let [tenant, deadline, fallback, cache_key, classify, classify_ok] = found;
    if let Some(v) = tenant {
        opts.tenant = opt_str(v.to_owned(), "tenant")?;
    }
    if let Some(v) = deadline {
        opts.deadline = opt_seconds(v.to_owned(), "deadline")?;
    }
    if let Some(v) = fallback {
        opts.fallback = opt_callable(v.to_owned(), "fallback")?;
    }
    if let Some(v) = cache_key {
        opts.cache_key = opt_str(v.to_owned(), "cache_key")?;
    }
    if let Some(v) = classify {
        opts.classify = outcome::per_call(Some(v.to_owned()))?;
    }
    if let Some(v) = classify_ok {
        opts.classify_ok = outcome::per_call_ok(Some(v.to_owned()))?;
    }
    Ok(opts)
}

impl PyDependency {
    /// Wraps a resolved core dependency of `bank`.
    pub fn new(py: Python<'_>, dep: Dependency, bank: BankHandle) -> Self {
        Self {
            name: PyString::new(py, dep.name()).unbind(),
            code: StrCache::default(),
            dep,
            bank,
        }
    }

    /// The bank this handle came from.
    pub(crate) fn bank(&self) -> &BankHandle {
        &self.bank
    }

    /// What a refusal's error reuses of this handle, and the caller's
    /// tenant object.
    fn kept<'a, 'py>(&'a self, tenant: Option<&'a Bound<'py, PyString>>) -> Kept<'a, 'py> {
        Kept {
            name: Some(&self.name),
            code: Some(&self.code),
            tenant,
        }
    }

    /// The body of `call` / `call_with`, driving the core's call: begin,
    /// then end the running call with what `f` did (and keep its value for
    /// `stale`), or serve the refused call's fallback. `tenant` and
    /// `cache_key` are the text of `o`'s; its classifiers are checked
    /// already (C17).
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        f: &Bound<'py, PyAny>,
        args: Option<&Bound<'py, PyTuple>>,
        kwargs: Option<&Bound<'py, PyDict>>,
        tenant: Option<&str>,
        cache_key: Option<&str>,
        o: &CallOptions<'py>,
    ) -> Result<Bound<'py, PyAny>, Raised<'py>> {
        let (fallback, classify, classify_ok) = (
            o.fallback.as_ref(),
            o.classify.as_ref(),
            o.classify_ok.as_ref(),
        );
        // C17: refused before admission, so it counts against nothing (its
        // TypeError would otherwise be recorded as the dependency failing).
        if !f.is_callable() {
            return Err(Error::Type(format!(
                "the call through `{}` needs a callable, got {}",
                self.dep.name(),
                type_name(f)
            ))
            .into());
        }
        check_fallback(&self.dep, fallback)?;
        let deadline: Option<Instant> = opt_deadline(o.deadline)?;
        // `Dependency::begin` spelled out (as the core's own `call`): the
        // admission's answer is matched where it is made, so the permit
        // stays in registers; the arms are the core's `Running` and
        // `Refused`, as `begin` makes them.
        let decision = self
            .dep
            .admit(tenant, deadline)
            .map_err(|e| Error::admit(self.dep.name(), e))?;
        match decision {
            Decision::Admitted(permit) => {
                let call = Running::new(tenant, permit);
                let value = match call_args(f, args, kwargs) {
                    Ok(value) => value,
                    Err(err) => return Err(self.raised(py, call, err, deadline, classify).into()),
                };
                // C17: a coroutine function is found by what it returned: a
                // type compare, where asking the function first (an
                // attribute lookup, ~25 ns under abi3, a quarter of a
                // closed call) would cost every call. Its body has not run,
                // so the permit goes back uncounted (`Running::not_run`)
                // and its coroutine is closed.
                if is_coroutine(&value) {
                    return Err(not_a_sync_function(self.dep.name(), f, value, call).into());
                }
                // Without a classifier of values the outcome is a constant
                // success, which the core's record folds into its fast path.
                let ended = if classify_ok.is_none() && !self.bank.rules().any_result() {
                    call.end(Outcome::Success)
                } else {
                    self.classified(call, &value, classify_ok)?
                };
                ended.keep(cache_key, || self.bank.values().put(value.clone().unbind()));
                Ok(value)
            }
            Decision::Rejected(rejection) => {
                // A refused call never runs `f`, so a coroutine function
                // goes unseen here: it serves the fallback as any refused
                // call, and is refused at its first admission. Asking `f`
                // (`inspect.iscoroutinefunction`, or `__code__.co_flags`)
                // would cost every refusal more than the refusal itself.
                let refused = Refused::of(&self.dep, tenant, rejection);
                serve(
                    py,
                    refused,
                    fallback,
                    args,
                    kwargs,
                    cache_key,
                    self.kept(o.tenant.as_ref()),
                )
            }
        }
    }

    /// Ends a call that returned `value` as its classifiers say (C17): the
    /// call's `classify_ok`, then the dependency's `result` rule; the
    /// classifier's error, if it failed, after the call was ended.
    #[cold]
    #[inline(never)]
    fn classified<'a>(
        &self,
        call: Running<'a, Permit<'a>>,
        value: &Bound<'_, PyAny>,
        classify_ok: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Ended<'a>> {
        let rule = self.bank.rules().for_results(self.dep.id());
        let (outcome, failed) = outcome::of_value(value, classify_ok, rule.as_deref());
        let ended = call.end(outcome);
        match failed {
            Some(err) => Err(err),
            None => Ok(ended),
        }
    }

    /// Ends a call that raised `err` with its outcome (C17's rule, see
    /// `outcome::classify`) and returns what the caller gets: `err`, or the
    /// classifier's own error if it failed (carrying `err` as its context).
    #[cold]
    fn raised<'a>(
        &self,
        py: Python<'_>,
        call: Running<'a, Permit<'a>>,
        err: PyErr,
        deadline: Option<Instant>,
        classify: Option<&Bound<'_, PyAny>>,
    ) -> PyErr {
        let rule = self.bank.rules().get(self.dep.id());
        let (outcome, failed) = outcome::classify(
            py,
            &self.dep,
            err.value(py).as_any(),
            deadline,
            classify,
            rule.as_deref(),
        );
        call.end(outcome);
        failed.unwrap_or(err)
    }

    /// `acall`'s awaitable, its callable and fallback checked here (the
    /// other options by the caller).
    #[allow(clippy::too_many_arguments)]
    fn delegate_acall<'py>(
        slf: &Bound<'py, Self>,
        f: Bound<'py, PyAny>,
        args: Bound<'py, PyTuple>,
        kwargs: Option<Bound<'py, PyDict>>,
        tenant: Option<Bound<'py, PyString>>,
        deadline: Option<f64>,
        fallback: Option<Bound<'py, PyAny>>,
        cache_key: Option<Bound<'py, PyString>>,
        classify: Option<Bound<'py, PyAny>>,
        classify_ok: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !f.is_callable() {
            return Err(Error::Type(format!(
                "Dependency.acall needs a callable, got {}",
                type_name(&f)
            ))
            .into());
        }
        let fallback = match fallback {
            Some(v) => opt_callable(v, "fallback")?,
            None => None,
        };
        check_fallback(&slf.get().dep, fallback.as_ref())?;
        let call = PyAsyncCall::new(Pending {
            dep: slf.clone().unbind(),
            f: f.unbind(),
            args: args.unbind(),
            kwargs: kwargs.map(Bound::unbind),
            tenant: tenant.map(Bound::unbind),
            deadline,
            fallback: fallback.map(Bound::unbind),
            cache_key: cache_key.map(Bound::unbind),
            classify: classify.map(Bound::unbind),
            classify_ok: classify_ok.map(Bound::unbind),
        });
        Ok(Bound::new(slf.py(), call)?.into_any())
    }
}

/// `types.CoroutineType`, set when the module loads (null before, or if
/// it could not be found: then nothing is taken for a coroutine). A type
/// lives as long as the interpreter; the reference taken is never given
/// back.
static CORO_TYPE: AtomicPtr<pyo3::ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// Finds `types.CoroutineType` for [`is_coroutine`].
fn init_coroutine_type(py: Python<'_>) -> PyResult<()> {
    let t = py
        .import("types")?
        .getattr("CoroutineType")?
        .cast_into::<PyType>()?;
    // Relaxed: read under the interpreter, which orders it after this.
    CORO_TYPE.store(t.into_ptr(), Ordering::Relaxed);
    Ok(())
}

/// Whether `value` is a coroutine (what calling a coroutine function
/// returns): one compare of its type's address with `types.CoroutineType`'s,
/// no reference counted.
#[inline(always)]
pub(crate) fn is_coroutine(value: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `value` is a live object; its type pointer is only compared.
    let ty = unsafe { pyo3::ffi::Py_TYPE(value.as_ptr()) };
    std::ptr::eq(
        ty.cast::<pyo3::ffi::PyObject>(),
        CORO_TYPE.load(Ordering::Relaxed),
    )
}

/// C17's words for a coroutine function given to `call`.
#[cold]
fn wrong_form(dependency: &str, f: &Bound<'_, PyAny>) -> String {
    let name = f
        .getattr(intern!(f.py(), "__qualname__"))
        .and_then(|n| n.str())
        .map_or_else(|_| type_name(f), |n| n.to_string());
    format!(
        "{name} is a coroutine function: call it through `{dependency}` with \
         `await dep.acall(...)` (Dependency.call runs synchronous callables)"
    )
}

/// A coroutine function given to `call`, found once admitted: its
/// coroutine is closed (it never ran, so nothing warns that it was never
/// awaited) and the permit given back uncounted (C17).
#[cold]
#[inline(never)]
fn not_a_sync_function<'a>(
    dependency: &str,
    f: &Bound<'_, PyAny>,
    coroutine: Bound<'_, PyAny>,
    call: Running<'a, Permit<'a>>,
) -> PyErr {
    call.not_run();
    let _ = coroutine.call_method0(intern!(coroutine.py(), "close"));
    Error::Type(wrong_form(dependency, f)).into()
}

#[pymethods]
impl PyDependency {
    /// The dependency's name, as in the profile.
    #[getter]
    fn name(&self) -> &str {
        self.dep.name()
    }

    /// "tenant" (one breaker per tenant) or "global" (one breaker).
    #[getter]
    fn isolation(&self) -> &'static str {
        if self.dep.is_tenant_scoped() {
            "tenant"
        } else {
            "global"
        }
    }

    /// The declared fallback.
    #[getter]
    fn fallback(&self) -> PyFallback {
        PyFallback::from_core(self.dep.fallback())
    }

    /// The rolling window of a `failure_rate` trip policy, in seconds (C5);
    /// None under `consecutive_failures`.
    #[getter]
    fn window(&self) -> Option<f64> {
        match self.dep.config().trip {
            TripPolicy::FailureRate { window, .. } => Some(secs(window)),
            TripPolicy::ConsecutiveFailures(_) => None,
        }
    }

    /// The base open period, `open_duration`, in seconds (C6).
    #[getter]
    fn open_duration(&self) -> f64 {
        secs(self.dep.config().open_duration)
    }

    /// The backoff of the open period on re-trips (C6) as
    /// `{"multiplier": m, "max": seconds}`; None without one.
    #[getter]
    fn backoff<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(b) = self.dep.config().backoff else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("multiplier", b.multiplier)?;
        d.set_item("max", secs(b.max))?;
        Ok(Some(d))
    }

    /// What the dependency promises, the profile's `slo` (C21), in
    /// seconds: `{"latency": s or None, "recovery": {"typical": s,
    /// "worst": s} or None}`; None without an `slo`.
    #[getter]
    fn slo<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(slo) = self.dep.config().slo else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("latency", slo.latency.map(secs))?;
        let recovery = match slo.recovery {
            Some(r) => {
                let rd = PyDict::new(py);
                rd.set_item("typical", secs(r.typical))?;
                rd.set_item("worst", secs(r.worst))?;
                Some(rd)
            }
            None => None,
        };
        d.set_item("recovery", recovery)?;
        Ok(Some(d))
    }

    /// The partition a call for `tenant` would be served by, by name: the
    /// tenant id (whether or not it has a partition yet), "global" on a
    /// global dependency, or "<overflow>" when the tenant table is known to
    /// be full of partitions that cannot be evicted, or the tenant is
    /// missing or invalid (C1, C9). Never creates a partition.
    #[pyo3(signature = (tenant=None))]
    fn breaker_of(&self, tenant: Option<Bound<'_, PyString>>) -> String {
        match opt_text(&self.dep, tenant.as_ref()) {
            Ok(t) => self.dep.breaker_of(t),
            // Not text: as invalid as any id the core refuses.
            Err(_) => self.dep.breaker_of(Some("\0")),
        }
    }

    /// Now, in seconds on the bank's clock (for deadlines).
    fn now(&self) -> f64 {
        instant_secs(self.dep.now())
    }

    /// `admit` as pyo3 takes its arguments: Python sees
    /// `vectorcall::ADMIT` (which carries the docstring), which calls this
    /// method's pyo3 wrapper whenever there are arguments to take.
    #[pyo3(signature = (tenant=None, deadline=None, classify=None))]
    fn admit(
        &self,
        py: Python<'_>,
        tenant: Option<Bound<'_, PyString>>,
        deadline: Option<f64>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> PyResult<PyDecision> {
        let classify = outcome::per_call(classify)?;
        let text = opt_text(&self.dep, tenant.as_ref())?;
        Ok(PyDecision::admit(
            py,
            &self.dep,
            &self.bank,
            tenant.as_ref().zip(text),
            opt_deadline(deadline)?,
            classify,
        )?)
    }

    /// Sets what the exceptions of this dependency's calls count as (C17),
    /// for `call`, `acall`, `guard` and the `with` form: each of `failure`,
    /// `success` and `cancelled` is an exception type, a predicate (a
    /// callable of the exception, true when it applies) or a tuple of them.
    /// An exception counted as success or cancelled still propagates to the
    /// caller: only the breaker's count changes. When several lists match,
    /// failure wins over cancelled, and cancelled over success; an exception
    /// none matches follows the default rule. A call's own `classify=` comes
    /// first. `result` is a callable of a value a call returned, giving
    /// "failure", "success", "cancelled" or None (a success): an answer
    /// that is an error, as resilience4j's `recordResult`; a call's own
    /// `classify_ok=` comes first. The value is still returned, and kept
    /// for a `stale` fallback only if it counted as a success. Each call
    /// replaces the rule (no arguments clears it); it applies to every
    /// handle of the dependency, from the calls admitted next.
    #[pyo3(signature = (failure=None, success=None, cancelled=None, result=None))]
    fn classify(
        &self,
        failure: Option<&Bound<'_, PyAny>>,
        success: Option<&Bound<'_, PyAny>>,
        cancelled: Option<&Bound<'_, PyAny>>,
        result: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let rule = outcome::Rule::parse(failure, success, cancelled, result)?;
        self.bank.rules().set(self.dep.id(), rule);
        Ok(())
    }

    /// `call` with the callable's arguments passed explicitly, so they never
    /// clash with `call`'s own keywords.
    #[pyo3(signature = (fn_, /, args=None, kwargs=None, *, tenant=None, deadline=None, fallback=None, cache_key=None, classify=None, classify_ok=None))]
    #[allow(clippy::too_many_arguments)]
    fn call_with<'py>(
        &self,
        py: Python<'py>,
        fn_: &Bound<'py, PyAny>,
        args: Option<&Bound<'py, PyTuple>>,
        kwargs: Option<&Bound<'py, PyDict>>,
        tenant: Option<Bound<'py, PyString>>,
        deadline: Option<f64>,
        fallback: Option<&Bound<'py, PyAny>>,
        cache_key: Option<&str>,
        classify: Option<Bound<'py, PyAny>>,
        classify_ok: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o = CallOptions {
            deadline,
            fallback: fallback.cloned(),
            classify: outcome::per_call(classify)?,
            classify_ok: outcome::per_call_ok(classify_ok)?,
            tenant,
            cache_key: None,
        };
        let kwargs = kwargs.filter(|k| !k.is_empty());
        let text = opt_text(&self.dep, o.tenant.as_ref())?;
        self.run(py, fn_, args, kwargs, text, cache_key, &o)
            .map_err(PyErr::from)
    }

    /// The async twin of `call_with`.
    #[pyo3(signature = (coro_fn, /, args=None, kwargs=None, *, tenant=None, deadline=None, fallback=None, cache_key=None, classify=None, classify_ok=None))]
    #[allow(clippy::too_many_arguments)]
    fn acall_with<'py>(
        slf: &Bound<'py, Self>,
        coro_fn: Bound<'py, PyAny>,
        args: Option<Bound<'py, PyTuple>>,
        kwargs: Option<Bound<'py, PyDict>>,
        tenant: Option<Bound<'py, PyString>>,
        deadline: Option<f64>,
        fallback: Option<Bound<'py, PyAny>>,
        cache_key: Option<Bound<'py, PyString>>,
        classify: Option<Bound<'py, PyAny>>,
        classify_ok: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let classify = outcome::per_call(classify)?;
        let classify_ok = outcome::per_call_ok(classify_ok)?;
        let args = args.unwrap_or_else(|| PyTuple::empty(slf.py()));
        Self::delegate_acall(
            slf,
            coro_fn,
            args,
            kwargs,
            tenant,
            deadline,
            fallback,
            cache_key,
            classify,
            classify_ok,
        )
    }

    /// Stores `value` as the last good value for (partition of `tenant`,
    /// `key`), served by a `stale` fallback no older than `max_staleness`.
    #[pyo3(signature = (key, value, *, tenant=None))]
    fn cache_put(
        &self,
        key: &str,
        value: Py<PyAny>,
        tenant: Option<Bound<'_, PyString>>,
    ) -> PyResult<()> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        let cached = self.bank.values().put(value);
        self.dep.cache_put(tenant, key, cached);
        Ok(())
    }

    /// "closed", "open", "half_open" or "forced_open". Asking never creates
    /// a partition; an unseen tenant reads as "closed".
    #[pyo3(signature = (tenant=None))]
    fn state(&self, tenant: Option<Bound<'_, PyString>>) -> PyResult<&'static str> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        Ok(self
            .dep
            .state(tenant)
            .map(|s| s.as_str())
            .map_err(|e| Error::admit(self.dep.name(), e))?)
    }

    /// One breaker's state, counters and episode, read at once (C18): a
    /// dict with "state", "consecutive_failures", "half_open_successes",
    /// "probes_in_flight", "retrips", "since" (seconds on the bank's clock:
    /// when the current episode began), "retry_after" (seconds until the
    /// next probe when "open", else None), and "window_calls" and
    /// "window_failures" (a closed failure-rate breaker's window; 0
    /// otherwise). Changes nothing; an unseen
    /// tenant reads as a fresh partition and asking never creates one.
    #[pyo3(signature = (tenant=None))]
    fn inspect<'py>(
        &self,
        py: Python<'py>,
        tenant: Option<Bound<'py, PyString>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        let i = self
            .dep
            .inspect(tenant)
            .map_err(|e| Error::admit(self.dep.name(), e))?;
        let d = PyDict::new(py);
        d.set_item(intern!(py, "state"), i.state.as_str())?;
        d.set_item(intern!(py, "consecutive_failures"), i.consecutive_failures)?;
        d.set_item(intern!(py, "half_open_successes"), i.half_open_successes)?;
        d.set_item(intern!(py, "probes_in_flight"), i.probes_in_flight)?;
        d.set_item(intern!(py, "retrips"), i.retrips)?;
        d.set_item(intern!(py, "since"), instant_secs(i.since))?;
        d.set_item(intern!(py, "retry_after"), i.retry_after.map(secs))?;
        d.set_item(intern!(py, "window_calls"), i.window_calls)?;
        d.set_item(intern!(py, "window_failures"), i.window_failures)?;
        Ok(d)
    }

    /// Forces the breaker closed (C11). `tenant=None` on a tenant-scoped
    /// dependency resets every partition; a tenant id over 256 bytes raises
    /// InvalidTenant and changes nothing (C9).
    #[pyo3(signature = (tenant=None))]
    fn reset(&self, tenant: Option<Bound<'_, PyString>>) -> PyResult<()> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        Ok(self
            .dep
            .try_reset(tenant)
            .map_err(|e| Error::admit(self.dep.name(), e))?)
    }

    /// Isolates the breaker until `reset` (C11). `tenant=None` on a
    /// tenant-scoped dependency isolates every partition, including tenants
    /// first seen afterwards; a tenant id over 256 bytes raises
    /// InvalidTenant and changes nothing (C9).
    #[pyo3(signature = (tenant=None))]
    fn force_open(&self, tenant: Option<Bound<'_, PyString>>) -> PyResult<()> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        Ok(self
            .dep
            .try_force_open(tenant)
            .map_err(|e| Error::admit(self.dep.name(), e))?)
    }

    /// Opens the breaker as if its trip policy had fired (C19): the
    /// profile's open period and backoff, then the probe cycle; unlike
    /// `force_open` it ends by itself. From half-open it is a re-trip (the
    /// backoff grows); on an open breaker the open period restarts from
    /// now; a forced-open breaker stays forced until `reset`. `tenant=None`
    /// on a tenant-scoped dependency trips every partition there is
    /// (tenants first seen afterwards start closed); a tenant id over 256
    /// bytes raises InvalidTenant and changes nothing. Emits a "trip" event.
    #[pyo3(signature = (tenant=None))]
    fn trip(&self, tenant: Option<Bound<'_, PyString>>) -> PyResult<()> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        Ok(self
            .dep
            .try_trip(tenant)
            .map_err(|e| Error::admit(self.dep.name(), e))?)
    }

    /// Starts a probe cycle now (C19). On an open breaker the open period
    /// ends early; on a closed one full traffic waits for the probes; a
    /// half-open breaker keeps the cycle it is in; a forced-open one stays
    /// forced until `reset`. Tenant rules as for `trip`. Emits a
    /// "half_open" event.
    #[pyo3(signature = (tenant=None))]
    fn half_open(&self, tenant: Option<Bound<'_, PyString>>) -> PyResult<()> {
        let tenant = opt_text(&self.dep, tenant.as_ref())?;
        Ok(self
            .dep
            .try_half_open(tenant)
            .map_err(|e| Error::admit(self.dep.name(), e))?)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.bank.traverse(&visit)
    }

    fn __repr__(&self) -> String {
        format!(
            "Dependency(name={:?}, isolation={:?}, fallback={})",
            self.dep.name(),
            self.isolation(),
            self.fallback().repr()
        )
    }
}

/// `Dependency.call` and `Dependency.admit` as vectorcall methods
/// (`METH_FASTCALL | METH_KEYWORDS`, see `fastcall`), installed on the
/// class when the module loads.
///
/// `call`: the arguments arrive as an array and the keyword names as a
/// tuple, so a call with `tenant=` builds no dict, and pyo3's `(*args,
/// **kwargs)` methods would have the interpreter build both. Only keywords
/// that go on to the callable are put in a dict.
///
/// `admit`: a call without arguments, or with nothing but a tenant (a str
/// or None, by position or keyword; a deadline and classifier that are
/// None count as not given), skips pyo3's argument extraction; any other
/// goes to the wrapper pyo3 made for the `#[pymethods]` `admit`, so its
/// arguments are taken, and refused, exactly as pyo3 takes them.
mod vectorcall {
    use super::*;
    use crate::fastcall::{self, MethodDef};
    use pyo3::exceptions::PyRuntimeError;
    use pyo3::ffi;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    static CALL: MethodDef = MethodDef::new(
        c"call",
        pyo3::impl_::trampoline::get_trampoline_function!(fastcall_cfunction_with_keywords, call),
        c"call($self, fn, /, *args, tenant=None, deadline=None, fallback=None, cache_key=None, classify=None, classify_ok=None, **kwargs)
--

Calls `fn(*args, **kwargs)` through the breaker: admitted -> the call
runs and its outcome is recorded (its exception propagates; a returned
value counts as `classify_ok`, then the dependency's `result=` rule,
say, else a success); not admitted -> the declared fallback (stale
value, `fallback(*args, **kwargs)` on a `degraded` dependency only, or
DependencyUnavailable); expired deadline -> DeadlineExpired. A
coroutine function raises TypeError (use `acall`), counting nothing.",
    );

    static ADMIT: MethodDef = MethodDef::new(
        c"admit",
        pyo3::impl_::trampoline::get_trampoline_function!(fastcall_cfunction_with_keywords, admit),
        c"admit($self, tenant=None, deadline=None, classify=None)
--

Asks to make one call. `deadline` is in seconds on the bank's clock;
`classify` says what an exception of the call counts as when the
decision records it (`with`, `finish`): a callable of the exception
returning \"success\", \"failure\", \"cancelled\" or None (C17).",
    );

    static ACALL: MethodDef = MethodDef::new(
        c"acall",
        pyo3::impl_::trampoline::get_trampoline_function!(fastcall_cfunction_with_keywords, acall),
        c"acall($self, coro_fn, /, *args, tenant=None, deadline=None, fallback=None, cache_key=None, classify=None, classify_ok=None, **kwargs)
--

The async twin of `call`: returns a coroutine that awaits
`coro_fn(*args, **kwargs)` through the breaker.",
    );

    /// Puts `call`, `acall` and `admit` on the `Dependency` class.
    pub fn install(py: Python<'_>) -> PyResult<()> {
        init_coroutine_type(py)?;
        let ty = py.get_type::<PyDependency>();
        fastcall::install(&ty, &CALL)?;
        fastcall::install(&ty, &ACALL)?;
        fastcall::install(&ty, &ADMIT)
    }

    /// `admit` as pyo3's fastcall trampoline runs it.
    ///
    /// # Safety
    /// As CPython calls a `METH_FASTCALL | METH_KEYWORDS` method of
    /// `Dependency`: `slf` an instance, `args` `nargs` positional values
    /// followed by one value per name of `kwnames` (a tuple of str, or
    /// null), all borrowed.
    unsafe fn admit(
        py: Python<'_>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        if nargs == 0 && kwnames.is_null() {
            // SAFETY: as this function's.
            return unsafe { admit_for(py, slf, None) };
        }
        // SAFETY: as this function's.
        unsafe { admit_with_arguments(py, slf, args, nargs, kwnames) }
    }

    /// `admit` given arguments. Out of line: the call without any stays
    /// small (it saves fewer registers).
    ///
    /// # Safety
    /// As for [`admit`].
    #[inline(never)]
    unsafe fn admit_with_arguments(
        py: Python<'_>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: as this function's.
        let a = unsafe { fastcall::Args::new(py, args, nargs, kwnames) };
        match plain_tenant(py, &a) {
            // SAFETY: as this function's.
            Some(None) => return unsafe { admit_for(py, slf, None) },
            Some(Some(tenant)) => {
                // A str whose text is not UTF-8 is left to pyo3, to refuse.
                if let Ok(text) = tenant.to_str() {
                    // SAFETY: as this function's.
                    return unsafe { admit_for(py, slf, Some((&tenant, text))) };
                }
            }
            None => {}
        }
        // SAFETY: pyo3's wrapper of the `#[pymethods]` `admit` takes what
        // CPython passes a fastcall method, as this one does.
        unsafe { PyDependency::__pymethod_admit__(py, slf, args, nargs, kwnames) }
    }

    /// `admit(tenant=tenant)`, with the tenant's text.
    ///
    /// # Safety
    /// `slf` is a `Dependency`, borrowed.
    #[inline(always)]
    unsafe fn admit_for<'py>(
        py: Python<'py>,
        slf: *mut ffi::PyObject,
        tenant: Option<(&Bound<'py, PyString>, &str)>,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: `slf` is a `Dependency` (the method's descriptor checked
        // what CPython passes), borrowed.
        let this = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<PyDependency>() }.get();
        let decision = PyDecision::admit(py, &this.dep, &this.bank, tenant, None, None)?;
        Ok(Bound::new(py, decision)?.into_ptr())
    }

    /// The tenant of an `admit` call that gives nothing else (the other
    /// arguments absent or None), as the asyncio helpers (positionally) and
    /// the HTTP gates (`tenant=`) call it: `Some(None)` for no tenant,
    /// `Some(Some(..))` for a str; `None` for any other call.
    fn plain_tenant<'a, 'py>(
        py: Python<'py>,
        a: &fastcall::Args<'a, 'py>,
    ) -> Option<Option<Borrowed<'a, 'py, PyString>>> {
        let tenant = if a.has_keywords() {
            if a.len() != 0 || a.keyword_count() != 1 {
                return None;
            }
            let (name, value) = a.keywords().next()?;
            // Keyword names are interned: the caller's `tenant` is ours.
            if !name.is(option_names(py)[0]) {
                return None;
            }
            value
        } else {
            if !(1..=3).contains(&a.len()) || !a.positional_from(1).all(|v| v.is_none()) {
                return None;
            }
            a.get(0)?
        };
        if tenant.is_instance_of::<PyString>() {
            // SAFETY: just checked.
            Some(Some(unsafe { tenant.cast_unchecked::<PyString>() }))
        } else {
            tenant.is_none().then_some(None)
        }
    }

    /// What `call` and `acall` take: the callable, the positional and
    /// keyword arguments for it, and breakerbank's options, checked.
    struct Parsed<'a, 'py> {
        f: Borrowed<'a, 'py, PyAny>,
        /// None: no positional arguments (no tuple made).
        rest: Option<Bound<'py, PyTuple>>,
        extra: Option<Bound<'py, PyDict>>,
        o: CallOptions<'py>,
    }

    /// Reads `method(fn, *args, tenant=…, deadline=…, fallback=…,
    /// cache_key=…, classify=…, **kwargs)` as CPython passes it.
    #[inline(always)]
    fn parse<'a, 'py>(
        py: Python<'py>,
        a: &fastcall::Args<'a, 'py>,
        method: &str,
    ) -> PyResult<Parsed<'a, 'py>> {
        let Some(f) = a.get(0) else {
            return Err(no_callable(method));
        };
        // No tuple for a call without positional arguments.
        let rest = match a.len() {
            1 => None,
            _ => Some(PyTuple::new(py, a.positional_from(1))?),
        };
        let mut extra: Option<Bound<'py, PyDict>> = None;
        // Without keywords there is nothing to check.
        let o = if a.has_keywords() {
            // Borrowed, as CPython passes them: a keyword of ours costs no
            // reference count until it is checked.
            let mut found: [Option<Borrowed<'_, 'py, PyAny>>; 6] = [None; 6];
            let ours = option_names(py);
            for (key, value) in a.keywords() {
                match option_index(&ours, &key) {
                    Some(j) => found[j] = Some(value),
                    None => extra
                        .get_or_insert_with(|| PyDict::new(py))
                        .set_item(key, value)?,
                }
            }
            checked_options(found)?
        } else {
            CallOptions::default()
        };
        Ok(Parsed { f, rest, extra, o })
    }

    #[cold]
    #[inline(never)]
    fn no_callable(method: &str) -> PyErr {
        Error::Type(format!(
            "Dependency.{method}() needs the callable as its first argument"
        ))
        .into()
    }

    /// `acall` as pyo3's fastcall trampoline runs it.
    ///
    /// # Safety
    /// As for [`admit`].
    unsafe fn acall(
        py: Python<'_>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: as this function's.
        let a = unsafe { fastcall::Args::new(py, args, nargs, kwnames) };
        // SAFETY: `slf` is a `Dependency` (the method's descriptor checked
        // what CPython passes), borrowed.
        let slf = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<PyDependency>() };
        let Parsed { f, rest, extra, o } = parse(py, &a, "acall")?;
        let awaitable = PyDependency::delegate_acall(
            &slf,
            f.to_owned(),
            rest.unwrap_or_else(|| PyTuple::empty(py)),
            extra,
            o.tenant,
            o.deadline,
            o.fallback,
            o.cache_key,
            o.classify,
            o.classify_ok,
        )?;
        Ok(awaitable.into_ptr())
    }

    /// The method's body as pyo3's fastcall trampoline runs it: the
    /// interpreter is attached (the caller's), which the trampoline only
    /// records for pyo3, where `Python::attach` would ask CPython.
    ///
    /// # Safety
    /// As for [`body`].
    unsafe fn call(
        py: Python<'_>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: the arguments are CPython's, as `body` requires.
        let result = catch_unwind(AssertUnwindSafe(|| unsafe {
            body(py, slf, args, nargs, kwnames)
        }));
        match result {
            Ok(Ok(value)) => Ok(value.into_ptr()),
            // Raised here rather than by the trampoline: a refusal's
            // exception goes to the interpreter without a `PyErr`.
            Ok(Err(raised)) => {
                raised.restore(py);
                Ok(std::ptr::null_mut())
            }
            // No panic crosses into the interpreter.
            Err(_) => Err(PyRuntimeError::new_err(
                "breakerbank: Dependency.call panicked",
            )),
        }
    }

    /// # Safety
    /// As CPython calls a `METH_FASTCALL | METH_KEYWORDS` method: `slf` the
    /// instance, `args` `nargs` positional values followed by one value per
    /// name of `kwnames` (a tuple of str, or null), all borrowed.
    unsafe fn body<'py>(
        py: Python<'py>,
        slf: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> Result<Bound<'py, PyAny>, Raised<'py>> {
        // SAFETY: CPython passes the instance, borrowed.
        let slf = unsafe { Bound::from_borrowed_ptr(py, slf) };
        let this = slf.cast::<PyDependency>().map_err(PyErr::from)?.get();
        // SAFETY: as this function's.
        let a = unsafe { fastcall::Args::new(py, args, nargs, kwnames) };
        let Parsed { f, rest, extra, o } = parse(py, &a, "call")?;
        let tenant = opt_text(&this.dep, o.tenant.as_ref())?;
        let cache_key = o.cache_key.as_ref().map(|t| t.to_str()).transpose()?;
        this.run(py, &f, rest.as_ref(), extra.as_ref(), tenant, cache_key, &o)
    }
}

pub use vectorcall::install as install_methods;
