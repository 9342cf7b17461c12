# The documentation site and the checks of what it says (issue 40).
# Included by the root Makefile.
#
#   make docs        the site into site/: docs/ with the README as its home
#                    page, staged into target/docs-src and built by
#                    `mkdocs build --strict` (a broken link or anchor fails)
#   make docs-test   the site's build, then every code block of the user
#                    docs run (mk/docs_blocks.py: python against the built
#                    extension, yaml as profiles, c compiled against the
#                    static library, sh from a scratch folder) and their
#                    rust blocks as the core's doc tests; and the test that the
#                    profile reference documents every field the parser
#                    accepts, and only those; part of `make test`
#   make wheel       an abi3 manylinux wheel into $(WHEEL_DIR) (maturin; its
#                    own audit of the libraries the extension links)
#   make wheel-test  that wheel installed into a fresh venv, then the README's
#                    Python quick start run with no cargo or rustc on PATH;
#                    part of `make test`
#
# MkDocs, not mdBook: MkDocs installs from PyPI in seconds into the venv the
# Python tests use anyway, while mdBook is built from crates.io (minutes of
# compiling on a fresh machine). docs/design/docs.md says more.

MKDOCS_VERSION ?= 1.6.1
DOCS_SRC ?= target/docs-src
WHEEL_DIR ?= target/wheels
# What wheels ship: fat LTO (Cargo.toml). wheel-test builds with release,
# the profile `make py-test` has built already.
WHEEL_PROFILE ?= py-release
# Empty: the newest manylinux policy the build meets, as maturin audits it
# (manylinux_2_34 with this machine's glibc); set e.g. manylinux_2_28 to
# insist on one. A build that meets none would be tagged plain `linux`,
# which wheel-test refuses.
WHEEL_COMPAT ?=
WHEEL_VENV ?= target/wheel-test/venv
# A PATH without the Rust toolchain (rustup puts it in ~/.cargo/bin).
WHEEL_PATH ?= /usr/local/bin:/usr/bin:/bin

.PHONY: docs docs-tools docs-test wheel wheel-test

$(VENV)/.mkdocs-stamp: mk/docs.mk | py-venv
	$(PY) -m pip install --quiet --disable-pip-version-check "mkdocs==$(MKDOCS_VERSION)"
	touch $@

docs-tools: $(VENV)/.mkdocs-stamp

docs: docs-tools
	$(PY) mk/docs_blocks.py stage $(DOCS_SRC)
	$(PY) -m mkdocs build --strict

docs-test: PY_PROFILE = release
docs-test: docs py-develop ffi-lib
	$(PY) mk/docs_blocks.py run
	$(CARGO) test --release --features $(subst $(space),$(comma),$(addprefix breakerbank/,$(subst $(comma),$(space),$(CORE_FEATURES)))) \
	  --doc -- --quiet user_docs ReadmeDoctests
	$(CARGO) test --release --features $(subst $(space),$(comma),$(addprefix breakerbank/,$(subst $(comma),$(space),$(CORE_FEATURES)))) \
	  --lib -- --quiet profile::fields

wheel: py-venv
	rm -f $(WHEEL_DIR)/breakerbank-*.whl
	$(VENV)/bin/maturin build --quiet --profile $(WHEEL_PROFILE) $(if $(WHEEL_COMPAT),--compatibility $(WHEEL_COMPAT)) \
	  -i $(PY) -m py/Cargo.toml -o $(WHEEL_DIR)

wheel-test: WHEEL_PROFILE = release
wheel-test: wheel
	@case "$$(ls $(WHEEL_DIR)/breakerbank-*.whl)" in *-abi3-manylinux_*) ;; \
	  *) echo "wheel-test: not an abi3 manylinux wheel: $$(ls $(WHEEL_DIR))"; exit 1 ;; esac
	rm -rf $(WHEEL_VENV)
	python3 -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
	  $(WHEEL_DIR)/breakerbank-*.whl
	$(PY) mk/docs_blocks.py quickstart python > target/wheel-test/quickstart.py
	cd target/wheel-test && env -i PATH=$(WHEEL_PATH) HOME=$(CURDIR)/target/wheel-test sh -c \
	  '! command -v cargo && ! command -v rustc && venv/bin/python quickstart.py && \
	   venv/bin/python -c "import breakerbank; assert \"/wheel-test/venv/\" in breakerbank.__file__, breakerbank.__file__"'
	@echo "wheel-test: $$(ls $(WHEEL_DIR)/breakerbank-*.whl) installs and runs the quick start without Rust"
