#!/usr/bin/env python3
"""Where a configuration's instructions go, by object: Envoy's own code, unsymbolized code (callgrind's
`???`: the Wasm JIT code, and assembly such as BoringSSL's, which bare Envoy (a) has too), libc. Reads the callgrind files `make bench` leaves (.work/bench/callgrind/KEY.out.1-NN,
one per thread, counters zeroed after warm-up; the main thread's, -01, left out as bench/counts.py
leaves it out) and prints, per request, each object's exclusive instructions and the
difference to a base configuration.

    .venv/bin/python bench/cg_objects.py [--dir .work/bench/callgrind] [--requests 1000] --base c g1 f2

E.g. (g1) against (c) beside (g2) against (a): Envoy's part of the callout (proxy_grpc_call, the async
client, HTTP/2) against ext_authz's, and what Toolgate's VM adds on top."""
import argparse
import collections
import re
from pathlib import Path

from counts import MAIN_THREAD_SUFFIX


def objects(path: Path) -> collections.Counter:
    """Exclusive `Ir` per object (`ob=`) of a callgrind file (inclusive call costs skipped)."""
    names: dict[str, str] = {}
    ob = None
    total: collections.Counter = collections.Counter()
    after_calls = False
    for line in path.open(errors="replace"):
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, idx, name = m.groups()
            if name is not None:
                names[idx] = name
            if kind == "ob":
                ob = names.get(idx, idx)
            continue
        if line.startswith("calls="):
            after_calls = True
            continue
        if line[:1].isdigit() or line[:1] in "+-*":
            if after_calls:
                after_calls = False
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total[ob] += int(parts[1])
    return total


def counted(folder: Path, key: str) -> collections.Counter:
    """`objects` summed over the threads bench/counts.py counts (all but the main thread)."""
    total: collections.Counter = collections.Counter()
    for path in sorted(folder.glob(f"{key}.out.1-*")):
        if not path.name.endswith(MAIN_THREAD_SUFFIX):
            total += objects(path)
    return total


def label(obj: str) -> str:
    if obj in ("???", None):
        return "unsymbolized (???)"
    return Path(obj).name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path(".work/bench/callgrind"))
    ap.add_argument("--requests", type=int, default=1000, help="requests per callgrind run (bench/run.py --callgrind-requests)")
    ap.add_argument("--base", default="c")
    ap.add_argument("keys", nargs="+")
    args = ap.parse_args()
    base = counted(args.dir, args.base)
    for key in args.keys:
        cur = counted(args.dir, key)
        print(f"({key}) against ({args.base}), k instructions per request:")
        for obj in sorted(set(base) | set(cur), key=lambda o: -cur.get(o, 0)):
            a, b = base.get(obj, 0) / args.requests / 1e3, cur.get(obj, 0) / args.requests / 1e3
            if max(a, b) >= 0.1:
                print(f"  {label(obj):<28} {b:9.1f}  ({args.base}) {a:9.1f}  {b - a:+9.1f}")


if __name__ == "__main__":
    main()
