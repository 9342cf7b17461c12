//! Methods put on a class as `METH_FASTCALL | METH_KEYWORDS` functions of
//! our own, run by pyo3's fastcall trampoline: the arguments arrive as an
//! array and the keyword names as a tuple, and the method reads what its
//! common call passes without pyo3's argument extraction.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};
use std::ffi::CStr;

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
