# Benchmarks (issue 7). Included by the root Makefile.
#
#   make bench             all of it, < 10 minutes on the 2-core machine:
#     bench-criterion      single thread, breakerbank vs recloser vs failsafe + the raw floor
#     bench-contended      std threads on one shared breaker, total calls/s, medians of runs
#     bench-scale          tenant-scoped cost at 1 … 1M tenants, memory per partition, flood
#     bench-overflow       an admission sent to the overflow by a table full of open partitions
#     bench-tower          the tower layer's cost per call over the bare service (feature tower)
#     bench-profile        loading a profile of 1k … 51k dependencies: parse + check, build
#
# Each step's output is kept in $(BENCH_OUT)/; BENCHMARKS.md has the figures.
# Shorter or longer: make bench BENCH_CRITERION_ARGS="--measurement-time 5" BENCH_RUNS=11

CARGO ?= cargo
BENCH_OUT ?= target/bench-results
BENCH_CRITERION_ARGS ?= --warm-up-time 1 --measurement-time 2 --noplot
BENCH_RUNS ?= 7
BENCH_MS ?= 300
BENCH_PASSES ?= 3

.PHONY: bench bench-build bench-criterion bench-contended bench-scale bench-overflow bench-tower bench-profile

bench: bench-criterion bench-contended bench-scale bench-overflow bench-tower bench-profile

bench-build:
	$(CARGO) bench -p breakerbank-benches --no-run
	$(CARGO) build --release -p breakerbank-benches --examples

bench-criterion: bench-build
	@mkdir -p $(BENCH_OUT)
	$(CARGO) bench -p breakerbank-benches --bench breakerbank -- $(BENCH_CRITERION_ARGS) \
	  > $(BENCH_OUT)/criterion.txt || { cat $(BENCH_OUT)/criterion.txt; exit 1; }
	cat $(BENCH_OUT)/criterion.txt

bench-contended: bench-build
	@mkdir -p $(BENCH_OUT)
	$(CARGO) run --release -p breakerbank-benches --example contended -- \
	  --runs $(BENCH_RUNS) --ms $(BENCH_MS) > $(BENCH_OUT)/contended.txt \
	  || { cat $(BENCH_OUT)/contended.txt; exit 1; }
	cat $(BENCH_OUT)/contended.txt

bench-scale: bench-build
	@mkdir -p $(BENCH_OUT)
	$(CARGO) run --release -p breakerbank-benches --example scale -- \
	  --passes $(BENCH_PASSES) > $(BENCH_OUT)/scale.txt \
	  || { cat $(BENCH_OUT)/scale.txt; exit 1; }
	cat $(BENCH_OUT)/scale.txt

bench-overflow: bench-build
	@mkdir -p $(BENCH_OUT)
	$(CARGO) run --release -p breakerbank-benches --example overflow -- \
	  > $(BENCH_OUT)/overflow.txt || { cat $(BENCH_OUT)/overflow.txt; exit 1; }
	cat $(BENCH_OUT)/overflow.txt

bench-tower:
	@mkdir -p $(BENCH_OUT)
	$(CARGO) bench -p breakerbank --features tower --bench tower -- $(BENCH_CRITERION_ARGS) \
	  > $(BENCH_OUT)/tower.txt || { cat $(BENCH_OUT)/tower.txt; exit 1; }
	cat $(BENCH_OUT)/tower.txt

bench-profile: bench-build
	@mkdir -p $(BENCH_OUT)
	$(CARGO) run --release -p breakerbank-benches --example profile_load -- \
	  --runs 5 > $(BENCH_OUT)/profile.txt || { cat $(BENCH_OUT)/profile.txt; exit 1; }
	cat $(BENCH_OUT)/profile.txt
