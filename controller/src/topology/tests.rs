//! Tests of the topology: tenancy, ReferenceGrant, route selection, transition times.

use super::*;

fn istio() -> ClusterNaming {
    ClusterNaming::Istio {
        cluster_domain: "cluster.local".into(),
    }
}

/// A tenant: a Gateway, a route to its Service, an XBackend naming the Service, a policy on it.
fn tenant(ns: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {ns}}}\n\
         spec: {{gatewayClassName: istio, listeners: [{{name: http, port: 8080, protocol: HTTP}}]}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: {ns}}}\n\
         spec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: mcp, port: 8080}}]}}]}}\n---\n\
         apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {{name: tools, namespace: {ns}}}\n\
         spec: {{mcp: {{serviceName: mcp, port: 8080}}}}\n---\n\
         apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: p, namespace: {ns}}}\n\
         spec: {{targetRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}}], action: Allow}}\n"
    )
}

fn keys(topo: &Topology, ns: &str) -> Vec<String> {
    let gw = topo
        .gateways
        .iter()
        .find(|g| g.gateway.namespace == ns)
        .unwrap();
    gw.listeners[0].plan.backends.keys().cloned().collect()
}

#[test]
fn a_gateways_plan_keys_only_the_backends_its_routes_reach() {
    let yaml = ["a", "b", "c"].map(tenant).join("---\n");
    let topo = topology_of(&yaml, istio());
    for ns in ["a", "b", "c"] {
        assert_eq!(
            keys(&topo, ns),
            vec![format!("outbound|8080||mcp.{ns}.svc.cluster.local")],
            "{ns}"
        );
    }
    // A Gateway whose routes reach no backend with policies: an empty plan (no outputs).
    let lonely = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: d}\n\
                  spec: {gatewayClassName: istio, listeners: [{name: http, port: 8080, protocol: HTTP}]}\n";
    let topo = topology_of(&format!("{}---\n{lonely}", tenant("a")), istio());
    assert!(keys(&topo, "d").is_empty());
    assert!(
        crate::runtime::output::desired_hold(&topo.gateways[1], None).is_none(),
        "nothing enforced: no EnvoyFilter"
    );
}

fn cross_namespace_route(grant: &str) -> String {
    format!(
        "{}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: x, namespace: a}}\n\
         spec: {{parentRefs: [{{name: gw}}], rules: [{{matches: [{{path: {{value: /other}}}}], backendRefs: [{{name: mcp, namespace: b, port: 8080}}]}}]}}\n\
         ---\n{}{grant}",
        tenant("a"),
        tenant("b")
    )
}

const GRANT_ROUTES: &str =
    "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: b}\n\
    spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a}], to: [{group: '', kind: Service}]}\n";

#[test]
fn a_route_into_another_namespace_needs_a_reference_grant() {
    let topo = topology_of(&cross_namespace_route(""), istio());
    assert_eq!(
        keys(&topo, "a"),
        vec!["outbound|8080||mcp.a.svc.cluster.local"],
        "b's backend level stays out of a's plan"
    );
    let rule = &topo.gateways[0].listeners[0]
        .routes
        .iter()
        .find(|r| r.name == "a/x")
        .unwrap()
        .rules[0];
    assert!(
        rule.backends.is_empty(),
        "the rule has no usable backend (500)"
    );
    assert!(
        topo.warnings
            .iter()
            .any(|w| w.contains("HTTPRoute a/x") && w.contains("RefNotPermitted")),
        "{:?}",
        topo.warnings
    );

    let topo = topology_of(&cross_namespace_route(GRANT_ROUTES), istio());
    assert_eq!(
        keys(&topo, "a"),
        vec![
            "outbound|8080||mcp.a.svc.cluster.local",
            "outbound|8080||mcp.b.svc.cluster.local"
        ]
    );
    assert!(topo.warnings.is_empty(), "{:?}", topo.warnings);
    // Rendered (plain Envoy): the granted rule routes to b's Service.
    let topo = topology_of(
        &cross_namespace_route(GRANT_ROUTES),
        ClusterNaming::Rendered,
    );
    let rule = &topo.gateways[0].listeners[0]
        .routes
        .iter()
        .find(|r| r.name == "a/x")
        .unwrap()
        .rules[0];
    assert_eq!(
        rule.backends[0].0,
        Upstream::Service {
            namespace: "b".into(),
            name: "mcp".into(),
            port: 8080
        }
    );
}

fn external_auth(grant: &str) -> String {
    format!(
        "{}---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: ea, namespace: a}}\n\
         spec: {{targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}], action: ExternalAuth,\n\
         externalAuth: {{protocol: HTTP, http: {{}}, backendRef: {{name: authz, namespace: security, port: 9000}}}}}}\n{grant}",
        tenant("a")
    )
}

#[test]
fn an_authorizer_in_another_namespace_needs_a_reference_grant() {
    let reason = |topo: &Topology| {
        let s = topo.statuses.iter().find(|s| s.policy == "a/ea").unwrap();
        (
            s.ancestors[0].conditions[0].reason.clone(),
            s.ancestors[0].conditions[0].message.clone(),
        )
    };
    let topo = topology_of(&external_auth(""), istio());
    let (r, message) = reason(&topo);
    assert_eq!(r, "Invalid");
    assert!(
        message.contains("Service security/authz") && message.contains("ReferenceGrant"),
        "{message}"
    );
    assert!(
        topo.gateways[0].listeners[0]
            .plan
            .gateway
            .external_auth
            .is_none(),
        "not accepted: not in the plan"
    );

    let grant = |from_kind: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: security}}\n\
             spec: {{from: [{{group: agentic.networking.x-k8s.io, kind: {from_kind}, namespace: a}}], to: [{{group: '', kind: Service, name: authz}}]}}\n"
        )
    };
    let topo = topology_of(&external_auth(&grant("XAccessPolicy")), istio());
    assert_eq!(reason(&topo).0, "Accepted");
    assert!(topo.gateways[0].listeners[0]
        .plan
        .gateway
        .external_auth
        .is_some());
    let topo = topology_of(&external_auth(&grant("XBackend")), istio());
    assert_eq!(
        reason(&topo).0,
        "Invalid",
        "a grant for another kind does not count"
    );
}

#[test]
fn route_selection_honours_query_parameter_matches() {
    let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n\
        spec: {gatewayClassName: x, listeners: [{name: http, port: 8080, protocol: HTTP}]}\n---\n\
        apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: a}\n\
        spec:\n  parentRefs: [{name: gw}]\n  rules:\n  - matches: [{path: {value: /mcp}, queryParams: [{name: v, value: '2'}]}]\n    backendRefs: [{name: two, port: 80}]\n\
        \x20 - matches: [{path: {value: /mcp}, queryParams: [{type: RegularExpression, name: v, value: '[3-4]'}]}]\n    backendRefs: [{name: three, port: 80}]\n\
        \x20 - matches: [{path: {value: /mcp}}]\n    backendRefs: [{name: one, port: 80}]\n";
    let topo = topology_of(yaml, ClusterNaming::Rendered);
    let listener = &topo.gateways[0].listeners[0];
    let to = |path: &str| match &listener
        .select_route("h", path, "POST", &[])
        .unwrap()
        .backends[0]
        .0
    {
        Upstream::Service { name, .. } => name.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(to("/mcp"), "one");
    assert_eq!(to("/mcp?v=2"), "two");
    assert_eq!(to("/mcp?x=1&v=2"), "two");
    assert_eq!(to("/mcp?v=4"), "three");
    assert_eq!(to("/mcp?v=1&v=2"), "one", "the first value decides");
    assert_eq!(to("/mcp?v=%32"), "one", "not percent-decoded");
}

#[test]
fn transition_times_are_whole_utc_seconds() {
    let now = now_rfc3339();
    assert_eq!(now.len(), "2026-01-02T03:04:05Z".len(), "{now}");
    assert!(
        now.parse::<jiff::Timestamp>().is_ok() && now.ends_with('Z'),
        "{now}"
    );
}

/// A Gateway with two HTTPS listeners whose client validation is the frontend `default` (mode `mode`)
/// for 8443 and a `perPort` AllowValidOnly one for 9443, and a Gateway-level policy with a source.
fn frontend_validation(mode: &str) -> String {
    let ca = "caCertificateRefs: [{group: '', kind: ConfigMap, name: agents-ca}]";
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: a}}\n\
         spec:\n  gatewayClassName: istio\n  listeners:\n\
         \x20 - {{name: fallback, port: 8443, protocol: HTTPS, tls: {{certificateRefs: [{{name: gw-cert}}]}}}}\n\
         \x20 - {{name: strict, port: 9443, protocol: HTTPS, tls: {{certificateRefs: [{{name: gw-cert}}]}}}}\n\
         \x20 tls: {{frontend: {{default: {{validation: {{{ca}, mode: {mode}}}}}, perPort: [{{port: 9443, tls: {{validation: {{{ca}}}}}}}]}}}}\n\
         ---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: callers, namespace: a}}\n\
         spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]\n  action: Allow\n\
         \x20 rules: [{{name: a, source: {{type: SPIFFE, spiffe: 'spiffe://cluster.local/ns/a/sa/a'}}}}]\n"
    )
}

fn unverified(topo: &Topology) -> Vec<(String, bool)> {
    topo.gateways[0]
        .listeners
        .iter()
        .map(|l| {
            (
                l.listener.name.clone(),
                l.plan.settings.unverified_client_certificates,
            )
        })
        .collect()
}

#[test]
fn under_istio_a_listener_that_accepts_unverified_certificates_reads_no_identity() {
    // istiod makes AllowInsecureFallback a TLS server that accepts untrusted chains: the plan says so
    // (the filter then reads no caller identity there), with a warning; perPort AllowValidOnly wins.
    let topo = topology_of(&frontend_validation("AllowInsecureFallback"), istio());
    assert_eq!(
        unverified(&topo),
        vec![("fallback".into(), true), ("strict".into(), false)]
    );
    let warned: Vec<_> = topo
        .warnings
        .iter()
        .filter(|w| w.contains("AllowInsecureFallback"))
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", topo.warnings);
    assert!(
        warned[0].contains("a/gw/fallback")
            && warned[0].contains("rules with a source match no one"),
        "{warned:?}"
    );
    // AllowValidOnly: verified certificates, identities read.
    let topo = topology_of(&frontend_validation("AllowValidOnly"), istio());
    assert_eq!(
        unverified(&topo),
        vec![("fallback".into(), false), ("strict".into(), false)]
    );
    assert!(
        topo.warnings
            .iter()
            .all(|w| !w.contains("AllowInsecureFallback")),
        "{:?}",
        topo.warnings
    );
    // `render` always verifies the certificate (its listener requires one its CA signed), and says so.
    let topo = topology_of(
        &frontend_validation("AllowInsecureFallback"),
        ClusterNaming::Rendered,
    );
    assert_eq!(
        unverified(&topo),
        vec![("fallback".into(), false), ("strict".into(), false)]
    );
    assert!(
        topo.warnings
            .iter()
            .any(|w| w.contains("a/gw/fallback") && w.contains("not honoured by render")),
        "{:?}",
        topo.warnings
    );
}
