# Python bindings, harness and demo (issue 6). Included by the root Makefile.
#
#   make py-venv      .venv with maturin, pytest, mypy, matplotlib, httpx and
#                     requests for the client integrations' tests, and pybreaker
#                     (pinned) whose README the compat module's test runs (from PyPI),
#                     tornado and fakeredis (pinned), which pybreaker's own test module
#                     (py/tests/pybreaker_suite) imports,
#                     opentelemetry-api and -sdk for the otel extra's test
#   make py-develop   build the extension into .venv (PY_PROFILE: py-release, fat
#                     LTO, for what is measured; the tests and the demo use release)
#   make py-test      mypy.stubtest on the stubs, then the pytest suite
#   make demo         single-tenant fault through the harness: report + demo.png
#   make py-bench     breakerbank vs pybreaker, circuitbreaker and aiobreaker (installed
#                     for this only), side by side in one run; then what the httpx
#                     transport and the requests adapter add per request

VENV ?= $(CURDIR)/.venv
PY ?= $(VENV)/bin/python
PY_TOOLS ?= "maturin>=1.16,<2" pytest mypy matplotlib "PyYAML>=6" types-PyYAML prometheus_client \
	httpx requests "pybreaker==1.4.1" opentelemetry-api opentelemetry-sdk \
	"tornado==6.6.1" "fakeredis==2.40.0" "redis==8.2.0"
PY_BENCH_TOOLS ?= circuitbreaker aiobreaker

.PHONY: py-venv py-develop py-test demo py-bench

# The stamp makes a second `make py-venv` a no-op; it is redone when this
# file (the tool list) changes.
$(VENV)/.py-venv-stamp: mk/py.mk
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(PY_TOOLS)
	touch $@

py-venv: $(VENV)/.py-venv-stamp

# The extension's Cargo profile. py-release (fat LTO, Cargo.toml) is what
# wheels ship and py-bench measures; the tests and the demo build with
# release, whose crates `make rust-test` has built already (LTO changes the
# code's speed, not what it does, and would add a minute to `make test`).
PY_PROFILE ?= py-release

py-develop: py-venv
	VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH \
	  $(VENV)/bin/maturin develop --profile $(PY_PROFILE) --quiet -m py/Cargo.toml

py-test demo: PY_PROFILE = release

py-test: py-develop
	cd py && $(PY) -m mypy.stubtest breakerbank
	cd py && $(PY) -m pytest -q

demo: py-develop
	$(PY) -m breakerbank simulate examples/single_tenant_fault.yaml --plot demo.png

py-bench: py-develop
	$(PY) -m pip install --quiet --disable-pip-version-check $(PY_BENCH_TOOLS)
	$(PY) py/bench/bench.py
	$(PY) py/bench/http_bench.py
