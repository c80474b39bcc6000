#!/usr/bin/env python3
"""`make bench`: Toolgate against bare Envoy, Envoy's RBAC filter (on headers; and on Envoy's own MCP
filter's metadata, row (m), bench/mcp_rbac.py), a no-op proxy-wasm filter and ext_authz, side by side in one interleaved run, plus native micro-benchmarks of the policy crate.
Toolgate runs on both hosts: the proxy-wasm filter in Envoy's V8, and the dynamic module (`make module`;
rows (cm), (dm), (gm), (lm), against the no-op dynamic module (nm)); Envoy's start-up time and RSS are
measured for (a), (c), (cm) and (nm) (bench/startup.py).

Writes docs/benchmarks.md and docs/benchmarks.svg (BENCH_QUICK=1: a few seconds per configuration,
output under .work/bench/quick/, for `make test` as a smoke test of the pipeline).

Method (details in the generated report):
  - every Envoy runs `--concurrency 1` pinned to CPU 0 (taskset); wrk, the upstream and the ext_authz
    authorizer are pinned to CPU 1; loopback only;
  - all configurations share one listener (HTTPS with client certificates, rendered by the real
    `toolgate render`), one route, one upstream cluster, one access log; only the HTTP filters differ;
  - wrk presents agent-a's client certificate (bench/wrk/client-cert-shim.c) on every connection;
  - runs are interleaved: round 1 (body 1: a b n c d e, body 2: ...), round 2, ...;
  - Envoy CPU per request = (sum of the CPU time of Envoy's threads, /proc/PID/task/*/schedstat,
    after the run - before) / completed requests.

The parts: workload.py (bodies, YAML inputs), configs.py (the rows and their Envoy configurations),
procs.py (servers, Envoy, CPU and memory), load.py (wrk and the sanity checks), counts.py (callgrind),
report.py (docs/benchmarks.md); this file builds, runs them in order and times the rows.

Usage: .venv/bin/python bench/run.py [--duration S] [--rounds N] [--connections C] [--configs a,b,...]
       [--bodies 300B,64KiB,1MiB] [--no-micro] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import (
    AUTHZ,
    AUTHZ_GRPC,
    BENCH,
    MODULE_NOOP,
    MODULE_TOOLGATE,
    REPO,
    SHIM,
    TOOLGATE,
    UPSTREAM,
    WASM_NOOP,
    WASM_NO_LISTS,
    WASM_TOOLGATE,
    WORK,
    log,
    sh,
)
from workload import (
    AUTHZ_SERVICE,
    BACKENDS,
    BACKENDS_10K,
    BODIES,
    LIST_ALLOWED,
    LIST_ENTRY_BYTES,
    LIST_REQUEST,
    LIST_TOOLS,
    NS,
    PRINCIPAL,
    TOOL,
    TOOLS,
    V26,
    gateway_yaml,
    make_body,
    policies_c,
    policies_f1,
    policies_f2,
    policies_g1,
    policies_l,
    policies_many,
    tls_objects,
    tools_list_response,
)
from procs import Envoy, Server, cpu_ns, process_cpu_ns, rss_kib
from configs import (
    BASELINE_KEY,
    CONFIGS,
    LIST_KEYS,
    MODERN,
    NATIVE,
    SMALL_ONLY,
    derive,
    edit_bare,
    edit_baseline,
    edit_callout,
    edit_ext_authz,
    edit_ext_authz_grpc,
    edit_mcp_rbac,
    edit_naive,
    edit_none,
    edit_noop,
    edit_noop_module,
    edit_rbac,
    plan_bytes,
    plan_of,
    render,
)
from load import Loader, sanity
from counts import callgrind, engine_list_pass, json_floor
import startup
import harness  # tests/e2e (on the path common sets): Envoy binary lookup, free ports, an HTTPS client


# --------------------------------------------------------------------------------------------------
# Micro-benchmarks (criterion)


def micro(quick: bool) -> dict:
    crit = REPO / "target" / "criterion"
    extra = ["--warm-up-time", "0.3", "--measurement-time", "0.6", "--sample-size", "10"] if quick else []
    log("native micro-benchmarks: cargo bench -p toolgate-policy")
    started = time.time()
    sh(["cargo", "bench", "--locked", "-q", "-p", "toolgate-policy", "--bench", "engine", "--", "--noplot", *extra],
       stdout=subprocess.DEVNULL)
    out = {}
    for bj in glob.glob(str(crit / "**" / "new" / "benchmark.json"), recursive=True):
        if Path(bj).stat().st_mtime < started:
            continue  # left over from an earlier run of a benchmark that no longer exists
        meta = json.loads(Path(bj).read_text())
        est = json.loads((Path(bj).parent / "estimates.json").read_text())
        out[meta["full_id"]] = {
            "median_ns": est["median"]["point_estimate"],
            "lo_ns": est["median"]["confidence_interval"]["lower_bound"],
            "hi_ns": est["median"]["confidence_interval"]["upper_bound"],
            "bytes": (meta.get("throughput") or {}).get("Bytes"),
        }
    return out


# --------------------------------------------------------------------------------------------------
# Main


def build() -> None:
    log("building: toolgate (release), bench servers, test authorizer, the no-op dynamic module, the filter's two "
        "modules (`make wasm`), the dynamic module (`make module`), no-op, naive and callout filters")
    sh(["cargo", "build", "--locked", "-q", "--release", "-p", "toolgate", "-p", "toolgate-bench-servers",
        "-p", "toolgate-test-authz", "-p", "toolgate-bench-noop-module"])
    sh(["make", "-s", "wasm"], cwd=REPO, stdout=subprocess.DEVNULL)
    sh(["make", "-s", "module"], cwd=REPO, stdout=subprocess.DEVNULL)
    sh(["cargo", "build", "--locked", "-q", "--release", "--target", "wasm32-wasip1",
        "-p", "toolgate-bench-noop-filter", "-p", "toolgate-bench-naive-filter", "-p", "toolgate-bench-callout-filter"])


def build_without_cel() -> int | None:
    """Size of toolgate_filter.wasm built without CEL, when the filter crate has a `cel` feature
    (`--no-default-features --features list-filtering`, own target folder, exports trimmed as `make wasm`
    does); None when it has none (then a build without CEL needs code changes)."""
    manifest = (REPO / "filter" / "Cargo.toml").read_text()
    if not re.search(r"^\s*cel\s*=", manifest, re.M):
        return None
    target = REPO / "target" / "bench-nocel"
    log("building toolgate_filter.wasm without CEL (--no-default-features)")
    try:
        sh(["cargo", "build", "--locked", "-q", "--release", "--target", "wasm32-wasip1", "-p", "toolgate-filter",
            "--no-default-features", "--features", "list-filtering", "--target-dir", str(target)])
        wasm = target / "wasm32-wasip1" / "release" / "toolgate_filter.wasm"
        sh([sys.executable, str(REPO / "scripts" / "wasm-keep-exports.py"), str(wasm), str(REPO / "filter" / "exports.txt")],
           stdout=subprocess.DEVNULL)
        return wasm.stat().st_size
    except subprocess.CalledProcessError:
        log("warning: the build without CEL failed; not reported")
        return None


def build_baseline(rev: str) -> tuple[Path, str]:
    """The filter .wasm at commit `rev` (a git worktree under /tmp, built with that commit's lock file
    and its own target folder; exports trimmed with that commit's script and list). Returns the .wasm
    and the short commit."""
    short = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", f"{rev}^{{commit}}"], check=True,
                           capture_output=True, text=True).stdout.strip()
    tree = Path("/tmp") / f"tg-{short}"
    if not (tree / "Cargo.toml").exists():
        sh(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), short], stdout=subprocess.DEVNULL)
    log(f"building the filter .wasm at {short} in {tree}")
    sh(["cargo", "build", "--locked", "-q", "--release", "--target", "wasm32-wasip1", "-p", "toolgate-filter"], cwd=tree)
    built = tree / "target" / "wasm32-wasip1" / "release" / "toolgate_filter.wasm"
    wasm = WORK / "bin" / f"toolgate_filter-{short}.wasm"
    wasm.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, wasm)
    keep = tree / "scripts" / "wasm-keep-exports.py"
    if keep.exists() and (tree / "filter" / "exports.txt").exists():
        sh([sys.executable, str(keep), str(wasm), str(tree / "filter" / "exports.txt")], stdout=subprocess.DEVNULL)
    return wasm, short


def versions() -> dict:
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout + ""
        except (OSError, subprocess.SubprocessError):
            return ""
    envoy = re.search(r"version: \S+/(\d+\.\d+\.\d+)/\S+/(\S+)/", out([str(harness.envoy_binary()), "--version"]))
    cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
    mem = re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())
    os_name = re.search(r'PRETTY_NAME="([^"]*)"', Path("/etc/os-release").read_text()) if Path("/etc/os-release").exists() else None
    return {
        "envoy": f"{envoy.group(1)} ({envoy.group(2)})" if envoy else "?",
        "wrk": (out(["wrk", "-v"]).splitlines() or ["?"])[0].split(" [")[0],
        "rustc": out(["rustc", "--version"]).strip(),
        "commit": out(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]).strip()
                  + (" (+ uncommitted changes)" if out(["git", "-C", str(REPO), "status", "--porcelain"]).strip() else ""),
        "cpu": cpu.group(1).strip() if cpu else "?",
        "cpus": os.cpu_count(),
        "memory_gib": round(int(mem.group(1)) / 1024 / 1024, 1) if mem else 0,
        "kernel": platform.release(),
        "os": os_name.group(1) if os_name else platform.system(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def main() -> int:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=1 if quick else 4, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=1 if quick else 3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--bodies", default=",".join(BODIES))
    ap.add_argument("--no-micro", action="store_true", help="skip the criterion micro-benchmarks")
    ap.add_argument("--no-build", action="store_true",
                    help="use the binaries, .wasm and .so files already built (as the build step leaves them)")
    ap.add_argument("--callgrind-requests", type=int, default=0 if quick else 1000,
                    help="requests per configuration under callgrind (0: skip that stage)")
    ap.add_argument("--starts", type=int, default=3 if quick else 9,
                    help="Envoy starts per configuration for the start-up time and RSS (bench/startup.py; 0: skip)")
    ap.add_argument("--callgrind-configs", default="",
                    help="the configurations counted under callgrind (default: every one of --configs)")
    ap.add_argument("--out-dir", type=Path, default=WORK / "quick" if quick else REPO / "docs")
    ap.add_argument("--baseline", metavar="REV", default="",
                    help=f"also run ({BASELINE_KEY}): (c) with the filter .wasm built at commit REV (git worktree under /tmp)")
    args = ap.parse_args()
    keys = [k for k in args.configs.split(",") if k]
    if args.baseline and BASELINE_KEY not in keys:
        keys.insert(keys.index("c") + 1 if "c" in keys else len(keys), BASELINE_KEY)
    if BASELINE_KEY in keys and not args.baseline:
        ap.error(f"({BASELINE_KEY}) needs --baseline REV")
    body_names = [b for b in args.bodies.split(",") if b]
    for k in keys:
        if k not in CONFIGS and k != BASELINE_KEY:
            ap.error(f"unknown configuration {k!r} (known: {', '.join(CONFIGS)})")
    for b in body_names:
        if b not in BODIES:
            ap.error(f"unknown body {b!r} (known: {', '.join(BODIES)})")
    if (os.cpu_count() or 1) < 2:
        log("warning: fewer than 2 CPUs: Envoy and the load generator share one")
    started = time.monotonic()
    WORK.mkdir(parents=True, exist_ok=True)
    if not SHIM.exists():
        sh(["bash", str(BENCH / "setup.sh")])
    if args.no_build:
        missing = [str(p) for p in (TOOLGATE, UPSTREAM, AUTHZ, AUTHZ_GRPC, WASM_TOOLGATE, WASM_NO_LISTS, WASM_NOOP,
                                    MODULE_TOOLGATE, MODULE_NOOP) if not p.exists()]
        if missing:
            ap.error(f"--no-build: not built: {', '.join(missing)}")
    else:
        build()
    nocel_size = None if args.no_build else build_without_cel()
    baseline_wasm = None
    if args.baseline:
        baseline_wasm, short = build_baseline(args.baseline)
    # What the baseline filter predates: the lifecycle in the engine (no policy/src/lifecycle/), list
    # filtering (what "(c) unchanged by list filtering" compares).
    def at_baseline(path: str) -> bool:
        return bool(args.baseline) and subprocess.run(
            ["git", "-C", str(REPO), "cat-file", "-e", f"{args.baseline}:{path}"], capture_output=True).returncode == 0
    baseline_lifecycle = at_baseline("policy/src/lifecycle/mod.rs")
    baseline_lists = at_baseline("policy/src/list_filter.rs")
    if args.baseline:
        CONFIGS[BASELINE_KEY] = (f"Toolgate, 20 tools, filter at {short}",
                                 f"(c)'s configuration and plan with the filter .wasm built at {short}"
                                 + (" (before the lifecycle moved into the engine and the SDK was dropped)" if not baseline_lifecycle
                                    else " (before list filtering)" if not baseline_lists else "")
                                 + "; plan settings and Wasm options that version does not know removed")
    info = versions()
    info["baseline"] = args.baseline
    info["baseline_lifecycle"] = baseline_lifecycle
    info["baseline_list_filtering"] = baseline_lists
    info["quick"] = quick
    info["no_build"] = args.no_build
    info["argv"] = sys.argv[1:]
    info["params"] = {"duration_s": args.duration, "rounds": args.rounds, "connections": args.connections,
                      "warmup_s": args.warmup, "configs": keys, "bodies": body_names}

    micro_results = {} if args.no_micro else micro(quick)

    certs = harness.gen_certs(WORK / "certs")
    body_dir = WORK / "bodies"
    body_dir.mkdir(exist_ok=True)
    bodies = {name: make_body(size, TOOL) for name, size in BODIES.items()}
    body_paths = {}
    for name, data in bodies.items():
        body_paths[name] = body_dir / f"{name}.json"
        body_paths[name].write_bytes(data)
    # The MODERN rows' bodies (300 B only: they are in SMALL_ONLY).
    modern_bodies = {"300B": make_body(BODIES["300B"], TOOL, modern=True)}
    body_paths[f"300B-{V26}"] = body_dir / f"300B-{V26}.json"
    body_paths[f"300B-{V26}"].write_bytes(modern_bodies["300B"])
    # The list rows' request, and the upstream's answer to it.
    body_paths["tools-list"] = body_dir / "tools-list.json"
    body_paths["tools-list"].write_bytes(LIST_REQUEST)
    list_response = body_dir / "tools-list-response.json"
    list_response.write_bytes(tools_list_response())

    procs: list = []
    envoys: dict[str, Envoy] = {}
    try:
        upstream = Server("upstream", [str(UPSTREAM), "--tools-list", str(list_response)])
        procs.append(upstream)
        authz = Server("authz", [str(AUTHZ), "--principal", PRINCIPAL, "--tools", ",".join(TOOLS)])
        procs.append(authz)
        # (g1)/(g2)'s gRPC authorizer: the same rule as everywhere (agent-a, the 20 tools), no request log.
        rule = WORK / "authz-grpc-rule.json"
        rule.write_text(json.dumps({"principals": [PRINCIPAL], "allow_tools": TOOLS, "default": "deny"}))
        authz_grpc = Server("authz-grpc", [str(AUTHZ_GRPC), "--rule", str(rule)], listen=["--grpc", "127.0.0.1:0"],
                            json_key="grpc")
        procs.append(authz_grpc)

        # Rendered configurations (the real `toolgate render`), and the ones derived from (c)'s.
        ports = {k: harness.free_port() for k in CONFIGS}
        ports[BASELINE_KEY] = harness.free_port()
        log("rendering (c) and (d) with `toolgate render`")
        dir_c, _ = render("c", policies_c(), certs, upstream, ports["c"], BACKENDS)
        dir_d, render_d_s = render("d", policies_many(BACKENDS), certs, upstream, ports["d"], BACKENDS)
        dirs = {}

        def rebased(port):  # derived configs listen on their own port
            def wrap(edit):
                def e(lds, cds):
                    lds["resources"][0]["address"]["socket_address"]["port_value"] = port
                    edit(lds, cds)
                return e
            return wrap
        dirs["a"] = derive(dir_c, "cfg-a", rebased(ports["a"])(edit_bare))
        dirs["b"] = derive(dir_c, "cfg-b", rebased(ports["b"])(edit_rbac))
        dirs["m"] = derive(dir_c, "cfg-m", rebased(ports["m"])(edit_mcp_rbac))
        dirs["n"] = derive(dir_c, "cfg-n", rebased(ports["n"])(edit_noop))
        dirs["s"] = derive(dir_c, "cfg-s", rebased(ports["s"])(edit_naive))
        dirs["c"] = derive(dir_c, "cfg-c", edit_none)
        dirs["c26"] = derive(dir_c, "cfg-c26", rebased(ports["c26"])(edit_none))
        dirs["d"] = derive(dir_d, "cfg-d", edit_none)
        dirs["e"] = derive(dir_c, "cfg-e", rebased(ports["e"])(edit_ext_authz(authz)))
        dirs["g2"] = derive(dir_c, "cfg-g2", rebased(ports["g2"])(edit_ext_authz_grpc(authz_grpc)))
        if baseline_wasm:
            dirs[BASELINE_KEY] = derive(dir_c, f"cfg-{BASELINE_KEY}", rebased(ports[BASELINE_KEY])(edit_baseline(baseline_wasm, args.baseline)))
        grpc_authz = [f"{AUTHZ_SERVICE}.{NS}={authz_grpc.address}"]
        for k, pol, extra, opts in (("cn", policies_c, [], ["--list-filtering", "off"]),
                                    ("f1", policies_f1, [], []), ("f2", policies_f2, [], []),
                                    ("g1", policies_g1, grpc_authz, []),
                                    ("l1", policies_l, [], ["--list-filtering", "on"]),
                                    ("l0", policies_l, [], ["--list-filtering", "off"]),
                                    ("cm", policies_c, [], []), ("dm", lambda: policies_many(BACKENDS), [], []),
                                    ("gm", policies_g1, grpc_authz, []), ("lm", policies_l, [], ["--list-filtering", "on"])):
            if k in keys or (k == "g1" and "g0" in keys) or (k == "cm" and "nm" in keys):
                d, _ = render(k, pol(), certs, upstream, ports[k], BACKENDS, resolve=extra, extra=opts,
                              wasm=WASM_NO_LISTS if k == "cn" else WASM_TOOLGATE,
                              native=MODULE_TOOLGATE if k in NATIVE else None)
                dirs[k] = derive(d, f"cfg-{k}", edit_none)
                if k == "g1" and "g0" in keys:
                    dirs["g0"] = derive(d, "cfg-g0", rebased(ports["g0"])(edit_callout(bodies["300B"], ports["g0"])))
                if k == "cm" and "nm" in keys:
                    dirs["nm"] = derive(d, "cfg-nm", rebased(ports["nm"])(edit_noop_module))
        for k in (k for k in keys if k in LIST_KEYS | {"cn"}):
            # The plan says it: listFiltering is written only when off.
            on = plan_of(dirs[k])["settings"].get("listFiltering", True)
            if on != (k in ("l1", "lm")):
                raise RuntimeError(f"config {k}: the rendered plan has listFiltering {on}")
        if "cn" in keys and b"proxy_on_response_" in WASM_NO_LISTS.read_bytes():
            raise RuntimeError(f"{WASM_NO_LISTS} exports response callbacks")

        # 10,000 policies: `toolgate compile` and `toolgate render` wall time, plan size, load in the VM.
        log("10,000 policies: toolgate compile / render, and the plan's load time in Envoy")
        big_src = WORK / "inputs" / "x10k"
        shutil.rmtree(big_src, ignore_errors=True)
        big_src.mkdir(parents=True)
        (big_src / "gateway.yaml").write_text(gateway_yaml(ports["c"], BACKENDS_10K))
        (big_src / "tls.yaml").write_text(tls_objects(certs))
        (big_src / "policies.yaml").write_text(policies_many(BACKENDS_10K))
        compile_times = []
        for _ in range(1 if quick else 3):
            t = time.perf_counter()
            sh([str(TOOLGATE), "compile", "-f", str(big_src), "-o", str(WORK / "compile-x10k"), "--strict"],
               stdout=subprocess.DEVNULL)
            compile_times.append(time.perf_counter() - t)
        big_port = harness.free_port()
        dir_x, render_x_s = render("x10k", policies_many(BACKENDS_10K), certs, upstream, big_port, BACKENDS_10K)
        dir_x = derive(dir_x, "cfg-x10k", edit_none)
        ex = Envoy("x10k", dir_x / "envoy.json", big_port)
        try:
            ex.wait_ready()
            harness.wait_for(lambda: ex.plan_loads(), timeout=20, what="plan load log line")
            loads_x = ex.plan_loads()
        finally:
            ex.stop()
        sizes = {
            "wasm_toolgate": WASM_TOOLGATE.stat().st_size,
            "wasm_noop": WASM_NOOP.stat().st_size,
            "module_toolgate": MODULE_TOOLGATE.stat().st_size if NATIVE & set(keys) else None,
            "module_noop": MODULE_NOOP.stat().st_size if "nm" in keys else None,
            "wasm_toolgate_nocel": nocel_size,
            "wasm_baseline": baseline_wasm.stat().st_size if baseline_wasm else None,
            "plan_c": plan_bytes(dir_c), "plan_d": plan_bytes(dir_d), "plan_x10k": plan_bytes(dir_x),
            "compile_x10k_s": compile_times, "render_x10k_s": render_x_s, "render_d_s": render_d_s,
        }

        # Start-up time and RSS (each Envoy alone on its port, before the configurations' own start).
        starts = startup.measure(keys, dirs, ports, certs, bodies["300B"], args.starts)

        # Start every configuration's Envoy, check it enforces what it should, warm it up.
        for k in keys:
            envoys[k] = Envoy(k, dirs[k] / "envoy.json", ports[k])
        for k in keys:
            envoys[k].wait_ready()
        loader = Loader(certs, args.connections, body_paths)
        checks = {}

        def bodies_of(k):
            return [b for b in body_names if k not in SMALL_ONLY or b == "300B"]
        for k in keys:
            checks[k] = sanity(k, ports[k], certs, modern_bodies if k in MODERN else
                               {b: bodies[b] for b in BODIES if k not in SMALL_ONLY or b == "300B"})
            log(f"({k}) {CONFIGS[k][0]}: {checks[k]}")
        if "g0" in keys:
            # The callout filter lets a request go on if the host refuses its call: make sure it calls.
            cluster = plan_of(dirs["g1"])["gateway"]["externalAuth"]["authorizer"]["cluster"]
            calls = envoys["g0"].counter(f"cluster.{cluster}.upstream_rq_total")
            if calls < 1:
                raise RuntimeError(f"config g0: no call reached the authorizer cluster {cluster}")
            checks["g0"] += f"; {calls} call(s) to {cluster} for the check's request"
        plan_loads = {}
        for k in (k for k in keys if k in ("c", "d")):
            plan_loads[k] = harness.wait_for(envoys[k].plan_loads, timeout=20, what=f"plan load log line of ({k})")
        plan_loads["x10k"] = loads_x
        if args.warmup:
            log("warm-up")
            for k in keys:
                for b in bodies_of(k):
                    loader.run(ports[k], b, args.warmup, k)

        # Interleaved rounds.
        runs = []
        total = args.rounds * sum(len(bodies_of(k)) for k in keys)
        log(f"{total} runs of {args.duration} s, {args.connections} connections "
            f"(about {total * (args.duration + 1) // 60 + 1} min)")
        aux = {"upstream": upstream.proc.pid, "authz": authz.proc.pid, "authz_grpc": authz_grpc.proc.pid}
        for rnd in range(args.rounds):
            for b in body_names:
                for k in (k for k in keys if b in bodies_of(k)):
                    e = envoys[k]
                    c0, a0 = cpu_ns(e.pid), {n: process_cpu_ns(p) for n, p in aux.items()}
                    t0 = time.perf_counter()
                    w = loader.run(ports[k], b, args.duration, k)
                    wall = time.perf_counter() - t0
                    c1, a1 = cpu_ns(e.pid), {n: process_cpu_ns(p) for n, p in aux.items()}
                    reqs = max(w["requests"], 1)
                    errors = sum(w["errors"].values())
                    run = {
                        "round": rnd, "body": b, "config": k, "requests": w["requests"], "errors": w["errors"],
                        "rps": w["requests"] / (w["duration_us"] / 1e6),
                        "p50_us": w["latency_us"]["p50"], "p99_us": w["latency_us"]["p99"],
                        "cpu_us": (c1 - c0) / 1e3 / reqs, "cpu_util": (c1 - c0) / 1e9 / wall,
                        "aux_cpu_us": {n: (a1[n] - a0[n]) / 1e3 / reqs for n in aux},
                        "rss_kib": rss_kib(e.pid),
                    }
                    runs.append(run)
                    log(f"round {rnd + 1}/{args.rounds} {b:>5} ({k}) {run['rps']:9.0f} req/s  p50 {run['p50_us']:6d} us  "
                        f"p99 {run['p99_us']:6d} us  Envoy {run['cpu_us']:8.1f} us/req ({run['cpu_util'] * 100:3.0f}% CPU)"
                        + (f"  ERRORS {w['errors']}" if errors else ""))
                    if errors:
                        raise RuntimeError(f"config {k}, body {b}: {errors} errors: {w['errors']}")
        for e in envoys.values():
            e.stop()
        cg, engine_list, floor = {}, None, None
        if args.callgrind_requests:
            counted = [k for k in keys if not args.callgrind_configs or k in args.callgrind_configs.split(",")]
            cg = callgrind(counted, dirs, ports, certs, body_paths, args.callgrind_requests)
            if "lm" in counted:
                engine_list = engine_list_pass()
                floor = json_floor(list_response)
    finally:
        for e in envoys.values():
            e.stop()
        for p in procs:
            p.stop()

    results = {"callgrind": cg, "info": info, "configs": {k: CONFIGS[k] for k in keys}, "bodies": {b: BODIES[b] for b in body_names},
               "checks": checks, "runs": runs, "startup": starts,
               "list": {"tools": len(LIST_TOOLS), "allowed": len(LIST_ALLOWED), "entry_bytes": LIST_ENTRY_BYTES,
                        "response_bytes": list_response.stat().st_size, "request_bytes": len(LIST_REQUEST)}, "micro": micro_results, "engine_list_pass": engine_list, "json_floor": floor, "sizes": sizes, "plan_loads": plan_loads,
               "elapsed_s": time.monotonic() - started}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    raw = WORK / "quick" / "results.json" if quick else WORK / "results.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(results, indent=1))
    import report  # bench/report.py

    report.write(results, args.out_dir)
    log(f"done in {results['elapsed_s'] / 60:.1f} min: {args.out_dir / 'benchmarks.md'}, {args.out_dir / 'benchmarks.svg'} "
        f"(raw: {raw})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(BENCH))
    sys.exit(main())
