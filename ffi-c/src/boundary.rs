//! The panic boundary and the calling thread's last error it keeps, the one
//! null-check macro, and argument decoding.

use crate::types::bb_status;
use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_char;

/// An error on its way out through the boundary: a status and the message
/// that [`crate::bb_last_error`] will return. Boxed so that the `Result`s
/// of the hot path stay small; errors are the cold path.
#[derive(Debug)]
pub(crate) struct Fail(Box<(bb_status, String)>);

impl Fail {
    #[cold]
    #[inline(never)]
    pub(crate) fn new(status: bb_status, message: impl Into<String>) -> Fail {
        Fail(Box::new((status, message.into())))
    }

    /// `BB_ERR_INVALID_ARGUMENT` with a message.
    #[cold]
    #[inline(never)]
    pub(crate) fn arg(message: impl Into<String>) -> Fail {
        Fail::new(bb_status::BB_ERR_INVALID_ARGUMENT, message)
    }

    /// The status to return.
    pub(crate) fn status(&self) -> bb_status {
        self.0 .0
    }

    /// The message, for `bb_last_error`.
    pub(crate) fn into_message(self) -> String {
        self.0 .1
    }
}

thread_local! {
    /// The message of this thread's last failed call (empty before any).
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Stores `fail`'s message for this thread and returns its status.
#[cold]
pub(crate) fn set_last_error(fail: Fail) -> bb_status {
    // `try_with`: during thread teardown the slot may be gone; the status
    // still reaches the caller.
    let status = fail.status();
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut s) = slot.try_borrow_mut() {
            *s = fail.into_message();
        }
    });
    status
}

/// A caught panic: `BB_ERR_PANIC`, its message kept for `bb_last_error`.
#[cold]
pub(crate) fn panicked(payload: Box<dyn Any + Send>) -> bb_status {
    let what = if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    };
    // Dropping a panic payload can itself panic; keep that inside the boundary.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    set_last_error(Fail::new(
        bb_status::BB_ERR_PANIC,
        format!("panic inside breakerbank: {what}"),
    ))
}

/// Runs `f` on the message of this thread's last error.
pub(crate) fn with_last_error<R>(f: impl FnOnce(&str) -> R) -> R {
    LAST_ERROR.with(|slot| f(&slot.borrow()))
}

/// Runs a body returning `Result<(), Fail>` so that nothing unwinds into C.
///
/// `Ok(())` is `BB_OK`; `Err(fail)` stores the message for `bb_last_error` on
/// this thread and returns its status; a panic is caught and becomes
/// `BB_ERR_PANIC` with the panic's message. `return Err(..)` and `?` work in
/// the body as in a function.
macro_rules! ffi_boundary {
    ($($body:tt)*) => {{
        let result = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<(), $crate::boundary::Fail> { $($body)* },
        ));
        match result {
            Ok(Ok(())) => $crate::types::bb_status::BB_OK,
            Ok(Err(fail)) => $crate::boundary::set_last_error(fail),
            Err(payload) => $crate::boundary::panicked(payload),
        }
    }};
}

/// The failure of [`try_ref!`] and [`try_out!`] for argument `$name`: a
/// call of a cold function of its own, so that the hot path does not set
/// up the message of a merged error exit before each check.
macro_rules! bad_pointer {
    ($name:literal) => {{
        #[cold]
        #[inline(never)]
        fn bad_pointer() -> $crate::boundary::Fail {
            $crate::boundary::Fail::arg(concat!("`", $name, "` is null or misaligned"))
        }
        bad_pointer()
    }};
}

/// The one null check: `try_ref!(ptr, "name")` turns a `*const T` / `*mut T`
/// into `&T`, returning `BB_ERR_INVALID_ARGUMENT` (naming the argument) when
/// it is null or misaligned.
///
/// Soundness: callers are the exported functions, whose documented contract
/// (their "Safety" section) is that a non-null pointer argument points to a
/// live, initialised `T` for the duration of the call; the macro checks the
/// rest (null, alignment).
macro_rules! try_ref {
    ($ptr:expr, $name:literal) => {{
        let ptr = $ptr;
        if ptr.is_null() || !ptr.is_aligned() {
            return Err(bad_pointer!($name));
        }
        // SAFETY: non-null and aligned (checked just above); the exported
        // function's contract says a non-null `$ptr` points to a live `T`
        // that nothing mutates during the call, so a shared borrow for the
        // call's duration is valid.
        unsafe { &*ptr }
    }};
}

/// The out-pointer form of [`try_ref!`]: checks a `*mut T` for null and
/// alignment and yields an [`Out`] that is written once, on success.
macro_rules! try_out {
    ($ptr:expr, $name:literal) => {{
        let ptr: *mut _ = $ptr;
        if ptr.is_null() || !ptr.is_aligned() {
            return Err(bad_pointer!($name));
        }
        $crate::boundary::Out(ptr)
    }};
}

/// A checked (non-null, aligned) out-pointer, written once at the end of a
/// successful call so that a failing call leaves the caller's memory alone.
pub(crate) struct Out<T>(pub(crate) *mut T);

impl<T> Out<T> {
    /// Writes the result (without reading or dropping what was there: the
    /// caller's memory may be uninitialised).
    #[inline]
    pub(crate) fn write(self, value: T) {
        // SAFETY: `try_out!` checked non-null and alignment; the exported
        // function's contract says a non-null out-pointer is valid for a
        // write of one `T`. `ptr::write` neither reads nor drops the old
        // contents, so uninitialised memory is fine.
        unsafe { self.0.write(value) }
    }
}

/// Largest length a Rust slice may have; anything above is a "bad length".
const MAX_LEN: usize = isize::MAX as usize;

/// Decodes a required (pointer, length) UTF-8 string argument.
///
/// # Safety
///
/// When `ptr` is non-null it must point to `len` readable bytes that stay
/// unchanged for `'a` (the exported function's call).
#[inline]
pub(crate) unsafe fn str_arg<'a>(
    ptr: *const c_char,
    len: usize,
    name: &'static str,
) -> Result<&'a str, Fail> {
    // SAFETY: forwarded from this function's own contract.
    match unsafe { opt_str_arg(ptr, len, name) }? {
        Some(s) => Ok(s),
        None => Err(Fail::arg(format!("`{name}` is null"))),
    }
}

/// Decodes an optional (pointer, length) UTF-8 string: `(NULL, 0)` is `None`,
/// `(p, 0)` is `Some("")`.
///
/// # Safety
///
/// As [`str_arg`].
#[inline(always)]
pub(crate) unsafe fn opt_str_arg<'a>(
    ptr: *const c_char,
    len: usize,
    name: &'static str,
) -> Result<Option<&'a str>, Fail> {
    if len == 0 {
        return Ok(if ptr.is_null() { None } else { Some("") });
    }
    if ptr.is_null() || len > MAX_LEN {
        return Err(bad_str(ptr, len, name));
    }
    // SAFETY: non-null, 0 < `len` ≤ isize::MAX, and by this function's
    // contract `ptr` points to `len` readable bytes unchanged for `'a`; `u8`
    // has alignment 1, so any non-null pointer is aligned.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    // Tenant ids are short and nearly always ASCII: `is_ascii` checks a
    // word at a time where `from_utf8`'s general loop, for a string
    // shorter than its block size, goes a byte at a time.
    if is_ascii(bytes) {
        // SAFETY: ASCII is valid UTF-8.
        return Ok(Some(unsafe { std::str::from_utf8_unchecked(bytes) }));
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Some(s)),
        Err(_) if name == "tenant" => Err(invalid_tenant(bytes)),
        Err(e) => Err(not_utf8(name, e)),
    }
}

/// A tenant id whose bytes are not UTF-8, refused as the core refuses one
/// (C9).
#[cold]
#[inline(never)]
fn invalid_tenant(bytes: &[u8]) -> Fail {
    match breakerbank::tenant_text(bytes) {
        Err(e) => Fail::new(bb_status::BB_ERR_INVALID_TENANT, format!("`tenant`: {e}")),
        Ok(_) => Fail::arg("`tenant` changed while it was read"),
    }
}

/// `bytes.is_ascii()`, with the usual length of a tenant id (8 to 16
/// bytes) checked by two overlapping 8-byte loads: std's loop checks the
/// whole words, then the rest a byte at a time.
#[inline(always)]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let n = bytes.len();
    if (8..=16).contains(&n) {
        let word = |at: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_ne_bytes(w)
        };
        return (word(0) | word(n - 8)) & HIGH == 0;
    }
    bytes.is_ascii()
}

#[cold]
#[inline(never)]
fn bad_str(ptr: *const c_char, len: usize, name: &'static str) -> Fail {
    if ptr.is_null() {
        Fail::arg(format!("`{name}` is null but its length is {len}"))
    } else {
        Fail::arg(format!("`{name}` has a bad length ({len})"))
    }
}

#[cold]
#[inline(never)]
fn not_utf8(name: &'static str, e: std::str::Utf8Error) -> Fail {
    Fail::arg(format!(
        "`{name}` is not valid UTF-8 (at byte {})",
        e.valid_up_to()
    ))
}

/// Copies `text` into the caller's `(buf, cap)` and writes its length to
/// `*written`; a NUL follows the text when `cap > text.len()` (not counted).
/// `cap < text.len()` is `BB_ERR_BUFFER_TOO_SMALL` with `*written` set to
/// the length needed; `(NULL, 0)` therefore asks for the size.
///
/// # Safety
///
/// When `buf` is non-null it must be valid for writes of `cap` bytes;
/// `written` is checked by the caller with `try_out!`.
pub(crate) unsafe fn copy_out(
    text: &str,
    buf: *mut c_char,
    cap: usize,
    written: Out<usize>,
) -> Result<(), Fail> {
    if buf.is_null() && cap != 0 {
        return Err(Fail::arg(format!("`buf` is null but `cap` is {cap}")));
    }
    if cap > MAX_LEN {
        return Err(Fail::arg(format!("`cap` is a bad length ({cap})")));
    }
    let n = text.len();
    if cap < n {
        written.write(n);
        return Err(Fail::new(
            bb_status::BB_ERR_BUFFER_TOO_SMALL,
            format!("buffer too small: {n} bytes needed, {cap} given"),
        ));
    }
    if n > 0 {
        // SAFETY: `buf` is non-null (cap ≥ n > 0 and the null case with a
        // non-zero cap was rejected), valid for `cap` ≥ n bytes of writes by
        // this function's contract, and cannot overlap `text`, which Rust
        // owns.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n) };
    }
    if cap > n {
        // SAFETY: index n < cap is inside the caller's buffer (contract above).
        unsafe { buf.add(n).write(0) };
    }
    written.write(n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_ascii;

    /// `is_ascii` agrees with std's for every length up to 40 and a
    /// non-ASCII byte at every position (or none).
    #[test]
    fn is_ascii_agrees_with_std() {
        for n in 0..40 {
            let base: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(is_ascii(&base));
            for at in 0..n {
                for high in [0x80, 0xC3, 0xFF] {
                    let mut b = base.clone();
                    b[at] = high;
                    assert_eq!(is_ascii(&b), b.is_ascii(), "{n} {at} {high:#x}");
                    assert!(!is_ascii(&b));
                }
            }
        }
    }
}
