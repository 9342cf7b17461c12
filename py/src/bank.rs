//! `breakerbank.Bank`: a profile's dependencies on one clock, with metrics,
//! stuck detection and events.

use crate::clock::PyManualClock;
use crate::dependency::PyDependency;
use crate::errors::{secs, Error};
use crate::held::{BankHandle, Listeners, Values};
use crate::outcome::Rules;
use crate::time::instant_secs;
use breakerbank::{Bank, Event, MetricValue, PartitionMetrics, Profile, METRICS};
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};
use std::path::PathBuf;
use std::sync::{Arc, Once};

/// A bank of circuit breakers: one per dependency and partition (C1).
///
/// Build it with `Bank.from_yaml(text, clock=None)` or
/// `Bank.load(path, clock=None)`; get a dependency with `bank["name"]`.
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

fn build(text: &str, clock: Option<&Bound<'_, PyManualClock>>) -> Result<PyBank, Error> {
    let profile = Profile::from_yaml(text)?;
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
            // API.md's `stuck` is "0 or 1": an int, not a bool.
            MetricValue::Flag(b) => d.set_item(m.name, u8::from(b))?,
        }
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
        text: &str,
        clock: Option<&Bound<'_, PyManualClock>>,
    ) -> Result<Self, Error> {
        build(text, clock)
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
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snap = self.bank.metrics();
        let out = PyDict::new(py);
        for dep in &snap.dependencies {
            let parts = PyDict::new(py);
            for p in &dep.partitions {
                parts.set_item(p.partition.as_str(), partition_dict(py, p)?)?;
            }
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
    /// operator trip and half-open, stuck alert (C16, C19) and reload (C20,
    /// one per dependency it kept, added or removed, partition `"*"`), with
    /// `event` a dict: `kind` ("transition", "reset", "forced_open", "trip",
    /// "half_open", "stuck" or "reload"), `dependency`, `partition`, `at`
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
    /// None (C17, as for `Dependency.call`).
    #[pyo3(signature = (dependency, tenant_arg="tenant", fallback=None, cache_key=None, classify=None))]
    fn guard<'py>(
        slf: &Bound<'py, Self>,
        dependency: &str,
        tenant_arg: Option<&str>,
        fallback: Option<Bound<'py, PyAny>>,
        cache_key: Option<Bound<'py, PyAny>>,
        classify: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let guard = GUARD.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("breakerbank._guard")?.getattr("guard")?.unbind())
        })?;
        guard
            .bind(py)
            .call1((slf, dependency, tenant_arg, fallback, cache_key, classify))
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
