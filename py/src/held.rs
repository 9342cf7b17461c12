//! Python objects the core holds on a bank's behalf, owned where the
//! garbage collector can see them.
//!
//! The core keeps what it is given inside Rust (listener closures, stale
//! values), where Python's cycle collector cannot follow references. A
//! listener that refers to its bank would then keep the bank, its event
//! thread and everything reachable from it alive for good. So the core only
//! gets handles, and the Python objects themselves live in the `Bank`
//! object, which reports them from `__traverse__` and drops them in
//! `__clear__`. Every Python object that keeps the core alive (`Bank`,
//! `Dependency`, `Decision`) refers to that `Bank`, so a cycle through any
//! of them is visible.
//!
//! A dependency's classification rule (C17) is held the same way: in the
//! `Bank` object's `Rules` (see `outcome`), by dependency id.
//!
//! The locks here are held only to move or count references: no Python
//! code runs, no Python object is allocated or released under them. The
//! collector, which runs on allocation, therefore never finds them taken by
//! the thread it runs on; `__traverse__` still only `try_lock`s, since
//! blocking there could deadlock the interpreter.

use crate::outcome::Rules;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

/// Takes `m` without blocking, for `__traverse__`.
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        // Unreachable by the rule above; not reporting only keeps the
        // objects alive, which is safe.
        Err(TryLockError::WouldBlock) => None,
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning needs a panic under the lock; the data is valid anyway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bank's event listeners, in subscription order.
#[derive(Debug, Default)]
pub struct Listeners(Mutex<Vec<Py<PyAny>>>);

impl Listeners {
    /// Adds a listener.
    pub fn push(&self, listener: Py<PyAny>) {
        lock(&self.0).push(listener);
    }

    /// New references to the listeners, for one delivery: they are called
    /// after the lock is released.
    pub fn snapshot(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        lock(&self.0).iter().map(|l| l.clone_ref(py)).collect()
    }

    /// Reports each listener to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(list) = try_lock(&self.0) else {
            return Ok(());
        };
        for l in list.iter() {
            visit.call(l)?;
        }
        Ok(())
    }

    /// Drops every listener (outside the lock: dropping one may run
    /// arbitrary Python code).
    pub fn clear(&self) {
        let taken = std::mem::take(&mut *lock(&self.0));
        drop(taken);
    }
}

/// The values of the bank's stale caches, by ticket number.
#[derive(Debug, Default)]
pub struct Values {
    map: Mutex<HashMap<u64, Py<PyAny>>>,
    next: AtomicU64,
}

impl Values {
    /// Keeps `value`; the core's cache gets the returned ticket.
    pub fn put(self: &Arc<Self>, value: Py<PyAny>) -> Cached {
        // Relaxed: only uniqueness matters, and the map's lock orders the rest.
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let replaced = lock(&self.map).insert(id, value);
        debug_assert!(replaced.is_none(), "ticket numbers are unique");
        Cached::Stored(Arc::new(Ticket {
            id,
            values: Arc::downgrade(self),
        }))
    }

    fn get(&self, py: Python<'_>, id: u64) -> Option<Py<PyAny>> {
        lock(&self.map).get(&id).map(|v| v.clone_ref(py))
    }

    /// Reports each value to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Some(map) = try_lock(&self.map) else {
            return Ok(());
        };
        for v in map.values() {
            visit.call(v)?;
        }
        Ok(())
    }

    /// Drops every value (outside the lock, as `Listeners::clear`).
    pub fn clear(&self) {
        let taken = std::mem::take(&mut *lock(&self.map));
        drop(taken);
    }
}

/// A value as the core handles it: cloning it (the cache clones what it
/// serves) is cheap and needs no interpreter.
#[derive(Clone, Debug)]
pub enum Cached {
    /// In a stale cache: the value lives in the bank's `Values`.
    Stored(Arc<Ticket>),
}

impl Cached {
    /// The Python value of a stored value; `None` once the bank's values
    /// were cleared (the bank is being collected).
    pub fn value(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        match self {
            Cached::Stored(t) => t.values.upgrade()?.get(py, t.id),
        }
    }
}

/// A stale cache's claim on one value of `Values`; the value goes when the
/// cache drops its last clone (replaced or evicted).
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    values: Weak<Values>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(values) = self.values.upgrade() {
            let value = lock(&values.map).remove(&self.id);
            drop(value);
        }
    }
}

/// What a `Dependency` or `Decision` keeps of its bank: the `Bank` object
/// itself, reported to the collector (see above), and the store its stale
/// values go to.
#[derive(Debug)]
pub struct BankHandle {
    bank: Py<PyAny>,
    values: Arc<Values>,
    rules: Arc<Rules>,
}

impl BankHandle {
    /// A handle on `bank`, whose stale values go to `values` and whose
    /// dependencies' classification rules are `rules`.
    pub fn new(bank: Py<PyAny>, values: Arc<Values>, rules: Arc<Rules>) -> Self {
        Self {
            bank,
            values,
            rules,
        }
    }

    /// Where the bank's stale values are kept.
    pub fn values(&self) -> &Arc<Values> {
        &self.values
    }

    /// The classification rules of the bank's dependencies (C17).
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// A handle for one decision: the store only where the decision can
    /// keep a value (`stale`: its dependency has a stale fallback), so
    /// other decisions cost no atomic reference count.
    pub fn for_decision(&self, py: Python<'_>, stale: bool) -> DecisionBank {
        DecisionBank {
            bank: self.bank.clone_ref(py),
            values: stale.then(|| self.values.clone()),
        }
    }

    /// Reports the bank to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.bank)
    }
}

/// What a `Decision` keeps of its bank (see [`BankHandle::for_decision`]).
#[derive(Debug)]
pub struct DecisionBank {
    bank: Py<PyAny>,
    values: Option<Arc<Values>>,
}

impl DecisionBank {
    /// The stale-value store, where the decision's dependency has one.
    pub fn values(&self) -> Option<&Arc<Values>> {
        self.values.as_ref()
    }

    /// Reports the bank to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.bank)
    }
}

/// A Python str kept for a Rust string that seldom changes (a
/// dependency's declared error code, which a reload may change), so a
/// refusal reuses it rather than making one. The first string asked for
/// is kept; another (after such a reload) is made each time.
pub struct StrCache(PyOnceLock<(Box<str>, Py<PyString>)>);

impl std::fmt::Debug for StrCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StrCache")
    }
}

impl Default for StrCache {
    fn default() -> Self {
        Self(PyOnceLock::new())
    }
}

impl StrCache {
    /// The kept str if it reads `s`, else a new one.
    pub fn get<'py>(&self, py: Python<'py>, s: &str) -> Bound<'py, PyString> {
        // Compared on the Rust copy: no read of the Python string.
        let (text, kept) = self
            .0
            .get_or_init(py, || (s.into(), PyString::new(py, s).unbind()));
        if **text == *s {
            kept.bind(py).clone()
        } else {
            PyString::new(py, s)
        }
    }
}
