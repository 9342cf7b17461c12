//! `bb_last_error`: the calling thread's last error, as the boundary
//! stored it.

use crate::boundary::{copy_out, with_last_error, Fail};
use crate::types::bb_status;
use std::ffi::c_char;

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
        with_last_error(|msg| {
            // SAFETY: `buf`/`cap` are as this function's contract says;
            // `written` was checked by `try_out!`.
            unsafe { copy_out(msg, buf, cap, written) }
        })
    });
    match result {
        Ok(Ok(())) => bb_status::BB_OK,
        Ok(Err(fail)) => fail.status(),
        Err(_) => bb_status::BB_ERR_PANIC,
    }
}
