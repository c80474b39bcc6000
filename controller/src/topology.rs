//! From objects to one compiled plan per Gateway listener (docs/semantics.md §2, §6, §7): which policies are
//! accepted, in which order they run, which routes and upstreams each listener serves.
//! The same code serves `compile`, `render`, `explain` and the in-cluster controller.

use std::collections::BTreeMap;

use serde::Serialize;
use toolgate_policy::api::{
    AccessPolicySpec, Condition, ParentReference, PolicyAction, PolicyAncestorStatus,
    PolicyTargetRef, GATEWAY_GROUP, GROUP,
};
use toolgate_policy::compile::{
    compile, ClusterNaming, CompileError, CompileOptions, CompiledPolicy,
};
use toolgate_policy::plan::{CompiledPlan, LevelPlan, PlanSettings};

use crate::grants;
use crate::model::{self, GatewaySpec, Inventory, Listener, Object, RouteMatch, UrlRewrite};

pub const CONTROLLER_NAME: &str = "toolgate.dev/controller";
/// docs/semantics.md §7: more policies than this on one target are not accepted.
pub const MAX_POLICIES_PER_TARGET: usize = 5;
/// docs/semantics.md §6a: an XAccessPolicy annotated `"true"` is compiled and counted but not enforced.
pub const DRY_RUN_ANNOTATION: &str = "toolgate.dev/dry-run";
/// docs/semantics.md §6a: a Gateway annotated `deny` denies by default where no policy applies.
pub const DEFAULT_ANNOTATION: &str = "toolgate.dev/default";

/// Whether a policy is in dry-run (docs/semantics.md §6a).
pub fn is_dry_run(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(DRY_RUN_ANNOTATION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[derive(Clone, Debug, Default)]
pub struct TopologyOptions {
    pub compile: CompileOptions,
    pub settings: PlanSettings,
    /// Only Gateways of this class (all when None).
    /// Only Gateways of these classes (all when empty).
    pub gateway_classes: Vec<String>,
}

/// Where a route sends traffic. The cluster name is the key the filter sees as `xds.cluster_name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Upstream {
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
    XBackend {
        namespace: String,
        name: String,
        target: BackendTarget,
        path: String,
    },
    /// Istio's `networking.istio.io/Hostname` backendRef kind (a host Istio knows, e.g. from a
    /// ServiceEntry): under Istio only; `render` refuses it.
    Host { host: String, port: u16 },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BackendTarget {
    /// A Service in the XBackend's namespace (plain HTTP).
    Service { name: String, port: u16 },
    /// An external host (TLS, SNI = host).
    Hostname { host: String, port: u16 },
}

impl Upstream {
    pub fn cluster_name(&self) -> String {
        match self {
            Upstream::Service {
                namespace,
                name,
                port,
            } => format!("service/{namespace}/{name}/{port}"),
            Upstream::XBackend {
                namespace, name, ..
            } => format!("xbackend/{namespace}/{name}"),
            Upstream::Host { host, port } => format!("host/{host}/{port}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RouteRuleOut {
    pub matches: Vec<RouteMatch>,
    pub rewrite: Option<UrlRewrite>,
    /// `timeouts.request` (else `backendRequest`) of the HTTPRoute rule, as written.
    pub timeout: Option<String>,
    /// Weighted upstreams; empty = the rule has no usable backend (answered 500, as Gateway API asks).
    pub backends: Vec<(Upstream, u32)>,
}

#[derive(Clone, Debug)]
pub struct RouteOut {
    /// `namespace/name` of the HTTPRoute.
    pub name: String,
    pub hostnames: Vec<String>,
    pub rules: Vec<RouteRuleOut>,
}

#[derive(Clone, Debug)]
pub struct ListenerOut {
    pub listener: Listener,
    pub routes: Vec<RouteOut>,
    pub plan: CompiledPlan,
    /// The XBackends (`namespace`, `name`) whose backend levels the plan has, with the key of each.
    pub backend_targets: BTreeMap<(String, String), String>,
}

#[derive(Clone, Debug)]
pub struct GatewayOut {
    pub gateway: Object<GatewaySpec>,
    pub listeners: Vec<ListenerOut>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyStatus {
    /// `namespace/name`.
    pub policy: String,
    pub ancestors: Vec<PolicyAncestorStatus>,
}

impl PolicyStatus {
    /// `reason: message` of each target that did not accept it.
    pub fn problems(&self) -> Vec<String> {
        self.ancestors
            .iter()
            .flat_map(|a| {
                a.conditions
                    .iter()
                    .filter(|c| c.status != "True")
                    .map(move |c| {
                        let r = &a.ancestor_ref;
                        let ns = r.namespace.as_deref().unwrap_or("");
                        format!(
                            "{} {ns}/{}: {}: {}",
                            r.kind.as_deref().unwrap_or(""),
                            r.name,
                            c.reason,
                            c.message
                        )
                    })
            })
            .collect()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub gateways: Vec<GatewayOut>,
    pub statuses: Vec<PolicyStatus>,
    /// Findings that do not invalidate anything (e.g. sourced rules on a listener without client certificates).
    pub warnings: Vec<String>,
    /// What could not be decided from the objects given (e.g. a route's attachment by a Namespace
    /// selector without the Namespace): the CLI fails on these; the controller reports them.
    pub errors: Vec<String>,
}

/// What a target is, independent of `sectionName` (limits count per target).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum TargetKey {
    Gateway { namespace: String, name: String },
    Backend { namespace: String, name: String },
}

/// One accepted attachment of a policy to a target.
struct Attachment<'a> {
    policy: usize,
    section: Option<String>,
    plan: &'a CompiledPolicy,
}

/// A level of a plan from its accepted attachments, in order: the ExternalAuth policy (at most one
/// is accepted per target; of a Gateway's and a listener's, the older) and the Allow policies.
fn level<'a>(attachments: impl Iterator<Item = &'a Attachment<'a>>) -> LevelPlan {
    let mut level = LevelPlan::default();
    for a in attachments {
        match a.plan {
            CompiledPolicy::Allow(p) => level.allow.push(p.clone()),
            CompiledPolicy::ExternalAuth(ea) => {
                level.external_auth.get_or_insert_with(|| ea.clone());
            }
        }
    }
    level
}

/// The topology of the objects: each policy's status, and each Gateway's listeners with their routes
/// and plans.
pub fn build(inv: &Inventory, opts: &TopologyOptions) -> Topology {
    let mut topo = Topology::default();

    // Evaluation order (docs/semantics.md §2): creationTimestamp, then namespace/name.
    let mut order: Vec<usize> = (0..inv.policies.len()).collect();
    order.sort_by_cached_key(|&i| {
        let p = &inv.policies[i];
        (p.creation_timestamp.clone().unwrap_or_default(), p.key())
    });
    // Compiling a policy depends on no other: done in parallel, then attached in order.
    let compiled = crate::par::map(&order, |&i| {
        let policy = &inv.policies[i];
        let dry_run = is_dry_run(&policy.annotations);
        compile(&policy.namespace, &policy.name, &policy.spec, &opts.compile).map(|mut c| {
            match &mut c {
                CompiledPolicy::Allow(p) => p.dry_run = dry_run,
                CompiledPolicy::ExternalAuth(ea) => ea.dry_run = dry_run,
            }
            c
        })
    });
    let xbackends = XBackends::new(inv);
    let backend_keys = BackendKeys::new(inv, &opts.compile.clusters);
    let attaching = Attaching {
        inv,
        xbackends: &xbackends,
        backend_keys: &backend_keys,
    };
    let by_target = attaching.attach_all(&order, &compiled, &mut topo);
    topo.statuses
        .extend(inv.rejected_policies.iter().map(rejected_status));
    topo.statuses.sort_by(|a, b| a.policy.cmp(&b.policy));

    let placing = Placing {
        inv,
        opts,
        xbackends: &xbackends,
        backend_keys: &backend_keys,
        by_target: &by_target,
    };
    for gw in &inv.gateways {
        if opts.gateway_classes.is_empty()
            || opts.gateway_classes.contains(&gw.spec.gateway_class_name)
        {
            let gateway = placing.gateway(gw, &mut topo.warnings, &mut topo.errors);
            topo.gateways.push(gateway);
        }
    }
    topo
}

/// What attaching policies to their targets reads.
struct Attaching<'a> {
    inv: &'a Inventory,
    xbackends: &'a XBackends<'a>,
    backend_keys: &'a BackendKeys,
}

impl Attaching<'_> {
    /// Attaches the compiled policies (`compiled[k]` is policy `order[k]`'s) to their targets in
    /// evaluation order: the accepted attachments per target, in order. Each policy's status goes to
    /// `topo.statuses` (in the inventory's order), a bad dry-run annotation to its warnings.
    fn attach_all<'c>(
        &self,
        order: &[usize],
        compiled: &'c [Result<CompiledPolicy, CompileError>],
        topo: &mut Topology,
    ) -> BTreeMap<TargetKey, Vec<Attachment<'c>>> {
        let mut by_target: BTreeMap<TargetKey, Vec<Attachment<'_>>> = BTreeMap::new();
        let mut statuses: Vec<Option<PolicyStatus>> = vec![None; self.inv.policies.len()];
        for (&i, compiled) in order.iter().zip(compiled) {
            let policy = &self.inv.policies[i];
            let refusal = external_auth_refusal(self.inv, policy);
            if let Some(v) = policy.annotations.get(DRY_RUN_ANNOTATION).filter(|v| {
                !["true", "false"]
                    .iter()
                    .any(|b| v.trim().eq_ignore_ascii_case(b))
            }) {
                topo.warnings.push(format!(
                    "policy {}: annotation {DRY_RUN_ANNOTATION}: {v:?} is neither \"true\" nor \"false\": the policy is enforced",
                    policy.key()
                ));
            }
            let ancestors = policy
                .spec
                .target_refs
                .iter()
                .map(|target| PolicyAncestorStatus {
                    ancestor_ref: ancestor_ref(target, &policy.namespace),
                    controller_name: CONTROLLER_NAME.to_string(),
                    conditions: vec![self.attach(
                        i,
                        compiled,
                        refusal.as_deref(),
                        target,
                        &mut by_target,
                    )],
                })
                .collect();
            statuses[i] = Some(PolicyStatus {
                policy: policy.key(),
                ancestors,
            });
        }
        topo.statuses = statuses.into_iter().flatten().collect();
        by_target
    }

    /// Attaches policy `i` to `target` unless something refuses it (its compilation, the target,
    /// its authorizer reference, the limits per target): the condition that says which.
    fn attach<'c>(
        &self,
        i: usize,
        compiled: &'c Result<CompiledPolicy, CompileError>,
        refusal: Option<&str>,
        target: &PolicyTargetRef,
        by_target: &mut BTreeMap<TargetKey, Vec<Attachment<'c>>>,
    ) -> Condition {
        let policy = &self.inv.policies[i];
        let key = target_key(self.inv, self.xbackends, self.backend_keys, policy, target);
        match (compiled, key) {
            (Err(e), _) => condition(false, e.reason(), e.to_string(), policy.generation),
            (_, Err((reason, message))) => condition(false, reason, message, policy.generation),
            (Ok(_), Ok(_)) if refusal.is_some() => condition(
                false,
                "Invalid",
                refusal.unwrap_or_default().to_string(),
                policy.generation,
            ),
            (Ok(plan), Ok(key)) => {
                let attached = by_target.entry(key).or_default();
                let external_auths = attached
                    .iter()
                    .filter(|a| {
                        self.inv.policies[a.policy].spec.action == PolicyAction::ExternalAuth
                    })
                    .count();
                if policy.spec.action == PolicyAction::ExternalAuth && external_auths > 0 {
                    condition(
                        false,
                        "LimitPerTargetExceeded",
                        "an older ExternalAuth policy already targets this target (at most one per target)".into(),
                        policy.generation,
                    )
                } else if attached.len() >= MAX_POLICIES_PER_TARGET {
                    condition(
                        false,
                        "LimitPerTargetExceeded",
                        format!("{MAX_POLICIES_PER_TARGET} older policies already target this target (at most {MAX_POLICIES_PER_TARGET})"),
                        policy.generation,
                    )
                } else {
                    attached.push(Attachment {
                        policy: i,
                        section: target.section_name.clone(),
                        plan,
                    });
                    let message = if is_dry_run(&policy.annotations) {
                        "Policy accepted (dry-run: not enforced)"
                    } else {
                        "Policy accepted"
                    };
                    condition(true, "Accepted", message.into(), policy.generation)
                }
            }
        }
    }
}

/// The status of a policy the model refused: Invalid on every target.
fn rejected_status(rejected: &model::RejectedPolicy) -> PolicyStatus {
    let ancestors = rejected
        .target_refs
        .iter()
        .map(|t| PolicyAncestorStatus {
            ancestor_ref: ancestor_ref(t, &rejected.namespace),
            controller_name: CONTROLLER_NAME.to_string(),
            conditions: vec![condition(false, "Invalid", rejected.message.clone(), None)],
        })
        .collect();
    PolicyStatus {
        policy: format!("{}/{}", rejected.namespace, rejected.name),
        ancestors,
    }
}

/// What placing the Gateways' listeners reads: the objects, the options, and the accepted
/// attachments by target.
struct Placing<'a> {
    inv: &'a Inventory,
    opts: &'a TopologyOptions,
    xbackends: &'a XBackends<'a>,
    backend_keys: &'a BackendKeys,
    by_target: &'a BTreeMap<TargetKey, Vec<Attachment<'a>>>,
}

impl Placing<'_> {
    /// A Gateway's listeners, each with its routes and plan.
    fn gateway(
        &self,
        gw: &Object<GatewaySpec>,
        warnings: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) -> GatewayOut {
        let key = TargetKey::Gateway {
            namespace: gw.namespace.clone(),
            name: gw.name.clone(),
        };
        // docs/semantics.md §6a: deny by default, for every Gateway or this one by its annotation.
        let mut settings = self.opts.settings.clone();
        match gw.annotations.get(DEFAULT_ANNOTATION).map(|v| v.trim()) {
            Some("deny") => settings.default_deny = true,
            Some("allow") | None => {}
            Some(other) => warnings.push(format!(
                "gateway {}: annotation {DEFAULT_ANNOTATION}: {other:?} is neither deny nor allow (ignored)",
                gw.key()
            )),
        }
        let gateway_attachments = self.by_target.get(&key).map(Vec::as_slice).unwrap_or(&[]);
        let listeners = gw
            .spec
            .listeners
            .iter()
            .map(|listener| {
                self.listener(
                    gw,
                    listener,
                    &settings,
                    gateway_attachments,
                    warnings,
                    errors,
                )
            })
            .collect();
        GatewayOut {
            gateway: gw.clone(),
            listeners,
        }
    }

    /// A listener's routes and plan: the gateway level of the attachments to the Gateway that name
    /// no other listener, and the backend levels of what its routes reach.
    fn listener(
        &self,
        gw: &Object<GatewaySpec>,
        listener: &Listener,
        settings: &PlanSettings,
        gateway_attachments: &[Attachment<'_>],
        warnings: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) -> ListenerOut {
        let listener_id = format!("{}/{}/{}", gw.namespace, gw.name, listener.name);
        let gateway_level = level(
            gateway_attachments
                .iter()
                .filter(|a| a.section.as_deref().is_none_or(|s| s == listener.name)),
        );
        let routes = attached_routes(
            self.inv,
            self.xbackends,
            gw,
            listener,
            &self.opts.compile.clusters,
            warnings,
            errors,
        );
        let (backends, backend_targets) = self.backend_levels(&routes);
        // docs/semantics.md §2: under Istio a listener that lets unverified certificates through has
        // no caller identities (istiod accepts untrusted chains there); `render` always verifies.
        let insecure = model::insecure_client_fallback(&gw.spec, listener.port);
        let istio = matches!(self.opts.compile.clusters, ClusterNaming::Istio { .. });
        let plan = CompiledPlan {
            settings: PlanSettings {
                unverified_client_certificates: insecure && istio,
                ..settings.clone()
            },
            gateway: gateway_level,
            backends,
            ..CompiledPlan::empty(&listener_id)
        }
        .seal();
        identity_warnings(
            &listener_id,
            gw,
            listener,
            &plan,
            (insecure, istio),
            warnings,
        );
        ListenerOut {
            listener: listener.clone(),
            routes,
            plan,
            backend_targets,
        }
    }

    /// The backend levels of a listener's plan by the cluster key the filter sees, and the key of each
    /// XBackend that has one.
    fn backend_levels(
        &self,
        routes: &[RouteOut],
    ) -> (
        BTreeMap<String, LevelPlan>,
        BTreeMap<(String, String), String>,
    ) {
        // Backend levels by XBackend.
        let backend_level = |ns: &str, name: &str| -> LevelPlan {
            let key = TargetKey::Backend {
                namespace: ns.to_string(),
                name: name.to_string(),
            };
            level(self.by_target.get(&key).into_iter().flatten())
        };
        let mut backends = BTreeMap::new();
        let mut backend_targets = BTreeMap::new();
        match &self.opts.compile.clusters {
            ClusterNaming::Rendered => {
                for upstream in routes
                    .iter()
                    .flat_map(|r| &r.rules)
                    .flat_map(|r| &r.backends)
                    .map(|(u, _)| u)
                {
                    if let Upstream::XBackend {
                        namespace, name, ..
                    } = upstream
                    {
                        let level = backend_level(namespace, name);
                        if !level.is_empty() {
                            backends.insert(upstream.cluster_name(), level);
                            backend_targets
                                .insert((namespace.clone(), name.clone()), upstream.cluster_name());
                        }
                    }
                }
            }
            // Istio routes to Services, never to an XBackend kind: a request routed to the
            // Service (or host) an XBackend names is a request to that XBackend. A listener's
            // plan keys only what its own routes can send traffic to (tenancy: no other
            // namespace's policies, and a change elsewhere leaves this output unchanged): the
            // XBackends its routes name, and those naming a Service its routes name (references
            // into other namespaces count only with a ReferenceGrant: `resolve_backend`).
            naming @ ClusterNaming::Istio { .. } => {
                for xb in reachable_xbackends(self.inv, routes, naming) {
                    if let Some(key) = self.backend_keys.key(&xb.namespace, &xb.name) {
                        let level = backend_level(&xb.namespace, &xb.name);
                        if !level.is_empty() {
                            backends.insert(key.to_string(), level);
                            backend_targets
                                .insert((xb.namespace.clone(), xb.name.clone()), key.to_string());
                        }
                    } else if let Some(cluster) = self.backend_keys.contested_cluster(xb, naming) {
                        backends
                            .insert(cluster.clone(), self.backend_keys.contested_level(&cluster));
                    }
                }
            }
        }
        (backends, backend_targets)
    }
}

/// Warnings about rules with a source on a listener whose callers have no identity: under Istio one
/// that lets unverified certificates through (`insecure`: AllowInsecureFallback), or one that asks
/// for no client certificate; and about AllowInsecureFallback where `render` does not honour it.
fn identity_warnings(
    listener_id: &str,
    gw: &Object<GatewaySpec>,
    listener: &Listener,
    plan: &CompiledPlan,
    (insecure, istio): (bool, bool),
    warnings: &mut Vec<String>,
) {
    let sourced = plan
        .gateway
        .allow
        .iter()
        .chain(plan.backends.values().flat_map(|l| &l.allow))
        .any(|p| p.rules.iter().any(|r| r.principal.is_some()));
    if insecure && istio && sourced {
        warnings.push(format!(
            "listener {listener_id}: spec.tls.frontend validation mode AllowInsecureFallback lets clients through \
             with certificates nobody verified, so a URI SAN there is a claim, not an identity: the filter reads \
             no caller identity on this listener and rules with a source match no one (use AllowValidOnly)"
        ));
    } else if insecure && !istio {
        warnings.push(format!(
            "listener {listener_id}: spec.tls.frontend validation mode AllowInsecureFallback is not honoured by \
             render: the listener requires a client certificate its CA signed"
        ));
    }
    if sourced && model::client_ca_refs(&gw.spec, listener.port).is_empty() {
        warnings.push(format!(
            "listener {listener_id}: rules with a source apply, but the listener does not request client \
             certificates (no spec.tls.frontend CA), so its callers have no identity and those rules never match; \
             use --client-ca FILE or configure spec.tls.frontend"
        ));
    }
}

fn condition(ok: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        condition_type: "Accepted".into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: now_rfc3339(),
    }
}

fn ancestor_ref(target: &PolicyTargetRef, namespace: &str) -> ParentReference {
    ParentReference {
        group: Some(target.group.clone()),
        kind: Some(target.kind.clone()),
        namespace: Some(namespace.to_string()),
        name: target.name.clone(),
        section_name: target.section_name.clone(),
        port: None,
    }
}

/// The current time as the API server writes it (`2026-01-02T03:04:05Z`: whole seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The target a policy's reference names, or the status reason and message why it names none.
fn target_key(
    inv: &Inventory,
    xbackends: &XBackends<'_>,
    backend_keys: &BackendKeys,
    policy: &Object<AccessPolicySpec>,
    target: &PolicyTargetRef,
) -> Result<TargetKey, (&'static str, String)> {
    let ns = &policy.namespace;
    let not_found = |m: String| ("TargetNotFound", m);
    if target.group == GATEWAY_GROUP && target.kind == "Gateway" {
        let gw = inv
            .gateways
            .iter()
            .find(|g| &g.namespace == ns && g.name == target.name)
            .ok_or_else(|| not_found(format!("Gateway {ns}/{} not found", target.name)))?;
        if let Some(section) = &target.section_name {
            if !gw.spec.listeners.iter().any(|l| &l.name == section) {
                return Err(not_found(format!(
                    "Gateway {ns}/{} has no listener {section:?}",
                    target.name
                )));
            }
        }
        Ok(TargetKey::Gateway {
            namespace: ns.clone(),
            name: target.name.clone(),
        })
    } else if target.group == GROUP && target.kind == "XBackend" {
        xbackends
            .get(ns, &target.name)
            .ok_or_else(|| not_found(format!("XBackend {ns}/{} not found", target.name)))?;
        if let Some(r) = backend_keys.refusal(ns, &target.name) {
            return Err((r.reason, r.message.clone()));
        }
        Ok(TargetKey::Backend {
            namespace: ns.clone(),
            name: target.name.clone(),
        })
    } else {
        Err(not_found(format!(
            "target kind {}/{} is not supported",
            target.group, target.kind
        )))
    }
}

/// Why an ExternalAuth policy's authorizer reference does not count: a Service in another
/// namespace that no ReferenceGrant there lets the policy's namespace refer to.
fn external_auth_refusal(inv: &Inventory, policy: &Object<AccessPolicySpec>) -> Option<String> {
    let ea = policy
        .spec
        .external_auth
        .as_ref()
        .filter(|_| policy.spec.action == PolicyAction::ExternalAuth)?;
    let b = &ea.backend_ref;
    let ns = b
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(&policy.namespace);
    let permitted = grants::permits(
        inv,
        grants::ACCESS_POLICY,
        &policy.namespace,
        grants::SERVICE,
        ns,
        &b.name,
    );
    (!permitted).then(|| {
        format!(
            "spec.externalAuth.backendRef: {}",
            grants::not_permitted(
                grants::ACCESS_POLICY,
                &policy.namespace,
                grants::SERVICE,
                ns,
                &b.name
            )
        )
    })
}

/// Listener plans by `namespace.gateway.listener`, for writing files.
pub fn plan_file_name(gateway: &Object<GatewaySpec>, listener: &Listener) -> String {
    format!(
        "{}.{}.{}.plan.json",
        gateway.namespace, gateway.name, listener.name
    )
}

mod backend_keys;
mod route_selection;
mod routes;
use backend_keys::BackendKeys;
pub use route_selection::{path_of, Precedence};
use routes::{attached_routes, reachable_xbackends, XBackends};

/// The topology of an inventory's YAML with `clusters` naming, as the controller builds it (the tests'
/// way in, here and in runtime/).
#[cfg(test)]
pub(crate) fn topology_of(yaml: &str, clusters: ClusterNaming) -> Topology {
    let inv = Inventory::from_yaml(yaml);
    let opts = TopologyOptions {
        compile: CompileOptions {
            clusters,
            ..CompileOptions::default()
        },
        ..TopologyOptions::default()
    };
    build(&inv, &opts)
}

#[cfg(test)]
mod tenancy_tests;
#[cfg(test)]
mod tests;
