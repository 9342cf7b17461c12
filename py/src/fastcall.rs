//! Methods put on a class as C functions of our own ([`MethodDef`],
//! [`install`]): `METH_FASTCALL | METH_KEYWORDS` ones run by pyo3's fastcall
//! trampoline, whose arguments arrive as an array and the keyword names as
//! a tuple ([`Args`] reads them), so the method reads what its common call
//! passes without pyo3's argument extraction; and `METH_NOARGS` ones that
//! need no trampoline at all.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};
use std::ffi::CStr;

/// The arguments of a `METH_FASTCALL | METH_KEYWORDS` call: positional
/// values, then keyword names and their values, all borrowed from the
/// caller for the call.
#[derive(Clone, Copy)]
pub struct Args<'a, 'py> {
    py: Python<'py>,
    positional: &'a [*mut ffi::PyObject],
    /// The keyword names (CPython's tuple of str, null for none) and their
    /// values, in the same order.
    names: *mut ffi::PyObject,
    values: &'a [*mut ffi::PyObject],
}

impl<'a, 'py> Args<'a, 'py> {
    /// The arguments as CPython passes them to such a method.
    ///
    /// # Safety
    /// `args` points to `nargs` positional values followed by one value per
    /// name of `kwnames` (a tuple of str, or null), all live objects
    /// borrowed for `'a`.
    #[inline(always)]
    pub unsafe fn new(
        py: Python<'py>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> Self {
        let nargs = usize::try_from(nargs).unwrap_or(0);
        let nkw = if kwnames.is_null() {
            0
        } else {
            // SAFETY: a non-null `kwnames` is a tuple.
            usize::try_from(unsafe { ffi::PyTuple_Size(kwnames) }).unwrap_or(0)
        };
        let all = match nargs + nkw {
            0 => &[][..],
            // SAFETY: `nargs` positional values and one per keyword name,
            // contiguous and alive for `'a`.
            n => unsafe { std::slice::from_raw_parts(args, n) },
        };
        let (positional, values) = all.split_at(nargs);
        Self {
            py,
            positional,
            names: kwnames,
            values,
        }
    }

    /// How many positional values.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.positional.len()
    }

    /// The `N` positional values of a call that passes exactly `N` and no
    /// keyword.
    #[inline(always)]
    pub fn exactly<const N: usize>(&self) -> Option<[Borrowed<'a, 'py, PyAny>; N]> {
        if self.has_keywords() {
            return None;
        }
        let values: &[*mut ffi::PyObject; N] = self.positional.try_into().ok()?;
        // SAFETY: live objects, borrowed for `'a`.
        Some(values.map(|p| unsafe { Borrowed::from_ptr(self.py, p) }))
    }

    /// The `i`th positional value.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<Borrowed<'a, 'py, PyAny>> {
        let &p = self.positional.get(i)?;
        // SAFETY: a live object, borrowed for `'a`.
        Some(unsafe { Borrowed::from_ptr(self.py, p) })
    }

    /// The positional values from the `from`th on.
    #[inline(always)]
    pub fn positional_from(
        &self,
        from: usize,
    ) -> impl ExactSizeIterator<Item = Borrowed<'a, 'py, PyAny>> + use<'a, 'py> {
        let py = self.py;
        self.positional[from.min(self.positional.len())..]
            .iter()
            // SAFETY: each value is a live object, borrowed for `'a`.
            .map(move |&p| unsafe { Borrowed::from_ptr(py, p) })
    }

    /// Whether the call passed any keyword.
    #[inline(always)]
    pub fn has_keywords(&self) -> bool {
        !self.names.is_null()
    }

    /// How many keywords.
    #[inline(always)]
    pub fn keyword_count(&self) -> usize {
        self.values.len()
    }

    /// The keywords, name and value, in the caller's order.
    #[inline(always)]
    pub fn keywords(
        &self,
    ) -> impl ExactSizeIterator<Item = (Borrowed<'a, 'py, PyAny>, Borrowed<'a, 'py, PyAny>)> + use<'a, 'py>
    {
        let (py, names) = (self.py, self.names);
        self.values.iter().enumerate().map(move |(i, &v)| {
            // SAFETY: `i` is below the names tuple's length (one value per
            // name); a tuple's items live as long as the tuple, which, as
            // the value, is borrowed for `'a`.
            unsafe {
                let name = ffi::PyTuple_GetItem(names, i as ffi::Py_ssize_t);
                (Borrowed::from_ptr(py, name), Borrowed::from_ptr(py, v))
            }
        })
    }
}

/// A method's definition; CPython keeps a pointer to it.
pub struct MethodDef(ffi::PyMethodDef);

// SAFETY: the definition is never written after construction, and its
// pointers are to static strings and a function.
unsafe impl Sync for MethodDef {}

impl MethodDef {
    /// The method `name`, run by `meth` (a trampoline from
    /// `pyo3::impl_::trampoline::get_trampoline_function!`); `doc` starts
    /// with the text signature, as CPython reads it:
    /// `"name($self, ...)\n--\n\n"` and then the docstring.
    pub const fn new(
        name: &'static CStr,
        meth: ffi::PyCFunctionFastWithKeywords,
        doc: &'static CStr,
    ) -> Self {
        Self(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: meth,
            },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// The method `name` without arguments (`METH_NOARGS`), run by `meth`
    /// as CPython calls it; `doc` as for [`MethodDef::new`].
    pub const fn noargs(name: &'static CStr, meth: ffi::PyCFunction, doc: &'static CStr) -> Self {
        Self(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunction: meth },
            ml_flags: ffi::METH_NOARGS,
            ml_doc: doc.as_ptr(),
        })
    }
}

/// Puts the method `def` on `ty`, in place of any of the same name (pyo3's
/// own, whose wrapper then serves the calls the fast path leaves).
pub fn install(ty: &Bound<'_, PyType>, def: &'static MethodDef) -> PyResult<()> {
    let py = ty.py();
    // SAFETY: `ml_name` is one of the static C strings `MethodDef::new` took.
    let name = unsafe { CStr::from_ptr(def.0.ml_name) };
    let name = PyString::new(py, &name.to_string_lossy());
    // SAFETY: `ty` is a live type object and `def` lives for the whole
    // program; CPython only reads the definition (the cast to `*mut` is
    // its signature's, not a write).
    let descr = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyDescr_NewMethod(ty.as_type_ptr(), std::ptr::addr_of!(def.0).cast_mut()),
        )?
    };
    ty.setattr(name, descr)
}
