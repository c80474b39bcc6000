"""Paths and helpers every part of `make bench` shares (bench/run.py and the modules it uses)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# tests/e2e/harness.py (Envoy binary lookup, certificates, free ports, an HTTPS client) is imported by
# the bench modules after this one.
sys.path.insert(0, str(REPO / "tests" / "e2e"))

BENCH = REPO / "bench"
WORK = REPO / ".work" / "bench"
SHIM = WORK / "bin" / "client-cert-shim.so"
LUA = BENCH / "wrk" / "post.lua"
WASM_TOOLGATE = REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
WASM_NO_LISTS = REPO / "target/wasm32-wasip1/release/toolgate_filter_no_list_filtering.wasm"
WASM_NOOP = REPO / "target/wasm32-wasip1/release/toolgate_bench_noop_filter.wasm"
WASM_NAIVE = REPO / "target/wasm32-wasip1/release/toolgate_bench_naive_filter.wasm"
WASM_CALLOUT = REPO / "target/wasm32-wasip1/release/toolgate_bench_callout_filter.wasm"
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
