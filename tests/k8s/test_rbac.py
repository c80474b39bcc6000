"""Least privilege on the real API server (issue 38): what deploy/ lets `toolgate controller`'s
ServiceAccount do, asked of kube-apiserver's RBAC (`kubectl auth can-i --as`) and tried against its
admission (writes with `kubectl --as`, as the controller would make them), and the controller itself
running with that account: ConfigMap verbs only with deploy/rbac-plan-configmaps.yaml; nothing written
into Istio's root namespace or kube-system (deploy/rbac.yaml's ValidatingAdmissionPolicy: a ClusterRole
cannot leave namespaces out), and a Gateway there not reported Programmed; a ConfigMap of a plan's name
that Toolgate did not write never overwritten."""

from __future__ import annotations

import json

import pytest

import harness
from gateway_objects import allow_policy, gateway
from k8s_stack import CONTROLLER_SA, REPO, ApiServer, Controller

PLAN_CONFIGMAPS = REPO / "deploy/rbac-plan-configmaps.yaml"
SYSTEM = ("istio-system", "kube-system")
# The ValidatingAdmissionPolicy's message.
REFUSED = "toolgate-controller writes nothing into Istio's root namespace or kube-system"


def can_i(server: ApiServer, verb: str, resource: str, ns: str) -> str:
    return server.kubectl("auth", "can-i", verb, resource, "-n", ns, "--as", CONTROLLER_SA, check=False).stdout.strip()


def as_controller(server: ApiServer, *args: str, input: str | None = None):
    return server.kubectl(*args, "--as", CONTROLLER_SA, input=input, check=False)


def in_namespace(yaml_text: str, ns: str) -> str:
    return yaml_text.replace("namespace: default", f"namespace: {ns}")


def objects(ns: str) -> dict[str, str]:
    """One object of each kind the controller writes, in `ns`."""
    return {
        "envoyfilter": f"""
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: probe, namespace: {ns}, labels: {{app.kubernetes.io/managed-by: toolgate}}}}
spec: {{configPatches: []}}
""",
        "wasmplugin": f"""
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: probe, namespace: {ns}, labels: {{app.kubernetes.io/managed-by: toolgate}}}}
spec: {{url: "oci://registry.example/x:1"}}
""",
        "configmap": f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: probe, namespace: {ns}, labels: {{app.kubernetes.io/managed-by: toolgate}}}}
data: {{plan.json: "{{}}"}}
""",
    }


@pytest.fixture
def plan_configmaps_role(cluster):
    """deploy/rbac-plan-configmaps.yaml applied for one test."""
    cluster.kubectl("apply", "--server-side", "-f", str(PLAN_CONFIGMAPS))
    harness.wait_for(lambda: can_i(cluster, "create", "configmaps", "default") == "yes", timeout=30,
                     what="the ConfigMap role in effect")
    yield
    cluster.kubectl("delete", "-f", str(PLAN_CONFIGMAPS), check=False)
    harness.wait_for(lambda: can_i(cluster, "create", "configmaps", "default") == "no", timeout=30,
                     what="the ConfigMap role gone")


def test_configmaps_only_with_their_own_role(cluster):
    """deploy/rbac.yaml alone grants nothing on ConfigMaps; deploy/rbac-plan-configmaps.yaml (for
    --plan-configmaps) grants what the controller does with them, and only that."""
    verbs = ("get", "list", "watch", "create", "patch", "delete")
    assert {v: can_i(cluster, v, "configmaps", "default") for v in verbs} == {v: "no" for v in verbs}
    cluster.kubectl("apply", "--server-side", "-f", str(PLAN_CONFIGMAPS))
    try:
        harness.wait_for(lambda: all(can_i(cluster, v, "configmaps", "default") == "yes" for v in verbs), timeout=30,
                         what="the ConfigMap role in effect")
        assert can_i(cluster, "update", "configmaps", "default") == "no"
        assert can_i(cluster, "create", "secrets", "default") == "no"
    finally:
        cluster.kubectl("delete", "-f", str(PLAN_CONFIGMAPS))
    for resource in ("wasmplugins.extensions.istio.io", "envoyfilters.networking.istio.io"):
        assert can_i(cluster, "patch", resource, "default") == "yes"
        assert can_i(cluster, "update", resource, "default") == "no", "server-side apply needs patch only"


def test_no_writes_into_istio_root_or_kube_system(cluster, plan_configmaps_role):
    """RBAC lets the ServiceAccount write EnvoyFilters, WasmPlugins and (here) ConfigMaps in every
    namespace; the admission policy refuses every create, change and delete of its in istio-system and
    kube-system, and nothing else: the same writes into default go through."""
    for ns in SYSTEM:
        assert can_i(cluster, "create", "envoyfilters.networking.istio.io", ns) == "yes", "RBAC alone allows it"

    def refused(ns: str, kind: str) -> bool:
        out = as_controller(cluster, "apply", "--server-side", "--field-manager=toolgate", "-f", "-",
                            input=objects(ns)[kind])
        if out.returncode == 0:
            # Written before the policy was in effect: removed, so that nothing is left to count.
            cluster.kubectl("delete", kind, "probe", "-n", ns)
            return False
        assert REFUSED in out.stderr, out.stderr
        return True

    harness.wait_for(lambda: refused("kube-system", "configmap"), timeout=30, what="the admission policy in effect")
    for ns in SYSTEM:
        for kind in objects(ns):
            assert refused(ns, kind), (ns, kind)
            assert cluster.kubectl("get", kind, "probe", "-n", ns, check=False).returncode != 0, (ns, kind)
        # Nor deleted or changed: an EnvoyFilter there is mesh-wide, and not the controller's to remove.
        cluster.apply(objects(ns)["envoyfilter"])
        out = as_controller(cluster, "delete", "envoyfilter", "probe", "-n", ns)
        assert out.returncode != 0 and REFUSED in out.stderr, out.stderr
        out = as_controller(cluster, "label", "envoyfilter", "probe", "-n", ns, "x=y")
        assert out.returncode != 0 and REFUSED in out.stderr, out.stderr
        cluster.kubectl("delete", "envoyfilter", "probe", "-n", ns)
    for kind, text in objects("default").items():
        out = as_controller(cluster, "apply", "--server-side", "--field-manager=toolgate", "-f", "-", input=text)
        assert out.returncode == 0, (kind, out.stderr)
        assert as_controller(cluster, "delete", kind, "probe", "-n", "default").returncode == 0


def programmed(server: ApiServer, name: str, ns: str) -> dict | None:
    out = server.kubectl("get", "xaccesspolicy", name, "-n", ns, "-o", "json", check=False)
    status = json.loads(out.stdout).get("status", {}) if out.returncode == 0 else {}
    return next((c for a in status.get("ancestors", []) for c in a["conditions"] if c["type"] == "Programmed"), None)


def wait_programmed(server: ApiServer, name: str, ns: str, status: str, reason: str) -> dict:
    return harness.wait_for(lambda: (c := programmed(server, name, ns)) and c["status"] == status
                            and c["reason"] == reason and c, timeout=60, what=f"{ns}/{name}: Programmed {status}/{reason}")


def test_the_controller_with_its_service_account(cluster, plan_configmaps_role, tmp_path):
    """The controller with --plan-configmaps, as its ServiceAccount: a Gateway in default gets its
    WasmPlugin, EnvoyFilter and plan ConfigMap, except that a ConfigMap of the plan's name someone else
    wrote is left alone (OutputConflict) until it goes; a Gateway in istio-system gets nothing, and its
    policy is not Programmed (the admission policy's refusal in the message)."""
    foreign = """
apiVersion: v1
kind: ConfigMap
metadata: {name: toolgate-plan-gw-http, namespace: default}
data: {plan.json: "someone else's"}
"""
    cluster.apply(foreign)
    policies = gateway() + "---" + allow_policy("p", ["get-sum"])
    cluster.apply(policies + "---" + in_namespace(policies, "istio-system"))
    controller = Controller(cluster, tmp_path, "--plan-configmaps")

    def get(kind: str, name: str, ns: str = "default") -> dict | None:
        out = cluster.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    try:
        c = wait_programmed(cluster, "p", "default", "False", "OutputConflict")
        assert "ConfigMap default/toolgate-plan-gw-http" in c["message"] and "not Toolgate's" in c["message"], c
        assert get("configmap", "toolgate-plan-gw-http")["data"] == {"plan.json": "someone else's"}
        assert get("wasmplugin", "toolgate-gw-http") and get("envoyfilter", "toolgate-gw")

        c = wait_programmed(cluster, "p", "istio-system", "False", "Reconciling")
        assert REFUSED in c["message"], c
        for kind in ("wasmplugins", "envoyfilters", "configmaps"):
            items = json.loads(cluster.kubectl("get", kind, "-n", "istio-system", "-o", "json").stdout)["items"]
            assert not [i for i in items if i["metadata"]["name"].startswith("toolgate-")], (kind, items)

        cluster.kubectl("delete", "configmap", "toolgate-plan-gw-http", "-n", "default")
        c = wait_programmed(cluster, "p", "default", "True", "Programmed")
        assert "ConfigMap default/toolgate-plan-gw-http" in c["message"], c
        cm = get("configmap", "toolgate-plan-gw-http")
        assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "toolgate", cm
        assert json.loads(cm["data"]["plan.json"])["listener"] == "default/gw/http"
        assert programmed(cluster, "p", "istio-system")["status"] == "False", "still refused there"
    finally:
        controller.stop()
        for ns in ("default", "istio-system"):
            for kind in ("xaccesspolicies", "gateways", "wasmplugins", "envoyfilters"):
                cluster.kubectl("delete", kind, "--all", "-n", ns, "--wait=false", check=False)
        cluster.kubectl("delete", "configmap", "toolgate-plan-gw-http", "-n", "default", check=False)
