"""Fixtures for the bypass corpus: besides those of tests/conftest.py, one module-wide gateway with
three HTTP listeners, one rule each:

  sum   tools/call get-sum only (+ the base protocol, so responses/ping are meaningful), body limit 4096
  path  PathPrefix /mcp/public (no MCP constraint)
  host  hosts [api.example.com] (no MCP constraint)
"""
import pytest

import harness

MAX_BODY = 4096
LISTENERS = {"sum": "HTTP", "path": "HTTP", "host": "HTTP"}


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
    server = harness.McpServer.start("bypass-mcp", workdir)
    gw = harness.ToolgateGateway(workdir, certs, wasm_path, server, listeners=LISTENERS, https_client_ca=False,
                                 render_args=["--max-body-bytes", str(MAX_BODY)], strict=True)
    gw.policies = bypass_policies()
    with harness.serving(gw):
        yield gw
