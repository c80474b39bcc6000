//! What the controller writes, as pure functions of the topology: the Istio WasmPlugin (or
//! TrafficExtension) of each Gateway listener, the EnvoyFilter that makes the Gateway hold requests
//! until the filter decided, and each policy's status with the transition times it already had
//! kept when nothing about a condition changed. Their names and marks are `names`'.

use serde_json::{json, Value};
use toolgate_policy::api::PolicyAncestorStatus;

use super::names;
use crate::topology::{GatewayOut, PolicyStatus};

pub const FIELD_MANAGER: &str = "toolgate";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const GATEWAY_LABEL: &str = "toolgate.dev/gateway";
pub const GROUP: &str = "extensions.istio.io";
pub const VERSION: &str = "v1alpha1";
pub const ENVOY_FILTER_GROUP: &str = "networking.istio.io";
pub const ENVOY_FILTER_VERSION: &str = "v1alpha3";

/// Which Istio resource carries the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputKind {
    /// `WasmPlugin` (extensions.istio.io/v1alpha1).
    Wasmplugin,
    /// `TrafficExtension` (Istio 1.30, `spec.wasm`).
    Trafficextension,
}

impl OutputKind {
    pub fn kind(self) -> &'static str {
        match self {
            OutputKind::Wasmplugin => "WasmPlugin",
            OutputKind::Trafficextension => "TrafficExtension",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            OutputKind::Wasmplugin => "wasmplugins",
            OutputKind::Trafficextension => "trafficextensions",
        }
    }
}

/// When Istio's agent pulls the module again (`imagePullPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PullPolicy {
    /// Once per digest (Istio's default, except for the tag `latest`).
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    /// On every change of the output.
    #[value(name = "Always")]
    Always,
}

impl PullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Always => "Always",
        }
    }
}

/// Where the module comes from, and how Istio's agent pulls it.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub url: String,
    pub sha256: Option<String>,
    /// `imagePullSecret`: a Secret in the Gateway's namespace.
    pub pull_secret: Option<String>,
    pub pull_policy: Option<PullPolicy>,
}

/// One object to write: its namespace, name, the Gateway it is for and the whole object (apiVersion,
/// kind, metadata, spec).
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub namespace: String,
    pub name: String,
    pub gateway: String,
    pub object: Value,
}

/// The metadata of an output: its marks (`names`) and, when the Gateway's uid is known, the Gateway
/// as its owner (the output goes with it).
fn metadata(
    ns: &str,
    name: &str,
    gateway: &str,
    source: String,
    gateway_uid: Option<&str>,
) -> Value {
    let mut metadata = json!({
        "name": name,
        "namespace": ns,
        "labels": {MANAGED_BY: FIELD_MANAGER, GATEWAY_LABEL: names::gateway_label(ns, gateway)},
        "annotations": {names::SOURCE_ANNOTATION: source},
    });
    if let Some(uid) = gateway_uid {
        metadata["ownerReferences"] = json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": gateway, "uid": uid}]);
    }
    metadata
}

/// The objects for one Gateway: one per listener whose plan has a policy, selected by the listener's
/// port (Istio counts a gateway's listeners as CLIENT traffic, so no `mode`), the listener's plan as
/// `pluginConfig` (scoped to its hostname where listeners share the port: see `shared_port`), owned
/// by the Gateway (`gateway_uid`, when known).
pub fn desired(
    gw: &GatewayOut,
    gateway_uid: Option<&str>,
    module: &Module,
    kind: OutputKind,
) -> Vec<Desired> {
    let (ns, gateway) = (&gw.gateway.namespace, &gw.gateway.name);
    enforced(gw)
        .map(|l| {
            let name = names::plan_output(ns, gateway, &l.listener.name);
            let mut wasm = json!({
                "url": module.url,
                "failStrategy": "FAIL_CLOSE",
                "pluginName": format!("toolgate:{ns}/{gateway}/{}", l.listener.name),
                // Istio selects by port: where listeners share it, the plan lets the others' requests through.
                "pluginConfig": serde_json::to_value(super::shared_port::plan_for(gw, &l.listener, &l.plan)).unwrap_or(Value::Null),
            });
            if let Some(sha) = &module.sha256 {
                wasm["sha256"] = json!(sha);
            }
            if let Some(secret) = &module.pull_secret {
                wasm["imagePullSecret"] = json!(secret);
            }
            if let Some(policy) = module.pull_policy {
                wasm["imagePullPolicy"] = json!(policy.as_str());
            }
            let common = json!({
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}],
                "match": [{"ports": [{"number": l.listener.port}]}],
            });
            let spec = match kind {
                OutputKind::Wasmplugin => {
                    let mut spec = common;
                    spec["phase"] = json!("AUTHZ");
                    if let (Some(s), Some(w)) = (spec.as_object_mut(), wasm.as_object()) {
                        s.extend(w.clone());
                    }
                    spec
                }
                OutputKind::Trafficextension => {
                    let mut spec = common;
                    spec["phase"] = json!("AUTHZ");
                    spec["wasm"] = wasm;
                    spec
                }
            };
            let metadata = metadata(ns, &name, gateway, names::listener_source(ns, gateway, &l.listener.name), gateway_uid);
            Desired {
                namespace: ns.clone(),
                name,
                gateway: gateway.clone(),
                object: json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": kind.kind(), "metadata": metadata, "spec": spec}),
            }
        })
        .collect()
}

/// The listeners of a Gateway that get the filter: those whose plan has a policy.
/// Whether the Gateway gets outputs (a listener is enforced).
pub fn has_outputs(gw: &GatewayOut) -> bool {
    enforced(gw).next().is_some()
}

fn enforced(gw: &GatewayOut) -> impl Iterator<Item = &crate::topology::ListenerOut> {
    gw.listeners.iter().filter(|l| {
        l.plan.settings.default_deny || !(l.plan.gateway.is_empty() && l.plan.backends.is_empty())
    })
}

/// Istio adds no buffer filter after a WasmPlugin and cannot set `allow_on_headers_stop_iteration`,
/// so on its own the gateway sends a request's headers upstream before the filter has read the
/// body and decided: a denied call would still open a request to the MCP server. This EnvoyFilter
/// (one per Gateway with an enforced listener, `names::hold_output`, owned and deleted like the
/// WasmPlugins) puts Envoy's buffer filter right before the router on each such listener's port,
/// after every AUTHZ-phase Wasm filter, with the limit `render` uses (`render::hold_filter`): the
/// router starts the upstream request only once the whole request passed the filter.
pub fn desired_hold(gw: &GatewayOut, gateway_uid: Option<&str>) -> Option<Desired> {
    let (ns, gateway) = (&gw.gateway.namespace, &gw.gateway.name);
    let mut ports: std::collections::BTreeMap<i32, u32> = std::collections::BTreeMap::new();
    for l in enforced(gw) {
        let limit = ports.entry(l.listener.port).or_default();
        *limit = (*limit).max(l.plan.settings.max_body_bytes);
    }
    if ports.is_empty() {
        return None;
    }
    let patches: Vec<Value> = ports
        .iter()
        .map(|(port, limit)| {
            json!({
                "applyTo": "HTTP_FILTER",
                "match": {
                    "context": "GATEWAY",
                    "listener": {
                        "portNumber": port,
                        "filterChain": {"filter": {
                            "name": "envoy.filters.network.http_connection_manager",
                            "subFilter": {"name": "envoy.filters.http.router"},
                        }},
                    },
                },
                "patch": {"operation": "INSERT_BEFORE", "value": crate::render::hold_filter(*limit)},
            })
        })
        .collect();
    let name = names::hold_output(ns, gateway);
    let metadata = metadata(
        ns,
        &name,
        gateway,
        names::gateway_source(ns, gateway),
        gateway_uid,
    );
    Some(Desired {
        namespace: ns.clone(),
        name,
        gateway: gateway.clone(),
        object: json!({
            "apiVersion": format!("{ENVOY_FILTER_GROUP}/{ENVOY_FILTER_VERSION}"),
            "kind": "EnvoyFilter",
            "metadata": metadata,
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}],
                "configPatches": patches,
            },
        }),
    })
}

/// The plans as ConfigMaps (`--plan-configmaps`), for Envoy deployments without Istio: one per
/// Gateway listener with a policy, `names::plan_configmap`, key `plan.json`.
pub fn desired_configmaps(gw: &GatewayOut, gateway_uid: Option<&str>) -> Vec<Desired> {
    let (ns, gateway) = (&gw.gateway.namespace, &gw.gateway.name);
    enforced(gw)
        .map(|l| {
            let name = names::plan_configmap(ns, gateway, &l.listener.name);
            let metadata = metadata(ns, &name, gateway, names::listener_source(ns, gateway, &l.listener.name), gateway_uid);
            let plan = serde_json::to_string(&l.plan).unwrap_or_default();
            Desired {
                namespace: ns.clone(),
                name,
                gateway: gateway.clone(),
                object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"plan.json": plan}}),
            }
        })
        .collect()
}

/// Whether an object in the cluster already is what `desired` asks for (the fields we own).
pub fn up_to_date(existing: &Value, desired: &Value) -> bool {
    let label = |v: &Value| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get(GATEWAY_LABEL))
            .cloned()
    };
    let source = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(names::SOURCE_ANNOTATION))
            .cloned()
    };
    let owner = |v: &Value| v.pointer("/metadata/ownerReferences/0/uid").cloned();
    existing.get("spec") == desired.get("spec")
        && existing.get("data") == desired.get("data")
        && label(existing) == label(desired)
        && source(existing) == source(desired)
        && owner(existing) == owner(desired)
}

/// Whether an object found in the cluster is the controller's: labelled as written by it. Such an
/// object is adopted (rewritten, or deleted when nothing wants it); any other is never touched.
pub fn is_managed(object: &Value) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY))
        .and_then(Value::as_str)
        == Some(FIELD_MANAGER)
}

/// The status to write for a policy, or None when the one it has is already it. Conditions whose
/// status and reason did not change keep their `lastTransitionTime` (the topology stamps now).
pub fn status_update(new: &PolicyStatus, existing_status: Option<&Value>) -> Option<Value> {
    let old: Vec<PolicyAncestorStatus> = existing_status
        .and_then(|s| s.get("ancestors"))
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    let mut ancestors = new.ancestors.clone();
    for a in &mut ancestors {
        let Some(before) = old
            .iter()
            .find(|o| o.ancestor_ref == a.ancestor_ref && o.controller_name == a.controller_name)
        else {
            continue;
        };
        for c in &mut a.conditions {
            if let Some(b) = before
                .conditions
                .iter()
                .find(|b| b.condition_type == c.condition_type)
            {
                if b.status == c.status && b.reason == c.reason {
                    c.last_transition_time = b.last_transition_time.clone();
                }
            }
        }
    }
    // Ancestors of other controllers are left alone (server-side apply merges by our field manager).
    let ours: Vec<&PolicyAncestorStatus> = old
        .iter()
        .filter(|o| o.controller_name == crate::topology::CONTROLLER_NAME)
        .collect();
    let unchanged = ours.len() == ancestors.len() && ancestors.iter().all(|a| ours.contains(&a));
    (!unchanged).then(|| json!({"ancestors": ancestors}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_policy::api::{Condition, ParentReference};

    fn status(reason: &str, time: &str) -> PolicyStatus {
        PolicyStatus {
            policy: "default/p".into(),
            ancestors: vec![PolicyAncestorStatus {
                ancestor_ref: ParentReference {
                    name: "gw".into(),
                    ..ParentReference::default()
                },
                controller_name: crate::topology::CONTROLLER_NAME.into(),
                conditions: vec![Condition {
                    condition_type: "Accepted".into(),
                    status: if reason == "Accepted" {
                        "True"
                    } else {
                        "False"
                    }
                    .into(),
                    reason: reason.into(),
                    message: "m".into(),
                    observed_generation: Some(1),
                    last_transition_time: time.into(),
                }],
            }],
        }
    }

    #[test]
    fn plans_as_configmaps() {
        let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\nspec: {gatewayClassName: istio, listeners: [{name: http, port: 8080, protocol: HTTP}, {name: idle, port: 9090, protocol: HTTP}]}\n---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, namespace: ns}\nspec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: http}], action: Allow}\n";
        let inv = crate::model::Inventory::from_yaml(yaml);
        let topo = crate::topology::build(&inv, &crate::topology::TopologyOptions::default());
        let maps = desired_configmaps(&topo.gateways[0], Some("uid-1"));
        assert_eq!(maps.len(), 1, "only the listener with a policy");
        let m = &maps[0];
        assert_eq!(
            (m.namespace.as_str(), m.name.as_str()),
            ("ns", "toolgate-plan-gw-http")
        );
        assert_eq!(m.object["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        let plan = toolgate_policy::eval::Evaluator::load(
            m.object["data"]["plan.json"].as_str().unwrap().as_bytes(),
        )
        .unwrap();
        assert_eq!(plan.plan().listener, "ns/gw/http");
        assert!(up_to_date(&m.object, &m.object));
        let mut changed = m.object.clone();
        changed["data"]["plan.json"] = json!("{}");
        assert!(!up_to_date(&changed, &m.object));
    }

    #[test]
    fn one_envoy_filter_per_gateway_holds_each_enforced_port() {
        let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\nspec: {gatewayClassName: istio, listeners: [{name: a, port: 8080, protocol: HTTP, hostname: a.example}, {name: b, port: 8080, protocol: HTTP, hostname: b.example}, {name: c, port: 8443, protocol: HTTP}, {name: idle, port: 9090, protocol: HTTP}]}\n---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, namespace: ns}\nspec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}, {group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: b}, {group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: c}], action: Allow}\n";
        let inv = crate::model::Inventory::from_yaml(yaml);
        let topo = crate::topology::build(&inv, &crate::topology::TopologyOptions::default());
        let hold = desired_hold(&topo.gateways[0], Some("uid-1"))
            .expect("enforced listeners: an EnvoyFilter");
        assert_eq!(
            (hold.namespace.as_str(), hold.name.as_str()),
            ("ns", "toolgate-gw")
        );
        let o = &hold.object;
        assert_eq!(o["kind"], "EnvoyFilter");
        assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(o["spec"]["targetRefs"][0]["name"], "gw");
        let patches = o["spec"]["configPatches"].as_array().unwrap();
        let ports: Vec<i64> = patches
            .iter()
            .map(|p| p["match"]["listener"]["portNumber"].as_i64().unwrap())
            .collect();
        assert_eq!(
            ports,
            vec![8080, 8443],
            "one patch per enforced port, none for the idle listener"
        );
        for p in patches {
            assert_eq!(p["match"]["context"], "GATEWAY");
            assert_eq!(
                p["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"],
                "envoy.filters.http.router"
            );
            assert_eq!(p["patch"]["operation"], "INSERT_BEFORE");
            assert_eq!(
                p["patch"]["value"],
                crate::render::hold_filter(toolgate_policy::plan::DEFAULT_MAX_BODY_BYTES)
            );
        }
    }

    /// A Gateway name of 64 characters or more made the API server refuse the outputs (a label value
    /// over 63): names and label values are bounded, the full names are in the annotation.
    #[test]
    fn a_long_gateway_name_gives_outputs_the_api_server_takes() {
        let gw = format!("mcp-{}", "x".repeat(240));
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gw}, namespace: ns}}\n\
            spec: {{gatewayClassName: istio, listeners: [{{name: http, port: 8080, protocol: HTTP}}]}}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: p, namespace: ns}}\n\
            spec: {{targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {gw}}}], action: Allow}}\n"
        );
        let topo = crate::topology::build(
            &crate::model::Inventory::from_yaml(&yaml),
            &crate::topology::TopologyOptions::default(),
        );
        let module = Module {
            url: "oci://m".into(),
            ..Module::default()
        };
        let g = &topo.gateways[0];
        let mut all = desired(g, None, &module, OutputKind::Wasmplugin);
        all.extend(desired_hold(g, None));
        all.extend(desired_configmaps(g, None));
        assert_eq!(all.len(), 3);
        for d in &all {
            let m = &d.object["metadata"];
            assert!(
                d.name.len() <= names::MAX_LEN && m["name"] == d.name.as_str(),
                "{}",
                d.name
            );
            for value in m["labels"].as_object().unwrap().values() {
                assert!(value.as_str().unwrap().len() <= 63, "{value}");
            }
            let source = m["annotations"][names::SOURCE_ANNOTATION].as_str().unwrap();
            assert!(source.starts_with(&format!("ns/{gw}")), "{source}");
            assert_eq!(d.gateway, gw);
            assert!(is_managed(&d.object));
        }
        assert_eq!(
            all[0].object["spec"]["targetRefs"][0]["name"],
            gw.as_str(),
            "the Gateway by its full name"
        );
        let mut renamed = all[0].object.clone();
        renamed["metadata"]["annotations"][names::SOURCE_ANNOTATION] = json!("ns/other/http");
        assert!(
            !up_to_date(&renamed, &all[0].object),
            "the annotation is kept current"
        );
    }

    /// The chart's `filter.pullSecret`/`filter.pullPolicy` reach Istio's agent, in both output kinds.
    #[test]
    fn the_pull_secret_and_policy_go_with_the_module() {
        let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\n\
            spec: {gatewayClassName: istio, listeners: [{name: http, port: 8080, protocol: HTTP}]}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: p, namespace: ns}\n\
            spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}], action: Allow}\n";
        let topo = crate::topology::build(
            &crate::model::Inventory::from_yaml(yaml),
            &crate::topology::TopologyOptions::default(),
        );
        let g = &topo.gateways[0];
        let bare = Module {
            url: "oci://r/f@sha256:00".into(),
            ..Module::default()
        };
        let spec = &desired(g, None, &bare, OutputKind::Wasmplugin)[0].object["spec"];
        assert!(spec.get("imagePullSecret").is_none() && spec.get("imagePullPolicy").is_none());
        let module = Module {
            pull_secret: Some("regcred".into()),
            pull_policy: Some(PullPolicy::Always),
            ..bare
        };
        let plugin = &desired(g, None, &module, OutputKind::Wasmplugin)[0].object["spec"];
        let extension = &desired(g, None, &module, OutputKind::Trafficextension)[0].object["spec"];
        for wasm in [plugin, &extension["wasm"]] {
            assert_eq!(wasm["imagePullSecret"], "regcred");
            assert_eq!(wasm["imagePullPolicy"], "Always");
        }
    }

    #[test]
    fn status_is_written_only_when_it_changes_and_keeps_transition_times() {
        let first = status("Accepted", "2026-01-01T00:00:00Z");
        let written = status_update(&first, None).expect("no status yet: write");
        // The same status computed later (a new "now"): nothing to write.
        let later = status("Accepted", "2026-02-02T00:00:00Z");
        assert_eq!(status_update(&later, Some(&written)), None);
        // Another reason: written, with the new time.
        let changed = status("TargetNotFound", "2026-03-03T00:00:00Z");
        let update = status_update(&changed, Some(&written)).unwrap();
        assert_eq!(
            update
                .pointer("/ancestors/0/conditions/0/lastTransitionTime")
                .unwrap(),
            "2026-03-03T00:00:00Z"
        );
        // A new message but the same status and reason: written, the old time kept.
        let mut message = status("Accepted", "2026-04-04T00:00:00Z");
        message.ancestors[0].conditions[0].message = "other".into();
        let update = status_update(&message, Some(&written)).unwrap();
        assert_eq!(
            update
                .pointer("/ancestors/0/conditions/0/lastTransitionTime")
                .unwrap(),
            "2026-01-01T00:00:00Z"
        );
    }
}
