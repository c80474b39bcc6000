"""CEL authorization rules (docs/semantics.md §3, `authorization.type: CEL`) enforced by the real filter in a real
Envoy: each variable, the string functions, argument-level rules, errors as "no match", CEL beside
Inline rules; and expressions outside the contract rejected with InvalidCEL by validate and compile."""

from __future__ import annotations

import pytest

from harness import (assert_allowed, assert_denied, mcp_match, policy, rule, run_toolgate, to_yaml, tools_call_rule,
                     write_json)

HTTP = dict(listener="http", agent=None)


def cel(name: str, expression: str, source: dict | None = None) -> dict:
    r = {"name": name, "authorization": {"type": "CEL", "cel": {"expression": expression}}}
    if source is not None:
        r["source"] = source
    return r


def cel_gateway(gateway, *rules, **kw):
    return gateway(policy("cel", *rules), listeners={"http": "HTTP"}, **kw)


def test_tool_name_equality(gateway):
    gw = cel_gateway(gateway, cel("sum", "request.mcp.tool_name == 'get-sum'"))
    assert_allowed(gw.call("get-sum", **HTTP))
    assert_denied(gw.call("echo", **HTTP))
    assert "allow gateway=default/cel:sum" in gw.decision(gw.call("get-sum", **HTTP))


def test_a_never_matching_rule_denies_every_call_but_base_methods_pass_an_inline_match_rule(gateway):
    gw = cel_gateway(gateway, cel("never", "request.mcp.tool_name == 'no-such-tool'"),
                     rule("base", mcp=mcp_match(base=True)))
    for tool in ("get-sum", "echo", "get-env"):
        assert_denied(gw.call(tool, **HTTP))
    assert_allowed(gw.rpc("tools/list", **HTTP))
    assert_allowed(gw.rpc("ping", **HTTP))
    # CEL rules never apply to other methods: without the Inline rule, tools/list is denied.
    gw.rerender([policy("cel", cel("any-tool", "true"))])
    import harness
    harness.wait_for(lambda: gw.rpc("tools/list", **HTTP).status == 200
                     and gw.rpc("tools/list", **HTTP).json().get("error") is not None, timeout=10, interval=0.1,
                     what="CEL-only policy")
    assert_denied(gw.rpc("tools/list", **HTTP))
    assert_allowed(gw.call("echo", **HTTP))


def test_a_failing_and_a_succeeding_rule(gateway):
    gw = cel_gateway(gateway, cel("fails", "request.mcp.tool_name == 'nope'"),
                     cel("succeeds", "request.mcp.tool_name.startsWith('get-') && request.mcp.tool_name.contains('sum')"))
    r = gw.call("get-sum", **HTTP)
    assert_allowed(r)
    assert "default/cel:succeeds" in gw.decision(r)
    assert_denied(gw.call("get-env", **HTTP))


@pytest.mark.parametrize("expression,allowed,denied", [
    ("request.mcp.tool_name.matches('^get-(sum|env)$')", "get-sum", "echo"),
    ("request.mcp.tool_name == 'echo' || request.mcp.tool_name == 'get-sum'", "echo", "get-env"),
    ("request.mcp.tool_name.endsWith('sum') && request.headers['x-team'] == 'blue'", "get-sum", "echo"),
    ("request.headers['mcp-protocol-version'] == '2025-11-25'", "get-sum", None),
    ("request.url_path == '/mcp'", "get-sum", None),
    ("request.path.startsWith('/mcp?tg=')", "get-sum", None),
    ("request.method == 'POST'", "get-sum", None),
    ("request.time.getFullYear() >= 2025", "get-sum", None),
    ("request.mcp.method == 'tools/call'", "echo", None),
])
def test_functions_and_variables(gateway, expression, allowed, denied):
    gw = cel_gateway(gateway, cel("r", expression))
    headers = {"x-team": "blue", "mcp-protocol-version": "2025-11-25"}
    assert_allowed(gw.call(allowed, headers=headers, **HTTP))
    if denied:
        assert_denied(gw.call(denied, headers=headers, **HTTP))
    # Without the headers the header rules do not match.
    if "headers" in expression:
        assert_denied(gw.call(allowed, **HTTP))


@pytest.mark.parametrize("expression", [
    "request.method == 'GET'",
    "request.path == '/wrong'",
    "request.url_path == '/wrong'",
    "request.time.getFullYear() < 2000",
    "request.headers['mcp-protocol-version'] == '2024-01-01'",
])
def test_rules_that_do_not_hold_deny(gateway, expression):
    gw = cel_gateway(gateway, cel("r", expression))
    assert_denied(gw.call("get-sum", headers={"mcp-protocol-version": "2025-11-25"}, **HTTP))


def test_request_path_without_query(gateway):
    gw = cel_gateway(gateway, cel("exact", "request.path == '/mcp'"))
    # Untagged: the path is exactly /mcp.
    r = gw.rpc("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}, tag=False, **HTTP)
    assert r.status == 200 and r.json()["result"]["content"][0]["text"] == "3", r
    assert r.upstream_requests == 1
    assert_denied(gw.call("get-sum", **HTTP))  # tagged: /mcp?tg=N


def test_host_ends_with_the_listener_port(gateway):
    gw = gateway(policy("cel", cel("port", "request.host.endsWith(':$PORT_http')")), listeners={"http": "HTTP"})
    assert_allowed(gw.call("get-sum", **HTTP))
    gw.rerender([policy("cel", cel("port", "request.host.endsWith(':1')"))])
    import harness
    harness.wait_for(lambda: gw.call("get-sum", **HTTP).executed == [], timeout=10, interval=0.1, what="new plan")
    assert_denied(gw.call("get-sum", **HTTP))


def test_argument_level_rules(gateway):
    gw = cel_gateway(
        gateway,
        cel("small-sums", "request.mcp.tool_name == 'get-sum' && request.mcp.params.arguments.a < 10"
                          " && request.mcp.params.arguments.b in [1, 2, 3]"),
        cel("nested", "request.mcp.params.arguments.opts.mode == 'safe'"
                      " && request.mcp.params.arguments.opts.tags.exists(t, t == 'ok')"),
    )
    assert_allowed(gw.call("get-sum", {"a": 2, "b": 3}, **HTTP))
    assert_denied(gw.call("get-sum", {"a": 20, "b": 3}, **HTTP))
    assert_denied(gw.call("get-sum", {"a": 2, "b": 4}, **HTTP))
    assert_allowed(gw.call("echo", {"message": "hi", "opts": {"mode": "safe", "tags": ["x", "ok"]}}, **HTTP))
    assert_denied(gw.call("echo", {"message": "hi", "opts": {"mode": "safe", "tags": ["x"]}}, **HTTP))
    assert_denied(gw.call("echo", {"message": "hi", "opts": {"mode": "unsafe", "tags": ["ok"]}}, **HTTP))
    # A missing key is an evaluation error: no match, never a crash; the VM keeps serving.
    assert_denied(gw.call("echo", {"message": "hi"}, **HTTP))
    assert_allowed(gw.call("get-sum", {"a": 1, "b": 1}, **HTTP))
    # Argument keys that fold together: a Go server decoding into a struct takes the last (A=20), the
    # rule would have judged the first (a=2). Refused as not MCP (403, id null), never executed.
    twins = gw.call("get-sum", {"a": 2, "A": 20, "b": 3}, **HTTP)
    assert_denied(twins, id=None)
    assert "read as one to case-insensitive JSON decoders" in gw.decision(twins)


def test_source_principal(gateway, certs):
    gw = gateway(policy("cel", cel("only-a", "source.principal == 'spiffe://cluster.local/ns/default/sa/a'")))
    assert_allowed(gw.call("echo", agent="agent-a"))
    assert_denied(gw.call("echo", agent="agent-b"))


def test_errors_at_run_time_are_no_match(gateway):
    gw = cel_gateway(gateway, cel("div", "1 / (size(request.mcp.tool_name) - 7) == 0"),
                     cel("type", "request.mcp.params.arguments.a == 'two'"))
    # size("get-sum") == 7: division by zero; a (a number) compared with a string: no overload.
    assert_denied(gw.call("get-sum", {"a": 2, "b": 3}, **HTTP))
    # The same rules on other input do hold: the denial above came from the errors.
    r = gw.call("echo", {"message": "x"}, **HTTP)  # size("echo") - 7 != 0 -> 1 / -3 == 0 (integer division)
    assert_allowed(r)


def test_inline_and_cel_rules_in_one_policy(gateway):
    gw = cel_gateway(gateway, tools_call_rule("inline-echo", ["echo"]), cel("cel-sum", "request.mcp.tool_name == 'get-sum'"))
    assert_allowed(gw.call("echo", **HTTP))
    assert_allowed(gw.call("get-sum", **HTTP))
    assert_denied(gw.call("get-env", **HTTP))


@pytest.mark.parametrize("expression,says", [
    ("request.unrecognized == 'x'", "request.unrecognized is not a variable"),
    ("source.unknown == 'x'", "source.unknown is not a variable"),
    ("unknown_variable.foo", "unknown_variable.foo is not a variable"),
    ("request.mcp.tool_name == ", "syntax error"),
])
def test_invalid_expressions_are_rejected_by_validate_and_compile(tmp_path, expression, says):
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": "default"},
               "spec": {"gatewayClassName": "toolgate", "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}
    p = tmp_path / "p.yaml"
    p.write_text(to_yaml(gateway, {**policy("bad", cel("r", expression)),
                                   "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                            "name": "gw"}],
                                            "action": "Allow", "rules": [cel("r", expression)]}}))
    v = run_toolgate("validate", "-f", p)
    assert v.returncode == 1, v
    assert "InvalidCEL" in v.stdout + v.stderr and says in v.stdout + v.stderr, v
    out = tmp_path / "out"
    c = run_toolgate("compile", "-f", p, "-o", out)
    assert c.returncode == 0, c
    assert "not accepted: " in c.stderr and "InvalidCEL" in c.stderr and says in c.stderr, c
    import json
    status = json.loads((out / "status.json").read_text())
    condition = status[0]["ancestors"][0]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidCEL"), status
    assert says in condition["message"] and "spec.rules[0].authorization.cel.expression" in condition["message"]
