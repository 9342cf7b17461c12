# The Go package (bindings/go), a cgo binding of the installed C library.
# Included by the root Makefile; run from the repository root.
#
#   make go-test    installs Debian's golang-go when `go` is missing, then
#                   runs `go vet` and `go test -race` of bindings/go against
#                   the tree install-test put in $(INSTALL_TEST_PREFIX)
#   make go-bench   the package's benchmarks (a cgo call, Call on a closed
#                   breaker, global and at 100k tenants), short runs

GO ?= go
GO_ENV = PKG_CONFIG_PATH=$(INSTALL_TEST_PREFIX)/lib/pkgconfig \
  CGO_LDFLAGS="-Wl,-rpath,$(INSTALL_TEST_PREFIX)/lib" CGO_ENABLED=1

.PHONY: go-tools go-test go-bench

go-tools:
	@command -v $(GO) >/dev/null 2>&1 || { \
	  echo "go-test: installing golang-go"; \
	  apt-get install -y golang-go >/dev/null || { apt-get update >/dev/null && apt-get install -y golang-go >/dev/null; }; }

go-test: go-tools install-test
	cd bindings/go && $(GO_ENV) $(GO) vet ./...
	cd bindings/go && $(GO_ENV) $(GO) test -race -count=1 ./...

go-bench: go-tools install-test
	cd bindings/go && $(GO_ENV) $(GO) test -run '^$$' -bench . -benchtime 1s -count 1 ./...
