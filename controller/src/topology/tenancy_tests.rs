//! The tenancy rule (docs/semantics.md §2): nothing a namespace's owner creates in their own namespace
//! changes what is enforced on, or who sees, a request to another namespace's backend.

use super::*;

fn istio() -> ClusterNaming {
    ClusterNaming::Istio {
        cluster_domain: "cluster.local".into(),
    }
}

const VICTIM_KEY: &str = "outbound|8080||mcp.v.svc.cluster.local";

/// A shared Gateway in `infra` that admits routes from every namespace, and the victim `v`: a route
/// to its Service `mcp`, an XBackend naming it, and a policy allowing get-sum only.
fn shared_gateway_and_victim() -> String {
    "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\n\
     spec: {gatewayClassName: istio, listeners: [{name: http, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]}\n\
     ---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: v}\n\
     spec: {parentRefs: [{name: gw, namespace: infra}], hostnames: [v.example.com], rules: [{backendRefs: [{name: mcp, port: 8080}]}]}\n\
     ---\napiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: tools, namespace: v, creationTimestamp: '2026-01-01T00:00:00Z'}\n\
     spec: {mcp: {serviceName: mcp, port: 8080}}\n\
     ---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: sum-only, namespace: v}\n\
     spec: {targetRefs: [{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}], action: Allow,\n\
     rules: [{name: sum, authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [get-sum]}]}}}]}\n"
        .to_string()
}

fn xbackend(ns: &str, name: &str, mcp: &str, created: &str) -> String {
    format!(
        "---\napiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\n\
         metadata: {{name: {name}, namespace: {ns}, creationTimestamp: '{created}'}}\nspec: {{mcp: {{{mcp}}}}}\n"
    )
}

fn allow_all(ns: &str, name: &str, xbackend: &str) -> String {
    format!(
        "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{targetRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: {xbackend}}}], action: Allow}}\n"
    )
}

fn external_auth(ns: &str, name: &str, xbackend: &str) -> String {
    format!(
        "---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{targetRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: {xbackend}}}], action: ExternalAuth,\n\
         externalAuth: {{protocol: HTTP, http: {{}}, backendRef: {{name: authz, port: 9000}}}}}}\n"
    )
}

fn route(ns: &str, name: &str, backend_ref: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{parentRefs: [{{name: gw, namespace: infra}}], rules: [{{backendRefs: [{{{backend_ref}}}]}}]}}\n"
    )
}

fn plan(topo: &Topology) -> &CompiledPlan {
    &topo.gateways[0].listeners[0].plan
}

fn status(topo: &Topology, policy: &str) -> (String, String) {
    let s = topo
        .statuses
        .iter()
        .find(|s| s.policy == policy)
        .unwrap_or_else(|| panic!("{policy}: {:?}", topo.statuses));
    let c = &s.ancestors[0].conditions[0];
    (c.reason.clone(), c.message.clone())
}

/// The victim's backend level in the listener's plan: its policy's name and rules, nothing else.
fn victim_level(topo: &Topology) -> Option<&LevelPlan> {
    plan(topo).backends.get(VICTIM_KEY)
}

#[test]
fn a_hostname_xbackend_cannot_claim_another_namespaces_service() {
    let base = topology_of(&shared_gateway_and_victim(), istio());
    let expected = victim_level(&base).expect("the victim's level").clone();
    for host in [
        "mcp.v.svc.cluster.local",
        "MCP.v.svc.cluster.local.",
        "mcp.V.SVC.cluster.local",
    ] {
        let tenant = [
            xbackend(
                "t",
                "steal",
                &format!("hostname: {host}, port: 8080"),
                "2020-01-01T00:00:00Z",
            ),
            route(
                "t",
                "r",
                "group: agentic.networking.x-k8s.io, kind: XBackend, name: steal",
            ),
            allow_all("t", "everything", "steal"),
            external_auth("t", "listen", "steal"),
        ]
        .concat();
        // Both input orders: older or first, the tenant never keys the victim's cluster.
        for yaml in [
            format!("{tenant}---\n{}", shared_gateway_and_victim()),
            format!("{}{tenant}", shared_gateway_and_victim()),
        ] {
            let topo = topology_of(&yaml, istio());
            assert_eq!(victim_level(&topo), Some(&expected), "{host}");
            for policy in ["t/everything", "t/listen"] {
                let (reason, message) = status(&topo, policy);
                assert_eq!(reason, "HostNotOwned", "{policy}: {message}");
                assert!(message.contains("namespace v"), "{message}");
            }
            assert_eq!(status(&topo, "v/sum-only").0, "Accepted");
        }
    }
}

#[test]
fn of_one_namespaces_xbackends_naming_one_cluster_the_oldest_keys_it_whatever_the_input_order() {
    let older = xbackend(
        "v",
        "older",
        "hostname: mcp.v.svc.cluster.local, port: 8080",
        "2025-01-01T00:00:00Z",
    );
    let policy = allow_all("v", "via-older", "older");
    for yaml in [
        format!("{}{older}{policy}", shared_gateway_and_victim()),
        format!("{older}{policy}---\n{}", shared_gateway_and_victim()),
    ] {
        let topo = topology_of(&yaml, istio());
        let level = victim_level(&topo).unwrap();
        assert_eq!(
            level
                .allow
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["v/via-older"]
        );
        let (reason, message) = status(&topo, "v/sum-only");
        assert_eq!(reason, "Conflicted");
        assert!(message.contains("older XBackend v/older"), "{message}");
    }
}

#[test]
fn an_external_host_named_from_several_namespaces_is_denied_and_no_one_judges_it() {
    let external = |ns: &str, created: &str| {
        [
            xbackend(ns, "api", "hostname: api.example.com, port: 443", created),
            route(
                ns,
                "r",
                "group: networking.istio.io, kind: Hostname, name: api.example.com, port: 443",
            ),
            external_auth(ns, "authz", "api"),
        ]
        .concat()
    };
    let yaml = format!(
        "{}{}{}",
        shared_gateway_and_victim(),
        external("a", "2020-01-01T00:00:00Z"),
        external("b", "2021-01-01T00:00:00Z")
    );
    let topo = topology_of(&yaml, istio());
    let level = plan(&topo)
        .backends
        .get("outbound|443||api.example.com")
        .expect("the contested cluster is keyed");
    assert!(
        level.external_auth.is_none(),
        "no namespace's authorizer sees the requests"
    );
    assert_eq!(level.allow.len(), 1);
    assert!(
        level.allow[0].name.contains("a/api") && level.allow[0].name.contains("b/api"),
        "{level:?}"
    );
    assert_eq!(
        level.allow[0].rules[0].http.ports,
        [0],
        "a rule no request matches"
    );
    for p in ["a/authz", "b/authz"] {
        assert_eq!(status(&topo, p).0, "Conflicted");
    }
    // One namespace alone: its XBackend keys the host reached through Istio's Hostname kind.
    let yaml = format!(
        "{}{}",
        shared_gateway_and_victim(),
        external("a", "2020-01-01T00:00:00Z")
    );
    let topo = topology_of(&yaml, istio());
    assert!(plan(&topo)
        .backends
        .get("outbound|443||api.example.com")
        .unwrap()
        .external_auth
        .is_some());
    // `render` has no Hostname kind: the route's backend is refused, with a warning.
    let topo = topology_of(&yaml, ClusterNaming::Rendered);
    assert!(
        topo.warnings
            .iter()
            .any(|w| w.contains("HTTPRoute a/r") && w.contains("Hostname")),
        "{:?}",
        topo.warnings
    );
}

fn selector_gateway(selector: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\n\
         spec: {{gatewayClassName: istio, listeners: [{{name: http, port: 8080, protocol: HTTP,\n\
         allowedRoutes: {{namespaces: {{from: Selector, selector: {{{selector}}}}}}}}}]}}\n{}{}{}",
        route("v", "r", "name: mcp, port: 8080"),
        xbackend("v", "tools", "serviceName: mcp, port: 8080", "2026-01-01T00:00:00Z"),
        allow_all("v", "p", "tools"),
    )
}

fn namespace(name: &str, labels: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"
    )
}

#[test]
fn routes_attach_by_namespace_selector_as_gateway_api_says() {
    let cases = [
        ("matchLabels: {team: mcp}", "team: mcp", true),
        ("matchLabels: {team: mcp}", "team: web", false),
        (
            "matchExpressions: [{key: team, operator: In, values: [mcp, ai]}]",
            "team: ai",
            true,
        ),
        (
            "matchExpressions: [{key: team, operator: NotIn, values: [mcp]}]",
            "team: mcp",
            false,
        ),
        (
            "matchExpressions: [{key: team, operator: Exists}]",
            "other: x",
            false,
        ),
        (
            "matchExpressions: [{key: team, operator: DoesNotExist}]",
            "other: x",
            true,
        ),
        // The API server labels every Namespace with its name.
        ("matchLabels: {kubernetes.io/metadata.name: v}", "", true),
    ];
    for (selector, labels, attached) in cases {
        let topo = topology_of(
            &format!("{}{}", selector_gateway(selector), namespace("v", labels)),
            istio(),
        );
        assert!(topo.errors.is_empty(), "{:?}", topo.errors);
        assert_eq!(
            plan(&topo).backends.contains_key(VICTIM_KEY),
            attached,
            "{selector} on {{{labels}}}"
        );
    }
    // Without the Namespace the attachment cannot be decided: an error, and the route's backends are
    // enforced meanwhile.
    let topo = topology_of(&selector_gateway("matchLabels: {team: mcp}"), istio());
    assert!(
        topo.errors
            .iter()
            .any(|e| e.contains("HTTPRoute v/r") && e.contains("Namespace \"v\"")),
        "{:?}",
        topo.errors
    );
    assert!(plan(&topo).backends.contains_key(VICTIM_KEY));
}

/// A small deterministic generator (xorshift): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len())]
    }
}

/// What a tenant can create in its own namespace, at random.
fn random_tenant(rng: &mut Rng, ns: &str) -> String {
    let mut out = String::new();
    if rng.below(2) == 0 {
        out += &namespace(
            ns,
            rng.pick(&["team: mcp", "team: v", "kubernetes.io/metadata.name: v", ""]),
        );
    }
    for i in 0..1 + rng.below(3) {
        let name = format!("x{i}");
        let target = rng.pick(&[
            "hostname: mcp.v.svc.cluster.local, port: 8080",
            "hostname: MCP.V.svc.cluster.local., port: 8080",
            "hostname: mcp.v.svc.cluster.local, port: 9090",
            "hostname: mcp.v.svc, port: 8080",
            "serviceName: mcp, port: 8080",
            "hostname: api.example.com, port: 443",
        ]);
        let created = rng.pick(&["2000-01-01T00:00:00Z", "2030-01-01T00:00:00Z"]);
        out += &xbackend(ns, &name, target, created);
        match rng.below(3) {
            0 => out += &allow_all(ns, &format!("p{i}"), &name),
            1 => out += &external_auth(ns, &format!("e{i}"), &name),
            _ => {}
        }
        let backend_ref = match rng.below(5) {
            0 => format!("group: agentic.networking.x-k8s.io, kind: XBackend, name: {name}"),
            1 => "name: mcp, port: 8080".to_string(),
            2 => "name: mcp, namespace: v, port: 8080".to_string(),
            3 => "group: networking.istio.io, kind: Hostname, name: mcp.v.svc.cluster.local, port: 8080".to_string(),
            _ => "group: agentic.networking.x-k8s.io, kind: XBackend, name: tools, namespace: v".to_string(),
        };
        out += &route(ns, &format!("r{i}"), &backend_ref);
    }
    if rng.below(3) == 0 {
        // A grant in its own namespace lets others into it, never itself into v.
        out += &format!(
            "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: {ns}}}\n\
             spec: {{from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: v}}], to: [{{group: '', kind: Service}}]}}\n"
        );
    }
    out
}

#[test]
fn random_tenants_beside_the_victim_change_nothing_of_its_enforcement() {
    let base = topology_of(&shared_gateway_and_victim(), istio());
    let expected = victim_level(&base).expect("the victim's level").clone();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..300 {
        let tenants: String = (0..1 + rng.below(3))
            .map(|t| random_tenant(&mut rng, &format!("t{t}")))
            .collect();
        let yaml = if rng.below(2) == 0 {
            format!("{}{tenants}", shared_gateway_and_victim())
        } else {
            format!("{tenants}---\n{}", shared_gateway_and_victim())
        };
        let topo = topology_of(&yaml, istio());
        assert_eq!(victim_level(&topo), Some(&expected), "case {case}:\n{yaml}");
        assert_eq!(
            status(&topo, "v/sum-only").0,
            "Accepted",
            "case {case}:\n{yaml}"
        );
    }
}
