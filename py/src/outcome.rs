//! Python's exception rule: the classifier the binding gives the core
//! (`Permit::finish`'s `classify`, as `Outcome::of_error` is Rust's), shared
//! by `call`, `acall`, `guard`, the `with` form and `finish`: a call's
//! `classify=`, then its dependency's rule (`dep.classify(...)`, C17), then
//! the default below.
//!
//! The rule (docs/guide/deadlines.md): `asyncio.CancelledError` → cancelled; `TimeoutError` once the
//! call's deadline has passed on the bank's clock → cancelled;
//! `KeyboardInterrupt` / `SystemExit` / `GeneratorExit` → cancelled; any
//! other exception → failure. A call that returned is a success; the core
//! counts it as a failure when it took at least the dependency's
//! `slow_call` on the bank's clock (`finish` and `record_raw` return the
//! outcome as counted).

use breakerbank::{Dependency, Instant, Outcome};
use pyo3::exceptions::{
    PyBaseException, PyGeneratorExit, PyKeyboardInterrupt, PySystemExit, PyTimeoutError,
    PyTypeError,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

static CANCELLED_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn is_asyncio_cancelled(py: Python<'_>, exc: &Bound<'_, PyAny>) -> bool {
    match CANCELLED_ERROR.import(py, "asyncio", "CancelledError") {
        Ok(ty) => exc.is_instance(ty).unwrap_or(false),
        // asyncio cannot be imported: nothing can be its CancelledError.
        Err(_) => false,
    }
}

/// The outcome of a call that raised `exc` (an exception instance).
pub fn of_exception(
    py: Python<'_>,
    dep: &Dependency,
    exc: &Bound<'_, PyAny>,
    deadline: Option<Instant>,
) -> Outcome {
    if exc.is_instance_of::<PyKeyboardInterrupt>()
        || exc.is_instance_of::<PySystemExit>()
        || exc.is_instance_of::<PyGeneratorExit>()
        || is_asyncio_cancelled(py, exc)
    {
        return Outcome::Cancelled;
    }
    if exc.is_instance_of::<PyTimeoutError>() {
        if let Some(deadline) = deadline {
            // "A deadline equal to now has expired" (C10).
            if dep.now() >= deadline {
                return Outcome::Cancelled;
            }
        }
    }
    Outcome::Failure
}

/// One entry of a dependency's rule: an exception type (the exception is
/// an instance of it) or a predicate (a callable of the exception, true
/// when it applies).
#[derive(Debug)]
enum Matcher {
    Type(Py<PyType>),
    Predicate(Py<PyAny>),
}

impl Matcher {
    fn matches(&self, py: Python<'_>, exc: &Bound<'_, PyAny>) -> PyResult<bool> {
        match self {
            Matcher::Type(t) => exc.is_instance(t.bind(py)),
            Matcher::Predicate(f) => f.bind(py).call1((exc,))?.is_truthy(),
        }
    }
}

/// A dependency's classification rule (C17), set by `dep.classify(...)`:
/// which exceptions count as failure, success or cancelled. When several
/// lists match, failure wins over cancelled, and cancelled over success: a
/// breaker errs on the side of seeing an outage. An exception no list
/// matches is left to the exception rule ([`of_exception`]).
#[derive(Debug, Default)]
pub struct Rule {
    failure: Vec<Matcher>,
    cancelled: Vec<Matcher>,
    success: Vec<Matcher>,
}

fn matchers(v: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<Matcher>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let one = |item: Bound<'_, PyAny>| -> PyResult<Matcher> {
        if let Ok(t) = item.cast::<PyType>() {
            if t.is_subclass_of::<PyBaseException>()? {
                return Ok(Matcher::Type(t.clone().unbind()));
            }
        } else if item.is_callable() {
            return Ok(Matcher::Predicate(item.unbind()));
        }
        Err(PyTypeError::new_err(format!(
            "{what}= takes exception types and predicates (callables of the exception), got {}",
            item.repr()
                .map_or_else(|_| "?".to_owned(), |r| r.to_string())
        )))
    };
    // A single type or predicate, or an iterable of them (a type is
    // iterable only through its metaclass, so it is taken first).
    if v.cast::<PyType>().is_ok() || (v.is_callable() && v.cast::<PyTuple>().is_err()) {
        return Ok(vec![one(v.clone())?]);
    }
    v.try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}= takes an exception type, a predicate, or a tuple of them"
            ))
        })?
        .map(|item| one(item?))
        .collect()
}

impl Rule {
    /// The rule of `dep.classify(failure=…, success=…, cancelled=…)`; each
    /// argument a type, a predicate, or an iterable of them. `None` when
    /// every list is empty (no rule).
    pub fn parse(
        failure: Option<&Bound<'_, PyAny>>,
        success: Option<&Bound<'_, PyAny>>,
        cancelled: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Self>> {
        let rule = Rule {
            failure: matchers(failure, "failure")?,
            cancelled: matchers(cancelled, "cancelled")?,
            success: matchers(success, "success")?,
        };
        let empty = rule.failure.is_empty() && rule.cancelled.is_empty() && rule.success.is_empty();
        Ok((!empty).then_some(rule))
    }

    /// What the rule says of `exc`, if any list matches it.
    fn decide(&self, py: Python<'_>, exc: &Bound<'_, PyAny>) -> PyResult<Option<Outcome>> {
        for (list, outcome) in [
            (&self.failure, Outcome::Failure),
            (&self.cancelled, Outcome::Cancelled),
            (&self.success, Outcome::Success),
        ] {
            for m in list {
                if m.matches(py, exc)? {
                    return Ok(Some(outcome));
                }
            }
        }
        Ok(None)
    }

    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        for m in self
            .failure
            .iter()
            .chain(&self.cancelled)
            .chain(&self.success)
        {
            match m {
                Matcher::Type(t) => visit.call(t)?,
                Matcher::Predicate(f) => visit.call(f)?,
            }
        }
        Ok(())
    }
}

/// The rules set on a bank's dependencies, by dependency id. Owned by the
/// `Bank` object, which reports them to the collector (see `held`); a
/// decision keeps the rule of its admission by reference count and does
/// not report it (one owner reports each object).
#[derive(Debug, Default)]
pub struct Rules {
    by_dependency: RwLock<HashMap<u32, Arc<Rule>>>,
    /// Whether any dependency has a rule: admissions skip the lock if not.
    any: AtomicBool,
}

impl Rules {
    /// Sets (or with `None` clears) the rule of dependency `id`.
    pub fn set(&self, id: u32, rule: Option<Rule>) {
        let old = {
            let mut map = self
                .by_dependency
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let old = match rule {
                Some(r) => map.insert(id, Arc::new(r)),
                None => map.remove(&id),
            };
            // Relaxed: a hint; the lock orders the map itself.
            self.any.store(!map.is_empty(), Ordering::Relaxed);
            old
        };
        // Dropped outside the lock: dropping may run Python code.
        drop(old);
    }

    /// The rule of dependency `id`, if one is set.
    #[inline]
    pub fn get(&self, id: u32) -> Option<Arc<Rule>> {
        // Relaxed: see `set`. Inlined: most banks set no rule, and every
        // admission asks.
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        self.lookup(id)
    }

    fn lookup(&self, id: u32) -> Option<Arc<Rule>> {
        self.by_dependency
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// Reports every rule's types and predicates to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never blocks in the collector (see `held`).
        let Ok(map) = self.by_dependency.try_read() else {
            return Ok(());
        };
        for rule in map.values() {
            rule.traverse(visit)?;
        }
        Ok(())
    }

    /// Drops every rule (outside the lock).
    pub fn clear(&self) {
        let taken = std::mem::take(
            &mut *self
                .by_dependency
                .write()
                .unwrap_or_else(|e| e.into_inner()),
        );
        self.any.store(false, Ordering::Relaxed);
        drop(taken);
    }
}

/// A per-call `classify=`: None, or a callable (checked before admission,
/// so a bad one counts against nothing).
pub fn per_call<'py>(v: Option<Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
    match v {
        Some(f) if f.is_none() => Ok(None),
        Some(f) if !f.is_callable() => Err(PyTypeError::new_err(format!(
            "classify must be a callable of the exception returning \"success\", \"failure\", \"cancelled\" or None, got {}",
            f.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))),
        f => Ok(f),
    }
}

/// What `classify(exc)` returned, as an outcome; None leaves it to the rule.
fn returned(v: &Bound<'_, PyAny>) -> PyResult<Option<Outcome>> {
    if v.is_none() {
        return Ok(None);
    }
    match v.extract::<&str>() {
        Ok("success") => Ok(Some(Outcome::Success)),
        Ok("failure") => Ok(Some(Outcome::Failure)),
        Ok("cancelled") => Ok(Some(Outcome::Cancelled)),
        _ => Err(PyTypeError::new_err(format!(
            "classify must return \"success\", \"failure\", \"cancelled\" or None, got {}",
            v.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
        ))),
    }
}

/// The outcome of a call that raised `exc`, the one place C17's rule is
/// applied for Python: the call's `classify` if it says, else the
/// dependency's rule if a list matches, else the exception rule
/// ([`of_exception`]). A classifier that raises, or returns anything but
/// an outcome name or None, makes the outcome the exception rule's and its
/// error is returned (the caller raises it in place of `exc`, which it
/// carries as `__context__`).
pub fn classify(
    py: Python<'_>,
    dep: &Dependency,
    exc: &Bound<'_, PyAny>,
    deadline: Option<Instant>,
    per_call: Option<&Bound<'_, PyAny>>,
    rule: Option<&Rule>,
) -> (Outcome, Option<PyErr>) {
    let decided = (|| -> PyResult<Option<Outcome>> {
        if let Some(f) = per_call {
            if let Some(o) = returned(&f.call1((exc,))?)? {
                return Ok(Some(o));
            }
        }
        match rule {
            Some(r) => r.decide(py, exc),
            None => Ok(None),
        }
    })();
    match decided {
        Ok(Some(o)) => (o, None),
        Ok(None) => (of_exception(py, dep, exc, deadline), None),
        Err(e) => {
            let _ = e.value(py).setattr(intern!(py, "__context__"), exc);
            (of_exception(py, dep, exc, deadline), Some(e))
        }
    }
}
