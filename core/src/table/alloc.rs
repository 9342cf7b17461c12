//! Fallible allocation for a table's up-front memory: a refusal is an
//! error the bank reports, never an abort (C9).

/// An up-front allocation of a table that the allocator refused: building
/// a bank reports it as a profile error rather than aborting (C9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfMemory {
    /// The size of the allocation refused.
    pub(crate) bytes: usize,
}

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the allocator refused {} bytes", self.bytes)
    }
}

/// `Box::new(value)`, with a refusal returned instead of aborting.
pub(super) fn try_box<T>(value: T) -> Result<Box<T>, OutOfMemory> {
    // The allocator takes no zero-sized request; every caller boxes data.
    const {
        assert!(
            std::mem::size_of::<T>() != 0,
            "try_box of a zero-sized type"
        )
    };
    let layout = std::alloc::Layout::new::<T>();
    // SAFETY: the layout has a non-zero size (checked at compile time).
    let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return Err(OutOfMemory {
            bytes: layout.size(),
        });
    }
    // SAFETY: `p` is a fresh allocation of `Layout::new::<T>()` from the
    // global allocator, so aligned and large enough for a `T`, and owned
    // by no one: writing the value initialises it, and `Box` may then own
    // it (it frees with the same layout).
    unsafe {
        p.write(value);
        Ok(Box::from_raw(p))
    }
}

/// An empty `Vec` with room for exactly `n` items, with a refusal
/// returned instead of aborting.
pub(super) fn try_vec<T>(n: usize) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| OutOfMemory {
        bytes: std::alloc::Layout::array::<T>(n).map_or(usize::MAX, |l| l.size()),
    })?;
    Ok(v)
}
