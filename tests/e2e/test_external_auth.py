"""End-to-end tests of `action: ExternalAuth` (docs/semantics.md §3): the real filter in a real Envoy calls a real
authorizer (tests/authz-servers, gRPC and HTTP ext_authz) before the MCP server. Each test asserts the
HTTP answer, its body, the MCP server's execution log and the authorizer's request log."""

from __future__ import annotations

import json

import pytest

import harness
from harness import (assert_allowed, assert_denied, external_auth_policy, free_port, policy, rule, sa,
                     tools_call_rule, wait_for)

BOTH = {"https": "HTTPS", "http": "HTTP"}
HTTP = dict(listener="http", agent=None)
SA_A = "spiffe://cluster.local/ns/default/sa/a"
SA_B = "spiffe://cluster.local/ns/default/sa/b"
CALLERS = [("https", "agent-a", SA_A), ("https", "agent-b", SA_B), ("http", None, None)]
# Short, so the timeout case stays fast; the authorizer answers in milliseconds otherwise.
TIMEOUT = ["--authz-timeout", "300ms"]


def ea_gateway(gateway, az, *policies, protocol="GRPC", render_args=(), **kw) -> harness.ToolgateGateway:
    return gateway(*policies, render_args=[*az.resolve_arg(protocol), *TIMEOUT, *render_args], **kw)


def grpc_ea(name="ea", *rules, **kw) -> dict:
    kw.setdefault("grpc", {})
    return external_auth_policy(name, *rules, **kw)


def new_requests(az: harness.Authorizer, before: int) -> list[dict]:
    return az.requests()[before:]


def one_call(az: harness.Authorizer, before: int) -> dict:
    """The single authorizer request made since the log had `before` entries."""
    reqs = wait_for(lambda: new_requests(az, before) or None, timeout=3, what="authorizer request")
    assert len(reqs) == 1, reqs
    return reqs[0]


def authz_cluster(gw: harness.ToolgateGateway) -> dict:
    cds = json.loads((gw.dir / "cds.json").read_text())
    found = [c for c in cds["resources"] if c["name"].startswith("authz/")]
    assert len(found) == 1, [c["name"] for c in cds["resources"]]
    return found[0]


# --------------------------------------------------------------------------------------------------
# gRPC at the gateway level


def test_gateway_grpc_authorizer_decides_by_tool_for_every_caller(gateway, start_authorizer):
    az = start_authorizer(rule={"allow_tools": ["get-sum", "get-env"], "deny_tools": ["echo"]})
    gw = ea_gateway(gateway, az, grpc_ea(), listeners=BOTH)
    # render: the authorizer cluster speaks HTTP/2 (gRPC) to the resolved address.
    cluster = authz_cluster(gw)
    assert cluster["name"] == "authz/default/authz/9000"
    opts = cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    assert "http2_protocol_options" in opts["explicit_http_config"]
    host, port = az.grpc_address.rsplit(":", 1)
    addr = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    assert (addr["address"], addr["port_value"]) == (host, int(port))

    for listener, agent, principal in CALLERS:
        for tool, allowed in (("get-sum", True), ("get-env", True), ("echo", False)):
            before = len(az.requests())
            r = gw.call(tool, listener=listener, agent=agent)
            if allowed:
                assert_allowed(r)
                assert r.executed[0]["tool"] == tool
                assert gw.decision(r) == "allow gateway=- backend=- authorized-by=default/ea"
            else:
                assert_denied(r)
                assert "authorizer" not in r.response.text
                assert gw.decision(r) == "deny gateway: the authorizer of default/ea denied (HTTP 403)"
            call = one_call(az, before)
            assert call["kind"] == "grpc"
            assert (call["principal"] or None) == principal, call
            assert call["protocol"] == "HTTP/1.1", call  # request.protocol, as Envoy's ext_authz sends it
            assert call["decision"] == ("allow" if allowed else "deny"), call
            mcp = call["mcp_proxy"]
            assert mcp["jsonrpc"] == "2.0" and mcp["id"] == r.id and mcp["method"] == "tools/call", call
            assert mcp["params"]["name"] == tool, call
            want_args = {"a": 2, "b": 3} if tool == "get-sum" else {"message": "hi"} if tool == "echo" else {}
            assert mcp["params"]["arguments"] == want_args, call
            assert call["method"] == "POST" and call["path"] == f"/mcp?{r.tag}", call
    c = gw.counters()
    assert c.get("toolgate.authz.allow") == 6 and c.get("toolgate.authz.deny") == 3, c


# --------------------------------------------------------------------------------------------------
# Backend level, beside an Allow policy


def test_backend_authorizer_called_only_for_its_rules(gateway, start_authorizer):
    az = start_authorizer(rule={"deny_tools": ["echo"]})
    allow = policy("tools", tools_call_rule("a", ["echo", "get-sum"], source=sa("a")),
                   tools_call_rule("b", ["echo", "get-sum", "get-env"], source=sa("b")), target="backend")
    ea = grpc_ea("ea", rule("b-only", sa("b")), target="backend")
    gw = ea_gateway(gateway, az, allow, ea)

    def send(agent, tool):
        before = len(az.requests())
        return gw.call(tool, agent=agent), before

    r, before = send("agent-a", "echo")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=- backend=default/tools:a"
    r, before2 = send("agent-a", "get-env")
    assert_denied(r)
    assert gw.decision(r) == "deny backend: tools/call 'get-env' matched no rule of default/tools (a, b)"
    assert len(az.requests()) == 0  # a matches no rule of the ExternalAuth policy: never asked

    for tool in ("get-sum", "get-env"):
        r, before = send("agent-b", tool)
        assert_allowed(r)
        assert gw.decision(r) == "allow gateway=- backend=default/tools:b authorized-by=default/ea"
        call = one_call(az, before)
        assert call["principal"] == SA_B and call["mcp_proxy"]["params"]["name"] == tool
    r, before = send("agent-b", "echo")
    assert_denied(r)
    assert gw.decision(r) == "deny backend: the authorizer of default/ea denied (HTTP 403)"
    assert one_call(az, before)["decision"] == "deny"


def test_authorizer_allow_does_not_override_allow_policies(gateway, start_authorizer):
    az = start_authorizer()  # allows everything
    gw = ea_gateway(gateway, az, grpc_ea(), policy("sum", tools_call_rule("sum", ["get-sum"])))
    r = gw.call("echo")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: tools/call 'echo' matched no rule of default/sum (sum)"
    assert one_call(az, 0)["decision"] == "allow"  # the authorizer runs first, and allowed
    r = gw.call("get-sum")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=default/sum:sum backend=- authorized-by=default/ea"
    assert len(az.requests()) == 2


def test_gateway_denial_skips_the_backend_authorizer(gateway, start_authorizer):
    az = start_authorizer()
    gw = ea_gateway(gateway, az, policy("sum", tools_call_rule("sum", ["get-sum"])),
                    grpc_ea("ea", target="backend"))
    r = gw.call("echo")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: tools/call 'echo' matched no rule of default/sum (sum)"
    assert az.requests() == []
    r = gw.call("get-sum")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=default/sum:sum backend=- authorized-by=default/ea"
    assert len(az.requests()) == 1


def test_batch_calls_the_authorizer_once_per_element(gateway, start_authorizer):
    az = start_authorizer(rule={"deny_tools": ["echo"]})
    gw = ea_gateway(gateway, az, grpc_ea())
    calls = [harness.jsonrpc("tools/call", {"name": t, "arguments": a})
             for t, a in (("get-sum", {"a": 1, "b": 2}), ("get-env", {"name": "HOME"}), ("get-sum", {"a": 3, "b": 4}))]
    r = gw.post(calls)
    assert r.status == 200, r
    assert [m.get("result") is not None for m in r.json()] == [True, True, True], r
    assert [e["tool"] for e in r.executed] == ["get-sum", "get-env", "get-sum"]
    assert r.upstream_requests == 1
    reqs = az.requests()
    assert [q["mcp_proxy"]["id"] for q in reqs] == [m["id"] for m in calls], reqs
    assert [q["mcp_proxy"]["params"]["name"] for q in reqs] == ["get-sum", "get-env", "get-sum"]

    az.clear_log()
    bad = [calls[0], harness.jsonrpc("tools/call", {"name": "echo", "arguments": {"message": "x"}}), calls[2]]
    r = gw.post(bad)
    assert_denied(r, id=None)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea denied (HTTP 403) (batch element 1)"
    names = [q["mcp_proxy"]["params"]["name"] for q in az.requests()]
    assert names[:2] == ["get-sum", "echo"], names  # stops at the denial (or later elements are moot)


# --------------------------------------------------------------------------------------------------
# Failures: every one denies, is counted, and the next request is served normally


@pytest.mark.parametrize("mode, stat, why", [
    ({"delay_ms": 1200}, "timeout", "did not answer in time"),
    ({"garbage": True}, "malformed", "answered something unreadable"),
    # Headers and half a message, then the connection drops: a reset stream (gRPC status 14).
    ({"close_mid_reply": True}, "unavailable", "could not be reached"),
])
def test_authorizer_failures_deny(gateway, start_authorizer, mode, stat, why):
    az = start_authorizer(rule=mode)
    gw = ea_gateway(gateway, az, grpc_ea())
    before = gw.counters()
    r = gw.call("get-sum")
    assert_denied(r)
    decision = gw.decision(r)
    after = gw.counters()
    assert decision == f"deny gateway: the authorizer of default/ea {why}", decision
    assert after.get(f"toolgate.authz.{stat}", 0) == before.get(f"toolgate.authz.{stat}", 0) + 1, (before, after)
    assert after.get("toolgate.authz.allow", 0) == 0
    assert len(az.requests()) == 1 and az.requests()[0]["mode"] is not None
    az.set_rule()
    r = gw.call("get-sum")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=- backend=- authorized-by=default/ea"
    assert gw.counters().get("toolgate.authz.allow") == 1


def test_authorizer_down_denies_then_recovers(gateway, start_authorizer):
    az = start_authorizer()
    closed = free_port()  # nothing listens there
    gw = gateway(grpc_ea(), render_args=["--resolve", f"authz.default=127.0.0.1:{closed}", *TIMEOUT])
    r = gw.call("get-sum")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea could not be reached"
    assert gw.counters().get("toolgate.authz.unavailable") == 1
    # Point the Service at the running authorizer: Envoy picks the new cds.json up.
    gw.render(extra_args=az.resolve_arg())

    def served():
        s = gw.call("get-sum")
        return s if s.status == 200 and s.executed else None
    r = wait_for(served, timeout=10, interval=0.2, what="request served after the authorizer came back")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=- backend=- authorized-by=default/ea"
    assert az.requests()[-1]["mcp_proxy"]["id"] == r.id
    # And it going away again is a denial, not a hang.
    az.stop()
    r = gw.call("get-sum")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea could not be reached"


# --------------------------------------------------------------------------------------------------
# What the authorizer's answer does to the caller and the upstream, and what it is sent


def test_grpc_answers_and_sent_headers(gateway, start_authorizer):
    az = start_authorizer()
    gw = ea_gateway(gateway, az, grpc_ea(grpc={"allowedHeaders": ["x-a"]}))

    # A 401 challenge reaches the caller unchanged.
    az.set_rule(deny_tools=["echo"], deny_status=401, deny_headers={"www-authenticate": 'Bearer realm="mcp"'},
                deny_body="log in first")
    r = gw.call("echo")
    assert r.status == 401, r
    assert r.response.headers.get("www-authenticate") == 'Bearer realm="mcp"', r.response.headers
    assert r.response.body == b"log in first"
    assert r.executed == [] and r.upstream_requests == 0
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea denied (HTTP 401)"

    # A 403 of its own does not leak to a JSON-RPC request: Toolgate's denial instead.
    az.set_rule(deny_tools=["echo"], deny_body="SECRET-DETAIL", deny_headers={"x-authz-reason": "SECRET"})
    r = gw.call("echo")
    assert_denied(r)
    assert b"SECRET" not in r.response.body and "x-authz-reason" not in r.response.headers

    # ok_response headers reach the upstream request.
    az.set_rule(ok_headers={"x-user": "alice"})
    r = gw.call("get-sum")
    assert_allowed(r)
    assert r.executed[0]["headers"].get("x-user") == "alice", r.executed[0]["headers"]
    # Without `append` the option's append_action applies, whose default (APPEND_IF_EXISTS_OR_ADD)
    # appends, as in Envoy's ext_authz: a client's own value stays in front.
    r = gw.call("get-sum", headers={"x-user": "mallory"})
    assert_allowed(r)
    assert r.executed[0]["headers"].get("x-user") == "mallory, alice", r.executed[0]["headers"]

    # Only allowedHeaders are sent to the authorizer.
    az.clear_log()
    r = gw.call("get-sum", headers={"x-a": "one", "x-secret": "hunter2"})
    assert_allowed(r)
    call = one_call(az, 0)
    assert call["headers"].get("x-a") == "one", call["headers"]
    assert "x-secret" not in call["headers"] and "hunter2" not in json.dumps(call), call
    assert r.executed[0]["headers"].get("x-secret") == "hunter2"  # the upstream still gets it


# --------------------------------------------------------------------------------------------------
# HTTP authorizers


def test_http_authorizer(gateway, start_authorizer):
    az = start_authorizer(rule={"allow_tools": ["get-sum", "get-env"], "deny_tools": ["echo"],
                                "ok_headers": {"x-user": "alice", "x-other": "dropped"}})
    ea = external_auth_policy("ea", protocol="HTTP", forward_body=65536,
                              http={"path": "/check", "allowedHeaders": ["x-a"], "allowedResponseHeaders": ["x-user"]})
    gw = ea_gateway(gateway, az, ea, protocol="HTTP", listeners=BOTH)
    cluster = authz_cluster(gw)
    assert "typed_extension_protocol_options" not in cluster  # HTTP/1.1
    for listener, agent, principal in CALLERS:
        for tool, allowed in (("get-sum", True), ("get-env", True), ("echo", False)):
            before = len(az.requests())
            r = gw.call(tool, listener=listener, agent=agent,
                        headers={"x-a": "one", "x-secret": "no", "x-toolgate-principal": "spiffe://evil/sa/x"})
            call = one_call(az, before)
            assert call["kind"] == "http" and call["method"] == "POST", call
            assert call["path"] == f"/check/mcp?{r.tag}", call
            assert call["tool"] == tool and json.loads(call["body"])["id"] == r.id, call
            h = call["headers"]
            assert h.get("x-a") == "one" and "x-secret" not in h, h
            assert h.get("x-toolgate-principal") == principal, h  # the caller's own copy is dropped
            if allowed:
                assert_allowed(r)
                up = r.executed[0]["headers"]
                assert up.get("x-user") == "alice" and "x-other" not in up, up
                assert gw.decision(r) == "allow gateway=- backend=- authorized-by=default/ea"
            else:
                assert_denied(r)
                assert gw.decision(r) == "deny gateway: the authorizer of default/ea denied (HTTP 403)"

    # The HTTP authorizer's 401 is passed through too.
    az.set_rule(deny_tools=["echo"], deny_status=401, deny_headers={"www-authenticate": 'Bearer realm="mcp"'},
                deny_body="log in first")
    r = gw.call("echo")
    assert r.status == 401 and r.response.body == b"log in first", r
    assert r.response.headers.get("www-authenticate") == 'Bearer realm="mcp"'
    assert r.executed == []


def test_http_authorizer_failures(gateway, start_authorizer):
    az = start_authorizer(rule={"garbage": True})
    ea = external_auth_policy("ea", protocol="HTTP", forward_body=65536, http={})
    gw = ea_gateway(gateway, az, ea, protocol="HTTP")
    r = gw.call("get-sum")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea answered something unreadable"
    az.set_rule(delay_ms=1200)
    r = gw.call("get-sum")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea did not answer in time"
    az.set_rule(close_mid_reply=True)
    r = gw.call("get-sum")
    assert_denied(r)
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea could not be reached"
    c = gw.counters()
    assert (c.get("toolgate.authz.malformed"), c.get("toolgate.authz.timeout"), c.get("toolgate.authz.unavailable")) \
        == (1, 1, 1), c
    az.set_rule()
    assert_allowed(gw.call("get-sum"))
    assert len(az.requests()) == 4
    # Down: Envoy answers the call with its own 503, which is a failure, not the authorizer's denial.
    az.stop()
    r = gw.call("get-sum")
    assert_denied(r)
    assert b"upstream" not in r.response.body
    assert gw.decision(r) == "deny gateway: the authorizer of default/ea could not be reached"


# --------------------------------------------------------------------------------------------------
# At most one ExternalAuth policy per target


def test_only_the_senior_external_auth_policy_applies(gateway, start_authorizer):
    senior_az = start_authorizer("senior")
    junior_az = start_authorizer("junior")
    senior = grpc_ea("senior", creation="2026-01-01T00:00:00Z")
    junior = grpc_ea("junior", service="authz2", creation="2026-02-01T00:00:00Z")
    gw = gateway(junior, senior, strict=False,
                 render_args=[*senior_az.resolve_arg(), *junior_az.resolve_arg(service="authz2"), *TIMEOUT])
    stderr = gw.last_render.stderr
    assert "LimitPerTargetExceeded" in stderr and "default/junior" in stderr, stderr
    assert "default/senior" not in stderr.replace("default/junior", ""), stderr
    r = gw.call("get-sum")
    assert_allowed(r)
    assert gw.decision(r) == "allow gateway=- backend=- authorized-by=default/senior"
    assert len(senior_az.requests()) == 1 and junior_az.requests() == []
    # The junior's authorizer gets no cluster either.
    names = [c["name"] for c in json.loads((gw.dir / "cds.json").read_text())["resources"]]
    assert "authz/default/authz/9000" in names and "authz/default/authz2/9000" not in names, names
