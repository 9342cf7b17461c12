# loom models of the concurrent core (issue 4). Included by the root Makefile.
#
#   make loom        every model at LOOM_MAX_PREEMPTIONS=2 (part of `make test`;
#                    under 5 min on 2 cores, build included)
#   make loom-deep   the same models at LOOM_MAX_PREEMPTIONS=3, and the
#                    ignored ones (much longer; run by hand before touching
#                    core/src/state/, partition.rs, window.rs or table/);
#                    models capped at a lower bound keep their cap
#   make loom-uncapped  every model at LOOM_MAX_PREEMPTIONS=2, the capped
#                    ones too (about 20 min; LOOM_FILTER=name picks models)
#   make loom-index  only the tenant-index model (about 1 min; ignored by
#                    `make loom`, see loom-tests/tests/loom_models/c9.rs)
#
# Both cfgs are needed: `--cfg loom` switches core/src/sync.rs to loom, and
# `--cfg crossbeam_loom` does the same inside crossbeam-epoch (without it a
# correct model fails with a false "Causality violation"). The loom build
# has its own target dir so these RUSTFLAGS never invalidate target/.

LOOM_TARGET_DIR ?= $(CURDIR)/target/loom
LOOM_RUSTFLAGS ?= --cfg loom --cfg crossbeam_loom
LOOM_CARGO = RUSTFLAGS="$(LOOM_RUSTFLAGS)" CARGO_TARGET_DIR=$(LOOM_TARGET_DIR) \
	$(CARGO) test --release -p breakerbank-loom-tests --test loom_models

LOOM_FILTER ?=

.PHONY: loom loom-deep loom-index loom-uncapped

loom:
	LOOM_MAX_PREEMPTIONS=2 $(LOOM_CARGO) -- --nocapture

loom-deep:
	LOOM_MAX_PREEMPTIONS=3 $(LOOM_CARGO) -- --nocapture --include-ignored

loom-index:
	LOOM_MAX_PREEMPTIONS=2 $(LOOM_CARGO) -- --nocapture --ignored c9_index

loom-uncapped:
	LOOM_UNCAPPED=1 LOOM_MAX_PREEMPTIONS=2 $(LOOM_CARGO) -- --nocapture $(LOOM_FILTER)
