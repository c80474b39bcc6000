#!/usr/bin/env python3
"""`make bench`: Toolgate against bare Envoy, Envoy's RBAC filter, a no-op proxy-wasm filter and
ext_authz, side by side in one interleaved run, plus native micro-benchmarks of the policy crate.

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
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import harness  # noqa: E402  (Envoy binary lookup, certificates, free ports, an HTTPS client)

BENCH = REPO / "bench"
WORK = REPO / ".work" / "bench"
SHIM = WORK / "bin" / "client-cert-shim.so"
LUA = BENCH / "wrk" / "post.lua"
WASM_TOOLGATE = REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
WASM_NO_LISTS = REPO / "target/wasm32-wasip1/release/toolgate_filter_no_list_filtering.wasm"
WASM_NOOP = REPO / "target/wasm32-wasip1/release/toolgate_bench_noop_filter.wasm"
WASM_NAIVE = REPO / "target/wasm32-wasip1/release/toolgate_bench_naive_filter.wasm"
WASM_CALLOUT = REPO / "target/wasm32-wasip1/release/toolgate_bench_callout_filter.wasm"
TOOLGATE = REPO / "target/release/toolgate"
UPSTREAM = REPO / "target/release/bench-upstream"
AUTHZ = REPO / "target/release/bench-authz"
AUTHZ_GRPC = REPO / "target/release/toolgate-test-authz"  # tests/authz-servers: the (g) rows' gRPC authorizer

ENVOY_CPU = "0"
LOAD_CPU = "1"
PRINCIPAL = "spiffe://cluster.local/ns/default/sa/a"
TOOLS = [f"tool-{i:05d}" for i in range(20)]
TOOL = "tool-00017"  # the tool every benchmark request calls
DENIED_TOOL = "tool-99999"
BACKENDS = 199  # XBackends (and routes) in every configuration; (d) has 5 policies on each + 5 on the Gateway
BACKENDS_10K = 1999  # for the 10,000-policy compile and plan-load measurements
NS = "default"
GATEWAY = "bench-gateway"
LISTENER_PORT_NAME = "https"

CONFIGS = {
    "a": ("bare Envoy", "router only"),
    "b": ("Envoy RBAC", "envoy.filters.http.rbac: caller's URI SAN + `mcp-method`/`mcp-name` headers in a 20-name allow-list"),
    "n": ("no-op proxy-wasm", "a proxy-wasm filter whose callbacks all continue (bench/noop-filter), same V8 runtime"),
    "s": ("naive proxy-wasm", "reference point: holds the body, parses it with serde_json into a Value, checks params.name against the 20 names (bench/naive-filter); no identity, levels, metrics or access-log record"),
    "c": ("Toolgate, 20 tools", "`toolgate render` output: 1 gateway-level XAccessPolicy, 2 rules (SPIFFE source, tools/call with 10 tools each)"),
    "cn": ("Toolgate, 20 tools, list filtering off", "(c)'s policies rendered with `--list-filtering off` and run by toolgate_filter_no_list_filtering.wasm (the module without response callbacks): what a tools/call pays when list filtering is off"),
    "c26": ("Toolgate, 20 tools, MCP 2026-07-28", "(c)'s configuration and plan; the same call in its 2026-07-28 form: `MCP-Protocol-Version: 2026-07-28` beside (c)'s `Mcp-Method` and `Mcp-Name`, and `params._meta` with the protocol version (the filter compares all three with the body; same 300 B)"),
    "d": ("Toolgate, 1,000 policies", "`toolgate render` output: 1,000 policies, 10,450 tools on two levels (the API allows 5 policies per target): on the Gateway 5 policies x 10 sourced rules x 10 tools, on each of the 199 XBackends 5 policies x 10 tools; the called tool is in the last rule of the last policy of each level"),
    "e": ("ext_authz (HTTP)", "envoy.filters.http.ext_authz to bench-authz (Rust, thread per connection) with the body and the caller (x-forwarded-client-cert URI); same rule"),
    "f1": ("Toolgate, CEL tool_name", "`toolgate render` output: 1 gateway-level XAccessPolicy, 1 rule: SPIFFE source (as (c)) + CEL `request.mcp.tool_name == 'tool-00017'`"),
    "f2": ("Toolgate, CEL argument", "as (f1), the CEL expression `request.mcp.tool_name == 'tool-00017' && request.mcp.params.arguments.path == '/srv/data/report.txt'` (the body carries `arguments.path`; `params` is captured for it)"),
    "g1": ("Toolgate + ExternalAuth gRPC", "(c)'s plan plus a gateway-level `action: ExternalAuth` policy (`protocol: GRPC, grpc: {}`, no rules: every request) calling toolgate-test-authz (tests/authz-servers) over gRPC, then (c)'s Allow policy"),
    "g0": ("proxy-wasm gRPC callout alone", "(g1)'s Envoy configuration with bench/callout-filter in Toolgate's place: holds the request, sends a fixed CheckRequest (the one Toolgate sends for the benchmark's call: principal, the request's headers, `mcp_proxy`) to the same authorizer through proxy-wasm's gRPC call, resumes on its answer; reads nothing, counts nothing: the floor of a callout through the proxy-wasm ABI, against (n)"),
    "g2": ("ext_authz (gRPC)", "envoy.filters.http.ext_authz, `grpc_service.envoy_grpc` (HTTP/2 cluster), `with_request_body`, router only: the same authorizer and rule file as (g1)"),
    "l1": ("Toolgate, tools/list filtered", "`toolgate render --list-filtering on` output: 1 gateway-level XAccessPolicy, 1 rule: SPIFFE source (as (c)), `MATCH_BASE_PROTOCOL_METHODS` (tools/list is one) and tools/call of 10 of the upstream's 100 tools (every tenth); the request is a `tools/list` POST (`Mcp-Method: tools/list`, no `Mcp-Name`), the upstream answers a JSON result of 100 tools of 300 B each (~30 KB, content-length set), the filter keeps the 10"),
    "l0": ("Toolgate, tools/list unfiltered", "(l1)'s policy rendered with `--list-filtering off`: the same request, authorized the same way; the 100-tool answer passes unchanged (the filter does no work on responses)"),
}
# Opt-in (`--baseline REV`): (c)'s configuration with the filter .wasm built at another commit.
BASELINE_KEY = "c0"
# Rows timed with the 300 B body only (their targets are about 300 B calls; keeps `make bench` short).
SMALL_ONLY = {"cn", "f1", "f2", "g0", "g1", "g2", "c26", "l1", "l0", BASELINE_KEY}
# Rows whose request is the MCP 2026-07-28 form of the call: the body carries params._meta's protocol
# version and the request this header besides (c)'s Mcp-Method and Mcp-Name.
V26 = "2026-07-28"
MODERN = {"c26"}
MODERN_HEADERS = {"mcp-protocol-version": V26}
# Rows whose request is a `tools/list` (LIST_REQUEST, timed in the 300 B body's place: one request
# only), answered by the upstream (`bench-upstream --tools-list`) with LIST_TOOLS, LIST_ENTRY_BYTES
# each (~30 KB); their policy lets agent-a call LIST_ALLOWED, so (l1)'s filter keeps 10 of 100.
LIST_KEYS = {"l1", "l0"}
LIST_TOOLS = [f"tool-{i:05d}" for i in range(100)]
LIST_ALLOWED = LIST_TOOLS[::10]
LIST_ENTRY_BYTES = 300
LIST_REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
ARG_PATH = "/srv/data/report.txt"  # `arguments.path` of every benchmark body (make_body), read by (f2)
BODIES = {"300B": 300, "64KiB": 64 * 1024, "1MiB": 1024 * 1024}


def log(msg: str) -> None:
    print(f"bench: {msg}", flush=True)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


# --------------------------------------------------------------------------------------------------
# Inputs


def make_body(size: int, tool: str, small_first: bool = True, modern: bool = False) -> bytes:
    """A JSON-RPC tools/call of exactly `size` bytes. Small bodies read like a typical call (method
    first); large ones carry big `arguments` with `method` and `params.name` last, so the reader has to
    go through the whole body (escapes included) before it knows what is called. `modern`: the MCP
    2026-07-28 form, with `params._meta` carrying the protocol version (same size: less padding)."""
    meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"' + V26 + '"},' if modern else ""
    if size <= 1024 and small_first:
        head = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + tool + '",' + meta + '"arguments":{"path":"/srv/data/report.txt","mode":"summary","text":"'
        tail = '"}}}'
    else:
        head = '{"jsonrpc":"2.0","id":1,"params":{' + meta + '"arguments":{"path":"/srv/data/report.txt","content":"'
        tail = '"},"name":"' + tool + '"},"method":"tools/call"}'
    n = size - len(head) - len(tail)
    assert n > 0, size
    unit = "The quick brown fox jumps over the lazy dog; \\\"quoted\\\" text, a tab\\t and \\u00e9t\\u00e9.\\n "
    text = unit * (n // len(unit)) + "x" * (n % len(unit))  # whole escapes only
    body = (head + text + tail).encode()
    assert len(body) == size, (len(body), size)
    json.loads(body)
    return body


def tools_list_response() -> bytes:
    """The upstream's answer to the list rows' tools/list: a JSON-RPC result (id 1, as LIST_REQUEST)
    of LIST_TOOLS, each entry exactly LIST_ENTRY_BYTES (name, title, a description padded to size, a
    small inputSchema), about 30 KB in all."""
    words = "Reads a file under /srv/data and returns its text, or a summary of it; paths outside are refused. "
    entries = []
    for i, name in enumerate(LIST_TOOLS):
        head = '{"name":"' + name + '","title":"Tool ' + str(i) + '","description":"'
        tail = ('","inputSchema":{"type":"object","properties":{"path":{"type":"string"},'
                '"mode":{"type":"string","enum":["summary","full"]}},"required":["path"]}}')
        n = LIST_ENTRY_BYTES - len(head) - len(tail)
        assert n > 0, n
        entry = head + (words * (n // len(words) + 1))[:n] + tail
        assert len(entry) == LIST_ENTRY_BYTES and json.loads(entry)["name"] == name
        entries.append(entry)
    body = ('{"jsonrpc":"2.0","id":1,"result":{"tools":[' + ",".join(entries) + "]}}").encode()
    assert [t["name"] for t in json.loads(body)["result"]["tools"]] == LIST_TOOLS
    return body


def tls_objects(certs: Path) -> str:
    import base64

    b64 = lambda p: base64.b64encode((certs / p).read_bytes()).decode()  # noqa: E731
    ca = (certs / "ca.crt").read_text()
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: bench-cert, namespace: {NS}}}\n"
        f"type: kubernetes.io/tls\ndata:\n  tls.crt: {b64('server.crt')}\n  tls.key: {b64('server.key')}\n"
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: agents-ca, namespace: {NS}}}\ndata:\n  ca.crt: |\n"
        + "".join(f"    {line}\n" for line in ca.splitlines())
    )


def backend_names(n: int) -> list[str]:
    """The benchmark's XBackend `tools` (route /mcp, any host) and n - 1 others (each on its own host)."""
    return ["tools"] + [f"b-{i:04d}" for i in range(n - 1)]


def gateway_yaml(port: int, backends: int) -> str:
    """The Gateway (one HTTPS listener requiring client certificates), and `backends` XBackends each
    with an HTTPRoute: `tools` at /mcp on any host, the others at /mcp on host <name>.bench.local. All
    configurations share this topology (so route lookup and clusters cost the same everywhere)."""
    out = [f"""apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {GATEWAY}, namespace: {NS}}}
spec:
  gatewayClassName: toolgate
  listeners:
  - name: {LISTENER_PORT_NAME}
    port: {port}
    protocol: HTTPS
    tls:
      mode: Terminate
      certificateRefs: [{{kind: Secret, name: bench-cert}}]
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{{group: "", kind: ConfigMap, name: agents-ca}}]
"""]
    for b in backend_names(backends):
        hosts = "" if b == "tools" else f"  hostnames: [{b}.bench.local]\n"
        out.append(f"""---
apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {{name: {b}, namespace: {NS}}}
spec:
  mcp: {{serviceName: upstream, port: 8080}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {b}, namespace: {NS}}}
spec:
  parentRefs: [{{name: {GATEWAY}}}]
{hosts}  rules:
  - matches: [{{path: {{type: PathPrefix, value: /mcp}}}}]
    backendRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: {b}}}]
""")
    return "".join(out)


def policy_yaml(name: str, target: str | None, rules: list[tuple[str | None, list[str]]], base: bool = False) -> str:
    """One Allow XAccessPolicy on the Gateway (target None) or an XBackend; each rule: (SPIFFE source or
    None, tools/call params); `base`: the rules also allow the base protocol methods
    (`MATCH_BASE_PROTOCOL_METHODS`: initialize, ping, tools/list, ...)."""
    ref = ("{group: gateway.networking.k8s.io, kind: Gateway, name: " + GATEWAY + "}" if target is None
           else "{group: agentic.networking.x-k8s.io, kind: XBackend, name: " + target + "}")
    out = [f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
           f"metadata: {{name: {name}, namespace: {NS}}}\nspec:\n  targetRefs: [{ref}]\n  action: Allow\n  rules:\n"]
    for i, (source, tools) in enumerate(rules):
        out.append(f"  - name: r{i}\n")
        if source:
            out.append(f"    source: {{type: SPIFFE, spiffe: \"{source}\"}}\n")
        out.append("    authorization:\n      type: Inline\n      mcp:\n        methods:\n"
                   f"        - name: tools/call\n          params: [{', '.join(tools)}]\n")
        if base:
            out.append("        mcpBaseProtocolMethodsOption: MATCH_BASE_PROTOCOL_METHODS\n")
    return "".join(out)


def policies_c() -> str:
    """(c): one gateway-level policy, two rules for agent-a with 10 tools each."""
    return policy_yaml("agents", None, [(PRINCIPAL, TOOLS[:10]), (PRINCIPAL, TOOLS[10:])])


def policies_l() -> str:
    """(l1)/(l0): one gateway-level policy, one rule for agent-a: the base protocol methods (tools/list
    among them) and tools/call of LIST_ALLOWED."""
    return policy_yaml("agents-list", None, [(PRINCIPAL, LIST_ALLOWED)], base=True)


def cel_policy_yaml(name: str, expression: str) -> str:
    """One Allow XAccessPolicy on the Gateway with one rule: agent-a's SPIFFE ID (as (c)) + a CEL rule."""
    return (f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
            f"metadata: {{name: {name}, namespace: {NS}}}\nspec:\n"
            f"  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {GATEWAY}}}]\n  action: Allow\n  rules:\n"
            f"  - name: r0\n    source: {{type: SPIFFE, spiffe: \"{PRINCIPAL}\"}}\n"
            f"    authorization:\n      type: CEL\n      cel: {{expression: {json.dumps(expression)}}}\n")


def policies_f1() -> str:
    return cel_policy_yaml("agents-cel", f"request.mcp.tool_name == '{TOOL}'")


def policies_f2() -> str:
    return cel_policy_yaml("agents-cel", f"request.mcp.tool_name == '{TOOL}' && request.mcp.params.arguments.path == '{ARG_PATH}'")


AUTHZ_SERVICE = "authz"  # the ExternalAuth backendRef of (g1), resolved with `render --resolve`


def policies_g1() -> str:
    """(c)'s policy plus a gateway-level ExternalAuth policy without rules (every request calls it)."""
    return policies_c() + (
        f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
        f"metadata: {{name: tools-authz, namespace: {NS}}}\nspec:\n"
        f"  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {GATEWAY}}}]\n  action: ExternalAuth\n"
        f"  externalAuth: {{protocol: GRPC, grpc: {{}}, backendRef: {{name: {AUTHZ_SERVICE}, port: 9000}}}}\n")


def policies_many(backends: int) -> str:
    """Policies on two levels, as many as the API allows per target (5): on the Gateway, 5 policies of
    10 sourced rules x 10 tools (rules alternate between agent-a and other callers); on each of the
    `backends` XBackends, 5 policies of one rule x 10 tools. The benchmark's tools are in the last rule
    of the last gateway policy and in the last policy of XBackend `tools`. backends=199 gives 1,000
    policies and 10,450 tool names; backends=1,999 gives 10,000 policies."""
    out = []
    for i in range(5):
        rules = []
        for r in range(10):
            if (i, r) == (4, 9):
                rules.append((PRINCIPAL, TOOLS[10:]))
            else:
                source = PRINCIPAL if r % 2 else f"spiffe://cluster.local/ns/team-{i}-{r}/sa/agent"
                rules.append((source, [f"gw-{i}-{r}-{k}" for k in range(10)]))
        out.append(policy_yaml(f"gw-{i}", None, rules))
    for b in backend_names(backends):
        for p in range(5):
            tools = TOOLS[10:] if (b, p) == ("tools", 4) else [f"{b}-{p}-{k}" for k in range(10)]
            out.append(policy_yaml(f"{b}-p{p}", b, [(None, tools)]))
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# Processes


def cpu_ns(pid: int) -> int:
    """CPU time (ns) of all live threads of `pid` (schedstat: exact; falls back to /proc stat ticks)."""
    total = 0
    try:
        for stat in glob.glob(f"/proc/{pid}/task/*/schedstat"):
            try:
                total += int(open(stat).read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        if total:
            return total
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0


def process_cpu_ns(pid: int) -> int:
    """CPU time of a whole process including its exited threads (/proc/PID/stat, clock ticks): for the
    thread-per-connection servers, whose threads come and go."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0


def rss_kib(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Server:
    """bench-upstream / bench-authz, pinned to the load generator's CPU."""

    def __init__(self, name: str, argv: list[str], listen: list[str] | None = None, json_key: str | None = None):
        """`listen`: the arguments that make it listen on a free port (default `--listen 127.0.0.1:0`);
        `json_key`: the first stdout line is a JSON object of addresses (toolgate-test-authz), not
        `listening on ADDR`."""
        self.name = name
        err = open(WORK / f"{name}.stderr.log", "wb")
        self.proc = subprocess.Popen(["taskset", "-c", LOAD_CPU, *argv, *(listen or ["--listen", "127.0.0.1:0"])],
                                     stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        err.close()
        line = self.proc.stdout.readline().decode()
        try:
            self.address = json.loads(line)[json_key] if json_key else None
        except (ValueError, KeyError, TypeError):
            self.address = None
        if not json_key and line.startswith("listening on "):
            self.address = line.split()[-1]
        if not self.address:
            self.stop()
            raise RuntimeError(f"{name}: unexpected first line {line!r}")
        self.port = int(self.address.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Envoy:
    """One Envoy, `--concurrency 1`, pinned to ENVOY_CPU."""

    def __init__(self, key: str, config: Path, port: int):
        self.key = key
        self.port = port
        self.log_path = WORK / "logs" / f"envoy-{key}.log"
        self.admin_path = WORK / "logs" / f"envoy-{key}.admin"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.admin_path.unlink(missing_ok=True)
        self.log_path.unlink(missing_ok=True)
        out = open(WORK / "logs" / f"envoy-{key}.stdout.log", "wb")
        self.proc = subprocess.Popen(
            ["taskset", "-c", ENVOY_CPU, str(harness.envoy_binary()), "--config-path", str(config),
             "--config-yaml", "{admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}}",
             "--admin-address-path", str(self.admin_path), "--concurrency", "1", "--disable-hot-restart",
             "--log-level", "info", "--log-path", str(self.log_path), "--file-flush-interval-msec", "100"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"envoy {self.key} exited ({self.proc.returncode}):\n{harness.tail(self.log_path)}")
            if self.admin_path.exists() and self.admin_path.read_text().strip():
                admin = self.admin_path.read_text().strip()
                try:
                    r = harness.request("GET", f"http://{admin}/ready", timeout=1)
                    if r.status == 200 and r.body.strip() == b"LIVE" and harness.tcp_open("127.0.0.1", self.port):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"envoy {self.key} not ready after {timeout}s:\n{harness.tail(self.log_path)}")

    def counter(self, name: str) -> int:
        """A counter from the admin interface (0 when Envoy has none of that name)."""
        admin = self.admin_path.read_text().strip()
        r = harness.request("GET", f"http://{admin}/stats?format=json&filter={urllib.parse.quote('^' + re.escape(name) + '$', safe='')}",
                             timeout=5)
        stats = json.loads(r.body).get("stats", [])
        return int(next((x.get("value", 0) for x in stats if x.get("name") == name), 0))

    def plan_loads(self) -> list[tuple[int, float]]:
        """(plan bytes, milliseconds) of each plan load the filter logged."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [(int(b), float(ms)) for b, ms in re.findall(r"loaded plan .*?; (\d+) bytes in ([\d.]+) ms", text)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# --------------------------------------------------------------------------------------------------
# Configurations


def render(name: str, policies: str, certs: Path, upstream: Server, port: int, backends: int,
           resolve: list[str] = (), extra: list[str] = (), wasm: Path = WASM_TOOLGATE) -> tuple[Path, float]:
    """`toolgate render` of the bench Gateway with `policies` (`extra`: more render options, `wasm`:
    the module); returns the Gateway's folder and the wall time of the render."""
    src = WORK / "inputs" / name
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    (src / "gateway.yaml").write_text(gateway_yaml(port, backends))
    (src / "tls.yaml").write_text(tls_objects(certs))
    (src / "policies.yaml").write_text(policies)
    out = WORK / "render" / name
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    sh([str(TOOLGATE), "render", "-f", str(src), "--wasm", str(wasm), "-o", str(out), "--bind", "127.0.0.1",
        "--resolve", f"upstream.{NS}={upstream.address}", *(a for r in resolve for a in ("--resolve", r)),
        "--access-log", "/dev/null", "--strict", *extra],
       stdout=subprocess.DEVNULL)
    took = time.perf_counter() - t
    return out / f"{NS}.{GATEWAY}", took


def derive(base: Path, key: str, edit) -> Path:
    """A copy of a rendered Gateway folder whose listener (and clusters) `edit(lds, cds)` changes."""
    dst = WORK / "render" / key / base.name
    shutil.rmtree(dst.parent, ignore_errors=True)
    shutil.copytree(base, dst)
    lds = json.loads((dst / "lds.json").read_text())
    cds = json.loads((dst / "cds.json").read_text())
    edit(lds, cds)
    static_clusters(cds)
    (dst / "lds.json").write_text(json.dumps(lds, indent=1))
    (dst / "cds.json").write_text(json.dumps(cds, indent=1))
    boot = json.loads((dst / "envoy.json").read_text())
    for k in ("lds_config", "cds_config"):
        src = boot["dynamic_resources"][k]["path_config_source"]
        src["path"] = str(dst / Path(src["path"]).name)
        src["watched_directory"]["path"] = str(dst)
    (dst / "envoy.json").write_text(json.dumps(boot, indent=1))
    return dst


def static_clusters(cds: dict) -> None:
    """The rendered clusters are STRICT_DNS (Service names); here every one points at 127.0.0.1. Made
    STATIC in every configuration alike, so that 200 DNS refresh timers per Envoy (every 5 s) add no
    noise to the measurements; nothing on the request path changes."""
    for c in cds["resources"]:
        if c.get("type") == "STRICT_DNS":
            eps = [lb["endpoint"]["address"]["socket_address"]["address"]
                   for e in c["load_assignment"]["endpoints"] for lb in e["lb_endpoints"]]
            if all(re.fullmatch(r"[0-9.]+", a) for a in eps):
                c["type"] = "STATIC"
                c.pop("dns_lookup_family", None)


def hcm_of(lds: dict) -> dict:
    (listener,) = lds["resources"]
    (chain,) = listener["filter_chains"]
    (hcm,) = chain["filters"]
    return hcm["typed_config"]


ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def edit_bare(lds, cds):
    hcm_of(lds)["http_filters"] = [ROUTER]


def edit_rbac(lds, cds):
    names = {"or_rules": {"rules": [{"header": {"name": "mcp-name", "string_match": {"exact": t}}} for t in TOOLS]}}
    method = {"header": {"name": "mcp-method", "string_match": {"exact": "tools/call"}}}
    hcm_of(lds)["http_filters"] = [{
        "name": "envoy.filters.http.rbac",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
            "rules": {"action": "ALLOW", "policies": {"agent-a-tools": {
                "permissions": [{"and_rules": {"rules": [method, names]}}],
                "principals": [{"authenticated": {"principal_name": {"exact": PRINCIPAL}}}],
            }}},
        },
    }, ROUTER]


def edit_noop(lds, cds):
    hcm = hcm_of(lds)
    wasm = json.loads(json.dumps(hcm["http_filters"][0]))
    cfg = wasm["typed_config"]["config"]
    cfg["name"] = "noop"
    cfg["root_id"] = "noop"
    cfg.pop("configuration", None)
    cfg["vm_config"]["vm_id"] = "noop"
    cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_NOOP)
    hcm["http_filters"] = [wasm, ROUTER]


def edit_naive(lds, cds):
    edit_noop(lds, cds)
    cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
    cfg["name"] = cfg["root_id"] = cfg["vm_config"]["vm_id"] = "naive"
    cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_NAIVE)


def edit_none(lds, cds):
    pass


def _pb_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _pb_len(field: int, payload: bytes) -> bytes:
    return _pb_varint(field << 3 | 2) + _pb_varint(len(payload)) + payload


def _pb_str(field: int, text: str) -> bytes:
    return _pb_len(field, text.encode()) if text else b""


def _pb_value(v) -> bytes:
    """The fields of a google.protobuf.Value of the JSON value `v`."""
    if v is None:
        return _pb_varint(1 << 3) + b"\0"
    if isinstance(v, bool):
        return _pb_varint(4 << 3) + _pb_varint(int(v))
    if isinstance(v, (int, float)):
        return _pb_varint(2 << 3 | 1) + struct.pack("<d", float(v))
    if isinstance(v, str):
        return _pb_len(3, v.encode())
    if isinstance(v, dict):
        return _pb_len(5, _pb_struct(v))
    return _pb_len(6, b"".join(_pb_len(1, _pb_value(x)) for x in v))


def _pb_struct(d: dict) -> bytes:
    return b"".join(_pb_len(1, _pb_str(1, k) + _pb_len(2, _pb_value(v))) for k, v in d.items())


def check_request(body: bytes, authority: str) -> bytes:
    """The CheckRequest Toolgate sends for the benchmark's call (policy/src/authz.rs: the caller's
    principal, the request's HTTP attributes and every header as the filter sees wrk's POST behind
    Envoy's HCM, `mcp_proxy` with the parsed message), encoded here for (g0)."""
    msg = json.loads(body)
    headers = [(":authority", authority), (":path", "/mcp"), (":method", "POST"), (":scheme", "https"),
               ("content-length", str(len(body))), ("content-type", "application/json"),
               ("accept", "application/json, text/event-stream"), ("mcp-method", "tools/call"), ("mcp-name", TOOL),
               ("x-forwarded-proto", "https"), ("x-request-id", "6f1c2a4e-8d3b-4f5a-9c7e-2b1d0e9f8a7c")]
    http = (_pb_str(1, headers[-1][1]) + _pb_str(2, "POST")
            + b"".join(_pb_len(3, _pb_str(1, k) + _pb_str(2, v)) for k, v in headers)
            + _pb_str(4, "/mcp") + _pb_str(5, authority) + _pb_str(6, "https")
            + _pb_varint(9 << 3) + _pb_varint(len(body)) + _pb_str(10, "HTTP/1.1"))
    mcp = {"id": msg["id"], "jsonrpc": "2.0", "method": msg["method"], "params": msg["params"]}
    attributes = (_pb_len(1, _pb_str(4, PRINCIPAL)) + _pb_len(2, b"") + _pb_len(4, _pb_len(2, http))
                  + _pb_len(11, _pb_len(1, _pb_str(1, "mcp_proxy") + _pb_len(2, _pb_struct(mcp)))))
    return _pb_len(1, attributes)


def edit_callout(body: bytes, port: int):
    """(g0): (g1)'s configuration (its authorizer cluster included) with bench/callout-filter in place of
    Toolgate's filter, configured with (g1)'s authorizer and the CheckRequest of `body`."""
    def edit(lds, cds):
        cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
        authorizer = json.loads(cfg["configuration"]["value"])["gateway"]["externalAuth"]["authorizer"]
        upstream = _pb_len(1, _pb_str(1, authorizer["cluster"]) + _pb_str(2, authorizer["authority"]))
        cfg["name"] = cfg["root_id"] = cfg["vm_config"]["vm_id"] = "callout"
        cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_CALLOUT)
        cfg["configuration"]["value"] = f"{upstream.hex()} {check_request(body, f'127.0.0.1:{port}').hex()}"
    return edit


def edit_ext_authz(authz: Server):
    def edit(lds, cds):
        hcm = hcm_of(lds)
        # The caller's identity reaches an HTTP authorizer as a header: x-forwarded-client-cert with the
        # URI SAN of the verified client certificate (set by the connection manager, any inbound value
        # dropped).
        hcm["forward_client_cert_details"] = "SANITIZE_SET"
        hcm["set_current_client_cert_details"] = {"uri": True}
        hcm["http_filters"] = [{
            "name": "envoy.filters.http.ext_authz",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                "http_service": {
                    "server_uri": {"uri": f"http://{authz.address}", "cluster": "bench_ext_authz", "timeout": "60s"},
                    "authorization_request": {"allowed_headers": {"patterns": [
                        {"exact": "x-forwarded-client-cert"}, {"exact": "mcp-method"}, {"exact": "mcp-name"},
                        {"exact": "content-type"}]}},
                },
                "with_request_body": {"max_request_bytes": 2 * 1024 * 1024, "allow_partial_message": False},
                "failure_mode_allow": False,
            },
        }, ROUTER]
        cds["resources"].append({
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": "bench_ext_authz", "type": "STATIC", "connect_timeout": "5s",
            "load_assignment": {"cluster_name": "bench_ext_authz", "endpoints": [{"lb_endpoints": [{"endpoint": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": authz.port}}}}]}]},
        })
    return edit


def edit_ext_authz_grpc(authz: Server):
    """(g2): Envoy's own ext_authz filter calling toolgate-test-authz over gRPC (HTTP/2 cluster), with
    the body (the rule needs `params.name`); the caller's SPIFFE ID reaches a gRPC authorizer as
    `attributes.source.principal` without any setting."""
    port = int(authz.address.rsplit(":", 1)[1])

    def edit(lds, cds):
        hcm_of(lds)["http_filters"] = [{
            "name": "envoy.filters.http.ext_authz",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                "grpc_service": {"envoy_grpc": {"cluster_name": "bench_ext_authz_grpc"}, "timeout": "5s"},
                "transport_api_version": "V3",
                "with_request_body": {"max_request_bytes": 2 * 1024 * 1024, "allow_partial_message": False},
                "failure_mode_allow": False,
            },
        }, ROUTER]
        cds["resources"].append({
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": "bench_ext_authz_grpc", "type": "STATIC", "connect_timeout": "5s",
            "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}}},
            "load_assignment": {"cluster_name": "bench_ext_authz_grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]},
        })
    return edit


def baseline_knows(rev: str, path: str, text: str) -> bool:
    """Whether file `path` at commit `rev` contains `text`."""
    out = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return out.returncode == 0 and text in out.stdout


def edit_baseline(wasm: Path, rev: str):
    """(c0): (c)'s configuration with the filter .wasm of an earlier commit. What that version predates
    is removed: plan settings its parser does not know (it refuses unknown fields: `authzTimeoutMs`,
    `pauseHeaders`, `listFiltering`, each kept when policy/src/plan.rs at `rev` has the field) and the
    Wasm option `allow_on_headers_stop_iteration` (kept when its render set it); the plan's hash is
    recomputed (SHA-256 of the compact plan with `hash` empty, as policy/src/plan.rs). With 4df76a5 all
    of them go."""
    import hashlib

    drop = [k for k, field in (("authzTimeoutMs", "pub authz_timeout_ms"), ("pauseHeaders", "pub pause_headers"),
                               ("listFiltering", "pub list_filtering"))
            if not baseline_knows(rev, "policy/src/plan.rs", field)]
    keep_stop = baseline_knows(rev, "controller/src/render.rs", "allow_on_headers_stop_iteration")

    def edit(lds, cds):
        cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
        cfg["vm_config"]["code"]["local"]["filename"] = str(wasm)
        if not keep_stop:
            cfg.pop("allow_on_headers_stop_iteration", None)
        plan = json.loads(cfg["configuration"]["value"])
        for k in drop:
            plan.get("settings", {}).pop(k, None)
        plan["hash"] = ""
        plan["hash"] = hashlib.sha256(json.dumps(plan, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
        cfg["configuration"]["value"] = json.dumps(plan, separators=(",", ":"), ensure_ascii=False)
    return edit


def plan_of(gateway_dir: Path) -> dict:
    """The Toolgate plan in a Gateway folder's listener (the Wasm filter's configuration)."""
    for f in hcm_of(json.loads((gateway_dir / "lds.json").read_text()))["http_filters"]:
        conf = f["typed_config"].get("config", {}).get("configuration")
        if conf:
            return json.loads(conf["value"])
    raise RuntimeError(f"no plan in {gateway_dir}")


def plan_bytes(gateway_dir: Path) -> int:
    for f in hcm_of(json.loads((gateway_dir / "lds.json").read_text()))["http_filters"]:
        conf = f["typed_config"].get("config", {}).get("configuration")
        if conf:
            return len(conf["value"].encode())
    return 0


# --------------------------------------------------------------------------------------------------
# Load


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
    """(l1)/(l0): agent-a's tools/list (the benchmark request) comes back as the upstream's result with
    exactly LIST_ALLOWED (l1) or all LIST_TOOLS (l0), nothing else changed; agent-b's is denied (the
    policy has no rule for it); agent-a's tools/call is allowed for a kept tool, denied for a removed one
    (the list matches the calls). Returns a one-line summary."""
    url = f"https://localhost:{port}/mcp"
    ca = certs / "ca.crt"

    def post(agent: str, body: bytes, headers: dict) -> harness.Response:
        return harness.mcp_post(url, body, headers=headers, cert=harness.client_cert(certs, agent), ca=ca)

    full = tools_list_response()
    want = LIST_ALLOWED if key == "l1" else LIST_TOOLS
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
    what = (f"exactly the {len(want)} it may call" if key == "l1" else "all of them (list filtering off)")
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
    if key in ("a", "n"):
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


# --------------------------------------------------------------------------------------------------
# Instruction counts (callgrind)

# Started in this order, two at a time: the Toolgate ones take longest under valgrind (V8 compiles the
# 1.5 MB module at valgrind speed), so they go first.
CALLGRIND_CONFIGS = ("c", "cn", "c26", BASELINE_KEY, "l1", "l0", "g1", "g0", "f1", "f2", "d", "a", "n", "e", "g2")


def callgrind_one(key: str, gateway_dir: Path, port: int, certs: Path, body: Path, requests: int,
                  headers: dict) -> dict:
    """Envoy under `valgrind --tool=callgrind --cache-sim=yes`: counters zeroed after a warm-up, then
    `requests` requests (h2load over HTTP/1.1, 4 connections, agent-a's certificate; `body` with the
    MCP `headers`), then a dump.
    Returns the events per request and an estimate of cycles (Ir + 10 x L1 misses + 100 x LL misses,
    KCachegrind's rule of thumb). Deterministic up to timers, unlike CPU time on a shared machine."""
    out = WORK / "callgrind" / f"{key}.out"
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f"{key}.out*"):
        old.unlink()
    admin_path = WORK / "logs" / f"callgrind-{key}.admin"
    admin_path.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}", str(harness.envoy_binary()),
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
            r = subprocess.run(["h2load", "--h1", "-n", str(n), "-c", "4", "-d", str(body),
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
        text = ""
        for _ in range(120):
            dumps = sorted(out.parent.glob(f"{key}.out.*"), key=lambda f: f.stat().st_mtime)
            text = dumps[-1].read_text(errors="replace") if dumps else ""
            if re.search(r"^totals:", text, re.M):
                break
            time.sleep(0.5)
        events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
        totals = [int(x) for x in re.search(r"^totals: (.*)$", text, re.M).group(1).split()]
        per = {e: v / requests for e, v in zip(events, totals)}
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
    log("building: toolgate (release), bench servers, test authorizer, the filter's two modules (`make wasm`), "
        "no-op, naive and callout filters")
    sh(["cargo", "build", "--locked", "-q", "--release", "-p", "toolgate", "-p", "toolgate-bench-servers",
        "-p", "toolgate-test-authz"])
    sh(["make", "-s", "wasm"], cwd=REPO, stdout=subprocess.DEVNULL)
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
    ap.add_argument("--callgrind-requests", type=int, default=0 if quick else 1000,
                    help="requests per configuration under callgrind (0: skip that stage)")
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
    build()
    nocel_size = build_without_cel()
    baseline_wasm = None
    if args.baseline:
        baseline_wasm, short = build_baseline(args.baseline)
    # What the baseline filter predates: the lifecycle in the engine (4df76a5 and earlier), list
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
        dirs["n"] = derive(dir_c, "cfg-n", rebased(ports["n"])(edit_noop))
        dirs["s"] = derive(dir_c, "cfg-s", rebased(ports["s"])(edit_naive))
        dirs["c"] = derive(dir_c, "cfg-c", edit_none)
        dirs["c26"] = derive(dir_c, "cfg-c26", rebased(ports["c26"])(edit_none))
        dirs["d"] = derive(dir_d, "cfg-d", edit_none)
        dirs["e"] = derive(dir_c, "cfg-e", rebased(ports["e"])(edit_ext_authz(authz)))
        dirs["g2"] = derive(dir_c, "cfg-g2", rebased(ports["g2"])(edit_ext_authz_grpc(authz_grpc)))
        if baseline_wasm:
            dirs[BASELINE_KEY] = derive(dir_c, f"cfg-{BASELINE_KEY}", rebased(ports[BASELINE_KEY])(edit_baseline(baseline_wasm, args.baseline)))
        for k, pol, extra, opts in (("cn", policies_c, [], ["--list-filtering", "off"]),
                                    ("f1", policies_f1, [], []), ("f2", policies_f2, [], []),
                                    ("g1", policies_g1, [f"{AUTHZ_SERVICE}.{NS}={authz_grpc.address}"], []),
                                    ("l1", policies_l, [], ["--list-filtering", "on"]),
                                    ("l0", policies_l, [], ["--list-filtering", "off"])):
            if k in keys or (k == "g1" and "g0" in keys):
                d, _ = render(k, pol(), certs, upstream, ports[k], BACKENDS, resolve=extra, extra=opts,
                              wasm=WASM_NO_LISTS if k == "cn" else WASM_TOOLGATE)
                dirs[k] = derive(d, f"cfg-{k}", edit_none)
                if k == "g1" and "g0" in keys:
                    dirs["g0"] = derive(d, "cfg-g0", rebased(ports["g0"])(edit_callout(bodies["300B"], ports["g0"])))
        for k in (k for k in keys if k in LIST_KEYS | {"cn"}):
            # The plan says it: listFiltering is written only when off.
            on = plan_of(dirs[k])["settings"].get("listFiltering", True)
            if on != (k == "l1"):
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
            "wasm_toolgate_nocel": nocel_size,
            "wasm_baseline": baseline_wasm.stat().st_size if baseline_wasm else None,
            "plan_c": plan_bytes(dir_c), "plan_d": plan_bytes(dir_d), "plan_x10k": plan_bytes(dir_x),
            "compile_x10k_s": compile_times, "render_x10k_s": render_x_s, "render_d_s": render_d_s,
        }

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
        cg = {}
        if args.callgrind_requests:
            cg = callgrind(keys, dirs, ports, certs, body_paths, args.callgrind_requests)
    finally:
        for e in envoys.values():
            e.stop()
        for p in procs:
            p.stop()

    results = {"callgrind": cg, "info": info, "configs": {k: CONFIGS[k] for k in keys}, "bodies": {b: BODIES[b] for b in body_names},
               "checks": checks, "runs": runs,
               "list": {"tools": len(LIST_TOOLS), "allowed": len(LIST_ALLOWED), "entry_bytes": LIST_ENTRY_BYTES,
                        "response_bytes": list_response.stat().st_size, "request_bytes": len(LIST_REQUEST)}, "micro": micro_results, "sizes": sizes, "plan_loads": plan_loads,
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
