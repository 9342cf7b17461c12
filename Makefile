# breakerbank — the two commands of the README:
#   make demo   the single-tenant fault-injection scenario through the real core
#   make test   installs what the tests need (a local .venv) and runs every test
#
# Pieces live in mk/*.mk: ffi.mk (C ABI), py.mk (Python), loom.mk, bench.mk,
# fuzz.mk (cargo-fuzz targets), soak.mk, mutants.mk (cargo-mutants), deploy.mk
# (Prometheus rules and their promtool tests), docs.mk (the documentation
# site, its code blocks run, and the wheel).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: test lint rust-test bench check-tools
.DEFAULT_GOAL := test

# The core's optional integrations: linted and documented besides the
# build without them; their tests, doc examples and example run too.
CORE_FEATURES ?= tower,tracing
comma := ,
space := $(subst ,, )

include mk/ffi.mk
include mk/py.mk
include mk/loom.mk
include mk/bench.mk
include mk/fuzz.mk
include mk/soak.mk
include mk/mutants.mk
include mk/deploy.mk
include mk/install.mk
include mk/docs.mk
include mk/go.mk

# Everything: formatting and lints, Rust tests (unit, integration, model,
# stress, doc, header staleness), a short loom run, the C tests plain and
# under sanitizers, the Prometheus rules (promtool check and unit tests), the
# Python stubs check and pytest, the docs site with its code blocks run,
# the wheel installed without Rust, and each fuzz target for 12 s (skipped with a
# message where there is no nightly toolchain).
test: lint rust-test loom ffi-test install-test go-test prom-test py-test docs-test wheel-test fuzz-short
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p breakerbank-ffi --all-targets --features bench-internals -- -D warnings
	$(CARGO) clippy -p breakerbank --all-targets --features $(CORE_FEATURES) -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p breakerbank --features $(CORE_FEATURES) --no-deps --quiet

# Release: the model and flood tests are CPU-bound. One build of the
# workspace with the core's integrations on runs every test and doc
# example, theirs too, and builds the tower example, run from its path
# (`cargo run -p breakerbank` would resolve features anew and rebuild).
# Then the core's unit tests and model tests again under its `narrow`
# feature, whose counters, tags and epochs come round within a few dozen
# steps (docs/design/state-word.md, "Fields that come round").
RUST_TARGET_DIR = $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
rust-test:
	$(CARGO) test --release --features $(subst $(space),$(comma),$(addprefix breakerbank/,$(subst $(comma),$(space),$(CORE_FEATURES))))
	$(CARGO) test --release -p breakerbank --features narrow --lib --test model --test tenant_model
	$(RUST_TARGET_DIR)/release/examples/tower_client
