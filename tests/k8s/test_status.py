"""`toolgate controller` against a real API server (tests/k8s/kube-apiserver.sh), the status it writes on the
objects policies target and the annotations of a rollout (issue 28): GEP-713's
`toolgate.dev/XAccessPolicyAffected` condition on Gateways and XBackends, beside another controller's
conditions on the same object; `toolgate.dev/dry-run` and the Gateway's `toolgate.dev/default: deny`
reaching the WasmPlugin's plan, added and removed live."""

from __future__ import annotations

import json

import harness
from gateway_objects import ROUTE_AND_BACKEND, allow_policy, gateway
from k8s_stack import Controller, plugin, reset

AFFECTED = "toolgate.dev/XAccessPolicyAffected"
OTHER = "example.com/other-gateway-controller"


def conditions(server, kind: str, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in ((server.get(kind, name) or {}).get("status") or {}).get("conditions", [])}


def affected(server, kind: str, name: str) -> dict | None:
    return conditions(server, kind, name).get(AFFECTED)


def wait_affected(server, kind: str, name: str, status: str, reason: str) -> dict:
    return harness.wait_for(
        lambda: (c := affected(server, kind, name)) and c["status"] == status and c["reason"] == reason and c,
        timeout=30, what=f"{kind} {name}: {AFFECTED} {status}/{reason}")


def other_controller_writes(server, message: str):
    """Another controller's conditions on the Gateway, applied to its status under its own field manager."""
    server.kubectl("apply", "--server-side", "--subresource=status", f"--field-manager={OTHER}", "-f", "-", input=f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
status:
  conditions:
  - {{type: Accepted, status: "True", reason: Accepted, message: "{message}", lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Programmed, status: "True", reason: Programmed, message: "{message}", lastTransitionTime: "2026-01-01T00:00:00Z"}}
""")


def managers(server, kind: str, name: str) -> dict[str, str]:
    """Field manager -> the status fields it owns (fieldsV1 as text)."""
    obj = json.loads(server.kubectl("get", kind, name, "-n", "default", "--show-managed-fields", "-o", "json").stdout)
    return {m["manager"]: json.dumps(m.get("fieldsV1", {})) for m in obj["metadata"].get("managedFields", [])
            if m.get("subresource") == "status"}


def test_target_condition_beside_other_controllers(cluster, tmp_path):
    """The condition appears on the Gateway and the XBackend the policies target, under the field manager
    toolgate-target-status, which owns that one condition only; another controller's conditions on the
    same Gateway are left as that controller wrote them, before and after; each goes when no policy
    targets its object any more."""
    server = cluster
    reset(server)
    controller = Controller(server, tmp_path)
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND)
        other_controller_writes(server, "by the other controller")
        server.apply(allow_policy("p", ["get-sum"]) + "---" + allow_policy("q", ["get-sum"], "tools"))
        gw = wait_affected(server, "gateway", "gw", "True", "Programmed")
        assert gw["message"] == "XAccessPolicy default/p: enforced", gw
        assert gw["observedGeneration"] == server.get("gateway", "gw")["metadata"]["generation"]
        tools = wait_affected(server, "xbackend", "tools", "True", "Programmed")
        assert tools["message"] == "XAccessPolicy default/q: enforced", tools

        obj = server.get("gateway", "gw")
        have = {c["type"]: c for c in obj["status"]["conditions"]}
        assert have["Accepted"]["message"] == have["Programmed"]["message"] == "by the other controller", have
        owned = managers(server, "gateway", "gw")
        assert AFFECTED in owned["toolgate-target-status"] and "Programmed" not in owned["toolgate-target-status"], owned
        assert AFFECTED not in owned[OTHER], owned
        assert "toolgate" not in owned, "the policy status's manager writes no Gateway"

        # The other controller writes again (its own list of conditions, without ours): ours stays.
        other_controller_writes(server, "updated by the other controller")
        harness.wait_for(lambda: conditions(server, "gateway", "gw")["Programmed"]["message"] == "updated by the other controller",
                         timeout=10, what="the other controller's update")
        assert affected(server, "gateway", "gw")["status"] == "True"

        # A second policy on the Gateway: named in the message, the transition time kept.
        server.apply(allow_policy("p2", ["echo"]))
        again = harness.wait_for(lambda: (c := affected(server, "gateway", "gw")) and "default/p2" in c["message"] and c,
                                 timeout=30, what="p2 in the Gateway's condition")
        assert again["message"] == "XAccessPolicy default/p: enforced; default/p2: enforced", again
        assert again["lastTransitionTime"] == gw["lastTransitionTime"]

        # No policy targets them any more: the condition goes, the other controller's stay.
        server.kubectl("delete", "xaccesspolicy", "p", "p2", "q", "-n", "default")
        harness.wait_for(lambda: affected(server, "gateway", "gw") is None, timeout=30, what=f"{AFFECTED} removed from gw")
        harness.wait_for(lambda: affected(server, "xbackend", "tools") is None, timeout=30,
                         what=f"{AFFECTED} removed from tools")
        have = conditions(server, "gateway", "gw")
        assert set(have) == {"Accepted", "Programmed"}, have
        assert have["Programmed"]["message"] == "updated by the other controller", have
    finally:
        controller.stop()


def dry_run(policy_yaml: str) -> str:
    return policy_yaml.replace("namespace: default}", "namespace: default, annotations: {toolgate.dev/dry-run: 'true'}}", 1)


def test_rollout_annotations_reach_the_plan(cluster, tmp_path):
    """The rollout of docs/semantics.md §6a through the controller: a Gateway annotated
    `toolgate.dev/default: deny` gets a plan (with defaultDeny) although no policy targets it; a dry-run
    policy is in the plan marked dryRun, Programmed "in dry-run", and its Gateway's condition says DryRun;
    removing the policy's annotation enforces it, removing the Gateway's drops defaultDeny from the plan."""
    server = cluster
    reset(server)
    controller = Controller(server, tmp_path)
    try:
        server.apply(gateway() + "---" + ROUTE_AND_BACKEND)
        server.kubectl("annotate", "gateway", "gw", "-n", "default", "toolgate.dev/default=deny")
        wp = harness.wait_for(lambda: plugin(server), timeout=30, what="a WasmPlugin for the deny-by-default Gateway")
        config = wp["spec"]["pluginConfig"]
        assert config["settings"]["defaultDeny"] is True and config["gateway"] == {"allow": []}, config
        assert affected(server, "gateway", "gw") is None, "no policy targets gw"

        server.apply(dry_run(allow_policy("shadow", ["get-sum"])))
        wp = harness.wait_for(lambda: (w := plugin(server)) and w["spec"]["pluginConfig"]["gateway"]["allow"] and w,
                              timeout=30, what="the dry-run policy in the plan")
        [entry] = wp["spec"]["pluginConfig"]["gateway"]["allow"]
        assert entry["name"] == "default/shadow" and entry["dryRun"] is True, entry
        assert wp["spec"]["pluginConfig"]["settings"]["defaultDeny"] is True
        c = wait_affected(server, "gateway", "gw", "True", "DryRun")
        assert c["message"] == "XAccessPolicy default/shadow: in dry-run (not enforced)", c
        [programmed] = harness.wait_for(
            lambda: [c for a in ((server.get("xaccesspolicy", "shadow") or {}).get("status") or {}).get("ancestors", [])
                     for c in a["conditions"] if c["type"] == "Programmed" and c["status"] == "True"],
            timeout=30, what="shadow Programmed")
        assert programmed["message"].startswith("in dry-run (not enforced)"), programmed

        # The policy's annotation removed: enforced, with no other change.
        server.kubectl("annotate", "xaccesspolicy", "shadow", "-n", "default", "toolgate.dev/dry-run-")
        wp = harness.wait_for(lambda: (w := plugin(server)) and "dryRun" not in w["spec"]["pluginConfig"]["gateway"]["allow"][0]
                              and w, timeout=30, what="the policy enforced in the plan")
        assert wp["spec"]["pluginConfig"]["gateway"]["allow"][0]["name"] == "default/shadow"
        wait_affected(server, "gateway", "gw", "True", "Programmed")

        # The Gateway's annotation removed: the plan has no defaultDeny (the policy keeps the WasmPlugin).
        server.kubectl("annotate", "gateway", "gw", "-n", "default", "toolgate.dev/default-")
        harness.wait_for(lambda: (w := plugin(server)) and "defaultDeny" not in w["spec"]["pluginConfig"].get("settings", {}),
                         timeout=30, what="defaultDeny gone from the plan")

        # Neither a policy nor the annotation: no output at all.
        server.kubectl("delete", "xaccesspolicy", "shadow", "-n", "default")
        harness.wait_for(lambda: plugin(server) is None, timeout=30, what="the WasmPlugin deleted")
        harness.wait_for(lambda: affected(server, "gateway", "gw") is None, timeout=30, what=f"{AFFECTED} removed")
    finally:
        controller.stop()
