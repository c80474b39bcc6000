"""MCP 2026-07-28 beside 2025-11-25 on one listener (SPEC §3–§5): server/discover is a base method,
subscriptions/listen is judged as a set (list changes are base, each resource URI must be allowed as a
resources/subscribe), and 2025-11-25 base methods keep working."""

from __future__ import annotations

from harness import assert_denied, mcp_match, policy, rule

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
    import harness
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
