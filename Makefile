# lockjaw: build, test, demo. `make test` works on a fresh Debian machine.
CARGO ?= cargo

.PHONY: all build deps test test-long lint bench demo demo-alternatives witness-sizes bugs clean dist

all: build

deps:
	./scripts/install-deps.sh

build:
	$(CARGO) build --release

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# The tests build with the `ci` profile (release without full debuginfo,
# Cargo.toml); see docs/testing.md, "Build and test time".
TEST_PROFILE ?= ci

# Installs what the tests need, builds, and runs the test suite.
test: deps
	./scripts/reserve-test-ports.sh
	$(CARGO) build --profile $(TEST_PROFILE) --all-targets
	$(CARGO) test --profile $(TEST_PROFILE) -- --test-threads=2

# Longer and repeated runs.
test-long: deps
	./scripts/reserve-test-ports.sh
	LOCKJAW_LONG=1 $(CARGO) test --profile $(TEST_PROFILE) -- --test-threads=1 --include-ignored

# A relocatable tarball, dist/lockjaw-<version>-<target>.tar.gz: the binary
# (DIST_PROFILE, default release), clients/, bugs/, workloads/, nemesis/ and
# scripts/install-deps.sh; docs/ci.md, "The dist tarball".
DIST_PROFILE ?= release
dist:
	DIST_PROFILE=$(DIST_PROFILE) ./scripts/make-dist.sh

bench:
	$(CARGO) bench

clean:
	$(CARGO) clean

# The report tests load pages in headless Chromium: install it with the rest.
test: export LOCKJAW_WITH_CHROMIUM = 1
test-long: export LOCKJAW_WITH_CHROMIUM = 1

# The headline comparison: the four systems, fencing on and off, under
# DEMO_NEMESES. Prints a narrow view (the full table is in compare.md) and the path of compare.html (under
# histories/compare-<UTC>/).
# DEMO_RUNS runs per cell (rates with 95 % intervals need several),
# DEMO_JOBS at once.
DEMO_NEMESES ?= pause-holder,clock-jump
DEMO_TIME ?= 10
DEMO_RUNS ?= 5
DEMO_JOBS ?= 2
demo: deps build
	./target/release/lockjaw compare --systems redis,redlock,etcd,zookeeper \
	  --workload fenced-counter --nemesis $(DEMO_NEMESES) --fencing on,off \
	  --time-limit $(DEMO_TIME) --runs $(DEMO_RUNS) --jobs $(DEMO_JOBS)

# The lock against its alternatives (docs/alternatives.md): Redis,
# Redlock, etcd, ZooKeeper and PostgreSQL advisory locks without fencing,
# and conditional writes (cas) without a lock, under pause-holder and
# kill-holder; then each without faults at 1, 5, 20 and 50 workers
# (updates/s, retries per update). compare.md has the "At a glance" table.
ALT_TIME ?= 10
ALT_CONTENTION ?= 1,5,20,50
demo-alternatives: deps build
	./target/release/lockjaw compare --systems redis,redlock,etcd,zookeeper,postgres,mariadb,cas \
	  --workload fenced-counter --nemesis pause-holder,kill-holder --fencing off \
	  --contention $(ALT_CONTENTION) --time-limit $(ALT_TIME)

# Witness histories on real runs (issue 30): per system and seed, one WITNESS_TIME s
# run under its fault without fencing, and per witness the anomaly kind,
# history → witness op lines, seconds, minimal, and whether `lockjaw check`
# on the witness alone finds the same anomaly (scripts/witness-sizes.sh).
WITNESS_TIME ?= 20
WITNESS_SYSTEMS ?= redis,redlock,sentinel,etcd,zookeeper,postgres
WITNESS_SEEDS ?= 30,31,32
witness-sizes: deps build
	./scripts/witness-sizes.sh $(WITNESS_TIME) $(WITNESS_SYSTEMS) $(WITNESS_SEEDS)

# The bug catalogue (docs/bugs.md): every row of bugs/, buggy and fixed
# release, each row's own `runs` per side (BUGS_RUNS=N: N for every row);
# the measured table with each row's command goes between the generated
# markers of docs/bugs.md.
BUGS_RUNS ?=
bugs: deps build
	./target/release/lockjaw bugs table $(if $(BUGS_RUNS),--runs $(BUGS_RUNS)) --write docs/bugs.md
