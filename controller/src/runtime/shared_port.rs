//! Gateway listeners that share a port (e.g. `a.example.com` and `b.example.com` on 443).
//!
//! Istio attaches a WasmPlugin to a gateway by port (`match: [{ports: [...]}]`): every listener on
//! that port runs the WasmPlugin of every listener on it, and the filter loads one plan. So the plan
//! written for a listener that shares its port is that listener's plan made to let the other
//! listeners' requests through, using the plan's own host matchers:
//!
//! - each level with Allow policies gets one more Allow policy whose only rule matches the hostnames
//!   of the other listeners on the port that can never select this listener (a hostname disjoint from
//!   this one's, or a more specific one, which Gateway API and Envoy prefer);
//! - each ExternalAuth policy's rules are narrowed to this listener's hostname, so its authorizer is
//!   not asked about requests for disjoint hostnames.
//!
//! Which listener a request belongs to is what Istio picks: on HTTP listeners (one route table per
//! port) the `Host`, on HTTPS listeners (one filter chain per hostname) the TLS server name (SNI).
//! So on HTTPS the added rule matches the other listeners' hostnames as SNI, never as `Host`: a client
//! that asks for `x.example.com` and sends `Host: a.example.com` is on the wildcard listener's chain
//! and is routed by its routes, so the wildcard listener's plan must decide it.
//!
//! A request for this listener never matches the added rule, and every matcher narrowed still holds
//! for it: this listener's WasmPlugin decides it exactly as the listener's own plan does, and the
//! request passes only if that plan allows it. Where hostnames are disjoint (the usual case: one
//! hostname per listener) every other WasmPlugin on the port lets it through, so it is decided by its
//! own listener's plan alone. Where one listener's hostname covers another's (`*.example.com` and
//! `a.example.com`, or a listener without hostname), the plan of the more specific listener also
//! applies to the wider listener's requests (the plan format cannot say "but not this host"): such a
//! request must be allowed by both, never by fewer plans than its own.

use toolgate_policy::plan::{CompiledPlan, HostMatch, HttpMatch, LevelPlan, PolicyPlan, RulePlan};

use crate::hostname::Hostname;
use crate::model::{self, Listener};
use crate::topology::GatewayOut;

/// The name of the Allow policy added for the other listeners' requests (in logs and `explain`).
pub fn bypass_policy_name(port: u16) -> String {
    format!("(other listeners on port {port})")
}

/// The plan to write for `listener` of `gw` when Istio selects plans by port: its own plan when no
/// other listener of the Gateway has its port, else that plan scoped to its hostname (module doc).
pub fn plan_for(gw: &GatewayOut, listener: &Listener, plan: &CompiledPlan) -> CompiledPlan {
    let others: Vec<&Listener> = gw
        .listeners
        .iter()
        .map(|l| &l.listener)
        .filter(|l| l.port == listener.port && l.name != listener.name)
        .collect();
    if others.is_empty() {
        return plan.clone();
    }
    let own = Hostname::of(listener.hostname.as_deref());
    let mut bypass: Vec<HostMatch> = Vec::new();
    for other in others {
        let theirs = Hostname::of(other.hostname.as_deref());
        if theirs.disjoint(&own) || theirs.more_specific(&own) {
            if let Some(m) = theirs.host_match() {
                if !bypass.contains(&m) {
                    bypass.push(m);
                }
            }
        }
    }
    let mut scoped = plan.clone();
    let port = model::port(listener);
    let by_sni = by_server_name(listener);
    scope_level(&mut scoped.gateway, &own, &bypass, port, by_sni);
    for level in scoped.backends.values_mut() {
        scope_level(level, &own, &bypass, port, by_sni);
    }
    // docs/semantics.md §6a: deny by default does not judge the other listeners' requests either.
    if scoped.settings.default_deny {
        if by_sni {
            scoped.settings.default_deny_except_server_names = bypass;
        } else {
            scoped.settings.default_deny_except_hosts = bypass;
        }
    }
    scoped.seal()
}

/// Whether Istio picks this listener by the TLS server name (an HTTPS listener: a filter chain per
/// hostname) rather than by `Host` (an HTTP listener: one route table for the port).
fn by_server_name(listener: &Listener) -> bool {
    listener.protocol.eq_ignore_ascii_case("HTTPS")
}

fn scope_level(
    level: &mut LevelPlan,
    own: &Hostname,
    bypass: &[HostMatch],
    port: u16,
    by_sni: bool,
) {
    if let Some(ea) = &mut level.external_auth {
        ea.rules = ea
            .rules
            .drain(..)
            .filter_map(|r| narrow_rule(r, own))
            .collect();
        if ea.rules.is_empty() {
            // None of its rules can match a request for this listener: it never calls here.
            level.external_auth = None;
        }
    }
    if !level.allow.is_empty() && !bypass.is_empty() {
        // Enforced where an enforced Allow policy is; beside dry-run ones only, in dry-run too.
        let dry_run = level.allow.iter().all(|p| p.dry_run);
        level.allow.push(PolicyPlan {
            dry_run,
            name: bypass_policy_name(port),
            rules: vec![RulePlan {
                name: "hostnames of the other listeners".into(),
                http: if by_sni {
                    HttpMatch {
                        server_names: bypass.to_vec(),
                        ..HttpMatch::default()
                    }
                } else {
                    HttpMatch {
                        hosts: bypass.to_vec(),
                        ..HttpMatch::default()
                    }
                },
                ..RulePlan::default()
            }],
        });
    }
}

/// The rule matching only the requests for `own` that it matched before; None when there are none.
fn narrow_rule(mut rule: RulePlan, own: &Hostname) -> Option<RulePlan> {
    if rule.http.hosts.is_empty() {
        rule.http.hosts.extend(own.host_match());
        return Some(rule);
    }
    let mut hosts: Vec<HostMatch> = Vec::new();
    for m in rule.http.hosts.iter().filter_map(|m| own.narrow(m)) {
        if !hosts.contains(&m) {
            hosts.push(m);
        }
    }
    if hosts.is_empty() {
        return None;
    }
    rule.http.hosts = hosts;
    Some(rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::RawObject;
    use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};

    fn h(s: &str) -> Hostname {
        Hostname::of(if s.is_empty() { None } else { Some(s) })
    }

    /// Listeners a, b, c on one port with disjoint hostnames, and one alone on its port.
    const DISJOINT: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\nspec:\n  gatewayClassName: istio\n  listeners:\n  - {name: a, port: 443, protocol: HTTP, hostname: a.example.com}\n  - {name: b, port: 443, protocol: HTTP, hostname: b.example.com}\n  - {name: c, port: 443, protocol: HTTP, hostname: '*.c.example.com'}\n  - {name: alone, port: 8080, protocol: HTTP}\n";
    /// Hostnames that cover one another on one port.
    const OVERLAPPING: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\nspec:\n  gatewayClassName: istio\n  listeners:\n  - {name: a, port: 443, protocol: HTTP, hostname: a.example.com}\n  - {name: wild, port: 443, protocol: HTTP, hostname: '*.example.com'}\n  - {name: open, port: 443, protocol: HTTP}\n";

    fn policy(name: &str, section: &str, tool: &str) -> String {
        format!("apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: {section}}}]\n  action: Allow\n  rules:\n  - name: r\n    authorization: {{type: Inline, mcp: {{methods: [{{name: tools/call, params: [{tool}]}}]}}}}\n")
    }

    fn ext_auth(name: &str, section: &str) -> String {
        format!("apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: {section}}}]\n  action: ExternalAuth\n  externalAuth: {{protocol: GRPC, grpc: {{}}, backendRef: {{name: authz, port: 9000}}}}\n")
    }

    /// Plans by listener name, as written (scoped), from `gateway` and `policies`.
    fn plans(gateway: &str, policies: &[String]) -> Vec<(String, CompiledPlan)> {
        let mut docs = vec![gateway.to_string()];
        docs.extend(policies.iter().cloned());
        let raw: Vec<RawObject> = docs
            .iter()
            .enumerate()
            .map(|(doc, text)| RawObject {
                file: "t".into(),
                doc,
                value: yaml_serde::from_str(text).unwrap(),
            })
            .collect();
        let (inv, errors) = model::Inventory::from_raw(raw, "default");
        assert!(errors.is_empty(), "{errors:?}");
        let topo = crate::topology::build(&inv, &crate::topology::TopologyOptions::default());
        for s in &topo.statuses {
            assert!(s.problems().is_empty(), "{s:?}");
        }
        let gw = &topo.gateways[0];
        gw.listeners
            .iter()
            .map(|l| (l.listener.name.clone(), plan_for(gw, &l.listener, &l.plan)))
            .collect()
    }

    fn plan<'p>(plans: &'p [(String, CompiledPlan)], name: &str) -> &'p CompiledPlan {
        &plans.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// Whether `plan` allows tools/call `tool` sent to `host`, as the filter decides it (every
    /// authorizer allowing).
    fn allows(plan: &CompiledPlan, host: &str, tool: &str) -> bool {
        allows_sni(plan, None, host, tool)
    }

    /// The same on a TLS connection that asked for `sni`.
    fn allows_sni(plan: &CompiledPlan, sni: Option<&str>, host: &str, tool: &str) -> bool {
        let e = Evaluator::from_plan(plan.clone()).expect("the filter loads the scoped plan");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}"}}}}"#
        );
        let mcp = toolgate_policy::mcp::read_body(
            body.as_bytes(),
            toolgate_policy::mcp::ReadOptions::default(),
        )
        .unwrap();
        let req = HttpRequest {
            method: "POST",
            path: "/mcp",
            authority: host,
            port: 443,
            headers: &[("content-type", "application/json")],
            principal: None,
            server_name: sni,
            auth: None,
            time_ms: 0,
        };
        e.route(None).decide(&req, BodyInput::Mcp(&mcp)).allowed()
    }

    /// HTTPS listeners on one port: Istio picks the filter chain, and so the routes, by SNI.
    const HTTPS_OVERLAPPING: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\nspec:\n  gatewayClassName: istio\n  listeners:\n  - {name: a, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: a}]}}\n  - {name: wild, port: 443, protocol: HTTPS, hostname: '*.example.com', tls: {certificateRefs: [{name: w}]}}\n";

    #[test]
    fn on_https_the_other_listeners_are_told_apart_by_sni_not_by_host() {
        let p = plans(HTTPS_OVERLAPPING, &[policy("pw", "wild", "sum")]);
        let wild = plan(&p, "wild");
        let passes = |sni: Option<&str>, host: &str, tool: &str| {
            ["a", "wild"]
                .iter()
                .all(|l| allows_sni(plan(&p, l), sni, host, tool))
        };
        // On the wildcard's chain (SNI x.example.com) a Host naming the other listener is routed by
        // the wildcard's routes: its plan decides, whatever the Host says.
        assert!(!passes(Some("x.example.com"), "a.example.com", "env"));
        assert!(passes(Some("x.example.com"), "a.example.com", "sum"));
        // No SNI: no chain of the other listener was picked either.
        assert!(!passes(None, "a.example.com", "env"));
        // On a.example.com's chain the wildcard's plan lets the request through; a's plan decides.
        assert!(passes(Some("a.example.com"), "a.example.com", "env"));
        assert!(
            allows_sni(wild, Some("A.example.com"), "a.example.com", "env"),
            "server names compare without case"
        );
        let rule = &wild
            .gateway
            .allow
            .iter()
            .find(|x| x.name == bypass_policy_name(443))
            .unwrap()
            .rules[0];
        assert!(
            rule.http.hosts.is_empty() && !rule.http.server_names.is_empty(),
            "{rule:?}"
        );
    }

    #[test]
    fn every_request_is_decided_by_its_own_listeners_plan() {
        let p = plans(
            DISJOINT,
            &[
                policy("pa", "a", "sum"),
                policy("pb", "b", "echo"),
                policy("pc", "c", "env"),
            ],
        );
        // Every WasmPlugin on port 443 runs for every request on it: a request passes when all allow.
        let passes = |host: &str, tool: &str| {
            ["a", "b", "c"]
                .iter()
                .all(|l| allows(plan(&p, l), host, tool))
        };
        assert!(passes("a.example.com", "sum"));
        assert!(!passes("a.example.com", "echo") && !passes("a.example.com", "env"));
        assert!(
            passes("b.example.com:443", "echo"),
            "the port of :authority is not part of the host"
        );
        assert!(
            passes("B.Example.Com", "echo"),
            "host names compare without case"
        );
        assert!(!passes("b.example.com", "sum") && !passes("b.example.com", "env"));
        assert!(passes("x.c.example.com", "env"));
        assert!(!passes("x.c.example.com", "sum") && !passes("x.c.example.com", "echo"));
        // Each plan alone still decides its own listener's requests as compiled.
        assert!(!allows(plan(&p, "a"), "a.example.com", "echo"));
        // A listener alone on its port keeps its plan as compiled.
        let alone = plans(DISJOINT, &[policy("p8080", "alone", "sum")]);
        let compiled = alone.iter().find(|(n, _)| n == "alone").unwrap();
        assert!(compiled
            .1
            .gateway
            .allow
            .iter()
            .all(|x| x.name != bypass_policy_name(8080)));
    }

    /// docs/semantics.md §6a: a deny-by-default listener without policy judges only its own requests.
    #[test]
    fn deny_by_default_on_a_shared_port_judges_only_the_listeners_own_requests() {
        let gateway = DISJOINT.replace(
            "metadata: {name: gw, namespace: ns}",
            "metadata: {name: gw, namespace: ns, annotations: {toolgate.dev/default: deny}}",
        );
        let p = plans(&gateway, &[policy("pa", "a", "sum")]);
        let passes = |host: &str, tool: &str| {
            ["a", "b", "c"]
                .iter()
                .all(|l| allows(plan(&p, l), host, tool))
        };
        assert!(
            passes("a.example.com", "sum"),
            "b's and c's default deny let a's requests through"
        );
        assert!(!passes("a.example.com", "echo"));
        assert!(
            !passes("b.example.com", "echo") && !passes("x.c.example.com", "sum"),
            "denied by default by their own plans"
        );
        assert!(!allows(plan(&p, "b"), "b.example.com", "echo"));
        assert!(allows(plan(&p, "b"), "a.example.com", "sum"));
        assert_eq!(plan(&p, "b").settings.default_deny_except_hosts.len(), 2);
    }

    #[test]
    fn a_listener_without_policy_on_a_shared_port_is_not_restricted_by_the_others() {
        let p = plans(DISJOINT, &[policy("pa", "a", "sum")]);
        assert!(!allows(plan(&p, "a"), "a.example.com", "echo"));
        assert!(allows(plan(&p, "a"), "b.example.com", "echo"));
        assert!(allows(plan(&p, "a"), "x.c.example.com", "echo"));
        let bypass = &plan(&p, "a").gateway.allow.last().unwrap();
        assert_eq!(bypass.name, "(other listeners on port 443)");
        assert_eq!(
            bypass.rules[0].http.hosts,
            vec![
                HostMatch::Exact("b.example.com".into()),
                HostMatch::Suffix(".c.example.com".into())
            ]
        );
        assert_eq!(plan(&p, "a").hash, plan(&p, "a").content_hash(), "resealed");
    }

    #[test]
    fn overlapping_hostnames_never_let_a_request_through_fewer_plans_than_its_own() {
        let p = plans(
            OVERLAPPING,
            &[
                policy("pa", "a", "sum"),
                policy("pw", "wild", "env"),
                policy("po", "open", "echo"),
            ],
        );
        let passes = |host: &str, tool: &str| {
            ["a", "wild", "open"]
                .iter()
                .all(|l| allows(plan(&p, l), host, tool))
        };
        // Which listener a host selects: the most specific hostname that matches it.
        let own = |host: &str| match host {
            "a.example.com" => "a",
            h if h.ends_with(".example.com") => "wild",
            _ => "open",
        };
        for host in ["a.example.com", "x.example.com", "example.com", "other.org"] {
            for tool in ["sum", "env", "echo"] {
                if passes(host, tool) {
                    assert!(
                        allows(plan(&p, own(host)), host, tool),
                        "{host} {tool} passed without its own plan allowing it"
                    );
                }
            }
        }
        // The more specific listener's requests are decided by its plan alone...
        assert!(passes("a.example.com", "sum"));
        // ...the wider ones' also by the narrower plans that cover them (the plan format has no
        // "but not this host"): nothing passes that any of them denies.
        assert!(!passes("x.example.com", "env"));
    }

    #[test]
    fn external_auth_is_narrowed_to_the_listeners_hostname() {
        let p = plans(DISJOINT, &[ext_auth("ea", "b")]);
        let ea = plan(&p, "b").gateway.external_auth.as_ref().unwrap();
        assert_eq!(ea.rules.len(), 1);
        assert_eq!(
            ea.rules[0].http.hosts,
            vec![HostMatch::Exact("b.example.com".into())]
        );
        let p = plans(OVERLAPPING, &[ext_auth("ew", "wild")]);
        let ew = plan(&p, "wild").gateway.external_auth.as_ref().unwrap();
        assert_eq!(
            ew.rules[0].http.hosts,
            vec![HostMatch::Suffix(".example.com".into())]
        );
        // A rule for hosts that are never this listener's is dropped, and so is the policy then.
        let mut level = plans(DISJOINT, &[ext_auth("ea", "b")]).remove(1).1.gateway;
        level.external_auth.as_mut().unwrap().rules[0].http.hosts =
            vec![HostMatch::Exact("a.example.com".into())];
        scope_level(&mut level, &h("b.example.com"), &[], 443, false);
        assert!(level.external_auth.is_none());
    }
}
