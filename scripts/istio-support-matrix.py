#!/usr/bin/env python3
"""The Istio support matrix: runs tests/istio against Istio releases and records what ran, and when.

    scripts/istio-support-matrix.py run [RELEASE...] [-- PYTEST-ARGS...]   # make support-matrix
    scripts/istio-support-matrix.py render

`run` takes each release (default: every one in tests/istio/releases.txt, the default first):
`ISTIO=<release> tests/istio/gobuild.sh ensure` (its istiod, built once into the cache),
`gobuild.sh verify <release>` (is the pinned istio.io/istio the release tag's commit, and how that was
checked), then `pytest tests/istio -q -ra --junitxml=...` with ISTIO=<release>. Each run's result (per
test file: passed, failed, skipped; each failure's and skip's message; the duration; the date; Toolgate's
commit) is recorded in docs/istio-support.json, the last run of each release kept; `render` (and `run`,
after each release) writes the matrix from those records into docs/istio-support.md between its
markers, leaving the rest of the page as it is. Exit status: 0 when every release's run passed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASES = REPO / "tests/istio/releases.txt"
GOBUILD = REPO / "tests/istio/gobuild.sh"
RECORDS = REPO / "docs/istio-support.json"
README = REPO / "README.md"
PAGE = REPO / "docs/istio-support.md"
BEGIN = "<!-- istio-support-matrix:begin (written by scripts/istio-support-matrix.py: make support-matrix) -->"
END = "<!-- istio-support-matrix:end -->"
# The README's short table (README_BEGIN ... END), from the same records.
README_BEGIN = "<!-- istio-support-matrix:begin (README; written by make support-matrix) -->"
PYTEST = REPO / ".venv/bin/pytest"

PAGE_HEAD = """# Istio support

Which Istio releases Toolgate's Istio suite (`tests/istio`: `toolgate controller` under enforced RBAC ->
kube-apiserver -> a real istiod built from Go modules -> the pinned Envoy as the Gateway's router) was
run against, what it found, and when. `make support-matrix` runs it for every release in
`tests/istio/releases.txt` and rewrites the table below; `make test` runs the first (the newest), `make
test-istio ISTIO=<release>` any of them. How a release is pinned (istio.io/istio has no `v` tags: a
release is the pseudo-version of its tag's commit), how it is checked, and what differs between the
releases: [tests/istio/README.md](../tests/istio/README.md), "Istio releases".

"""


def releases() -> list[tuple[str, str]]:
    out = []
    for line in RELEASES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            release, version = line.split()[:2]
            out.append((release, version))
    return out


def sh(args: list[str], env: dict | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def toolgate_commit() -> str:
    head = sh(["git", "rev-parse", "--short=12", "HEAD"]).stdout.strip() or "unknown"
    dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    return head + ("+changes" if dirty else "")


def how_built(release: str) -> dict:
    wrapper = REPO / f"tests/istio/istio-{release}/go.mod"
    if not wrapper.exists():
        return {"how": "go install istio.io/istio/pilot/cmd/pilot-discovery@<module version>", "replaced": []}
    replaced = re.findall(r"^\s+(\S+) \S+ => \S+ (\S+)$", wrapper.read_text(), re.M)
    return {"how": f"wrapper module tests/istio/istio-{release} (go.mod + go.sum)",
            "replaced": [f"{m} => {v}" for m, v in replaced]}


def parse_junit(path: Path) -> dict:
    files: dict[str, dict[str, int]] = {}
    failures, skips = [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        name = next((p for p in module if p.startswith("test_")), module[-1] if module else "?")
        file = f"{name}.py"
        counts = files.setdefault(file, {"passed": 0, "failed": 0, "skipped": 0, "errors": 0})
        test = f"{file}::{case.get('name')}"
        bad = case.find("failure")
        err = case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            counts["failed"] += 1
            failures.append({"test": test, "message": first_line(bad.get("message") or bad.text or "")})
        elif err is not None:
            counts["errors"] += 1
            failures.append({"test": test, "message": "error: " + first_line(err.get("message") or err.text or "")})
        elif skip is not None:
            counts["skipped"] += 1
            skips.append({"test": test, "reason": first_line(skip.get("message") or "")})
        else:
            counts["passed"] += 1
    return {"files": files, "failures": failures, "skips": skips}


def first_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.strip().split("\n")[0].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def run_release(release: str, version: str, pytest_args: list[str]) -> dict:
    env = {**os.environ, "ISTIO": release}
    started = dt.datetime.now(dt.timezone.utc)
    record = {"release": release, "module_version": version, "commit": version.rsplit("-", 1)[-1],
              "build": how_built(release), "suite": "tests/istio", "started": started.strftime("%Y-%m-%d %H:%M UTC"),
              "toolgate": toolgate_commit()}
    t0 = time.monotonic()
    build = sh(["bash", str(GOBUILD), "ensure"], env=env)
    record["build"]["seconds"] = round(time.monotonic() - t0, 1)
    if build.returncode != 0:
        record.update(status="not built", detail=first_line(build.stderr.strip().splitlines()[-1] if build.stderr.strip() else ""))
        sys.stderr.write(build.stderr)
        return record
    verify = sh(["bash", str(GOBUILD), "verify", release], env=env)
    record["verify"] = {"exit": verify.returncode, "lines": [line for line in verify.stdout.splitlines() if line.strip()]}
    junit = REPO / f"target/istio-support/{release}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    t0 = time.monotonic()
    sys.stderr.write(f"istio-support-matrix: Istio {release}: pytest tests/istio\n")
    proc = subprocess.run([str(PYTEST), "tests/istio", "-q", "-ra", f"--junitxml={junit}", *pytest_args], cwd=REPO, env=env)
    record["seconds"] = round(time.monotonic() - t0)
    record["pytest_exit"] = proc.returncode
    record["pytest_args"] = pytest_args
    if junit.exists():
        record.update(parse_junit(junit))
    totals = {k: sum(f[k] for f in record.get("files", {}).values()) for k in ("passed", "failed", "skipped", "errors")}
    record["totals"] = totals
    record["status"] = "passed" if proc.returncode == 0 and totals["passed"] else "failed"
    return record


def load_records() -> dict:
    return json.loads(RECORDS.read_text()) if RECORDS.exists() else {}


def save_records(records: dict) -> None:
    RECORDS.write_text(json.dumps(records, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def counts(c: dict) -> str:
    parts = [f"{c['passed']} passed", f"{c['failed']} failed"]
    if c.get("errors"):
        parts.append(f"{c['errors']} errors")
    if c.get("skipped"):
        parts.append(f"{c['skipped']} skipped")
    return ", ".join(parts)


def verification(r: dict) -> str:
    lines = (r.get("verify") or {}).get("lines", [])
    if any(line.startswith("verified:") for line in lines):
        return "tag resolved by the Go module proxy"
    if any(line.startswith("MISMATCH") for line in lines):
        return "**MISMATCH** (below)"
    if any(line.startswith("consistent:") for line in lines):
        agree = [m for m in ("api", "client-go") if any(line.startswith(f"ok: istio.io/{m} tag") for line in lines)]
        missing = [m for m in ("api", "client-go") if any(line.startswith(f"skipped: istio.io/{m}@") for line in lines)]
        return ("tag not served; `VERSION` and the " + " and ".join(agree) + " tag" + ("s" if len(agree) > 1 else "")
                + " agree" + (f" ({', '.join(missing)} tag not served)" if missing else "") + ", below")
    return "not checked"


def render(records: dict) -> str:
    order = [r for r, _ in releases()]
    names = order + sorted(set(records) - set(order))
    rows = ["| Istio | istio.io/istio (the tag's commit) | Pin checked | istiod built | tests/istio | Run (UTC) | Toolgate |",
            "|---|---|---|---|---|---|---|"]
    details = []
    for i, name in enumerate(n for n in names if n in records):
        r = records[name]
        label = f"**{name}**" + (" (default)" if order and name == order[0] else "")
        build = r.get("build", {})
        built = "exact go.mod" if not build.get("replaced") else f"{len(build['replaced'])} requirements replaced"
        if r.get("status") == "not built":
            result = f"not built: {r.get('detail', '')}"
        else:
            result = ("**passed**: " if r.get("status") == "passed" else "**FAILED**: ") + counts(r["totals"])
        when = f"{r['started']}, {r.get('seconds', 0) // 60} min {r.get('seconds', 0) % 60} s"
        rows.append(f"| {label} | `{r['module_version']}` | {verification(r)} | {built} | {result} | {when} | "
                    f"`{r['toolgate']}` |")
        d = [f"### Istio {name}", "",
             f"- istio.io/istio `{r['module_version']}` (commit `{r['commit']}`), istiod built by {build.get('how', '?')}"
             + (f", replacing: {'; '.join(f'`{x}`' for x in build['replaced'])}" if build.get("replaced") else "")]
        if (r.get("verify") or {}).get("lines"):
            d.append(f"- the pin, checked by `tests/istio/gobuild.sh verify {name}`:")
            d += [f"  - {line}" for line in r["verify"]["lines"]]
        if r.get("pytest_args"):
            d.append(f"- pytest arguments: `{' '.join(r['pytest_args'])}`")
        for file, c in sorted(r.get("files", {}).items()):
            d.append(f"- `{file}`: {counts(c)}")
        for f in r.get("failures", []):
            d.append(f"- failed `{f['test']}`: {f['message']}")
        for s in r.get("skips", []):
            d.append(f"- skipped `{s['test']}`: {s['reason']}")
        details += d + [""]
    return "\n".join([BEGIN, "", *rows, "", *details, END])


def render_readme(records: dict) -> str:
    """The README's short form: each release, what ran, the result and the day (no commits: the page has them)."""
    order = [r for r, _ in releases()]
    rows = ["| Istio | `make test-istio ISTIO=…` (tests/istio) | run |", "|---|---|---|"]
    for name in [n for n in order + sorted(set(records) - set(order)) if n in records]:
        r = records[name]
        label = name + (" (default in `make test`)" if order and name == order[0] else "")
        if r.get("status") == "not built":
            result = "not built"
        else:
            result = ("passed: " if r.get("status") == "passed" else "FAILED: ") + counts(r["totals"])
        rows.append(f"| {label} | {result} | {r['started'].split(' ')[0]} |")
    return "\n".join([README_BEGIN, *rows, END])


def replace_between(path: Path, begin: str, body: str, default: str) -> None:
    text = path.read_text() if path.exists() else default
    if begin not in text or END not in text:
        text = text.rstrip("\n") + "\n\n" + begin + "\n" + END + "\n"
    head, rest = text.split(begin, 1)
    path.write_text(head + body + rest.split(END, 1)[1])


def write_page(records: dict) -> None:
    replace_between(PAGE, BEGIN, render(records), PAGE_HEAD + BEGIN + "\n" + END + "\n")
    replace_between(README, README_BEGIN, render_readme(records), "")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("run", "render"):
        print(__doc__, file=sys.stderr)
        return 2
    records = load_records()
    if argv[0] == "render":
        write_page(records)
        return 0
    args = argv[1:]
    pytest_args = args[args.index("--") + 1:] if "--" in args else []
    wanted = args[: args.index("--")] if "--" in args else args
    known = dict(releases())
    todo = wanted or list(known)
    unknown = [r for r in todo if r not in known]
    if unknown:
        print(f"istio-support-matrix: not in {RELEASES.relative_to(REPO)}: {' '.join(unknown)}", file=sys.stderr)
        return 2
    ok = True
    for release in todo:
        record = run_release(release, known[release], pytest_args)
        records[release] = record
        save_records(records)
        write_page(records)
        ok = ok and record.get("status") == "passed"
        sys.stderr.write(f"istio-support-matrix: Istio {release}: {record.get('status')}"
                         f" {counts(record['totals']) if 'totals' in record else record.get('detail', '')}\n")
    print(f"wrote {PAGE.relative_to(REPO)} and {RECORDS.relative_to(REPO)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
