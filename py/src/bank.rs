//! `breakerbank.Bank`: a profile's dependencies on one clock, with metrics,
//! stuck detection and events.

use crate::clock::PyManualClock;
use crate::dependency::PyDependency;
use crate::errors::{secs, Error};
use crate::held::{BankHandle, Listeners, Values};
use crate::outcome::Rules;
use crate::time::instant_secs;
use breakerbank::serde_yaml_ng::{Mapping, Value};
use breakerbank::{Bank, DependencyTotals, Event, MetricValue, PartitionMetrics, Profile, METRICS};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple, PyType};
use std::path::PathBuf;
use std::sync::{Arc, Once};

/// A bank of circuit breakers: one per dependency and partition (C1).
///
/// Build it with `Bank.from_yaml(text, clock=None)`,
/// `Bank.from_dict(profile, clock=None)` or `Bank.load(path, clock=None)`;
/// get a dependency with `bank["name"]`.
#[pyclass(frozen, weakref, module = "breakerbank", name = "Bank")]
pub struct PyBank {
    bank: Bank,
    /// The Python listeners; the core holds only a weak handle to them, so
    /// the collector sees them here (see `held`).
    listeners: Arc<Listeners>,
    /// The core gets one dispatcher, subscribed with the first listener.
    subscribed: Once,
    /// The stale caches' Python values; the core's caches hold tickets.
    values: Arc<Values>,
    /// The dependencies' classification rules (C17), by dependency id.
    rules: Arc<Rules>,
}

impl std::fmt::Debug for PyBank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyBank")
            .field("dependencies", &self.bank.dependency_names())
            .finish()
    }
}

impl PyBank {
    /// What a dependency and its decisions keep of this bank.
    fn handle(&self, slf: &Bound<'_, Self>) -> BankHandle {
        BankHandle::new(
            slf.clone().into_any().unbind(),
            self.values.clone(),
            self.rules.clone(),
        )
    }
}

static GUARD: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// How deep a profile given as data may nest: the YAML profile needs four
/// levels; the bound keeps a mapping that contains itself from recursing
/// for ever.
const MAX_DEPTH: usize = 32;

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A Python profile value as the YAML value the core checks: the bindings
/// translate, the core validates. `at` is the value's path, for messages.
fn to_value(obj: &Bound<'_, PyAny>, at: &str, depth: usize) -> PyResult<Value> {
    let here = || {
        if at.is_empty() {
            "the profile".to_string()
        } else {
            format!("`{at}`")
        }
    };
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{} nests more than {MAX_DEPTH} levels deep",
            here()
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(n) = obj.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = obj.extract::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        return Ok(Value::Number(obj.extract::<f64>()?.into()));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Number(f.value().into()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(map) = obj.cast::<PyMapping>() {
        let mut out = Mapping::new();
        for item in map.items()?.iter() {
            let (key, value) = item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
            let key_text = key.str()?.to_cow()?.into_owned();
            let path = if at.is_empty() {
                key_text
            } else {
                format!("{at}.{key_text}")
            };
            let key = match to_value(&key, &path, depth + 1)? {
                k @ (Value::String(_) | Value::Number(_) | Value::Bool(_)) => k,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "a key of {} is a {}: profile keys are str",
                        here(),
                        type_name(&key)
                    )))
                }
            };
            out.insert(key, to_value(&value, &path, depth + 1)?);
        }
        return Ok(Value::Mapping(out));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            out.push(to_value(&item?, &format!("{at}[{i}]"), depth + 1)?);
        }
        return Ok(Value::Sequence(out));
    }
    Err(PyTypeError::new_err(format!(
        "{} is a {}: a profile's values are str (durations like \"30s\"), int, float, bool, None, lists and dicts",
        here(),
        type_name(obj)
    )))
}

fn build(text: &str, clock: Option<&Bound<'_, PyManualClock>>) -> Result<PyBank, Error> {
    with_profile(Profile::from_yaml(text)?, clock)
}

fn with_profile(
    profile: Profile,
    clock: Option<&Bound<'_, PyManualClock>>,
) -> Result<PyBank, Error> {
    let bank = match clock {
        Some(c) => Bank::try_with_clock(profile, c.get().inner.clone()),
        None => Bank::try_new(profile),
    }?;
    Ok(PyBank {
        bank,
        listeners: Arc::default(),
        subscribed: Once::new(),
        values: Arc::default(),
        rules: Arc::default(),
    })
}

fn partition_dict<'py>(py: Python<'py>, p: &PartitionMetrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("state", p.state.as_str())?;
    for m in &METRICS {
        match (m.read)(p) {
            MetricValue::Count(n) => d.set_item(m.name, n)?,
            MetricValue::Seconds(s) => d.set_item(m.name, s)?,
            // The `stuck` metric is "0 or 1": an int, not a bool.
            MetricValue::Flag(b) => d.set_item(m.name, u8::from(b))?,
        }
    }
    Ok(d)
}

/// The partition key `*`: the dependency as a whole (C14), evicted
/// partitions included: every metric summed (`stuck`: how many are),
/// `partitions` by state, `calls_total` by outcome, and
/// `call_duration_seconds` (`count`, `sum`, cumulative `buckets` as
/// `(le, count)`) for a dependency whose calls are timed.
fn totals_dict<'py>(py: Python<'py>, t: &DependencyTotals) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for &(name, v) in &t.sums {
        if name.contains("seconds") {
            d.set_item(name, v)?;
        } else {
            d.set_item(name, v as u64)?;
        }
    }
    let states = PyDict::new(py);
    for &(s, n) in &t.partitions {
        states.set_item(s.as_str(), n)?;
    }
    d.set_item("partitions", states)?;
    let calls = PyDict::new(py);
    calls.set_item("success", t.calls.success)?;
    calls.set_item("failure", t.calls.failure)?;
    calls.set_item("cancelled", t.calls.cancelled)?;
    calls.set_item("refused", t.calls.refused)?;
    d.set_item("calls_total", calls)?;
    if let Some(h) = &t.call_durations {
        let hist = PyDict::new(py);
        hist.set_item("count", h.count)?;
        hist.set_item("sum", h.sum_seconds)?;
        hist.set_item("buckets", h.buckets.clone())?;
        d.set_item("call_duration_seconds", hist)?;
    }
    Ok(d)
}

fn event_dict<'py>(py: Python<'py>, ev: &Event) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", ev.kind.as_str())?;
    d.set_item("dependency", ev.dependency.as_str())?;
    d.set_item("partition", ev.partition.as_str())?;
    d.set_item("at", instant_secs(ev.at))?;
    d.set_item("from", ev.from.map(|s| s.as_str()))?;
    d.set_item("to", ev.to.map(|s| s.as_str()))?;
    Ok(d)
}

#[pymethods]
impl PyBank {
    /// A bank from a YAML profile. `clock=None` uses the system's monotonic
    /// clock; pass a `ManualClock` to move time by hand. Raises ConfigError
    /// listing every problem.
    #[classmethod]
    #[pyo3(signature = (text, clock=None))]
    fn from_yaml(
        _cls: &Bound<'_, PyType>,
        text: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyManualClock>>,
    ) -> PyResult<Self> {
        let Ok(text) = text.cast::<PyString>() else {
            let hint = if text.cast::<PyMapping>().is_ok() {
                "; for a profile given as a dict, use Bank.from_dict(profile)"
            } else {
                ""
            };
            return Err(PyTypeError::new_err(format!(
                "Bank.from_yaml takes the profile's YAML text (str), got {}{hint}",
                type_name(text)
            )));
        };
        Ok(build(&text.to_cow()?, clock)?)
    }

    /// A bank from a profile given as data: a dict (or any mapping) of the
    /// YAML profile's shape, with the same checks and messages as
    /// `from_yaml`. Durations are strings with a unit (`"30s"`); values are
    /// str, int, float, bool, None, lists and mappings.
    #[classmethod]
    #[pyo3(signature = (profile, clock=None))]
    fn from_dict(
        _cls: &Bound<'_, PyType>,
        profile: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyManualClock>>,
    ) -> PyResult<Self> {
        if profile.cast::<PyMapping>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "Bank.from_dict takes the profile as a dict, got {}{}",
                type_name(profile),
                if profile.cast::<PyString>().is_ok() {
                    "; for YAML text, use Bank.from_yaml(text)"
                } else {
                    ""
                }
            )));
        }
        let value = to_value(profile, "", 0)?;
        let profile = Profile::from_value(value).map_err(Error::from)?;
        Ok(with_profile(profile, clock)?)
    }

    /// A bank from a YAML profile file (`str` or path-like).
    #[classmethod]
    #[pyo3(signature = (path, clock=None))]
    fn load(
        _cls: &Bound<'_, PyType>,
        path: PathBuf,
        clock: Option<&Bound<'_, PyManualClock>>,
    ) -> PyResult<Self> {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            // Keep the OSError subclass (FileNotFoundError, …), name the file.
            let err = PyErr::from(e);
            Python::attach(|py| {
                let msg = format!(
                    "cannot read profile `{}`: {}",
                    path.display(),
                    err.value(py)
                );
                PyErr::from_type(err.get_type(py), msg)
            })
        })?;
        Ok(build(&text, clock)?)
    }

    /// Puts a new YAML profile in force (C20), all or nothing: a
    /// ConfigError (listing every problem) leaves the running profile as
    /// it was. Unchanged dependencies keep their breakers' state, counters,
    /// calls in flight and stale values; the next decision uses the new
    /// values. A dependency that needs new partitions (a changed
    /// isolation, trip policy kind or window, or a max_tenants above its
    /// table's size) starts afresh: its old handles raise
    /// UnknownDependency, as a removed dependency's do; bank[name] finds
    /// the new one.
    fn reload(&self, py: Python<'_>, text: &str) -> Result<(), Error> {
        let profile = Profile::from_yaml(text)?;
        py.detach(|| self.bank.reload(profile))?;
        Ok(())
    }

    /// The dependency names, in profile order.
    #[getter]
    fn dependencies(&self) -> Vec<&str> {
        self.bank.dependency_names()
    }

    /// The bank's ManualClock, or None on the system clock.
    #[getter]
    fn clock(&self) -> Option<PyManualClock> {
        self.bank
            .manual_clock()
            .map(|c| PyManualClock { inner: c.clone() })
    }

    /// Now, in seconds on the bank's clock (for deadlines).
    fn now(&self) -> f64 {
        instant_secs(self.bank.now())
    }

    fn __getitem__(slf: &Bound<'_, Self>, name: &str) -> Result<PyDependency, Error> {
        let this = slf.get();
        this.bank
            .dependency(name)
            .map(|dep| PyDependency::new(slf.py(), dep, this.handle(slf)))
            .ok_or_else(|| Error::UnknownDependency {
                name: name.to_owned(),
                known: this
                    .bank
                    .dependency_names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            })
    }

    fn __contains__(&self, name: &str) -> bool {
        self.bank.dependency_id(name).is_some()
    }

    /// `{dependency: {partition: {metric: value}}}` for live partitions;
    /// `state` is a string, `stuck` 0 or 1, seconds are floats, counts ints.
    /// The partition key `*` is the dependency as a whole (C14).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snap = self.bank.metrics();
        let out = PyDict::new(py);
        for dep in &snap.dependencies {
            let parts = PyDict::new(py);
            for p in &dep.partitions {
                parts.set_item(p.partition.as_str(), partition_dict(py, p)?)?;
            }
            parts.set_item("*", totals_dict(py, &dep.totals)?)?;
            out.set_item(dep.name.as_str(), parts)?;
        }
        Ok(out)
    }

    /// The metrics in Prometheus text exposition format.
    fn prometheus(&self) -> String {
        self.bank.prometheus()
    }

    /// Breakers not closed within their `recovery_bound` of tripping (C15):
    /// `[{"dependency", "partition", "open_for": seconds}]`.
    fn stuck<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for s in self.bank.stuck() {
            let d = PyDict::new(py);
            d.set_item("dependency", s.dependency.as_str())?;
            d.set_item("partition", s.partition.as_str())?;
            d.set_item("open_for", secs(s.open_for))?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Calls `listener(event)` for every transition, reset, forced open,
    /// operator trip and half-open, stuck alert (C16, C19), reload (C20,
    /// one per dependency it kept, added or removed, partition `"*"`) and
    /// would-trip of a dependency in observe mode (C22, no states), with
    /// `event` a dict: `kind` ("transition", "reset", "forced_open", "trip",
    /// "half_open", "stuck", "reload" or "would_trip"), `dependency`, `partition`, `at`
    /// (seconds on the bank's clock), `from`, `to`.
    /// An exception in the listener is reported as unraisable and ignored.
    /// Returns the listener, so this works as a decorator.
    fn on_event<'py>(&self, listener: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if !listener.is_callable() {
            return Err(Error::Type("on_event(listener): listener must be callable".into()).into());
        }
        self.listeners.push(listener.clone().unbind());
        self.subscribed.call_once(|| {
            let listeners = Arc::downgrade(&self.listeners);
            self.bank.subscribe(move |ev: &Event| {
                // During interpreter shutdown there is nobody left to tell.
                let _ = Python::try_attach(|py| {
                    // Upgraded while attached: if the bank goes meanwhile,
                    // the listeners are released here, where that is allowed.
                    let Some(listeners) = listeners.upgrade() else {
                        return;
                    };
                    for cb in listeners.snapshot(py) {
                        let cb = cb.bind(py);
                        if let Err(e) = event_dict(py, ev).and_then(|d| cb.call1((d,))) {
                            e.write_unraisable(py, Some(cb));
                        }
                    }
                });
            });
        });
        Ok(listener)
    }

    /// Waits (without holding the GIL) until every event emitted so far has
    /// reached every listener, or `timeout` seconds pass; True when delivered.
    #[pyo3(signature = (timeout=5.0))]
    fn flush_events(&self, py: Python<'_>, timeout: f64) -> Result<bool, Error> {
        let timeout = crate::time::duration(timeout, "flush_events(timeout)")?;
        Ok(py.detach(|| self.bank.flush_events(timeout)))
    }

    /// Events dropped because listeners fell behind (the queue is bounded).
    fn events_dropped(&self) -> u64 {
        self.bank.events_dropped()
    }

    /// A decorator running the function through `dependency` (sync or async):
    /// `tenant_arg` names the parameter holding the tenant, `fallback` is the
    /// degraded behaviour, `cache_key` a callable of the call's arguments
    /// returning the stale-cache key, `classify` a callable of an exception
    /// the function raised returning "success", "failure", "cancelled" or
    /// None, `classify_ok` the same of a value it returned (C17, as for
    /// `Dependency.call`). A `fallback` given for a dependency whose
    /// declared fallback is not `degraded` raises TypeError.
    #[pyo3(signature = (dependency, tenant_arg="tenant", fallback=None, cache_key=None, classify=None, classify_ok=None))]
    #[allow(clippy::too_many_arguments)]
    fn guard<'py>(
        slf: &Bound<'py, Self>,
        dependency: &str,
        tenant_arg: Option<&str>,
        fallback: Option<Bound<'py, PyAny>>,
        cache_key: Option<Bound<'py, PyAny>>,
        classify: Option<Bound<'py, PyAny>>,
        classify_ok: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let guard = GUARD.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("breakerbank._guard")?.getattr("guard")?.unbind())
        })?;
        guard.bind(py).call1((
            slf,
            dependency,
            tenant_arg,
            fallback,
            cache_key,
            classify,
            classify_ok,
        ))
    }

    fn __repr__(&self) -> String {
        format!("Bank(dependencies={:?})", self.bank.dependency_names())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.listeners.traverse(&visit)?;
        self.values.traverse(&visit)?;
        self.rules.traverse(&visit)
    }

    /// Breaks a cycle through a listener, a stale value or a classification
    /// rule: the bank is garbage, so nothing is left to deliver events,
    /// serve values or classify exceptions for.
    fn __clear__(&self) {
        self.listeners.clear();
        self.values.clear();
        self.rules.clear();
    }
}
