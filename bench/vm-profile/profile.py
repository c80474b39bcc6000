"""Instructions per request spent inside the Wasm VM, function by function (a development tool).

callgrind on Envoy counts the filter's compiled code as anonymous JIT code. This runs the same
.wasm in Node's V8 with a stub host (bench/vm-profile/host.mjs) under callgrind twice, with 0 and with
N requests, names the JIT code with V8's --perf-basic-prof map, and prints the difference per request:
the filter's functions (Rust, the SDK, the allocator), and the stub host's share, which says nothing
about Envoy's host-call costs (those are in docs/benchmarks.md).

usage: python3 bench/vm-profile/profile.py [--wasm F] [--plan F] [--body F] [--requests N] [--top K]
Defaults: the filter `make wasm` builds, and the (c) plan and 300 B body that `make bench` last wrote.
With (g1)'s plan (a gateway-level gRPC ExternalAuth policy, e.g. extracted from
.work/bench/render/cfg-g1) each request is a callout answered OK by the stub host. Each request ends
with the upstream's answer (its headers, then its body) when the module has response callbacks, as
Envoy calls them on every stream (toolgate_filter_no_list_filtering.wasm has none). Function names
need the `name` section: build with `WASM_KEEP_NAMES=1 make wasm`.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / ".work" / "bench"


def plan_of(lds: Path) -> str:
    """The plan in a rendered listener configuration (the Wasm filter's configuration value)."""
    def walk(o):
        if isinstance(o, dict):
            if o.get("name") == "envoy.filters.http.wasm":
                return o["typed_config"]["config"]["configuration"]["value"]
            o = list(o.values())
        if isinstance(o, list):
            for v in o:
                if (found := walk(v)) is not None:
                    return found
        return None
    plan = walk(json.loads(lds.read_text()))
    if plan is None:
        sys.exit(f"no Toolgate filter in {lds}")
    return plan


def run(wasm: Path, plan: Path, body: Path, requests: int, work: Path) -> tuple[Path, Path]:
    """callgrind over host.mjs; returns its output and V8's perf map (/tmp/perf-PID.map: valgrind runs
    node in its own process, so PID is the one started here). Runs in `work`, where V8 also writes
    its isolate log."""
    out = work / f"cg.{requests}.out"
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--smc-check=all-non-file", "--dump-instr=yes", f"--callgrind-out-file={out}",
         "node", "--no-liftoff", "--single-threaded", "--perf-basic-prof", str(REPO / "bench/vm-profile/host.mjs"),
         str(wasm.resolve()), str(plan.resolve()), str(body.resolve()), str(requests)],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    perf_map = Path(f"/tmp/perf-{proc.pid}.map")
    if proc.returncode != 0 or not perf_map.exists():
        sys.exit(f"host.mjs failed under valgrind (or wrote no {perf_map}):\n{stdout[-2000:]}{stderr[-2000:]}")
    kept = work / f"perf.{requests}.map"
    shutil.move(perf_map, kept)
    return out, kept


def self_cost_by_name(cg: Path, perf_map: Path) -> collections.Counter:
    """Self instructions per function; JIT code named from the perf map, the rest lumped together."""
    rows = []
    for line in perf_map.read_text().splitlines():
        start, size, name = line.split(" ", 2)
        rows.append((int(start, 16), int(size, 16), name))
    rows.sort()
    starts = [r[0] for r in rows]
    per_address: collections.Counter = collections.Counter()
    last, after_calls = 0, False
    for line in cg.open():
        if not line or line[0] not in "0123456789+-*":
            after_calls = after_calls or line.startswith("calls=")
            continue
        parts = line.split()  # "positions: instr line": address, line, Ir
        p = parts[0]
        last = (int(p, 16) if p.startswith("0x") else last + int(p[1:]) if p[0] == "+"
                else last - int(p[1:]) if p[0] == "-" else last if p == "*" else int(p))
        if after_calls:  # the cost line after calls= is the callee's inclusive cost
            after_calls = False
            continue
        if len(parts) > 2:
            per_address[last] += int(parts[2])
    by_name: collections.Counter = collections.Counter()
    for address, cost in per_address.items():
        i = bisect.bisect_right(starts, address) - 1
        inside = i >= 0 and address < rows[i][0] + rows[i][1]
        by_name[rows[i][2] if inside else "(Node and V8 C++: host-call glue, stub host)"] += cost
    return by_name


def kind(name: str) -> str:
    if name.startswith("JS:") and name.endswith("-turbofan") and "file://" not in name and "node:" not in name:
        return "filter (Wasm)"
    return "stub host and Node"


def readable(name: str) -> str:
    """`JS:_ZN15toolgate_policy3mcp9read_body17h...E-250-turbofan` -> `toolgate_policy::mcp::read_body`."""
    name = re.sub(r"^JS:|-\d+-turbofan$", "", name)
    if name.startswith("_ZN"):
        parts, rest = [], name[3:]
        while rest and rest[0].isdigit():
            n = int(re.match(r"\d+", rest).group())
            digits = len(str(n))
            parts.append(rest[digits:digits + n])
            rest = rest[digits + n:]
        name = "::".join(p for p in parts if not re.fullmatch(r"h[0-9a-f]{16}", p))
        name = name.replace("$LT$", "<").replace("$GT$", ">").replace("$u20$", " ").replace("..", "::")
    elif name.startswith("_R") and (m := re.search(r"Cs\w+?_(?=\d)", name)):
        # v0 mangling: the path after the crate's hash is length-prefixed identifiers.
        parts, rest = [], name[m.end():]
        while n := re.match(r"(\d+)_?", rest):  # the "_" separates a length from an identifier with a leading "_"
            parts.append(rest[n.end():n.end() + int(n.group(1))])
            rest = rest[n.end() + int(n.group(1)):]
        name = "::".join(parts) or name
    return name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wasm", type=Path, default=REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm")
    ap.add_argument("--plan", type=Path, help="plan JSON (default: (c) from the last `make bench`)")
    ap.add_argument("--body", type=Path, default=BENCH / "bodies" / "300B.json")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolgate-vm-profile-") as tmp:
        work = Path(tmp)
        plan = args.plan
        if plan is None:
            lds = BENCH / "render" / "c" / "default.bench-gateway" / "lds.json"
            if not lds.exists():
                sys.exit(f"{lds} is missing: run `make bench` (or `make bench-quick`) first, or pass --plan")
            plan = work / "plan.json"
            plan.write_text(plan_of(lds))
        if not args.body.exists():
            sys.exit(f"{args.body} is missing: run `make bench-quick` first, or pass --body")
        base = self_cost_by_name(*run(args.wasm, plan, args.body, 0, work))
        measured = self_cost_by_name(*run(args.wasm, plan, args.body, args.requests, work))
    per_request = {k: (measured[k] - base.get(k, 0)) / args.requests for k in measured}
    kinds: collections.Counter = collections.Counter()
    for k, v in per_request.items():
        kinds[kind(k)] += v
    print(f"{args.wasm.name}: instructions per request in Node's V8 (callgrind, {args.requests} requests)")
    for k, v in kinds.most_common():
        print(f"  {v:9,.0f}  {k}")
    print(f"filter functions, self instructions per request (top {args.top}):")
    filter_fns = sorted(((v, k) for k, v in per_request.items() if kind(k) == "filter (Wasm)"), reverse=True)
    for v, k in filter_fns[:args.top]:
        print(f"  {v:9,.0f}  {readable(k)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
