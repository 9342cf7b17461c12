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
//! The locks here are held only to move or count references: no Python
//! code runs, no Python object is allocated or released under them. The
//! collector, which runs on allocation, therefore never finds them taken by
//! the thread it runs on; `__traverse__` still only `try_lock`s, since
//! blocking there could deadlock the interpreter.

use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// The bank's event listeners, in subscription order.
#[derive(Debug, Default)]
pub struct Listeners(Mutex<Vec<Py<PyAny>>>);

impl Listeners {
    fn lock(&self) -> MutexGuard<'_, Vec<Py<PyAny>>> {
        // Poisoning needs a panic under the lock; the list is valid anyway.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a listener.
    pub fn push(&self, listener: Py<PyAny>) {
        self.lock().push(listener);
    }

    /// New references to the listeners, for one delivery: they are called
    /// after the lock is released.
    pub fn snapshot(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.lock().iter().map(|l| l.clone_ref(py)).collect()
    }

    /// Reports each listener to the collector.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        let list = match self.0.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // Unreachable by the rule above; not reporting only keeps the
            // listeners alive, which is safe.
            Err(TryLockError::WouldBlock) => return Ok(()),
        };
        for l in list.iter() {
            visit.call(l)?;
        }
        Ok(())
    }

    /// Drops every listener (outside the lock: dropping one may run
    /// arbitrary Python code).
    pub fn clear(&self) {
        let taken = std::mem::take(&mut *self.lock());
        drop(taken);
    }
}
