"""Fixtures for the bypass corpus: besides those of tests/conftest.py, one module-wide gateway with
three HTTP listeners, one rule each:

  sum   tools/call get-sum only (+ the base protocol, so responses/ping are meaningful), body limit 4096
  path  PathPrefix /mcp/public (no MCP constraint)
  host  hosts [api.example.com] (no MCP constraint)

BYPASS_TARGET=envoy-mcp-rbac (or envoy-mcp-rbac-hardened) runs the same corpus against Envoy's own MCP
filter + RBAC enforcing those rules instead of Toolgate (tests/bypass/reference.py; the published
table: scripts/bypass-reference.py).
"""
import pytest

import harness
import reference

MAX_BODY = reference.MAX_BODY
LISTENERS = {"sum": "HTTP", "path": "HTTP", "host": "HTTP"}
TARGET = reference.TARGET


def bypass_policies() -> list[dict]:
    return [
        harness.policy("sum", harness.tools_call_rule("get-sum-only", ["get-sum"], base=True), section="sum"),
        harness.policy("path", harness.rule("public-only", paths=[{"type": "PathPrefix", "value": "/mcp/public"}]),
                       section="path"),
        harness.policy("host", harness.rule("api-host-only", hosts=["api.example.com"]), section="host"),
    ]


@pytest.fixture(scope="module")
def bypass_gw(tmp_path_factory, certs, wasm_path):
    """One Envoy + sample MCP server for the whole corpus (starting one per case would cost minutes)."""
    try:
        harness.toolgate_binary()
        harness.mcp_server_binary()
    except harness.HarnessError as exc:
        pytest.fail(str(exc))
    workdir = tmp_path_factory.mktemp("bypass")
    gw = reference.start(TARGET, workdir, certs, wasm_path, bypass_policies(), LISTENERS)
    try:
        yield gw
    finally:
        gw.stop()
        gw.server.stop()
