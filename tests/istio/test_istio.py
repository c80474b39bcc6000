"""Toolgate under the real Istio control plane: `toolgate controller` (RBAC-limited ServiceAccount token) writes
WasmPlugins into a real kube-apiserver; a real istiod turns the Gateway API objects and the WasmPlugin into
xDS for the gateway; a real Envoy, the gateway's router fed by istiod over ADS, runs the filter and
allows or denies MCP tool calls. Nothing in the chain is Toolgate's test double except the xds-shim, which
only drops the Istio-only filters upstream Envoy does not have (and says so in its log).

    make test-istio       # builds the control plane from Go modules on first use (tests/istio/gobuild.sh)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from istio_stack import (ISTIO, ISTIO_SVC, ROUTE_AND_BACKEND, Cluster, Controller, allow_policy, allowed, call, denied,
                         gateway, istio_serves, listener_http_filters, wasm_filters)
import harness
from harness import assert_allowed, assert_denied


def test_istio_gateway_enforces_policy(stack, tmp_path):
    cluster, mcp, envoy, port = stack["cluster"], stack["mcp"], stack["envoy"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        # istiod's own GatewayClass (its gatewayclass controller creates `istio`).
        harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
        t0 = time.monotonic()
        cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("sum-only", ["get-sum"]))
        wp = harness.wait_for(lambda: cluster.get("wasmplugin", "toolgate-gw-http"), timeout=30, what="WasmPlugin")
        assert wp["spec"]["url"] == f"file://{stack['wasm']}"
        assert wp["spec"]["pluginConfig"]["gateway"]["allow"][0]["name"] == "default/sum-only"
        # istiod accepted and programmed the Gateway (it found the Service gw-istio).
        harness.wait_for(lambda: any(c["type"] == "Programmed" and c["status"] == "True" for c in
                                     (cluster.get("gateway", "gw") or {}).get("status", {}).get("conditions", [])),
                         timeout=60, what="Gateway gw Programmed by istiod")
        # Envoy got the listener (on the Service's targetPort) and the filter over ECDS.
        harness.wait_for(lambda: ("0.0.0.0", port) in envoy.listener_addresses() or None, timeout=60,
                         what=f"Envoy listener on {port}\n{envoy.log_tail(30)}")
        harness.wait_for(lambda: wasm_filters(envoy) or None, timeout=60, what="the wasm filter over ECDS")
        assert [n for n in listener_http_filters(envoy) if "toolgate-gw-http" in n], listener_http_filters(envoy)
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="get-sum allowed and echo denied through the gateway")
        first = time.monotonic() - t0
        assert_allowed(call(port, "get-sum", mcp))
        assert_denied(call(port, "echo", mcp))
        assert_denied(call(port, "get-env", mcp))
        filters = listener_http_filters(envoy)
        print(f"\n[istio] the gateway listener's HTTP filters: {filters}")
        if cluster.get("envoyfilter", "toolgate-gw"):
            # The controller's EnvoyFilter for gw, applied by istiod: the buffer filter right before the router.
            assert filters[-2:] == ["envoy.filters.http.buffer", "envoy.filters.http.router"], filters
        filt = wasm_filters(envoy)[0]
        assert filt["config"]["vm_config"]["code"]["local"]["filename"] == str(stack["wasm"])
        print(f"\n[istio] objects applied -> enforced at the gateway: {first:.2f} s "
              f"(cluster start {cluster.start_seconds:.1f} s, istiod {cluster.istiod_seconds:.1f} s)")

        # A policy change reaches the gateway.
        t0 = time.monotonic()
        cluster.apply(allow_policy("sum-only", ["echo"]))
        harness.wait_for(lambda: denied(call(port, "get-sum", mcp)) and allowed(call(port, "echo", mcp)),
                         timeout=60, what="the changed policy at the gateway")
        changed = time.monotonic() - t0
        print(f"[istio] policy change -> enforced at the gateway: {changed:.2f} s")

        # The policy deleted: the WasmPlugin goes, and so does the filter.
        t0 = time.monotonic()
        cluster.kubectl("delete", "xaccesspolicy", "sum-only", "-n", "default")
        harness.wait_for(lambda: not (cluster.get("wasmplugins") or {}).get("items"), timeout=30,
                         what="WasmPlugin deleted")
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and allowed(call(port, "get-env", mcp)),
                         timeout=60, what="no policy: everything passes")
        harness.wait_for(lambda: not [n for n in listener_http_filters(envoy) if "toolgate" in n], timeout=30,
                         what="the wasm filter gone from the gateway's listener")
        print(f"[istio] policy deleted -> gone from the gateway: {time.monotonic() - t0:.2f} s")
        print(f"[istio] xds-shim: {stack['shim'].dropped()[:3]}")
    finally:
        controller.stop()


def test_controller_identity_is_rbac_limited(cluster: Cluster):
    """The controller's kubeconfig is a ServiceAccount token: the API server enforces deploy/rbac.yaml."""
    def can_i(*args: str) -> str:
        return cluster.kubectl("auth", "can-i", *args, check=False, kubeconfig=cluster.controller_kubeconfig).stdout.strip()
    assert can_i("--list", "-n", "default") != ""
    assert can_i("create", "wasmplugins.extensions.istio.io", "-n", "default") == "yes"
    assert can_i("patch", "xaccesspolicies.agentic.networking.x-k8s.io", "--subresource=status", "-n", "default") == "yes"
    assert can_i("get", "secrets", "-n", "default") == "no"
    assert can_i("create", "gateways.gateway.networking.k8s.io", "-n", "default") == "no"
    out = cluster.kubectl("get", "secrets", "-n", "default", check=False, kubeconfig=cluster.controller_kubeconfig)
    assert out.returncode != 0 and "forbidden" in out.stderr, out


def test_leader_election_on_a_real_lease(stack, tmp_path):
    """Two replicas with --leader-elect share the coordination.k8s.io/v1 Lease of the real API server: one
    writes; when it stops (SIGTERM releases the Lease) the other takes over, and a policy change made after
    that still reaches the gateway."""
    cluster, mcp, port = stack["cluster"], stack["mcp"], stack["port"]
    args = ("--leader-elect", "--leader-elect-namespace", "toolgate-system")
    a = Controller(cluster, tmp_path, stack["wasm"], *args, "--leader-elect-identity", "replica-a", name="a")
    b = Controller(cluster, tmp_path, stack["wasm"], *args, "--leader-elect-identity", "replica-b", name="b")
    try:
        def holder() -> str | None:
            lease = cluster.get("lease", "toolgate-controller", namespace="toolgate-system") or {}
            return lease.get("spec", {}).get("holderIdentity") or None
        first = harness.wait_for(holder, timeout=30, what="a Lease holder")
        assert first in ("replica-a", "replica-b")
        leader, follower = (a, b) if first == "replica-a" else (b, a)
        cluster.apply(allow_policy("le", ["get-sum"]))
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="the leader's plan at the gateway")
        t0 = time.monotonic()
        leader.stop()
        second = harness.wait_for(lambda: (h := holder()) not in (None, first) and h, timeout=40,
                                  what="the follower holding the Lease")
        print(f"\n[istio] Lease moved {first} -> {second} in {time.monotonic() - t0:.2f} s")
        cluster.apply(allow_policy("le", ["echo"]))
        harness.wait_for(lambda: denied(call(port, "get-sum", mcp)) and allowed(call(port, "echo", mcp)),
                         timeout=60, what="the new leader's plan at the gateway")
        cluster.kubectl("delete", "xaccesspolicy", "le", "-n", "default")
        harness.wait_for(lambda: not (cluster.get("wasmplugins") or {}).get("items"), timeout=30,
                         what="WasmPlugin deleted by the new leader")
    finally:
        a.stop()
        b.stop()


def test_backend_policy_keyed_by_istios_cluster_name(stack, tmp_path):
    """A policy on the XBackend is keyed by the cluster istiod really gives the Service
    (outbound|8080||mcp-server.default.svc.cluster.local): the gateway allows get-sum and echo, the backend
    only get-sum, so echo is denied by the backend level."""
    cluster, mcp, port = stack["cluster"], stack["mcp"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        cluster.apply(allow_policy("gw-both", ["get-sum", "echo"]) + "---" + allow_policy("tools-sum", ["get-sum"], "tools"))
        wp = harness.wait_for(lambda: (w := cluster.get("wasmplugin", "toolgate-gw-http")) and
                              w["spec"]["pluginConfig"].get("backends") and w, timeout=30, what="WasmPlugin with backends")
        assert list(wp["spec"]["pluginConfig"]["backends"]) == [ISTIO_SVC]
        clusters = [c["cluster"]["name"] for c in stack["envoy"].config_dump("dynamic_active_clusters")["configs"]]
        assert ISTIO_SVC in clusters, clusters
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="echo denied by the backend-level policy")
        assert_allowed(call(port, "get-sum", mcp))
        assert_denied(call(port, "echo", mcp))
        assert_denied(call(port, "get-env", mcp))
        cluster.kubectl("delete", "xaccesspolicies", "gw-both", "tools-sum", "-n", "default")
        harness.wait_for(lambda: not (cluster.get("wasmplugins") or {}).get("items"), timeout=30,
                         what="WasmPlugin deleted")
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="no policy: echo passes")
    finally:
        controller.stop()


@pytest.mark.skipif(not istio_serves("TrafficExtension"),
                    reason=f"Istio {ISTIO} has no TrafficExtension (extensions.istio.io, from Istio 1.30 on)")
def test_trafficextension_output(stack, tmp_path):
    """--output trafficextension: Istio 1.30's TrafficExtension, which istiod turns into the same ECDS filter."""
    cluster, mcp, envoy, port = stack["cluster"], stack["mcp"], stack["envoy"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"], "--output", "trafficextension")
    try:
        cluster.apply(allow_policy("te", ["get-sum"]))
        te = harness.wait_for(lambda: cluster.get("trafficextension", "toolgate-gw-http"), timeout=30,
                              what="TrafficExtension")
        assert te["spec"]["wasm"]["url"] == f"file://{stack['wasm']}"
        assert not (cluster.get("wasmplugins") or {}).get("items")
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="the TrafficExtension's plan at the gateway")
        names = [n for n in listener_http_filters(envoy) if "toolgate-gw-http" in n]
        assert names and "istio-translated-wasmplugin" not in names[0], names
        cluster.kubectl("delete", "xaccesspolicy", "te", "-n", "default")
        harness.wait_for(lambda: not (cluster.get("trafficextensions") or {}).get("items"), timeout=30,
                         what="TrafficExtension deleted")
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="no policy: echo passes")
    finally:
        controller.stop()


def test_istiod_restart(stack, tmp_path):
    """istiod stopped: the gateway keeps enforcing the plan it has; a policy changed meanwhile reaches the
    WasmPlugin (the API server is up) and, once istiod is back, the gateway."""
    cluster, mcp, port = stack["cluster"], stack["mcp"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        cluster.apply(allow_policy("restart", ["get-sum"]))
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="the plan at the gateway")
        hash_before = cluster.get("wasmplugin", "toolgate-gw-http")["spec"]["pluginConfig"]["hash"]
        cluster.sh("istiod-stop")
        assert_allowed(call(port, "get-sum", mcp))
        assert_denied(call(port, "echo", mcp))
        cluster.apply(allow_policy("restart", ["echo"]))
        harness.wait_for(lambda: cluster.get("wasmplugin", "toolgate-gw-http")["spec"]["pluginConfig"]["hash"]
                         != hash_before, timeout=30, what="the new plan in the WasmPlugin")
        assert_allowed(call(port, "get-sum", mcp))  # istiod is down: the gateway still has the old plan
        t0 = time.monotonic()
        cluster.sh("istiod-start")
        harness.wait_for(lambda: denied(call(port, "get-sum", mcp)) and allowed(call(port, "echo", mcp)),
                         timeout=90, what="the new plan at the gateway after istiod's restart")
        print(f"\n[istio] istiod started again -> the new plan at the gateway: {time.monotonic() - t0:.2f} s")
        cluster.kubectl("delete", "xaccesspolicy", "restart", "-n", "default")
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)), timeout=60, what="no policy: get-sum passes")
    finally:
        controller.stop()


def probe_service(probe: "istio_chain.ArrivalLog") -> str:
    """A second MCP backend, `leak-probe`, at the ArrivalLog (an upstream that records every connection
    and request head the moment it arrives), routed from /probe."""
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: leak-probe, namespace: default}}
spec:
  selector: {{app: leak-probe}}
  ports: [{{name: http, port: 8080, targetPort: {probe.address[1]}, appProtocol: http}}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: leak-probe-0, namespace: default, labels: {{app: leak-probe}}}}
spec:
  address: {probe.address[0]}
  labels: {{app: leak-probe}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: probe, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{matches: [{{path: {{type: PathPrefix, value: /probe}}}}], backendRefs: [{{name: leak-probe, port: 8080}}]}}]
"""


def test_a_denied_call_never_reaches_the_server(stack, tmp_path):
    """The leak test on the real stack: the upstream records each request the moment its headers
    arrive; a denied call's headers are sent, then its body a moment later. With the controller's
    EnvoyFilter (applied by istiod) nothing reaches the upstream; with the WasmPlugin alone (the
    controller stopped and its EnvoyFilter deleted: what the controller wrote before) the headers do."""
    import istio_chain  # tests/k8s (on the path: istio_stack)

    cluster, envoy, port = stack["cluster"], stack["envoy"], stack["port"]
    probe = istio_chain.ArrivalLog()
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
        cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND + "---" + probe_service(probe) + "---"
                      + allow_policy("leak", ["get-sum"]))
        harness.wait_for(lambda: listener_http_filters(envoy)[-2:] == ["envoy.filters.http.buffer", "envoy.filters.http.router"]
                         and [n for n in listener_http_filters(envoy) if "toolgate-gw-http" in n], timeout=60,
                         what="the filter and the hold at the gateway")

        def call_in_two_parts(tool: str) -> tuple[bytes, list]:
            body = json.dumps(harness.jsonrpc("tools/call", {"name": tool, "arguments": {"a": 2, "b": 3}}, id=7)).encode()
            head = (f"POST /probe HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
                    f"accept: application/json, text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n").encode()
            return istio_chain.send_in_two_parts(port, head, body, probe)

        # Routed: an allowed call reaches the probe (after the decision).
        harness.wait_for(lambda: b'"result"' in call_in_two_parts("get-sum")[0], timeout=60, what="the probe route")
        probe.clear()
        answer, early = call_in_two_parts("echo")
        assert b'"error"' in answer and early == [] and probe.records() == [], (answer[:200], probe.records())

        # What the controller wrote before this fix: the WasmPlugin alone. The headers leak.
        controller.stop()
        cluster.kubectl("delete", "envoyfilter", "toolgate-gw", "-n", "default")
        harness.wait_for(lambda: "envoy.filters.http.buffer" not in listener_http_filters(envoy), timeout=60,
                         what="the hold gone from the gateway")
        answer, early = call_in_two_parts("echo")
        assert b'"error"' in answer, answer[:200]
        assert ("headers", "POST /probe HTTP/1.1") in early, early
    finally:
        controller.stop()
        cluster.kubectl("delete", "xaccesspolicy", "leak", "-n", "default", check=False)
        cluster.kubectl("delete", "httproute", "probe", "-n", "default", check=False)
        probe.stop()
