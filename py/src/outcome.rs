//! Python's classification rule (C17): what an exception, or a returned
//! value, of a call counts as, shared by `call`, `acall`, `guard`, the
//! `with` form and `finish`. The outcome it gives ends the core's running
//! call (`Running::end`), which applies `slow_call` (C10).
//!
//! An exception: a call's `classify=`, then its dependency's rule
//! (`dep.classify(...)`), then the default (docs/guide/deadlines.md):
//! `asyncio.CancelledError` → cancelled; `TimeoutError` once the call's
//! deadline has passed on the bank's clock → cancelled;
//! `KeyboardInterrupt` / `SystemExit` / `GeneratorExit` → cancelled; any
//! other exception → failure. A returned value: a call's `classify_ok=`,
//! then the dependency's `result=`, then a success.

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
/// which exceptions count as failure, success or cancelled, and what a
/// returned value counts as (`result`). When several lists match, failure
/// wins over cancelled, and cancelled over success: a breaker errs on the
/// side of seeing an outage. An exception no list matches is left to the
/// exception rule ([`of_exception`]); a value `result` says nothing of (or
/// without one) is a success.
#[derive(Debug, Default)]
pub struct Rule {
    failure: Vec<Matcher>,
    cancelled: Vec<Matcher>,
    success: Vec<Matcher>,
    /// A callable of a returned value: "failure", "success", "cancelled"
    /// or None.
    result: Option<Py<PyAny>>,
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
    /// The rule of `dep.classify(failure=…, success=…, cancelled=…,
    /// result=…)`; each of the first three a type, a predicate, or an
    /// iterable of them, `result` a callable of a returned value. `None`
    /// when every list is empty and there is no `result` (no rule).
    pub fn parse(
        failure: Option<&Bound<'_, PyAny>>,
        success: Option<&Bound<'_, PyAny>>,
        cancelled: Option<&Bound<'_, PyAny>>,
        result: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Self>> {
        let result = match result.filter(|r| !r.is_none()) {
            None => None,
            Some(r) if r.is_callable() => Some(r.clone().unbind()),
            Some(r) => {
                return Err(PyTypeError::new_err(format!(
                    "result= takes a callable of the returned value giving \"success\", \"failure\", \"cancelled\" or None, got {}",
                    type_name(r)
                )))
            }
        };
        let rule = Rule {
            failure: matchers(failure, "failure")?,
            cancelled: matchers(cancelled, "cancelled")?,
            success: matchers(success, "success")?,
            result,
        };
        let empty = rule.failure.is_empty()
            && rule.cancelled.is_empty()
            && rule.success.is_empty()
            && rule.result.is_none();
        Ok((!empty).then_some(rule))
    }

    /// Whether the rule says anything of returned values.
    pub fn has_result(&self) -> bool {
        self.result.is_some()
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
        if let Some(r) = &self.result {
            visit.call(r)?;
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
    /// Whether any dependency's rule has a `result`: calls that returned
    /// skip the lock if not.
    any_result: AtomicBool,
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
            self.any_result
                .store(map.values().any(|r| r.has_result()), Ordering::Relaxed);
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

    /// Whether any dependency's rule says what returned values count as:
    /// most banks have none, and every call that returned asks.
    #[inline(always)]
    pub fn any_result(&self) -> bool {
        // Relaxed: see `set`.
        self.any_result.load(Ordering::Relaxed)
    }

    /// The rule of dependency `id` if it says what returned values count
    /// as.
    pub fn for_results(&self, id: u32) -> Option<Arc<Rule>> {
        if !self.any_result() {
            return None;
        }
        self.lookup(id).filter(|r| r.has_result())
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
        self.any_result.store(false, Ordering::Relaxed);
        drop(taken);
    }
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A per-call `classify=`: None, or a callable (checked before admission,
/// so a bad one counts against nothing).
pub fn per_call<'py>(v: Option<Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
    match v {
        Some(f) if f.is_none() => Ok(None),
        Some(f) if !f.is_callable() => Err(PyTypeError::new_err(format!(
            "classify must be a callable of the exception returning \"success\", \"failure\", \"cancelled\" or None, got {}",
            type_name(&f)
        ))),
        f => Ok(f),
    }
}

/// A per-call `classify_ok=`: None, or a callable of the returned value
/// (checked before admission, as [`per_call`]).
pub fn per_call_ok<'py>(v: Option<Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
    match v {
        Some(f) if f.is_none() => Ok(None),
        Some(f) if !f.is_callable() => Err(PyTypeError::new_err(format!(
            "classify_ok must be a callable of the returned value returning \"success\", \"failure\", \"cancelled\" or None, got {}",
            type_name(&f)
        ))),
        f => Ok(f),
    }
}

/// What a classifier named `what` returned, as an outcome; None leaves it
/// to the next rule.
fn returned(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Outcome>> {
    if v.is_none() {
        return Ok(None);
    }
    match v.extract::<&str>() {
        Ok("success") => Ok(Some(Outcome::Success)),
        Ok("failure") => Ok(Some(Outcome::Failure)),
        Ok("cancelled") => Ok(Some(Outcome::Cancelled)),
        _ => Err(PyTypeError::new_err(format!(
            "{what} must return \"success\", \"failure\", \"cancelled\" or None, got {}",
            v.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
        ))),
    }
}

/// The outcome of a call that returned `value` (C17): the call's
/// `classify_ok` if it says, else the dependency's `result` rule if it
/// says, else a success. A classifier that raises, or returns anything
/// but an outcome name or None, makes the outcome a success and its error
/// is returned (the caller raises it in place of the value).
/// `slow_call` applies afterwards, in the core's record.
pub fn of_value(
    value: &Bound<'_, PyAny>,
    per_call: Option<&Bound<'_, PyAny>>,
    rule: Option<&Rule>,
) -> (Outcome, Option<PyErr>) {
    if per_call.is_none() && rule.is_none() {
        return (Outcome::Success, None);
    }
    classify_value(value, per_call, rule)
}

#[cold]
#[inline(never)]
fn classify_value(
    value: &Bound<'_, PyAny>,
    per_call: Option<&Bound<'_, PyAny>>,
    rule: Option<&Rule>,
) -> (Outcome, Option<PyErr>) {
    let decided = (|| -> PyResult<Option<Outcome>> {
        if let Some(f) = per_call {
            if let Some(o) = returned(&f.call1((value,))?, "classify_ok")? {
                return Ok(Some(o));
            }
        }
        match rule.and_then(|r| r.result.as_ref()) {
            Some(f) => returned(&f.bind(value.py()).call1((value,))?, "the result= rule"),
            None => Ok(None),
        }
    })();
    match decided {
        Ok(o) => (o.unwrap_or(Outcome::Success), None),
        Err(e) => (Outcome::Success, Some(e)),
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
            if let Some(o) = returned(&f.call1((exc,))?, "classify")? {
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
