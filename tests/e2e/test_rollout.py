"""End-to-end tests of rollout (docs/semantics.md §6a) in a real Envoy: dry-run policies
(`toolgate.dev/dry-run: "true"`) decide a shadow decision that the access log (`shadow=...`) and the
counters `toolgate.shadow.{deny,allow}` report and that never changes what happens to a request; a
Gateway annotated `toolgate.dev/default: deny` denies what is not the MCP base protocol on routes
where no policy applies. Annotations are added and removed on a running gateway (re-render)."""

from __future__ import annotations

import pytest

import harness
from harness import (assert_allowed, assert_denied, external_auth_policy, policy, tools_call_rule, wait_for)

HTTP = {"http": "HTTP"}
ON_HTTP = dict(listener="http", agent=None)
DRY_RUN = {"toolgate.dev/dry-run": "true"}
DEFAULT_DENY = {"toolgate.dev/default": "deny"}
# Two routes: /mcp to the XBackend `tools` (policies target it), /plain to the same server as a plain
# Service (no backend level: no policy applies there unless one targets the Gateway).
TWO_ROUTES = [
    {"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}], "backendRefs": [harness.BACKEND_REF]},
    {"matches": [{"path": {"type": "PathPrefix", "value": "/plain"}}],
     "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/mcp"}}}],
     "backendRefs": [{"name": "mcp-server", "port": 8080}]},
]


def dry(p: dict) -> dict:
    p["metadata"]["annotations"] = dict(DRY_RUN)
    return p


def assert_ran(r: harness.Sent) -> None:
    """Allowed on /plain (whose upstream is not the XBackend's cluster, which assert_allowed counts)."""
    assert r.status == 200 and "result" in r.json() and len(r.executed) == 1, r


def shadow_counters(gw: harness.ToolgateGateway) -> tuple[int, int]:
    c = gw.counters()
    return c.get("toolgate.shadow.deny", 0), c.get("toolgate.shadow.allow", 0)


def test_a_dry_run_policy_that_would_deny_echo_only_reports_it(gateway):
    gw = gateway(dry(policy("strict", tools_call_rule("sum", ["get-sum"]))), listeners=HTTP)
    r = gw.call("echo", **ON_HTTP)
    assert_allowed(r)
    assert r.executed[0]["tool"] == "echo"
    assert gw.decision(r) == "allow (no policy) shadow=deny gateway: tools/call 'echo' matched no rule of default/strict (sum) dry-run=default/strict"
    assert shadow_counters(gw) == (1, 0)
    # What it allows: nothing to report.
    r = gw.call("get-sum", **ON_HTTP)
    assert_allowed(r)
    assert gw.decision(r) == "allow (no policy)"
    assert shadow_counters(gw) == (1, 0)
    # The status says so.
    status = harness.run_toolgate("compile", "-f", gw.workdir / "gateway.yaml", "-f", gw.policy_dir, "-o", gw.workdir / "compiled")
    assert status.returncode == 0, status
    assert "Policy accepted (dry-run: not enforced)" in (gw.workdir / "compiled" / "status.json").read_text()


def test_a_dry_run_policy_beside_an_enforced_one(gateway):
    gw = gateway(policy("open", tools_call_rule("tools", ["echo", "get-sum"])),
                 dry(policy("strict", tools_call_rule("sum", ["get-sum"]), target="backend")),
                 listeners=HTTP)
    r = gw.call("echo", **ON_HTTP)
    assert_allowed(r)
    assert gw.decision(r) == ("allow gateway=default/open:tools backend=- "
                              "shadow=deny backend: tools/call 'echo' matched no rule of default/strict (sum) dry-run=default/strict")
    r = gw.call("get-sum", **ON_HTTP)
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=default/open:tools backend=-"
    # Denied by the enforced policy, and by the shadow: nothing to report.
    r = gw.call("get-env", **ON_HTTP)
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: tools/call 'get-env' matched no rule of default/open (tools)"
    assert shadow_counters(gw) == (1, 0)


def test_a_dry_run_authorizer_is_asked_and_only_its_answer_is_shadowed(gateway, start_authorizer):
    az = start_authorizer(rule={"allow_tools": ["get-sum"], "deny_tools": ["echo"]})
    gw = gateway(dry(external_auth_policy("ea", grpc={})), listeners=HTTP,
                 render_args=[*az.resolve_arg("GRPC")])
    before = len(az.requests())
    r = gw.call("echo", **ON_HTTP)
    assert_allowed(r)
    assert gw.decision(r) == ("allow (no policy) shadow=deny gateway: the authorizer of default/ea denied (HTTP 403) "
                              "dry-run=default/ea")
    assert len(wait_for(lambda: az.requests()[before:] or None, timeout=3, what="authorizer request")) == 1
    r = gw.call("get-sum", **ON_HTTP)
    assert_allowed(r)
    assert gw.decision(r) == "allow (no policy)"
    assert len(az.requests()) == before + 2
    assert shadow_counters(gw) == (1, 0)
    assert gw.counters().get("toolgate.authz.deny") == 1


def default_deny_gateway(gateway, *policies, annotate=True):
    def annotate_gateway(gw):
        gw.gateway_annotations = dict(DEFAULT_DENY)
        gw.render()
    return gateway(*policies, listeners=HTTP, route_rules=TWO_ROUTES, before_start=annotate_gateway if annotate else None)


def test_deny_by_default_on_a_route_without_policy(gateway):
    gw = default_deny_gateway(gateway, policy("tools", tools_call_rule("echo", ["echo"], base=True), target="backend"))
    plain = dict(ON_HTTP, path="/plain")
    # Capability calls are denied with the usual JSON-RPC 403.
    for method, params in (("tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
                           ("prompts/get", {"name": "p"}), ("resources/read", {"uri": "file:///a"})):
        r = gw.rpc(method, params, **plain)
        assert_denied(r)
        assert gw.decision(r) == "deny: no policy (default deny)"
    # The base protocol passes: agents can connect; lists are empty.
    r = gw.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}, **plain)
    assert r.status == 200 and "result" in r.json(), r
    r = gw.rpc("tools/list", **plain)
    assert r.status == 200 and r.json()["result"]["tools"] == [], r
    # Not MCP: a plain 403.
    r = gw.send("POST", "hello", content_type="text/plain", **plain)
    assert_denied(r, id=None)
    assert gw.decision(r) == "deny: no policy (default deny)"
    assert gw.counters().get("toolgate.decision.deny.default_deny") == 4
    # The route with a policy behaves as without the annotation.
    assert_allowed(gw.call("echo", **ON_HTTP))
    r = gw.call("get-sum", **ON_HTTP)
    assert_denied(r)
    assert gw.decision(r) == "deny backend: tools/call 'get-sum' matched no rule of default/tools (echo)"


def test_annotations_added_and_removed_live(gateway):
    strict = policy("strict", tools_call_rule("sum", ["get-sum"], base=True), target="backend")
    gw = default_deny_gateway(gateway, dry(policy("strict", tools_call_rule("sum", ["get-sum"], base=True), target="backend")),
                              annotate=False)
    plain = dict(ON_HTTP, path="/plain")
    # Dry run: echo runs; reported.
    r = gw.call("echo", **ON_HTTP)
    assert_allowed(r)
    assert "shadow=deny" in gw.decision(r)
    assert_ran(gw.call("echo", **plain))
    # The dry-run annotation removed: the same policy is enforced.
    gw.render([strict])
    wait_for(lambda: not gw.call("echo", **ON_HTTP).executed, timeout=10, interval=0.1, what="the policy enforced")
    r = gw.call("echo", **ON_HTTP)
    assert_denied(r)
    assert gw.decision(r) == "deny backend: tools/call 'echo' matched no rule of default/strict (sum)"
    assert_allowed(gw.call("get-sum", **ON_HTTP))
    # The Gateway annotated deny-by-default: the route without policy denies.
    gw.gateway_annotations = dict(DEFAULT_DENY)
    gw.render()
    wait_for(lambda: not gw.call("echo", **plain).executed, timeout=10, interval=0.1, what="deny by default")
    r = gw.call("echo", **plain)
    assert_denied(r)
    assert gw.decision(r) == "deny: no policy (default deny)"
    assert_allowed(gw.call("get-sum", **ON_HTTP))
    # And removed again.
    gw.gateway_annotations = {}
    gw.render()
    wait_for(lambda: gw.call("echo", **plain).executed, timeout=10, interval=0.1, what="default allow again")
    r = gw.call("echo", **plain)
    assert_ran(r)
    assert gw.decision(r) == "-"  # a route without policy is not read: nothing recorded


def test_render_default_deny_applies_to_every_gateway(gateway):
    gw = gateway(listeners=HTTP, render_args=["--default-deny"])
    r = gw.call("echo", **ON_HTTP)
    assert_denied(r)
    assert gw.decision(r) == "deny: no policy (default deny)"
    r = gw.rpc("ping", **ON_HTTP)
    assert r.status == 200, r
