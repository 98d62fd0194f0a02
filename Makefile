# libacp top-level entry points. `make demo` and `make check` are the two
# commands a newcomer needs (see README.md); everything else is a building
# block of those or a longer job (bench, fuzz) kept out of CI.

BUILD      ?= build
ASAN_BUILD ?= build-asan
NOAVX_BUILD ?= build-noavx
JOBS       ?= 2
CMAKE      ?= cmake
CTEST      ?= ctest

# Debian packages the build and the tests need. Node.js and npm (for the
# interop peers) are added only when the commands are missing, since a
# machine may have them from another packaging that conflicts with Debian's.
APT_PKGS = cmake make gcc pkg-config libuv1-dev libcmocka-dev libjson-c-dev \
           valgrind clang lld wasi-libc libclang-rt-14-dev-wasm32 \
           libclang-rt-14-dev libcurl4-openssl-dev libmicrohttpd-dev libssl-dev \
           libnghttp2-dev \
           python3 procps curl chromium \
           libedit-dev tmux nginx haproxy strace clang-format

.PHONY: all deps configure build demo check check-unit check-asan \
        check-valgrind check-wasm check-noavx check-headers check-install peers bench bench-quick bench-deps \
        fuzz format clean install

all: build

# Install missing Debian packages when root, otherwise print the exact line.
deps:
	@missing=""; for p in $(APT_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" \
	    || missing="$$missing $$p"; done; \
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
	  || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "missing Debian packages; run:"; \
	    echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || $(CMAKE) -S . -B $(BUILD) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_LIBDIR=lib $(CMAKE_ARGS)

build: configure
	$(CMAKE) --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/acp demo

peers:
	./tools/install-peers.sh
	./tools/install-mcp-peers.sh

# The whole test suite: the optimized build with -Werror, then the same
# tests under ASan+UBSan, then the unit tests once under valgrind, the
# interop tests against the official TypeScript SDK, the header checks, the
# wasm32 build of the core and the SIMD tests without the AVX steps.
check: deps peers
	$(MAKE) check-unit CMAKE_ARGS="-DACP_ENABLE_WERROR=ON $(CMAKE_ARGS)"
	$(MAKE) check-asan
	$(MAKE) check-valgrind
	$(MAKE) check-headers
	$(MAKE) check-install
	$(MAKE) check-wasm
	$(MAKE) check-noavx
	@echo "make check: all suites passed"

check-unit: build
	cd $(BUILD) && $(CTEST) --output-on-failure -j$(JOBS)

check-asan: deps
	@test -f $(ASAN_BUILD)/CMakeCache.txt || $(CMAKE) -S . -B $(ASAN_BUILD) \
	  -DCMAKE_BUILD_TYPE=Debug -DACP_ENABLE_ASAN=ON -DACP_ENABLE_UBSAN=ON \
	  -DACP_ENABLE_WERROR=ON $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(CTEST) --output-on-failure -j$(JOBS)

VALGRIND_WRAP = valgrind -q --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect,possible

# The C tests under memcheck, then the acp program itself (client and
# agent processes, the stdio-to-HTTP relay) through the integration
# scripts, then the MCP bridge tests with every acp process of the chain
# under memcheck (conductor, proxies, agent, shim, HTTP helper, relay).
check-valgrind: build
	./tools/valgrind-tests.sh $(BUILD)
	ACP_BIN=$(CURDIR)/$(BUILD)/acp ACP_VALGRIND_WRAP="$(VALGRIND_WRAP)" \
	  sh tests/integration/run-cli.sh
	ACP_BIN=$(CURDIR)/$(BUILD)/acp ACP_VALGRIND_WRAP="$(VALGRIND_WRAP)" \
	  sh tests/integration/run-agent-transcripts.sh
	ACP_BIN=$(CURDIR)/$(BUILD)/acp ACP_VALGRIND_WRAP="$(VALGRIND_WRAP)" \
	  sh tests/integration/run-mcp-relay.sh
	ACP_BIN=$(CURDIR)/$(BUILD)/acp ACP_VALGRIND_WRAP="$(VALGRIND_WRAP)" \
	  sh tests/integration/run-trace.sh
	rm -rf $(BUILD)/vg-bridge && mkdir -p $(BUILD)/vg-bridge
	ACP_BIN=$(CURDIR)/tools/valgrind-acp.sh ACP_VG_REAL=$(CURDIR)/$(BUILD)/acp \
	  ACP_VG_LOGS=$(CURDIR)/$(BUILD)/vg-bridge ACP_VALGRIND=1 \
	  sh tests/integration/run-mcp-bridge.sh
	ACP_BIN=$(CURDIR)/tools/valgrind-acp.sh ACP_VG_REAL=$(CURDIR)/$(BUILD)/acp \
	  ACP_VG_LOGS=$(CURDIR)/$(BUILD)/vg-bridge ACP_VALGRIND=1 \
	  sh tests/integration/run-mcp-bridge-http.sh
	./tools/valgrind-acp.sh --check $(BUILD)/vg-bridge

check-headers: build
	./tools/check-headers.sh $(BUILD)

check-install: build
	./tools/check-install.sh $(BUILD)

check-wasm:
	./tools/check-wasm.sh build-wasm

# The tests of the vector scans built with ACP_NO_AVX2, the path of every
# CPU that is not x86-64 (the AVX steps and their tests compiled out): the
# other builds never compile their #else branches.
check-noavx: deps
	@test -f $(NOAVX_BUILD)/CMakeCache.txt || $(CMAKE) -S . -B $(NOAVX_BUILD) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACP_ENABLE_WERROR=ON \
	  -DCMAKE_C_FLAGS=-DACP_NO_AVX2 $(CMAKE_ARGS)
	$(CMAKE) --build $(NOAVX_BUILD) -j$(JOBS) --target test_json \
	  test_rpc_plain
	cd $(NOAVX_BUILD) && $(CTEST) --output-on-failure \
	  -R '^(test_json|test_rpc_plain)$$'

# The load generator for the MCP HTTP benchmark (bench only, not CI).
bench-deps: deps
	@command -v wrk >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; \
	  else echo "missing wrk; run: sudo apt-get install -y wrk"; exit 1; fi; }

# Each figure beside its floor measured in the same run (bench/README.md).
# `make bench-quick` (or BENCH_ARGS=--quick) is a smoke run of the same.
BENCH_ARGS ?=
BENCH_JSON_REPS ?=
# The machine-readable lines of this run go to BENCH_RUN; bench/summary.mjs
# prints the one table from them at the end.
BENCH_RUN = $(CURDIR)/build-release/bench/last
bench: peers bench-deps
	$(CMAKE) -S . -B build-release -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build build-release -j$(JOBS)
	rm -rf $(BENCH_RUN) && mkdir -p $(BENCH_RUN)
	@# Every script runs even when an earlier one failed, so the table
	@# below always covers the whole run; the exit status still says that
	@# something failed. A ratio below its target is printed "NOT met" and
	@# fails nothing (ratios move with the machine, and a slow run must
	@# still print its table); only run-conductor.sh's checks fail it.
	@export ACP_BIN=$(CURDIR)/build-release/acp; failed=""; \
	./build-release/bench/bench_json $(BENCH_JSON_REPS) || failed="$$failed bench_json"; \
	./bench/run-turns.sh $(BENCH_ARGS) --out $(BENCH_RUN)/turns.jsonl || failed="$$failed run-turns"; \
	./bench/run-turns.sh $(BENCH_ARGS) --pin first --payloads 5 --out $(BENCH_RUN)/turns-pinned.jsonl || failed="$$failed run-turns-pinned"; \
	./bench/run-conductor.sh $(BENCH_ARGS) || failed="$$failed run-conductor"; \
	./bench/run-mcp.sh $(BENCH_ARGS) --out $(BENCH_RUN)/mcp.jsonl || failed="$$failed run-mcp"; \
	./bench/run-mcp-2026.sh $(BENCH_ARGS) --out $(BENCH_RUN)/mcp-2026.jsonl || failed="$$failed run-mcp-2026"; \
	./bench/run-mcp-bridge.sh $(BENCH_ARGS) >$(BENCH_RUN)/bridge.log 2>&1 || failed="$$failed run-mcp-bridge"; \
	cat $(BENCH_RUN)/bridge.log; \
	./bench/run-remote.sh $(BENCH_ARGS) --out $(BENCH_RUN)/remote.jsonl || failed="$$failed run-remote"; \
	./bench/idle-conns.sh --out $(BENCH_RUN)/idle.jsonl || failed="$$failed idle-conns"; \
	node bench/summary.mjs $(BENCH_RUN) || failed="$$failed summary"; \
	if [ -n "$$failed" ]; then \
	  echo "make bench: failed:$$failed (see each script's output above)"; exit 1; fi

bench-quick:
	$(MAKE) bench BENCH_ARGS=--quick BENCH_JSON_REPS=3

fuzz:
	$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DACP_BUILD_FUZZERS=ON
	$(CMAKE) --build build-fuzz -j$(JOBS)
	./tools/run-fuzzers.sh build-fuzz $(or $(FUZZ_SECONDS),60)

# Not the *.h.in templates: clang-format splits their @VAR@ placeholders.
format:
	clang-format -i $$(git ls-files '*.c' '*.h')

install: build
	$(CMAKE) --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-release build-fuzz build-wasm
