"""Token claims come only from bytes a client cannot write, on both hosts and in every configuration
(docs/semantics.md §6b; issue 38, finding 6).

The Wasm filter reads the verified payload from jwt_authn's dynamic metadata, which only Envoy's filters
write. The dynamic module cannot read that Struct through Envoy 1.40's ABI: it reads the payload from
x-toolgate-jwt-payload, and only where its configuration says that jwt_authn writes that header (render's
`jwtPayloadHeader` beside the plan: every provider has `forward_payload_header`, and jwt_authn removes a
client's copy of every provider's payload header before it verifies). Under a jwt_authn that does not write
it (Istio's without `outputPayloadToHeader`, a hand-written one) the header is whatever the client sent:
the module does not read it, and says so at load.

The configurations here are render's output edited before Envoy starts: `hand_written` takes the header
out of jwt_authn and out of every removal, so a client's copy reaches the filter (and the MCP server) as
sent; `told` puts the plan beside `jwtPayloadHeader` for the module, and leaves jwt_authn alone to remove a
client's copy."""

from __future__ import annotations

import base64
import json

import harness
from harness import assert_allowed, assert_denied
from test_tokens import (AUDIENCE, HTTP, PAYLOAD_HEADER, POLICY, RSA_ISSUER, bearer, keys,  # noqa: F401 (fixture)
                         request_authentication)

NATIVE = harness.filter_host() == "native"
NOT_READ = "token claims are not read"
READ = f"token claims are read from {PAYLOAD_HEADER}"


def forged(**claims) -> str:
    """A payload header as jwt_authn writes it (base64url of the JSON, unpadded), written by the client."""
    payload = {"iss": RSA_ISSUER, "sub": "agent-7", "aud": AUDIENCE, "scope": "tools:write", **claims}
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def http_filters(lds: dict):
    for listener in lds["resources"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                tc = f["typed_config"]
                if "http_filters" in tc:
                    yield tc, tc["http_filters"]


def hand_written(gw: harness.ToolgateGateway) -> None:
    """render's configuration with a jwt_authn like Istio's without outputPayloadToHeader, or a hand-written
    one: no provider writes x-toolgate-jwt-payload, nothing removes it, the module's configuration the bare plan."""
    path = gw.dir / "lds.json"
    lds = json.loads(path.read_text())
    seen = 0
    for hcm, filters in http_filters(lds):
        for f in filters:
            tc = f.get("typed_config", {})
            if f["name"] == "envoy.filters.http.jwt_authn":
                for provider in tc["providers"].values():
                    seen += provider.pop("forward_payload_header", None) is not None
            mutations = tc.get("mutations", {}).get("request_mutations")
            if mutations is not None:
                tc["mutations"]["request_mutations"] = [m for m in mutations if m.get("remove") != PAYLOAD_HEADER]
            if f["name"] == "envoy.filters.http.dynamic_modules":
                # render tells the module that its jwt_authn writes the header: this one does not.
                config = json.loads(tc["filter_config"]["value"])
                tc["filter_config"]["value"] = json.dumps(config.get("plan", config))
        route = hcm["route_config"]
        route["request_headers_to_remove"] = [h for h in route.get("request_headers_to_remove", []) if h != PAYLOAD_HEADER]
    assert seen == (2 if NATIVE else 0), seen
    harness.write_json(path, lds)


def told(gw: harness.ToolgateGateway) -> None:
    """The module's configuration with `jwtPayloadHeader` beside the plan (render's providers all write the
    header), and no header_mutation removing a client's copy: jwt_authn's own removal is what is left."""
    path = gw.dir / "lds.json"
    lds = json.loads(path.read_text())
    for _, filters in http_filters(lds):
        for f in filters:
            tc = f.get("typed_config", {})
            mutations = tc.get("mutations", {}).get("request_mutations")
            if mutations is not None:
                tc["mutations"]["request_mutations"] = [m for m in mutations if m.get("remove") != PAYLOAD_HEADER]
            if f["name"] == "envoy.filters.http.dynamic_modules":
                config = json.loads(tc["filter_config"]["value"])
                if "plan" not in config:
                    config = {"jwtPayloadHeader": PAYLOAD_HEADER, "plan": config}
                tc["filter_config"]["value"] = json.dumps(config)
    harness.write_json(path, lds)


def test_a_payload_header_no_jwt_authn_writes_gives_no_claims(gateway, keys):
    """A caller with a valid token of its own adds x-toolgate-jwt-payload with the claims it likes, beside a
    jwt_authn that does not write that header: the call those claims would allow is denied on both hosts."""
    gw = gateway(POLICY, request_authentication(keys), listeners={"http": "HTTP"}, before_start=hand_written)
    agent8 = bearer(keys.token("agent-8"))
    # The client's header reaches the filter and the MCP server untouched (a base method is allowed).
    ping = gw.rpc("ping", headers={PAYLOAD_HEADER: forged(), **agent8}, **HTTP)
    assert_allowed(ping)
    assert ping.executed[0]["headers"].get(PAYLOAD_HEADER) == forged(), ping.executed
    # One verified issuer in the metadata, one header field, its `iss` that issuer: what used to make claims.
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged(), **agent8}, **HTTP))
    assert_denied(gw.call("echo", headers={PAYLOAD_HEADER: forged(), **bearer(keys.token("agent-8", scope="tools:read"))},
                          **HTTP))
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged(sub="agent-7"), **agent8}, **HTTP))
    # The list an allowed call would be in is not filtered for the forged claims either.
    listed = gw.rpc("tools/list", headers={PAYLOAD_HEADER: forged(), **agent8}, **HTTP)
    assert_allowed(listed)
    assert listed.json()["result"]["tools"] == [], listed.json()
    # The verified token's own claims: from the metadata on Wasm; the module, told nothing, reads none.
    own = gw.call("get-sum", headers=bearer(keys.token("agent-7")), **HTTP)
    if NATIVE:
        assert_denied(own)
        log = gw.envoy.wait_for_log(NOT_READ)
        assert READ not in log
    else:
        assert_allowed(own)


def test_the_module_reads_the_header_jwt_authn_writes_and_only_that(gateway, keys):
    """Told that jwt_authn writes x-toolgate-jwt-payload, the module reads the verified payload from it, and a
    client's copy never counts, with no other filter removing it: jwt_authn removes every provider's payload
    header from the request before it verifies (a copy left beside the verified one would be a second field,
    which gives no claims either)."""
    gw = gateway(POLICY, request_authentication(keys), listeners={"http": "HTTP"}, before_start=told)
    assert_allowed(gw.call("get-sum", headers=bearer(keys.token("agent-7")), **HTTP))
    assert_allowed(gw.call("echo", headers=bearer(keys.token("agent-w", scope="tools:read tools:write")), **HTTP))
    agent8 = bearer(keys.token("agent-8"))
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged(), **agent8}, **HTTP))
    assert_denied(gw.call("echo", headers={PAYLOAD_HEADER: forged(), **agent8}, **HTTP))
    # Without a token there is no verified issuer in the metadata: no claims, whatever the header says.
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged()}, **HTTP))
    if NATIVE:
        log = gw.envoy.wait_for_log(READ)
        assert NOT_READ not in log
