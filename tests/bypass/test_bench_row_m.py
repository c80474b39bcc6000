"""`make bench`'s row (m) (bench/configs.py edit_mcp_rbac: Envoy's MCP filter + RBAC) enforces row (c)'s
policy: agent-a (the client certificate's SPIFFE URI SAN) may call the 20 tools, nothing else; the
bench's own bodies (300 B, 64 KiB, 1 MiB with `method` and `params.name` last) are allowed, another
caller and another tool are denied. The same checks run against Toolgate's rendering of that policy,
so both rows are shown to decide alike on the benchmark's requests. Cheap: one Envoy each, no load."""

from __future__ import annotations

import json
import sys

import pytest

import harness

sys.path.insert(0, str(harness.REPO / "bench"))
import configs  # noqa: E402  (bench/configs.py)
from workload import BODIES, DENIED_TOOL, PRINCIPAL, TOOL, TOOLS, make_body  # noqa: E402


def policies() -> list[dict]:
    """(c)'s policy (bench/workload.py policies_c) in the harness's Gateway."""
    src = harness.spiffe(PRINCIPAL)
    return [harness.policy("agents", harness.tools_call_rule("r0", TOOLS[:10], source=src),
                           harness.tools_call_rule("r1", TOOLS[10:], source=src))]


def use_row_m(gw: harness.ToolgateGateway) -> None:
    path = gw.dir / "lds.json"
    lds = json.loads(path.read_text())
    configs.edit_mcp_rbac(lds, {})
    harness.write_json(path, lds)


@pytest.mark.parametrize("row", ["c", "m"])
def test_row_enforces_the_policy_of_row_c(row, tmp_path, certs, wasm_path):
    server = harness.McpServer.start("row-" + row, tmp_path)
    gw = harness.ToolgateGateway(tmp_path, certs, wasm_path, server, listeners={"https": "HTTPS"}, https_client_ca=True)
    gw.policies = policies()
    try:
        gw.start(before_start=use_row_m if row == "m" else None)
        ca = certs / "ca.crt"

        def call(agent: str, tool: str, body: bytes) -> tuple[int, list[str]]:
            before = len(server.executed())
            r = harness.mcp_post(gw.url, body, headers={"mcp-method": "tools/call", "mcp-name": tool},
                                 cert=harness.client_cert(certs, agent), ca=ca)
            return r.status, [e.get("tool") for e in server.executed()[before:]]

        for name, size in BODIES.items():
            status, ran = call("agent-a", TOOL, make_body(size, TOOL))
            assert ran == [TOOL], (row, name, status)
        small = make_body(BODIES["300B"], TOOL)
        # Denied: RBAC answers 403; Toolgate a JSON-RPC error 403 (HTTP 200) for a message with an id.
        denied = 403 if row == "m" else 200
        status, ran = call("agent-b", TOOL, small)
        assert ran == [] and status == denied, (row, "agent-b", status)
        status, ran = call("agent-a", DENIED_TOOL, small.replace(TOOL.encode(), DENIED_TOOL.encode()))
        assert ran == [] and status == denied, (row, DENIED_TOOL, status)
    finally:
        gw.stop()
        server.stop()
