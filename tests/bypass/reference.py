"""The bypass gateway with Envoy's own MCP filter + RBAC in Toolgate's place (bench/mcp_rbac.py, the data
plane of `make bench`'s row (m)): the same `toolgate render` output (listeners, connection-manager
settings, routes, clusters, sample MCP server), only each listener's HTTP filters replaced by
[envoy.filters.http.mcp, envoy.filters.http.rbac, router] enforcing that listener's rule:

  sum   tools/call of get-sum, or the base protocol (base methods, GET, DELETE with Mcp-Session-Id);
        MCP filter max_request_body_size 4096 (Toolgate's --max-body-bytes here)
  path  url_path prefix /mcp/public
  host  :authority api.example.com, any case, any port

Targets (BYPASS_TARGET for pytest tests/bypass/test_bypass.py; scripts/bypass-reference.py runs both
Envoy ones): "toolgate" (the default), "envoy-mcp-rbac" (the MCP filter's defaults), "envoy-mcp-rbac-hardened"
(REJECT_NO_MCP, reject_duplicate_keys, attribute_source VERIFY)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import harness

sys.path.insert(0, str(harness.REPO / "bench"))
import mcp_rbac  # noqa: E402  (bench/mcp_rbac.py)
from corpus import MAX_BODY  # noqa: E402

TARGETS = ("toolgate", "envoy-mcp-rbac", "envoy-mcp-rbac-hardened")
TARGET = os.environ.get("BYPASS_TARGET", "toolgate")  # what tests/bypass/test_bypass.py runs against

PERMISSIONS = {
    "sum": mcp_rbac.any_of([mcp_rbac.tools_call(["get-sum"]), mcp_rbac.base_protocol()]),
    "path": mcp_rbac.path_prefix("/mcp/public"),
    "host": mcp_rbac.host_is("api.example.com"),
}


def swap_filters(hardened: bool):
    """ToolgateGateway.start's before_start hook: rewrite the rendered lds.json, each listener's HTTP
    filters replaced by the MCP filter + RBAC for its rule (PERMISSIONS), nothing else changed."""
    def edit(gw: harness.ToolgateGateway) -> None:
        path = gw.dir / "lds.json"
        lds = json.loads(path.read_text())
        section = {port: name for name, port in gw.ports.items()}
        for listener in lds["resources"]:
            name = section[listener["address"]["socket_address"]["port_value"]]
            for chain in listener["filter_chains"]:
                for f in chain["filters"]:
                    hcm = f["typed_config"]
                    if "http_filters" in hcm:
                        hcm["http_filters"] = mcp_rbac.http_filters(PERMISSIONS[name], None, MAX_BODY, hardened)
        harness.write_json(path, lds)
    return edit


def start(target: str, workdir: Path, certs: Path, wasm: Path, policies: list, listeners: dict,
          server_binary: Path | None = None) -> harness.ToolgateGateway:
    """The bypass gateway for `target`, started (stop it with gw.stop(); gw.server.stop())."""
    if target not in TARGETS:
        raise ValueError(f"unknown bypass target {target!r} (known: {', '.join(TARGETS)})")
    server = harness.McpServer.start("bypass-mcp", workdir, binary=server_binary)
    gw = harness.ToolgateGateway(workdir, certs, wasm, server, listeners=listeners, https_client_ca=False,
                                 render_args=["--max-body-bytes", str(MAX_BODY)], strict=True)
    gw.policies = policies
    try:
        gw.start(before_start=None if target == "toolgate" else swap_filters(target.endswith("-hardened")))
    except BaseException:
        gw.stop()
        server.stop()
        raise
    return gw
