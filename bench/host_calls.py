#!/usr/bin/env python3
"""What single proxy-wasm host calls cost Envoy (`make bench-host-calls`, about 30 minutes; a development
measurement, not part of `make bench`).

Runs the quick benchmark's (n) and (g0) rows under callgrind once per variant of bench/callout-filter
(`BENCH_G0_ARGS`: the host calls it adds when the authorizer's answer comes, N times each) and prints
(g0) − (n) per variant, and the difference to the plain callout divided by N: Envoy's instructions per
host call, V8's entry into and out of the VM included. The plain callout is run first and last: its
two figures show the spread between runs.

    .venv/bin/python bench/host_calls.py [--repeat 4] [--requests 1000]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / ".work" / "bench" / "quick" / "results.json"


def run(args: str, requests: int) -> float:
    """(g0) − (n), k instructions per request, with the callout filter doing `args`."""
    env = {**os.environ, "BENCH_QUICK": "1", "BENCH_G0_ARGS": args}
    cmd = [sys.executable, str(REPO / "bench/run.py"), "--configs", "n,g0", "--bodies", "300B", "--no-micro",
           "--callgrind-requests", str(requests)]
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench/run.py failed for BENCH_G0_ARGS={args!r}:\n{done.stderr[-3000:]}")
    cg = json.loads(RESULTS.read_text())["callgrind"]
    return (cg["g0"]["Ir"] - cg["n"]["Ir"]) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=4, help="N: how many times each host call is made per request")
    ap.add_argument("--requests", type=int, default=1000, help="requests under callgrind per run")
    args = ap.parse_args()
    n = args.repeat
    # (label, BENCH_G0_ARGS, how many host calls of one kind it adds: 0 for the rows that compare calls)
    variants = [
        ("plain callout (proxy_grpc_call, answer not read)", "", 0),
        (f"+ read the answer ×{n} (proxy_get_buffer_bytes)", f"read_answer={n}", n),
        (f"+ read request.protocol ×{n} (proxy_get_property)", f"read_protocol={n}", n),
        (f"+ read the clock ×{n} (proxy_get_current_time_nanoseconds)", f"clock={n}", n),
        (f"+ increment a counter ×{n} (proxy_increment_metric)", f"count={n}", n),
        ("the call through proxy_http_call, answer not read", "http", 0),
        ("the call through proxy_http_call, answer read (headers, trailers, body)", "http read_answer=1", 0),
        ("plain callout again", "", 0),
    ]
    rows = []
    for label, words, _ in variants:
        print(f"host-calls: {label} ...", file=sys.stderr, flush=True)
        rows.append(run(words, args.requests))
    base = rows[0]
    print(f"Envoy under callgrind, {args.requests} requests of 300 B per run; k instructions per request\n")
    print("| callout filter (row (g0)) | (g0) − (n) | over the plain callout | per host call |")
    print("|---|--:|--:|--:|")
    for (label, _, calls), total in zip(variants, rows):
        over = total - base
        per = f"{over / calls:+.1f}" if calls else ""
        print(f"| {label} | {total:.1f} | {over:+.1f} | {per} |")


if __name__ == "__main__":
    main()
