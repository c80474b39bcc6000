"""`toolgate controller` against a real Kubernetes API server (tests/k8s/kube-apiserver.sh, the controller
with its ServiceAccount's RBAC; Gateway API and Istio CRDs installed): WasmPlugin output, policy
status, level-triggered re-admission, TrafficExtension output, Programmed; and the WasmPlugin's
pluginConfig, as the API server returns it (JSON text, keys in its own order), loaded into the real
filter in a real Envoy whose clusters are named as Istio names them. Also: listeners sharing a port
(both WasmPlugins chained in Envoy), Istio's chain holding denied calls, one Gateway per namespace.
Leader election and API server restarts: test_availability.py."""

from __future__ import annotations

import json
import subprocess
import time

import harness
import istio_chain
from gateway_objects import ISTIO_SVC, ROUTE_AND_BACKEND, allow_policy, call, ext_auth, gateway
from harness import assert_allowed, assert_denied
from k8s_stack import REPO, ApiServer, Controller, envoy_config, plugin, reasons, reset, wait_reasons


def test_controller(cluster, tmp_path, wasm_path, start_mcp_server):
    server = cluster
    controller = Controller(server, tmp_path)
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("sum-and-echo", ["get-sum", "echo"])
                     + "---" + allow_policy("no-env", ["get-sum"], "tools"))
        # The objects reach the controller over separate watches, in no set order: a pass may write a
        # plan before it has seen the XBackend, and the next pass completes it. Wait for the complete one.
        wp = harness.wait_for(lambda: (p := plugin(server)) and list(p["spec"]["pluginConfig"]["backends"]) == [ISTIO_SVC]
                              and p, timeout=20, what="the WasmPlugin with the XBackend's level")
        spec = wp["spec"]
        assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]
        assert (spec["phase"], spec["failStrategy"]) == ("AUTHZ", "FAIL_CLOSE")
        assert spec["url"] == "oci://registry.example/toolgate:0.1.0" and spec["sha256"] == "ab" * 32
        assert spec["match"] == [{"ports": [{"number": 8080}]}] and "mode" not in spec["match"][0]
        assert wp["metadata"]["ownerReferences"][0]["kind"] == "Gateway"
        assert list(spec["pluginConfig"]["backends"]) == [ISTIO_SVC]
        wait_reasons(server, {"sum-and-echo": "Accepted", "no-env": "Accepted"})
        assert controller.get("/healthz").status == 200 and controller.get("/readyz").status == 200
        metrics = controller.get("/metrics").body.decode()
        written = [line for line in metrics.splitlines() if line.startswith("toolgate_controller_plans_written_total ")]
        assert written and int(float(written[0].split()[1])) >= 1, metrics
        assert 'toolgate_controller_policies{reason="Accepted"} 2' in metrics, metrics
        # Histograms with real buckets: each pass, and each policy's way to Programmed (once per generation).
        def samples(name: str) -> dict[str, float]:
            text = controller.get("/metrics").body.decode()
            return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith(name)}
        passes = samples("toolgate_controller_reconcile_duration_seconds_bucket")
        assert len(passes) > 10 and passes['toolgate_controller_reconcile_duration_seconds_bucket{le="+Inf"}'] >= 1, passes
        assert any(0 < n for le, n in passes.items() if "+Inf" not in le), f"every pass over the last bucket: {passes}"
        programmed = harness.wait_for(
            lambda: (p := samples("toolgate_controller_policy_programmed_seconds"))
            and p["toolgate_controller_policy_programmed_seconds_count"] == 2 and p,
            timeout=20, what="both policies timed to Programmed")
        assert programmed['toolgate_controller_policy_programmed_seconds_bucket{le="40.96"}'] == 2, programmed
        times = {i["metadata"]["name"]: i["status"]["ancestors"][0]["conditions"][0]["lastTransitionTime"]
                 for i in server.get("xaccesspolicies")["items"]}

        # The pluginConfig as Istio hands it to the filter: JSON text, in the API server's key order.
        assert list(spec["pluginConfig"])[0] != "version", "not the controller's own key order"
        mcp = start_mcp_server("mcp", workdir=tmp_path / "mcp")
        port = harness.free_port()
        config = harness.write_json(tmp_path / "envoy.json", envoy_config(server, [wp], wasm_path, port, mcp))
        envoy = harness.Envoy.start(config, tmp_path, "envoy", listeners=[port])
        try:
            assert_allowed(call(port, "get-sum", mcp))      # gateway and backend allow
            assert_denied(call(port, "echo", mcp))          # the backend level (keyed by Istio's cluster) denies
            assert_denied(call(port, "get-env", mcp))       # the gateway level denies
        finally:
            envoy.stop()

        # The policy patched: the plan changes.
        hash_before = spec["pluginConfig"]["hash"]
        server.apply(allow_policy("sum-and-echo", ["get-sum"]))
        harness.wait_for(lambda: plugin(server)["spec"]["pluginConfig"]["hash"] != hash_before, timeout=20,
                         what="new plan")

        # Two ExternalAuth policies on one target: the junior is not accepted until the senior goes.
        server.apply(ext_auth("ea-a") + "---" + ext_auth("ea-b"))
        wait_reasons(server, {"ea-a": "Accepted", "ea-b": "LimitPerTargetExceeded"})
        assert plugin(server)["spec"]["pluginConfig"]["gateway"]["externalAuth"]["authorizer"]["cluster"] == \
            "outbound|9000||authz.default.svc.cluster.local"
        server.kubectl("delete", "xaccesspolicy", "ea-a", "-n", "default")
        wait_reasons(server, {"ea-b": "Accepted"})
        server.kubectl("delete", "xaccesspolicy", "ea-b", "-n", "default")

        # A bad CEL expression, then fixed.
        bad = allow_policy("cel", ["x"]).replace(
            "authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [\"x\"]}]}}",
            "authorization: {type: CEL, cel: {expression: \"request.nope == 1\"}}")
        server.apply(bad)
        wait_reasons(server, {"cel": "InvalidCEL"})
        server.apply(bad.replace("request.nope == 1", "request.mcp.tool_name == 'x'"))
        wait_reasons(server, {"cel": "Accepted"})

        # A missing Gateway, then created. The passes from here on run at a later second than the
        # first statuses' transition times, so a restamped unchanged condition would show.
        harness.wait_for(lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > max(times.values()), timeout=5,
                         what="the clock past the first transition times")
        server.apply(allow_policy("later", ["x"], "gw2"))
        wait_reasons(server, {"later": "TargetNotFound"})
        server.apply(gateway(9090, "gw2"))
        wait_reasons(server, {"later": "Accepted"})
        harness.wait_for(lambda: plugin(server, "toolgate-gw2-http"), timeout=20, what="gw2's WasmPlugin")

        # Unchanged statuses keep their transition time.
        now = {i["metadata"]["name"]: i["status"]["ancestors"][0]["conditions"][0]["lastTransitionTime"]
               for i in server.get("xaccesspolicies")["items"]}
        assert now["no-env"] == times["no-env"], (now, times)

        # Restarted: converges to the same objects without writing.
        controller.stop()
        controller = Controller(server, tmp_path)
        harness.wait_for(lambda: controller.writes(), timeout=20, what="the restarted controller's first pass")
        assert "toolgate_controller_reconciles_total" in controller.get("/metrics").body.decode()
        assert set(controller.writes()) == {0}, controller.writes()

        # Every policy deleted: the WasmPlugins go.
        server.kubectl("delete", "xaccesspolicies", "--all", "-n", "default")
        harness.wait_for(lambda: not (server.get("wasmplugins") or {}).get("items"), timeout=20,
                         what="WasmPlugins deleted")
        controller.stop()

        # --output trafficextension: the same content under spec.wasm, and no WasmPlugin.
        controller = Controller(server, tmp_path, "--output", "trafficextension")
        server.apply(allow_policy("sum-and-echo", ["get-sum"]))
        te = harness.wait_for(lambda: plugin(server, kind="trafficextension"), timeout=20, what="TrafficExtension")
        assert te["spec"]["wasm"]["failStrategy"] == "FAIL_CLOSE"
        assert te["spec"]["wasm"]["pluginConfig"]["gateway"]["allow"][0]["name"] == "default/sum-and-echo"
        assert not (server.get("wasmplugins") or {}).get("items")
    finally:
        controller.stop()


def section_policy(name: str, section: str, tools: list[str], gateway: str = "shared") -> str:
    return allow_policy(name, tools).replace(
        "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}",
        "{group: gateway.networking.k8s.io, kind: Gateway, name: %s, sectionName: %s}" % (gateway, section))


SHARED = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared, namespace: default}
spec:
  gatewayClassName: istio
  listeners:
  - {name: a, port: 8080, protocol: HTTP, hostname: a.example.com}
  - {name: b, port: 8080, protocol: HTTP, hostname: b.example.com}
  - {name: c, port: 8080, protocol: HTTP, hostname: c.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shared, namespace: default}
spec:
  parentRefs: [{name: shared}]
  rules: [{matches: [{path: {type: PathPrefix, value: /mcp}}], backendRefs: [{name: mcp-server, port: 8080}]}]
"""


def test_listeners_sharing_a_port(cluster, tmp_path, wasm_path, start_mcp_server):
    """Three listeners on one port with different hostnames, a and b with their own policies, c with
    none. Istio runs both WasmPlugins (each matches the port) for every request on it; each request
    must be decided by its own listener's plan: in a real Envoy with both pluginConfigs, as Istio
    would chain them."""
    server = cluster
    reset(server)
    server.apply(SHARED + "---" + section_policy("pa", "a", ["get-sum"]) + "---" + section_policy("pb", "b", ["echo"]))
    controller = Controller(server, tmp_path)
    try:
        wait_reasons(server, {"pa": "Accepted", "pb": "Accepted"})
        plugins = [harness.wait_for(lambda n=n: plugin(server, f"toolgate-shared-{n}"), timeout=20, what=f"listener {n}")
                   for n in ("a", "b")]
        assert all(p["spec"]["match"] == [{"ports": [{"number": 8080}]}] for p in plugins)
        assert plugin(server, "toolgate-shared-c") is None, "no policy on c: no WasmPlugin"
        mcp = start_mcp_server("mcp", workdir=tmp_path / "mcp")
        port = harness.free_port()
        config = envoy_config(server, plugins, wasm_path, port, mcp, gateway="shared")
        envoy = harness.Envoy.start(harness.write_json(tmp_path / "envoy.json", config),
                                    tmp_path, "envoy", listeners=[port])
        try:
            assert_allowed(call(port, "get-sum", mcp, {"host": "a.example.com"}))
            assert_denied(call(port, "echo", mcp, {"host": "a.example.com"}))
            assert_allowed(call(port, "echo", mcp, {"host": "b.example.com:8080"}))
            assert_denied(call(port, "get-sum", mcp, {"host": "b.example.com"}))
            # c has no policy: neither a's nor b's plan restricts it.
            for tool in ("get-sum", "echo", "get-env"):
                assert_allowed(call(port, tool, mcp, {"host": "c.example.com"}))
        finally:
            envoy.stop()
    finally:
        controller.stop()


def h2_in_two_parts(port: int, path: str, body: bytes, log: istio_chain.ArrivalLog, window: float = 1.0):
    """An HTTP/2 (prior knowledge) POST whose body curl sends only once the window has passed (curl
    streams `-T -` from its standard input). Returns (status, what reached the upstream before)."""
    curl = subprocess.Popen(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                             "-X", "POST", "-H", "content-type: application/json",
                             "-H", "accept: application/json, text/event-stream", "-T", "-",
                             f"http://127.0.0.1:{port}{path}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    early = log.arrivals_within(window)
    out, err = curl.communicate(body, timeout=30)
    return int(out or b"0"), early, err


def test_istio_chain_holds_denied_calls(cluster, tmp_path, wasm_path):
    """Under Istio's own chain (no buffer filter), a denied call's headers reach the MCP server
    before the filter decides, unless the EnvoyFilter the controller writes is applied: then
    nothing of a denied call reaches it (no connection, no headers), for bodies up to the limit,
    content-length and chunked, HTTP/1.1 and HTTP/2; a body over the limit gets 413."""
    server = cluster
    reset(server)
    controller = Controller(server, tmp_path)
    log = istio_chain.ArrivalLog()
    envoys = []
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("sum-only", ["get-sum"]))
        wp = harness.wait_for(lambda: plugin(server), timeout=20, what="WasmPlugin")
        ef = harness.wait_for(lambda: server.get("envoyfilter", "toolgate-gw"), timeout=20, what="EnvoyFilter")
        assert ef["spec"]["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]
        assert ef["metadata"]["ownerReferences"][0]["kind"] == "Gateway"
        [patch] = ef["spec"]["configPatches"]
        assert patch["patch"]["value"]["name"] == "envoy.filters.http.buffer"
        limit = wp["spec"]["pluginConfig"]["settings"]["maxBodyBytes"]
        assert patch["patch"]["value"]["typed_config"]["max_request_bytes"] >= limit

        chain = istio_chain.istio_http_filters([(wp["metadata"]["name"], json.dumps(wp["spec"]["pluginConfig"]))], wasm_path)
        names = [f["name"] for f in chain]
        assert "envoy.filters.http.buffer" not in names, "Istio adds no buffer filter"

        def gateway_envoy(filters):
            port = harness.free_port()
            config = harness.write_json(tmp_path / f"envoy-{port}.json",
                                        istio_chain.gateway_config(filters, port, ISTIO_SVC, log.address))
            envoys.append(harness.Envoy.start(config, tmp_path, f"envoy-{port}", listeners=[port]))
            return port

        def body_of(tool: str, pad: int = 0) -> bytes:
            args = {"a": 2, "b": 3, **({"pad": "x" * pad} if pad else {})}
            return json.dumps(harness.jsonrpc("tools/call", {"name": tool, "arguments": args}, id=7)).encode()

        def head(port: int, body: bytes | None, chunked: bool = False) -> bytes:
            length = "transfer-encoding: chunked" if chunked else f"content-length: {len(body)}"
            return (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
                    f"accept: application/json, text/event-stream\r\n{length}\r\n\r\n").encode()

        def chunks(body: bytes) -> bytes:
            return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)

        # What the controller wrote before: the WasmPlugin alone. The denied call leaks its headers.
        leaky = gateway_envoy(chain)
        body = body_of("echo")
        answer, early = istio_chain.send_in_two_parts(leaky, head(leaky, body), body, log)
        assert any(kind == "headers" for kind, _ in early), f"the replay no longer shows the leak: {early}"
        assert b'"error"' in answer, answer
        log.clear()

        # With the EnvoyFilter applied as istiod applies it.
        held_chain = istio_chain.apply_envoy_filters(chain, [ef], 8080)
        assert [f["name"] for f in held_chain][-2:] == ["envoy.filters.http.buffer", "envoy.filters.http.router"]
        held = gateway_envoy(held_chain)
        near_limit = limit - len(body_of("echo")) - 64
        for pad in (0, 64 * 1024, near_limit):
            for chunked in (False, True):
                body = body_of("echo", pad)
                assert len(body) <= limit
                data = chunks(body) if chunked else body
                answer, early = istio_chain.send_in_two_parts(held, head(held, body, chunked), data, log)
                assert answer.startswith(b"HTTP/1.1 200") and b'"error"' in answer, (pad, chunked, answer[:300])
                assert early == [] and log.records() == [], (pad, chunked, log.records())
            status, early, err = h2_in_two_parts(held, "/mcp", body_of("echo", pad), log)
            assert status == 200 and early == [] and log.records() == [], (pad, status, log.records(), err)
        # Allowed calls still reach the server, whole, after the decision.
        body = body_of("get-sum", near_limit)
        answer, early = istio_chain.send_in_two_parts(held, head(held, body), body, log)
        assert answer.startswith(b"HTTP/1.1 200") and b'"result"' in answer and early == [], answer[:300]
        assert [k for k, _ in log.records()] == ["connection", "headers"], log.records()
        log.clear()
        status, early, err = h2_in_two_parts(held, "/mcp", body_of("get-sum"), log)
        assert status == 200 and early == [] and ("headers", "POST /mcp HTTP/1.1") in log.records(), (status, err)
        log.clear()
        # Over the limit: 413, and nothing of it reaches the server.
        body = body_of("get-sum", limit)
        answer, early = istio_chain.send_in_two_parts(held, head(held, body), body, log)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
        assert early == [] and log.records() == []
    finally:
        for e in envoys:
            e.stop()
        log.stop()
        controller.stop()


def in_namespace(yaml_text: str, ns: str) -> str:
    return yaml_text.replace("namespace: default", f"namespace: {ns}")


def test_each_gateway_holds_only_its_own_namespace(cluster, tmp_path):
    """Two tenants, each with its own Gateway, route, XBackend and backend policy: each WasmPlugin
    keys only its own backend; a change in one namespace rewrites nothing of the other's; deleting a
    Gateway's last policy deletes its WasmPlugin and EnvoyFilter; a ReferenceGrant decides whether
    a route into the other namespace brings that backend's policy into the plan."""
    server = cluster
    controller = Controller(server, tmp_path)
    tenants = ("tenant-a", "tenant-b")

    def get(kind: str, name: str, ns: str) -> dict | None:
        out = server.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def backends(ns: str) -> list[str]:
        return list(get("wasmplugin", "toolgate-gw-http", ns)["spec"]["pluginConfig"]["backends"])

    try:
        for ns in tenants:
            server.kubectl("create", "namespace", ns)
            server.apply(in_namespace(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("p", ["get-sum"], "tools"), ns))
        for ns in tenants:
            harness.wait_for(lambda ns=ns: get("wasmplugin", "toolgate-gw-http", ns), timeout=20, what=f"{ns}'s WasmPlugin")
            assert backends(ns) == [f"outbound|8080||mcp-server.{ns}.svc.cluster.local"]
            assert get("envoyfilter", "toolgate-gw", ns)
        version_b = get("wasmplugin", "toolgate-gw-http", "tenant-b")["metadata"]["resourceVersion"]
        hash_a = get("wasmplugin", "toolgate-gw-http", "tenant-a")["spec"]["pluginConfig"]["hash"]
        passes = len(controller.writes())
        server.apply(in_namespace(allow_policy("p", ["get-sum", "echo"], "tools"), "tenant-a"))
        harness.wait_for(lambda: get("wasmplugin", "toolgate-gw-http", "tenant-a")["spec"]["pluginConfig"]["hash"] != hash_a,
                         timeout=20, what="tenant-a's change")
        # The pass that wrote it has ended (its trace line is written last), and one after it wrote nothing.
        harness.wait_for(lambda: sum(controller.writes()[passes:]) > 0 and controller.writes()[-1] == 0, timeout=20,
                         what="a settled pass after the change")
        assert get("wasmplugin", "toolgate-gw-http", "tenant-b")["metadata"]["resourceVersion"] == version_b

        # A route of tenant-a into tenant-b: b's backend level joins a's plan only with b's grant.
        cross = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross, namespace: tenant-a}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {type: PathPrefix, value: /b}}], backendRefs: [{name: mcp-server, namespace: tenant-b, port: 8080}]}]
"""
        grant = """
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-a, namespace: tenant-b}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: tenant-a}]
  to: [{group: "", kind: Service}]
"""
        passes = len(controller.writes())
        server.apply(cross)
        harness.wait_for(lambda: len(controller.writes()) > passes and controller.writes()[-1] == 0, timeout=20,
                         what="a pass after the route was added")
        assert backends("tenant-a") == ["outbound|8080||mcp-server.tenant-a.svc.cluster.local"], "no grant: not in a's plan"
        server.apply(grant)
        harness.wait_for(lambda: len(backends("tenant-a")) == 2, timeout=20, what="the granted backend in a's plan")
        server.kubectl("delete", "referencegrant", "from-a", "-n", "tenant-b")
        harness.wait_for(lambda: len(backends("tenant-a")) == 1, timeout=20, what="the grant's backend gone again")

        # tenant-b's last policy deleted: its outputs go, tenant-a's stay.
        server.kubectl("delete", "xaccesspolicy", "p", "-n", "tenant-b")
        harness.wait_for(lambda: get("wasmplugin", "toolgate-gw-http", "tenant-b") is None
                         and get("envoyfilter", "toolgate-gw", "tenant-b") is None, timeout=20, what="tenant-b's outputs deleted")
        assert get("wasmplugin", "toolgate-gw-http", "tenant-a") and get("envoyfilter", "toolgate-gw", "tenant-a")
    finally:
        controller.stop()
        for ns in tenants:
            server.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_external_auth_into_another_namespace_needs_a_grant(cluster, tmp_path):
    """An ExternalAuth policy whose authorizer Service is in another namespace: Invalid without a
    ReferenceGrant there, Accepted once one appears, Invalid again when it goes (level-triggered)."""
    server = cluster
    reset(server)
    controller = Controller(server, tmp_path)
    policy = ext_auth("remote").replace("backendRef: {name: authz, port: 9000}",
                                        "backendRef: {name: authz, namespace: security, port: 9000}")
    grant = """
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: authz-for-default, namespace: security}
spec:
  from: [{group: agentic.networking.x-k8s.io, kind: XAccessPolicy, namespace: default}]
  to: [{group: "", kind: Service, name: authz}]
"""

    def message() -> str:
        item = server.get("xaccesspolicy", "remote")
        return item["status"]["ancestors"][0]["conditions"][0]["message"]

    server.kubectl("create", "namespace", "security")
    try:
        server.apply(gateway() + "---" + policy)
        wait_reasons(server, {"remote": "Invalid"})
        assert "Service security/authz" in message() and "ReferenceGrant" in message(), message()
        server.apply(grant)
        wait_reasons(server, {"remote": "Accepted"})
        harness.wait_for(lambda: plugin(server), timeout=20, what="WasmPlugin")
        assert plugin(server)["spec"]["pluginConfig"]["gateway"]["externalAuth"]["authorizer"]["cluster"] == \
            "outbound|9000||authz.security.svc.cluster.local"
        server.kubectl("delete", "referencegrant", "authz-for-default", "-n", "security")
        wait_reasons(server, {"remote": "Invalid"})
    finally:
        controller.stop()
        server.kubectl("delete", "namespace", "security", "--wait=false", check=False)


def programmed(server: ApiServer, name: str) -> list[dict]:
    item = server.get("xaccesspolicy", name) or {}
    return [c for a in item.get("status", {}).get("ancestors", []) for c in a["conditions"] if c["type"] == "Programmed"]


def test_programmed_follows_the_outputs(cluster, tmp_path):
    """GEP-713's Programmed condition: True once the outputs carrying the policy are written; False
    (Reconciling, the API server's error in the message) while one cannot be written (here: the
    EnvoyFilter kind is taken away); True again once it is written; the transition times move only
    with the condition."""
    server = cluster
    reset(server)
    controller = Controller(server, tmp_path)
    crd = REPO / "tests/k8s/thirdparty-crds/istio/networking-envoyfilter.yaml"
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("p", ["get-sum"]))
        [c] = harness.wait_for(lambda: [c for c in programmed(server, "p") if c["status"] == "True"], timeout=20,
                               what="Programmed")
        assert c["reason"] == "Programmed"
        assert "WasmPlugin default/toolgate-gw-http" in c["message"] and "EnvoyFilter default/toolgate-gw" in c["message"]
        first = c["lastTransitionTime"]

        server.kubectl("delete", "-f", str(crd))
        [c] = harness.wait_for(lambda: [c for c in programmed(server, "p") if c["status"] == "False"], timeout=30,
                               what="Programmed False while the EnvoyFilter cannot be written")
        assert c["reason"] == "Reconciling" and "EnvoyFilter default/toolgate-gw" in c["message"], c
        assert reasons(server) == {"p": "Accepted"}, "still accepted"
        assert 'toolgate_controller_errors_total{error="write"}' in controller.get("/metrics").body.decode()

        server.kubectl("apply", "--server-side", "-f", str(crd))
        # On the condition itself: `kubectl wait` fails at once on a CRD whose status has no conditions yet.
        harness.wait_for(lambda: server.kubectl(
            "get", "crd", "envoyfilters.networking.istio.io", "-o",
            'jsonpath={.status.conditions[?(@.type=="Established")].status}', check=False).stdout == "True",
            timeout=60, what="the EnvoyFilter CRD Established")
        [c] = harness.wait_for(lambda: [c for c in programmed(server, "p") if c["status"] == "True"], timeout=60,
                               what="Programmed again")
        assert server.get("envoyfilter", "toolgate-gw") is not None
        assert c["lastTransitionTime"] >= first
    finally:
        controller.stop()
        server.kubectl("apply", "--server-side", "-f", str(crd), check=False)
