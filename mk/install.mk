# Installing the C library, and the tests that build against the installed
# tree. Included by the root Makefile; run from the repository root.
#
#   make install PREFIX=/usr/local   the header, libbreakerbank.a,
#                    libbreakerbank.so.$(SO_VERSION) with the soname
#                    libbreakerbank.so.$(SO_MAJOR) (and the two links), and
#                    lib/pkgconfig/breakerbank.pc; DESTDIR is honoured.
#                    Built with the ffi-release profile: fat LTO, no debug
#                    information.
#   make install-test  installs into $(INSTALL_TEST_PREFIX), builds
#                    examples/c/ with `pkg-config --cflags --libs
#                    breakerbank` against that tree and runs it, checks the
#                    soname, and builds a hello-world against the installed
#                    static library, which must stay under
#                    $(HELLO_MAX_BYTES) bytes unstripped.

CARGO ?= cargo
PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
INSTALL_CC ?= $(CC)

# The package's version is the library's; its major number is the soname's.
SO_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
SO_MAJOR := $(firstword $(subst ., ,$(SO_VERSION)))

INSTALL_TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
INSTALL_BUILD := $(INSTALL_TARGET_DIR)/ffi-release
INSTALL_TEST_PREFIX ?= $(CURDIR)/$(INSTALL_TARGET_DIR)/install-test/prefix
INSTALL_TEST_BUILD := $(CURDIR)/$(INSTALL_TARGET_DIR)/install-test/build
HELLO_MAX_BYTES ?= 2097152

.PHONY: install install-lib install-test

install-lib:
	$(CARGO) build --profile ffi-release -p breakerbank-ffi

# The static library is stripped of debug sections too: the standard
# library's objects inside it were compiled with line tables, which
# `strip = "debuginfo"` (applied when rustc links) does not reach in an
# archive.
install: install-lib
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/breakerbank.h $(DESTDIR)$(INCLUDEDIR)/breakerbank.h
	install -m 644 $(INSTALL_BUILD)/libbreakerbank_ffi.a $(DESTDIR)$(LIBDIR)/libbreakerbank.a
	strip --strip-debug $(DESTDIR)$(LIBDIR)/libbreakerbank.a
	install -m 755 $(INSTALL_BUILD)/libbreakerbank_ffi.so \
	  $(DESTDIR)$(LIBDIR)/libbreakerbank.so.$(SO_VERSION)
	ln -sf libbreakerbank.so.$(SO_VERSION) $(DESTDIR)$(LIBDIR)/libbreakerbank.so.$(SO_MAJOR)
	ln -sf libbreakerbank.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libbreakerbank.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	  -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(SO_VERSION)|g' \
	  ffi-c/breakerbank.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/breakerbank.pc

# What a user of the installed library does, checked: the example built
# through pkg-config (which links the shared library) and run; the
# shared library's soname; a hello-world linked against the static one
# with what `pkg-config --static` adds (the system libraries, and
# --gc-sections, which drops the library's functions the program never
# calls: about half its size), its size.
install-test:
	rm -rf $(INSTALL_TEST_PREFIX) $(INSTALL_TEST_BUILD)
	$(MAKE) --no-print-directory install PREFIX=$(INSTALL_TEST_PREFIX)
	mkdir -p $(INSTALL_TEST_BUILD)
	PKG_CONFIG_PATH=$(INSTALL_TEST_PREFIX)/lib/pkgconfig sh -c '$(INSTALL_CC) -std=c11 -Wall -Wextra -Werror -O2 \
	  -o $(INSTALL_TEST_BUILD)/payments examples/c/payments.c $$(pkg-config --cflags --libs breakerbank)'
	LD_LIBRARY_PATH=$(INSTALL_TEST_PREFIX)/lib $(INSTALL_TEST_BUILD)/payments --quick
	@LD_LIBRARY_PATH=$(INSTALL_TEST_PREFIX)/lib ldd $(INSTALL_TEST_BUILD)/payments | grep -q 'libbreakerbank.so.$(SO_MAJOR) => $(INSTALL_TEST_PREFIX)/lib/' \
	  || { echo "install-test: payments is not linked against the installed libbreakerbank.so.$(SO_MAJOR)"; ldd $(INSTALL_TEST_BUILD)/payments; exit 1; }
	@readelf -d $(INSTALL_TEST_PREFIX)/lib/libbreakerbank.so | grep -q 'SONAME.*\[libbreakerbank.so.$(SO_MAJOR)\]' \
	  || { echo "install-test: the shared library's soname is not libbreakerbank.so.$(SO_MAJOR)"; exit 1; }
	@if readelf -S $(INSTALL_TEST_PREFIX)/lib/libbreakerbank.so.$(SO_VERSION) | grep -q '\.debug_info'; then \
	  echo "install-test: the installed shared library carries debug information"; exit 1; fi
	PKG_CONFIG_PATH=$(INSTALL_TEST_PREFIX)/lib/pkgconfig sh -c '$(INSTALL_CC) -std=c11 -Wall -Wextra -Werror -O2 \
	  $$(pkg-config --cflags breakerbank) -o $(INSTALL_TEST_BUILD)/hello examples/c/hello.c \
	  $(INSTALL_TEST_PREFIX)/lib/libbreakerbank.a $$(pkg-config --static --libs-only-other --libs-only-l breakerbank | sed "s/-lbreakerbank//")'
	$(INSTALL_TEST_BUILD)/hello
	@size=$$(stat -c %s $(INSTALL_TEST_BUILD)/hello); \
	echo "install-test: hello-world against the static library: $$size bytes (limit $(HELLO_MAX_BYTES))"; \
	[ $$size -le $(HELLO_MAX_BYTES) ] || { echo "install-test: hello-world is larger than $(HELLO_MAX_BYTES) bytes"; exit 1; }
	@echo "install-test: passed"
