"""The names of what `toolgate controller` writes, against a real API server (tests/k8s/kube-apiserver.sh;
issue 38): every source gets its own object (a Gateway `mcp` with listener `public-https` and a Gateway
`mcp-public` with listener `https` once shared one WasmPlugin, rewritten in turn forever); a Gateway
name longer than a label value may be still gets its outputs; and an object of an output's name that
Toolgate did not write is never overwritten: the policy and the Gateway say OutputConflict until it
goes. The plan ConfigMaps' case (`--plan-configmaps`, with its own RBAC role) is in test_rbac.py."""

from __future__ import annotations

import json

import harness
from gateway_objects import ROUTE_AND_BACKEND, allow_policy, gateway
from k8s_stack import Controller, plugin, reset

AFFECTED = "toolgate.dev/XAccessPolicyAffected"
SOURCE = "toolgate.dev/source"
MANAGED = "app.kubernetes.io/managed-by"


def on_gateway(name: str, gw: str, listener: str, port: int) -> str:
    """A Gateway with one listener and an Allow policy on it."""
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {gw}, namespace: default}}
spec:
  gatewayClassName: istio
  listeners: [{{name: {listener}, port: {port}, protocol: HTTP}}]
---
""" + allow_policy(name, ["get-sum"]).replace("name: gw}", f"name: {gw}}}")


def outputs(server, kind: str) -> list[dict]:
    return (server.get(kind) or {}).get("items", [])


def by_source(server, kind: str, source: str) -> dict | None:
    return next((o for o in outputs(server, kind) if o["metadata"].get("annotations", {}).get(SOURCE) == source), None)


def programmed(server, name: str) -> dict | None:
    item = server.get("xaccesspolicy", name) or {}
    return next((c for a in item.get("status", {}).get("ancestors", []) for c in a["conditions"]
                 if c["type"] == "Programmed"), None)


def wait_programmed(server, name: str, status: str, reason: str) -> dict:
    return harness.wait_for(lambda: (c := programmed(server, name)) and c["status"] == status and c["reason"] == reason
                            and c, timeout=60, what=f"{name}: Programmed {status}/{reason}")


def affected(server, gw: str) -> dict | None:
    conditions = ((server.get("gateway", gw) or {}).get("status") or {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == AFFECTED), None)


def test_each_source_has_its_own_output(cluster, tmp_path):
    """The issue's pair: two WasmPlugins, each targeting its own Gateway, both policies Programmed, and
    the controller settles (a pass that writes nothing). An object an older controller wrote under the
    name one of them now has is adopted; one that no source wants any more is deleted."""
    server = cluster
    reset(server)
    stale = """
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: %s, namespace: default, labels: {app.kubernetes.io/managed-by: toolgate, toolgate.dev/gateway: %s}}
spec: {url: "oci://old", targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: %s}]}
"""
    server.apply(stale % ("toolgate-mcp-public-https", "mcp", "mcp") + "---" + stale % ("toolgate-gone-http", "gone", "gone"))
    server.apply(on_gateway("pa", "mcp", "public-https", 8080) + "---" + on_gateway("pb", "mcp-public", "https", 9090))
    controller = Controller(server, tmp_path)
    try:
        for name in ("pa", "pb"):
            wait_programmed(server, name, "True", "Programmed")
        harness.wait_for(lambda: controller.writes() and controller.writes()[-1] == 0, timeout=30,
                         what=f"a pass that writes nothing (passes: {controller.writes()[-20:]})")
        harness.wait_for(lambda: plugin(server, "toolgate-gone-http") is None, timeout=30, what="the stale object deleted")
        a = by_source(server, "wasmplugins", "default/mcp/public-https")
        b = by_source(server, "wasmplugins", "default/mcp-public/https")
        assert a and b and a["metadata"]["name"] != b["metadata"]["name"], (a, b)
        assert b["metadata"]["name"] == "toolgate-mcp-public-https", "the unambiguous name stays readable"
        assert a["metadata"]["name"].startswith("toolgate-mcp-public-https-"), a["metadata"]["name"]
        assert [p["spec"]["targetRefs"][0]["name"] for p in (a, b)] == ["mcp", "mcp-public"]
        assert [p["spec"]["match"][0]["ports"][0]["number"] for p in (a, b)] == [8080, 9090]
        assert b["spec"]["url"] != "oci://old", "the old object under that name is rewritten"
        assert {o["metadata"]["name"] for o in outputs(server, "wasmplugins")} == {a["metadata"]["name"], b["metadata"]["name"]}
        assert len(outputs(server, "envoyfilters")) == 2
        for name, wp in (("pa", a), ("pb", b)):
            assert f"WasmPlugin default/{wp['metadata']['name']}" in programmed(server, name)["message"]
        # A change to one source's policy rewrites its output alone. The passes are counted from
        # before the change: the pass that writes and the quiet one after it may both be over by the
        # time the rewritten object is read.
        passes = len(controller.writes())
        server.apply(allow_policy("pa", ["get-sum", "echo"]).replace("name: gw}", "name: mcp}"))
        harness.wait_for(lambda: plugin(server, a["metadata"]["name"])["metadata"]["resourceVersion"]
                         != a["metadata"]["resourceVersion"], timeout=30, what="mcp's WasmPlugin rewritten")
        harness.wait_for(lambda: sum(controller.writes()[passes:]) > 0 and controller.writes()[-1] == 0, timeout=30,
                         what=f"a pass that writes nothing after the change (passes: {controller.writes()[-20:]})")
        assert plugin(server, b["metadata"]["name"])["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]
    finally:
        controller.stop()


def test_a_long_gateway_name(cluster, tmp_path):
    """A Gateway name of 64 characters or more (a label value may have 63): the WasmPlugin and the
    EnvoyFilter are written, with bounded names and labels and the full name in the annotation."""
    server = cluster
    reset(server)
    gw = "mcp-" + "long" * 20
    server.apply(on_gateway("long", gw, "http", 8080))
    controller = Controller(server, tmp_path)
    try:
        c = wait_programmed(server, "long", "True", "Programmed")
        wp = by_source(server, "wasmplugins", f"default/{gw}/http")
        ef = by_source(server, "envoyfilters", f"default/{gw}")
        assert wp and ef, (outputs(server, "wasmplugins"), outputs(server, "envoyfilters"))
        for o in (wp, ef):
            assert len(o["metadata"]["name"]) <= 63 and all(len(v) <= 63 for v in o["metadata"]["labels"].values()), o
            assert o["spec"]["targetRefs"][0]["name"] == gw
            assert f"default/{o['metadata']['name']}" in c["message"], c
    finally:
        controller.stop()


def test_a_foreign_object_is_never_overwritten(cluster, tmp_path):
    """A WasmPlugin named as the Gateway's output that Toolgate did not write: left as it is, the policy
    Programmed False/OutputConflict and the Gateway's condition False/OutputConflict, naming it; once
    its owner deletes it, the controller writes its own and both say Programmed."""
    server = cluster
    reset(server)
    foreign = """
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: toolgate-gw-http, namespace: default, labels: {app: someone-else}}
spec: {url: "oci://someone/else", targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: other}]}
"""
    server.apply(foreign)
    before = plugin(server)
    controller = Controller(server, tmp_path)
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("p", ["get-sum"]))
        c = wait_programmed(server, "p", "False", "OutputConflict")
        assert "WasmPlugin default/toolgate-gw-http" in c["message"] and "not Toolgate's" in c["message"], c
        g = harness.wait_for(lambda: (x := affected(server, "gw")) and x["reason"] == "OutputConflict" and x, timeout=30,
                             what="the Gateway's condition OutputConflict")
        assert g["status"] == "False" and "WasmPlugin default/toolgate-gw-http" in g["message"], g
        now = plugin(server)
        assert now["spec"] == before["spec"] and now["metadata"]["labels"] == {"app": "someone-else"}, now
        assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "never written"
        assert server.get("envoyfilter", "toolgate-gw"), "the outputs whose names are free are written"
        assert 'toolgate_controller_errors_total{error="write"}' in controller.get("/metrics").body.decode()

        server.kubectl("delete", "wasmplugin", "toolgate-gw-http", "-n", "default")
        wait_programmed(server, "p", "True", "Programmed")
        wp = plugin(server)
        assert wp["metadata"]["labels"][MANAGED] == "toolgate" and wp["spec"]["targetRefs"][0]["name"] == "gw", wp
        assert json.dumps(wp["spec"]["pluginConfig"]).count("default/p") >= 1
        harness.wait_for(lambda: (x := affected(server, "gw")) and x["reason"] == "Programmed", timeout=30,
                         what="the Gateway's condition Programmed")
    finally:
        controller.stop()
