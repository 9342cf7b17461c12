//! Benchmarks of breakerbank live in `benches/`; this library is empty.
