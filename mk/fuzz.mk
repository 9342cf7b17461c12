# Fuzzing with cargo-fuzz (issue 22). Included by the root Makefile.
#
#   make fuzz          every target for FUZZ_SECONDS each (default 300), one
#                      after another, one libFuzzer process each
#   make fuzz-short    the reproducers, then every target for
#                      FUZZ_SHORT_SECONDS each (default 12); part of
#                      `make test`. Prints
#                      "fuzz: skipped (cargo +nightly fuzz not available)"
#                      and succeeds when there is no nightly toolchain.
#   make fuzz-regressions   replays fuzz/regressions/<target>/ (reproducers
#                      of the bugs the targets found); fails while a bug is open
#   make fuzz-<target> one target for FUZZ_SECONDS
#
# cargo-fuzz itself is installed from crates.io (`cargo install cargo-fuzz
# --locked`) when nightly is there and it is missing. Working corpora go to
# $(FUZZ_CORPUS)/<target> (not committed) and start from fuzz/seeds/<target>;
# crash inputs land in fuzz/artifacts/<target>/.
#
# Per target: -timeout (seconds for one input: a hang is a crash),
# -rss_limit_mb (memory blow-up is a crash). c_abi runs with
# -detect_leaks=0: the ABI keeps each thread's last error message from one
# input to the next by design, so libFuzzer would run LeakSanitizer after
# every input; leaks of the ABI are checked by `make ffi-test` under ASan.
# The structured targets take -len_control=0: an input needs dozens of
# operations (trip, wait, probe) before it reaches a half-open breaker, so
# libFuzzer may use its whole -max_len (4096 bytes) from the start. The
# profile target gets the format's field names as a dictionary.

CARGO_FUZZ ?= $(CARGO) +nightly fuzz
FUZZ_TARGETS := profile bank_ops c_abi
FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 12
FUZZ_CORPUS ?= $(CURDIR)/fuzz/corpus
FUZZ_FLAGS ?= -rss_limit_mb=2048 -timeout=10
FUZZ_FLAGS_profile := -dict=profile.dict
FUZZ_FLAGS_bank_ops := -len_control=0
FUZZ_FLAGS_c_abi := -detect_leaks=0 -len_control=0

.PHONY: fuzz fuzz-short fuzz-tools fuzz-regressions $(addprefix fuzz-,$(FUZZ_TARGETS))

# Whether `cargo +nightly` works at all (the toolchain is installed).
FUZZ_NIGHTLY = $(CARGO) +nightly --version >/dev/null 2>&1

fuzz-tools:
	@$(FUZZ_NIGHTLY) || { echo "fuzz: cargo +nightly is not installed"; exit 1; }
	@$(CARGO_FUZZ) --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked

# One libFuzzer process per target, one target at a time: a single core.
# (Not -jobs=1: that forks a worker whose output goes to fuzz-0.log.)
# $(1): target, $(2): seconds.
define fuzz_run
mkdir -p $(FUZZ_CORPUS)/$(1) && cd fuzz && $(CARGO_FUZZ) run $(1) $(FUZZ_CORPUS)/$(1) seeds/$(1) -- \
  -max_total_time=$(2) $(FUZZ_FLAGS) $(FUZZ_FLAGS_$(1))
endef

# Every target runs even when one finds a crash; the run fails at the end.
fuzz: fuzz-tools
	cd fuzz && $(CARGO_FUZZ) build
	@fail=""; \
	$(foreach t,$(FUZZ_TARGETS),echo "== fuzz $(t) for $(FUZZ_SECONDS) s"; \
	  ( $(call fuzz_run,$(t),$(FUZZ_SECONDS)) ) || fail="$$fail $(t)";) \
	if [ -n "$$fail" ]; then echo "fuzz: crashes in:$$fail (inputs in fuzz/artifacts/)"; exit 1; fi

$(addprefix fuzz-,$(FUZZ_TARGETS)): fuzz-%: fuzz-tools
	$(call fuzz_run,$*,$(FUZZ_SECONDS))

# The reproducers first (seconds), then each target for 12 s; both run and
# either failing fails the step.
fuzz-short:
	@if $(FUZZ_NIGHTLY) && { $(CARGO_FUZZ) --version >/dev/null 2>&1 \
	      || $(CARGO) install cargo-fuzz --locked; }; then \
	  fail=0; \
	  $(MAKE) --no-print-directory fuzz-regressions || fail=1; \
	  $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SHORT_SECONDS) || fail=1; \
	  exit $$fail; \
	else \
	  echo "fuzz: skipped (cargo +nightly fuzz not available)"; \
	fi

# Each reproducer runs once; a fixed bug's input passes.
fuzz-regressions: fuzz-tools
	cd fuzz && $(CARGO_FUZZ) build
	@mkdir -p fuzz/artifacts; fail=0; for t in $(FUZZ_TARGETS); do \
	  for f in fuzz/regressions/$$t/*; do \
	    [ -f "$$f" ] || continue; \
	    echo "== $$t $$f"; \
	    if ! ( cd fuzz && $(CARGO_FUZZ) run $$t ../$$f -- -detect_leaks=0 ) \
	        >fuzz/artifacts/last-regression.log 2>&1; then \
	      echo "   still fails: $$(grep -A1 'panicked at' fuzz/artifacts/last-regression.log | tail -n 1)"; \
	      fail=1; \
	    fi; \
	  done; \
	done; exit $$fail
