"""ReferenceGrant, in a real Envoy (docs/istio.md, "What the controller writes"): an HTTPRoute backendRef into another
namespace counts only with a grant in that namespace. Without one, `render` prints the unresolved
reference and the rule answers 500 with nothing reaching that namespace's server; with one, the rule
routes there; the grant taken away again, the rule answers 500 again (a running Envoy picks each
render up)."""

from __future__ import annotations

import harness
from harness import BACKEND_REF, assert_allowed, policy, tools_call_rule

HTTP = {"http": "HTTP"}
OTHER_BACKEND = {"apiVersion": "agentic.networking.x-k8s.io/v0alpha0", "kind": "XBackend",
                 "metadata": {"name": "tools", "namespace": "other"},
                 "spec": {"mcp": {"serviceName": "mcp-server", "port": 8080}}}
ROUTES = [{"matches": [{"path": {"type": "PathPrefix", "value": "/other"}}],
           "backendRefs": [{**BACKEND_REF, "namespace": "other"}]},
          {"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}], "backendRefs": [BACKEND_REF]}]


def grant(kind: str = "XBackend", from_namespace: str = "default") -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "routes-from-default", "namespace": "other"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": from_namespace}],
                     "to": [{"group": "agentic.networking.x-k8s.io", "kind": kind}]}}


def test_a_route_into_another_namespace_needs_a_reference_grant(gateway, start_mcp_server, tmp_path):
    other = start_mcp_server("other-mcp", workdir=tmp_path / "other")
    allow = policy("sum", tools_call_rule("sum", ["get-sum"]))
    gw = gateway(allow, OTHER_BACKEND, listeners=HTTP, route_rules=ROUTES,
                 render_args=["--resolve", f"mcp-server.other={other.address}"])
    ok = dict(listener="http", agent=None)
    assert "HTTPRoute default/tools" in gw.last_render.stderr and "RefNotPermitted" in gw.last_render.stderr, \
        gw.last_render.stderr

    def other_executed() -> list[dict]:
        return [e for e in other.executed() if e.get("tool") == "get-sum"]

    r = gw.call("get-sum", path="/other", **ok)
    assert r.status == 500 and other_executed() == [], r
    assert_allowed(gw.call("get-sum", **ok))   # the namespace's own route is unaffected

    # A grant for another kind, or from another namespace, does not count.
    for wrong in (grant(kind="Service"), grant(from_namespace="elsewhere")):
        gw.render([allow, OTHER_BACKEND, wrong])
        assert "RefNotPermitted" in gw.last_render.stderr, wrong
    # The grant: the rule routes to the other namespace's server.
    gw.render([allow, OTHER_BACKEND, grant()])
    assert "RefNotPermitted" not in gw.last_render.stderr, gw.last_render.stderr
    r = harness.wait_for(lambda: (s := gw.call("get-sum", path="/other", **ok)).status == 200 and s, timeout=20,
                         what="the granted route in Envoy")
    assert r.json()["result"] and len(other_executed()) == 1, r
    # The grant removed: 500 again, and nothing more reaches the other server.
    gw.render([allow, OTHER_BACKEND])
    harness.wait_for(lambda: gw.call("get-sum", path="/other", **ok).status == 500, timeout=20,
                     what="the route unresolved again")
    assert len(other_executed()) == 1
