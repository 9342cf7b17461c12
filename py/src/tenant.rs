//! Tenant arguments: a `str`, made text by the core's rule (C9).

use crate::errors::Error;
use breakerbank::Dependency;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// The text of a tenant argument of `dep`. A `str` that is not valid UTF-8
/// (a lone surrogate) is the core's `InvalidTenant` for its bytes, naming
/// the dependency, never a raw `UnicodeEncodeError`; a global dependency
/// ignores its tenant, whatever it is, as the core does.
pub fn opt_text<'a>(
    dep: &Dependency,
    tenant: Option<&'a Bound<'_, PyString>>,
) -> PyResult<Option<&'a str>> {
    let Some(t) = tenant else {
        return Ok(None);
    };
    match t.to_str() {
        Ok(text) => Ok(Some(text)),
        Err(_) if !dep.is_tenant_scoped() => Ok(None),
        Err(encode) => {
            let bytes = t.call_method1("encode", ("utf-8", "surrogatepass"))?;
            let bytes = bytes.cast::<PyBytes>().map_err(PyErr::from)?;
            match breakerbank::tenant_text(bytes.as_bytes()) {
                Err(e) => Err(Error::admit(dep.name(), e).into()),
                Ok(_) => Err(encode),
            }
        }
    }
}
