"""Real-client interop (issue 13): the official MCP Python SDK (`mcp` 2.3.0, pinned in requirements.txt),
its client and a server built with it, through Toolgate (real Envoy, the real filter .wasm, mTLS with the
test PKI's agent certificates), in the client's three modes: "auto" (probes server/discover, falls back to
initialize), "legacy" (the 2025-11-25 initialize handshake, sessions, the GET stream) and "2026-07-28"
(pinned, no probe).

The policy lets agent-a (spiffe://cluster.local/ns/default/sa/a) use the base methods (MATCH), the tools
`add`, `ünïcødé-sum`, `slow` and `touch`, the prompt `grüße`, reading and subscribing to memo://watched;
everything else is denied. Non-ASCII names travel base64-encoded in Mcp-Name (2026-07-28), which Toolgate
must decode and compare with the body, and the SDK server checks again.

The long cases run concurrently in one test (about 62 s): a 20 s tool call, and a 2025-11-25 session whose
GET stream stays idle for 60 s and is still the same stream afterwards."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import anyio
import pytest
from mcp.shared.exceptions import MCPError

import harness
import sdk_interop as si
from harness import mcp_match, policy, rule, sa

MODES = ["auto", "legacy", "2026-07-28"]
DENIAL = harness.DENIAL_MESSAGE

# resources/subscribe and listen-less sessions are what a 2025-11-25 client does.
pytestmark = pytest.mark.filterwarnings("ignore:.*removed as of 2026-07-28")


@pytest.fixture(scope="module")
def interop(tmp_path_factory, certs, wasm_path):
    """The SDK server behind one Toolgate gateway (HTTPS listener requiring agent certificates)."""
    harness.toolgate_binary()
    server = si.SdkServer().start()
    pol = policy("interop", rule(
        "agent-a", source=sa("a"),
        mcp=mcp_match(("tools/call", si.ALLOWED_TOOLS), "prompts/list", ("prompts/get", [si.ALLOWED_PROMPT]),
                      "resources/list", ("resources/read", [si.WATCHED]), ("resources/subscribe", [si.WATCHED]),
                      base=True)))
    gw = None
    try:
        gw = si.start_gateway(tmp_path_factory.mktemp("interop"), certs, wasm_path, server, pol)
        yield gw, server
    finally:
        if gw is not None:
            gw.stop()
        server.stop()


async def _denied(coro) -> MCPError:
    with pytest.raises(MCPError) as exc:
        await coro
    assert exc.value.code == 403 and exc.value.message == DENIAL, exc.value
    return exc.value


def _mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError in an exception (the SDK raises from task groups, so it may be in a group)."""
    if isinstance(exc, MCPError):
        return exc
    for sub in getattr(exc, "exceptions", ()):
        if (found := _mcp_error(sub)) is not None:
            return found
    return None


def _text(result) -> str:
    assert not result.is_error, result
    return result.content[0].text


@pytest.mark.parametrize("mode", MODES)
def test_sdk_client_through_toolgate(interop, mode):
    gw, server = interop
    decisions_before = len(si.access_lines(gw))

    async def scenario():
        async with si.client(gw, mode) as c:
            # auto: the server/discover probe is a base method, so the client stays on 2026-07-28
            # instead of silently falling back to the handshake.
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            if mode != "2026-07-28":   # pinned without a prior discover: the client knows no server info
                assert c.server_info is not None and c.server_info.name == "toolgate-interop"

            tools = await c.list_tools()
            assert {"add", "ünïcødé-sum"} <= {t.name for t in tools.tools}
            server.executed.clear()
            assert _text(await c.call_tool("add", {"a": 2, "b": 3})) == "5"
            assert _text(await c.call_tool("ünïcødé-sum", {"a": 4, "b": 5})) == "9"
            for name in si.DENIED_TOOLS:                       # ASCII and non-ASCII names
                await _denied(c.call_tool(name, {}))
            # The denial is an ordinary JSON-RPC error: the session goes on.
            assert _text(await c.call_tool("add", {"a": 20, "b": 22})) == "42"
            assert server.executed == ["add", "ünïcødé-sum", "add"], server.executed

            prompts = await c.list_prompts()
            assert si.ALLOWED_PROMPT in {p.name for p in prompts.prompts}
            got = await c.get_prompt(si.ALLOWED_PROMPT, {"who": "Agent"})
            assert got.messages[0].content.text == "Grüße, Agent!"
            await _denied(c.get_prompt(si.DENIED_PROMPT, {}))
            read = await c.read_resource(si.WATCHED)
            assert read.contents[0].text == "watched memo"
            await _denied(c.read_resource(si.FORBIDDEN))

            if mode == "legacy":
                # Allowed through to the SDK server, which does not implement resources/subscribe.
                with pytest.raises(MCPError) as exc:
                    await c.subscribe_resource(si.WATCHED)
                assert exc.value.code == -32601, exc.value
                await _denied(c.subscribe_resource(si.FORBIDDEN))
                with pytest.raises(Exception):   # no listen on a 2025-11-25 session
                    async with c.listen(tools_list_changed=True):
                        pass
            else:
                # subscriptions/listen: list changes are base; the URI is allowed as a resources/subscribe.
                async with c.listen(tools_list_changed=True, resource_subscriptions=[si.WATCHED]) as sub:
                    assert sub.honored.tools_list_changed and sub.honored.resource_subscriptions == [si.WATCHED]
                    assert _text(await c.call_tool("touch", {})) == "touched"
                    events = []
                    with anyio.fail_after(15):
                        async for event in sub:
                            events.append(type(event).__name__)
                            if len(events) == 2:
                                break
                    assert sorted(events) == ["ResourceUpdated", "ToolsListChanged"], events
                # One forbidden URI among allowed ones denies the whole listen.
                await _denied(c.listen(resource_subscriptions=[si.WATCHED, si.FORBIDDEN]).__aenter__())
                assert _text(await c.call_tool("add", {"a": 1, "b": 1})) == "2"
            assert "secret" not in server.executed and "geheimnis-ß" not in server.executed

    anyio.run(scenario)
    # Denied: two tools, the prompt, the resource, and the subscription (listen or resources/subscribe)
    # with a forbidden URI. (Envoy writes its access log about once a second.)
    # A 2025-11-25 session's GET stream ends last (after the DELETE): wait for its line too.
    last = ['"DELETE /mcp"', '"GET /mcp"'] if mode == "legacy" else ["toolgate="]
    harness.wait_for(lambda: sum('toolgate="deny' in ln for ln in si.access_lines(gw)[decisions_before:]) >= 5
                     and all(any(x in ln for ln in si.access_lines(gw)[decisions_before:]) for x in last),
                     timeout=10, what="the access-log lines")
    # No further line of the scenario can come after a later request's (Envoy writes them in order):
    # a marker request, and the scenario's lines are those before its line.
    marker = gw.rpc("ping")
    si.wait_access_line(gw, lambda ln: marker.tag in ln)
    lines = si.access_lines(gw)[decisions_before:]
    lines = lines[:next(i for i, ln in enumerate(lines) if marker.tag in ln)]
    denied = [ln for ln in lines if 'toolgate="deny' in ln]
    assert len(denied) == 5, "\n".join(lines)
    assert all("peer=spiffe://cluster.local/ns/default/sa/a" in ln for ln in lines), "\n".join(lines)
    if mode == "legacy":
        assert any('"GET /mcp"' in ln for ln in lines), "the 2025-11-25 client opened its GET stream"
        assert any('"DELETE /mcp" 200' in ln for ln in lines), "and closed its session"
    else:
        assert not any('"GET /mcp"' in ln or '"DELETE /mcp"' in ln for ln in lines), "\n".join(lines)


def test_sdk_client_without_a_certificate_is_refused(interop):
    gw, _ = interop

    async def scenario():
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        ctx = harness.tls_context(ca=gw.certs / "ca.crt")
        http = httpx2.AsyncClient(verify=ctx, timeout=httpx2.Timeout(10))
        async with Client(streamable_http_client(gw.url, http_client=http), mode="2026-07-28") as c:
            await c.list_tools()

    with pytest.raises(BaseException):   # the TLS handshake fails: the listener requires a client certificate
        anyio.run(scenario)


def test_sdk_client_of_another_agent_is_denied_everything(interop):
    gw, server = interop

    async def scenario():
        # agent-b has no rule: even the discover probe is denied, so auto falls back to initialize,
        # which is denied too; the client sees the 403 error.
        with pytest.raises(BaseException) as exc:
            async with si.client(gw, "auto", agent="agent-b"):
                pass
        err = _mcp_error(exc.value)
        assert err is not None and err.code == 403 and err.message == DENIAL, exc.value
        async with si.client(gw, "2026-07-28", agent="agent-b") as c:
            await _denied(c.call_tool("add", {"a": 1, "b": 2}))

    server.executed.clear()
    anyio.run(scenario)
    assert server.executed == []


def _start_time(line: str) -> datetime:
    m = re.match(r"\[([^\]]+)\]", line)
    assert m, line
    return datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))


def test_long_tool_call_and_idle_get_stream(interop):
    """A 20 s tool call (2026-07-28) and a 2025-11-25 session idle for 60 s, at the same time: neither is cut
    by a route timeout; the session's GET stream is the same one before and after (no reconnect) and the
    session still works."""
    gw, server = interop
    start_lines = len(si.access_lines(gw))
    results: dict[str, object] = {}

    async def long_call():
        async with si.client(gw, "2026-07-28") as c:
            t0 = si.now()
            results["slow"] = _text(await c.call_tool("slow", {"seconds": 20}, read_timeout_seconds=60))
            results["slow_s"] = si.now() - t0

    async def idle_session():
        async with si.client(gw, "legacy") as c:
            assert _text(await c.call_tool("add", {"a": 1, "b": 1})) == "2"
            await anyio.sleep(60)  # the idle period under test (no request on the session), not a wait
            # Still open: a finished GET would have its access-log line.
            gets = [ln for ln in si.access_lines(gw)[start_lines:] if '"GET /mcp"' in ln]
            results["gets_after_idle"] = gets
            assert _text(await c.call_tool("add", {"a": 30, "b": 12})) == "42"

    t0 = datetime.now(timezone.utc)

    async def both():
        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            tg.start_soon(idle_session)

    anyio.run(both)
    assert results["slow"] == "slept 20.0" or results["slow"] == "slept 20", results
    assert 19.5 <= results["slow_s"] < 40, results
    assert results["gets_after_idle"] == [], results
    # After the client closed its session, the one GET stream's line is there, started at the beginning.
    get_line = si.wait_access_line(gw, lambda ln: '"GET /mcp"' in ln and _start_time(ln) >= t0.replace(microsecond=0))
    gets = [ln for ln in si.access_lines(gw)[start_lines:] if '"GET /mcp"' in ln]
    assert len(gets) == 1, gets
    assert '"GET /mcp" 200' in get_line, get_line
    assert (datetime.now(timezone.utc) - _start_time(get_line)).total_seconds() >= 60, get_line
    assert "slow" in server.executed


@pytest.mark.parametrize("mode", MODES)
def test_sdk_client_with_the_sample_server(gateway, mode):
    """The SDK client against Toolgate's own sample server (tests/mcp-server), which speaks both revisions:
    the real exchange of each revision that the other e2e tests imitate."""
    gw = gateway(policy("p", rule("a", source=sa("a"), mcp=mcp_match(
        ("tools/call", ["get-sum"]), ("resources/read", ["memo://insights"]),
        ("resources/subscribe", ["memo://insights"]), base=True))))
    notify = f"http://{gw.server.address}/notify"

    async def scenario():
        async with si.client(gw, mode) as c:
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tools = await c.list_tools()
            assert [t.name for t in tools.tools] == ["get-sum"]   # list filtering: what a may call
            assert _text(await c.call_tool("get-sum", {"a": 40, "b": 2})) == "42"
            await _denied(c.call_tool("echo", {"message": "hi"}))
            assert (await c.read_resource("memo://insights")).contents[0].text.startswith("Insights memo")
            if mode == "legacy":
                return
            async with c.listen(tools_list_changed=True, resource_subscriptions=["memo://insights"]) as sub:
                assert sub.honored.resource_subscriptions == ["memo://insights"]
                status, _, body = harness.request("POST", notify, {"tools": True, "uri": "memo://insights"})
                assert status == 200 and b'"delivered":2' in body, body
                events = []
                with anyio.fail_after(15):
                    async for event in sub:
                        events.append(type(event).__name__)
                        if len(events) == 2:
                            break
                assert events == ["ToolsListChanged", "ResourceUpdated"], events

    anyio.run(scenario)
    executed = [(e["jsonrpc_method"], e["name"]) for e in gw.server.executed()]
    assert ("tools/call", "get-sum") in executed and ("tools/call", "echo") not in executed, executed
    if mode != "legacy":
        assert ("server/discover", None) in executed or mode == "2026-07-28", executed
        assert ("subscriptions/listen", None) in executed, executed
        listen = [e for e in gw.server.executed() if e["jsonrpc_method"] == "subscriptions/listen"][0]
        # What the SDK client sent, checked by the sample server and by Toolgate before it.
        assert listen["headers"]["mcp-method"] == "subscriptions/listen"
        assert listen["headers"]["mcp-protocol-version"] == "2026-07-28"


@pytest.mark.parametrize("mode", MODES)
def test_sdk_list_tools_holds_what_the_agent_may_call(gateway, mode):
    """List filtering (docs/semantics.md §5) as a real client sees it, through the sample server's twelve tools: agent-b,
    allowed get-sum alone at the gateway level, lists get-sum alone; agent-a, allowed anything, lists all.
    The SDK's HTTP client accepts gzip; the filter takes accept-encoding off list requests, so the server
    answers them uncompressed and the filter can read them."""
    gw = gateway(policy("p", rule("a", source=sa("a")),
                        rule("b", source=sa("b"), mcp=mcp_match(("tools/call", ["get-sum"]), base=True))))

    async def scenario():
        async with si.client(gw, mode, agent="agent-b") as c:
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert [t.name for t in (await c.list_tools()).tools] == ["get-sum"]
            assert _text(await c.call_tool("get-sum", {"a": 40, "b": 2})) == "42"
            await _denied(c.call_tool("echo", {"message": "hi"}))
        async with si.client(gw, mode, agent="agent-a") as c:
            names = [t.name for t in (await c.list_tools()).tools]
            assert len(names) == 12 and names[:3] == ["get-sum", "echo", "get-env"], names

    anyio.run(scenario)
    lists = [e for e in gw.server.executed() if e["jsonrpc_method"] == "tools/list"]
    assert len(lists) == 2, lists
    assert all("accept-encoding" not in e["headers"] for e in lists), lists
    calls = [e for e in gw.server.executed() if e["jsonrpc_method"] == "tools/call"]
    assert calls and all("gzip" in e["headers"].get("accept-encoding", "") for e in calls), calls  # it accepts gzip
