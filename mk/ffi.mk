# The C ABI: static library, header, C tests (plain and ASan/UBSan), example,
# bench. Included by the root Makefile; run from the repository root.
#
#   make ffi-lib     cargo build --release -p breakerbank-ffi
#   make ffi-test    build the C tests and run them plain and under
#                    -fsanitize=address,undefined; build and run the example
#   make header      regenerate include/breakerbank.h (commit the result)
#   make ffi-bench   criterion: bb_admit + bb_record vs the Rust core's
#                    admit + record, and bb_call vs Rust's dep.call, on
#                    the same breakers (with the bench-internals feature,
#                    which the library is built without); then callgrind's
#                    instructions a call of each, Rust and C side by side
#                    (short runs: FFI_CALLGRIND_N calls a path)
#   make ffi-tsan    the C thread tests under ThreadSanitizer (not in
#                    `make test`): the Rust library built by nightly with
#                    -Zsanitizer=thread, linked with rustc's own TSan
#                    runtime (gcc's lacks what current LLVM emits). std is
#                    NOT instrumented (that needs -Zbuild-std and the
#                    rust-src component, not installable here), so races
#                    ordered only by std's Mutex/Condvar/channel are false
#                    reports: the ones of that kind are suppressed, each
#                    with its reason, in ffi-c/tests/tsan/suppressions.txt.
#
# `cargo test` does not rebuild the static library: ffi-test depends on
# ffi-lib, which always asks cargo (a no-op when nothing changed).

CARGO ?= cargo
FFI_CC ?= $(CC)
FFI_TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
FFI_LIB := $(FFI_TARGET_DIR)/release/libbreakerbank_ffi.a
FFI_HEADER := include/breakerbank.h
FFI_TEST_DIR := ffi-c/tests/c
FFI_BUILD := $(FFI_TEST_DIR)/build
FFI_EXAMPLE_BUILD := examples/c/build
FFI_TESTS := $(basename $(notdir $(wildcard $(FFI_TEST_DIR)/test_*.c)))

FFI_CFLAGS := -std=c11 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude
FFI_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FFI_LDLIBS := -lpthread -ldl -lm
# halt on the first report; leaks are reported too (LeakSanitizer).
FFI_SAN_ENV := ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1 \
               UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: ffi-lib ffi-test ffi-test-plain ffi-test-sanitize ffi-example header ffi-bench ffi-tsan

ffi-lib:
	$(CARGO) build --release -p breakerbank-ffi

# The library file is (re)made by cargo through ffi-lib; binaries that link
# it are rebuilt only when cargo actually changed it.
$(FFI_LIB): ffi-lib
	@:

$(FFI_BUILD) $(FFI_EXAMPLE_BUILD):
	mkdir -p $@

# Plain and sanitized binaries of every ffi-c/tests/c/test_*.c.
$(FFI_BUILD)/%.plain: $(FFI_TEST_DIR)/%.c $(FFI_TEST_DIR)/bbtest.h $(FFI_HEADER) $(FFI_LIB) | $(FFI_BUILD)
	$(FFI_CC) $(FFI_CFLAGS) -o $@ $< $(FFI_LIB) $(FFI_LDLIBS)

$(FFI_BUILD)/%.asan: $(FFI_TEST_DIR)/%.c $(FFI_TEST_DIR)/bbtest.h $(FFI_HEADER) $(FFI_LIB) | $(FFI_BUILD)
	$(FFI_CC) $(FFI_CFLAGS) $(FFI_SANITIZE) -o $@ $< $(FFI_LIB) $(FFI_LDLIBS)

ffi-test-plain: $(addprefix $(FFI_BUILD)/,$(addsuffix .plain,$(FFI_TESTS)))
	@fail=0; for t in $(FFI_TESTS); do \
	  echo "== $$t (plain)"; $(FFI_BUILD)/$$t.plain || fail=1; \
	done; exit $$fail

ffi-test-sanitize: $(addprefix $(FFI_BUILD)/,$(addsuffix .asan,$(FFI_TESTS)))
	@fail=0; for t in $(FFI_TESTS); do \
	  echo "== $$t (address,undefined)"; $(FFI_SAN_ENV) $(FFI_BUILD)/$$t.asan || fail=1; \
	done; exit $$fail

# The example is built the way a C user would: only the header and the
# static library, -Wall -Wextra (plus -Werror here so warnings fail CI).
$(FFI_EXAMPLE_BUILD)/payments: examples/c/payments.c $(FFI_HEADER) $(FFI_LIB) | $(FFI_EXAMPLE_BUILD)
	$(FFI_CC) -std=c11 -Wall -Wextra -Werror -O2 -Iinclude -o $@ $< $(FFI_LIB) $(FFI_LDLIBS)

ffi-example: $(FFI_EXAMPLE_BUILD)/payments
	$(FFI_EXAMPLE_BUILD)/payments --quick

ffi-test: ffi-test-plain ffi-test-sanitize ffi-example

header:
	BB_UPDATE_HEADER=1 $(CARGO) test -p breakerbank-ffi --test header

FFI_CALLGRIND_N ?= 100000
FFI_CALLGRIND_PATHS := closed_global closed_rate_global closed_tenant_100k open_reject call_closed_global call_closed_tenant_100k

ffi-bench:
	$(CARGO) bench -p breakerbank-ffi --features bench-internals --bench ffi
	$(CARGO) build --release -p breakerbank-ffi --features bench-internals --example callgrind
	@if command -v valgrind >/dev/null 2>&1; then \
	  echo "instructions a call (callgrind, $(FFI_CALLGRIND_N) calls; Rust / C):"; \
	  for p in $(FFI_CALLGRIND_PATHS); do \
	    out=$$(mktemp); \
	    valgrind --tool=callgrind --callgrind-out-file=$$out \
	      $(FFI_TARGET_DIR)/release/examples/callgrind $$p $(FFI_CALLGRIND_N) >/dev/null 2>&1; \
	    callgrind_annotate --inclusive=yes $$out 2>/dev/null | \
	      awk -v p=$$p -v n=$(FFI_CALLGRIND_N) '/callgrind::rust(_call)?_loop/ && !r { gsub(",","",$$1); r=$$1/n } \
	        /callgrind::ffi(_call)?_loop/ && !f { gsub(",","",$$1); f=$$1/n } \
	        END { printf "  %-24s %6.0f / %6.0f\n", p, r, f }'; \
	    rm -f $$out; \
	  done; \
	else echo "ffi-bench: valgrind not installed, no instruction counts"; fi

FFI_TSAN_TARGET_DIR ?= $(FFI_TARGET_DIR)/tsan
FFI_TSAN_TRIPLE := x86_64-unknown-linux-gnu
FFI_TSAN_LIB := $(FFI_TSAN_TARGET_DIR)/$(FFI_TSAN_TRIPLE)/release/libbreakerbank_ffi.a
FFI_TSAN_RT = $$(rustc +nightly --print sysroot)/lib/rustlib/$(FFI_TSAN_TRIPLE)/lib/librustc-nightly_rt.tsan.a

ffi-tsan:
	RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" \
	  CARGO_TARGET_DIR=$(FFI_TSAN_TARGET_DIR) \
	  $(CARGO) +nightly build --release -p breakerbank-ffi --target $(FFI_TSAN_TRIPLE)
	mkdir -p $(FFI_BUILD)
	$(FFI_CC) $(FFI_CFLAGS) -fsanitize=thread -c -o $(FFI_BUILD)/test_threads.tsan.o $(FFI_TEST_DIR)/test_threads.c
	$(FFI_CC) -o $(FFI_BUILD)/test_threads.tsan $(FFI_BUILD)/test_threads.tsan.o $(FFI_TSAN_LIB) \
	  -Wl,--whole-archive $(FFI_TSAN_RT) -Wl,--no-whole-archive $(FFI_LDLIBS) -lstdc++
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/ffi-c/tests/tsan/suppressions.txt" \
	  $(FFI_BUILD)/test_threads.tsan
