//! Loom models of breakerbank's concurrent core live in `tests/`.
