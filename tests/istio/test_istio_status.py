"""Status on the real stack (issue 28): the API server enforces RBAC and `toolgate controller` runs with
deploy/rbac.yaml's permissions. The policy's GEP-713 `Programmed` condition follows the controller's
permission to write its output (taken away and given back by an admin editing the ClusterRole), and the
Gateway's `toolgate.dev/XAccessPolicyAffected` condition sits beside istiod's own conditions.

    make test-istio
"""

from __future__ import annotations

import json

from istio_stack import (ROUTE_AND_BACKEND, Cluster, Controller, allow_policy, allowed, call, denied, gateway,
                         wasm_filters)
import harness

AFFECTED = "toolgate.dev/XAccessPolicyAffected"
ROLE = "toolgate-controller"


def programmed(cluster: Cluster, name: str) -> dict | None:
    status = (cluster.get("xaccesspolicy", name) or {}).get("status") or {}
    return next((c for a in status.get("ancestors", []) for c in a["conditions"] if c["type"] == "Programmed"), None)


def wait_programmed(cluster: Cluster, name: str, status: str, reason: str) -> dict:
    return harness.wait_for(lambda: (c := programmed(cluster, name)) and c["status"] == status and c["reason"] == reason
                            and c, timeout=60, what=f"{name}: Programmed {status}/{reason}")


def gateway_conditions(cluster: Cluster) -> dict[str, dict]:
    return {c["type"]: c for c in ((cluster.get("gateway", "gw") or {}).get("status") or {}).get("conditions", [])}


def fresh(obj: dict) -> dict:
    """A copy of an object to replace it with (no resourceVersion: the admin's edit wins)."""
    copy = json.loads(json.dumps(obj))
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        copy["metadata"].pop(k, None)
    return copy


def test_controller_may_patch_only_the_status_of_targets(cluster: Cluster):
    """deploy/rbac.yaml: the target condition needs PATCH (server-side apply) on gateways/status and
    xbackends/status, and nothing more of those objects."""
    def can_i(*args: str) -> str:
        return cluster.kubectl("auth", "can-i", *args, "-n", "default", check=False,
                               kubeconfig=cluster.controller_kubeconfig).stdout.strip()
    for resource in ("gateways.gateway.networking.k8s.io", "xbackends.agentic.networking.x-k8s.io"):
        assert can_i("patch", resource, "--subresource=status") == "yes", resource
        assert can_i("update", resource, "--subresource=status") == "no", resource
        assert can_i("patch", resource) == "no", resource


def test_programmed_follows_the_permission_to_write(stack, tmp_path):
    """Programmed True once the WasmPlugin is written; an admin takes the controller's permission to write
    WasmPlugins away, and a policy change then cannot reach the WasmPlugin: Programmed False/Reconciling
    with the API server's refusal in the message (the Gateway's condition says Reconciling too, and the
    gateway keeps enforcing the plan it has); the permission given back: Programmed True again and the
    change at the gateway. The Gateway's condition stays beside istiod's conditions, and goes with the
    policy."""
    cluster, mcp, port = stack["cluster"], stack["mcp"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    role = cluster.get("clusterrole", ROLE)
    assert role is not None
    try:
        harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
        cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("status", ["get-sum"]))
        c = wait_programmed(cluster, "status", "True", "Programmed")
        assert "WasmPlugin default/toolgate-gw-http" in c["message"], c
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                         timeout=60, what="get-sum allowed and echo denied through the gateway")
        # The Gateway: istiod's conditions and ours, each under its own field manager.
        have = harness.wait_for(lambda: (g := gateway_conditions(cluster)).get(AFFECTED) and
                                g.get("Programmed", {}).get("status") == "True" and g, timeout=60,
                                what="istiod's Programmed and ours on the Gateway")
        assert (have[AFFECTED]["status"], have[AFFECTED]["reason"]) == ("True", "Programmed"), have
        assert have[AFFECTED]["message"] == "XAccessPolicy default/status: enforced", have
        assert have["Accepted"]["status"] == "True", "istiod's Accepted is untouched"
        gw = json.loads(cluster.kubectl("get", "gateway", "gw", "-n", "default", "--show-managed-fields", "-o", "json").stdout)
        conditions_of = {m["manager"]: m.get("fieldsV1", {}).get("f:status", {}).get("f:conditions", {})
                         for m in gw["metadata"]["managedFields"] if m.get("subresource") == "status"}
        assert list(conditions_of["toolgate-target-status"]) == ['k:{"type":"toolgate.dev/XAccessPolicyAffected"}'], \
            conditions_of
        assert [m for m, owned in conditions_of.items() if 'k:{"type":"Programmed"}' in owned], conditions_of

        # The admin takes the permission to write WasmPlugins away (read stays).
        reduced = fresh(role)
        for rule in reduced["rules"]:
            if "wasmplugins" in rule.get("resources", []):
                rule["verbs"] = ["get", "list", "watch"]
        cluster.kubectl("replace", "-f", "-", input=json.dumps(reduced))
        harness.wait_for(lambda: cluster.kubectl("auth", "can-i", "patch", "wasmplugins.extensions.istio.io", "-n", "default",
                                                 check=False, kubeconfig=cluster.controller_kubeconfig).stdout.strip() == "no",
                         timeout=30, what="the permission gone")
        cluster.apply(allow_policy("status", ["echo"]))
        c = wait_programmed(cluster, "status", "False", "Reconciling")
        assert "WasmPlugin default/toolgate-gw-http" in c["message"] and "forbidden" in c["message"], c
        g = harness.wait_for(lambda: (x := gateway_conditions(cluster).get(AFFECTED)) and x["status"] == "False" and x,
                             timeout=30, what="the Gateway's condition Reconciling")
        assert g["reason"] == "Reconciling", g
        assert 'toolgate_controller_errors_total{error="write"}' in controller.metrics()
        assert allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)), "the old plan still enforced"

        # Given back: the pending write goes through.
        cluster.kubectl("replace", "-f", "-", input=json.dumps(fresh(role)))
        c = wait_programmed(cluster, "status", "True", "Programmed")
        assert cluster.get("wasmplugin", "toolgate-gw-http")["spec"]["pluginConfig"]["gateway"]["allow"][0]["rules"], c
        harness.wait_for(lambda: denied(call(port, "get-sum", mcp)) and allowed(call(port, "echo", mcp)),
                         timeout=60, what="the change at the gateway")
        harness.wait_for(lambda: gateway_conditions(cluster).get(AFFECTED, {}).get("status") == "True", timeout=30,
                         what="the Gateway's condition True again")

        # The policy deleted: our condition goes, istiod's stay.
        cluster.kubectl("delete", "xaccesspolicy", "status", "-n", "default")
        harness.wait_for(lambda: AFFECTED not in gateway_conditions(cluster), timeout=30, what=f"{AFFECTED} removed")
        assert gateway_conditions(cluster)["Programmed"]["status"] == "True"
    finally:
        controller.stop()
        cluster.kubectl("replace", "-f", "-", input=json.dumps(fresh(role)), check=False)
        cluster.kubectl("delete", "xaccesspolicy", "status", "-n", "default", check=False)


def list_tools(port: int, mcp: harness.McpServer) -> list[str] | None:
    """The names tools/list returns through the gateway (None: no JSON-RPC result)."""
    r = call(port, "", mcp, method="tools/list").response
    result = json.loads(r.body).get("result") if r is not None and r.status == 200 else None
    return None if result is None else [t["name"] for t in result["tools"]]


def test_rollout_annotations_at_the_gateway(stack, tmp_path):
    """docs/semantics.md §6a at the real gateway, the annotations changed live on the API server: the Gateway
    annotated `toolgate.dev/default: deny` with no policy denies capability calls and passes tools/list
    (filtered to empty); without the annotation everything passes again; a dry-run policy allowing only
    get-sum leaves echo running; removing its annotation enforces it."""
    cluster, mcp, port = stack["cluster"], stack["mcp"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
        cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND)
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="no policy: echo passes")
        cluster.kubectl("annotate", "gateway", "gw", "-n", "default", "toolgate.dev/default=deny")
        harness.wait_for(lambda: denied(call(port, "echo", mcp)) and denied(call(port, "get-sum", mcp)), timeout=60,
                         what="deny by default at the gateway")
        assert list_tools(port, mcp) == [], "the base protocol passes, the list filtered to empty"

        cluster.kubectl("annotate", "gateway", "gw", "-n", "default", "toolgate.dev/default-")
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="the annotation removed: echo passes")
        assert "echo" in list_tools(port, mcp)

        shadow = allow_policy("rollout", ["get-sum"]).replace(
            "namespace: default}", "namespace: default, annotations: {toolgate.dev/dry-run: 'true'}}", 1)
        cluster.apply(shadow)
        harness.wait_for(lambda: (w := cluster.get("wasmplugin", "toolgate-gw-http"))
                         and w["spec"]["pluginConfig"]["gateway"]["allow"][0].get("dryRun"), timeout=30,
                         what="the dry-run policy in the WasmPlugin")
        harness.wait_for(lambda: gateway_conditions(cluster).get(AFFECTED, {}).get("reason") == "DryRun", timeout=30,
                         what="the Gateway's condition DryRun")
        # The gateway has the plan (over ECDS) before it is judged: it changes nothing.
        harness.wait_for(lambda: "dryRun" in json.dumps(wasm_filters(stack["envoy"])), timeout=60,
                         what="the dry-run plan at the gateway")
        assert allowed(call(port, "echo", mcp)) and allowed(call(port, "get-sum", mcp)), "dry-run changes nothing"

        cluster.kubectl("annotate", "xaccesspolicy", "rollout", "-n", "default", "toolgate.dev/dry-run-")
        harness.wait_for(lambda: denied(call(port, "echo", mcp)) and allowed(call(port, "get-sum", mcp)), timeout=60,
                         what="the policy enforced at the gateway")
        assert wait_programmed(cluster, "rollout", "True", "Programmed")["message"].startswith("enforced by")
    finally:
        controller.stop()
        cluster.kubectl("delete", "xaccesspolicy", "rollout", "-n", "default", check=False)
        cluster.kubectl("annotate", "gateway", "gw", "-n", "default", "toolgate.dev/default-", check=False)
