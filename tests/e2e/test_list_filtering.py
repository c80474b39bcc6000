"""List filtering (docs/semantics.md §5, issue 14) through the real filter in a real Envoy, in front of the sample MCP
server (tests/mcp-server: 12 tools, 3 prompts, 3 resources): the result of an allowed tools/list,
prompts/list or resources/list keeps only the entries a tools/call (name), prompts/get (name) or
resources/read (uri) by the same caller, with the same headers, would be allowed at both levels.

The sample server shapes its answers on request headers (its --help): `x-test-sse: 1` (an event
stream, chunked: a notification event, then the response split over two chunks), `x-test-page-size: N`
(pages with a nextCursor), `x-test-gzip: 1` (gzip whatever accept-encoding says), `x-test-broken-list: 1`
(invalid JSON); it gzips JSON when the request accepts gzip, and its execution log records every header
it received.

Each test compares what a caller gets through Envoy with what the server answers the same message
directly: the filtered JSON must be the original without the removed entries (docs/semantics.md §5)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

import harness
from harness import assert_allowed, assert_denied, mcp_match, policy, rule, sa, tools_call_rule, wait_for

TOOLS = ["get-sum", "echo", "get-env", "get-product", "get-difference", "get-quotient", "uppercase", "lowercase",
         "reverse", "word-count", "char-count", "get-time"]
PROMPTS = ["greeting", "summarize", "code-review"]
RESOURCES = ["memo://insights", "file:///data/report.txt", "memo://roadmap"]
# method -> (result key, the entry's key, every entry the server lists)
LISTS = {"tools/list": ("tools", "name", TOOLS), "prompts/list": ("prompts", "name", PROMPTS),
         "resources/list": ("resources", "uri", RESOURCES)}

V26 = "2026-07-28"
HTTP = dict(listener="http", agent=None)
REFUSAL_PREFIX = "Toolgate could not filter the list response: "


def callers_policy() -> dict:
    """agent-a: anything; agent-b: tools/call get-sum (and the lists) only, at the gateway level."""
    return policy("agents",
                  rule("a-any", source=sa("a")),
                  rule("b-sum", source=sa("b"), mcp=mcp_match(("tools/call", ["get-sum"]), "prompts/list",
                                                              "resources/list", "resources/templates/list",
                                                              base=True)))


# ---- requests and what comes back ----------------------------------------------------------------


def message(method: str, params: dict | None = None, *, modern: bool = False, id: Any = "auto") -> dict:
    """A JSON-RPC request; `modern`: a 2026-07-28 one (the protocol version in params._meta)."""
    if modern:
        params = dict(params or {})
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": V26,
                           "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return harness.jsonrpc(method, params, id)


def modern_headers(method: str) -> dict:
    return {"mcp-protocol-version": V26, "mcp-method": method}


def listing(gw, method: str, params: dict | None = None, *, modern: bool = False, headers: dict | None = None,
            agent: str | None = "agent-a", **kw) -> harness.Sent:
    """A list request through Envoy (legacy revision unless `modern`)."""
    h = {**(modern_headers(method) if modern else {}), **(headers or {})}
    return gw.post(message(method, params, modern=modern), headers=h, agent=agent, **kw)


def direct(gw, sent: harness.Sent, method: str, params: dict | None = None, *, modern: bool = False,
           headers: dict | None = None) -> harness.Response:
    """The same message (same id) sent straight to the sample server, with the same test headers."""
    msg = message(method, params, modern=modern, id=sent.id)
    h = {"accept": "application/json, text/event-stream", **(modern_headers(method) if modern else {}),
         **(headers or {})}
    return harness.request("POST", f"{gw.server.url}/mcp", msg, h)


def body_text(r: harness.Response) -> str:
    """The body, gunzipped when the response says gzip."""
    raw = r.body
    if "gzip" in r.headers.get("content-encoding", ""):
        raw = gzip.decompress(raw)
    return raw.decode()


def sse_events(text: str) -> list[dict]:
    """The events of an event stream: each one's raw text (without its blank line) and its data parsed
    as JSON (None when it has none)."""
    assert text.endswith("\n\n"), f"an event stream ends with a blank line: {text[-80:]!r}"
    out = []
    for raw in text[:-2].split("\n\n"):
        data = [line[len("data:"):].removeprefix(" ") for line in raw.split("\n") if line.startswith("data:")]
        out.append({"raw": raw, "data": json.loads("\n".join(data)) if data else None})
    return out


def answer(sent_or_response, id: Any = None) -> dict:
    """The JSON-RPC response in a response (JSON body, or the data event with that id in an event stream)."""
    r = sent_or_response.response if isinstance(sent_or_response, harness.Sent) else sent_or_response
    assert r is not None, sent_or_response
    text = body_text(r)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        found = [e["data"] for e in sse_events(text) if isinstance(e["data"], dict) and "method" not in e["data"]]
        if id is not None:
            found = [d for d in found if d.get("id") == id]
        assert len(found) == 1, text
        return found[0]
    return json.loads(text)


def entries(sent_or_response, method: str, id: Any = None) -> list[str]:
    key, field, _ = LISTS[method]
    body = answer(sent_or_response, id)
    assert "result" in body, body
    return [e[field] for e in body["result"][key]]


def without(original: dict, method: str, keep: list[str]) -> dict:
    """`original` (a parsed list response) with only the entries named in `keep`."""
    key, field, _ = LISTS[method]
    out = json.loads(json.dumps(original))
    out["result"][key] = [e for e in out["result"][key] if e[field] in keep]
    return out


def assert_length_fits(r: harness.Response) -> None:
    cl = r.headers.get("content-length")
    assert cl is None or int(cl) == len(r.body), (cl, len(r.body))


def assert_filtered(gw, sent: harness.Sent, method: str, want: list[str], params: dict | None = None, *,
                    modern: bool = False, headers: dict | None = None) -> None:
    """Allowed, executed once, and the answer is the server's own answer with only `want` left."""
    assert_allowed(sent)
    assert_length_fits(sent.response)
    assert entries(sent, method, sent.id) == want, sent
    original = answer(direct(gw, sent, method, params, modern=modern, headers=headers), sent.id)
    expected = without(original, method, want)
    if modern and original["result"].get("cacheScope") == "public":
        expected["result"]["cacheScope"] = "private"
    assert answer(sent, sent.id) == expected


def counters(gw) -> dict[str, int]:
    c = gw.counters()
    return {k: c.get(k, 0) for k in ("toolgate.list.filtered", "toolgate.list.entries_removed",
                                     "toolgate.list.unreadable")}


def wait_counters(gw, before: dict[str, int], **delta: int) -> None:
    """Wait until the list counters moved by exactly `delta` (names with _ for .: filtered=1)."""
    want = {f"toolgate.list.{k}": before[f"toolgate.list.{k}"] + v for k, v in delta.items()}
    try:
        wait_for(lambda: all(counters(gw)[k] == v for k, v in want.items()), timeout=5, what="the list counters")
    except harness.HarnessError:
        assert {k: counters(gw)[k] for k in want} == want


def assert_passed_gzipped(sent: harness.Sent) -> None:
    """Allowed and executed, the server's gzip answer passed on as it was (assert_allowed reads JSON)."""
    assert sent.response is not None and sent.status == 200, sent
    assert len(sent.executed) == 1 and sent.upstream_requests == 1, sent
    assert sent.response.headers.get("content-encoding") == "gzip", sent.response.headers
    text = gzip.decompress(sent.response.body).decode()
    assert '"result"' in text and '"error"' not in text, text


def assert_refused(gw, sent: harness.Sent) -> None:
    """docs/semantics.md §5: a list response the filter cannot read is replaced by a JSON-RPC error with the request's
    id (HTTP status unchanged, no content-encoding), never passed on. (An event stream may carry the
    error as its one event.)"""
    assert sent.response is not None, sent
    r = sent.response
    assert len(sent.executed) == 1 and sent.upstream_requests == 1, sent   # the request itself was allowed
    assert r.status == 200, sent
    assert "content-encoding" not in r.headers, r.headers
    assert r.headers.get("content-type", "").split(";")[0] in ("application/json", "text/event-stream"), r.headers
    assert_length_fits(r)
    body = answer(r, sent.id)
    assert body == {"jsonrpc": "2.0", "id": sent.id, "error": body.get("error")}, body
    assert body["error"]["code"] == -32603, body
    assert body["error"]["message"].startswith(REFUSAL_PREFIX), body
    for tool in TOOLS[1:]:
        assert tool.encode() not in r.body, f"{tool} leaked: {r.body!r}"
    assert gw.decision(sent).endswith(" list=refused"), gw.decision(sent)


# ---- callers, levels, kinds -------------------------------------------------------------------------


def test_each_caller_sees_what_it_may_use(gateway):
    gw = gateway(callers_policy())
    before = counters(gw)
    # agent-a may use everything: every list comes back as the server sent it, byte for byte.
    for method, (_, _, everything) in LISTS.items():
        r = listing(gw, method)
        assert_filtered(gw, r, method, everything)
        assert r.response.body == direct(gw, r, method).body
        assert gw.decision(r) == f"allow gateway=default/agents:a-any backend=- list=filtered removed=0/{len(everything)}"
    # agent-b may call get-sum and nothing else: one tool, no prompt, no resource.
    b = {m: listing(gw, m, agent="agent-b") for m in LISTS}
    assert_filtered(gw, b["tools/list"], "tools/list", ["get-sum"])
    assert_filtered(gw, b["prompts/list"], "prompts/list", [])
    assert_filtered(gw, b["resources/list"], "resources/list", [])
    assert gw.decision(b["tools/list"]) == "allow gateway=default/agents:b-sum backend=- list=filtered removed=11/12"
    assert gw.decision(b["prompts/list"]).endswith(" list=filtered removed=3/3")
    assert gw.decision(b["resources/list"]).endswith(" list=filtered removed=3/3")
    # One per list response; entries removed: 11 + 3 + 3.
    wait_counters(gw, before, filtered=6, entries_removed=17, unreadable=0)
    # What b may not use it still may not call; the filtered list changes no decision.
    assert_allowed(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("echo", agent="agent-b"))
    assert_denied(gw.rpc("prompts/get", {"name": "greeting"}, agent="agent-b"))
    assert_denied(gw.rpc("resources/read", {"uri": "memo://insights"}, agent="agent-b"))


def test_a_batch_has_each_list_filtered(gateway):
    gw = gateway(callers_policy())
    batch = [harness.jsonrpc("tools/list", id=1), harness.jsonrpc("prompts/list", id="two"),
             harness.jsonrpc("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}, id=3)]
    r = gw.post(batch, agent="agent-b")
    assert_allowed(r, executed=3)
    got = {m["id"]: m for m in r.json()}
    assert [t["name"] for t in got[1]["result"]["tools"]] == ["get-sum"], got
    assert got["two"]["result"]["prompts"] == [], got
    assert got[3]["result"]["content"][0]["text"] == "3", got


def test_a_backend_policy_narrows_the_lists_further(gateway):
    backend = policy("tools-backend",
                     rule("a-some", source=sa("a"), mcp=mcp_match(
                         ("tools/call", ["get-sum", "echo", "get-env"]), "prompts/list", ("prompts/get", ["greeting"]),
                         "resources/list", ("resources/read", ["memo://insights"]), base=True)),
                     rule("b-all", source=sa("b")),
                     target="backend")
    gw = gateway(callers_policy(), backend)
    # a: anything at the gateway, three tools, one prompt, one resource at the backend.
    assert_filtered(gw, listing(gw, "tools/list"), "tools/list", ["get-sum", "echo", "get-env"])
    assert_filtered(gw, listing(gw, "prompts/list"), "prompts/list", ["greeting"])
    assert_filtered(gw, listing(gw, "resources/list"), "resources/list", ["memo://insights"])
    r = listing(gw, "tools/list")
    assert gw.decision(r) == ("allow gateway=default/agents:a-any backend=default/tools-backend:a-some"
                              " list=filtered removed=9/12")
    # b: everything at the backend, get-sum at the gateway: both levels must allow.
    assert_filtered(gw, listing(gw, "tools/list", agent="agent-b"), "tools/list", ["get-sum"])


def test_prompts_by_name_resources_by_uri_and_templates_untouched(gateway):
    gw = gateway(policy("p", rule("a", source=sa("a"), mcp=mcp_match(
        "prompts/list", ("prompts/get", ["summarize", "no-such-prompt"]),
        "resources/list", "resources/templates/list",
        ("resources/read", ["memo://roadmap", "file:///data/report.txt", "memo://insights/other"]),
        # Names of other kinds do not count: a tools/call of "greeting", a subscribe of memo://insights.
        ("tools/call", ["greeting", "memo://insights"]), ("resources/subscribe", ["memo://insights"]),
        base=True))))
    assert_filtered(gw, listing(gw, "prompts/list"), "prompts/list", ["summarize"])
    # The server's order is kept.
    assert_filtered(gw, listing(gw, "resources/list"), "resources/list", ["file:///data/report.txt", "memo://roadmap"])
    # resources/templates/list is not filtered: a template names no resource a resources/read rule
    # could be matched against. It comes back as the server sent it.
    t = gw.rpc("resources/templates/list")
    assert_allowed(t)
    assert t.response.body == direct(gw, t, "resources/templates/list").body
    assert t.json()["result"]["resourceTemplates"][0]["uriTemplate"] == "file:///data/{name}"
    assert " list=" not in gw.decision(t)
    for modern in (False, True):   # in both revisions
        assert_filtered(gw, listing(gw, "prompts/list", modern=modern), "prompts/list", ["summarize"], modern=modern)


def test_the_same_headers_count(gateway):
    """An entry is kept when a call with the list request's own headers would be allowed."""
    gw = gateway(policy("p", rule("sum", mcp=mcp_match(("tools/call", ["get-sum"]), base=True)),
                        rule("blue-env", headers=[{"name": "x-team", "value": "blue"}],
                             mcp=mcp_match(("tools/call", ["get-env"])))),
                 listeners={"http": "HTTP"})
    assert_filtered(gw, listing(gw, "tools/list", **HTTP), "tools/list", ["get-sum"])
    blue = {"x-team": "blue"}
    assert_filtered(gw, listing(gw, "tools/list", headers=blue, **HTTP), "tools/list", ["get-sum", "get-env"],
                    headers=blue)
    assert_allowed(gw.call("get-env", {"name": "HOME"}, headers=blue, **HTTP))
    assert_denied(gw.call("get-env", {"name": "HOME"}, **HTTP))


# ---- framings: event streams, pages, encodings ------------------------------------------------------


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_event_stream_filtered_with_its_framing_kept(gateway, modern):
    gw = gateway(callers_policy())
    sse = {"x-test-sse": "1"}
    for agent, want in (("agent-a", TOOLS), ("agent-b", ["get-sum"])):
        r = listing(gw, "tools/list", modern=modern, headers=sse, agent=agent)
        assert_allowed(r)
        assert r.response.headers["content-type"] == "text/event-stream", r
        assert_length_fits(r.response)
        orig = direct(gw, r, "tools/list", modern=modern, headers=sse)
        got, expected = sse_events(r.response.text), sse_events(orig.text)
        # Same events; the notification (first event) byte for byte, the response event's lines other
        # than data as they were.
        assert len(got) == len(expected) == 2, r.response.text
        assert got[0]["raw"] == expected[0]["raw"]
        assert got[0]["data"]["method"] == "notifications/message"
        assert [ln for ln in got[1]["raw"].split("\n") if not ln.startswith("data:")] == \
               [ln for ln in expected[1]["raw"].split("\n") if not ln.startswith("data:")]
        assert entries(r, "tools/list", r.id) == want
        want_body = without(expected[1]["data"], "tools/list", want)
        if modern:
            want_body["result"]["cacheScope"] = "private"
        assert got[1]["data"] == want_body
        if agent == "agent-a" and not modern:
            assert r.response.body == orig.body   # nothing removed, nothing changed
        else:
            assert gw.decision(r).endswith(f" list=filtered removed={12 - len(want)}/12")


@pytest.mark.parametrize("framing", ["json", "sse"])
def test_pages_filtered_one_by_one_with_the_cursor_kept(gateway, framing):
    gw = gateway(callers_policy())
    shaping = {"x-test-sse": "1"} if framing == "sse" else {}
    seen: dict[str, list[str]] = {"agent-a": [], "agent-b": []}
    for agent in seen:
        params: dict = {}
        headers = {**shaping, "x-test-page-size": "5"}
        cursors = []
        for _ in range(5):
            r = listing(gw, "tools/list", params, headers=headers, agent=agent)
            original = answer(direct(gw, r, "tools/list", params, headers=headers), r.id)["result"]
            page = [t["name"] for t in original["tools"]]
            assert len(page) <= 5, page
            assert_filtered(gw, r, "tools/list", page if agent == "agent-a" else [t for t in page if t == "get-sum"],
                            params, headers=headers)
            seen[agent].extend(entries(r, "tools/list", r.id))
            result = answer(r, r.id)["result"]
            assert result.get("nextCursor") == original.get("nextCursor"), (result, original)
            if "nextCursor" not in result:
                break
            cursors.append(result["nextCursor"])
            params = {"cursor": result["nextCursor"]}
            headers = dict(shaping)   # the cursor carries the page size
        assert cursors == ["page:5:5", "page:10:5"], cursors
    assert seen == {"agent-a": TOOLS, "agent-b": ["get-sum"]}
    # Pages 2 and 3 hold nothing b may use: empty pages, cursors kept (the client goes on).
    r = listing(gw, "tools/list", {"cursor": "page:5:5"}, headers=shaping, agent="agent-b")
    assert entries(r, "tools/list", r.id) == [] and answer(r, r.id)["result"]["nextCursor"] == "page:10:5"
    # A list request the server answers with an error: the error passes as it is.
    r = listing(gw, "tools/list", {"cursor": "nope"}, headers=shaping, agent="agent-b")
    assert_allowed(r)
    assert answer(r, r.id)["error"]["code"] == -32602, r


def test_a_gzip_capable_client_gets_a_filtered_list(gateway):
    gw = gateway(callers_policy())
    accept = {"accept-encoding": "gzip, deflate"}
    r = listing(gw, "tools/list", headers=accept, agent="agent-b")
    assert_allowed(r)
    assert "content-encoding" not in r.response.headers, r.response.headers
    assert entries(r, "tools/list", r.id) == ["get-sum"]
    # The filter took accept-encoding off the list request: the server never saw it.
    assert "accept-encoding" not in r.executed[0]["headers"], r.executed[0]["headers"]
    # Other requests keep it (the server gzips their answers; Envoy passes them on as they are).
    c = gw.call("get-sum", headers=accept, agent="agent-b")
    assert_passed_gzipped(c)
    assert c.executed[0]["headers"].get("accept-encoding") == "gzip, deflate", c.executed
    assert json.loads(gzip.decompress(c.response.body))["result"]["content"][0]["text"] == "5"


@pytest.mark.parametrize("shaping", [{"x-test-gzip": "1"}, {"x-test-broken-list": "1"},
                                     {"x-test-gzip": "1", "x-test-sse": "1"}], ids=["gzip", "broken", "gzip-sse"])
def test_an_unreadable_list_is_refused_never_passed_on(gateway, shaping):
    gw = gateway(callers_policy())
    before = counters(gw)
    for agent in ("agent-b", "agent-a"):   # whether or not anything would have been removed
        assert_refused(gw, listing(gw, "tools/list", headers=shaping, agent=agent))
    wait_counters(gw, before, unreadable=2)
    # The server did answer (unfiltered, and unreadable): what reached the client was not it.
    r = listing(gw, "prompts/list", headers=shaping, agent="agent-b")
    assert_refused(gw, r)
    assert direct(gw, r, "prompts/list", headers=shaping).status == 200
    # Other requests with the same headers are not lists: nothing is refused.
    c = gw.call("get-sum", headers=shaping, agent="agent-b")
    if "x-test-gzip" in shaping:
        assert_passed_gzipped(c)
    else:
        assert_allowed(c)


def test_broken_json_in_an_event_stream_is_not_passed_on(gateway):
    gw = gateway(callers_policy())
    before = counters(gw)
    r = listing(gw, "tools/list", headers={"x-test-sse": "1", "x-test-broken-list": "1"}, agent="agent-b")
    assert r.response is not None and r.response.status == 200, r
    for tool in TOOLS[1:]:
        assert tool.encode() not in r.response.body, f"{tool} leaked: {r.response.body!r}"
    err = answer(r, r.id)
    assert err["error"]["code"] == -32603 and err["error"]["message"].startswith(REFUSAL_PREFIX), err
    assert gw.decision(r).endswith(" list=refused")
    wait_counters(gw, before, unreadable=1)


def test_a_list_over_the_body_limit_is_refused(gateway):
    # The tools/list answer is about 3 KB; requests stay far below 1 KiB.
    gw = gateway(callers_policy(), render_args=["--max-body-bytes", "1024"])
    whole = harness.request("POST", f"{gw.server.url}/mcp", harness.jsonrpc("tools/list"))
    assert len(whole.body) > 1024, whole
    assert_refused(gw, listing(gw, "tools/list", agent="agent-b"))
    assert_filtered(gw, listing(gw, "prompts/list", agent="agent-b"), "prompts/list", [])   # small enough


# ---- rules an entry cannot decide, revisions, settings, plan changes --------------------------------


def cel(name: str, expression: str) -> dict:
    return {"name": name, "authorization": {"type": "CEL", "cel": {"expression": expression}}}


def test_a_cel_argument_rule_keeps_its_tool_listed(gateway):
    # Gateway: get-sum by name (decided per entry), then echo with an argument (cannot be decided from a
    # list entry: possibly allowing, the entry stays). Backend: get-sum and echo. (The rule that reads
    # params counts as possibly allowing whatever its other conditions say, so at the gateway level it
    # keeps every tool; the backend level keeps the list exact here.)
    gw = gateway(policy("cel", cel("sum", "request.mcp.tool_name == 'get-sum'"),
                        rule("base", mcp=mcp_match(base=True))),
                 policy("be", tools_call_rule("two", ["get-sum", "echo"], base=True), target="backend"),
                 listeners={"http": "HTTP"})
    assert_filtered(gw, listing(gw, "tools/list", **HTTP), "tools/list", ["get-sum"])
    gw.rerender([policy("cel", cel("sum", "request.mcp.tool_name == 'get-sum'"),
                        cel("echo-hi", "request.mcp.tool_name == 'echo' && request.mcp.params.arguments.message == 'hi'"),
                        rule("base", mcp=mcp_match(base=True))),
                 policy("be", tools_call_rule("two", ["get-sum", "echo"], base=True), target="backend")])
    wait_for(lambda: "echo" in entries(listing(gw, "tools/list", **HTTP), "tools/list"), timeout=10, interval=0.1,
             what="the plan with the CEL argument rule")
    assert_filtered(gw, listing(gw, "tools/list", **HTTP), "tools/list", ["get-sum", "echo"])
    # The call itself is still judged on its arguments.
    assert_allowed(gw.call("echo", {"message": "hi"}, **HTTP))
    assert_denied(gw.call("echo", {"message": "ho"}, **HTTP))


def test_an_external_auth_policy_keeps_its_entries_listed(gateway, start_authorizer):
    # Gateway: an authorizer that denies echo calls. Backend: three tools. The authorizer is asked about
    # the list request, never about its entries (possibly allowing): echo stays listed; calling it asks.
    az = start_authorizer(rule={"deny_tools": ["echo"]})
    gw = gateway(harness.external_auth_policy("ea", grpc={}),
                 policy("be", tools_call_rule("three", ["get-sum", "echo", "get-env"], base=True), target="backend"),
                 listeners={"http": "HTTP"}, render_args=az.resolve_arg("GRPC"))
    before = len(az.requests())
    r = listing(gw, "tools/list", **HTTP)
    assert_filtered(gw, r, "tools/list", ["get-sum", "echo", "get-env"])
    assert gw.decision(r) == ("allow gateway=- backend=default/be:three authorized-by=default/ea"
                              " list=filtered removed=9/12")
    asked = az.requests()[before:]
    assert [q["mcp_proxy"]["method"] for q in asked] == ["tools/list"], asked
    assert_denied(gw.call("echo", **HTTP))
    assert_allowed(gw.call("get-sum", **HTTP))


def test_cache_scope_public_becomes_private(gateway):
    gw = gateway(callers_policy())
    for method in LISTS:
        for agent in ("agent-a", "agent-b"):   # even where nothing is removed
            r = listing(gw, method, modern=True, agent=agent)
            assert_allowed(r)
            result = r.json()["result"]
            assert result["cacheScope"] == "private", result
            assert result["ttlMs"] == 60000 and result["resultType"] == "complete", result
            assert answer(direct(gw, r, method, modern=True), r.id)["result"]["cacheScope"] == "public"
    assert entries(listing(gw, "tools/list", modern=True, agent="agent-b"), "tools/list") == ["get-sum"]


def assert_every_list_unchanged(gw, agent: str) -> None:
    """Each list, in both revisions, reaches `agent` as the server sent it, with no list= in the decision."""
    for modern in (False, True):
        for method in LISTS:
            r = listing(gw, method, modern=modern, agent=agent)
            assert_allowed(r)
            assert r.response.body == direct(gw, r, method, modern=modern).body
            assert " list=" not in gw.decision(r)


def test_list_filtering_off_passes_lists_unchanged(gateway):
    gw = gateway(callers_policy(), render_args=["--list-filtering", "off"])
    plans = [json.loads(p["value"]) for p in harness.toolgate_plans(json.loads((gw.dir / "lds.json").read_text()))]
    assert plans and all(p["settings"]["listFiltering"] is False for p in plans), plans
    before = counters(gw)
    assert_every_list_unchanged(gw, "agent-b")
    r = listing(gw, "tools/list", modern=True, agent="agent-b")
    assert r.json()["result"]["cacheScope"] == "public"
    # accept-encoding reaches the server, a gzip answer passes, an unreadable one is not Toolgate's business.
    r = listing(gw, "tools/list", headers={"accept-encoding": "gzip"}, agent="agent-b")
    assert r.executed[0]["headers"].get("accept-encoding") == "gzip"
    assert r.response.headers.get("content-encoding") == "gzip"
    assert entries(r, "tools/list") == TOOLS
    r = listing(gw, "tools/list", headers={"x-test-broken-list": "1"}, agent="agent-b")
    assert r.status == 200 and len(r.executed) == 1, r
    assert r.response.body == direct(gw, r, "tools/list", headers={"x-test-broken-list": "1"}).body
    assert counters(gw) == before


def test_a_plan_change_applies_to_the_next_list(gateway):
    gw = gateway(callers_policy())
    assert entries(listing(gw, "tools/list", agent="agent-b"), "tools/list") == ["get-sum"]
    wider = policy("agents", rule("a-any", source=sa("a")),
                   rule("b-more", source=sa("b"), mcp=mcp_match(("tools/call", ["get-sum", "echo", "get-time"]),
                                                                base=True)))
    gw.rerender([wider])
    wait_for(lambda: entries(listing(gw, "tools/list", agent="agent-b"), "tools/list") != ["get-sum"], timeout=10,
             interval=0.1, what="the wider plan")
    r = listing(gw, "tools/list", agent="agent-b")
    assert_filtered(gw, r, "tools/list", ["get-sum", "echo", "get-time"])
    assert gw.decision(r) == "allow gateway=default/agents:b-more backend=- list=filtered removed=9/12"
    # Turning list filtering off is a plan change too.
    gw.rerender(extra_args=["--list-filtering", "off"])
    wait_for(lambda: len(entries(listing(gw, "tools/list", agent="agent-b"), "tools/list")) == 12, timeout=10,
             interval=0.1, what="the plan without list filtering")
    assert_denied(gw.call("uppercase", {"text": "x"}, agent="agent-b"))   # lists unfiltered, calls still judged
    # And on again.
    gw.rerender()
    wait_for(lambda: entries(listing(gw, "tools/list", agent="agent-b"), "tools/list") == ["get-sum", "echo", "get-time"],
             timeout=10, interval=0.1, what="list filtering on again")


# ---- the module without the response callbacks ----------------------------------------------------

NO_LISTS = harness.REPO / "target/wasm32-wasip1/release/toolgate_filter_no_list_filtering.wasm"
NO_LISTS_REFUSAL = ("REFUSED plan (settings.listFiltering is on, but this module was built without the response "
                    "callbacks (toolgate_filter_no_list_filtering.wasm)")


@pytest.fixture
def no_lists_wasm(wasm_path):
    if not NO_LISTS.exists():
        pytest.fail(f"{NO_LISTS} not built (`make wasm` builds it beside {wasm_path.name})")
    return NO_LISTS


def test_the_module_without_response_callbacks_serves_plans_without_list_filtering(gateway, no_lists_wasm):
    """toolgate_filter_no_list_filtering.wasm exports no response callback (Envoy makes no response call into
    the VM) and enforces a plan rendered with --list-filtering off like toolgate_filter.wasm does."""
    module = no_lists_wasm.read_bytes()
    assert b"proxy_on_request_body" in module and b"proxy_on_response_" not in module
    gw = gateway(callers_policy(), render_args=["--list-filtering", "off"], wasm=no_lists_wasm)
    assert_allowed(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("echo", agent="agent-b"))
    assert_every_list_unchanged(gw, "agent-b")


def test_the_module_without_response_callbacks_refuses_a_plan_that_filters_lists(gateway, no_lists_wasm):
    """Lists must never pass unfiltered because the module cannot see responses: a plan with list filtering
    on is refused (no plan yet: every request denied; a plan in force: kept), said in Envoy's log."""
    gw = gateway(callers_policy(), wasm=no_lists_wasm)
    for r in (listing(gw, "tools/list", agent="agent-b"), gw.call("get-sum", agent="agent-b")):
        assert_denied(r, id=None)
        assert gw.decision(r) == "deny: no valid plan loaded"
    assert gw.server.executed() == []
    gw.envoy.wait_for_log(NO_LISTS_REFUSAL)
    # Rendered with --list-filtering off, the same policies apply.
    gw.rerender(extra_args=["--list-filtering", "off"])
    wait_for(lambda: gw.call("get-sum", agent="agent-b").executed, timeout=10, interval=0.1, what="the plan")
    assert_denied(gw.call("echo", agent="agent-b"))
    # A new plan with list filtering on: refused, the plan in force (lists unfiltered, calls judged) kept.
    gw.rerender([policy("agents", rule("b-echo", source=sa("b"), mcp=mcp_match(("tools/call", ["echo"]), base=True)))])
    wait_for(lambda: "REFUSED new plan (settings.listFiltering is on" in gw.envoy.log_path.read_text(errors="replace"),
             timeout=10, interval=0.1, what="the refusal")
    assert entries(listing(gw, "tools/list", agent="agent-b"), "tools/list") == TOOLS
    assert_denied(gw.call("echo", agent="agent-b"))
