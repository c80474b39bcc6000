"""What only the dynamic-module host (module/, `make module`) has to show: a panic in the module is
caught at the hook, the request is denied and counted, and Envoy and the next requests are unharmed.

Runs whatever TOOLGATE_E2E_HOST says: these gateways always run the native module (the test-only
build libtoolgate_module_panic_probe.so, whose request-headers hook panics on the header
`x-toolgate-panic-probe`; module/Cargo.toml)."""

from __future__ import annotations

from harness import REPO, assert_allowed, assert_denied, policy, tools_call_rule, wait_for

HTTP = dict(listener="http", agent=None)
PROBE = REPO / "target/release/libtoolgate_module_panic_probe.so"


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
