# Thin wrapper over CMake. `make run` and `make test` install what they need first.
BUILD      ?= build
TEST_BUILD ?= build-test
FUZZ_TIME  ?= 300
JOBS       ?= $(shell nproc)
SMP        ?=
SIM_SEEDS  ?= 20000
# The CMake-generated makefiles run make recursively; without this every level prints
# "Entering directory" lines.
MAKEFLAGS  += --no-print-directory

.PHONY: all deps release deb deploy-test run cluster cluster-status cluster-stop test chaos fuzz bench format clean

all: release

deps:
	@scripts/deps.sh build

release: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=OFF -DSTRATA_SANITIZE=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The Debian package from the release build (scripts/mkdeb.sh, deploy/debian/): build/deb/.
deb: release
	@scripts/mkdeb.sh $(BUILD)

# Installs the .deb into a fresh Debian root (mmdebstrap) and, where podman is installed, builds
# and runs the container image (scripts/deploy-test.sh; root, Debian's archive; minutes).
deploy-test: release
	@BUILD=$(BUILD) scripts/deploy-test.sh

run: release
	@mkdir -p data
	./$(BUILD)/strata-server $(if $(SMP),--smp $(SMP)) --set log.dirs=./data $(ARGS)

# Three brokers on this machine (N=5 for five), in the background, waiting until every one is
# registered and unfenced: `strata cluster start` (ports, data under ./data-cluster; docs/cli.md).
# Stop with `make cluster-stop` (or build/strata cluster stop).
CLUSTER_N ?= $(N)
cluster: release
	@./$(BUILD)/strata cluster start --server ./$(BUILD)/strata-server $(if $(CLUSTER_N),-n $(CLUSTER_N)) $(CLUSTER_ARGS)

cluster-status:
	@./$(BUILD)/strata cluster status

cluster-stop:
	@./$(BUILD)/strata cluster stop

# The release build (gcc) is built too, so a warning only gcc sees cannot break `make run`.
test: release
	@scripts/deps.sh test
	@CC=clang cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON \
	    -DSTRATA_FUZZ=ON >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)
	@cd $(TEST_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(JOBS)

# The replication simulation over SIM_SEEDS seeds (about 25 minutes for 20,000 in the sanitized
# build on 2 cores; `make test` runs 500), then the replication failure scenarios (issue 13) at
# length: more kills, longer cuts and stops, more power cuts than the shortened run in
# `make test`; bounded to about ten minutes.
CHAOS_TEST = tests/integration/test_replication.py
chaos: release
	@scripts/deps.sh test
	@CC=clang cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON \
	    -DSTRATA_FUZZ=ON >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)
	@STRATA_SIM_SEEDS=$(SIM_SEEDS) $(TEST_BUILD)/tests/replica_test_sim
	@STRATA_CHAOS=1 STRATA_SRC=$(CURDIR) STRATA_SERVER=$(CURDIR)/$(TEST_BUILD)/strata-server \
	    STRATA_CLI=$(CURDIR)/$(TEST_BUILD)/strata STRATA_DROPFS=$(CURDIR)/$(TEST_BUILD)/tests/dropfs \
	    timeout -k 30 720 /usr/bin/python3 $(CHAOS_TEST)

fuzz:
	@scripts/deps.sh test
	@CC=clang cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON \
	    -DSTRATA_FUZZ=ON >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)
	@for f in $(TEST_BUILD)/tests/fuzz_*; do [ -x "$$f" ] || continue; \
	    echo "== $$f"; mkdir -p fuzz-corpus/$$(basename $$f); \
	    $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 fuzz-corpus/$$(basename $$f) || exit 1; \
	done

bench: release
	@scripts/deps.sh test
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=OFF -DSTRATA_SANITIZE=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@for b in bench/run_*.sh; do [ -x "$$b" ] && BUILD=$(BUILD) $$b; done; true

format:
	@find src tests bench -name '*.[ch]' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(TEST_BUILD)
