#!/usr/bin/env python3
"""`make demo`: render envoy-configs/demo/, run Envoy with the Toolgate filter in front of the sample
MCP server, make calls as two agents (mTLS client certificates with SPIFFE IDs) and print one line per
call: ALLOW or DENY, and why (from Envoy's access log, where the filter records its decision), and
whether the MCP server executed it. Stops everything it started."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import harness  # noqa: E402  (the same process helpers the end-to-end tests use)

DEMO = REPO / "envoy-configs" / "demo"
WORK = REPO / ".work" / "demo"
WASM = REPO / "target" / "wasm32-wasip1" / "release" / "toolgate_filter.wasm"
TOOLGATE = REPO / "target" / "debug" / "toolgate"
PORT = 18443


def tls_objects(certs: Path) -> str:
    """The Secret (server certificate) and ConfigMap (agents' CA) the demo Gateway refers to."""
    b64 = lambda p: base64.b64encode((certs / p).read_bytes()).decode()  # noqa: E731
    ca = (certs / "ca.crt").read_text()
    return (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: mcp-gateway-cert, namespace: default}\n"
        f"type: kubernetes.io/tls\ndata:\n  tls.crt: {b64('server.crt')}\n  tls.key: {b64('server.key')}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: agents-ca, namespace: default}\ndata:\n  ca.crt: |\n"
        + "".join(f"    {line}\n" for line in ca.splitlines())
    )


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    certs = harness.gen_certs(WORK / "certs")
    (WORK / "tls-objects.yaml").write_text(tls_objects(certs))
    access_log = WORK / "access.log"
    access_log.unlink(missing_ok=True)

    server = harness.McpServer.start("tools", WORK)
    envoy = None
    try:
        rendered = DEMO / "rendered"
        render = [
            str(TOOLGATE), "render", "-f", str(DEMO / "policies"), "-f", str(WORK / "tls-objects.yaml"),
            "--wasm", str(WASM), "-o", str(rendered), "--bind", "127.0.0.1",
            "--resolve", f"mcp-server.default={server.address}", "--access-log", str(access_log),
        ]
        print("$ toolgate render -f envoy-configs/demo/policies ... -o envoy-configs/demo/rendered")
        subprocess.run(render, check=True)
        envoy = harness.Envoy.start(rendered / "default.mcp-gateway" / "envoy.json", WORK, "envoy", listeners=[PORT])
        url = f"https://localhost:{PORT}/mcp"
        ca = certs / "ca.crt"
        agents = {"agent-a": harness.client_cert(certs, "agent-a"), "agent-b": harness.client_cert(certs, "agent-b")}

        print(f"\nEnvoy {envoy_version()} with {WASM.relative_to(REPO)} in front of the sample MCP server.")
        print("Gateway level: default/agents (agent-a: any tool; agent-b: get-sum only; both: MCP base protocol)")
        print("Backend level (XBackend tools): default/tools-no-env (get-sum, echo, tools/list; never get-env)\n")
        print(f"{'caller':8}  {'request':34}  {'decision':8}  {'executed':8}  why")

        def show(caller: str, label: str, message, *, headers=None, http_method="POST"):
            server.clear_log()
            lines_before = len(harness.read_access_log(access_log))
            cert = agents.get(caller)
            if http_method == "POST":
                resp = harness.mcp_post(url, message, headers=headers, cert=cert, ca=ca)
            else:
                resp = harness.request(http_method, url, headers=headers, cert=cert, ca=ca)
            decision = "DENY" if denied(resp) else "ALLOW"
            why = harness.wait_for(lambda: new_decision(access_log, lines_before), timeout=5, what="access log line")
            executed = "yes" if server.executed() else "no"
            print(f"{caller:8}  {label:34}  {decision:8}  {executed:8}  {why}")

        a = lambda m, params=None: harness.jsonrpc(m, params)  # noqa: E731
        show("agent-a", "initialize", a("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                        "clientInfo": {"name": "demo", "version": "1"}}))
        show("agent-a", "tools/list", a("tools/list"))
        show("agent-a", "tools/call get-sum", a("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}))
        show("agent-a", "tools/call echo", a("tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        show("agent-a", "tools/call get-env", a("tools/call", {"name": "get-env", "arguments": {"name": "HOME"}}))
        show("agent-b", "tools/call get-sum", a("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 1}}))
        show("agent-b", "tools/call echo", a("tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        show("agent-b", "prompts/get greeting", a("prompts/get", {"name": "greeting"}))
        show("agent-a", "batch [get-sum, get-env]",
             [a("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}),
              a("tools/call", {"name": "get-env", "arguments": {"name": "HOME"}})])
        show("agent-a", 'tools/call "get\\u002denv" (escaped)',
             b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get\\u002denv"}}')
        show("agent-a", "duplicate \"name\" key", b'{"jsonrpc":"2.0","id":10,"method":"tools/call",'
             b'"params":{"name":"get-sum","name":"get-env"}}')
        show("agent-b", "GET (SSE stream)", None, http_method="GET")
        rejected = harness.handshake_rejected(url, ca=ca)
        print(f"{'no cert':8}  {'tools/call get-sum':34}  {'DENY' if rejected else 'ALLOW':8}  {'no':8}  "
              "TLS handshake refused: the listener requires a client certificate")

        stats = envoy.stats(r"^(wasmcustom\.)?toolgate\.")
        counters = ", ".join(f"{k.removeprefix('wasmcustom.')}={v}" for k, v in sorted(stats.items()) if v)
        print(f"\nEnvoy counters: {counters}")
        print(f"Access log: {access_log.relative_to(REPO)}; rendered config: {rendered.relative_to(REPO)}/")
        return 0
    finally:
        if envoy is not None:
            envoy.stop()
        server.stop()


def denied(resp: harness.Response) -> bool:
    if resp.status == 403:
        return True
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error", {}).get("code") == 403


def new_decision(access_log: Path, lines_before: int) -> str | None:
    lines = harness.read_access_log(access_log)
    if len(lines) <= lines_before:
        return None
    line = lines[-1]
    marker = 'toolgate="'
    return line[line.index(marker) + len(marker):].rstrip('"') if marker in line else line


def envoy_version() -> str:
    out = subprocess.run([str(harness.envoy_binary()), "--version"], capture_output=True, text=True).stdout
    found = re.search(r"/(\d+\.\d+\.\d+)/", out)
    return found.group(1) if found else out.strip()


if __name__ == "__main__":
    sys.exit(main())
