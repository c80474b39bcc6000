"""Instruction counts for `make bench`: each configuration's Envoy under callgrind, counters zeroed after
a warm-up, instructions and estimated cycles per request."""

import os
import re
import subprocess
import time
from pathlib import Path

from common import REPO, SHIM, WORK, log
from configs import BASELINE_KEY
from load import body_name, request_headers
import harness  # tests/e2e (on the path common sets): Envoy binary lookup, free ports, an HTTPS client

# Started in this order, two at a time: the Toolgate ones take longest under valgrind (V8 compiles the
# whole module at valgrind speed), so they go first; the native rows start at once.
CALLGRIND_CONFIGS = ("c", "cn", "c26", BASELINE_KEY, "l1", "l0", "g1", "g0", "f1", "f2", "d", "a", "n", "m", "e", "g2",
                     "nm", "cm", "dm", "gm", "lm")


# The suffix of the main thread's file in a dump (`--separate-threads=yes`: valgrind numbers threads
# from 1, the initial one).
MAIN_THREAD_SUFFIX = "-01"


def callgrind_one(key: str, gateway_dir: Path, port: int, certs: Path, body: Path, requests: int,
                  headers: dict) -> dict:
    """Envoy under `valgrind --tool=callgrind --cache-sim=yes`: counters zeroed after a warm-up, then
    `requests` requests (h2load over HTTP/1.1, one connection, agent-a's certificate; `body` with the
    MCP `headers`), then a dump.
    One connection, so requests come one at a time: with several, how many requests Envoy handled per
    event loop wake-up depended on timing under valgrind, and the same row moved between runs by more
    than most targets' margins; one at a time, two runs agree (bench/notes.md).
    Counts every thread but Envoy's main thread (`--separate-threads=yes`; valgrind's thread 1). The
    main thread serves no request: what it runs in the counted window is its timers (the stats flush
    among them), so it grows with how long the window lasts, not with the requests. Counted, it made a
    row move with its wall time under valgrind: (a) came out higher in a full `make bench`, where it
    runs beside slower rows, than in a reduced run. Its count is kept beside,
    `main_thread_Ir`. Every other thread is counted: the worker, and V8's own threads for the Wasm rows.
    Returns the events per request and an estimate of cycles (Ir + 10 x L1 misses + 100 x LL misses,
    KCachegrind's rule of thumb). Deterministic up to the worker's timers, unlike CPU time on a
    shared machine."""
    out = WORK / "callgrind" / f"{key}.out"
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f"{key}.out*"):
        old.unlink()
    admin_path = WORK / "logs" / f"callgrind-{key}.admin"
    admin_path.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--separate-threads=yes", f"--callgrind-out-file={out}", str(harness.envoy_binary()),
         "--config-path", str(gateway_dir / "envoy.json"),
         "--config-yaml", "{admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}}",
         "--admin-address-path", str(admin_path), "--concurrency", "1", "--disable-hot-restart",
         "--log-level", "warn", "--log-path", str(WORK / "logs" / f"callgrind-{key}.log")],
        stdout=subprocess.DEVNULL, stderr=open(WORK / "logs" / f"callgrind-{key}.valgrind.log", "wb"),
        stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # V8 compiles the module at valgrind speed before the listener opens: minutes on a busy machine.
        deadline = time.monotonic() + float(os.environ.get("BENCH_CALLGRIND_START_S", "1800"))
        while not harness.tcp_open("127.0.0.1", port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"callgrind ({key}): Envoy did not start; see {WORK / 'logs'}")
            time.sleep(1)
        env = dict(os.environ, LD_PRELOAD=str(SHIM), BENCH_CLIENT_CERT=str(certs / "agent-a.crt"),
                   BENCH_CLIENT_KEY=str(certs / "agent-a.key"))

        def load(n: int, strict: bool = True) -> None:
            r = subprocess.run(["h2load", "--h1", "-n", str(n), "-c", "1", "-d", str(body),
                                "-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream",
                                *(a for k, v in headers.items() for a in ("-H", f"{k}: {v}")),
                                f"https://127.0.0.1:{port}/mcp"],
                               env=env, capture_output=True, text=True, timeout=900)
            ok = re.search(r"status codes: (\d+) 2xx", r.stdout)
            if strict and (not ok or int(ok.group(1)) != n):
                raise RuntimeError(f"callgrind ({key}): h2load: {r.stdout[-600:]}{r.stderr[-300:]}")

        # Warm-up: the first requests run at valgrind speed through V8's compiler and can exceed the
        # route's 15 s timeout; only the measured ones must all succeed.
        load(max(100, requests // 5), strict=False)
        subprocess.run(["callgrind_control", "--zero", str(proc.pid)], capture_output=True, check=True)
        load(requests)
        subprocess.run(["callgrind_control", "--dump=measured", str(proc.pid)], capture_output=True, check=True)
        # The dump writes one file per thread: KEY.out.1-01 (the main thread), KEY.out.1-02, ...
        texts: dict[Path, str] = {}
        for _ in range(120):
            texts = {f: f.read_text(errors="replace") for f in sorted(out.parent.glob(f"{key}.out.1-*"))}
            if texts and all(re.search(r"^totals:", t, re.M) for t in texts.values()):
                break
            time.sleep(0.5)
        if not texts:
            raise RuntimeError(f"callgrind ({key}): no dump written; see {WORK / 'logs'}")
        events = re.search(r"^events: (.*)$", next(iter(texts.values())), re.M).group(1).split()
        totals, main = [0] * len(events), 0
        for f, t in texts.items():
            counts = [int(x) for x in re.search(r"^totals: (.*)$", t, re.M).group(1).split()]
            counts += [0] * (len(events) - len(counts))  # an idle thread's file lists fewer
            if f.name.endswith(MAIN_THREAD_SUFFIX):
                main = counts[0]
                continue
            totals = [a + b for a, b in zip(totals, counts)]
        per = {e: v / requests for e, v in zip(events, totals)}
        per["main_thread_Ir"] = main / requests
        per["est_cycles"] = per["Ir"] + 10 * (per.get("I1mr", 0) + per.get("D1mr", 0) + per.get("D1mw", 0)) \
            + 100 * (per.get("ILmr", 0) + per.get("DLmr", 0) + per.get("DLmw", 0))
        per["requests"] = requests
        return per
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def callgrind(keys: list[str], dirs: dict, ports: dict, certs: Path, bodies: dict[str, Path], requests: int) -> dict:
    """`bodies`: the Loader's request files; each row sends its 300 B request (body_name, request_headers)."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [k for k in CALLGRIND_CONFIGS if k in keys]
    log(f"instruction counts: Envoy under callgrind, {requests} requests of 300 B (the list rows: their tools/list) "
        f"for {' '.join(todo)} (2 at a time)")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {k: pool.submit(callgrind_one, k, dirs[k], ports[k], certs, bodies[body_name(k, "300B")], requests,
                                  request_headers(k)) for k in todo}
        done = {k: f.result() for k, f in futures.items()}
    out = {k: done[k] for k in keys if k in done}
    for k, r in out.items():
        log(f"  ({k}) {r['Ir'] / 1e3:8.1f} k instructions/request, {r['est_cycles'] / 1e3:8.1f} k estimated cycles")
    return out


def _instructions(cmd: list[str]) -> int:
    """The instructions callgrind counts for `cmd` (which must succeed)."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], capture_output=True,
                         text=True, check=True)
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))


def engine_list_pass() -> dict:
    """The engine's list pass alone, natively: policy/benches/engine.rs's `-- count list_json N` under
    callgrind, (N = 201 − N = 1) / 200 instructions (the 100-tool answer filtered to 10, what (l1) and
    (lm) send). Both hosts run this pass, so it is the floor under (lm) − (cm)."""
    r = subprocess.run(["cargo", "bench", "--locked", "-q", "-p", "toolgate-policy", "--bench", "engine", "--no-run",
                        "--message-format=json"], cwd=REPO, capture_output=True, text=True, check=True)
    exe = None
    for line in r.stdout.splitlines():
        m = re.search(r'"executable":"([^"]+)"', line)
        if m and '"name":"engine"' in line:
            exe = m.group(1)
    if exe is None:
        raise RuntimeError("engine bench binary not found in cargo's output")

    per = (_instructions([exe, "count", "list_json", "201"]) - _instructions([exe, "count", "list_json", "1"])) / 200
    log(f"  the engine's list pass alone (native, policy/benches/engine.rs count list_json): {per / 1e3:.1f} k instructions")
    return {"Ir": per, "case": "list_json", "bench": "policy/benches/engine.rs"}


JSON_FLOOR = REPO / "bench" / "json-floor"
JSON_FLOOR_READERS = ("sonic-rs", "simd-json", "serde_json")


def json_floor(answer: Path) -> dict:
    """What the fastest validating JSON readers on crates.io need to check `answer` (the list rows'
    tools/list answer) once, natively: bench/json-floor, built for AVX2 (x86-64-v3, the widest SIMD
    valgrind executes), (N = 101 − N = 1) / 100 instructions per reader. The floor under (lm) − (cm):
    no list filter can judge an answer it has not read."""
    target = REPO / "target" / "json-floor"
    subprocess.run(["cargo", "build", "--locked", "-q", "--release", "--manifest-path", str(JSON_FLOOR / "Cargo.toml"),
                    "--target-dir", str(target)], cwd=REPO, check=True,
                   env=dict(os.environ, RUSTFLAGS="-C target-cpu=x86-64-v3"))
    exe = str(target / "release" / "toolgate-bench-json-floor")
    out = {}
    for reader in JSON_FLOOR_READERS:
        per = (_instructions([exe, reader, str(answer), "101"]) - _instructions([exe, reader, str(answer), "1"])) / 100
        log(f"  validating the answer alone with {reader} (bench/json-floor, AVX2): {per / 1e3:.1f} k instructions")
        out[reader] = per
    return {"Ir": out, "bytes": answer.stat().st_size, "bench": "bench/json-floor"}
