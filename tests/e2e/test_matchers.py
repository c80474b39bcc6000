"""HTTP and MCP matchers of Inline rules, enforced end to end (docs/semantics.md §3, §9.1): paths, methods,
headers, hosts, ports; MCP method categories and params (params.name, params.uri); id echo (docs/semantics.md §5)."""

from __future__ import annotations

from harness import BACKEND_REF, assert_allowed, assert_denied, mcp_match, policy, rule, tools_call_rule

HTTP = {"http": "HTTP"}


def plain(gateway, *rules, listeners=HTTP):
    """A gateway with one plain HTTP listener and one gateway-level policy with `rules`."""
    return gateway(policy("m", *rules), listeners=listeners)


def test_paths_prefix_and_exact(gateway):
    gw = plain(gateway, rule("paths", paths=[{"type": "PathPrefix", "value": "/mcp/v2"},
                                             {"type": "Exact", "value": "/mcp"}]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("get-sum", path="/mcp", **ok))           # Exact (the query is ignored)
    assert_allowed(gw.call("echo", **ok))
    assert_allowed(gw.call("get-sum", path="/mcp/v2", **ok))        # prefix itself
    assert_allowed(gw.call("get-sum", path="/mcp/v2/deep", **ok))   # below the prefix
    assert_denied(gw.call("get-sum", path="/mcp/v2x", **ok))        # prefix is element-wise
    assert_denied(gw.call("get-sum", path="/mcp/other", **ok))
    assert_denied(gw.call("get-sum", path="/mcp/", **ok))           # Exact /mcp is not /mcp/
    assert_denied(gw.send("GET", path="/mcp/other", **ok), id=None)


def test_regex_path(gateway):
    gw = plain(gateway, rule("re", paths=[{"type": "RegularExpression", "value": "/mcp/t[0-9]+"}]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", path="/mcp/t42", **ok))
    assert_denied(gw.call("echo", path="/mcp/t42/x", **ok))  # must match the whole path
    assert_denied(gw.call("echo", path="/mcp", **ok))


def test_http_methods(gateway):
    gw = plain(gateway, rule("post-only", methods=["POST"]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("get-env", {"name": "HOME"}, **ok))
    assert_denied(gw.send("GET", **ok), id=None)
    assert_denied(gw.send("DELETE", headers={"mcp-session-id": "abc"}, **ok), id=None)


def test_headers_exact_and_regex(gateway):
    gw = plain(gateway, rule("hdrs", headers=[{"name": "X-Team", "value": "blue"},
                                              {"name": "x-env", "type": "RegularExpression", "value": "prod-[0-9]+"}]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", headers={"x-team": "blue", "x-env": "prod-12"}, **ok))
    assert_allowed(gw.call("echo", headers={"X-TEAM": "blue", "X-Env": "prod-7"}, **ok))  # names: any case
    assert_denied(gw.call("echo", headers={"x-team": "blue"}, **ok))                    # all must hold
    assert_denied(gw.call("echo", headers={"x-env": "prod-12"}, **ok))
    assert_denied(gw.call("echo", headers={"x-team": "Blue", "x-env": "prod-12"}, **ok))  # values: exact
    assert_denied(gw.call("echo", headers={"x-team": "blue", "x-env": "prod-12x"}, **ok))  # whole value
    assert_denied(gw.call("echo", headers={"x-team": "blue", "x-env": "xprod-12"}, **ok))


def test_header_value_that_is_not_utf8(gateway):
    # obs-text (bytes 0x80-0xFF) is legal in an HTTP/1.1 header value and Envoy passes it on; the filter
    # reads it lossily (U+FFFD), keeps running, and decides on what it read.
    gw = plain(gateway, rule("team", headers=[{"name": "x-team", "type": "RegularExpression", "value": "bl.ue"}]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", headers={"x-team": "bl\xffue"}, **ok))     # one byte -> one U+FFFD
    assert_denied(gw.call("echo", headers={"x-team": "bl\xff\xfeue"}, **ok))  # two bytes -> two
    assert_allowed(gw.call("echo", headers={"x-team": "blaue"}, **ok))        # the VM is still there


def test_hosts_exact_and_wildcard(gateway):
    gw = plain(gateway, rule("hosts", hosts=["*.example.com", "api.test"]))
    ok = dict(listener="http", agent=None)
    for host in ("a.example.com", "a.b.example.com", "api.test", "api.test:8080", "API.Test", "X.Example.COM:80"):
        assert_allowed(gw.call("echo", headers={"host": host}, **ok))
    for host in ("example.com", "example.com.evil", "aexample.com", "other.test", "api.test.evil"):
        assert_denied(gw.call("echo", headers={"host": host}, **ok))


def test_ports(gateway):
    gw = gateway(policy("m", rule("one-port", ports=["$PORT_http"])), listeners={"http": "HTTP", "http2": "HTTP"})
    assert_allowed(gw.call("echo", listener="http", agent=None))
    assert_denied(gw.call("echo", listener="http2", agent=None))
    assert_denied(gw.send("GET", listener="http2", agent=None), id=None)


def test_tools_category(gateway):
    gw = plain(gateway, rule("tools", mcp=mcp_match("tools")))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("get-sum", **ok))
    assert_allowed(gw.call("get-env", {"name": "HOME"}, **ok))
    assert_allowed(gw.rpc("tools/list", **ok))
    assert_denied(gw.rpc("prompts/get", {"name": "greeting"}, **ok))
    assert_denied(gw.rpc("prompts/list", **ok))
    assert_denied(gw.rpc("resources/list", **ok))
    assert_denied(gw.rpc("initialize", {}, **ok))
    # The category is the "tools/" prefix only: toolsx/call is no method of MCP's, denied as not found.
    r = gw.rpc("toolsx/call", {"name": "get-sum"}, **ok)
    assert (r.status, r.json()["error"]["code"], r.upstream_requests) == (200, -32601, 0), r
    assert_denied(gw.send("GET", **ok), id=None)


def test_prompts_get_params_name(gateway):
    gw = plain(gateway, rule("greet", mcp=mcp_match(("prompts/get", ["greeting"]))))
    ok = dict(listener="http", agent=None)
    r = gw.rpc("prompts/get", {"name": "greeting", "arguments": {"name": "e2e"}}, **ok)
    assert_allowed(r)
    assert r.json()["result"]["messages"][0]["content"]["text"] == "Hello, e2e!"
    assert_denied(gw.rpc("prompts/get", {"name": "other"}, **ok))
    assert_denied(gw.rpc("prompts/get", {}, **ok))
    assert_denied(gw.call("greeting", **ok))  # same name, other method
    assert_denied(gw.rpc("prompts/list", **ok))


def test_resources_read_params_uri(gateway):
    gw = plain(gateway, rule("memo", mcp=mcp_match(("resources/read", ["memo://insights"]))))
    ok = dict(listener="http", agent=None)
    r = gw.rpc("resources/read", {"uri": "memo://insights"}, **ok)
    assert_allowed(r)
    assert r.json()["result"]["contents"][0]["uri"] == "memo://insights"
    assert_denied(gw.rpc("resources/read", {"uri": "file:///data/report.txt"}, **ok))
    # params.name equal to the allowed uri does not count: resources compare params.uri.
    assert_denied(gw.rpc("resources/read", {"name": "memo://insights", "uri": "file:///data/report.txt"}, **ok))
    assert_denied(gw.rpc("resources/read", {"name": "memo://insights"}, **ok))
    assert_denied(gw.rpc("resources/read", {"uri": 5}, **ok))  # not a string: absent


def test_id_types_echoed(gateway):
    gw = plain(gateway, tools_call_rule("sum", ["get-sum"]))
    ok = dict(listener="http", agent=None)
    for id in ("abc-1", "", "7", 7, 0, -3, 1.5):
        r = gw.call("echo", id=id, **ok)
        assert_denied(r)
        assert type(r.json()["id"]) is type(id)
    # A notification and "id": null are not requests: HTTP 403 with "id": null.
    assert_denied(gw.rpc("tools/call", {"name": "echo"}, id=None, **ok), id=None)
    assert_denied(gw.post({"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": {"name": "echo"}}, **ok),
                  id=None)


def test_combined_matchers_are_anded(gateway):
    gw = plain(gateway, rule("all", methods=["POST"], paths=[{"type": "Exact", "value": "/mcp"}],
                             headers=[{"name": "x-team", "value": "blue"}], mcp=mcp_match(("tools/call", ["echo"]))))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", headers={"x-team": "blue"}, **ok))
    assert_denied(gw.call("echo", **ok))
    assert_denied(gw.call("get-sum", headers={"x-team": "blue"}, **ok))
    assert_denied(gw.call("echo", headers={"x-team": "blue"}, path="/mcp/x", **ok))


def _under(path: str, prefix: str) -> bool:
    p = path.split("?", 1)[0]
    return (p == prefix or p.startswith(prefix + "/")) and "/../" not in p + "/" and "/./" not in p + "/" \
        and "//" not in p and "%2f" not in p.lower() and "%2e" not in p.lower()


def test_path_rule_cannot_be_bypassed_with_dot_segments_or_escapes(gateway):
    """What the path matcher compared is what the upstream receives: `/mcp/public/../private` must not
    pass a PathPrefix /mcp/public rule and reach the server as a path a server resolves to /mcp/private."""
    gw = plain(gateway, rule("public", paths=[{"type": "PathPrefix", "value": "/mcp/public"}]))
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", path="/mcp/public/tools", **ok))
    for path in ("/mcp/public/../private", "/mcp/public/./../private", "/mcp/public/%2e%2e/private",
                 "/mcp/public/..%2fprivate", "/mcp/public/..%2Fprivate", "/mcp/public/%2E%2E%2Fprivate"):
        r = gw.call("echo", path=path, **ok)
        for e in r.executed:  # if it went through, the server must have been given a path under the prefix
            assert _under(e["path"], "/mcp/public"), (path, e["path"])
        if not r.executed:
            assert r.upstream_requests == 0, r
            assert r.status in (400, 403, 200, 307, 308), r
            if r.status in (200, 403):
                assert r.json()["error"]["code"] == 403, r
    # Merged slashes and resolved dot segments that stay under the prefix are fine.
    for path in ("/mcp//public/x", "/mcp/public/a/../b"):
        r = gw.call("echo", path=path, **ok)
        assert_allowed(r)
        assert _under(r.executed[0]["path"], "/mcp/public"), r.executed[0]["path"]


def test_paths_are_matched_before_the_route_rewrite(gateway):
    rewrite = [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch",
                                                                           "replacePrefixMatch": "/mcp"}}}],
                "backendRefs": [BACKEND_REF]},
               {"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}], "backendRefs": [BACKEND_REF]}]
    gw = gateway(policy("m", rule("api", paths=[{"type": "PathPrefix", "value": "/api"}])),
                 listeners=HTTP, route_rules=rewrite)
    ok = dict(listener="http", agent=None)
    r = gw.call("echo", path="/api/x", **ok)
    assert_allowed(r)
    assert r.executed[0]["path"].startswith("/mcp/x")  # the upstream got the rewritten path
    assert_denied(gw.call("echo", path="/mcp/x", **ok))  # the rewritten form is not what the rule names


def test_gateway_policy_applies_to_unrouted_requests(gateway):
    gw = plain(gateway, tools_call_rule("sum", ["get-sum"]))
    ok = dict(listener="http", agent=None)
    assert_denied(gw.send("GET", path="/nowhere", **ok), id=None)
    assert_denied(gw.call("echo", path="/nowhere", **ok))
    r = gw.call("get-sum", path="/nowhere", **ok)  # allowed by the policy, but no route: Envoy's 404
    assert r.status == 404 and r.executed == [] and r.upstream_requests == 0, r
