"""Resilience in a real Envoy (hardening issue): plan reloads under a steady load, failing closed when
the filter has no plan or cannot run, and many slow clients against Envoy's memory and other clients.
Figures measured here are printed (run with -s to see them) and recorded in docs/security.md.

On both hosts (`--host`), except the tests about the Wasm VM itself (a .wasm that cannot be
compiled, a VM that traps on a request or on a response, the Wasm filter's fail_open/failure_policy),
marked `host("wasm")`; each names its native counterpart in test_native_module.py."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import (DENIAL_MESSAGE, ToolgateGateway, _HTTPSConnection, assert_allowed, assert_denied, client_cert,
                     free_port, policy, sa, tcp_open, tls_context, toolgate_plans, tools_call_rule, wait_for,
                     write_json)

# --------------------------------------------------------------------------------------------------
# Load generator: threads, each with one keep-alive HTTPS connection (agent-a's certificate).


@dataclass
class Result:
    thread: int
    seq: int
    tool: str
    sent: float       # time.monotonic() when the request was written
    done: float       # when the response (or the error) came
    outcome: str      # "allow", "deny" or "fail:<what>"
    tag: str


def body_for(tool: str, msg_id: int) -> bytes:
    args = {"a": 2, "b": 3} if tool == "get-sum" else {"message": "hi"} if tool == "echo" else {"name": "HOME"}
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}).encode()


def classify(status: int, body: bytes, msg_id: int) -> str:
    if status != 200:
        return f"fail:status {status} {body[:120]!r}"
    try:
        msg = json.loads(body)
    except ValueError:
        return f"fail:not json {body[:120]!r}"
    if msg == {"jsonrpc": "2.0", "id": msg_id, "error": {"code": 403, "message": DENIAL_MESSAGE}}:
        return "deny"
    if isinstance(msg, dict) and msg.get("id") == msg_id and "result" in msg:
        return "allow"
    return f"fail:unexpected {body[:120]!r}"


class Load:
    """`threads` workers, each sending `tools` in turn on its own keep-alive connection until stopped.
    A connection the server closes (a response with `connection: close`, as Envoy sends while it
    drains a listener) is reopened for the next request; any error on a request is a failure."""

    def __init__(self, gw, tools: list[str], threads: int = 4, pause: float = 0.0, fresh: bool = False,
                 first_thread: int = 0):
        """`fresh`: a new connection per request. Threads are numbered from `first_thread`."""
        self.gw, self.tools, self.pause, self.fresh = gw, tools, pause, fresh
        host, port = "localhost", gw.ports["https"]
        self.ctx = tls_context(gw.certs / "ca.crt", client_cert(gw.certs, "agent-a"))
        self.addr = (host, port)
        self.results: list[Result] = []
        self.reconnects = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(first_thread, first_thread + threads)]

    def _conn(self):
        return _HTTPSConnection(*self.addr, context=self.ctx, timeout=15)

    def _run(self, n: int) -> None:
        conn = self._conn()
        seq = 0
        while not self._stop.is_set():
            tool = self.tools[(seq + n) % len(self.tools)]
            seq += 1
            msg_id = n * 1_000_000 + seq
            tag = f"load-{n}-{seq}"
            body = body_for(tool, msg_id)
            t0 = time.monotonic()
            try:
                conn.request("POST", f"/mcp?{tag}", body, {
                    "content-type": "application/json", "accept": "application/json, text/event-stream"})
                resp = conn.getresponse()
                data = resp.read()
                outcome = classify(resp.status, data, msg_id)
                if self.fresh:
                    conn.close()
                elif resp.will_close:
                    conn.close()
                    with self._lock:
                        self.reconnects += 1
            except Exception as exc:  # noqa: BLE001 - every error is a failed request
                outcome = f"fail:{exc!r}"
                conn.close()
                conn = self._conn()
            with self._lock:
                self.results.append(Result(n, seq, tool, t0, time.monotonic(), outcome, tag))
            if self.pause:
                time.sleep(self.pause)  # the load's pace between two requests, not a wait for anything
        conn.close()

    def start(self) -> "Load":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def snapshot(self) -> list[Result]:
        with self._lock:
            return list(self.results)



def replace_text(path, text: str) -> float:
    """Write `text` to `path` atomically (Envoy's file-based xDS needs a rename); the time just before
    the rename. Read after it, the time could come late on a loaded machine (this thread descheduled
    while Envoy already applies the change), and a request sent in between would count against the
    plan before."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    before = time.monotonic()
    os.replace(tmp, path)
    return before


# --------------------------------------------------------------------------------------------------
# 1. Reload under load

PLAN_ECHO = [policy("p", tools_call_rule("a-tools", ["get-sum", "echo"], source=sa("a")))]
PLAN_NO_ECHO = [policy("p", tools_call_rule("a-tools", ["get-sum"], source=sa("a")))]
# The decision each plan gives agent-a: get-sum allowed and get-env denied by both, echo differs.
EXPECTED = {"echo": {"echo-plan": "allow", "no-echo-plan": "deny"},
            "get-sum": {"echo-plan": "allow", "no-echo-plan": "allow"},
            "get-env": {"echo-plan": "deny", "no-echo-plan": "deny"}}
OTHER = {"echo-plan": "no-echo-plan", "no-echo-plan": "echo-plan"}

# A plan change is a filter-chain-only listener update: new connections get the new plan (new root
# context) at once; a connection opened before keeps the old filter chain, and so the old plan, until
# Envoy drains it. With Envoy's defaults (--drain-strategy gradual, --drain-time-s 600) a busy
# keep-alive connection can keep the old plan for minutes (docs/security.md). Toolgate's Envoy should
# run with the immediate strategy and a short drain time, as here: each old connection then serves at
# most its in-flight request under the old plan and gets `connection: close`.
DRAIN_ARGS = ["--drain-strategy", "immediate", "--drain-time-s", "2"]
CHANGE_EVERY = 1.8  # seconds between two plan changes


def convergence(results: list[Result], changes: list[tuple[float, str]], tool: str, threads: set[int]) -> list[float]:
    """Per change: seconds from the change until the new plan's decision holds for `tool` on `threads`
    (the end of the last request, sent after the change, that still got the old plan's decision).
    Fails when the new decision never held before the next change."""
    out = []
    for j, (t, new) in enumerate(changes):
        end = changes[j + 1][0] if j + 1 < len(changes) else float("inf")
        # A request still in flight at the next change may get either plan's decision (measured: one
        # sent 2 ms before a change was recorded got the next plan's): not counted against this one.
        window = [r for r in results if r.tool == tool and r.thread in threads and t <= r.sent < end and r.done < end]
        want = EXPECTED[tool][new]
        holds_from = max((r.done for r in window if r.outcome != want), default=t)
        after = [r for r in window if r.sent > holds_from]
        per_thread = {th: [(round(r.sent - t, 3), round(r.done - t, 3), r.outcome) for r in window if r.thread == th]
                      for th in sorted(threads)}
        assert after, f"change {j} to {new}: {tool} never got the new decision on threads {threads} " \
                      f"({len(window)} requests; per thread, the first and last 3 (sent, done, outcome) " \
                      f"relative to the change: { {th: xs[:3] + xs[-3:] for th, xs in per_thread.items()} })"
        out.append(holds_from - t)
    return out


def check_decisions(results: list[Result], changes: list[tuple[float, str]], first: str) -> None:
    """Every request got a decision that a plan in force while it was in flight gives (under drain, a
    connection may still use the plan before the previous one: with two alternating plans, the same
    set)."""
    for r in results:
        plans = {first} if r.sent < changes[0][0] else set()
        for j, (t, new) in enumerate(changes):
            end = changes[j + 1][0] if j + 1 < len(changes) else float("inf")
            if r.done >= t and r.sent <= end:
                plans |= {new, OTHER[new]}
        assert r.outcome in {EXPECTED[r.tool][p] for p in plans}, (r, plans)


def check_executions(gw, results: list[Result]) -> None:
    """The MCP server ran exactly the allowed requests, each once."""
    ran: dict[str, int] = {}
    for e in gw.server.executed():
        tag = str(e.get("path", "")).partition("?")[2]
        if tag.startswith("load-"):
            ran[tag] = ran.get(tag, 0) + 1
    allowed = {r.tag for r in results if r.outcome == "allow"}
    assert {t for t, n in ran.items() if n != 1} == set()
    assert set(ran) == allowed, (sorted(set(ran) - allowed)[:5], sorted(allowed - set(ran))[:5])


def test_reload_under_load(gateway):
    gw = gateway(*PLAN_NO_ECHO, envoy_args=DRAIN_ARGS)
    lds = gw.dir / "lds.json"
    texts = {"no-echo-plan": lds.read_text()}
    gw.rerender(PLAN_ECHO)
    wait_for(lambda: gw.call("echo").executed, timeout=15, interval=0.1, what="the echo plan")
    texts["echo-plan"] = lds.read_text()
    assert texts["echo-plan"] != texts["no-echo-plan"]

    # Threads 0-3 keep their connections; thread 4 opens a new one per request (echo only).
    load = Load(gw, ["echo", "get-sum", "echo", "get-env"], threads=4).start()
    fresh = Load(gw, ["echo"], threads=1, fresh=True, first_thread=4).start()
    changes: list[tuple[float, str]] = []  # (time of the change, plan now in force)
    current = "echo-plan"
    try:
        # A steady load before the first change (checked below: more than 50 requests on the kept
        # connections), and a request on the fresh-connection thread.
        wait_for(lambda: len([r for r in load.snapshot() if r.thread < 4]) > 60 and fresh.snapshot(), timeout=30,
                 interval=0.1, what="a steady load")
        for _ in range(20):
            current = OTHER[current]
            changes.append((replace_text(lds, texts[current]), current))
            # The scenario's pace: a plan change every CHANGE_EVERY seconds under load (convergence()
            # measures within each period); not a wait for anything.
            time.sleep(CHANGE_EVERY)

        # A broken plan (tampered: its hash no longer matches) pushed mid-load changes nothing.
        rejected = gw.counters().get("toolgate.plan.rejected", 0)
        broken = json.loads(texts[OTHER[current]])
        for conf in toolgate_plans(broken):
            plan = json.loads(conf["value"])
            plan["gateway"]["allow"] = []  # would deny get-sum
            conf["value"] = json.dumps(plan)
        t_broken = replace_text(lds, json.dumps(broken))
        wait_for(lambda: gw.counters().get("toolgate.plan.rejected", 0) > rejected, timeout=10,
                 what="the broken plan to be refused")
        # Load under the refused plan: more than 50 requests sent a second or more after it (checked below).
        wait_for(lambda: len([r for r in load.snapshot() + fresh.snapshot() if r.sent >= t_broken + 1]) > 60,
                 timeout=30, interval=0.1, what="requests after the broken plan")
    finally:
        load.stop()
        fresh.stop()
    results = load.snapshot() + fresh.snapshot()
    kept = [r for r in results if r.thread < 4]
    print(f"\nreload under load: {len(results)} requests ({len(kept)} on keep-alive connections), "
          f"{load.reconnects} keep-alive connections closed by Envoy on a change")

    fails = [r for r in results if r.outcome.startswith("fail")]
    assert fails == [], fails[:10]
    assert len([r for r in kept if r.sent < changes[0][0]]) > 50  # the load was steady before the first change

    before_broken = [r for r in results if r.sent < t_broken]
    check_decisions(before_broken, changes, "echo-plan")
    # After the broken plan: the plan in force before it decides everything.
    for r in results:
        if r.sent >= t_broken:
            assert r.outcome == EXPECTED[r.tool][current], (r, current)
    assert len([r for r in results if r.sent >= t_broken + 1]) > 50
    gw.envoy.wait_for_log("REFUSED new plan")
    check_executions(gw, results)

    new_conn = convergence(results, changes, "echo", {4})
    keep_alive = convergence(results, changes, "echo", {0, 1, 2, 3})
    for name, xs in (("new connections", new_conn), ("keep-alive connections", keep_alive)):
        print(f"reload under load: new decision holds on {name} after median {statistics.median(xs) * 1000:.0f} ms, "
              f"max {max(xs) * 1000:.0f} ms ({', '.join(f'{x * 1000:.0f}' for x in xs)})")
    # Generous bounds (2 loaded cores: a thread or Envoy may stall for a while): the file is polled
    # every 20 ms and the plan loads in a few ms.
    assert statistics.median(new_conn) < 0.5 and max(new_conn) < 1.5
    assert statistics.median(keep_alive) < 0.5 and max(keep_alive) < 1.5


# --------------------------------------------------------------------------------------------------
# 3. Many slow clients

SLOW_CLIENTS = 500
SLOW_BYTE_INTERVAL = 0.1  # seconds between two bytes of a slow client's body


def vm_rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def slow_client(n: int, prefix: str, port: int, ctx, handshakes: asyncio.Semaphore, opened: list, start: asyncio.Event):
    """One client: TLS, the request headers, then the tools/call body one byte every
    SLOW_BYTE_INTERVAL; returns "allow"/"deny"/"fail:..." for its call."""
    tool = "get-sum" if n % 2 == 0 else "echo"
    msg_id = 5_000_000 + n
    body = body_for(tool, msg_id)
    try:
        async with handshakes:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost"), 30)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.write((f"POST /mcp?{prefix}-{n} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                      f"accept: application/json, text/event-stream\r\ncontent-length: {len(body)}\r\n"
                      f"connection: close\r\n\r\n").encode())
        await writer.drain()
        opened.append(n)
        await start.wait()
        for i in range(len(body)):
            writer.write(body[i:i + 1])
            await writer.drain()
            await asyncio.sleep(SLOW_BYTE_INTERVAL)  # a slow client is what is tested, not a wait
        raw = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        head, _, payload = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        return tool, classify(status, payload, msg_id)
    except Exception as exc:  # noqa: BLE001
        return tool, f"fail:{exc!r}"


def slow_attack(prefix: str, port: int, ctx, opened: list, all_open: threading.Event) -> list[tuple[str, str]]:
    """SLOW_CLIENTS clients at once (connections opened first, then every body sent byte by byte)."""
    async def main():
        handshakes = asyncio.Semaphore(25)
        start = asyncio.Event()
        tasks = [asyncio.create_task(slow_client(n, prefix, port, ctx, handshakes, opened, start))
                 for n in range(SLOW_CLIENTS)]
        while len(opened) < SLOW_CLIENTS and not all(t.done() for t in tasks):
            await asyncio.sleep(0.05)  # the poll interval of this wait for every connection
        start.set()
        all_open.set()
        return await asyncio.gather(*tasks)
    return asyncio.run(main())


def curl_call(gw, n: int) -> tuple[str, float]:
    """One get-sum call by curl on a new connection: (outcome, seconds it took as curl measured)."""
    body = body_for("get-sum", 9_000_000 + n).decode()
    c = client_cert(gw.certs, "agent-a")
    r = subprocess.run(["curl", "-sS", "--max-time", "30", "--cacert", str(gw.certs / "ca.crt"), "--cert", str(c.cert),
                        "--key", str(c.key), "-H", "content-type: application/json",
                        "-H", "accept: application/json, text/event-stream", "--data-binary", body,
                        "-w", "\n%{http_code} %{time_total}", f"https://localhost:{gw.ports['https']}/mcp?normal-{n}"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return f"fail:curl {r.returncode} {r.stderr.strip()}", 0.0
    payload, _, tail_line = r.stdout.rpartition("\n")
    code, took = tail_line.split()
    return classify(int(code), payload.encode(), 9_000_000 + n), float(took)


def test_slow_clients_bounded_memory_no_stall(gateway):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))))
    pid = gw.envoy.proc.pid
    ctx = tls_context(gw.certs / "ca.crt", client_cert(gw.certs, "agent-a"))
    normal_seq = iter(range(1, 1 << 30))
    for _ in range(5):  # warm up: the first requests create the worker's contexts
        assert curl_call(gw, next(normal_seq))[0] == "allow"
    baseline_ms = sorted(curl_call(gw, next(normal_seq))[1] for _ in range(5))
    rounds = []
    for round_no in (1, 2):
        before = vm_rss_kib(pid)
        opened: list[int] = []
        all_open = threading.Event()
        out: list = []
        attack = threading.Thread(target=lambda: out.extend(slow_attack(f"slow{round_no}", gw.ports["https"], ctx, opened, all_open)),
                                  daemon=True)
        t0 = time.monotonic()
        attack.start()
        assert all_open.wait(60), f"only {len(opened)} slow clients connected"
        t_open = time.monotonic() - t0
        peak = vm_rss_kib(pid)
        normal: list[tuple[str, float]] = []
        while attack.is_alive():
            normal.append(curl_call(gw, next(normal_seq)))
            peak = max(peak, vm_rss_kib(pid))
            time.sleep(0.2)  # the normal client's pace during the attack, not a wait for anything
        attack.join()
        # Envoy has closed every slow client's connection before its memory is read again.
        wait_for(lambda: sum(gw.envoy.stats(r"^http\.toolgate_.*\.downstream_cx_active$").values()) == 0,
                 timeout=30, what="the slow clients' connections closed")
        after = vm_rss_kib(pid)
        rounds.append((before, peak, after))
        took = [t for o, t in normal]
        print(f"\nslow clients round {round_no}: {len(opened)} connected in {t_open:.1f} s; Envoy VmRSS before "
              f"{before / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB (+{(peak - before) / 1024:.1f}), after "
              f"{after / 1024:.1f} MiB; normal client: {len(normal)} calls, median {statistics.median(took) * 1000:.0f} ms, "
              f"max {max(took) * 1000:.0f} ms (before the attack: median {statistics.median(baseline_ms) * 1000:.0f} ms)")
        assert len(opened) == SLOW_CLIENTS
        # Every slow call was decided as the plan says once its last byte came.
        assert [(t, o) for t, o in out if o != ("allow" if t == "get-sum" else "deny")] == []
        assert len(out) == SLOW_CLIENTS
        # The normal client was not stalled: every call allowed, each within a few seconds on a loaded
        # machine, and it got through many calls while the slow bodies were being sent.
        assert [o for o, _ in normal if o != "allow"] == []
        assert max(took) < 5.0 and len(normal) >= 10
        # Bounded: a slow client costs Envoy its connection (TLS buffers, HTTP stream, the filter's
        # request context, at most its ~100 bytes of body): 128 KiB each is a generous bound.
        assert peak - before < SLOW_CLIENTS * 128
    # No growth from one round to the next (nothing kept per finished slow client).
    assert rounds[1][1] < rounds[0][1] + 16 * 1024, rounds
    # The server ran exactly the allowed slow calls.
    ran = sorted(str(e.get("path", "")).partition("?")[2] for e in gw.server.executed()
                 if "?slow" in str(e.get("path", "")))
    assert ran == sorted(f"slow{k}-{n}" for k in (1, 2) for n in range(0, SLOW_CLIENTS, 2))


# --------------------------------------------------------------------------------------------------
# 2. Fail closed at the edges
#
# The filter never traps on input (no panics: its own proxy-wasm ABI, fuzzed; a 64 MiB body of the
# reader's worst shape at the highest limit was decided without one), so no client can crash the VM
# from outside. What is tested: the filter refusing its first plan (both hosts), a VM that cannot be
# created, and that the rendered configuration fails closed (Envoy's answer for a VM that did crash:
# every request on it gets a local 503 instead of passing unfiltered).

BOTH = {"https": "HTTPS", "http": "HTTP"}


def wasm_filter_configs(lds: dict):
    """The wasm filter's PluginConfig of every listener in an lds.json or config_dump document."""
    for listener in lds["resources"]:
        listener = listener.get("active_state", {}).get("listener", listener)
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                for hf in f["typed_config"].get("http_filters", []):
                    if hf["name"] == "envoy.filters.http.wasm":
                        yield hf["typed_config"]["config"]


def first_plan(value: str):
    def set_plan(gw):
        lds = json.loads((gw.dir / "lds.json").read_text())
        for conf in toolgate_plans(lds):
            conf["value"] = value
        write_json(gw.dir / "lds.json", lds)
    return set_plan


@pytest.mark.parametrize("plan", ["", '{"version": 1, "listener": "default/gw/https", "gateway": {"allow": [',
                                  "\u0000\u00ff not a plan", '{"version": 99}'],
                         ids=["empty", "truncated", "garbage", "unknown-version"])
def test_refused_first_plan_denies_everything(gateway, plan):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH,
                 before_start=first_plan(plan))
    # Envoy took the configuration (the filter accepted it, to deny): both listeners serve.
    assert gw.envoy.stat("listener_manager.lds.update_rejected") == 0
    assert gw.envoy.stat("listener_manager.total_listeners_active") == 2
    sent = [gw.call("get-sum"), gw.call("echo"), gw.call("get-sum", agent="agent-b"), gw.send("GET"),
            gw.rpc("initialize", {}), gw.rpc("tools/list", {}), gw.call("get-sum", listener="http", agent=None)]
    for r in sent:
        assert_denied(r, id=None)  # 403, "id": null: without a plan nothing is read
        assert gw.decision(r) == "deny: no valid plan loaded"
    assert gw.counters().get("toolgate.decision.deny.no_plan", 0) >= len(sent)
    assert gw.counters().get("toolgate.plan.rejected", 0) >= 2  # both listeners
    log = gw.envoy.log_path.read_text(errors="replace")
    for name in gw.ports:
        assert f"plugin toolgate:default/gw/{name}: REFUSED plan (" in log
    assert "no good plan yet: denying every request" in log
    assert gw.server.executed() == []
    # A good plan later applies normally.
    gw.rerender()
    wait_for(lambda: gw.call("get-sum").executed, timeout=10, interval=0.1, what="the first good plan")
    assert_denied(gw.call("echo"))
    assert_denied(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("get-sum", listener="http", agent=None))


def broken_module(wasm_path: Path, tmp_path: Path) -> Path:
    """The real filter cut in half: a module no VM can be created from."""
    data = wasm_path.read_bytes()
    out = tmp_path / "broken-toolgate_filter.wasm"
    out.write_bytes(data[: len(data) // 2])
    return out


def with_module(lds_text: str, module: Path) -> dict:
    lds = json.loads(lds_text)
    for conf in wasm_filter_configs(lds):
        conf["vm_config"]["code"]["local"]["filename"] = str(module)
    lds["version_info"] = f"module-{module.name}"
    return lds


@pytest.mark.host("wasm", reason="a VM that traps (V8); native: "
                  "test_native_module.py::test_a_panic_while_filtering_a_list_never_lets_the_list_through")
def test_a_vm_that_crashes_on_a_response_never_lets_it_through(tmp_path, certs, wasm_path, start_mcp_server,
                                                                start_envoy):
    """A panic while a list is filtered, on Wasm (issue 38, finding 7): the filter is built with panic =
    abort, so a panic is a trap, and Envoy fails the stream of a callback that traps (fail_open false). Staged
    with a module that lets the request through and traps on the response body: the MCP server answers
    the list, and the client gets none of it, only Envoy's error or a reset."""
    server = start_mcp_server("mcp", workdir=tmp_path)
    gw = ToolgateGateway(tmp_path / "gw", certs, wasm_path, server, listeners=BOTH, host="wasm")
    gw.policies = [policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))]
    gw.ports = {name: free_port() for name in gw.listener_protocols}
    gw.render()
    module = trapping_module(tmp_path, "proxy_on_response_body")
    write_json(gw.dir / "lds.json", with_module((gw.dir / "lds.json").read_text(), module))
    gw.envoy = start_envoy(gw.dir / "envoy.json", workdir=gw.workdir)
    wait_for(lambda: all(tcp_open("127.0.0.1", p) for p in gw.ports.values()), timeout=15, what="listeners up")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    raw = (f"POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
           f"Accept: application/json, text/event-stream\r\nConnection: close\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", gw.ports["http"]), timeout=10) as conn:
        conn.sendall(raw)
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    # The server ran the request and answered the whole list.
    wait_for(lambda: len(server.executed()) == 1 or None, timeout=10, what="the list request on the server")
    head, _, rest = got.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    assert status == 200 or status >= 500, got[:300]
    assert b"get-env" not in rest and b'"tools"' not in rest, got[:300]
    if status == 200:
        # The headers went downstream before the body: Envoy could only reset the stream, so the client
        # gets less than the response announced (its content-length, or no last chunk).
        length = [int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
        assert (len(rest) < length[0]) if length else not rest.endswith(b"0\r\n\r\n"), got[:300]
    wait_for(lambda: "unreachable" in gw.envoy.log_path.read_text(errors="replace").lower(), timeout=20,
             what="the trap in Envoy's log")


@pytest.mark.host("wasm", reason="a .wasm no VM can be created from; native: "
                  "test_native_module.py::test_a_module_that_cannot_load_serves_nothing")
def test_vm_that_cannot_be_created_serves_nothing(tmp_path, certs, wasm_path, start_mcp_server, start_envoy):
    server = start_mcp_server("mcp", workdir=tmp_path)
    gw = ToolgateGateway(tmp_path / "gw", certs, wasm_path, server, listeners=BOTH, host="wasm")
    gw.policies = [policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))]
    gw.ports = {name: free_port() for name in gw.listener_protocols}
    gw.render()
    good = (gw.dir / "lds.json").read_text()
    write_json(gw.dir / "lds.json", with_module(good, broken_module(wasm_path, tmp_path)))
    gw.envoy = start_envoy(gw.dir / "envoy.json", workdir=gw.workdir)
    # The listeners are never created: no connection, so nothing reaches the server unfiltered.
    wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") >= 1, timeout=10, what="LDS rejected")
    # The update was rejected whole: no listener is active or warming, so none can open later.
    assert gw.envoy.stat("listener_manager.total_listeners_active") == 0
    assert gw.envoy.stat("listener_manager.total_listeners_warming") == 0
    for name, port in gw.ports.items():
        assert not tcp_open("127.0.0.1", port), name
    r = gw.call("get-sum")
    assert r.response is None and r.error is not None, r
    gw.envoy.wait_for_log("Unable to create Wasm plugin")
    assert server.executed() == []
    # The real module afterwards: the listeners come up with the plan.
    replace_text(gw.dir / "lds.json", good)
    wait_for(lambda: all(tcp_open("127.0.0.1", p) for p in gw.ports.values()), timeout=15, what="listeners up")
    wait_for(lambda: gw.call("get-sum").executed, timeout=10, interval=0.1, what="the plan")
    assert_denied(gw.call("echo"))
    assert_denied(gw.call("get-sum", listener="http", agent=None))


def trapping_module(tmp_path: Path, trap: str = "proxy_on_request_headers") -> Path:
    """A minimal proxy-wasm module whose callback `trap` traps (`unreachable`): what a VM crash is to
    Envoy. Written out here (about 240 bytes) because the real filter cannot be made to trap from
    outside: it refuses what it cannot read instead of panicking (the fuzz targets check it). With a
    response callback to trap, the request and response headers callbacks continue."""
    def leb(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def section(sid: int, body: bytes) -> bytes:
        return bytes([sid]) + leb(len(body)) + body

    def vec(items: list[bytes]) -> bytes:
        return leb(len(items)) + b"".join(items)

    def name(s: str) -> bytes:
        return leb(len(s)) + s.encode()

    i32 = b"\x7f"
    types = [b"\x60" + vec([]) + vec([]), b"\x60" + vec([i32, i32]) + vec([i32]), b"\x60" + vec([i32, i32]) + vec([]),
             b"\x60" + vec([i32, i32, i32]) + vec([i32]), b"\x60" + vec([i32]) + vec([i32])]
    # (export, type, body): vm start and configure answer 1 (ok), memory_allocate a fixed offset,
    # the stream callbacks `unreachable` (trap) or 0 (continue).
    stream = ["proxy_on_request_headers"] + (["proxy_on_response_headers", "proxy_on_response_body"]
                                             if trap != "proxy_on_request_headers" else [])
    funcs = [("proxy_abi_version_0_2_1", 0, b"\x00\x0b"), ("proxy_on_vm_start", 1, b"\x00\x41\x01\x0b"),
             ("proxy_on_configure", 1, b"\x00\x41\x01\x0b"), ("proxy_on_context_create", 2, b"\x00\x0b"),
             *[(n, 3, b"\x00\x00\x0b" if n == trap else b"\x00\x41\x00\x0b") for n in stream],
             ("proxy_on_memory_allocate", 4, b"\x00\x41\x80\x08\x0b")]
    assert trap in stream, trap
    module = (b"\0asm\x01\0\0\0" + section(1, vec(types)) + section(3, vec([leb(t) for _, t, _ in funcs]))
              + section(5, vec([b"\x00" + leb(2)]))
              + section(7, vec([name("memory") + b"\x02\x00"] + [name(n) + b"\x00" + leb(i) for i, (n, _, _) in enumerate(funcs)]))
              + section(10, vec([leb(len(body)) + body for _, _, body in funcs])))
    out = tmp_path / f"trapping-{trap}.wasm"
    out.write_bytes(module)
    return out


@pytest.mark.host("wasm", reason="a VM that traps (V8); native: "
                  "test_native_module.py::test_a_panic_denies_the_request_and_envoy_serves_on")
def test_a_vm_that_crashes_denies_every_request(tmp_path, certs, wasm_path, start_mcp_server, start_envoy):
    """The rendered configuration with a VM that traps on every request: Envoy answers each request
    itself (fail_open false), nothing reaches the MCP server, and the VM stays failed."""
    server = start_mcp_server("mcp", workdir=tmp_path)
    gw = ToolgateGateway(tmp_path / "gw", certs, wasm_path, server, listeners=BOTH, host="wasm")
    gw.policies = [policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))]
    gw.ports = {name: free_port() for name in gw.listener_protocols}
    gw.render()
    write_json(gw.dir / "lds.json", with_module((gw.dir / "lds.json").read_text(), trapping_module(tmp_path)))
    gw.envoy = start_envoy(gw.dir / "envoy.json", workdir=gw.workdir)
    wait_for(lambda: all(tcp_open("127.0.0.1", p) for p in gw.ports.values()), timeout=15, what="listeners up")
    for _ in range(3):
        for sent in (gw.call("get-sum"), gw.call("get-sum", listener="http", agent=None), gw.rpc("tools/list")):
            assert sent.response is not None and sent.response.status >= 500, sent
            assert sent.executed == [] and sent.upstream_requests == 0, sent
    assert server.executed() == []
    # Envoy writes its log file out periodically (--file-flush-interval-msec): wait for the line.
    wait_for(lambda: "unreachable" in gw.envoy.log_path.read_text(errors="replace").lower(), timeout=20,
             what="the trap in Envoy's log")


@pytest.mark.host("wasm", reason="a .wasm no VM can be created from; native: "
                  "test_native_module.py::test_an_update_with_a_module_that_cannot_load_keeps_the_plan")
def test_update_with_a_module_that_cannot_load_keeps_the_plan(gateway, wasm_path, tmp_path):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH)
    pid = gw.envoy.proc.pid
    good = (gw.dir / "lds.json").read_text()
    # A valid plan that would allow echo too, with a module that cannot load.
    gw.rerender([policy("p", tools_call_rule("a-sum", ["get-sum", "echo"], source=sa("a")))])
    wait_for(lambda: gw.call("echo").executed, timeout=10, interval=0.1, what="the echo plan")
    with_echo = (gw.dir / "lds.json").read_text()
    replace_text(gw.dir / "lds.json", good)
    wait_for(lambda: not gw.call("echo").executed, timeout=10, interval=0.1, what="the plan without echo")
    rejected = gw.envoy.stat("listener_manager.lds.update_rejected")
    write_json(gw.dir / "lds.json", with_module(with_echo, broken_module(wasm_path, tmp_path)))
    wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") > rejected, timeout=10,
             what="the update to be rejected")
    assert_allowed(gw.call("get-sum"))
    assert_denied(gw.call("echo"))
    assert_denied(gw.call("get-sum", listener="http", agent=None))
    assert gw.envoy.proc.pid == pid
    # Both listeners' updates were rejected, each keeping its old plan and VM.
    assert gw.envoy.stat("listener_manager.lds.update_rejected") >= rejected + 1


@pytest.mark.host("wasm", reason="the Wasm filter's fail_open/failure_policy and VM runtime; native: "
                  "test_native_module.py::test_rendered_configuration_loads_the_module")
def test_rendered_configuration_fails_closed(gateway):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH)
    rendered = list(wasm_filter_configs(json.loads((gw.dir / "lds.json").read_text())))
    assert len(rendered) == 2
    for conf in rendered:
        assert conf["fail_open"] is False
        assert conf.get("failure_policy", "FAIL_CLOSED") == "FAIL_CLOSED"
    # What Envoy runs (config_dump leaves out fields at their default: fail_open false, FAIL_CLOSED).
    dump = gw.envoy.config_dump("dynamic_listeners")
    running = [c for c in wasm_filter_configs({"resources": dump["configs"]})]
    assert len(running) == 2
    for conf in running:
        assert conf.get("fail_open", False) is False
        assert conf.get("failure_policy", "FAIL_CLOSED") == "FAIL_CLOSED"
        assert conf["vm_config"]["runtime"] == "envoy.wasm.runtime.v8"


def test_broken_plan_after_switching_back_keeps_the_plan_in_force(gateway):
    """Envoy reuses the root context of a plugin configuration it still holds (a draining filter
    chain's) when a listener switches back to it: no on_configure. The plan in force is then not the
    last one the filter loaded, and a broken plan pushed next must still keep the plan in force, not
    bring back the other one (here: re-allow a revoked tool)."""
    gw = gateway(*PLAN_NO_ECHO)
    lds = gw.dir / "lds.json"
    no_echo = lds.read_text()
    gw.rerender(PLAN_ECHO)
    wait_for(lambda: gw.call("echo").executed, timeout=15, interval=0.1, what="the echo plan")
    replace_text(lds, no_echo)  # echo revoked
    wait_for(lambda: not gw.call("echo").executed, timeout=15, interval=0.1, what="echo revoked")
    refused = gw.counters().get("toolgate.plan.rejected", 0)
    rejected = gw.envoy.stat("listener_manager.lds.update_rejected")
    broken = json.loads(no_echo)
    for conf in toolgate_plans(broken):
        plan = json.loads(conf["value"])
        plan["gateway"]["allow"] = []  # tampered: the hash no longer matches
        conf["value"] = json.dumps(plan)
    write_json(lds, broken)
    # Refused by the filter, then the listener update rejected by Envoy: the plan in force stays.
    wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") > rejected,
             timeout=10, what="the broken plan's listener update to be rejected")
    assert gw.counters().get("toolgate.plan.rejected", 0) > refused
    for _ in range(5):
        assert_denied(gw.call("echo"))
        assert_allowed(gw.call("get-sum"))
