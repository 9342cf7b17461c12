//! The calling thread's last error, and how panics become `BB_ERR_PANIC`.

use crate::boundary::{copy_out, Fail};
use crate::types::bb_status;
use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_char;

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

/// Copies the message of the calling thread's last error into `buf`.
///
/// The message is UTF-8, `*written` bytes long; when `cap` is larger than
/// the message a terminating NUL is also written (not counted in
/// `*written`), so `char buf[256]` can be printed with `%s`. Before any
/// error the message is empty. This call never changes the stored message.
///
/// Returns `BB_ERR_BUFFER_TOO_SMALL` with `*written` set to the length needed
/// when `cap` is smaller than the message: `bb_last_error(NULL, 0, &n)` asks
/// for the size.
///
/// Thread-safe: each thread reads its own last error.
///
/// # Safety
///
/// `buf` is null with `cap == 0`, or valid for writes of `cap` bytes;
/// `written` is a valid `size_t *`.
#[no_mangle]
pub extern "C" fn bb_last_error(buf: *mut c_char, cap: usize, written: *mut usize) -> bb_status {
    // Not through `ffi_boundary!`'s error path: reading the last error must
    // not replace it. Panics are still caught.
    let result = std::panic::catch_unwind(|| -> Result<(), Fail> {
        let written = try_out!(written, "written");
        LAST_ERROR.with(|slot| {
            let msg = slot.borrow();
            // SAFETY: `buf`/`cap` are as this function's contract says;
            // `written` was checked by `try_out!`.
            unsafe { copy_out(&msg, buf, cap, written) }
        })
    });
    match result {
        Ok(Ok(())) => bb_status::BB_OK,
        Ok(Err(fail)) => fail.status(),
        Err(_) => bb_status::BB_ERR_PANIC,
    }
}
