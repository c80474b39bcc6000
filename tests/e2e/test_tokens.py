"""Token callers (docs/semantics.md §6b, issue 29) in a real Envoy: an Istio RequestAuthentication that
targets the Gateway is rendered as Envoy's jwt_authn before the Toolgate filter; CEL rules read the payload
Envoy verified (`request.auth.claims`, `request.auth.principal`). Toolgate never reads a token itself.

Tokens are signed in the test by keys generated in the test (RS256 and ES256), their JWKS inline in the
RequestAuthentication. Covered: allowed and denied by `sub`, by scope, by principal and audience; an invalid
token (expired, bad signature, wrong audience, unknown issuer) is Envoy's 401 and never reaches the MCP
server; without a token, rules over claims do not match; list filtering per token; and the ways around
verification (a header named like the metadata, a token in another header, a second Authorization header,
a client-sent outputClaimToHeaders header, a client-sent x-toolgate-jwt-payload) never produce claims.

Both hosts (TOOLGATE_E2E_HOST=native for the dynamic module): the Wasm filter reads the payload from the
dynamic metadata; the module, which cannot read its Struct through Envoy 1.40's ABI, reads the copy jwt_authn
writes to x-toolgate-jwt-payload for it, beside the verified issuer in the metadata (docs/semantics.md §6b)."""

from __future__ import annotations

import base64
import http.client
import json
import time
from urllib.parse import urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import harness
from harness import assert_allowed, assert_denied, jsonrpc, mcp_match, policy, rule

HTTP = dict(listener="http", agent=None)
NATIVE = harness.filter_host() == "native"
PAYLOAD_HEADER = "x-toolgate-jwt-payload"
RSA_ISSUER = "https://issuer-rsa.test"
EC_ISSUER = "https://issuer-ec.test"
AUDIENCE = "toolgate"


class Keys:
    """A test key pair per algorithm and another RSA key (same kid) for forged signatures."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @staticmethod
    def jwks(public_key, algorithm: str, kid: str) -> str:
        algo = jwt.algorithms.RSAAlgorithm if algorithm == "RS256" else jwt.algorithms.ECAlgorithm
        key = json.loads(algo.to_jwk(public_key))
        key.update({"kid": kid, "alg": algorithm, "use": "sig"})
        return json.dumps({"keys": [key]})

    def token(self, sub: str = "agent-7", *, scope: str | None = None, iss: str = RSA_ISSUER, aud: str = AUDIENCE,
              exp_in: int = 600, algorithm: str | None = None, forged: bool = False, **claims) -> str:
        now = int(time.time())
        payload = {"iss": iss, "sub": sub, "aud": aud, "iat": now, "exp": now + exp_in, **claims}
        if scope is not None:
            payload["scope"] = scope
        algorithm = algorithm or ("ES256" if iss == EC_ISSUER else "RS256")
        key = self.forger if forged else self.ec if algorithm == "ES256" else self.rsa
        kid = "ec-1" if algorithm == "ES256" else "rsa-1"
        return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid})


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


def request_authentication(keys: Keys) -> dict:
    return {
        "apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
        "metadata": {"name": "agents", "namespace": "default"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": harness.GATEWAY_NAME}],
            "jwtRules": [
                {"issuer": RSA_ISSUER, "audiences": [AUDIENCE], "jwks": keys.jwks(keys.rsa.public_key(), "RS256", "rsa-1"),
                 "outputClaimToHeaders": [{"header": "x-jwt-sub", "claim": "sub"}]},
                {"issuer": EC_ISSUER, "audiences": [AUDIENCE], "jwks": keys.jwks(keys.ec.public_key(), "ES256", "ec-1")},
            ],
        },
    }


def cel(name: str, expression: str) -> dict:
    return {"name": name, "authorization": {"type": "CEL", "cel": {"expression": expression}}}


POLICY = policy(
    "tokens",
    cel("agent-7-sum", "request.auth.claims.sub == 'agent-7' && request.mcp.tool_name == 'get-sum'"),
    # `scope` is a list: jwt_authn splits it (normalize_payload_in_metadata), as Istio configures it.
    cel("writers-echo", "'tools:write' in request.auth.claims.scope && request.mcp.tool_name == 'echo'"),
    cel("ec-agent-env", f"request.auth.principal == '{EC_ISSUER}/agent-ec' && request.mcp.tool_name == 'get-env'"),
    # What jwt_authn writes to x-jwt-sub (outputClaimToHeaders): only ever the verified claim.
    cel("header-agent", "request.headers['x-jwt-sub'] == 'agent-h' && request.mcp.tool_name == 'get-sum'"),
    rule("base", mcp=mcp_match(base=True)),
)


@pytest.fixture
def gw(gateway, keys):
    return gateway(POLICY, request_authentication(keys), listeners={"http": "HTTP"})


def bearer(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def assert_unauthorized(sent: harness.Sent, status: int = 401) -> None:
    """Envoy's jwt_authn refused the token (401; its 403 for a wrong audience is mapped to 401 by render):
    nothing reached the MCP server."""
    assert sent.response is not None, sent
    assert sent.status == status, sent
    assert sent.executed == [] and sent.upstream_requests == 0, sent


def test_render_puts_jwt_authn_before_toolgate_where_istio_leaves_the_payload(gw):
    lds = json.loads((gw.dir / "lds.json").read_text())
    filters = lds["resources"][0]["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
    names = [f["name"] for f in filters]
    assert names[:2] == ["toolgate.strip_token_headers", "envoy.filters.http.jwt_authn"], names
    assert names.index("envoy.filters.http.jwt_authn") < next(i for i, n in enumerate(names) if "toolgate:" in json.dumps(filters[i])), names
    providers = filters[1]["typed_config"]["providers"]
    assert {p["payload_in_metadata"] for p in providers.values()} == {RSA_ISSUER, EC_ISSUER}
    assert all(p["normalize_payload_in_metadata"]["space_delimited_claims"] == ["scope", "permission"]
               for p in providers.values()), providers
    # The native host also has the payload in a header of its own, the client's copy removed first.
    removed = [m["remove"] for m in filters[0]["typed_config"]["mutations"]["request_mutations"]]
    assert {p.get("forward_payload_header") for p in providers.values()} == ({PAYLOAD_HEADER} if NATIVE else {None})
    assert PAYLOAD_HEADER in removed, removed  # on both hosts: the reserved name never reaches the server


def test_allowed_and_denied_by_sub_scope_and_principal(gw, keys):
    agent7 = bearer(keys.token("agent-7"))
    assert_allowed(gw.call("get-sum", headers=agent7, **HTTP))
    assert_denied(gw.call("echo", headers=agent7, **HTTP))
    assert "allow gateway=default/tokens:agent-7-sum" in gw.decision(gw.call("get-sum", headers=agent7, **HTTP))
    assert_denied(gw.call("get-sum", headers=bearer(keys.token("agent-8")), **HTTP))
    # By scope (space-delimited, as OAuth sends it).
    assert_allowed(gw.call("echo", headers=bearer(keys.token("agent-w", scope="tools:read tools:write")), **HTTP))
    assert_denied(gw.call("echo", headers=bearer(keys.token("agent-r", scope="tools:read")), **HTTP))
    # By principal (<iss>/<sub>), with an ES256 token of the other issuer.
    ec_token = bearer(keys.token("agent-ec", iss=EC_ISSUER))
    assert_allowed(gw.call("get-env", headers=ec_token, **HTTP))
    assert_denied(gw.call("get-env", headers=bearer(keys.token("agent-ec")), **HTTP))  # same sub, other issuer
    assert_denied(gw.call("get-sum", headers=ec_token, **HTTP))


def test_the_issues_scope_split_expression_matches_the_normalized_scope(gateway, keys):
    """docs/semantics.md §6b: jwt_authn hands `scope` over as a list, and `split` on a list splits every
    element, so the issue's own `scope.split(' ')` matches as `in scope` does."""
    gw = gateway(policy("split", cel("writers", "'tools:write' in request.auth.claims.scope.split(' ')")),
                 request_authentication(keys), listeners={"http": "HTTP"})
    writer = bearer(keys.token("agent-w", scope="tools:read tools:write"))
    assert "allow gateway=default/split:writers" in gw.decision(gw.call("get-sum", headers=writer, **HTTP))
    assert_allowed(gw.call("echo", headers=writer, **HTTP))
    assert_denied(gw.call("get-sum", headers=bearer(keys.token("agent-r", scope="tools:read")), **HTTP))
    assert_denied(gw.call("get-sum", **HTTP))


def test_invalid_tokens_get_401_and_reach_nothing(gw, keys):
    for token in (keys.token(exp_in=-120),                     # expired
                  keys.token(forged=True),                     # signed by another key (same kid)
                  keys.token(iss="https://unknown.test"),      # issuer no rule names
                  keys.token(iss=EC_ISSUER, algorithm="RS256"),  # the EC issuer's name on an RSA-signed token
                  "not.a.jwt"):
        assert_unauthorized(gw.call("get-sum", headers=bearer(token), **HTTP))
    # A wrong audience: jwt_authn answers it 403 "Audiences in Jwt are not allowed" (as under Istio);
    # render's local reply mapper makes that one reply a 401 (RFC 6750 invalid_token), nothing else.
    sent = gw.call("get-sum", headers=bearer(keys.token(aud="another-audience")), **HTTP)
    assert_unauthorized(sent)
    assert b"Audiences in Jwt are not allowed" in sent.response.body, sent
    assert 'error="invalid_token"' in sent.response.headers.get("www-authenticate", ""), sent.response.headers
    # The same token with the right audience passes.
    assert_allowed(gw.call("get-sum", headers=bearer(keys.token(aud=AUDIENCE)), **HTTP))


def test_the_audience_mapping_leaves_every_other_403_alone(gw, keys):
    """docs/semantics.md §6b: the local reply mapper matches jwt_authn's wrong-audience reply only; Toolgate's
    own plain 403s (a request that is not MCP, a denied notification) stay 403, with or without a token."""
    wrong_audience = bearer(keys.token("agent-7", aud="another-audience"))
    for headers, status in ((None, 403), (bearer(keys.token("agent-7")), 403), (wrong_audience, 401)):
        for sent in (gw.send("DELETE", None, headers=headers, **HTTP), gw.send("POST", "not json", headers=headers, content_type="text/plain", **HTTP),
                     gw.post({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
                             headers=headers, **HTTP)):
            assert sent.status == status, (headers, sent)
            assert sent.executed == [] and sent.upstream_requests == 0, sent
    # The JSON-RPC denial of a call is 200 with a JSON-RPC 403, untouched.
    denied = gw.call("echo", headers=bearer(keys.token("agent-7")), **HTTP)
    assert_denied(denied)
    assert denied.status == 200, denied


def test_without_a_token_rules_over_claims_do_not_match(gw):
    for tool in ("get-sum", "echo", "get-env"):
        assert_denied(gw.call(tool, **HTTP))
    assert_allowed(gw.rpc("tools/list", **HTTP))
    assert_allowed(gw.rpc("ping", **HTTP))


def test_list_filtering_per_token(gw, keys):
    def names(headers: dict | None) -> list[str]:
        sent = gw.rpc("tools/list", headers=headers, **HTTP)
        assert_allowed(sent)
        return sorted(t["name"] for t in sent.json()["result"]["tools"])

    assert names(bearer(keys.token("agent-7"))) == ["get-sum"]
    assert names(bearer(keys.token("agent-w", scope="tools:write"))) == ["echo"]
    assert names(bearer(keys.token("agent-ec", iss=EC_ISSUER))) == ["get-env"]
    assert names(None) == []


def test_a_header_named_like_the_metadata_gives_no_claims(gw, keys):
    forged = json.dumps({RSA_ISSUER: {"iss": RSA_ISSUER, "sub": "agent-7", "aud": AUDIENCE}})
    for name in ("envoy.filters.http.jwt_authn", "x-jwt-payload", "x-envoy-jwt-authn"):
        assert_denied(gw.call("get-sum", headers={name: forged}, **HTTP))


def test_a_token_in_another_header_gives_no_claims(gw, keys):
    token = keys.token("agent-7")
    for headers in ({"x-token": f"Bearer {token}"}, {"x-authorization": f"Bearer {token}"},
                    {"authorization": f"Token {token}"}, {"proxy-authorization": f"Bearer {token}"}):
        assert_denied(gw.call("get-sum", headers=headers, **HTTP))


def test_a_second_authorization_header_gives_no_claims(gw, keys):
    """Two Authorization fields never make claims: Envoy joins them and its jwt_authn finds a valid token
    anywhere in the joined value, so the filter drops the claims of a request with more than one
    credential (denied: 200 with the JSON-RPC denial); a forged token first is Envoy's 401."""
    valid, forged = keys.token("agent-7"), keys.token("agent-7", forged=True)
    for first, second in ((f"Basic {'x' * 12}", f"Bearer {valid}"), (f"Bearer {forged}", f"Bearer {valid}"),
                          (f"Bearer {valid}", f"Bearer {forged}")):
        before = gw.upstream_requests()
        url = urlsplit(gw.http_url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        body = json.dumps(jsonrpc("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}))
        conn.putrequest("POST", "/mcp?second-authorization")
        for name, value in (("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
                            ("authorization", first), ("authorization", second), ("content-length", str(len(body)))):
            conn.putheader(name, value)
        conn.endheaders(body.encode())
        resp = conn.getresponse()
        text = resp.read()
        conn.close()
        allowed = resp.status == 200 and b'"result"' in text
        assert not allowed, (first[:12], second[:12], resp.status, text[:200])
        assert resp.status in (401, 200), (resp.status, text[:200])
        assert gw.upstream_requests() == before, (first[:12], second[:12])


def test_a_client_sent_claim_header_is_removed(gw, keys):
    """outputClaimToHeaders: x-jwt-sub carries only what jwt_authn verified; the client's own is removed
    before jwt_authn and Toolgate read the headers."""
    assert_denied(gw.call("get-sum", headers={"x-jwt-sub": "agent-h"}, **HTTP))
    # With a token of another subject, the client's x-jwt-sub is replaced by the verified one.
    assert_denied(gw.call("get-sum", headers={"x-jwt-sub": "agent-h", **bearer(keys.token("agent-x"))}, **HTTP))
    sent = gw.call("get-sum", headers=bearer(keys.token("agent-h")), **HTTP)
    assert_allowed(sent)  # a header rule: no claims read, so on both hosts
    assert sent.executed[0]["headers"].get("x-jwt-sub") == "agent-h", sent.executed
    # forwardOriginalToken is false: the token does not reach the MCP server.
    assert "authorization" not in sent.executed[0]["headers"], sent.executed


def test_validate_type_checks_the_token_variables(tmp_path):
    good = policy("p", cel("a", "'tools:write' in request.auth.claims.scope && request.auth.principal != ''"))
    bad = policy("q", cel("b", "request.auth.token == 'x'"))
    for p, ok in ((good, True), (bad, False)):
        path = tmp_path / f"{p['metadata']['name']}.yaml"
        path.write_text(harness.to_yaml(p))
        proc = harness.run_toolgate("validate", "-f", path)
        assert (proc.returncode == 0) == ok, (proc.returncode, proc.stdout, proc.stderr)
        if not ok:
            assert "request.auth.token is not a variable" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_readme_sdk_example_with_a_bearer_token(gw, keys):
    """docs/policies.md, "Token callers": the official MCP Python SDK client with a bearer token through the gateway
    (the sample server speaks both revisions; the SDK's `auto` mode)."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main(token: str | None) -> tuple[list[str], str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=30)
        async with Client(streamable_http_client(gw.http_url, http_client=http)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            try:
                result = await client.call_tool("get-sum", {"a": 40, "b": 2})
                text = "".join(getattr(c, "text", "") for c in result.content)
                text = "error" if getattr(result, "is_error", False) or getattr(result, "isError", False) else text
            except Exception as exc:  # a denial: the SDK raises the JSON-RPC error
                text = f"denied: {exc}"
        return names, text

    names, text = anyio.run(main, keys.token("agent-7"))
    assert names == ["get-sum"] and text == "42", (names, text)
    names, text = anyio.run(main, None)
    assert names == [] and text.startswith("denied"), (names, text)


def test_explain_takes_claims(gw, tmp_path):
    """`toolgate explain` with `claims:` decides as the filter does for that verified payload (exit 0 on
    ALLOW, 1 on DENY, as `kubectl auth can-i`)."""
    body = jsonrpc("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}}, id=1)
    for claims, want, code in (({"iss": RSA_ISSUER, "sub": "agent-7"}, "decision: ALLOW (allow gateway=default/tokens:agent-7-sum", 0),
                               ({"iss": RSA_ISSUER, "sub": "agent-8"}, "decision: DENY", 1), (None, "decision: DENY", 1)):
        req = tmp_path / "req.json"
        harness.write_json(req, {"listener": "http", **({"claims": claims} if claims else {}), "body": body})
        proc = harness.run_toolgate("explain", "-f", gw.workdir / "gateway.yaml", "-f", gw.policy_dir, "--request", req)
        assert proc.returncode == code and want in proc.stdout, (claims, proc.returncode, proc.stdout, proc.stderr)


def test_a_jwks_uri_is_fetched_through_its_cluster_honouring_resolve(gateway, keys, tmp_path):
    """jwksUri: a cluster of its own (`jwks|<host>|<port>`), `--resolve name.namespace=HOST:PORT` mapping a
    Service's DNS name; Envoy fetches the keys when the listener starts."""
    import http.server
    import threading

    jwks = keys.jwks(keys.rsa.public_key(), "RS256", "rsa-1").encode()
    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            fetched.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(jwks)))
            self.end_headers()
            self.wfile.write(jwks)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ra = request_authentication(keys)
        ra["spec"]["jwtRules"] = [{"issuer": RSA_ISSUER, "audiences": [AUDIENCE],
                                   "jwksUri": "http://jwks.auth.svc.cluster.local:8081/keys"}]
        gw = gateway(POLICY, ra, listeners={"http": "HTTP"}, name="jwks-uri",
                     render_args=["--resolve", f"jwks.auth=127.0.0.1:{server.server_address[1]}"])
        harness.wait_for(lambda: fetched, timeout=10, what="the JWKS fetch")
        assert fetched[0] == "/keys"
        sent = None

        def allowed():
            nonlocal sent
            sent = gw.call("get-sum", headers=bearer(keys.token("agent-7")), **HTTP)
            return sent.status == 200 and sent.executed

        harness.wait_for(allowed, timeout=10, what="a token verified with the fetched keys")
        assert_allowed(sent)
        assert_unauthorized(gw.call("get-sum", headers=bearer(keys.token(forged=True)), **HTTP))
    finally:
        server.shutdown()


def test_a_client_sent_payload_header_gives_no_claims(gw, keys):
    """x-toolgate-jwt-payload (where jwt_authn writes the verified payload for the native host) never carries
    a client's claims, on either host: without a token it gives none; beside a verified token the client's
    copy is removed before jwt_authn, and the verified payload decides; the upstream never gets it."""
    forged = base64.urlsafe_b64encode(json.dumps({"iss": RSA_ISSUER, "sub": "agent-7", "aud": AUDIENCE,
                                                  "scope": "tools:write"}).encode()).decode().rstrip("=")
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged}, **HTTP))
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged, **bearer(keys.token("agent-x"))}, **HTTP))
    assert_denied(gw.call("echo", headers={PAYLOAD_HEADER: forged, **bearer(keys.token("agent-x", scope="tools:read"))},
                          **HTTP))
    # Another issuer's verified token beside a forged payload of the first issuer.
    assert_denied(gw.call("get-sum", headers={PAYLOAD_HEADER: forged, **bearer(keys.token("agent-ec", iss=EC_ISSUER))},
                          **HTTP))
    sent = gw.call("get-sum", headers={PAYLOAD_HEADER: forged, **bearer(keys.token("agent-7"))}, **HTTP)
    assert_allowed(sent)
    assert PAYLOAD_HEADER not in sent.executed[0]["headers"], sent.executed
    sent = gw.call("get-sum", headers=bearer(keys.token("agent-7")), **HTTP)
    assert_allowed(sent)
    assert PAYLOAD_HEADER not in sent.executed[0]["headers"], sent.executed


def test_an_external_authorizer_gets_the_verified_payload(gateway, keys, start_authorizer):
    """ExternalAuth (gRPC): the CheckRequest carries the jwt_authn namespace in metadata_context, as Envoy's
    ext_authz sends it with metadata_context_namespaces."""
    az = start_authorizer(rule={"allow_tools": ["get-sum"]})
    ea = harness.external_auth_policy("ea", grpc={})
    gw = gateway(ea, request_authentication(keys), listeners={"http": "HTTP"}, name="ea",
                 render_args=[*az.resolve_arg("GRPC")])
    before = len(az.requests())
    assert_allowed(gw.call("get-sum", headers=bearer(keys.token("agent-7", scope="tools:read")), **HTTP))
    reqs = harness.wait_for(lambda: az.requests()[before:] or None, timeout=3, what="authorizer request")
    payload = reqs[0]["metadata"]["envoy.filters.http.jwt_authn"][RSA_ISSUER]
    assert (payload["sub"], payload["scope"], payload["aud"]) == ("agent-7", ["tools:read"], AUDIENCE), payload
    # Without a token: no such namespace.
    before = len(az.requests())
    assert_allowed(gw.call("get-sum", **HTTP))
    reqs = harness.wait_for(lambda: az.requests()[before:] or None, timeout=3, what="authorizer request")
    assert "envoy.filters.http.jwt_authn" not in reqs[0]["metadata"], reqs[0]["metadata"]
