#!/usr/bin/env python3
"""`make wasm-size`: what the filter's .wasm is made of, and what it costs Envoy in memory.

Writes docs/wasm-size.md:
  - the module's size with and without CEL (`--no-default-features --features list-filtering`), as `make wasm`
    ships it
    (exports trimmed, `name` section dropped), beside the no-op proxy-wasm filter of `make bench`;
  - its sections, and its code by crate (twiggy, on the build with function names);
  - Envoy's resident memory (VmRSS) with bare Envoy, the no-op filter, Toolgate with and without CEL,
    on (c)'s configuration of `make bench` (`--concurrency 1`): idle after start, and after a load of
    allowed calls (wrk, 16 connections).

Usage: .venv/bin/python bench/wasm_size.py [--load-seconds S]
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # noqa: E402  (the benchmark's build, render, Envoy and load generator)
import configs  # noqa: E402  (its configuration edits)

REPO = bench.REPO
OUT = REPO / "docs" / "wasm-size.md"
TOOLS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolgate" / "tools"
TWIGGY_VERSION = "0.8.0"
SECTION_NAMES = {0: "custom", 1: "type", 2: "import", 3: "function", 4: "table", 5: "memory", 6: "global",
                 7: "export", 8: "start", 9: "elem", 10: "code", 11: "data", 12: "datacount"}


def twiggy() -> Path:
    exe = TOOLS / "bin" / "twiggy"
    if not exe.exists():
        bench.log(f"installing twiggy {TWIGGY_VERSION} into {TOOLS}")
        bench.sh(["cargo", "install", "--locked", "--quiet", "twiggy", "--version", TWIGGY_VERSION, "--root", str(TOOLS)])
    return exe


def build(name: str, extra: list[str]) -> tuple[Path, Path]:
    """The filter built into its own target folder: (the module with function names, the module as
    `make wasm` ships it)."""
    target = REPO / "target" / "wasm-size" / name
    bench.log(f"building toolgate_filter.wasm ({name})")
    bench.sh(["cargo", "build", "--locked", "-q", "--release", "--target", "wasm32-wasip1", "-p", "toolgate-filter",
              *extra, "--target-dir", str(target)])
    built = target / "wasm32-wasip1" / "release" / "toolgate_filter.wasm"
    named, shipped = target / f"{name}-names.wasm", target / f"{name}.wasm"
    shutil.copy(built, named)
    shutil.copy(built, shipped)
    bench.sh([sys.executable, str(REPO / "scripts" / "wasm-keep-exports.py"), str(shipped), str(REPO / "filter" / "exports.txt")],
             stdout=subprocess.DEVNULL)
    return named, shipped


def sections(module: Path) -> dict[str, int]:
    """Bytes per section (custom sections by name), read with wasm-keep-exports.py's LEB128 reader."""
    spec = importlib.util.spec_from_file_location("wasm_keep_exports", REPO / "scripts" / "wasm-keep-exports.py")
    wasm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wasm)
    data, at, out = module.read_bytes(), 8, {}
    while at < len(data):
        sid = data[at]
        size, body = wasm.leb128(data, at + 1)
        label = SECTION_NAMES.get(sid, str(sid))
        if sid == 0:
            n, p = wasm.leb128(data, body)
            label = f"custom `{data[p:p + n].decode(errors='replace')}`"
        out[label] = out.get(label, 0) + size
        at = body + size
    return out


def by_crate(module: Path) -> collections.Counter:
    """Code bytes by the crate a function's path starts with (generic code instantiated elsewhere
    counts for the crate that defines it: `core`/`alloc` include much of everyone's)."""
    text = subprocess.run([str(twiggy()), "top", "-n", "1000000", "-f", "csv", str(module)],
                          capture_output=True, text=True, check=True).stdout
    agg: collections.Counter = collections.Counter()
    for row in csv.DictReader(io.StringIO(text)):
        name, size = row["Name"], int(row["ShallowSize"])
        if name.startswith(("data segment", "custom section")) or "subsection" in name:
            continue
        m = re.match(r"[<&*\s]*(?:dyn |mut )?([A-Za-z_][A-Za-z0-9_]*)", name)
        crate = m.group(1) if m else "?"
        agg[crate if crate not in ("impl", "T", "F") and not crate.startswith("proxy_on_") else "(other)"] += size
    return agg


def allocator(envoy: "bench.Envoy") -> dict[str, float]:
    """MiB: Envoy's allocator (tcmalloc, admin /memory) and V8's executable pages (smaps, rwx)."""
    admin = envoy.admin_path.read_text().strip()
    m = json.loads(bench.harness.request("GET", f"http://{admin}/memory").body)
    out = {k: int(m.get(k, 0)) / 2**20 for k in ("allocated", "pageheap_free", "total_thread_cache", "total_physical_bytes")}
    rwx = 0
    perms = ""
    for line in open(f"/proc/{envoy.pid}/smaps"):
        head = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S+) ", line)
        if head:
            perms = head.group(1)
        elif line.startswith("Rss:") and perms == "rwxp":
            rwx += int(line.split()[1])
    out["jit"] = rwx / 1024
    return out


def memory(wasms: dict[str, Path], load_seconds: int) -> dict[str, tuple[int, int, dict]]:
    """(idle KiB, loaded KiB, the allocator's figures after the load) of Envoy per configuration."""
    bench.WORK.mkdir(parents=True, exist_ok=True)
    if not bench.SHIM.exists():
        bench.sh(["bash", str(bench.BENCH / "setup.sh")])
    certs = bench.harness.gen_certs(bench.WORK / "certs")
    body = bench.WORK / "bodies" / "300B.json"
    body.parent.mkdir(parents=True, exist_ok=True)
    body.write_bytes(bench.make_body(bench.BODIES["300B"], bench.TOOL))
    loader = bench.Loader(certs, 16, {"300B": body})
    results = {}
    upstream = bench.Server("upstream", [str(bench.UPSTREAM)])
    try:
        port = bench.harness.free_port()
        dir_c, _ = bench.render("c", bench.policies_c(), certs, upstream, port, bench.BACKENDS)

        def with_wasm(path: Path):
            def edit(lds, cds):
                configs.hcm_of(lds)["http_filters"][0]["typed_config"]["config"]["vm_config"]["code"]["local"]["filename"] = str(path)
            return edit

        edits = {"bare Envoy": bench.edit_bare, "no-op proxy-wasm filter": bench.edit_noop}
        edits.update({label: with_wasm(path) for label, path in wasms.items()})
        for label, edit in edits.items():
            d = bench.derive(dir_c, "cfg-size-" + re.sub(r"\W+", "-", label), edit)
            envoy = bench.Envoy("size-" + re.sub(r"\W+", "-", label), d / "envoy.json", port)
            try:
                envoy.wait_ready()
                bench.sanity("a", port, certs, {"300B": body.read_bytes()})
                time.sleep(1)
                idle = bench.rss_kib(envoy.pid)
                loader.run(port, "300B", load_seconds)
                results[label] = (idle, bench.rss_kib(envoy.pid), allocator(envoy))
                bench.log(f"{label}: idle {idle / 1024:.1f} MiB, after load {results[label][1] / 1024:.1f} MiB")
            finally:
                envoy.stop()
    finally:
        upstream.stop()
    return results


def build_state() -> set[str]:
    """The build's inputs that differ from HEAD (`git status`): another change in progress is measured too."""
    out = subprocess.run(["git", "status", "--porcelain", "--", "Cargo.toml", "Cargo.lock", ".cargo", "policy", "filter",
                          "proto"], capture_output=True, text=True, cwd=REPO).stdout
    return {line[3:] for line in out.splitlines()}


def kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load-seconds", type=int, default=5)
    args = ap.parse_args()
    dirty = build_state()
    bench.build()  # toolgate (release), the bench servers and the no-op filter, as `make bench` does
    cel_named, cel = build("cel", [])
    nocel_named, nocel = build("nocel", ["--no-default-features", "--features", "list-filtering"])
    dirty |= build_state()
    noop = bench.WASM_NOOP
    mem = memory({"Toolgate with CEL": cel, "Toolgate without CEL": nocel}, args.load_seconds)

    sec = {"with CEL": sections(cel), "without CEL": sections(nocel), "names (dropped)": sections(cel_named)}
    crates = {"with CEL": by_crate(cel_named), "without CEL": by_crate(nocel_named)}
    zones = re.search(r'^CHRONO_TZ_TIMEZONE_FILTER = "(.*)"$', (REPO / ".cargo" / "config.toml").read_text(), re.M)
    lines = [
        "# What the filter's .wasm is made of",
        "",
        f"Generated by `make wasm-size` (bench/wasm_size.py) on {datetime.date.today()} at "
        f"{subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=REPO).stdout.strip()}"
        + (f" with uncommitted changes to {', '.join(sorted(dirty))}." if dirty else "."),
        "",
        "## Size",
        "",
        "| module | bytes | |",
        "|---|--:|---|",
        f"| Toolgate with CEL (default) | {cel.stat().st_size:,} | {kib(cel.stat().st_size)} |",
        f"| Toolgate without CEL (`--no-default-features --features list-filtering`) | {nocel.stat().st_size:,} | {kib(nocel.stat().st_size)} |",
        f"| no-op proxy-wasm filter (bench/noop-filter) | {noop.stat().st_size:,} | {kib(noop.stat().st_size)} |",
        f"| Toolgate with CEL, with its `name` section | {cel_named.stat().st_size:,} | {kib(cel_named.stat().st_size)} |",
        "",
        "### Sections (bytes)",
        "",
        "| section | with CEL | without CEL |",
        "|---|--:|--:|",
    ]
    for s in ("code", "data", "custom `name`", "elem", "function", "type", "import", "export"):
        a = sec["with CEL"].get(s) if s != "custom `name`" else sec["names (dropped)"].get(s)
        b = sec["without CEL"].get(s)
        note = " (dropped by `make wasm`)" if s == "custom `name`" else ""
        b_text = "–" if s == "custom `name`" else f"{b or 0:,}"
        lines.append(f"| {s}{note} | {a or 0:,} | {b_text} |")
    lines += [
        "",
        "### Code by crate (bytes; twiggy's shallow sizes of the functions)",
        "",
        "| crate | with CEL | without CEL |",
        "|---|--:|--:|",
    ]
    for crate, size in crates["with CEL"].most_common(18):
        lines.append(f"| {crate} | {size:,} | {crates['without CEL'].get(crate, 0):,} |")
    rest_a = sum(crates["with CEL"].values()) - sum(v for _, v in crates["with CEL"].most_common(18))
    lines.append(f"| everything else | {rest_a:,} | |")
    lines += [
        "",
        "The data section is mostly tables: the Unicode tables RE2's syntax needs (general categories,",
        "scripts, case folding: the `regex` crate is built with only these, policy/Cargo.toml) and, with",
        "CEL, the time zones kept by `CHRONO_TZ_TIMEZONE_FILTER` (.cargo/config.toml):",
        f"`{zones.group(1) if zones else '(all)'}`.",
        "",
        "### Why not smaller",
        "",
        f"Without CEL the module is about {nocel.stat().st_size / 1e6:.1f} MB against a target of 400 KB. What is left is the regex",
        "engine (`regex_syntax` + `regex_automata`, and most of the data section: Unicode tables), which",
        "policy regular expressions need with RE2's semantics (general categories, scripts, Unicode case",
        "folding) and which the filter compiles when a plan loads; `core`/`alloc` (formatting, sorting,",
        "collections: generic code of every crate); `serde_json` (the plan loader and `params` for",
        "authorizers); and the engine itself (`toolgate_policy`). Reaching 400 KB would mean replacing",
        "the regex engine and the JSON reader with hand-written ones, which nothing measured justifies.",
        "What was removed (measured by building the filter each way while choosing): the regex crate's lazy",
        "DFA and literal search engines (aho-corasick), about 360 KB (a policy regex still runs in",
        "linear time, by the one-pass DFA or the bounded backtracker; `make bench`'s `regex` micro",
        "benchmarks show the per-match cost, under 1 µs for the patterns there); the Unicode tables RE2",
        "has no syntax for (age, binary properties, Perl classes, segmentation), about 160 KB; the",
        "`cel` crate's own regex; all but ~60 time zones, about 0.9 MB; the `name` section, "
        f"{sec['names (dropped)'].get('custom `name`', 0) / 1e6:.2f} MB.",
        "",
        "## Envoy's memory",
        "",
        "VmRSS of one Envoy (`--concurrency 1`: the main thread's VM and one worker's) with (c)'s",
        "configuration of `make bench` (20 tools, 199 routes), idle one second after the first request, then",
        f"after {args.load_seconds} s of allowed 300 B calls (wrk, 16 connections, mTLS).",
        "",
        "| configuration | idle MiB | Δ vs no-op | after load MiB | Δ vs no-op | allocator: in use | free, kept | thread caches | V8 code (rwx) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    noop_idle, noop_load, _ = mem["no-op proxy-wasm filter"]
    for label, (idle, loaded, a) in mem.items():
        lines.append(f"| {label} | {idle / 1024:.1f} | {(idle - noop_idle) / 1024:+.1f} | {loaded / 1024:.1f} | "
                     f"{(loaded - noop_load) / 1024:+.1f} | {a['allocated']:.1f} | {a['pageheap_free']:.1f} | "
                     f"{a['total_thread_cache']:.1f} | {a['jit']:.1f} |")
    lines += [
        "",
        "The allocator columns are Envoy's admin `/memory` (tcmalloc) after the load, in MiB; V8 code is",
        "the resident executable pages. What the filter adds over the no-op filter is mostly in Envoy's",
        "allocator: memory V8 holds for the compiled module in each VM (in use), and pages freed after",
        "compiling it that tcmalloc keeps (free, thread caches) until it releases them. Neither depends",
        "on the plan or on requests; both grow with the module's code (see the sizes above).",
        "",
    ]
    OUT.write_text("\n".join(lines) + "\n")
    bench.log(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
