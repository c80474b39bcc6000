"""Authorization features on the real Istio stack (conftest.py `stack`: kube-apiserver with RBAC, istiod, the
gateway's Envoy fed over ADS, `toolgate controller` with deploy/'s permissions):

- ExternalAuth to an authorizer Service: toolgate-test-authz on loopback behind the Service `authz` (a
  WorkloadEntry at 127.0.0.1, like the MCP server); the plan names the cluster istiod gives that Service
  (`outbound|9000||authz.default.svc.cluster.local`), and the authorizer allows and denies;
- SPIFFE identities at both levels: a Gateway API HTTPS listener with client-certificate validation
  (`gateway.istio.io/tls-terminate-mode: MUTUAL`, the CA in the Secret's `ca.crt`), whose certificate
  and CA istiod serves the gateway's Envoy over SDS on its ADS stream; a Gateway-level and an XBackend-level
  policy allow and deny by the client certificate's URI SAN;
- list filtering: tools/list filtered per caller (per identity) through that listener.

    .venv/bin/pytest tests/istio/test_istio_authz.py -q -x
"""

from __future__ import annotations

import base64
import contextlib
import json

import pytest

import harness
from harness import assert_allowed, assert_denied, external_auth_policy, mcp_match, policy, rule, sa, spiffe
from istio_stack import (GATEWAY_LABELS, ISTIO, ISTIO_SVC, ROUTE_AND_BACKEND, Cluster, Controller, allowed, call, denied,
                         istio_at_least, listener_http_filters)

SA_A = "spiffe://cluster.local/ns/default/sa/a"
AUTHZ_CLUSTER = "outbound|9000||authz.default.svc.cluster.local"
AUTHZ_HTTP_CLUSTER = "outbound|9001||authz-http.default.svc.cluster.local"


def yaml(*objects: dict | str) -> str:
    return harness.to_yaml(*objects)


def tls_gateway(http_port: int, https_port: int) -> str:
    """default/gw with its plain listener and an HTTPS one that requires a client certificate from ca.crt
    (Istio's listener option; the CA is the Secret's ca.crt, which istiod serves as `<secret>-cacert`)."""
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: istio
  listeners:
  - {{name: http, port: {http_port}, protocol: HTTP}}
  - name: https
    port: {https_port}
    protocol: HTTPS
    tls:
      mode: Terminate
      certificateRefs: [{{name: gw-cert}}]
      options: {{gateway.istio.io/tls-terminate-mode: MUTUAL}}
---
apiVersion: v1
kind: Service
metadata: {{name: gw-istio, namespace: default}}
spec:
  selector: {json.dumps(GATEWAY_LABELS)}
  ports:
  - {{name: http, port: {http_port}, targetPort: {http_port}, appProtocol: http}}
  - {{name: https, port: {https_port}, targetPort: {https_port}}}
"""


def tls_secret(certs) -> dict:
    def b64(name: str) -> str:
        return base64.b64encode((certs / name).read_bytes()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "gw-cert", "namespace": "default"},
            "data": {"tls.crt": b64("server.crt"), "tls.key": b64("server.key"), "ca.crt": b64("ca.crt")}}


@pytest.fixture(scope="module")
def gw(stack):
    """The stack with default/gw (HTTP and mutual-TLS HTTPS listeners), its route and the XBackend `tools`."""
    cluster: Cluster = stack["cluster"]
    certs = harness.gen_certs(stack["work"] / "certs")
    https_port = harness.free_port()
    harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
    cluster.apply(yaml(tls_secret(certs), tls_gateway(stack["port"], https_port), ROUTE_AND_BACKEND))
    return {**stack, "certs": certs, "https_port": https_port}


def tls_call(gw, tool: str, agent: str | None, method: str = "tools/call") -> harness.Sent:
    """A call through the HTTPS listener with agent's client certificate (gen-certs.sh), or none."""
    cert = harness.client_cert(gw["certs"], agent) if agent else None
    return call(gw["https_port"], tool, gw["mcp"], method=method, tls=(cert, gw["certs"] / "ca.crt"))


def listed(sent: harness.Sent) -> list[str] | None:
    if sent.response is None or sent.response.status != 200:
        return None
    return sorted(t["name"] for t in sent.json().get("result", {}).get("tools", []))


@contextlib.contextmanager
def authorizer_service(gw, tmp_path, name: str, port: int, app_protocol: str):
    """toolgate-test-authz (allows get-sum, denies echo) on 127.0.0.1 behind the Service `name` (port `port`,
    `appProtocol`: grpc or http; a WorkloadEntry, like the MCP server's), and the controller running."""
    az = harness.Authorizer.start(name, tmp_path / "authz", rule={"allow_tools": ["get-sum"], "deny_tools": ["echo"]})
    target = int((az.grpc_address if app_protocol == "grpc" else az.http_address).rsplit(":", 1)[1])
    controller = Controller(gw["cluster"], tmp_path, gw["wasm"])
    try:
        gw["cluster"].apply(f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: {app_protocol}, port: {port}, targetPort: {target}, appProtocol: {app_protocol}}}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: {name}-0, namespace: default, labels: {{app: {name}}}}}
spec:
  address: 127.0.0.1
  labels: {{app: {name}}}
""")
        yield az
    finally:
        controller.stop()
        az.stop()


def istiod_cluster(envoy: harness.Envoy, name: str) -> dict:
    return harness.wait_for(lambda: next((c["cluster"] for c in envoy.config_dump("dynamic_active_clusters").get("configs", [])
                                          if c["cluster"]["name"] == name), None),
                            timeout=60, what=f"istiod's cluster {name} at the gateway")


def authorizer_decides(az: harness.Authorizer, port: int, mcp, kind: str) -> None:
    """get-sum allowed and echo denied at the gateway, each after asking the authorizer once over `kind`."""
    harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)),
                     timeout=60, what=f"the authorizer's decisions at the gateway\n{az.log_tail()}")
    for tool, want in (("get-sum", assert_allowed), ("echo", assert_denied)):
        before = len(az.requests())
        want(call(port, tool, mcp))
        asked = harness.wait_for(lambda: az.requests()[before:] or None, timeout=5, what="the authorizer asked")
        assert [r["kind"] for r in asked] == [kind], asked


def test_external_auth_to_an_authorizer_service(gw, tmp_path):
    """action: ExternalAuth naming the Service `authz`: the plan's authorizer cluster is the one istiod builds
    for that Service, istiod gives it to the gateway's Envoy, and the authorizer decides: get-sum allowed,
    echo denied, each asked once over gRPC."""
    cluster, mcp, envoy, port = gw["cluster"], gw["mcp"], gw["envoy"], gw["port"]
    with authorizer_service(gw, tmp_path, "authz", 9000, "grpc") as az:
        cluster.apply(yaml(external_auth_policy("ea", grpc={})))
        wp = harness.wait_for(lambda: cluster.get("wasmplugin", "toolgate-gw-http"), timeout=30, what="WasmPlugin")
        assert wp["spec"]["pluginConfig"]["gateway"]["externalAuth"]["authorizer"]["cluster"] == AUTHZ_CLUSTER
        authz_cluster = istiod_cluster(envoy, AUTHZ_CLUSTER)
        # HTTP/2 because the port says appProtocol: grpc (without it istiod builds an HTTP/1.1 cluster and
        # the authorizer is never reached: docs/istio.md, "What the controller writes").
        assert "http2_protocol_options" in json.dumps(authz_cluster.get("typed_extension_protocol_options", {})), \
            authz_cluster
        authorizer_decides(az, port, mcp, "grpc")
        cluster.kubectl("delete", "xaccesspolicy", "ea", "-n", "default")
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="no policy: echo passes")


def test_external_auth_over_http_at_the_xbackend_level(gw, tmp_path):
    """action: ExternalAuth with protocol HTTP on the XBackend `tools`: the plan's backend level (keyed by
    istiod's cluster of the MCP Service) calls the cluster istiod builds for the authorizer's HTTP
    Service `authz-http`, and the authorizer decides by the forwarded body: get-sum allowed, echo denied,
    each asked once over HTTP."""
    cluster, mcp, envoy, port = gw["cluster"], gw["mcp"], gw["envoy"], gw["port"]
    with authorizer_service(gw, tmp_path, "authz-http", 9001, "http") as az:
        # The body goes to the authorizer (forwardBody), which decides by the tool it names.
        cluster.apply(yaml(external_auth_policy("ea-http", protocol="HTTP", service="authz-http", port=9001,
                                                target="backend", http={}, forward_body=65536)))
        backend = harness.wait_for(
            lambda: ((cluster.get("wasmplugin", "toolgate-gw-http") or {}).get("spec", {}).get("pluginConfig", {})
                     .get("backends", {}).get(ISTIO_SVC, {}).get("externalAuth")),
            timeout=30, what=f"the backend level's ExternalAuth in the WasmPlugin (keyed {ISTIO_SVC})")
        assert backend["authorizer"]["cluster"] == AUTHZ_HTTP_CLUSTER, backend
        istiod_cluster(envoy, AUTHZ_HTTP_CLUSTER)
        authorizer_decides(az, port, mcp, "http")
        cluster.kubectl("delete", "xaccesspolicy", "ea-http", "-n", "default")
        harness.wait_for(lambda: allowed(call(port, "echo", mcp)), timeout=60, what="no policy: echo passes")


def identity_policies() -> str:
    """Gateway level: a (SPIFFE) get-sum and echo, b (ServiceAccount) get-sum and get-env; XBackend level:
    a get-sum, b get-sum, echo and get-env; both list tools. So a's echo is denied by the XBackend level
    only, b's echo by the Gateway level only, and a caller without a SPIFFE ID matches no rule."""
    lists = mcp_match("tools/list")
    return yaml(
        policy("callers", rule("a", spiffe(SA_A), mcp=mcp_match(("tools/call", ["get-sum", "echo"]))),
               rule("b", sa("b"), mcp=mcp_match(("tools/call", ["get-sum", "get-env"]))),
               rule("lists-a", spiffe(SA_A), mcp=lists), rule("lists-b", sa("b"), mcp=lists)),
        policy("tools-callers", rule("a", spiffe(SA_A), mcp=mcp_match(("tools/call", ["get-sum"]))),
               rule("b", sa("b"), mcp=mcp_match(("tools/call", ["get-sum", "echo", "get-env"]))),
               rule("lists", mcp=lists), target="backend"))


def test_spiffe_identities_at_both_levels(gw, tmp_path):
    """The HTTPS listener verifies client certificates against ca.crt (istiod's SDS); the filter decides by
    the certificate's URI SAN at the Gateway level and at the XBackend level (keyed by istiod's cluster of
    the Service), and filters tools/list per caller."""
    cluster, envoy, port = gw["cluster"], gw["envoy"], gw["https_port"]
    controller = Controller(cluster, tmp_path, gw["wasm"])
    try:
        cluster.apply(identity_policies())
        harness.wait_for(lambda: cluster.get("wasmplugin", "toolgate-gw-https"), timeout=30, what="WasmPlugin of https")
        harness.wait_for(lambda: ("0.0.0.0", port) in envoy.listener_addresses() or None, timeout=60,
                         what=f"the HTTPS listener on {port}\n{envoy.log_tail(30)}")
        harness.wait_for(lambda: allowed(tls_call(gw, "get-sum", "agent-a"))
                         and denied(tls_call(gw, "echo", "agent-a")), timeout=60,
                         what=f"the identity policies at the HTTPS listener\n{envoy.log_tail(30)}")
        filters = listener_http_filters(envoy)
        assert [n for n in filters if "toolgate-gw-https" in n], filters
        # The listener's certificate and client CA came from istiod over SDS (the Secret gw-cert).
        secrets = sorted(s["name"] for s in envoy.config_dump("dynamic_active_secrets").get("configs", []))
        assert secrets == ["kubernetes-gateway://default/gw-cert", "kubernetes-gateway://default/gw-cert-cacert"], secrets
        # Both levels decide by the certificate's URI SAN.
        assert_allowed(tls_call(gw, "get-sum", "agent-a"))
        assert_denied(tls_call(gw, "echo", "agent-a"))       # the XBackend level denies a's echo
        assert_allowed(tls_call(gw, "get-sum", "agent-b"))
        assert_allowed(tls_call(gw, "get-env", "agent-b"))
        assert_denied(tls_call(gw, "echo", "agent-b"))       # the Gateway level denies b's echo
        assert_denied(tls_call(gw, "get-env", "agent-a"))
        # A certificate from the CA without a SPIFFE URI SAN: no identity, no rule matches.
        assert_denied(tls_call(gw, "get-sum", "agent-nospiffe"))
        # No client certificate, or one from another CA claiming a's ID: refused in the handshake.
        url = f"https://127.0.0.1:{port}/mcp"
        assert harness.handshake_rejected(url, ca=gw["certs"] / "ca.crt")
        assert harness.handshake_rejected(url, cert=harness.client_cert(gw["certs"], "other-agent-a"),
                                          ca=gw["certs"] / "ca.crt")
        # tools/list per caller: what a tools/call by the same caller may call at both levels.
        a_list, b_list = tls_call(gw, "", "agent-a", "tools/list"), tls_call(gw, "", "agent-b", "tools/list")
        assert listed(a_list) == ["get-sum"], a_list
        assert listed(b_list) == ["get-env", "get-sum"], b_list
        cluster.kubectl("delete", "xaccesspolicies", "callers", "tools-callers", "-n", "default")
        harness.wait_for(lambda: allowed(tls_call(gw, "echo", "agent-nospiffe")), timeout=60,
                         what="no policy: any verified caller passes")
    finally:
        controller.stop()


def frontend_validation_gateway(http_port: int, https_port: int, mode: str | None) -> str:
    """default/gw as tls_gateway, but the HTTPS listener validates clients the Gateway API way: its
    `spec.tls.frontend.default.validation.caCertificateRefs` names the ConfigMap `agents-ca` (the CA as
    `ca.crt`), and no Istio option; `mode`: the validation's mode (None: the default, AllowValidOnly)."""
    text = tls_gateway(http_port, https_port).replace("      options: {gateway.istio.io/tls-terminate-mode: MUTUAL}\n", "")
    validation = {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "agents-ca"}], **({"mode": mode} if mode else {})}
    return text.replace("  gatewayClassName: istio\n",
                        f"  gatewayClassName: istio\n  tls: {{frontend: {{default: {{validation: {json.dumps(validation)}}}}}}}\n", 1)


@pytest.mark.parametrize("mode", [None, "AllowInsecureFallback"])
def test_frontend_validation_by_ca_certificate_refs(gw, tmp_path, mode):
    """The Gateway API's own client validation (`spec.tls.frontend.default.validation.caCertificateRefs`
    to a ConfigMap), which istiod turns into a MUTUAL server: the filter decides by the verified
    certificate's URI SAN as with Istio's option. With `mode: AllowInsecureFallback` istiod's server
    accepts any certificate, verified or not (a certificate from another CA claiming a's ID gets
    through the handshake), so the controller's plan for that listener reads no caller identity: every
    rule with a source denies, the forged claim included (fail closed). Istio 1.30 ignores the mode (it
    came in 1.31) and validates as without it; the plan denies all the same."""
    cluster, envoy, port = gw["cluster"], gw["envoy"], gw["https_port"]
    controller = Controller(cluster, tmp_path, gw["wasm"])
    url = f"https://127.0.0.1:{port}/mcp"
    forged = harness.client_cert(gw["certs"], "other-agent-a")
    try:
        cluster.apply(yaml({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "agents-ca", "namespace": "default"},
                            "data": {"ca.crt": (gw["certs"] / "ca.crt").read_text()}}))
        cluster.apply(frontend_validation_gateway(gw["port"], port, mode))
        cluster.apply(identity_policies())

        # The HTTPS listener now validates clients against the ConfigMap's CA (istiod's SDS secret for
        # it), no longer the Secret's ca.crt.
        def https_listener() -> str | None:
            for ls in envoy.config_dump("dynamic_listeners").get("configs", []):
                text = json.dumps(ls.get("active_state", {}).get("listener", {}))
                if f'"port_value": {port}' in text:
                    return text
            return None
        harness.wait_for(lambda: (t := https_listener()) and "configmap://default/agents-ca-cacert" in t
                         and "gw-cert-cacert" not in t, timeout=60,
                         what=f"the ConfigMap's CA at the HTTPS listener\n{envoy.log_tail(30)}")
        plan_says = lambda: (cluster.get("wasmplugin", "toolgate-gw-https") or {}).get("spec", {}).get(  # noqa: E731
            "pluginConfig", {}).get("settings", {}).get("unverifiedClientCertificates", False)
        if mode is None:
            harness.wait_for(lambda: allowed(tls_call(gw, "get-sum", "agent-a"))
                             and denied(tls_call(gw, "echo", "agent-a")), timeout=60,
                             what=f"the identity policies behind frontend validation\n{envoy.log_tail(30)}")
            assert plan_says() is False
            assert_allowed(tls_call(gw, "get-sum", "agent-b"))
            assert_denied(tls_call(gw, "echo", "agent-b"))
            assert_denied(tls_call(gw, "get-sum", "agent-nospiffe"))
            # No certificate, or another CA's claiming a's ID: refused in the handshake.
            assert harness.handshake_rejected(url, ca=gw["certs"] / "ca.crt")
            assert harness.handshake_rejected(url, cert=forged, ca=gw["certs"] / "ca.crt")
        else:
            harness.wait_for(lambda: plan_says() is True, timeout=60, what="the plan of the insecure listener")
            harness.wait_for(lambda: denied(tls_call(gw, "get-sum", "agent-a")), timeout=60,
                             what=f"the plan without identities at the gateway\n{envoy.log_tail(30)}")
            if istio_at_least("1.31"):
                # istiod's server lets the forged certificate through the handshake: only the plan stands
                # between its claim and a's tools.
                assert not harness.handshake_rejected(url, cert=forged, ca=gw["certs"] / "ca.crt")
                for agent in ("other-agent-a", "agent-a", "agent-b", None):
                    assert_denied(tls_call(gw, "get-sum", agent))
            else:
                # Istio before 1.31 has no AllowInsecureFallback: istiod ignores `mode` and serves the same
                # MUTUAL server as without it (no certificate, or another CA's: refused in the handshake).
                # The controller's plan reads the Gateway, not istiod's version: no identity, so a's and
                # b's verified certificates are denied too (fail closed).
                assert harness.handshake_rejected(url, cert=forged, ca=gw["certs"] / "ca.crt"), f"Istio {ISTIO}"
                assert harness.handshake_rejected(url, ca=gw["certs"] / "ca.crt"), f"Istio {ISTIO}"
                for agent in ("agent-a", "agent-b"):
                    assert_denied(tls_call(gw, "get-sum", agent))
    finally:
        cluster.kubectl("delete", "xaccesspolicies", "callers", "tools-callers", "-n", "default", "--ignore-not-found")
        # Back to the Istio option for the other tests of this module.
        cluster.apply(tls_gateway(gw["port"], port))
        cluster.kubectl("delete", "configmap", "agents-ca", "-n", "default", "--ignore-not-found")
        controller.stop()
