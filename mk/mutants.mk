# Mutation testing with cargo-mutants (issue 21). Included by the root
# Makefile; not part of `make test` (it rebuilds the crate once per mutant).
#
#   make mutants                     every file of MUTANTS_FILES
#   make mutants MUTANTS_FILES=core/src/state/word.rs
#
# How each mutant is built and tested (the `mutants` profile, the crate's
# unit and integration tests) and the mutants known to be equivalent, each
# with its reason, are in .cargo/mutants.toml; the scores are in
# docs/design/mutation-testing.md. The soak runs for 2 s per mutant (too short for
# its heap check, which judges runs of about 6 s or more). Results go
# to $(MUTANTS_OUT)/mutants.out (caught.txt, missed.txt, timeout.txt).

MUTANTS_FILES ?= core/src/state/word.rs core/src/state/machine.rs core/src/state/cell.rs \
	core/src/fallback.rs core/src/profile.rs core/src/partition.rs core/src/window.rs \
	core/src/table/mod.rs core/src/table/alloc.rs core/src/table/arena.rs \
	core/src/table/evict.rs core/src/table/index.rs core/src/table/insert.rs \
	core/src/table/key.rs core/src/table/lookup.rs core/src/table/operator.rs \
	core/src/table/shard.rs
MUTANTS_OUT ?= $(CURDIR)/target/mutants
MUTANTS_JOBS ?= 1

.PHONY: mutants mutants-tools

mutants-tools:
	@cargo mutants --version >/dev/null 2>&1 || $(CARGO) install cargo-mutants --locked

mutants: mutants-tools
	BREAKERBANK_SOAK_SECS=2 cargo mutants -j $(MUTANTS_JOBS) -o $(MUTANTS_OUT) \
	  $(addprefix -f ,$(MUTANTS_FILES))
