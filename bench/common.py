"""Paths and helpers every part of `make bench` shares (bench/run.py and the modules it uses)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# tests/e2e/harness.py (Envoy binary lookup, certificates, free ports, an HTTPS client) is imported by
# the bench modules after this one.
sys.path.insert(0, str(REPO / "tests" / "e2e"))

BENCH = REPO / "bench"
# BENCH_WORK: another folder for the run's files (renders, logs, callgrind output), so that two runs
# do not share them; the TLS shim is bench/setup.sh's, in the default one.
WORK = Path(os.environ["BENCH_WORK"]).resolve() if os.environ.get("BENCH_WORK") else REPO / ".work" / "bench"
SHIM = REPO / ".work" / "bench" / "bin" / "client-cert-shim.so"
LUA = BENCH / "wrk" / "post.lua"
WASM_TOOLGATE = REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
WASM_NO_LISTS = REPO / "target/wasm32-wasip1/release/toolgate_filter_no_list_filtering.wasm"
WASM_NOOP = REPO / "target/wasm32-wasip1/release/toolgate_bench_noop_filter.wasm"
WASM_NAIVE = REPO / "target/wasm32-wasip1/release/toolgate_bench_naive_filter.wasm"
WASM_CALLOUT = REPO / "target/wasm32-wasip1/release/toolgate_bench_callout_filter.wasm"
# The dynamic modules (native host): Toolgate's (`make module`) and bench/noop-module.
MODULE_TOOLGATE = REPO / "target/release/libtoolgate_module.so"
MODULE_NOOP = REPO / "target/release/libtoolgate_bench_noop_module.so"
TOOLGATE = REPO / "target/release/toolgate"
UPSTREAM = REPO / "target/release/bench-upstream"
AUTHZ = REPO / "target/release/bench-authz"
AUTHZ_GRPC = REPO / "target/release/toolgate-test-authz"  # tests/authz-servers: the (g) rows' gRPC authorizer

ENVOY_CPU = "0"
LOAD_CPU = "1"


def log(msg: str) -> None:
    print(f"bench: {msg}", flush=True)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)
