# The soak of core/tests/soak.rs for minutes (issue 21). Included by the
# root Makefile.
#
#   make soak                 SOAK_SECS seconds (default 300)
#   make soak SOAK_SECS=1800  longer
#
# `make test` runs the same test for its default 20 seconds (it is a
# plain #[test] of `cargo test --release`); this target only lengthens it.
# Its summary line (calls, trips checked, resident set by tenths of the
# run) is printed with --nocapture.

SOAK_SECS ?= 300

.PHONY: soak

soak:
	BREAKERBANK_SOAK_SECS=$(SOAK_SECS) $(CARGO) test --release -p breakerbank --test soak \
	  -- --nocapture
