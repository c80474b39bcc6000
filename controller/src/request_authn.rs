//! Token callers under plain Envoy (docs/semantics.md §6b): Istio `RequestAuthentication` objects
//! (security.istio.io/v1) that target a Gateway, rendered as Envoy's `jwt_authn` filter before the
//! Toolgate filter, with Istio's semantics: a request without a token passes without claims; a
//! token that fails verification (signature, expiry, issuer, audience) is answered 401 by Envoy;
//! a verified payload is written to the dynamic metadata namespace `envoy.filters.http.jwt_authn`
//! under the issuer, as Istio's generated configuration does (pilot/pkg/security/authn/
//! policy_applier.go: `PayloadInMetadata: jwtRule.Issuer`), where the filter reads it.
//!
//! Toolgate never parses or verifies a token: Envoy does. The headers the verification writes
//! (`outputClaimToHeaders`, `outputPayloadToHeader`) are removed from the client's request first
//! (a header_mutation filter before `jwt_authn`), so that they only ever carry what Envoy verified.
//!
//! The native host (`--native-module`) cannot read the payload's Struct through Envoy 1.40's ABI:
//! there every provider also writes the verified payload to the reserved header
//! [`JWT_PAYLOAD_HEADER`] (`forward_payload_header`), which the header_mutation filter removes from
//! the client's request before `jwt_authn` and the route removes before the upstream.
//!
//! Under Istio, RequestAuthentication is Istio's to apply: the controller writes nothing for it.

use serde_json::{json, Value};

use toolgate_policy::api::GATEWAY_GROUP;
use toolgate_policy::jwt::{JWT_METADATA_NAMESPACE, JWT_PAYLOAD_HEADER, SPACE_DELIMITED_CLAIMS};

use crate::model::request_authentication::{JwtRule, RequestAuthenticationSpec};
use crate::model::{Inventory, Object};

/// The RequestAuthentications whose `targetRefs` name the Gateway `namespace/name` (in its own
/// namespace, as Istio reads them), in name order.
pub fn for_gateway<'a>(
    inv: &'a Inventory,
    namespace: &str,
    name: &str,
) -> Vec<&'a Object<RequestAuthenticationSpec>> {
    let mut found: Vec<_> = inv
        .request_authentications
        .iter()
        .filter(|ra| ra.namespace == namespace)
        .filter(|ra| {
            ra.spec.target_refs.iter().any(|t| {
                t.group == GATEWAY_GROUP
                    && t.kind == "Gateway"
                    && t.name == name
                    && t.namespace.as_deref().is_none_or(|n| n == namespace)
            })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// A jwksUri's cluster: its name, host, port and whether it is HTTPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwksUpstream {
    pub cluster: String,
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

/// `http(s)://host[:port]/...` split; None if it is not such a URI.
pub fn jwks_upstream(uri: &str) -> Option<JwksUpstream> {
    let (tls, rest) = if let Some(r) = uri.strip_prefix("https://") {
        (true, r)
    } else {
        (false, uri.strip_prefix("http://")?)
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h.to_string(), p.parse().ok()?),
        _ => (authority.to_string(), if tls { 443 } else { 80 }),
    };
    if host.is_empty() {
        return None;
    }
    Some(JwksUpstream {
        cluster: format!("jwks|{host}|{port}"),
        host,
        port,
        tls,
    })
}

/// What the listener's filter chain gets for the Gateway's RequestAuthentications: the header
/// removal filter, the `jwt_authn` filter, and the clusters of remote JWKS.
pub struct Rendered {
    pub filters: Vec<Value>,
    pub jwks: Vec<JwksUpstream>,
    /// Token headers of rules without `forwardOriginalToken`: jwt_authn keeps them (`forward: true`)
    /// so that the filter can count the credentials a request carries (docs/semantics.md §6b), and
    /// the route removes them before the upstream, as Istio's `forward: false` would.
    pub upstream_removed: Vec<String>,
    /// The HTTP connection manager's `local_reply_config` (None without RequestAuthentication):
    /// see [`WRONG_AUDIENCE_DETAILS`].
    pub local_reply_config: Option<Value>,
}

/// The response code details of jwt_authn's answer to a token whose audience no rule accepts: 403
/// "Audiences in Jwt are not allowed". Every other invalid token is its 401. RFC 6750 (§3.1) and the
/// issue's semantics make it an invalid token as well: the connection manager's local reply mapper
/// answers this one reply, and no other 403, with 401 (docs/semantics.md §6b). jwt_authn's own
/// `www-authenticate: Bearer realm=..., error="invalid_token"` header stays on the reply.
pub const WRONG_AUDIENCE_DETAILS: &str =
    "jwt_authn_access_denied{Audiences_in_Jwt_are_not_allowed}";

fn local_reply_config() -> Value {
    json!({
        "mappers": [{
            "filter": { "extension_filter": {
                "name": "envoy.access_loggers.extension_filters.cel",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
                    "expression": format!("response.code == 403 && response.code_details == '{WRONG_AUDIENCE_DETAILS}'"),
                },
            } },
            "status_code": 401,
        }],
    })
}

/// One jwtRule (`at` names it) as a jwt_authn provider, or what is wrong with it. The JWKS cluster it
/// needs is added to `jwks`; the headers it writes, to `removed` (taken off the client's request).
fn provider(
    rule: &JwtRule,
    at: &str,
    native_module: bool,
    jwks: &mut Vec<JwksUpstream>,
    removed: &mut Vec<String>,
) -> Result<Value, String> {
    if rule.issuer.is_empty() {
        return Err(format!("{at}: issuer is required"));
    }
    let named = rule
        .from_headers
        .iter()
        .map(|h| &h.name)
        .chain(&rule.output_payload_to_header);
    if let Some(h) = named
        .chain(rule.output_claim_to_headers.iter().map(|c| &c.header))
        .find(|h| h.eq_ignore_ascii_case(JWT_PAYLOAD_HEADER))
    {
        return Err(format!(
            "{at}: header {h:?} is reserved for the verified payload (docs/semantics.md §6b)"
        ));
    }
    let mut provider = json!({
        "issuer": rule.issuer,
        // Kept for the filter to see (a second credential drops the claims); removed by the
        // route when the rule does not forward it (`upstream_removed`).
        "forward": true,
        // Where Istio leaves it, and the filter reads it (docs/semantics.md §6b).
        "payload_in_metadata": rule.issuer,
    });
    if !rule.audiences.is_empty() {
        provider["audiences"] = json!(rule.audiences);
    }
    provider_keys(rule, at, &mut provider, jwks)?;
    if !rule.from_headers.is_empty() {
        provider["from_headers"] = rule
            .from_headers
            .iter()
            .map(
                |h| json!({ "name": h.name, "value_prefix": h.prefix.clone().unwrap_or_default() }),
            )
            .collect();
    }
    if !rule.from_params.is_empty() {
        provider["from_params"] = json!(rule.from_params);
    }
    if !rule.from_cookies.is_empty() {
        provider["from_cookies"] = json!(rule.from_cookies);
    }
    if let Some(h) = &rule.output_payload_to_header {
        if native_module {
            return Err(format!(
                "{at}: outputPayloadToHeader is not supported with --native-module (jwt_authn writes the payload \
                 to {JWT_PAYLOAD_HEADER} for the module, and a provider writes one payload header)"
            ));
        }
        provider["forward_payload_header"] = json!(h);
        removed.push(h.to_ascii_lowercase());
    }
    if native_module {
        provider["forward_payload_header"] = json!(JWT_PAYLOAD_HEADER);
    }
    provider["normalize_payload_in_metadata"] =
        json!({ "space_delimited_claims": space_delimited_claims(rule, at, native_module)? });
    if !rule.output_claim_to_headers.is_empty() {
        provider["claim_to_headers"] = rule
            .output_claim_to_headers
            .iter()
            .map(|c| json!({ "header_name": c.header, "claim_name": c.claim }))
            .collect();
        removed.extend(
            rule.output_claim_to_headers
                .iter()
                .map(|c| c.header.to_ascii_lowercase()),
        );
    }
    Ok(provider)
}

/// Where a provider's keys come from: inline (`jwks`), or fetched from `jwksUri`, whose cluster is
/// added to `jwks`.
fn provider_keys(
    rule: &JwtRule,
    at: &str,
    provider: &mut Value,
    jwks: &mut Vec<JwksUpstream>,
) -> Result<(), String> {
    match (&rule.jwks, &rule.jwks_uri) {
        (Some(_), Some(_)) => return Err(format!("{at}: only one of jwks or jwksUri can be set")),
        (Some(inline), None) => provider["local_jwks"] = json!({ "inline_string": inline }),
        (None, Some(uri)) => {
            let up = jwks_upstream(uri)
                .ok_or_else(|| format!("{at}: jwksUri {uri:?}: url must have scheme http:// or https://"))?;
            provider["remote_jwks"] = json!({
                "http_uri": { "uri": uri, "cluster": up.cluster, "timeout": rule.timeout.clone().unwrap_or_else(|| "5s".into()) },
                "cache_duration": "300s",
                // Fetched when the listener starts, not by the first request.
                "async_fetch": {},
            });
            if !jwks.contains(&up) {
                jwks.push(up);
            }
        }
        (None, None) => {
            return Err(format!(
            "{at}: jwks or jwksUri is required (Istio would fetch the issuer's OpenID configuration; render does not)"
        ))
        }
    }
    Ok(())
}

/// The claims whose space-delimited values are split into lists, as Istio does (`scope: "a b"` is
/// `["a", "b"]` in the metadata): the claims policies read are the same under both. The native
/// host's header carries the payload as signed; the engine splits the same default claims, and
/// only those.
fn space_delimited_claims(
    rule: &JwtRule,
    at: &str,
    native_module: bool,
) -> Result<Vec<String>, String> {
    let mut space_delimited: Vec<String> = SPACE_DELIMITED_CLAIMS
        .iter()
        .map(|c| c.to_string())
        .collect();
    for c in &rule.space_delimited_claims {
        if native_module && !space_delimited.contains(c) {
            return Err(format!(
                "{at}: spaceDelimitedClaims {c:?} is not supported with --native-module (the module splits {})",
                SPACE_DELIMITED_CLAIMS.join(" and ")
            ));
        }
        if !space_delimited.contains(c) {
            space_delimited.push(c.clone());
        }
    }
    Ok(space_delimited)
}

/// The filters (none without RequestAuthentication), or what is wrong with a rule. `native_module`:
/// for the dynamic module, which reads the payload from [`JWT_PAYLOAD_HEADER`].
pub fn render(
    ras: &[&Object<RequestAuthenticationSpec>],
    native_module: bool,
) -> Result<Rendered, String> {
    let mut providers = serde_json::Map::new();
    let mut requirements = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    let mut jwks = Vec::new();
    let (mut unforwarded, mut forwarded) = (Vec::new(), Vec::new());
    for ra in ras {
        for (i, rule) in ra.spec.jwt_rules.iter().enumerate() {
            let at = format!(
                "RequestAuthentication {}/{} jwtRules[{i}]",
                ra.namespace, ra.name
            );
            let provider = provider(rule, &at, native_module, &mut jwks, &mut removed)?;
            let locations: Vec<String> = if rule.from_headers.is_empty() {
                vec!["authorization".into()]
            } else {
                rule.from_headers
                    .iter()
                    .map(|h| h.name.to_ascii_lowercase())
                    .collect()
            };
            if rule.forward_original_token {
                &mut forwarded
            } else {
                &mut unforwarded
            }
            .extend(locations);
            let name = format!("origins-{}", providers.len());
            requirements.push(json!({ "provider_name": name }));
            providers.insert(name, provider);
        }
    }
    if providers.is_empty() {
        return Ok(Rendered {
            filters: Vec::new(),
            jwks,
            upstream_removed: Vec::new(),
            local_reply_config: None,
        });
    }
    let mut upstream_removed: Vec<String> = unforwarded
        .into_iter()
        .filter(|h| !forwarded.contains(h))
        .collect();
    // The client's copy before jwt_authn, the verified one (native host) before the upstream: on
    // either host the reserved name never reaches the MCP server.
    removed.push(JWT_PAYLOAD_HEADER.into());
    upstream_removed.push(JWT_PAYLOAD_HEADER.into());
    upstream_removed.sort();
    upstream_removed.dedup();
    // Istio's semantics: any provider's token, or none at all; a token present but invalid fails.
    requirements.push(json!({ "allow_missing": {} }));
    let jwt_authn = json!({
        "name": JWT_METADATA_NAMESPACE,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": providers,
            "rules": [{ "match": { "prefix": "/" }, "requires": { "requires_any": { "requirements": requirements } } }],
        },
    });
    let mut filters = Vec::new();
    removed.sort();
    removed.dedup();
    if !removed.is_empty() {
        filters.push(json!({
            "name": "toolgate.strip_token_headers",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                "mutations": { "request_mutations": removed.iter().map(|h| json!({ "remove": h })).collect::<Vec<_>>() },
            },
        }));
    }
    filters.push(jwt_authn);
    Ok(Rendered {
        filters,
        jwks,
        upstream_removed,
        local_reply_config: Some(local_reply_config()),
    })
}

/// `--resolve` keys a jwksUri host may be given by: the host itself, or `name.namespace` of a
/// Service's cluster DNS name.
pub fn resolve_keys(host: &str) -> Vec<String> {
    let mut keys = vec![host.to_string()];
    let short = host
        .strip_suffix(".svc.cluster.local")
        .or_else(|| host.strip_suffix(".svc"));
    if let Some(s) = short {
        keys.push(s.to_string());
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwks_uris_split() {
        let up = jwks_upstream("https://issuer.example.com/.well-known/jwks.json").unwrap();
        assert_eq!(
            (up.host.as_str(), up.port, up.tls),
            ("issuer.example.com", 443, true)
        );
        let up = jwks_upstream("http://jwks.auth.svc.cluster.local:8080/keys").unwrap();
        assert_eq!(
            (up.host.as_str(), up.port, up.tls, up.cluster.as_str()),
            (
                "jwks.auth.svc.cluster.local",
                8080,
                false,
                "jwks|jwks.auth.svc.cluster.local|8080"
            )
        );
        assert!(jwks_upstream("ftp://x/").is_none());
        assert_eq!(
            resolve_keys("jwks.auth.svc.cluster.local"),
            ["jwks.auth.svc.cluster.local", "jwks.auth"]
        );
    }

    #[test]
    fn rules_render_as_istio_does() {
        let inv = Inventory::from_yaml(
            "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: ra, namespace: gw}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]\n  jwtRules:\n  - issuer: https://issuer.test\n    jwks: '{\"keys\":[]}'\n    audiences: [toolgate]\n    outputClaimToHeaders: [{header: X-Sub, claim: sub}]\n---\napiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: other, namespace: gw}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: h}]\n  jwtRules: [{issuer: x, jwks: '{}'}]\n",
        );
        let ras = for_gateway(&inv, "gw", "g");
        assert_eq!(ras.len(), 1);
        let r = render(&ras, false).unwrap();
        assert_eq!(r.filters.len(), 2);
        assert_eq!(
            r.filters[0]["typed_config"]["mutations"]["request_mutations"],
            json!([{ "remove": "x-sub" }, { "remove": JWT_PAYLOAD_HEADER }])
        );
        let p = &r.filters[1]["typed_config"]["providers"]["origins-0"];
        assert_eq!(p["payload_in_metadata"], "https://issuer.test");
        assert_eq!(p["audiences"], json!(["toolgate"]));
        assert_eq!(
            p["normalize_payload_in_metadata"]["space_delimited_claims"],
            json!(["scope", "permission"])
        );
        let reqs =
            &r.filters[1]["typed_config"]["rules"][0]["requires"]["requires_any"]["requirements"];
        assert_eq!(
            reqs,
            &json!([{ "provider_name": "origins-0" }, { "allow_missing": {} }])
        );
        assert_eq!(r.upstream_removed, ["authorization", JWT_PAYLOAD_HEADER]);
        assert!(render(&for_gateway(&inv, "gw", "none"), false)
            .unwrap()
            .filters
            .is_empty());
        assert!(p.get("forward_payload_header").is_none());
        // jwt_authn's wrong-audience 403, and only that reply, is answered 401.
        let mappers = &r.local_reply_config.as_ref().expect("a local reply mapper")["mappers"];
        assert_eq!(mappers.as_array().map(Vec::len), Some(1));
        assert_eq!(mappers[0]["status_code"], 401);
        let filter = &mappers[0]["filter"]["extension_filter"];
        assert_eq!(filter["name"], "envoy.access_loggers.extension_filters.cel");
        assert_eq!(
            filter["typed_config"]["expression"],
            "response.code == 403 && response.code_details == 'jwt_authn_access_denied{Audiences_in_Jwt_are_not_allowed}'"
        );
        assert!(render(&for_gateway(&inv, "gw", "none"), false)
            .unwrap()
            .local_reply_config
            .is_none());
        // The native host: jwt_authn also writes the payload header (removed as on the Wasm host).
        let r = render(&ras, true).unwrap();
        assert_eq!(
            r.filters[0]["typed_config"]["mutations"]["request_mutations"],
            json!([{ "remove": "x-sub" }, { "remove": JWT_PAYLOAD_HEADER }])
        );
        assert_eq!(
            r.filters[1]["typed_config"]["providers"]["origins-0"]["forward_payload_header"],
            JWT_PAYLOAD_HEADER
        );
        assert_eq!(r.upstream_removed, ["authorization", JWT_PAYLOAD_HEADER]);
        assert!(render(&for_gateway(&inv, "gw", "none"), true)
            .unwrap()
            .filters
            .is_empty());
    }

    #[test]
    fn the_payload_header_is_reserved() {
        let ra = |rule: &str| {
            Inventory::from_yaml(&format!("apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: ra, namespace: gw}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: g}}]\n  jwtRules: [{{issuer: i, jwks: '{{}}', {rule}}}]\n"))
        };
        for rule in [
            "fromHeaders: [{name: X-Toolgate-JWT-Payload}]",
            "outputPayloadToHeader: x-toolgate-jwt-payload",
            "outputClaimToHeaders: [{header: x-toolgate-jwt-payload, claim: sub}]",
        ] {
            let inv = ra(rule);
            for native in [false, true] {
                let err = render(&for_gateway(&inv, "gw", "g"), native)
                    .err()
                    .unwrap_or_default();
                assert!(
                    err.contains("is reserved for the verified payload"),
                    "{rule}: {err}"
                );
            }
        }
        let inv = ra("outputPayloadToHeader: x-payload");
        assert!(render(&for_gateway(&inv, "gw", "g"), false).is_ok());
        let err = render(&for_gateway(&inv, "gw", "g"), true)
            .err()
            .unwrap_or_default();
        assert!(err.contains("not supported with --native-module"), "{err}");
        // spaceDelimitedClaims: added to Istio's two; the native host splits those two only.
        let inv = ra("spaceDelimitedClaims: [groups, scope]");
        let r = render(&for_gateway(&inv, "gw", "g"), false).unwrap();
        let claims = &r.filters[1]["typed_config"]["providers"]["origins-0"]
            ["normalize_payload_in_metadata"];
        assert_eq!(
            claims["space_delimited_claims"],
            json!(["scope", "permission", "groups"])
        );
        let err = render(&for_gateway(&inv, "gw", "g"), true)
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("spaceDelimitedClaims \"groups\" is not supported with --native-module"),
            "{err}"
        );
    }
}
