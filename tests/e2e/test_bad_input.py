"""Requests the reader must not be fooled by (docs/semantics.md §4): each is denied (or refused) as docs/semantics.md §4 and §5 say,
and the MCP server never executes it; a denied request does not even reach the server."""

from __future__ import annotations

import gzip
import json

import pytest

from harness import assert_allowed, assert_denied, mcp_match, policy, rule, tools_call_rule, wait_for

HTTP = dict(listener="http", agent=None)


@pytest.fixture
def sum_only(gateway):
    """Plain HTTP listener; gateway level allows tools/call get-sum (any caller), nothing else."""
    return gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"})


def raw(s: str) -> bytes:
    return s.encode()


SUM = '"params":{"name":"get-sum","arguments":{"a":2,"b":3}}'


def test_duplicate_method_key(sum_only):
    gw = sum_only
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call",' + SUM + '}'), **HTTP),
                  id=None)
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":1,"method":"tools/call",' + SUM + ',"method":"prompts/get"}'),
                          **HTTP), id=None)


def test_duplicate_params_name(sum_only):
    gw = sum_only
    # The reader would see get-sum first; a last-wins server would run get-env.
    body = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-sum","name":"get-env","arguments":{"name":"HOME"}}}'
    assert_denied(gw.post(raw(body), **HTTP), id=None)
    nested = '{"jsonrpc":"2.0","id":3,"method":"tools/call",' + SUM[:-1] + ',"x":{"k":1,"k":2}}}'
    assert_denied(gw.post(raw(nested), **HTTP), id=None)  # duplicate key at any depth


def test_escaped_tool_name(sum_only):
    gw = sum_only
    escaped = '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get\\u002dsum","arguments":{"a":2,"b":3}}}'
    r = gw.post(raw(escaped), **HTTP)
    assert_allowed(r)
    assert r.json()["result"]["content"][0]["text"] == "5"
    assert r.executed[0]["tool"] == "get-sum"
    assert_denied(gw.post(raw(escaped.replace("get\\u002dsum", "\\u0065cho").replace('"id":4', '"id":5')), **HTTP),
                  id=5)
    # Escaped method name too.
    r = gw.post(raw('{"jsonrpc":"2.0","id":6,"method":"tools\\/call","params":{"name":"get\\u002dsum","arguments":{"a":1,"b":1}}}'),
                **HTTP)
    assert_allowed(r)

    # With an echo-only rule, the same escaped get-sum is denied.
    gw.rerender([policy("sum", tools_call_rule("echo", ["echo"]))])
    wait_for(lambda: gw.call("echo", **HTTP).status == 200 and gw.call("get-sum", **HTTP).executed == [],
             timeout=10, interval=0.1, what="echo-only policy")
    assert_denied(gw.post(raw(escaped), **HTTP), id=4)


def test_batch_with_one_denied_element(sum_only):
    gw = sum_only
    s = {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}
    e = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}
    assert_denied(gw.post([s, e], **HTTP), id=None)  # HTTP 403, id null, neither element executed
    assert_denied(gw.post([e, s], **HTTP), id=None)
    r = gw.post([s, dict(s, id=12)], **HTTP)
    assert_allowed(r, executed=2)
    assert [m["id"] for m in r.json()] == [10, 12]
    assert_denied(gw.post(raw("[]"), **HTTP), id=None)  # empty batch is not MCP


def test_encoded_body(sum_only):
    gw = sum_only
    body = gzip.compress(json.dumps({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
                                     "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}).encode())
    assert_denied(gw.post(body, headers={"content-encoding": "gzip"}, **HTTP), id=None)
    plain = raw('{"jsonrpc":"2.0","id":21,"method":"tools/call",' + SUM + '}')
    assert_denied(gw.post(plain, headers={"content-encoding": "br"}, **HTTP), id=None)
    assert_allowed(gw.post(plain, headers={"content-encoding": "identity"}, **HTTP))


def nested(depth: int) -> bytes:
    """A tools/call get-sum whose body nests `depth` levels deep (top-level object = 1)."""
    inner = "[" * (depth - 2) + "]" * (depth - 2)  # top-level object = 1, params = 2
    return raw('{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":2,"b":3},"x":'
               + inner + '}}')


def test_deep_nesting(sum_only):
    gw = sum_only
    assert_denied(gw.post(nested(100), **HTTP), id=None)
    assert_denied(gw.post(nested(65), **HTTP), id=None)
    assert_allowed(gw.post(nested(64), **HTTP))


def test_body_over_the_limit(sum_only):
    gw = sum_only
    pad = "x" * (2 * 1024 * 1024)
    r = gw.post(raw('{"jsonrpc":"2.0","id":40,"method":"tools/call",' + SUM[:-1] + ',"pad":"' + pad + '"}}'), **HTTP)
    assert r.status == 413, r
    assert r.executed == [] and r.upstream_requests == 0, r
    # Just under 1 MiB is read and decided like any other body.
    pad = "x" * (1024 * 1024 - 200)
    r = gw.post(raw('{"jsonrpc":"2.0","id":41,"method":"tools/call",' + SUM[:-1] + ',"pad":"' + pad + '"}}'), **HTTP)
    assert_allowed(r)
    r = gw.post(raw('{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"'
                    + pad + '"}}}'), **HTTP)
    assert_denied(r, id=42)


def test_not_json(sum_only):
    gw = sum_only
    assert_denied(gw.post(raw("tools/call get-sum"), **HTTP), id=None)
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":50,"method":"tools/call",' + SUM), **HTTP), id=None)  # truncated
    assert_denied(gw.post(b'{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{"name":"get-sum\xff"}}', **HTTP),
                  id=None)  # invalid UTF-8
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":52,"method":"tools/call","params":{"name":"get-sum\\ud800"}}'),
                          **HTTP), id=None)  # lone surrogate
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":53,"method":7,' + SUM + '}'), **HTTP), id=None)  # method not a string
    # A JSON-RPC body sent with another content type is classified by HTTP attributes only.
    assert_denied(gw.post(raw('{"jsonrpc":"2.0","id":54,"method":"tools/call",' + SUM + '}'),
                          content_type="text/plain", **HTTP), id=None)
    # Content type parameters and case are fine.
    assert_allowed(gw.post(raw('{"jsonrpc":"2.0","id":55,"method":"tools/call",' + SUM + '}'),
                           content_type="Application/JSON; charset=utf-8", **HTTP))


def assert_mismatch(sent, header: str, id):
    """MCP 2026-07-28's HeaderMismatch: HTTP 400, -32020, never executed nor sent upstream."""
    assert sent.status == 400, sent
    assert sent.json() == {"jsonrpc": "2.0", "id": id, "error": {
        "code": -32020, "message": f"Header mismatch: the {header} header does not match the body"}}, sent
    assert sent.executed == [] and sent.upstream_requests == 0, sent


def test_mcp_method_and_name_headers(sum_only):
    gw = sum_only
    assert_allowed(gw.call("get-sum", headers={"mcp-method": "tools/call", "mcp-name": "get-sum"}, **HTTP))
    r = gw.call("get-sum", headers={"mcp-method": "tools/list"}, **HTTP)
    assert_mismatch(r, "Mcp-Method", r.id)
    r = gw.call("get-sum", headers={"mcp-name": "echo"}, **HTTP)
    assert_mismatch(r, "Mcp-Name", r.id)
    r = gw.call("get-sum", headers={"Mcp-Method": "tools/call", "Mcp-Name": "get-env"}, **HTTP)
    assert_mismatch(r, "Mcp-Name", r.id)
    r = gw.rpc("ping", headers={"mcp-name": "get-sum"}, **HTTP)  # Mcp-Name on a message with none
    assert_mismatch(r, "Mcp-Name", r.id)
    # The header check comes before any policy: echo is denied by policy, but the answer is the 400.
    r = gw.call("echo", headers={"mcp-method": "tools/list"}, **HTTP)
    assert_mismatch(r, "Mcp-Method", r.id)
    s = {"jsonrpc": "2.0", "id": 60, "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2}}}
    assert_mismatch(gw.post([s, {**s, "id": 61, "method": "tools/list"}], headers={"mcp-method": "tools/call"}, **HTTP),
                    "Mcp-Method", 61)
    # Base64-encoded Mcp-Name values (MCP 2026-07-28) are compared decoded; the form is for Mcp-Name and
    # Mcp-Param-* only (streamable-http.mdx, "Validation"), so an encoded Mcp-Method is compared as sent.
    import base64
    b64 = lambda v: "=?base64?" + base64.b64encode(v.encode()).decode() + "?="  # noqa: E731
    assert_allowed(gw.call("get-sum", headers={"mcp-method": "tools/call", "mcp-name": b64("get-sum")}, **HTTP))
    r = gw.call("get-sum", headers={"mcp-name": b64("get-env")}, **HTTP)
    assert_mismatch(r, "Mcp-Name", r.id)
    r = gw.call("get-sum", headers={"mcp-method": b64("tools/call"), "mcp-name": "get-sum"}, **HTTP)
    assert_mismatch(r, "Mcp-Method", r.id)
    assert gw.counters()["toolgate.decision.deny.mcp_header_mismatch"] >= 8


def test_denied_request_never_reaches_the_server(sum_only):
    gw = sum_only
    gw.server.clear_log()
    before = gw.upstream_requests()
    denied = [
        gw.send("GET", headers={"x-probe": "get"}, **HTTP),
        gw.send("DELETE", headers={"mcp-session-id": "s1", "x-probe": "delete"}, **HTTP),
        gw.call("echo", headers={"x-probe": "echo"}, **HTTP),
        gw.rpc("notifications/initialized", id=None, headers={"x-probe": "notification"}, **HTTP),
        gw.send("PUT", raw("{}"), headers={"x-probe": "put"}, **HTTP),
    ]
    for r in denied:
        assert r.response is not None and r.status in (200, 403), r
        assert r.executed == [], r
    assert gw.server.executed() == []  # not a single line: the server saw nothing at all
    assert gw.upstream_requests() == before
    # The server does log what it is sent: an allowed call appears.
    assert_allowed(gw.call("get-sum", headers={"x-probe": "allowed"}, **HTTP))
    assert [e["headers"].get("x-probe") for e in gw.server.executed()] == ["allowed"]


def chunked(data: bytes, size: int = 7) -> bytes:
    out = b""
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def test_chunked_body_is_read_like_any_other(sum_only):
    gw = sum_only
    te = {"transfer-encoding": "chunked"}
    ok = raw('{"jsonrpc":"2.0","id":70,"method":"tools/call",' + SUM + '}')
    r = gw.post(chunked(ok), headers=te, **HTTP)
    assert_allowed(r)
    assert r.json()["result"]["content"][0]["text"] == "5"
    bad = raw('{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}')
    assert_denied(gw.post(chunked(bad), headers=te, **HTTP), id=71)


def test_empty_json_post(sum_only):
    assert_denied(sum_only.post(b"", **HTTP), id=None)


def test_body_between_the_limit_and_envoys_buffer(sum_only):
    """1.5 MiB: over the plan's 1 MiB limit, refused by the filter itself (JSON 413, counted)."""
    gw = sum_only
    before = gw.counters().get("toolgate.decision.too_large", 0)
    pad = "x" * (3 * 512 * 1024)
    r = gw.post(raw('{"jsonrpc":"2.0","id":43,"method":"tools/call",' + SUM[:-1] + ',"pad":"' + pad + '"}}'), **HTTP)
    assert r.status == 413, r
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": 413, "message": "Request body too large."}}
    assert r.executed == [] and r.upstream_requests == 0, r
    assert gw.counters()["toolgate.decision.too_large"] == before + 1


def test_rule_without_mcp_constraint_admits_non_mcp_bodies(gateway):
    """Only rules without MCP constraints can allow a body that is not MCP (docs/semantics.md §4) - and they do."""
    gw = gateway(policy("p", rule("posts", methods=["POST"])), listeners={"http": "HTTP"})
    r = gw.post(raw('{"jsonrpc":"2.0","id":1,"method":"tools/call",' + SUM + ',"id":2}'), **HTTP)  # duplicate key
    assert r.upstream_requests == 1, r  # passed through (the server answers it as it sees fit)
    body = gzip.compress(raw('{"jsonrpc":"2.0","id":3,"method":"ping"}'))
    r = gw.post(body, headers={"content-encoding": "gzip"}, **HTTP)
    assert r.upstream_requests == 1, r


def test_mcp_name_header_uses_uri_for_resources(gateway):
    gw = gateway(policy("p", rule("memo", mcp=mcp_match(("resources/read", ["memo://insights"])))),
                 listeners={"http": "HTTP"})
    params = {"uri": "memo://insights"}
    assert_allowed(gw.rpc("resources/read", params, headers={"mcp-method": "resources/read",
                                                             "mcp-name": "memo://insights"}, **HTTP))
    r = gw.rpc("resources/read", params, headers={"mcp-name": "file:///data/report.txt"}, **HTTP)
    assert_mismatch(r, "Mcp-Name", r.id)
    r = gw.rpc("resources/read", {**params, "name": "n"}, headers={"mcp-name": "n"}, **HTTP)
    assert_mismatch(r, "Mcp-Name", r.id)
