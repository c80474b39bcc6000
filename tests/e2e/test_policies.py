"""End-to-end tests of XAccessPolicy enforcement through the real pipeline: policy objects written as
YAML -> `toolgate render` -> Envoy with the Toolgate filter -> the sample MCP server (docs/semantics.md §2-§5).
Each test asserts the HTTP answer, its body, and the MCP server's execution log."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

import harness
from harness import assert_allowed, assert_denied, policy, sa, spiffe, tools_call_rule, wait_for

BOTH = {"https": "HTTPS", "http": "HTTP"}
SA_A = "spiffe://cluster.local/ns/default/sa/a"
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}


def is_denial(sent: harness.Sent) -> bool:
    r = sent.response
    return r is not None and r.headers.get("content-type") == "application/json" and \
        r.json() in (harness.denial_body(sent.id), harness.denial_body(None))


def test_no_policy_allows_everything(gateway):
    gw = gateway(listeners=BOTH)
    for listener, agent in (("https", "agent-a"), ("https", "agent-b"), ("https", "agent-nospiffe"), ("http", None)):
        r = gw.call("get-sum", listener=listener, agent=agent)
        assert_allowed(r)
        assert r.json()["result"]["content"][0]["text"] == "5"
        assert_allowed(gw.call("echo", listener=listener, agent=agent))
        assert_allowed(gw.call("get-env", {"name": "HOME"}, listener=listener, agent=agent))
        assert_allowed(gw.rpc("initialize", INIT, listener=listener, agent=agent))
        assert_allowed(gw.rpc("prompts/get", {"name": "greeting"}, listener=listener, agent=agent))
        assert_allowed(gw.send("GET", listener=listener, agent=agent))
    # Nothing to decide: the filter lets requests through untouched (no decision counters).
    c = gw.counters()
    assert c.get("toolgate.decision.allow", 0) == 0 and c.get("toolgate.decision.deny.gateway", 0) == 0


def _identity_checks(gw):
    r = gw.call("get-sum", agent="agent-a")
    assert_allowed(r)
    assert r.json() == {"jsonrpc": "2.0", "id": r.id,
                        "result": {"content": [{"type": "text", "text": "5"}], "isError": False}}
    assert r.executed[0]["tool"] == "get-sum"
    # Another tool: JSON-RPC error with the request id, HTTP 200, never executed.
    assert_denied(gw.call("echo", agent="agent-a"))
    assert_denied(gw.call("get-env", {"name": "HOME"}, agent="agent-a", id=77))
    # Other callers: b, a certificate without a SPIFFE ID, no certificate on the HTTP listener.
    assert_denied(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("get-sum", agent="agent-nospiffe"))
    assert_denied(gw.call("get-sum", agent=None, listener="http"))
    assert_denied(gw.call("get-sum", agent="agent-a", listener="http"))  # plain HTTP: no identity either
    # A client-sent x-forwarded-client-cert in the shape Envoy writes is no identity either.
    xfcc = {"x-forwarded-client-cert": f"By=spiffe://cluster.local/ns/default/sa/gw;Hash={'ab' * 32};URI={SA_A}"}
    assert_denied(gw.call("get-sum", agent=None, listener="http", headers=xfcc))  # headers are no identity
    assert_denied(gw.call("get-sum", agent="agent-b", headers=xfcc))
    # A certificate from another CA claiming a's SPIFFE ID: refused in the TLS handshake.
    r = gw.call("get-sum", agent="other-agent-a")
    assert r.response is None and r.error is not None, r
    assert r.executed == [] and r.upstream_requests == 0
    r = gw.call("get-sum", agent=None)  # no client certificate on the mTLS listener
    assert r.response is None and r.error is not None, r
    assert gw.server.executed_tools() == ["get-sum"]


def test_gateway_allow_service_account(gateway):
    gw = gateway(policy("sum-for-a", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH)
    _identity_checks(gw)


def test_gateway_allow_spiffe_source(gateway):
    gw = gateway(policy("sum-for-a", tools_call_rule("a-sum", ["get-sum"], source=spiffe(SA_A))), listeners=BOTH)
    _identity_checks(gw)
    assert gw.decision(gw.call("get-sum")) == "allow gateway=default/sum-for-a:a-sum backend=-"


def test_source_matching_is_exact(gateway):
    """serviceAccount.namespace other than the policy's does not match a's certificate (ns default);
    SPIFFE IDs compare case-sensitively."""
    gw = gateway(policy("p", tools_call_rule("other-ns", ["get-sum"], source=sa("a", "other"))))
    assert_denied(gw.call("get-sum", agent="agent-a"))
    gw.rerender([policy("p", tools_call_rule("upper", ["echo"], source=spiffe(SA_A[:-1] + "A")),
                        tools_call_rule("same-ns", ["get-sum"], source=sa("a", "default")))])
    wait_for(lambda: gw.call("get-sum").executed, timeout=10, interval=0.1, what="the new policy")
    assert_denied(gw.call("echo", agent="agent-a"))


def test_base_protocol_methods(gateway):
    gw = gateway(policy("base", tools_call_rule("a-sum", ["get-sum"], source=sa("a"), base=True)))
    session = {"mcp-session-id": "0123456789abcdef"}
    for agent in ("agent-a", "agent-b"):
        check = assert_allowed if agent == "agent-a" else assert_denied
        check(gw.rpc("initialize", INIT, agent=agent))
        check(gw.rpc("ping", agent=agent))
        check(gw.rpc("tools/list", agent=agent))
        check(gw.rpc("completion/complete", {"ref": {"type": "ref/prompt", "name": "greeting"},
                                             "argument": {"name": "name", "value": "x"}}, agent=agent))
        check(gw.rpc("logging/setLevel", {"level": "info"}, agent=agent))
        note = gw.rpc("notifications/initialized", id=None, agent=agent)
        response = gw.post({"jsonrpc": "2.0", "id": 5, "result": {}}, agent=agent)  # client-sent response
        get = gw.send("GET", agent=agent)
        delete = gw.send("DELETE", headers=session, agent=agent)
        if agent == "agent-a":
            assert note.status == 202 and len(note.executed) == 1, note  # passed through, not 403
            assert response.status == 202 and len(response.executed) == 1, response
            assert_allowed(get)
            assert get.response.headers["content-type"] == "text/event-stream"
            assert_allowed(delete)
        else:
            for r in (note, response, get, delete):
                assert_denied(r, id=None)  # HTTP 403, "id": null
        check(gw.call("get-sum", agent=agent))
        # The base protocol does not include other tools, prompts or resources.
        assert_denied(gw.call("echo", agent=agent))
        assert_denied(gw.rpc("prompts/list", agent=agent))
        assert_denied(gw.rpc("resources/read", {"uri": "memo://insights"}, agent=agent))
    # DELETE without a session id is not the session close: not base protocol.
    assert_denied(gw.send("DELETE", agent="agent-a"), id=None)


def test_skip_base_protocol_methods(gateway):
    gw = gateway(policy("skip", tools_call_rule("a-sum", ["get-sum"], source=sa("a"), base=False)))
    assert_denied(gw.rpc("initialize", INIT))
    assert_denied(gw.rpc("ping"))
    assert_denied(gw.rpc("tools/list"))
    assert_denied(gw.rpc("notifications/initialized", id=None), id=None)
    assert_denied(gw.send("GET"), id=None)
    assert_allowed(gw.call("get-sum"))


def test_backend_level_only(gateway):
    gw = gateway(policy("backend-sum", tools_call_rule("a-sum", ["get-sum"], source=sa("a")), target="backend"))
    assert_allowed(gw.call("get-sum"))
    echo = gw.call("echo")
    assert_denied(echo)
    assert_denied(gw.call("get-sum", agent="agent-b"))
    assert gw.decision(echo).startswith("deny backend")


def test_gateway_level_only(gateway):
    gw = gateway(policy("gw-sum", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))))
    assert_allowed(gw.call("get-sum"))
    echo = gw.call("echo")
    assert_denied(echo)
    assert gw.decision(echo).startswith("deny gateway")


def test_gateway_and_backend_levels_both_apply(gateway):
    gw = gateway(policy("gw-echo", tools_call_rule("echo", ["echo"], source=sa("a"))),
                 policy("be-sum", tools_call_rule("sum", ["get-sum"], source=sa("a")), target="backend"))
    before = gw.counters()
    s, e = gw.call("get-sum"), gw.call("echo")
    assert_denied(s)
    assert_denied(e)
    assert gw.decision(s).startswith("deny gateway")
    assert gw.decision(e).startswith("deny backend")
    after = gw.counters()
    delta = lambda k: after.get(k, 0) - before.get(k, 0)  # noqa: E731
    assert delta("toolgate.decision.deny.gateway") == 1
    assert delta("toolgate.decision.deny.backend") == 1
    assert delta("toolgate.decision.allow") == 0


def test_policy_change_applies_without_restart(gateway):
    gw = gateway(policy("p", tools_call_rule("a-tools", ["get-sum"], source=sa("a"))))
    pid = gw.envoy.proc.pid
    assert_denied(gw.call("echo"))
    assert_allowed(gw.call("get-sum"))

    gw.rerender([policy("p", tools_call_rule("a-tools", ["get-sum", "echo"], source=sa("a")))])
    wait_for(lambda: not is_denial(gw.call("echo")), timeout=10, interval=0.1, what="echo to be allowed")
    assert_allowed(gw.call("echo"))
    assert_allowed(gw.call("get-sum"))
    assert_denied(gw.call("echo", agent="agent-b"))

    # And back: a narrower policy closes access again, still without a restart.
    gw.rerender([policy("p", tools_call_rule("a-tools", ["echo"], source=sa("a")))])
    wait_for(lambda: is_denial(gw.call("get-sum")), timeout=10, interval=0.1, what="get-sum to be denied")
    assert_denied(gw.call("get-sum"))
    assert_allowed(gw.call("echo"))
    # Removing every policy opens the route.
    gw.rerender([])
    wait_for(lambda: not is_denial(gw.call("get-env", {"name": "HOME"})), timeout=10, interval=0.1,
             what="no policy")
    assert gw.envoy.running and gw.envoy.proc.pid == pid


def test_two_allow_policies_are_ored_even_with_the_same_rule_name(gateway):
    new, old = "2026-01-01T00:00:00Z", "2020-01-01T00:00:00Z"
    gw = gateway(policy("p1", tools_call_rule("r", ["get-sum", "get-env"], source=sa("a")), creation=new),
                 policy("p2", tools_call_rule("r", ["echo"], source=sa("b")), creation=new),
                 policy("zz-old", tools_call_rule("r", ["get-sum"], source=sa("a")), creation=old))
    s = gw.call("get-sum", agent="agent-a")
    v = gw.call("get-env", {"name": "HOME"}, agent="agent-a")
    e = gw.call("echo", agent="agent-b")
    for r in (s, v, e):
        assert_allowed(r)
    assert_denied(gw.call("echo", agent="agent-a"))
    assert_denied(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("get-env", {"name": "HOME"}, agent="agent-b"))
    # The deciding rule: policies in creationTimestamp order, then namespace/name (docs/semantics.md §2).
    assert gw.decision(s) == "allow gateway=default/zz-old:r backend=-"
    assert gw.decision(v) == "allow gateway=default/p1:r backend=-"
    assert gw.decision(e) == "allow gateway=default/p2:r backend=-"


def test_ored_policies_at_backend_level(gateway):
    gw = gateway(policy("b1", tools_call_rule("r", ["get-sum"]), target="backend"),
                 policy("b2", tools_call_rule("r", ["echo"]), target="backend"))
    assert_allowed(gw.call("get-sum"))
    assert_allowed(gw.call("echo"))
    assert_denied(gw.call("get-env", {"name": "HOME"}))


def test_policy_without_rules_allows_its_level(gateway):
    """docs/semantics.md §3 / §9.10: an Allow policy without rules allows everything at its level, even beside others."""
    gw = gateway(policy("narrow", tools_call_rule("r", ["get-sum"], source=sa("a"))), policy("open"))
    assert_allowed(gw.call("echo", agent="agent-b"))
    assert_allowed(gw.send("GET", agent="agent-b"))


def test_section_name_limits_policy_to_one_listener(gateway):
    gw = gateway(policy("http-only", tools_call_rule("r", ["get-sum"]), section="http"), listeners=BOTH)
    assert_denied(gw.call("echo", listener="http", agent=None))
    assert_allowed(gw.call("get-sum", listener="http", agent=None))
    assert_allowed(gw.call("echo", listener="https", agent="agent-b"))


def test_https_listener_without_frontend_ca(gateway, certs):
    """No spec.tls.frontend CA: no client certificate is requested, so callers have no identity and
    sourced rules never match (render warns); `--client-ca` supplies the CA (docs/semantics.md §3)."""
    p = policy("sum-for-a", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))
    gw = gateway(p, https_client_ca=False, name="no-ca")
    assert "does not request client" in gw.last_render.stderr, gw.last_render.stderr
    assert_denied(gw.call("get-sum", agent="agent-a"))
    assert_denied(gw.call("get-sum", agent=None))
    gw2 = gateway(p, https_client_ca=False, render_args=["--client-ca", str(certs / "ca.crt")], name="client-ca")
    assert_allowed(gw2.call("get-sum", agent="agent-a"))
    assert_denied(gw2.call("get-sum", agent="agent-b"))
    r = gw2.call("get-sum", agent="other-agent-a")
    assert r.response is None and r.error is not None and r.executed == [], r


def test_trust_domain_setting(gateway):
    gw = gateway(policy("sum-for-a", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))),
                 render_args=["--trust-domain", "example.org"])
    assert_denied(gw.call("get-sum", agent="agent-a"))  # a is spiffe://cluster.local/..., not example.org


def curl_h2c(url: str, body: dict) -> tuple[int, str]:
    """POST over HTTP/2 without TLS (prior knowledge), with curl (http.client has no HTTP/2)."""
    out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "-", "-w", "\\n%{http_code} %{http_version}",
                          "-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream",
                          "--data-binary", json.dumps(body), url], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    text, _, status = out.stdout.rpartition("\n")
    code, version = status.split()
    assert version == "2", status
    return int(code), text


def test_http2_requests_are_decided_the_same(gateway):
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"})
    url = gw.http_url
    code, text = curl_h2c(url + "?h2=1", harness.jsonrpc("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}, id=1))
    assert code == 200 and json.loads(text)["result"]["content"][0]["text"] == "5", text
    code, text = curl_h2c(url + "?h2=2", harness.jsonrpc("tools/call", {"name": "echo", "arguments": {"message": "x"}}, id="e"))
    assert (code, json.loads(text)) == (200, harness.denial_body("e"))
    code, text = curl_h2c(url + "?h2=3", [harness.jsonrpc("tools/call", {"name": "get-sum"}, id=3),
                                          harness.jsonrpc("tools/call", {"name": "get-env"}, id=4)])
    assert (code, json.loads(text)) == (403, harness.denial_body(None))
    assert [e["path"] for e in gw.server.executed()] == ["/mcp?h2=1"]


def test_frontend_ca_per_port(gateway):
    p = policy("sum-for-a", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))
    gw = gateway(p, listeners={"https": "HTTPS", "https2": "HTTPS"}, https_client_ca=["https2"], strict=True)
    assert_allowed(gw.call("get-sum", listener="https2"))
    r = gw.call("get-sum", listener="https2", agent=None)
    assert r.response is None and r.error is not None, r  # client certificate required there
    assert_denied(gw.call("get-sum", listener="https"))  # no client certificate requested: no identity


def nghttp_with_trailer(url: str, body: bytes, tmp_path) -> tuple[int, bytes]:
    """POST over HTTP/2 (h2c) whose body ends with a trailer field, so the body callback never sees
    end_of_stream (nghttp from Debian's nghttp2-client; http.client and curl cannot send trailers)."""
    data = tmp_path / "body.json"
    data.write_bytes(body)
    out = subprocess.run(["nghttp", "-v", "--no-content-length", "-d", str(data), "--trailer", "x-end: 1",
                          "-H", "content-type: application/json", url],
                         capture_output=True, timeout=20)
    status = re.search(rb":status: (\d+)", out.stdout)
    assert status, out.stdout.decode(errors="replace") + out.stderr.decode(errors="replace")
    assert b"x-end" in out.stdout, "the request must really carry a trailer"
    # -v prints frames as "[  0.003] ..." lines (not always after a newline: the body has none) and
    # their fields indented; the response body is what is left.
    text = re.sub(rb"\[\s*\d+\.\d+\][^\n]*\n?|\s+; END_STREAM", b"", out.stdout)
    body = b"".join(line for line in text.splitlines(keepends=True) if line.strip() and not line.startswith((b" ", b"\t")))
    return int(status.group(1)), body


def test_body_ending_with_trailers_is_decided_not_passed_through(gateway, tmp_path):
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"})
    denied = json.dumps(harness.jsonrpc("tools/call", {"name": "get-env", "arguments": {"name": "HOME"}}, id=7)).encode()
    status, body = nghttp_with_trailer(gw.http_url + "?t=deny", denied, tmp_path)
    assert status == 200 and json.loads(body) == harness.denial_body(7), body
    allowed = json.dumps(harness.jsonrpc("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}, id=8)).encode()
    status, body = nghttp_with_trailer(gw.http_url + "?t=allow", allowed, tmp_path)
    assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "5", body
    assert [e["path"] for e in gw.server.executed()] == ["/mcp?t=allow"]
