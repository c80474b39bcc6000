"""The TLS server name (SNI) as a matcher (docs/semantics.md §2, §7): where Istio picks a listener by SNI
(HTTPS listeners sharing a port), the plan tells the other listeners' requests apart by the server name
the client asked for, never by its `Host`. Both hosts read it from Envoy (`connection.requested_server_name`),
which Envoy fills from the TLS inspector that Istio's gateways run (render's single-chain listeners have
none, and need none: their plans never match server names), so the test adds one."""

from __future__ import annotations

import json

from harness import assert_allowed, assert_denied, policy, toolgate_plans, tools_call_rule, wait_for, write_json

TLS_INSPECTOR = {"name": "envoy.filters.listener.tls_inspector",
                 "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}}


def server_name_rule(plan):
    """The gateway level: one policy whose only rule matches server names (no hash: content changed)."""
    plan["hash"] = ""
    plan["gateway"]["allow"] = [{"name": "default/by-server-name", "rules": [
        {"name": "other listeners", "http": {"serverNames": [{"exact": "a.example.com"}, {"suffix": ".b.example.com"}]}}]}]
    return json.dumps(plan)


def with_server_names(gw) -> None:
    """The running configuration with a TLS inspector on every listener and `server_name_rule`'s plan."""
    path = gw.dir / "lds.json"
    lds = json.loads(path.read_text())
    for listener in lds["resources"]:
        listener["listener_filters"] = [TLS_INSPECTOR]
    for conf in toolgate_plans(lds):
        conf["value"] = server_name_rule(json.loads(conf["value"]))
    lds["version_info"] = "server-names"
    write_json(path, lds)


def test_rules_match_the_tls_server_name_not_the_host(gateway):
    gw = gateway(policy("p", tools_call_rule("sum", ["get-sum"])), listeners={"https": "HTTPS"})
    with_server_names(gw)
    wait_for(lambda: gw.call("echo", sni="a.example.com").executed, timeout=10, interval=0.1,
             what="the plan matching server names")
    assert_allowed(gw.call("echo", sni="A.Example.com"))
    assert_allowed(gw.call("echo", sni="x.b.example.com"))
    # A Host naming an allowed server name does not stand in for the SNI.
    assert_denied(gw.call("echo", sni="x.example.com", headers={"host": "a.example.com"}))
    assert_denied(gw.call("echo", sni="b.example.com"))
    # localhost: the client's default SNI, matched by no rule.
    assert_denied(gw.call("echo"))
