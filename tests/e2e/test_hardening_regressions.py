"""Regression tests for the known holes of the hardening issue, each in a real Envoy: case-folded keys
(Go's encoding/json reads them as the field), access-log fields a client could forge through the
decision summary, the debug-log line per decision, and header matchers in a plan with many names. On
both hosts (`--host`): none of them is about the Wasm VM."""

from __future__ import annotations

import json

import pytest

from harness import assert_allowed, assert_denied, mcp_match, policy, rule, tools_call_rule, wait_for

HTTP = dict(listener="http", agent=None)


def raw(s: str) -> bytes:
    return s.encode()


@pytest.fixture
def sum_and_base(gateway):
    """Allows tools/call get-sum and the base protocol (client-sent responses included), any caller."""
    return gateway(policy("sum", tools_call_rule("sum", ["get-sum"], base=True)), listeners={"http": "HTTP"})


@pytest.mark.parametrize("body", [
    # Reader saw get-sum; a Go server (case-insensitive, last match wins) runs get-env.
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","Name":"get-env","arguments":{"name":"HOME"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","NAME":"get-env","arguments":{"name":"HOME"}}}',
    # Unicode simple folding: long s in "params", Kelvin-free but escaped capital N.
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},"param\\u017f":{"name":"get-env","arguments":{"name":"HOME"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","\\u004eame":"get-env","arguments":{"name":"HOME"}}}',
    # Read as a client-sent response (a base-protocol message), run as a tool call by such a server.
    '{"jsonrpc":"2.0","id":1,"Method":"tools/call","result":{},"params":{"name":"get-env","arguments":{"name":"HOME"}}}',
    '{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","error":{"code":1,"message":"x"},"params":{"name":"get-env","arguments":{"name":"HOME"}}}',
    # .NET OrdinalIgnoreCase reads a dotless i as I.
    '{"jsonrpc":"2.0","\u0131d":1,"method":"tools/call","params":{"name":"get-env","arguments":{"name":"HOME"}}}',
])
def test_case_folded_keys_are_refused(sum_and_base, body):
    gw = sum_and_base
    r = gw.post(raw(body), **HTTP)
    assert_denied(r, id=None)  # not MCP: only rules without MCP constraints could allow it
    assert "reads as" in gw.decision(r), gw.decision(r)
    # The same calls spelled exactly are decided as usual.
    assert_allowed(gw.call("get-sum", **HTTP))
    assert_denied(gw.call("get-env", **HTTP))


def access_fields(line: str) -> list[str]:
    """The fields after the request line (the status, then `key=value`s), split as a log parser
    would: values may be double-quoted, without escapes."""
    rest = line.split('" ', 1)[1]
    fields, i = [], 0
    while i < len(rest):
        if rest[i] == " ":
            i += 1
            continue
        eq = rest.index("=", i) if "=" in rest[i:] else len(rest)
        if eq + 1 < len(rest) and rest[eq + 1] == '"':
            end = rest.index('"', eq + 2)
            fields.append(rest[i:end + 1])
            i = end + 1
        else:
            end = rest.find(" ", i)
            end = len(rest) if end < 0 else end
            fields.append(rest[i:end])
            i = end
    return fields


def test_clients_cannot_forge_access_log_fields(gateway):
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"})
    forge = 'x" forged="1'
    attempts = [
        # content-encoding value into the summary
        gw.call("get-sum", headers={"content-encoding": forge}, **HTTP),
        gw.call("get-sum", headers={"content-encoding": "gzip\\"}, **HTTP),
        # a duplicate key's name with a quote, a backslash, a newline
        gw.post(raw('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},'
                    '"x\\" forged=\\"1":1,"x\\" forged=\\"1":2}'), **HTTP),
        gw.post(raw('{"a\\nforged-line\\\\":1,"a\\nforged-line\\\\":2}'), **HTTP),
        # a case-folded key with a quote in its escaped spelling
        gw.post(raw('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","N\\u0061me":"x"}}'),
                **HTTP),
    ]
    for r in attempts:
        assert_denied(r, id=None)
        line = gw.access_line(r)
        fields = access_fields(line)
        names = [f.split("=", 1)[0] for f in fields if "=" in f]
        assert names == ["peer", "cluster", "toolgate"], line
        decision = gw.decision(r)
        assert '"' not in decision and "\\" != decision[-1:], line
        assert "body is not MCP" in decision, line
    lines = [l for l in gw.access_log.read_text().splitlines() if l]
    assert not any(l.startswith("forged") for l in lines), lines
    assert all(l.startswith("[") for l in lines), lines


# Envoy's logger the filter writes to: the Wasm VM's, or the dynamic modules'.
LOGGER = {"wasm": "wasm", "native": "dynamic_modules"}


def test_one_debug_line_per_decision(gateway):
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"})
    env = gw.envoy
    log = env.log_path
    logger = LOGGER[gw.host]

    def debug_lines(tag: str) -> list[str]:
        return [l for l in log.read_text(errors="replace").splitlines() if "toolgate: 'POST'" in l and tag in l]

    # At info level (the default) no decision line is written.
    quiet = gw.call("get-sum", **HTTP)
    assert_allowed(quiet)
    # Switching the filter's logger to debug at run time takes effect within a second (the Wasm filter
    # reads the level once a second, not per request; the module asks Envoy per decision).
    status, _, _ = env.admin_post(f"/logging?{logger}=debug")
    assert status == 200
    probes = []
    wait_for(lambda: probes.append(gw.call("get-sum", **HTTP).tag) or any(debug_lines(f"?{t}'") for t in probes) or None,
             timeout=10, interval=0.2, what=f"debug lines after /logging?{logger}=debug")
    allowed = gw.call("get-sum", **HTTP)
    denied = gw.call("echo", **HTTP)
    too_large = gw.post(raw('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get-sum","pad":"'
                            + "x" * (3 * 512 * 1024) + '"}}'), **HTTP)
    assert_allowed(allowed)
    assert_denied(denied)
    assert too_large.status == 413
    for sent, want in [(allowed, "allow gateway=default/sum:sum"), (denied, "deny gateway: tools/call 'echo' matched no rule of default/sum (sum)"),
                       (too_large, "deny: body over the limit")]:
        lines = wait_for(lambda: debug_lines(f"?{sent.tag}'") or None, timeout=5, what=f"debug line for {sent.tag}")
        assert len(lines) == 1, lines
        assert want in lines[0], lines
    assert debug_lines(f"?{quiet.tag}'") == []

    # Back at info, the filter writes no decision line once it has read the level again (the Wasm
    # filter: at its next tick). A line's absence is read only once a later line is in the log, which Envoy writes in
    # order: the admin's own line for setting the level the logger already has (a change of nothing).
    def set_info_line_count() -> int:
        return log.read_text(errors="replace").count(f"change log level: name='{logger}' level='info'")

    def wrote_decision_line(sent) -> bool:
        before = set_info_line_count()
        env.admin_post(f"/logging?{logger}=info")
        wait_for(lambda: set_info_line_count() > before, timeout=5, what="the admin's log line")
        return bool(debug_lines(f"?{sent.tag}'"))

    def quiet_call():
        sent = gw.call("get-sum", **HTTP)
        return None if wrote_decision_line(sent) else sent

    env.admin_post(f"/logging?{logger}=info")
    after = wait_for(quiet_call, timeout=10, interval=0.1, what="a call without a decision line at info")
    assert_allowed(after)
    assert debug_lines(f"?{after.tag}'") == []


def test_header_matchers_in_a_plan_with_many_names(gateway):
    """5 policies of 10 rules (the most a target takes) name 50 headers: the filter finds each by hash
    (no scan that grows with the plan) and decides as the matchers say."""
    policies = [policy(f"p{j}", *[rule(f"r{i}", headers=[{"name": f"x-team-{10 * j + i}", "value": "blue"}])
                                   for i in range(10)]) for j in range(5)]
    gw = gateway(*policies, listeners={"http": "HTTP"})
    assert_allowed(gw.call("get-sum", headers={"x-team-49": "blue"}, **HTTP))
    assert_allowed(gw.call("get-sum", headers={"x-team-0": "blue"}, **HTTP))
    assert_denied(gw.call("get-sum", headers={"x-team-49": "red"}, **HTTP))
    assert_denied(gw.call("get-sum", headers={"x-team-50": "blue"}, **HTTP))
