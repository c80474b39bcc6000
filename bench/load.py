"""Load for `make bench`: the requests wrk sends per row, the generator (wrk, pinned, with agent-a's client
certificate), and the sanity check that each configuration enforces what it should before it is timed."""

import json
import os
import re
import subprocess
from pathlib import Path

from common import LOAD_CPU, LUA, SHIM, WORK
from workload import (
    ARG_PATH,
    DENIED_TOOL,
    LIST_ALLOWED,
    LIST_REQUEST,
    LIST_TOOLS,
    MODERN_HEADERS,
    TOOL,
    V26,
    tools_list_response,
)
from configs import LIST_KEYS, MODERN
import harness  # tests/e2e (on the path common sets): Envoy binary lookup, free ports, an HTTPS client


def modern_lua() -> Path:
    """bench/wrk/post.lua with the MCP 2026-07-28 request headers added (for the MODERN rows)."""
    text = LUA.read_text()
    anchor = 'wrk.headers["mcp-name"] = os.getenv("BENCH_TOOL")\n'
    assert anchor in text, "bench/wrk/post.lua changed: update modern_lua()"
    extra = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in MODERN_HEADERS.items())
    out = WORK / "post-2026-07-28.lua"
    out.write_text(text.replace(anchor, anchor + extra))
    return out


def list_lua() -> Path:
    """bench/wrk/post.lua for the LIST_KEYS rows: `mcp-method: tools/list` and no `mcp-name`."""
    text = LUA.read_text()
    anchor = 'wrk.headers["mcp-method"] = "tools/call"\nwrk.headers["mcp-name"] = os.getenv("BENCH_TOOL")\n'
    assert anchor in text, "bench/wrk/post.lua changed: update list_lua()"
    out = WORK / "post-tools-list.lua"
    out.write_text(text.replace(anchor, 'wrk.headers["mcp-method"] = "tools/list"\n'))
    return out


def lua_of(key: str) -> Path:
    return list_lua() if key in LIST_KEYS else modern_lua() if key in MODERN else LUA


def body_name(key: str, body: str) -> str:
    """The request body file (Loader.bodies key) a row sends in `body`'s place."""
    return "tools-list" if key in LIST_KEYS else f"{body}-{V26}" if key in MODERN else body


def request_headers(key: str) -> dict:
    """The MCP headers of a row's benchmark request."""
    if key in LIST_KEYS:
        return {"mcp-method": "tools/list"}
    return {"mcp-method": "tools/call", "mcp-name": TOOL, **(MODERN_HEADERS if key in MODERN else {})}


class Loader:
    def __init__(self, certs: Path, connections: int, bodies: dict[str, Path]):
        self.certs = certs
        self.connections = connections
        self.bodies = bodies

    def run(self, port: int, body: str, duration: int, key: str = "") -> dict:
        path = self.bodies[body_name(key, body)]
        env = dict(os.environ, LD_PRELOAD=str(SHIM), BENCH_CLIENT_CERT=str(self.certs / "agent-a.crt"),
                   BENCH_CLIENT_KEY=str(self.certs / "agent-a.key"), BENCH_BODY=str(path), BENCH_TOOL=TOOL)
        cmd = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{self.connections}", f"-d{duration}s", "--timeout", "10s",
               "-s", str(lua_of(key)), f"https://127.0.0.1:{port}/mcp"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=duration + 60)
        found = re.search(r"^BENCH_JSON (.*)$", out.stdout, re.M)
        if out.returncode != 0 or not found:
            raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return json.loads(found.group(1))


def denied(r: harness.Response) -> bool:
    """A Toolgate (or RBAC, ext_authz) denial: 403, or a JSON-RPC error with code 403."""
    if r.status == 403:
        return True
    try:
        b = r.json()
    except ValueError:
        return False
    return isinstance(b, dict) and isinstance(b.get("error"), dict) and b["error"].get("code") == 403


def sanity_list(key: str, port: int, certs: Path) -> str:
    """(l1)/(lm)/(l0): agent-a's tools/list (the benchmark request) comes back as the upstream's result with
    exactly LIST_ALLOWED (l1, lm) or all LIST_TOOLS (l0), nothing else changed; agent-b's is denied (the
    policy has no rule for it); agent-a's tools/call is allowed for a kept tool, denied for a removed one
    (the list matches the calls). Returns a one-line summary."""
    url = f"https://localhost:{port}/mcp"
    ca = certs / "ca.crt"

    def post(agent: str, body: bytes, headers: dict) -> harness.Response:
        return harness.mcp_post(url, body, headers=headers, cert=harness.client_cert(certs, agent), ca=ca)

    full = tools_list_response()
    filtered = key in ("l1", "lm")
    want = LIST_ALLOWED if filtered else LIST_TOOLS
    r = post("agent-a", LIST_REQUEST, request_headers(key))
    try:
        got = r.json()
        names = [t["name"] for t in got["result"]["tools"]]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"config {key}: agent-a's tools/list: {r.status} {r.text[:200]}") from None
    expected = json.loads(full)
    expected["result"]["tools"] = [t for t in expected["result"]["tools"] if t["name"] in want]
    if r.status != 200 or names != want or got != expected:
        raise RuntimeError(f"config {key}: agent-a's tools/list holds {len(names)} tools ({', '.join(names[:4])}, ...), "
                           f"expected {len(want)} ({', '.join(want[:4])}, ...) and nothing else changed")
    other = post("agent-b", LIST_REQUEST, request_headers(key))
    if not denied(other):
        raise RuntimeError(f"config {key}: agent-b's tools/list was not denied: {other.status} {other.text[:200]}")
    kept, removed = LIST_ALLOWED[1], LIST_TOOLS[1]

    def call(tool: str) -> harness.Response:
        return post("agent-a", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": tool, "arguments": {}}}).encode(),
                    {"mcp-method": "tools/call", "mcp-name": tool})
    ok, no = call(kept), call(removed)
    if ok.status != 200 or b'"result"' not in ok.body or not denied(no):
        raise RuntimeError(f"config {key}: agent-a's tools/call: {kept} -> {ok.status} {ok.text[:100]}, "
                           f"{removed} -> {no.status} {no.text[:100]}")
    what = (f"exactly the {len(want)} it may call" if filtered else "all of them (list filtering off)")
    return (f"agent-a's tools/list: {len(names)} of the upstream's {len(LIST_TOOLS)} tools, {what} "
            f"({len(r.body):,} of {len(full):,} bytes, the rest of the JSON unchanged); denies agent-b's tools/list "
            f"({other.status}); allows agent-a/{kept}, denies agent-a/{removed} ({no.status})")


def sanity(key: str, port: int, certs: Path, bodies: dict[str, bytes]) -> str:
    """The benchmark request is allowed (the upstream answers) for agent-a; where a rule is configured,
    agent-b and a tool outside the list are denied. Returns a one-line summary."""
    if key in LIST_KEYS:
        return sanity_list(key, port, certs)
    url = f"https://localhost:{port}/mcp"
    ca = certs / "ca.crt"

    extra = MODERN_HEADERS if key in MODERN else {}

    def call(agent: str, tool: str, body: bytes, headers: dict | None = None) -> harness.Response:
        return harness.mcp_post(url, body, headers={"mcp-method": "tools/call", "mcp-name": tool, **extra, **(headers or {})},
                                cert=harness.client_cert(certs, agent), ca=ca)

    for name, body in bodies.items():
        r = call("agent-a", TOOL, body)
        if r.status != 200 or b'"result"' not in r.body:
            raise RuntimeError(f"config {key}: the {name} benchmark request was not allowed: {r.status} {r.text[:200]}")
    if key in ("a", "n", "nm"):
        return "allows everything (no rule)"
    if key == "g0":
        return "allows everything after the authorizer answers (no rule of its own; the calls are counted below)"
    if key == "s":
        wrong = call("agent-a", DENIED_TOOL, bodies["300B"].replace(TOOL.encode(), DENIED_TOOL.encode()))
        if not denied(wrong):
            raise RuntimeError(f"config s: {DENIED_TOOL} was not denied: {wrong.status}")
        return f"allows {TOOL} for anyone; denies {DENIED_TOOL} ({wrong.status})"
    other = call("agent-b", TOOL, bodies["300B"])
    wrong = call("agent-a", DENIED_TOOL, bodies["300B"].replace(TOOL.encode(), DENIED_TOOL.encode()))
    if not (denied(other) and denied(wrong)):
        raise RuntimeError(f"config {key}: the rule is not enforced: agent-b -> {other.status} {other.text[:100]}, "
                           f"{DENIED_TOOL} -> {wrong.status} {wrong.text[:100]}")
    text = f"allows agent-a/{TOOL}; denies agent-b ({other.status}) and {DENIED_TOOL} ({wrong.status})"
    if key in MODERN:
        # The headers are compared with the body: another protocol version than _meta's is a mismatch.
        r = call("agent-a", TOOL, bodies["300B"], {"mcp-protocol-version": "2025-11-25"})
        if r.status != 400 or b"-32020" not in r.body:
            raise RuntimeError(f"config {key}: a protocol-version mismatch was not refused: {r.status} {r.text[:100]}")
        text += f"; refuses a protocol-version header/_meta mismatch ({r.status}, -32020)"
    if key == "f2":
        arg = call("agent-a", TOOL, bodies["300B"].replace(ARG_PATH.encode(), ARG_PATH.replace("data", "dat2").encode()))
        if not denied(arg):
            raise RuntimeError(f"config f2: another arguments.path was not denied: {arg.status} {arg.text[:100]}")
        text += f" and another `arguments.path` ({arg.status})"
    return text
