"""The Kubernetes objects and the MCP call that tests/k8s and tests/istio share (one home for both
suites; tests/istio puts tests/k8s on its path): the Gateway, the XBackend with its HTTPRoute, an Allow
policy, an ExternalAuth policy, and a tools/call through the gateway. Needs tests/e2e on the path
(harness)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import harness

# The cluster Istio names for the MCP server's Service (`outbound|<port>||<host>`): the backend level's key.
ISTIO_SVC = "outbound|8080||mcp-server.default.svc.cluster.local"


def gateway(port: int = 8080, name: str = "gw") -> str:
    """The Gateway's one HTTP listener (under Istio also its Service's port, the port Envoy listens on)."""
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: default}}
spec:
  gatewayClassName: istio
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
"""


ROUTE_AND_BACKEND = """
apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {name: tools, namespace: default}
spec: {mcp: {serviceName: mcp-server, port: 8080}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {type: PathPrefix, value: /mcp}}], backendRefs: [{name: mcp-server, port: 8080}]}]
"""


def allow_policy(name: str, tools: list[str], target: str = "gw", extra: str = "") -> str:
    """An Allow policy for tools/call of `tools`, on the Gateway `target` (a name starting with "gw") or
    else the XBackend `target`; `extra`: YAML appended to the object."""
    ref = ("{group: gateway.networking.k8s.io, kind: Gateway, name: %s}" % target if target.startswith("gw")
           else "{group: agentic.networking.x-k8s.io, kind: XBackend, name: %s}" % target)
    return f"""
apiVersion: agentic.networking.x-k8s.io/v1alpha1
kind: XAccessPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{ref}]
  action: Allow
  rules:
  - name: tools
    authorization: {{type: Inline, mcp: {{methods: [{{name: tools/call, params: {json.dumps(tools)}}}]}}}}
{extra}"""


def ext_auth(name: str) -> str:
    """An ExternalAuth policy on the Gateway gw, its authorizer the Service authz:9000."""
    return f"""
apiVersion: agentic.networking.x-k8s.io/v1alpha1
kind: XAccessPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  action: ExternalAuth
  externalAuth: {{protocol: GRPC, grpc: {{}}, backendRef: {{name: authz, port: 9000}}}}
"""


def call(port: int, tool: str, mcp: harness.McpServer, headers: dict | None = None, *, method: str = "tools/call",
         tls: tuple[harness.ClientCert | None, Path] | None = None) -> harness.Sent:
    """A tools/call of `tool` (or a `method` without params) through the gateway; `tls=(client cert or None,
    CA file)`: over HTTPS to a listener with a certificate for localhost from that CA."""
    tag = f"tg={time.monotonic_ns()}"
    params = {"name": tool, "arguments": {"a": 2, "b": 3, "message": "m"}} if method == "tools/call" else {}
    body = harness.jsonrpc(method, params, id=7)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **(headers or {})}
    scheme, cert, ca = ("https", *tls) if tls else ("http", None, None)
    try:
        r = harness.request("POST", f"{scheme}://127.0.0.1:{port}/mcp?{tag}", body, headers, cert=cert, ca=ca,
                            server_hostname="localhost" if tls else None, timeout=5)
    except OSError as exc:
        return harness.Sent(None, tag, 7, [], 0, exc)
    executed = [e for e in mcp.executed() if str(e.get("path", "")).endswith(tag)]
    return harness.Sent(r, tag, 7, executed, len(executed))

