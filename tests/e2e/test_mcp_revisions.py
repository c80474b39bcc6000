"""MCP 2026-07-28 beside 2025-11-25 on one listener (docs/semantics.md §3–§5): server/discover is a base method,
subscriptions/listen is judged as a set (list changes are base, each resource URI must be allowed as a
resources/subscribe), and 2025-11-25 base methods keep working."""

from __future__ import annotations

import base64
import http.client
import json

import harness
from harness import assert_allowed, assert_denied, mcp_match, policy, rule

HTTP = dict(listener="http", agent=None)


def forwarded(sent) -> None:
    """Not denied by Toolgate: the request reached the MCP server (which may not know the method)."""
    assert sent.upstream_requests == 1, sent
    body = sent.json() if sent.response is not None and sent.response.body else {}
    assert not (isinstance(body, dict) and body.get("error", {}).get("code") == 403), sent


def listen(uris: list[str] | None = None, id: int = 9) -> dict:
    notifications = {"toolsListChanged": True}
    if uris is not None:
        notifications["resourceSubscriptions"] = uris
    return {"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                       "notifications": notifications}}


def test_discover_and_listen_under_match_and_subscribe_rules(gateway):
    gw = gateway(policy("p", rule("base", mcp=mcp_match(base=True)),
                        rule("memo", mcp=mcp_match(("resources/subscribe", ["memo://a"])))),
                 listeners={"http": "HTTP"})
    forwarded(gw.rpc("server/discover", {}, **HTTP))
    forwarded(gw.post(listen(), **HTTP))                      # list changes only: base
    forwarded(gw.post(listen(["memo://a"]), **HTTP))          # a URI resources/subscribe allows
    assert_denied(gw.post(listen(["memo://b"]), **HTTP))      # one it does not
    assert_denied(gw.post(listen(["memo://a", "memo://b"]), **HTTP))
    # A 2025-11-25 client through the same listener and policies.
    forwarded(gw.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}}, **HTTP))
    forwarded(gw.rpc("ping", **HTTP))
    forwarded(gw.rpc("resources/subscribe", {"uri": "memo://a"}, **HTTP))
    assert_denied(gw.rpc("resources/subscribe", {"uri": "memo://b"}, **HTTP))
    # Without MATCH, neither revision's base methods pass.
    gw.rerender([policy("p", rule("memo", mcp=mcp_match(("resources/subscribe", ["memo://a"]))))])
    harness.wait_for(lambda: gw.rpc("server/discover", {}, **HTTP).upstream_requests == 0, timeout=10,
                     interval=0.1, what="the new plan")
    assert_denied(gw.rpc("server/discover", {}, **HTTP))
    assert_denied(gw.post(listen(["memo://a"]), **HTTP))


def test_listen_with_unreadable_subscriptions_is_not_mcp(gateway):
    gw = gateway(policy("p", rule("base", mcp=mcp_match(base=True))), listeners={"http": "HTTP"})
    bad = listen()
    bad["params"]["notifications"]["resourceSubscriptions"] = [{"uri": "memo://a"}]
    assert_denied(gw.post(bad, **HTTP), id=None)
    assert "resourceSubscriptions is not a list of strings" in gw.decision(gw.post(bad, **HTTP))


def test_protocol_version_header_and_body_must_agree(gateway):
    gw = gateway(policy("p", rule("any")), listeners={"http": "HTTP"})
    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "get-sum", "arguments": {"a": 1, "b": 2},
                       "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    forwarded(gw.post(call, headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                     "mcp-name": "get-sum"}, **HTTP))
    r = gw.post(call, headers={"mcp-protocol-version": "2025-11-25"}, **HTTP)
    assert r.status == 400 and r.json()["error"]["code"] == -32020, r
    assert "MCP-Protocol-Version" in r.json()["error"]["message"]
    assert r.executed == [] and r.upstream_requests == 0, r


# ---- A real 2026-07-28 exchange with the sample server (which checks the headers itself) --------

V26 = "2026-07-28"


def modern(method: str, params: dict | None = None, id=None) -> dict:
    p = dict(params or {})
    p["_meta"] = {"io.modelcontextprotocol/protocolVersion": V26,
                  "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}
    msg = {"jsonrpc": "2.0", "method": method, "params": p}
    if id is not None:
        msg["id"] = id
    return msg


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def headers(method: str, name: str | None = None) -> dict:
    h = {"mcp-protocol-version": V26, "mcp-method": method}
    if name is not None:
        h["mcp-name"] = name if name.isascii() else b64(name)
    return h


def test_2026_client_and_2025_session_on_one_listener(gateway):
    gw = gateway(policy("p", rule("sum", mcp=mcp_match(("tools/call", ["get-sum"]), base=True))),
                 listeners={"http": "HTTP"})
    r = gw.post(modern("server/discover", id="d1"), headers=headers("server/discover"), **HTTP)
    assert_allowed(r)
    assert r.json()["result"]["supportedVersions"] == [V26], r
    r = gw.post(modern("tools/list", id=2), headers=headers("tools/list"), **HTTP)
    assert_allowed(r)
    assert r.json()["result"]["resultType"] == "complete" and "ttlMs" in r.json()["result"], r
    r = gw.post(modern("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}, id=3),
                headers=headers("tools/call", "get-sum"), **HTTP)
    assert_allowed(r)
    assert r.json()["result"]["content"][0]["text"] == "5", r
    for tool in ("echo", "get-env"):
        assert_denied(gw.post(modern("tools/call", {"name": tool, "arguments": {"message": "x", "name": "HOME"}},
                                     id=4), headers=headers("tools/call", tool), **HTTP))
    # A 2025-11-25 client on the same listener, with the same policy: handshake, session, GET, DELETE.
    r = gw.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "old", "version": "1"}}, **HTTP)
    assert_allowed(r)
    sid = r.response.headers["mcp-session-id"]
    assert r.json()["result"]["protocolVersion"] == "2025-11-25"
    session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    assert_allowed(gw.rpc("notifications/initialized", id=None, headers=session, **HTTP))
    assert_allowed(gw.call("get-sum", {"a": 1, "b": 1}, headers=session, **HTTP))
    assert_denied(gw.call("echo", {"message": "x"}, headers=session, **HTTP))
    assert_allowed(gw.rpc("ping", headers=session, **HTTP))
    assert_allowed(gw.send("GET", headers=session, **HTTP))
    assert_allowed(gw.send("DELETE", headers=session, **HTTP))


def test_non_ascii_tool_name_in_base64_and_mcp_param_headers(gateway):
    tool = "ünïcødé-sum"
    gw = gateway(policy("p", rule("t", mcp=mcp_match(("tools/call", [tool, "get-sum"]), base=True))),
                 listeners={"http": "HTTP"})
    call = modern("tools/call", {"name": tool, "arguments": {}}, id=5)
    # Allowed by Toolgate (decoded Mcp-Name equals the body) and by the sample server's own check, which
    # then answers that it has no such tool.
    r = gw.post(call, headers=headers("tools/call", tool), **HTTP)
    assert_allowed(r)
    assert r.json()["error"]["code"] == -32602 and "Unknown tool" in r.json()["error"]["message"], r
    # A base64 name that does not match the body: 400 -32020 from Toolgate, nothing sent upstream.
    for other in ("get-sum", "ünïcødé-sun", "get-env"):
        r = gw.post(call, headers={**headers("tools/call"), "mcp-name": b64(other)}, **HTTP)
        assert r.status == 400 and r.json()["error"]["code"] == -32020, r
        assert r.json()["id"] == 5 and r.executed == [] and r.upstream_requests == 0, r
    r = gw.post(modern("tools/call", {"name": "get-sum", "arguments": {}}, id=6),
                headers={**headers("tools/call"), "mcp-name": b64(tool)}, **HTTP)
    assert r.status == 400 and r.json()["error"]["code"] == -32020 and r.upstream_requests == 0, r
    # Mcp-Param-* headers reach the server unchanged, plain or base64.
    params = {"mcp-param-region": "us-west1", "mcp-param-greeting": b64("Hello, 世界")}
    r = gw.post(modern("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}, id=7),
                headers={**headers("tools/call", "get-sum"), **params}, **HTTP)
    assert_allowed(r)
    assert {k: r.executed[0]["headers"].get(k) for k in params} == params, r.executed


def open_stream(gw, body: dict, hdrs: dict) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", gw.ports["http"], timeout=15)
    conn.request("POST", "/mcp", json.dumps(body).encode(),
                 {"content-type": "application/json", "accept": "application/json, text/event-stream", **hdrs})
    return conn.getresponse()


def events(resp: http.client.HTTPResponse, n: int) -> list[dict]:
    out = []
    while len(out) < n:
        line = resp.readline()
        assert line, "stream ended"
        if line.startswith(b"data: "):
            out.append(json.loads(line[6:]))
    return out


def notify(gw, **what) -> int:
    status, _, body = harness.request("POST", f"http://{gw.server.address}/notify", what)
    assert status == 200, body
    return json.loads(body)["delivered"]


def test_listen_streams_through_toolgate(gateway):
    gw = gateway(policy("p", rule("base", mcp=mcp_match(base=True)),
                        rule("memo", mcp=mcp_match(("resources/subscribe", ["memo://insights"])))),
                 listeners={"http": "HTTP"})
    # List changes only: a base method. The stream stays open through Envoy and carries notifications.
    resp = open_stream(gw, modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=11),
                       headers("subscriptions/listen"))
    assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream", resp.status
    ack = events(resp, 1)[0]
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 11
    # A URI that a resources/subscribe rule lists.
    resp2 = open_stream(gw, modern("subscriptions/listen", {"notifications": {
        "resourceSubscriptions": ["memo://insights"]}}, id=12), headers("subscriptions/listen"))
    assert events(resp2, 1)[0]["params"]["notifications"] == {"resourceSubscriptions": ["memo://insights"]}
    assert notify(gw, tools=True, uri="memo://insights") == 2
    assert events(resp, 1)[0]["method"] == "notifications/tools/list_changed"
    ev = events(resp2, 1)[0]
    assert ev["method"] == "notifications/resources/updated" and ev["params"]["uri"] == "memo://insights", ev
    resp.close()
    resp2.close()
    # One URI the rules do not list, beside an allowed one: denied, never opened.
    listens = len([e for e in gw.server.executed() if e["jsonrpc_method"] == "subscriptions/listen"])
    assert_denied(gw.post(modern("subscriptions/listen", {"notifications": {
        "resourceSubscriptions": ["memo://insights", "file:///data/report.txt"]}}, id=13),
        headers=headers("subscriptions/listen"), **HTTP))
    assert len([e for e in gw.server.executed() if e["jsonrpc_method"] == "subscriptions/listen"]) == listens


def not_found(sent, status: int) -> None:
    """Denied as a method the server does not have (docs/semantics.md §5): -32601, never sent upstream."""
    assert sent.response is not None and sent.response.status == status, sent
    assert sent.response.json() == {"jsonrpc": "2.0", "id": sent.id,
                                    "error": {"code": -32601, "message": "Method not found"}}, sent
    assert sent.upstream_requests == 0 and sent.executed == [], sent


def test_tasks_are_base_protocol_and_unknown_methods_are_not_found(gateway):
    """MCP's task methods pass where the base protocol does, or where a rule names them; a method MCP
    does not define is answered -32601 (HTTP 404 in the 2026-07-28 form, 200 before), one it defines
    but no rule allows keeps the 403 error."""
    gw = gateway(policy("p", rule("base", mcp=mcp_match(base=True)),
                        rule("sum", mcp=mcp_match(("tools/call", ["get-sum"])))),
                 listeners={"http": "HTTP"})
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        forwarded(gw.rpc(method, {"taskId": "t-1"}, **HTTP))
    forwarded(gw.rpc("tasks/list", {}, **HTTP))
    modern = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    not_found(gw.rpc("tools/frobnicate", {}, **HTTP), 200)
    not_found(gw.rpc("Tools/Call", {"name": "get-sum"}, **HTTP), 200)
    not_found(gw.rpc("tools/frobnicate", modern, **HTTP), 404)
    assert_denied(gw.rpc("prompts/get", {"name": "p", **modern}, **HTTP))   # defined by MCP, not allowed
    assert_denied(gw.call("echo", **HTTP))
    # Without MATCH, tasks pass only where a rule names them.
    gw.rerender([policy("p", rule("tasks", mcp=mcp_match("tasks/result")))])
    harness.wait_for(lambda: gw.rpc("tasks/get", {"taskId": "t-1"}, **HTTP).upstream_requests == 0, timeout=10,
                     interval=0.1, what="the new plan")
    assert_denied(gw.rpc("tasks/get", {"taskId": "t-1"}, **HTTP))
    forwarded(gw.rpc("tasks/result", {"taskId": "t-1"}, **HTTP))
