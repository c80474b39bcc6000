"""Issue 38 at a real gateway: no tenant, no name and no typo can switch enforcement off (docs/semantics.md
§2 "Tenancy" and "Route attachment", controller/src/topology/backend_keys.rs, runtime/shared_port.rs), on
the real Istio stack of conftest.py (kube-apiserver with RBAC, istiod, the gateway's Envoy over ADS,
`toolgate controller` with deploy/'s permissions):

- the victim: the `default` namespace's route to its Service `mcp-server`, the XBackend `tools` naming it and
  a policy on that XBackend allowing get-sum only; its backend level is keyed by istiod's cluster of the
  Service (`outbound|8080||mcp-server.default.svc.cluster.local`);
- a tenant namespace on the shared Gateway (`allowedRoutes.namespaces.from: All`) whose XBackend names the
  victim's Service host, with an allow-everything and an ExternalAuth policy on it: its policies are
  refused (`HostNotOwned`), the victim's allow and deny are unchanged at the gateway, also for the
  tenant's own route to the victim's host (Istio's `Hostname` kind), and the tenant's authorizer, which
  its own backend reaches, sees none of the victim's requests; then seeded random tenant object sets,
  one at a time beside the victim, the victim's decisions replayed after each;
- `allowedRoutes.namespaces.from: Selector`: a route from a Namespace with the selected label is attached by
  istiod and its backend's policy enforced; a Namespace relabelled live is followed (the controller
  watches Namespaces);
- two HTTPS listeners on one port (`*.example.com` with a policy, `a.example.com` without): a client on the
  wildcard's filter chain (SNI x.example.com) sending `Host: a.example.com` is judged by the wildcard's
  policy.

Every test here fails with the controller of f9482e2's parent (`TOOLGATE_BIN=<that build>/toolgate`).

    .venv/bin/pytest tests/istio/test_istio_tenancy.py -q -x
"""

from __future__ import annotations

import base64
import json
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest

import harness
from harness import assert_allowed, assert_denied
from istio_stack import (GATEWAY_LABELS, ISTIO_SVC, ROUTE_AND_BACKEND, Cluster, Controller, allow_policy, allowed, call,
                         denied, wasm_filters)

VICTIM_HOST = "mcp-server.default.svc.cluster.local"
XBACKEND = {"group": "agentic.networking.x-k8s.io", "kind": "XBackend"}
PLUGIN = "toolgate-gw-http"


def yaml(*objects: dict | str) -> str:
    return harness.to_yaml(*objects)


# --------------------------------------------------------------------------------------------------
# Objects


GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "gw", "namespace": "default"}}


def shared_gateway(http_port: int, namespaces: dict) -> str:
    """default/gw with one HTTP listener whose `allowedRoutes.namespaces` is `namespaces`."""
    return yaml({**GATEWAY, "spec": {"gatewayClassName": "istio", "listeners": [
        {"name": "http", "port": http_port, "protocol": "HTTP", "allowedRoutes": {"namespaces": namespaces}}]}})


def namespace(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def service(ns: str, name: str, port: int, target_port: int, app_protocol: str = "http") -> list[dict]:
    """A Service and its one endpoint, a WorkloadEntry at 127.0.0.1 (istio_stack.services says why)."""
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
             "spec": {"selector": {"app": name}, "ports": [{"name": app_protocol, "port": port, "targetPort": target_port,
                                                             "appProtocol": app_protocol}]}},
            {"apiVersion": "networking.istio.io/v1", "kind": "WorkloadEntry",
             "metadata": {"name": f"{name}-0", "namespace": ns, "labels": {"app": name}},
             "spec": {"address": "127.0.0.1", "labels": {"app": name}}}]


def xbackend(ns: str, name: str, **mcp) -> dict:
    return {"apiVersion": "agentic.networking.x-k8s.io/v0alpha0", "kind": "XBackend",
            "metadata": {"name": name, "namespace": ns}, "spec": {"mcp": mcp}}


def route(ns: str, name: str, backend_ref: dict, hostnames: list[str] | None = None) -> dict:
    spec: dict = {"parentRefs": [{"name": "gw", "namespace": "default"}],
                  "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}], "backendRefs": [backend_ref]}]}
    if hostnames:
        spec["hostnames"] = hostnames
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def xbackend_policy(ns: str, name: str, target: str, *, external_auth: bool = False, tools: list[str] | None = None,
                    dry_run: bool = False) -> dict:
    """An XAccessPolicy on the XBackend `target` of `ns`: Allow without rules (everything) or with tools/call
    of `tools`; or ExternalAuth to the Service `authz:9000` of `ns` over gRPC."""
    meta: dict = {"name": name, "namespace": ns}
    if dry_run:
        meta["annotations"] = {"toolgate.dev/dry-run": "true"}
    spec: dict = {"targetRefs": [{**XBACKEND, "name": target}], "action": "Allow"}
    if tools is not None:
        spec["rules"] = [{"name": "tools", "authorization": {"type": "Inline", "mcp": {"methods": [
            {"name": "tools/call", "params": tools}]}}}]
    if external_auth:
        spec["action"] = "ExternalAuth"
        spec["externalAuth"] = {"protocol": "GRPC", "grpc": {}, "backendRef": {"name": "authz", "port": 9000}}
    return {"apiVersion": "agentic.networking.x-k8s.io/v1alpha1", "kind": "XAccessPolicy", "metadata": meta, "spec": spec}


def delete_all_in(cluster: Cluster, ns: str) -> None:
    """Every object the tests create in `ns` (the Namespace stays: no kube-controller-manager finalizes it)."""
    cluster.kubectl("delete", "xaccesspolicies.agentic.networking.x-k8s.io,httproutes.gateway.networking.k8s.io,"
                    "xbackends.agentic.networking.x-k8s.io,referencegrants.gateway.networking.k8s.io,services,"
                    "workloadentries.networking.istio.io", "--all", "-n", ns, "--ignore-not-found", "--wait=false")


# --------------------------------------------------------------------------------------------------
# What the controller wrote, what the gateway runs


def accepted(cluster: Cluster, ns: str, name: str) -> dict | None:
    """The policy's `Accepted` condition, once written for its current generation (one target each here)."""
    p = cluster.get("xaccesspolicy", name, namespace=ns)
    if not p:
        return None
    conditions = [c for a in (p.get("status") or {}).get("ancestors", []) for c in a.get("conditions", [])
                  if c["type"] == "Accepted"]
    if len(conditions) != 1 or conditions[0].get("observedGeneration") != p["metadata"].get("generation"):
        return None
    return conditions[0]


def plan(cluster: Cluster, plugin: str = PLUGIN) -> dict | None:
    """The plan the controller wrote in the WasmPlugin `plugin` of default/gw."""
    wp = cluster.get("wasmplugin", plugin)
    return wp["spec"]["pluginConfig"] if wp else None


def routes_to(envoy: harness.Envoy, host_name: str) -> set[str]:
    """Where the gateway's routes send `Host: host_name`: the clusters (or `direct_response <status>`) of the
    virtual host istiod made for exactly that name, over RDS (empty: none; the Host goes to a wider one)."""
    out: set[str] = set()
    for c in envoy.config_dump("dynamic_route_configs").get("configs", []):
        for vh in c.get("route_config", {}).get("virtual_hosts", []):
            if host_name not in vh.get("domains", []):
                continue
            for r in vh.get("routes", []):
                action = r.get("route", {})
                out.update([action["cluster"]] if "cluster" in action else [])
                out.update(w["name"] for w in action.get("weighted_clusters", {}).get("clusters", []))
                if "direct_response" in r:
                    out.add(f"direct_response {r['direct_response'].get('status')}")
    return out


def runs(envoy: harness.Envoy, plan_: dict) -> bool:
    """Whether the gateway's Envoy runs this plan (its hash in the wasm filter istiod gave it over ECDS)."""
    return plan_["hash"] in json.dumps(wasm_filters(envoy))


class Waits:
    """harness.wait_for, failing with the tails of the controller's and the gateway's logs."""

    def __init__(self, env: dict):
        self.env = env

    def __call__(self, predicate, what: str, timeout: float = 60):
        try:
            return harness.wait_for(predicate, timeout=timeout, what=what)
        except harness.HarnessError as e:
            raise AssertionError(f"{e}\n--- controller\n{harness.tail(self.env['controller'].log, 25)}\n"
                                 f"--- gateway\n{self.env['envoy'].log_tail(15)}") from None


@pytest.fixture(scope="module")
def tg(stack, tmp_path_factory):
    """The stack with `toolgate controller` running, and a tenant's authorizer (allows everything) that each
    tenant namespace's Service `authz` (port 9000, gRPC) reaches."""
    cluster: Cluster = stack["cluster"]
    harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
    work = tmp_path_factory.mktemp("tenancy")
    controller = Controller(cluster, work, stack["wasm"])
    az = harness.Authorizer.start("tenant-authz", work / "authz")
    try:
        env = {**stack, "controller": controller, "authz": az,
               "authz_port": int(az.grpc_address.rsplit(":", 1)[1])}
        env["wait"] = Waits(env)
        yield env
    finally:
        controller.stop()
        az.stop()


def host(name: str) -> dict:
    return {"host": name}


def victim(tg) -> dict:
    """default/gw admitting routes from every namespace, the victim's route, XBackend and policy (get-sum
    only) enforced at the gateway; returns the plan the controller wrote for them alone."""
    cluster, mcp, port, wait = tg["cluster"], tg["mcp"], tg["port"], tg["wait"]
    cluster.apply(yaml(shared_gateway(port, {"from": "All"}), ROUTE_AND_BACKEND,
                       allow_policy("victim", ["get-sum"], target="tools")))
    wait(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
         "the victim's policy at the gateway: get-sum allowed, echo denied")
    base = wait(lambda: (p := plan(cluster)) and ISTIO_SVC in p.get("backends", {}) and runs(tg["envoy"], p) and p,
                "the victim's plan at the gateway")
    assert [p["name"] for p in base["backends"][ISTIO_SVC]["allow"]] == ["default/victim"], base
    return base


def assert_victim_decisions(tg, *hosts: str) -> None:
    """The victim's allow and deny at the gateway, through its own route and through each of `hosts` (tenants'
    routes istiod sends to the victim's Service): the denied tools never reach the MCP server."""
    port, mcp = tg["port"], tg["mcp"]
    assert_allowed(call(port, "get-sum", mcp))
    assert_denied(call(port, "echo", mcp))
    assert_denied(call(port, "get-env", mcp))
    for h in hosts:
        assert_allowed(call(port, "get-sum", mcp, host(h)))
        assert_denied(call(port, "echo", mcp, host(h)))
        assert_denied(call(port, "get-env", mcp, host(h)))


# --------------------------------------------------------------------------------------------------
# 1. Backend identity under Istio is unforgeable


OTHER_CLAIMANTS = {"t2": VICTIM_HOST.upper(), "t3": VICTIM_HOST + "."}


def test_a_tenant_xbackend_naming_the_victims_service_claims_nothing(tg):
    """Tenant `t`: the XBackend `steal` with `hostname` the victim's Service host, an allow-everything and two
    ExternalAuth policies (one dry-run) on it, a route to it and a route to the victim's host (Istio's
    Hostname kind); and its own backend `own` with the same ExternalAuth (which shows its authorizer is
    reachable). Tenants t2 and t3 claim the host too (upper case, final dot), each with an
    allow-everything policy. The tenants' policies on `steal` are refused (HostNotOwned); the controller's
    level for the victim's cluster is unchanged; the victim's get-sum is allowed and echo denied at the gateway, through its
    route and through the tenant's; the tenant's authorizer sees only the tenant's own requests."""
    cluster, mcp, port, envoy, wait, az = tg["cluster"], tg["mcp"], tg["port"], tg["envoy"], tg["wait"], tg["authz"]
    base = victim(tg)
    try:
        cluster.apply(yaml(
            namespace("t"), *service("t", "authz", 9000, tg["authz_port"], "grpc"), *service("t", "own-mcp", 8080, mcp.port),
            xbackend("t", "steal", hostname=VICTIM_HOST, port=8080), xbackend("t", "own", serviceName="own-mcp", port=8080),
            route("t", "steal", {**XBACKEND, "name": "steal"}, ["steal.t.example.com"]),
            route("t", "to-victim", {"group": "networking.istio.io", "kind": "Hostname", "name": VICTIM_HOST, "port": 8080},
                  ["to-victim.t.example.com"]),
            route("t", "own", {"name": "own-mcp", "port": 8080}, ["own.t.example.com"])))
        # Two more tenants claiming the same Service host, spelled otherwise: before the fix the first
        # claimant in the controller's input order (its watch caches' hash order) keyed the cluster, so the
        # more claimants, the likelier the victim's level was one of theirs.
        for ns, spelling in OTHER_CLAIMANTS.items():
            cluster.apply(yaml(namespace(ns), xbackend(ns, "steal", hostname=spelling, port=8080),
                               route(ns, "steal", {**XBACKEND, "name": "steal"}, [f"steal.{ns}.example.com"])))
        cluster.apply(yaml(*(xbackend_policy(ns, "everything", "steal") for ns in OTHER_CLAIMANTS)))
        cluster.apply(yaml(xbackend_policy("t", "everything", "steal"),
                           xbackend_policy("t", "listen", "steal", external_auth=True),
                           xbackend_policy("t", "listen-dry", "steal", external_auth=True, dry_run=True),
                           xbackend_policy("t", "own-listen", "own", external_auth=True)))

        # The controller refuses the tenant's policies on `steal` and accepts the one on its own backend.
        refused = [("t", "everything"), ("t", "listen"), ("t", "listen-dry"), *((n, "everything") for n in OTHER_CLAIMANTS)]
        for ns, name in refused:
            c = wait(lambda: accepted(cluster, ns, name), f"the status of {ns}/{name}")
            assert (c["status"], c["reason"]) == ("False", "HostNotOwned"), (ns, name, c)
            assert "namespace default" in c["message"], c
        c = wait(lambda: accepted(cluster, "t", "own-listen"), "the status of t/own-listen")
        assert (c["status"], c["reason"]) == ("True", "Accepted"), c
        assert wait(lambda: accepted(cluster, "default", "victim"), "the victim's status")["status"] == "True"

        # Its plan: the victim's level as before, the tenant's authorizer only on the tenant's own cluster.
        own_key = "outbound|8080||own-mcp.t.svc.cluster.local"
        now = wait(lambda: (p := plan(cluster)) and own_key in p.get("backends", {}) and p, "t/own's level in the plan")
        assert now["backends"][ISTIO_SVC] == base["backends"][ISTIO_SVC], now["backends"][ISTIO_SVC]
        assert now.get("gateway") == base.get("gateway"), now.get("gateway")
        assert sorted(now["backends"]) == sorted([ISTIO_SVC, own_key]), sorted(now["backends"])
        wait(lambda: runs(envoy, now), "the plan at the gateway")

        # The tenant's authorizer is reachable: its own backend's requests go to it.
        wait(lambda: routes_to(envoy, "own.t.example.com") == {own_key}, "t's own route at the gateway")
        before = len(az.requests())
        assert_allowed(call(port, "echo", mcp, host("own.t.example.com")))
        wait(lambda: len(az.requests()) > before, "t's authorizer asked about t's own request", timeout=5)

        # The victim's decisions, through its route and through the tenant's route to its host (istiod's
        # virtual host for it sends it to the victim's cluster).
        wait(lambda: routes_to(envoy, "to-victim.t.example.com") == {ISTIO_SVC},
             "the tenant's Hostname route to the victim's Service at the gateway")
        seen = len(az.requests())
        assert_victim_decisions(tg, "to-victim.t.example.com")
        # istiod cannot send to an XBackend: the tenant's route to `steal` reaches no server.
        s = call(port, "echo", mcp, host("steal.t.example.com"))
        print(f"\n[istio] HTTPRoute t/steal (backendRef kind XBackend): {routes_to(envoy, 'steal.t.example.com')}, "
              f"HTTP {s.response and s.response.status}")
        assert s.executed == [], s
        assert len(az.requests()) == seen, az.requests()[seen:]
    finally:
        for ns in ("t", *OTHER_CLAIMANTS):
            delete_all_in(cluster, ns)


# The victim's Service host as a tenant could spell it: it is one host, one cluster, whatever the case and
# a final dot.
SPELLINGS = [VICTIM_HOST, VICTIM_HOST.upper(), "Mcp-Server.Default.Svc.Cluster.Local", VICTIM_HOST + ".",
             "MCP-SERVER.default.svc.cluster.local."]


def random_tenant(rng: random.Random, ns: str,
                  authz_port: int) -> tuple[list[dict], list[dict], dict[str, str | None], list[str]]:
    """What a tenant can create in its own namespace, at random: (objects, policies, the reason each policy's
    Accepted condition must have (None: any but TargetNotFound), the hosts of its routes to the victim's
    Service, which istiod routes there)."""
    objects: list[dict] = [namespace(ns, rng.choice([{}, {"team": "mcp"}, {"kubernetes.io/metadata.name": "default"}])),
                           *service(ns, "authz", 9000, authz_port, "grpc")]
    policies: list[dict] = []
    expect: dict[str, str | None] = {}
    to_victim: list[str] = []
    for i in range(1 + rng.randrange(3)):
        name = f"x{i}"
        kind = rng.choice(["host", "host", "other-port", "service"])
        if kind == "host":
            objects.append(xbackend(ns, name, hostname=rng.choice(SPELLINGS), port=8080))
        elif kind == "other-port":
            objects.append(xbackend(ns, name, hostname=rng.choice(SPELLINGS), port=9090))
        else:  # its own namespace's mcp-server (there is none): the tenant's own cluster
            objects.append(xbackend(ns, name, serviceName="mcp-server", port=8080))
        for p in rng.choice([["allow"], ["ea"], ["allow", "ea"], ["allow", "ea-dry"]]):
            policies.append(xbackend_policy(ns, f"{p}-{i}", name, external_auth=p.startswith("ea"),
                                            dry_run=p.endswith("dry")))
            expect[f"{p}-{i}"] = "HostNotOwned" if kind != "service" else None
        h = f"r{i}.{ns}.example.com"
        ref = rng.choice([
            {**XBACKEND, "name": name},
            {"name": "mcp-server", "namespace": "default", "port": 8080},      # no ReferenceGrant of default's
            {"name": "mcp-server", "port": 8080},                              # its own namespace's
            {"group": "networking.istio.io", "kind": "Hostname", "name": VICTIM_HOST, "port": 8080},
            {"group": "networking.istio.io", "kind": "Hostname", "name": rng.choice(SPELLINGS), "port": 8080},
            {**XBACKEND, "name": "tools", "namespace": "default"},             # the victim's XBackend, no grant
        ])
        objects.append(route(ns, f"r{i}", ref, [h]))
        if ref.get("kind") == "Hostname" and ref["name"] == VICTIM_HOST:
            to_victim.append(h)
    if rng.randrange(3) == 0:
        # A grant in its own namespace lets the victim's routes in, never the tenant into the victim's.
        objects.append({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                        "metadata": {"name": "g", "namespace": ns},
                        "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                           "namespace": "default"}],
                                 "to": [{"group": "", "kind": "Service"}, {**XBACKEND}]}})
    return objects, policies, expect, to_victim


# Between them these sets make every kind of object random_tenant makes (chosen greedily over seeds 1-399):
# XBackends naming the victim's host in each spelling, on its port and another, and its own Service; routes
# to its XBackend, to the victim's Service and XBackend without a grant, to its own Service, to the victim's
# host and a misspelled one by Istio's Hostname kind; grants; labelled Namespaces; Allow, ExternalAuth
# and dry-run policies.
SEEDS = [37, 89, 155, 5]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_tenants_beside_the_victim_change_nothing_of_its_enforcement(tg, seed):
    """A seeded random tenant object set (random_tenant) beside the victim: once the controller has judged
    it (every tenant policy's status written for its generation: HostNotOwned for those on an XBackend
    naming the victim's Service host, in any spelling and on any port), the controller's level for the
    victim's cluster is the same as without it, the gateway runs the controller's plan, and the victim's
    get-sum is allowed and echo and get-env denied, through its route and every tenant route istiod sends
    to its Service; the tenant's authorizer sees none of it."""
    cluster, envoy, wait, az = tg["cluster"], tg["envoy"], tg["wait"], tg["authz"]
    base = victim(tg)
    rng = random.Random(seed)
    ns = f"t{seed}"
    objects, policies, expect, to_victim = random_tenant(rng, ns, tg["authz_port"])
    print(f"\n[istio] seed {seed}: {len(objects)} objects, policies {expect}, routes to the victim's host {to_victim}")
    try:
        # Policies last: the objects they name are in the API server (and so at the controller) before them.
        cluster.apply(yaml(*objects))
        cluster.apply(yaml(*policies))

        def judged() -> dict | None:
            got = {name: accepted(cluster, ns, name) for name in expect}
            if any(c is None or c["reason"] == "TargetNotFound" for c in got.values()):
                return None
            return got
        got = wait(judged, f"the controller's status of {ns}'s policies")
        for name, reason in expect.items():
            if reason:
                assert (got[name]["status"], got[name]["reason"]) == ("False", reason), (name, got[name])
        assert wait(lambda: accepted(cluster, "default", "victim"), "the victim's status")["status"] == "True"
        now = plan(cluster)
        assert now["backends"][ISTIO_SVC] == base["backends"][ISTIO_SVC], \
            (now["backends"][ISTIO_SVC], yaml(*objects, *policies))
        assert now.get("gateway") == base.get("gateway"), now.get("gateway")
        wait(lambda: runs(envoy, plan(cluster)), "the controller's plan at the gateway")

        for h in to_victim:
            wait(lambda: routes_to(envoy, h) == {ISTIO_SVC}, f"istiod's route {h} to the victim's cluster")
        seen = len(az.requests())
        assert_victim_decisions(tg, *to_victim)
        assert len(az.requests()) == seen, az.requests()[seen:]
    finally:
        delete_all_in(cluster, ns)


# --------------------------------------------------------------------------------------------------
# 2. allowedRoutes.namespaces.from: Selector


def team(ns: str, labels: dict, mcp: harness.McpServer) -> list[dict]:
    """Namespace `ns` with `labels`: its Service `tools` (the MCP server), the XBackend `tools` naming it, a
    route on default/gw for `<ns>.example.com`, and a policy on the XBackend allowing get-sum only."""
    return [namespace(ns, labels), *service(ns, "tools", 8080, mcp.port),
            xbackend(ns, "tools", serviceName="tools", port=8080),
            route(ns, "r", {"name": "tools", "port": 8080}, [f"{ns}.example.com"]),
            xbackend_policy(ns, "sum-only", "tools", tools=["get-sum"])]


def test_routes_attached_by_namespace_selector_are_enforced(tg):
    """default/gw's listener admits routes from Namespaces labelled team=mcp. istiod attaches mcp-team's route
    (its get-sum reaches the server) and the controller's plan has mcp-team's backend level (its echo is
    denied); web-team's route (team=web) is attached by neither. Relabelled team=mcp, web-team's route is
    attached by both (the controller follows the Namespace's labels) and enforced; relabelled back, its
    level leaves the plan."""
    cluster, mcp, port, envoy, wait = tg["cluster"], tg["mcp"], tg["port"], tg["envoy"], tg["wait"]
    mcp_key = "outbound|8080||tools.mcp-team.svc.cluster.local"
    web_key = "outbound|8080||tools.web-team.svc.cluster.local"
    backends = lambda: set((plan(cluster) or {}).get("backends", {}))  # noqa: E731
    try:
        cluster.apply(yaml(shared_gateway(port, {"from": "Selector", "selector": {"matchLabels": {"team": "mcp"}}}),
                           *team("mcp-team", {"team": "mcp"}, mcp), *team("web-team", {"team": "web"}, mcp)))
        m = "mcp-team.example.com"
        wait(lambda: routes_to(envoy, m) == {mcp_key}, "mcp-team's route attached by istiod")
        wait(lambda: allowed(call(port, "get-sum", mcp, host(m))) and denied(call(port, "echo", mcp, host(m))),
             "mcp-team's policy enforced at the gateway")
        assert_allowed(call(port, "get-sum", mcp, host(m)))
        assert_denied(call(port, "echo", mcp, host(m)))
        assert_denied(call(port, "get-env", mcp, host(m)))
        have = backends()
        assert mcp_key in have and web_key not in have, have
        # default's own route (default has no team label) is not attached either.
        assert ISTIO_SVC not in have, have
        # istiod neither: no route for any other host (once it has caught up with the listener's selector:
        # default's route, attached while the listener admitted every namespace, may stay a moment).
        t0 = time.monotonic()
        for h in ("web-team.example.com", f"127.0.0.1:{port}"):
            wait(lambda: (s := call(port, "get-sum", mcp, host(h))).response is not None and s.response.status == 404
                 and not s.executed, f"no route for {h} at the gateway")
        assert routes_to(envoy, "web-team.example.com") == set()
        print(f"\n[istio] the other hosts unrouted {time.monotonic() - t0:.2f} s after mcp-team's route was enforced")

        cluster.kubectl("label", "namespace", "web-team", "team=mcp", "--overwrite")
        wait(lambda: web_key in backends(), "web-team's level in the plan once its Namespace is labelled team=mcp")
        w = "web-team.example.com"
        wait(lambda: routes_to(envoy, w) == {web_key}, "web-team's route attached by istiod")
        wait(lambda: allowed(call(port, "get-sum", mcp, host(w))) and denied(call(port, "echo", mcp, host(w))),
             "web-team's policy enforced at the gateway")
        assert_denied(call(port, "echo", mcp, host(w)))
        assert_denied(call(port, "echo", mcp, host(m)))

        cluster.kubectl("label", "namespace", "web-team", "team=web", "--overwrite")
        wait(lambda: web_key not in backends() and mcp_key in backends(), "web-team's level gone from the plan")
        wait(lambda: not routes_to(envoy, w) and (s := call(port, "get-sum", mcp, host(w))).response is not None
             and s.response.status == 404, "web-team's route detached by istiod")
        assert_denied(call(port, "echo", mcp, host(m)))
    finally:
        for ns in ("mcp-team", "web-team"):
            delete_all_in(cluster, ns)


# --------------------------------------------------------------------------------------------------
# 3. HTTPS listeners sharing a port: the listener is the one the TLS server name picks


def server_certificate(certs: Path, name: str, san: str) -> Path:
    """`name`.crt/.key: a server certificate (CN `name`, SAN `san`) signed by gen-certs.sh's CA."""
    key, csr, crt, ext = (certs / f"{name}{s}" for s in (".key", ".csr", ".crt", ".ext"))
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n")
    for cmd in (["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
                ["openssl", "req", "-new", "-key", key, "-subj", f"/O=Toolgate test/CN={name}", "-out", csr],
                ["openssl", "x509", "-req", "-in", csr, "-CA", certs / "ca.crt", "-CAkey", certs / "ca.key",
                 "-set_serial", str(int(time.time_ns())), "-sha256", "-days", "30", "-extfile", ext, "-out", crt]):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)
    return crt


def tls_secret(certs: Path, name: str) -> dict:
    def b64(f: str) -> str:
        return base64.b64encode((certs / f).read_bytes()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"tls.crt": b64(f"{name}.crt"), "tls.key": b64(f"{name}.key")}}


def sni_gateway(http_port: int, https_port: int) -> str:
    """default/gw: its HTTP listener, and on one HTTPS port `wild` (*.example.com) and `a` (a.example.com),
    each with its own certificate; the Service with both ports."""
    tls = lambda secret: {"mode": "Terminate", "certificateRefs": [{"name": secret}]}  # noqa: E731
    gw = {**GATEWAY, "spec": {"gatewayClassName": "istio", "listeners": [
        {"name": "http", "port": http_port, "protocol": "HTTP"},
        {"name": "wild", "port": https_port, "protocol": "HTTPS", "hostname": "*.example.com", "tls": tls("wild-cert")},
        {"name": "a", "port": https_port, "protocol": "HTTPS", "hostname": "a.example.com", "tls": tls("a-cert")}]}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw-istio", "namespace": "default"},
           "spec": {"selector": GATEWAY_LABELS, "ports": [
               {"name": "http", "port": http_port, "targetPort": http_port, "appProtocol": "http"},
               {"name": "https", "port": https_port, "targetPort": https_port}]}}
    return yaml(gw, svc)


def sni_call(port: int, tool: str, mcp: harness.McpServer, ca: Path, sni: str, host_header: str) -> harness.Sent:
    """gateway_objects.call over HTTPS, with the TLS server name `sni` (the certificate verified for it) and the
    Host header `host_header` chosen apart."""
    tag = f"tg={time.monotonic_ns()}"
    body = harness.jsonrpc("tools/call", {"name": tool, "arguments": {"a": 2, "b": 3, "message": "m"}}, id=7)
    headers = {"host": host_header, "content-type": "application/json", "accept": "application/json, text/event-stream"}
    try:
        r = harness.request("POST", f"https://127.0.0.1:{port}/mcp?{tag}", body, headers, ca=ca, server_hostname=sni,
                            timeout=5)
    except OSError as exc:
        return harness.Sent(None, tag, 7, [], 0, exc)
    executed = [e for e in mcp.executed() if str(e.get("path", "")).endswith(tag)]
    return harness.Sent(r, tag, 7, executed, len(executed))


def served_certificate(port: int, sni: str, ca: Path) -> str:
    """The CN of the certificate the gateway presents for `sni`: which listener's filter chain Envoy picked."""
    ctx = harness.tls_context(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=sni) as s:
        return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def test_https_listeners_on_one_port_are_told_apart_by_sni_not_host(tg, tmp_path):
    """`wild` (*.example.com, a Gateway-level policy with its sectionName allowing get-sum only) and `a`
    (a.example.com, no policy) on one HTTPS port; the route attaches to both. istiod gives each its filter
    chain (by SNI, each with its certificate over SDS). On the wildcard's chain (SNI x.example.com) echo is
    denied whatever the Host says, `Host: a.example.com` included (before the fix the wildcard's plan let
    Host a.example.com through); on a's chain (SNI a.example.com) everything passes."""
    cluster, mcp, envoy, port, wait = tg["cluster"], tg["mcp"], tg["envoy"], tg["port"], tg["wait"]
    certs = harness.gen_certs(tmp_path / "certs")
    server_certificate(certs, "wild-cert", "DNS:*.example.com")
    server_certificate(certs, "a-cert", "DNS:a.example.com")
    ca = certs / "ca.crt"
    https = harness.free_port()
    policy = harness.policy("wild-sum", harness.tools_call_rule("sum", ["get-sum"]), section="wild")
    # The route attaches to every listener: no other policy of default's may judge its requests here.
    cluster.kubectl("delete", "xaccesspolicies", "--all", "-n", "default", "--ignore-not-found")
    try:
        cluster.apply(yaml(tls_secret(certs, "wild-cert"), tls_secret(certs, "a-cert")))
        cluster.apply(sni_gateway(port, https) + "---\n" + ROUTE_AND_BACKEND + "---\n" + yaml(policy))
        c = wait(lambda: accepted(cluster, "default", "wild-sum"), "the status of wild-sum")
        assert c["status"] == "True", c
        wait(lambda: ("0.0.0.0", https) in envoy.listener_addresses() or None, f"the HTTPS listener on {https}")
        wait(lambda: served_certificate(https, "x.example.com", ca) == "wild-cert"
             and served_certificate(https, "a.example.com", ca) == "a-cert", "each listener's certificate by SNI")
        x = lambda tool, h: sni_call(https, tool, mcp, ca, "x.example.com", h)  # noqa: E731
        a = lambda tool, h: sni_call(https, tool, mcp, ca, "a.example.com", h)  # noqa: E731
        wait(lambda: allowed(x("get-sum", "x.example.com")) and denied(x("echo", "x.example.com"))
             and allowed(a("echo", "a.example.com")), "wild's policy on wild's chain, none on a's")

        # The control cases.
        assert_allowed(x("get-sum", "x.example.com"))
        assert_denied(x("echo", "x.example.com"))
        assert_allowed(a("echo", "a.example.com"))
        assert_allowed(a("get-env", "a.example.com"))
        # The wildcard's chain with Host a.example.com: istiod routes it by the wildcard's routes (it
        # matches *.example.com), and the wildcard's plan decides.
        sent = x("echo", "a.example.com")
        print(f"\n[istio] SNI x.example.com, Host a.example.com, echo: {sent!r}")
        assert_denied(sent)
        assert_denied(x("get-env", "a.example.com"))
        assert_allowed(x("get-sum", "a.example.com"))

        # The plan the controller wrote for `wild`: its policy, and the other listener's requests let
        # through by their TLS server name, never by their Host.
        wp = plan(cluster, "toolgate-gw-wild")
        bypass = [p for p in wp["gateway"]["allow"] if p["name"].startswith("(other listeners")]
        assert len(bypass) == 1 and bypass[0]["rules"][0]["http"] == {"serverNames": [{"exact": "a.example.com"}]}, bypass
        assert runs(envoy, wp)
        print(f"[istio] WasmPlugins: {sorted(w['metadata']['name'] for w in cluster.get('wasmplugins')['items'])}; "
              f"wild's bypass rule: {bypass[0]['rules'][0]['http']}")
    finally:
        cluster.kubectl("delete", "xaccesspolicy", "wild-sum", "-n", "default", "--ignore-not-found")
        cluster.apply(yaml(shared_gateway(port, {"from": "Same"})))
