"""Token callers under the real istiod (issue 29, docs/semantics.md §6b): a RequestAuthentication (inline JWKS,
two issuers, RS256 and ES256) targeting the Gateway default/gw is applied with kubectl; istiod configures
Envoy's jwt_authn on the gateway (phase AUTHN); `toolgate controller` writes nothing for it; the Toolgate
WasmPlugin (phase AUTHZ) reads the verified payload where Istio's jwt_authn leaves it (dynamic metadata
`envoy.filters.http.jwt_authn`, keyed by issuer) and a CEL rule over the claims decides. The tokens, keys,
RequestAuthentication and policy are test_tokens.py's (the same checks on plain Envoy).

    .venv/bin/pytest tests/istio/test_istio_tokens.py -q -x
"""

from __future__ import annotations

import json

import pytest

import harness
from harness import assert_allowed, assert_denied
from istio_stack import ROUTE_AND_BACKEND, Cluster, Controller, allowed, call, denied, gateway, listener_http_filters
from test_tokens import AUDIENCE, EC_ISSUER, POLICY, RSA_ISSUER, Keys, bearer, request_authentication

# The filters the xds-shim may drop: built into Istio's proxy, absent from upstream Envoy (xds-shim/main.go).
ISTIO_ONLY = {"istio.metadata_exchange", "istio.alpn", "istio.stats"}


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


def unauthorized(sent: harness.Sent) -> bool:
    """Envoy's jwt_authn refused the token: 401, and nothing reached the MCP server."""
    return sent.response is not None and sent.status == 401 and sent.executed == [] and sent.upstream_requests == 0


def apply_gateway_and_policy(cluster: Cluster, port: int) -> None:
    """Once istiod serves its GatewayClass: the Gateway with its route and backend, and POLICY."""
    harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
    cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND)
    cluster.apply(harness.to_yaml(POLICY))


def test_istiod_verifies_tokens_and_the_wasm_plugin_reads_the_claims(stack, keys, tmp_path):
    cluster: Cluster = stack["cluster"]
    mcp, envoy, port = stack["mcp"], stack["envoy"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        apply_gateway_and_policy(cluster, port)
        harness.wait_for(lambda: cluster.get("wasmplugin", "toolgate-gw-http"), timeout=30, what="WasmPlugin")
        harness.wait_for(lambda: denied(call(port, "get-sum", mcp)), timeout=60,
                         what=f"the policy at the gateway (no token: denied)\n{envoy.log_tail(20)}")
        cluster.apply(harness.to_yaml(request_authentication(keys)))
        agent7 = bearer(keys.token("agent-7"))
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp, headers=agent7)), timeout=60,
                         what=f"istiod's jwt_authn at the gateway: agent-7's get-sum allowed\n{envoy.log_tail(20)}")

        # istiod configured jwt_authn before the Toolgate filter, where it leaves the payload.
        filters = listener_http_filters(envoy)
        jwt = filters.index("envoy.filters.http.jwt_authn")
        assert jwt < next(i for i, n in enumerate(filters) if "toolgate" in n), filters
        # The controller wrote nothing for the RequestAuthentication: what it owns never names jwt_authn.
        owned = json.dumps([cluster.get("wasmplugins"), cluster.get("envoyfilters")])
        assert not [w for w in ("jwt_authn", "jwks", "RequestAuthentication", RSA_ISSUER) if w in owned], owned[:500]

        # A CEL rule over claims: by sub, by scope (a list: Istio has jwt_authn split `scope`), by principal
        # (the ES256 issuer).
        assert_allowed(call(port, "get-sum", mcp, headers=agent7))
        assert_denied(call(port, "echo", mcp, headers=agent7))
        assert_denied(call(port, "get-sum", mcp, headers=bearer(keys.token("agent-8"))))
        assert_denied(call(port, "get-sum", mcp))
        assert_allowed(call(port, "echo", mcp, headers=bearer(keys.token("agent-w", scope="tools:read tools:write"))))
        assert_allowed(call(port, "get-env", mcp, headers=bearer(keys.token("agent-ec", iss=EC_ISSUER))))
        assert_denied(call(port, "get-env", mcp, headers=bearer(keys.token("agent-ec"))))
        # Invalid tokens: Istio's jwt_authn answers 401, nothing reaches the MCP server.
        for token in (keys.token(forged=True), keys.token(exp_in=-120), keys.token(iss="https://unknown.test")):
            sent = call(port, "get-sum", mcp, headers=bearer(token))
            assert unauthorized(sent), sent
        # A header named like the metadata never gives claims.
        forged = json.dumps({RSA_ISSUER: {"iss": RSA_ISSUER, "sub": "agent-7"}})
        assert_denied(call(port, "get-sum", mcp, headers={"envoy.filters.http.jwt_authn": forged}))

        # outputClaimToHeaders: a client's own x-jwt-sub never reaches the filter (the rule over it would allow).
        assert_denied(call(port, "get-sum", mcp, headers={"x-jwt-sub": "agent-h"}))
        assert_allowed(call(port, "get-sum", mcp, headers=bearer(keys.token("agent-h"))))
        dropped = stack["shim"].dropped()
        names = {line.split("dropped ", 1)[1].split()[0] for line in dropped}
        print(f"\n[istio tokens] gateway HTTP filters: {filters}\n[istio tokens] xds-shim dropped: {sorted(names)}")
        assert names <= ISTIO_ONLY, dropped
        cluster.kubectl("delete", "requestauthentication", "agents", "-n", "default")
        harness.wait_for(lambda: "envoy.filters.http.jwt_authn" not in listener_http_filters(envoy), timeout=60,
                         what="jwt_authn gone with the RequestAuthentication")
    finally:
        controller.stop()


def test_a_wrong_audience_is_istios_403_and_reaches_nothing(stack, keys, tmp_path):
    """docs/semantics.md §6b: under Istio, jwt_authn is istiod's and so is its reply to a token whose `aud` no
    rule lists: 403 "Audiences in Jwt are not allowed" (plain Envoy's render maps that reply to 401; the
    controller writes no such mapping under Istio). The MCP server sees nothing of the call."""
    cluster: Cluster = stack["cluster"]
    mcp, envoy, port = stack["mcp"], stack["envoy"], stack["port"]
    controller = Controller(cluster, tmp_path, stack["wasm"])
    try:
        apply_gateway_and_policy(cluster, port)
        cluster.apply(harness.to_yaml(request_authentication(keys)))
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp, headers=bearer(keys.token("agent-7")))),
                         timeout=60, what=f"istiod's jwt_authn and the policy at the gateway\n{envoy.log_tail(20)}")

        sent = call(port, "get-sum", mcp, headers=bearer(keys.token("agent-7", aud="another-audience")))
        assert sent.response is not None and sent.status == 403, sent
        assert b"Audiences in Jwt are not allowed" in sent.response.body, sent
        assert 'error="invalid_token"' in sent.response.headers.get("www-authenticate", ""), sent.response.headers
        assert sent.executed == [] and sent.upstream_requests == 0, sent  # the server's log has no request of it
        # Only the audience differs: the same caller with the audience the rule lists is allowed.
        assert_allowed(call(port, "get-sum", mcp, headers=bearer(keys.token("agent-7", aud=AUDIENCE))))
    finally:
        cluster.kubectl("delete", "requestauthentication", "agents", "-n", "default", check=False)
        controller.stop()
