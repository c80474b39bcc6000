"""Envoy's start-up time and memory for `make bench`: bare Envoy (a), Toolgate on V8 (c), Toolgate as a
dynamic module (cm) and the no-op dynamic module (nm), each started `starts` times, interleaved
(a c cm nm, a c cm nm, ...), with the configuration of its timed rows (pinned to ENVOY_CPU, one worker).

Per start, from just before the process is spawned (time.perf_counter):
  - ready: the admin interface's /ready answers LIVE and the listener accepts a connection (polled
    every 5 ms: the admin address file, then GET /ready, then a TCP connect);
  - first answer: then agent-a's 300 B tools/call (Python HTTPS client with its certificate, fresh
    connection) answered 200: what a client waits for when it arrives at start-up (on the Wasm host
    the worker's VM is created by then);
  - RSS (VmRSS) at ready and after that first answer.
Reported: the medians over the starts, and every start (the machine is shared: start-up times vary
with its load; the medians and the per-start deltas are what bench/report_native.py judges)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from common import log
from procs import Envoy, rss_kib
from workload import TOOL
import harness  # tests/e2e (on the path common sets)

KEYS = ("a", "c", "cm", "nm")
POLL_S = 0.005


def _ready(e: Envoy) -> bool:
    if e.proc.poll() is not None:
        raise RuntimeError(f"envoy {e.key} exited ({e.proc.returncode}):\n{harness.tail(e.log_path)}")
    if not e.admin_path.exists():
        return False
    admin = e.admin_path.read_text().strip()
    if not admin:
        return False
    try:
        r = harness.request("GET", f"http://{admin}/ready", timeout=1)
    except OSError:
        return False
    return r.status == 200 and r.body.strip() == b"LIVE" and harness.tcp_open("127.0.0.1", e.port)


def start_once(key: str, config: Path, port: int, certs: Path, body: bytes, timeout: float = 120) -> dict:
    t0 = time.perf_counter()
    e = Envoy(f"startup-{key}", config, port)
    try:
        deadline = t0 + timeout
        while not _ready(e):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"envoy {key} not ready after {timeout} s:\n{harness.tail(e.log_path)}")
            time.sleep(POLL_S)
        ready = time.perf_counter() - t0
        rss_ready = rss_kib(e.pid)
        r = harness.mcp_post(f"https://localhost:{port}/mcp", body, headers={"mcp-method": "tools/call", "mcp-name": TOOL},
                             cert=harness.client_cert(certs, "agent-a"), ca=certs / "ca.crt", timeout=timeout)
        first = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError(f"envoy {key}: the first call after start-up: {r.status} {r.text[:200]}")
        return {"ready_s": ready, "first_s": first, "rss_ready_kib": rss_ready, "rss_first_kib": rss_kib(e.pid)}
    finally:
        e.stop()


def measure(keys: list[str], dirs: dict, ports: dict, certs: Path, body: bytes, starts: int) -> dict:
    """{key: {"starts": [per start], "ready_s", "first_s", "rss_ready_mib", "rss_first_mib": medians}}
    for the KEYS in `keys`; run before the configurations' own Envoys start (same ports)."""
    todo = [k for k in KEYS if k in keys]
    if not todo or starts <= 0:
        return {}
    log(f"start-up time and RSS: {starts} starts each of {' '.join(f'({k})' for k in todo)}, interleaved")
    out: dict = {k: {"starts": []} for k in todo}
    for i in range(starts):
        for k in todo:
            s = start_once(k, dirs[k] / "envoy.json", ports[k], certs, body)
            out[k]["starts"].append(s)
        log(f"  start {i + 1}/{starts}: " + ", ".join(
            f"({k}) ready {out[k]['starts'][-1]['ready_s'] * 1e3:.0f} ms, "
            f"{out[k]['starts'][-1]['rss_first_kib'] / 1024:.1f} MiB" for k in todo))
    for k, v in out.items():
        ss = v["starts"]
        v["ready_s"] = statistics.median(s["ready_s"] for s in ss)
        v["first_s"] = statistics.median(s["first_s"] for s in ss)
        v["rss_ready_mib"] = statistics.median(s["rss_ready_kib"] for s in ss) / 1024
        v["rss_first_mib"] = statistics.median(s["rss_first_kib"] for s in ss) / 1024
    return out
