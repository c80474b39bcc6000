"""What only the dynamic-module host (module/, `make module`) has to show.

- A panic in the module is caught at the hook, the request is denied and counted, and Envoy and the
  next requests are unharmed (the test-only build libtoolgate_module_panic_probe.so, whose
  request-headers hook panics on the header `x-toolgate-panic-probe`; module/Cargo.toml). With
  `x-toolgate-panic-probe: response-headers` or `response-body` a response hook panics while the
  response is an allowed list's: the list is refused, never passed unfiltered.
- Failing closed: a module Envoy cannot load (a missing or corrupt .so) gets the listener update
  rejected, at start (no listener, nothing reaches the MCP server) and later (the configuration in
  force stays); a plan the module refuses is an update Envoy rejects (the last good plan stays in
  force) when one was loaded before, as on the Wasm host (test_plan_updates.py). A refused first
  plan denies every request on both hosts (test_resilience.py).
- What `toolgate render --native-module` writes, as Envoy runs it.

The native counterparts of test_resilience.py's tests about the Wasm VM. Marked `host("native")`:
they run once, in the native run (`--host native`, make suite-e2e-native)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

import harness
from harness import (ENVOY_START_TIMEOUT, REPO, Envoy, ToolgateGateway, assert_allowed, assert_denied, free_port, mcp_match,
                     native_module_path, policy, rule, sa, tcp_open, tools_call_rule, wait_for, write_json)
from plan_push import BOTH, a_good_render_applies, bad_regex, old_decisions_hold, push_plan, tampered, unknown_version

pytestmark = pytest.mark.host("native", reason="the dynamic module itself")

HTTP = dict(listener="http", agent=None)
PROBE = REPO / "target/release/libtoolgate_module_panic_probe.so"
MODULE = native_module_path()
PLUGINS = [f"toolgate:default/gw/{name}" for name in BOTH]


def test_a_panic_denies_the_request_and_envoy_serves_on(gateway):
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"])), listeners={"http": "HTTP"}, native_module=PROBE)
    assert gw.host == "native"
    before = gw.counters()
    panicked = gw.call("get-sum", headers={"x-toolgate-panic-probe": "1"}, **HTTP)
    assert panicked.response is not None, panicked
    assert panicked.status == 500, panicked
    assert panicked.executed == [] and panicked.upstream_requests == 0, panicked
    assert gw.decision(panicked) == "deny: internal error in the module (panic)"
    after = gw.counters()
    assert after.get("toolgate.module.panic", 0) == before.get("toolgate.module.panic", 0) + 1, after
    # The same Envoy, the same module: later requests are decided as before.
    assert gw.envoy.running
    assert_allowed(gw.call("get-sum", **HTTP))
    assert_denied(gw.call("echo", **HTTP))
    # Envoy writes its log asynchronously.
    wait_for(lambda: "panic in on_request_headers" in gw.envoy.log_path.read_text(errors="replace") or None,
             timeout=10, what="the module's log line for the panic")


LIST_ERROR = "Toolgate could not filter the list response: internal error in the module"


def test_a_panic_while_filtering_a_list_never_lets_the_list_through(gateway):
    """List filtering is a confidentiality control (docs/semantics.md §5; issue 38, finding 7): a panic in a
    response hook while the response is an allowed list's refuses the response. From the response headers
    hook, Envoy's 500 replaces it; from the body hook (the list's headers went downstream already), an error
    in place of the body, as the lifecycle answers a list it cannot read: JSON-RPC, or an event in an event
    stream. The server's list (12 tools; the caller may use get-sum) never reaches the client."""
    gw = gateway(policy("sum", tools_call_rule("sum", ["get-sum"]), rule("base", mcp=mcp_match(base=True))),
                 listeners={"http": "HTTP"}, native_module=PROBE)
    before = gw.counters()

    def probe(hook: str, **headers) -> harness.Sent:
        return gw.rpc("tools/list", headers={"x-toolgate-panic-probe": hook, **headers}, **HTTP)

    replaced = probe("response-headers")
    assert replaced.response is not None and replaced.status == 500, replaced
    assert replaced.response.body == b'{"error":"internal error"}', replaced
    assert len(replaced.executed) == 1, replaced  # allowed, run, then refused on the way back
    for sent, sse in ((probe("response-body"), False), (probe("response-body", **{"x-test-sse": "1"}), True)):
        assert sent.response is not None and sent.status == 200, sent
        text = sent.response.body.decode()
        assert sent.response.headers.get("content-type", "").startswith("text/event-stream") == sse, sent.response.headers
        if sse:
            assert text.startswith("event: message\ndata: {") and text.endswith("}\n\n"), text
            text = text[len("event: message\ndata: "):-2]
        body = json.loads(text)
        assert body == {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": LIST_ERROR}}, body
        assert len(sent.executed) == 1, sent
    after = gw.counters()
    for name in ("toolgate.module.panic", "toolgate.list.unreadable"):
        assert after.get(name, 0) == before.get(name, 0) + 3, (name, after)
    # The same module filters the next lists as before.
    listed = gw.rpc("tools/list", **HTTP)
    assert_allowed(listed)
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["get-sum"], listed.json()
    log = gw.envoy.wait_for_log("panic in on_response_body")
    assert "list response refused, replaced by an error: internal error in the module (panic in on_response_headers)" in log


# --------------------------------------------------------------------------------------------------
# A module that cannot load

def module_filters(lds: dict):
    """The dynamic-module filter's typed_config of every listener in an lds.json document."""
    for listener in lds["resources"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                for hf in f["typed_config"].get("http_filters", []):
                    if hf["name"] == "envoy.filters.http.dynamic_modules":
                        yield hf["typed_config"]


def with_module(lds_text: str, module: Path) -> dict:
    """The lds.json document `lds_text` with every listener loading `module` instead."""
    lds = json.loads(lds_text)
    confs = list(module_filters(lds))
    assert confs, "no dynamic-module filter in the rendered configuration"
    for conf in confs:
        conf["dynamic_module_config"]["module"]["local"]["filename"] = str(module)
    lds["version_info"] = f"module-{module.name}"
    return lds


def bad_module(kind: str, tmp_path: Path) -> Path:
    """A .so path Envoy cannot load: none there, the real module cut in half, or not an ELF file."""
    out = tmp_path / f"bad-{kind}" / "libtoolgate_module.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind == "truncated":
        data = MODULE.read_bytes()
        out.write_bytes(data[: len(data) // 2])
    elif kind == "not-elf":
        out.write_bytes(b"this is not a shared object\n" * 64)
    return out


def native_gateway(tmp_path: Path, certs, wasm_path, start_mcp_server) -> ToolgateGateway:
    """A rendered (not started) native gateway: get-sum for agent a on both listeners."""
    if not MODULE.exists():
        pytest.fail(f"{MODULE} not built (make module)")
    server = start_mcp_server("mcp", workdir=tmp_path)
    gw = ToolgateGateway(tmp_path / "gw", certs, wasm_path, server, listeners=BOTH, host="native", native_module=MODULE)
    gw.policies = [policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a")))]
    gw.ports = {name: free_port() for name in gw.listener_protocols}
    gw.render()
    return gw


@pytest.mark.parametrize("kind", ["missing", "not-elf"])
def test_a_module_that_cannot_load_serves_nothing(tmp_path, certs, wasm_path, start_mcp_server, start_envoy, kind):
    gw = native_gateway(tmp_path, certs, wasm_path, start_mcp_server)
    good = (gw.dir / "lds.json").read_text()
    module = bad_module(kind, tmp_path)
    write_json(gw.dir / "lds.json", with_module(good, module))
    gw.envoy = start_envoy(gw.dir / "envoy.json", workdir=gw.workdir)
    # Envoy starts (the listeners come over LDS), rejects the listener update whole, and keeps running.
    wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") >= 1, timeout=10, what="LDS rejected")
    assert gw.envoy.running
    assert gw.envoy.stat("listener_manager.lds.update_success") == 0
    assert gw.envoy.stat("listener_manager.total_listeners_active") == 0
    assert gw.envoy.stat("listener_manager.total_listeners_warming") == 0
    # Admin /config_dump: each listener only in an error state, with Envoy's reason.
    dump = gw.envoy.config_dump("dynamic_listeners").get("configs", [])
    assert not [d for d in dump if "active_state" in d or "warming_state" in d], dump
    errors = {d.get("name"): d["error_state"]["details"] for d in dump if "error_state" in d}
    for name in gw.ports:
        details = errors.get(f"default/gw/{name}", "")
        assert "Failed to load dynamic module" in details and str(module) in details, (name, errors)
    for name, port in gw.ports.items():
        assert not tcp_open("127.0.0.1", port), name
    r = gw.call("get-sum")
    assert r.response is None and r.error is not None, r
    log = wait_for(lambda: (t := gw.envoy.log_path.read_text(errors="replace"))
                   and "Failed to load dynamic module" in t and t, timeout=10, what="the load failure in Envoy's log")
    assert str(module) in log
    assert gw.server.executed() == []
    # The real module afterwards: the listeners come up with the plan.
    write_json(gw.dir / "lds.json", json.loads(good))
    wait_for(lambda: all(tcp_open("127.0.0.1", p) for p in gw.ports.values()), timeout=15, what="listeners up")
    wait_for(lambda: gw.call("get-sum").executed, timeout=10, interval=0.1, what="the plan")
    assert_denied(gw.call("echo"))
    assert_denied(gw.call("get-sum", **HTTP))


@pytest.mark.parametrize("kind", ["missing", "not-elf"])
def test_an_update_with_a_module_that_cannot_load_keeps_the_plan(gateway, tmp_path, kind):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH,
                 native_module=MODULE)
    pid = gw.envoy.proc.pid
    good = (gw.dir / "lds.json").read_text()
    # A valid plan that would allow echo too, with a module that cannot load.
    gw.rerender([policy("p", tools_call_rule("a-sum", ["get-sum", "echo"], source=sa("a")))])
    wait_for(lambda: gw.call("echo").executed, timeout=10, interval=0.1, what="the echo plan")
    with_echo = (gw.dir / "lds.json").read_text()
    write_json(gw.dir / "lds.json", json.loads(good))
    wait_for(lambda: not gw.call("echo").executed, timeout=10, interval=0.1, what="the plan without echo")
    rejected = gw.envoy.stat("listener_manager.lds.update_rejected")
    write_json(gw.dir / "lds.json", with_module(with_echo, bad_module(kind, tmp_path)))
    wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") > rejected, timeout=10,
             what="the update to be rejected")
    for _ in range(3):
        assert_allowed(gw.call("get-sum"))
        assert_denied(gw.call("echo"))
        assert_denied(gw.call("get-sum", **HTTP))
    assert gw.envoy.proc.pid == pid
    assert gw.envoy.stat("listener_manager.total_listeners_active") == 2


# A truncated .so is another matter: dlopen() maps the file's load segments past its end, and the
# first touch of those pages (relocation) raises SIGBUS, which kills Envoy (observed with the pinned
# Envoy 1.40, at start and on a listener update). Nothing is served, but it is an outage: install a
# module whole (write it beside, rename it into place, as `make module` does), never copy over the
# path a running configuration names.

def test_a_truncated_module_stops_envoy_at_start(tmp_path, certs, wasm_path, start_mcp_server):
    gw = native_gateway(tmp_path, certs, wasm_path, start_mcp_server)
    write_json(gw.dir / "lds.json", with_module((gw.dir / "lds.json").read_text(), bad_module("truncated", tmp_path)))
    env = Envoy(gw.dir / "envoy.json", gw.workdir, "envoy")
    try:
        env._spawn()
        code = env.proc.wait(ENVOY_START_TIMEOUT)
    finally:
        env.stop()
    assert code == -signal.SIGBUS, (code, env.log_tail())
    for name, port in gw.ports.items():
        assert not tcp_open("127.0.0.1", port), name
    assert gw.server.executed() == []


def test_an_update_with_a_truncated_module_stops_envoy(gateway, tmp_path):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH,
                 native_module=MODULE)
    assert_allowed(gw.call("get-sum"))
    executed = gw.server.executed()
    write_json(gw.dir / "lds.json", with_module((gw.dir / "lds.json").read_text(), bad_module("truncated", tmp_path)))
    code = gw.envoy.proc.wait(10)
    assert code == -signal.SIGBUS, (code, gw.envoy.log_tail())
    for name, port in gw.ports.items():  # the gateway is gone: nothing is served, checked or not
        assert not tcp_open("127.0.0.1", port), name
    assert gw.server.executed() == executed


# --------------------------------------------------------------------------------------------------
# A plan update the module refuses

def test_a_refused_update_keeps_the_last_good_plan(gateway):
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH,
                 native_module=MODULE)
    pid = gw.envoy.proc.pid
    rendered = (gw.dir / "lds.json").read_text()
    old_decisions_hold(gw)
    for make_plan in (unknown_version, bad_regex, tampered):
        rejected = gw.envoy.stat("listener_manager.lds.update_rejected")
        refused = gw.counters().get("toolgate.plan.rejected", 0)
        push_plan(gw, make_plan, rendered)
        # The module refuses the plan (null configuration): Envoy rejects the listener update.
        wait_for(lambda: gw.envoy.stat("listener_manager.lds.update_rejected") > rejected, timeout=10,
                 what=f"the {make_plan.__name__} plan's update to be rejected")
        assert gw.counters().get("toolgate.plan.rejected", 0) > refused, make_plan.__name__
        old_decisions_hold(gw)
        assert_denied(gw.call("echo", headers={"x-any": "("}))
    log = gw.envoy.log_path.read_text(errors="replace")
    for plugin in PLUGINS:
        assert f"plugin {plugin}: REFUSED new plan (" in log
    assert "update rejected, keeping the plan in force" in log
    assert not any("echo" in json.dumps(e) for e in gw.server.executed())
    a_good_render_applies(gw, pid)


# --------------------------------------------------------------------------------------------------
# The rendered configuration (the Wasm host's: test_resilience.py::test_rendered_configuration_fails_closed)

def test_rendered_configuration_loads_the_module(gateway):
    """Every listener runs the module `render --native-module` named, with its plan, kept loaded
    across updates (do_not_close: the last good plans live in the module). There is no fail-open
    setting to check: a module that cannot load rejects the listener (above), a panic denies."""
    gw = gateway(policy("p", tools_call_rule("a-sum", ["get-sum"], source=sa("a"))), listeners=BOTH,
                 native_module=MODULE)
    lds = json.loads((gw.dir / "lds.json").read_text())
    dump = gw.envoy.config_dump("dynamic_listeners")
    running = {"resources": [c["active_state"]["listener"] for c in dump["configs"] if "active_state" in c]}
    for doc in (lds, running):
        confs = list(module_filters(doc))
        assert len(confs) == 2, confs
        for conf in confs:
            module = conf["dynamic_module_config"]
            assert module["module"]["local"]["filename"] == str(MODULE)
            assert module.get("do_not_close") is True
            assert conf["filter_name"] in PLUGINS
            assert json.loads(conf["filter_config"]["value"])["version"] == 1
    assert sorted(c["filter_name"] for c in module_filters(running)) == sorted(PLUGINS)
    assert_allowed(gw.call("get-sum"))
    assert_denied(gw.call("echo"))
