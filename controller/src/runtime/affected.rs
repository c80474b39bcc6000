//! GEP-713's condition on the objects a policy targets ("Target object status"): every Gateway and
//! XBackend that an XAccessPolicy targets carries `toolgate.dev/XAccessPolicyAffected` (the GEP's
//! `<domain>/<policy kind>Affected`) in its `status.conditions`, with the object's
//! `metadata.generation` as `observedGeneration`:
//!
//! - `True`/`Programmed`: an enforced policy targeting it is Programmed (every output carrying it is written);
//! - `True`/`DryRun`: the policies programmed here are all in dry-run (nothing they say is enforced);
//! - `False`/`OutputConflict`: an output of this Gateway (or one carrying a policy on this XBackend)
//!   is not written because an object the controller does not own has its name (`write`); put first,
//!   since traffic the output would check passes unchecked. A Gateway gets it even when only
//!   XBackend policies reach it;
//! - `False`/`Reconciling`: policies are accepted here but none is Programmed yet (an output is
//!   pending or failed to write);
//! - `False`/`NotAccepted`: no policy targeting it is accepted (conflicts, limits, invalid specs).
//!
//! The message names each policy with its state (and the listener, for `sectionName`; the condition
//! is on the Gateway's own conditions, since a listener's status entry has fields only the Gateway's
//! controller can fill). Written with server-side apply under its own field manager
//! (`toolgate-target-status`, not the policy status's `toolgate`): the conditions list is a map
//! keyed by `type`, so the apply owns only this entry and never touches another controller's
//! conditions. When no policy targets the object any more, an apply without the entry removes it
//! (server-side apply removes the fields a manager stops applying and no other manager owns).

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::Store;
use serde_json::{json, Value};
use toolgate_policy::api::Condition;

use super::programmed::{self, OUTPUT_CONFLICT, PROGRAMMED, RECONCILING};
use crate::topology::PolicyStatus;

pub const AFFECTED: &str = "toolgate.dev/XAccessPolicyAffected";
/// The field manager of the target conditions (the policy status's is `output::FIELD_MANAGER`).
pub const FIELD_MANAGER: &str = "toolgate-target-status";
/// How many policies the message names (the rest are counted): the message stays far below the
/// 32768 characters a condition's message may have.
const MAX_NAMED: usize = 20;

/// A kind of object policies target, as the controller watches it.
pub struct TargetKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

pub const GATEWAY: TargetKind = TargetKind {
    group: "gateway.networking.k8s.io",
    version: "v1",
    kind: "Gateway",
    plural: "gateways",
};
pub const XBACKEND: TargetKind = TargetKind {
    group: "agentic.networking.x-k8s.io",
    version: "v0alpha0",
    kind: "XBackend",
    plural: "xbackends",
};

impl TargetKind {
    pub fn api(&self) -> ApiResource {
        super::gvk(self.group, self.version, self.kind, self.plural)
    }
}

/// A target: (kind, namespace, name).
pub type TargetKey = (String, String, String);

/// The outputs of each Gateway, (namespace, name), that an object the controller does not own keeps
/// from being written: "<kind> <ns>/<name>: <what is there>".
pub type Conflicts = BTreeMap<(String, String), Vec<String>>;

enum State {
    Enforced,
    DryRun,
    Pending,
    Conflict,
    NotAccepted(String),
}

/// The condition each targeted object should have (`observedGeneration` unset: the object's
/// generation is set by `update`). Policies and ancestors come from the topology's statuses with
/// their Programmed conditions added; `conflicts` are the Gateways' outputs not written because their
/// names are taken.
pub fn conditions(
    statuses: &[PolicyStatus],
    conflicts: &Conflicts,
    now: &str,
) -> BTreeMap<TargetKey, Condition> {
    let mut by_target: BTreeMap<TargetKey, Vec<(String, State)>> = BTreeMap::new();
    for (ns, gateway) in conflicts.keys() {
        by_target
            .entry((GATEWAY.kind.to_string(), ns.clone(), gateway.clone()))
            .or_default();
    }
    for s in statuses {
        let policy_ns = s.policy.split_once('/').map_or("", |(ns, _)| ns);
        for a in &s.ancestors {
            let r = &a.ancestor_ref;
            let kind = match (r.group.as_deref(), r.kind.as_deref()) {
                (Some(g), Some(k)) if g == GATEWAY.group && k == GATEWAY.kind => GATEWAY.kind,
                (Some(g), Some(k)) if g == XBACKEND.group && k == XBACKEND.kind => XBACKEND.kind,
                _ => continue,
            };
            let ns = r.namespace.as_deref().unwrap_or(policy_ns);
            let find = |t: &str| a.conditions.iter().find(|c| c.condition_type == t);
            let state = match (find("Accepted"), find(PROGRAMMED)) {
                (Some(acc), Some(p)) if acc.status == "True" && p.reason == OUTPUT_CONFLICT => {
                    State::Conflict
                }
                (Some(acc), Some(p)) if acc.status == "True" && p.status == "True" => {
                    if programmed::is_dry_run(acc) {
                        State::DryRun
                    } else {
                        State::Enforced
                    }
                }
                (Some(acc), _) if acc.status == "True" => State::Pending,
                (acc, _) => State::NotAccepted(
                    acc.map_or_else(|| "no Accepted condition".into(), |c| c.reason.clone()),
                ),
            };
            let who = match &r.section_name {
                Some(l) => format!("{} (listener {l})", s.policy),
                None => s.policy.clone(),
            };
            by_target
                .entry((kind.to_string(), ns.to_string(), r.name.clone()))
                .or_default()
                .push((who, state));
        }
    }
    by_target
        .into_iter()
        .map(|(key, policies)| {
            let condition = target_condition(&key, policies, conflicts, now);
            (key, condition)
        })
        .collect()
}

/// The condition of one target from the states of the policies on it (and its taken names).
fn target_condition(
    key: &TargetKey,
    mut policies: Vec<(String, State)>,
    conflicts: &Conflicts,
    now: &str,
) -> Condition {
    policies.sort_by(|a, b| a.0.cmp(&b.0));
    let any = |f: fn(&State) -> bool| policies.iter().any(|(_, s)| f(s));
    let taken = if key.0 == GATEWAY.kind {
        conflicts.get(&(key.1.clone(), key.2.clone()))
    } else {
        None
    };
    let (status, reason) = if taken.is_some() || any(|s| matches!(s, State::Conflict)) {
        ("False", OUTPUT_CONFLICT)
    } else if any(|s| matches!(s, State::Enforced)) {
        ("True", PROGRAMMED)
    } else if any(|s| matches!(s, State::DryRun)) {
        ("True", "DryRun")
    } else if any(|s| matches!(s, State::Pending)) {
        ("False", RECONCILING)
    } else {
        ("False", "NotAccepted")
    };
    let mut named: Vec<String> = policies
        .iter()
        .take(MAX_NAMED)
        .map(|(who, s)| match s {
            State::Enforced => format!("{who}: enforced"),
            State::DryRun => format!("{who}: in dry-run (not enforced)"),
            State::Pending => format!("{who}: accepted, not Programmed yet"),
            State::Conflict => {
                format!("{who}: accepted, not Programmed (an output's name is taken)")
            }
            State::NotAccepted(reason) => format!("{who}: not accepted ({reason})"),
        })
        .collect();
    if policies.len() > MAX_NAMED {
        named.push(format!("and {} more", policies.len() - MAX_NAMED));
    }
    let mut message = taken.map_or_else(String::new, |t| {
        let more = t.len().saturating_sub(MAX_NAMED);
        let listed: Vec<&str> = t.iter().take(MAX_NAMED).map(String::as_str).collect();
        let more = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        format!(
            "outputs not written, their names taken: {}{more}",
            listed.join("; ")
        )
    });
    if !named.is_empty() {
        if !message.is_empty() {
            message.push_str(". ");
        }
        message.push_str(&format!("XAccessPolicy {}", named.join("; ")));
    }
    Condition {
        condition_type: AFFECTED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: None,
        last_transition_time: now.to_string(),
    }
}

/// What to apply to an object whose `status` is `existing` (its generation `generation`): the
/// condition to write (`Some(Some(c))`, keeping its `lastTransitionTime` when status and reason did
/// not change), its removal (`Some(None)`), or nothing (`None`: it has what it should).
pub fn update(
    condition_type: &str,
    desired: Option<&Condition>,
    existing: Option<&Value>,
    generation: Option<i64>,
) -> Option<Option<Condition>> {
    let current: Option<Condition> = existing
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(condition_type))
        })
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    match (desired, current) {
        (None, None) => None,
        (None, Some(_)) => Some(None),
        (Some(d), current) => {
            let mut want = Condition {
                observed_generation: generation,
                ..d.clone()
            };
            if let Some(c) = &current {
                if c.status == want.status && c.reason == want.reason {
                    want.last_transition_time = c.last_transition_time.clone();
                }
            }
            (current.as_ref() != Some(&want)).then_some(Some(want))
        }
    }
}

/// Writes the target conditions of one pass on the Gateways and XBackends that exist (in the
/// controller's caches); returns the writes made and the first error (the pass goes on).
pub(super) async fn sync(
    ctx: &super::Context,
    w: &super::Watched,
    statuses: &[PolicyStatus],
    conflicts: &Conflicts,
    now: &str,
) -> (usize, Option<String>) {
    let mut desired = conditions(statuses, conflicts, now);
    let (mut writes, mut error) = (0, None);
    for (target, store) in [(&GATEWAY, &w.gateways), (&XBACKEND, &w.backends)] {
        let of_kind = desired
            .extract_if(.., |(kind, _, _), _| kind == target.kind)
            .map(|((_, ns, name), c)| ((ns, name), c))
            .collect();
        let (n, e) = sync_condition(ctx, target, store, AFFECTED, FIELD_MANAGER, &of_kind).await;
        writes += n;
        error = error.or(e);
    }
    (writes, error)
}

/// Applies one condition type (under its own field manager) to every object of `store`: the
/// condition `desired` has for it, else none (an apply without it removes it). Returns the writes
/// and the first error.
pub(super) async fn sync_condition(
    ctx: &super::Context,
    target: &TargetKind,
    store: &Store<DynamicObject>,
    condition_type: &str,
    field_manager: &str,
    desired: &BTreeMap<(String, String), Condition>,
) -> (usize, Option<String>) {
    let apply = PatchParams::apply(field_manager).force();
    let api_resource = target.api();
    let (mut writes, mut error) = (0, None);
    for obj in store.state() {
        let (Some(ns), Some(name)) = (
            obj.metadata.namespace.as_deref(),
            obj.metadata.name.as_deref(),
        ) else {
            continue;
        };
        let key = (
            format!("{}/status {condition_type}", target.kind),
            ns.to_string(),
            name.to_string(),
        );
        let wanted = desired.get(&(ns.to_string(), name.to_string()));
        let Some(change) = update(
            condition_type,
            wanted,
            obj.data.get("status"),
            obj.metadata.generation,
        ) else {
            ctx.written.clear(&key);
            continue;
        };
        let content = change.as_ref().map(|c| Condition {
            last_transition_time: String::new(),
            ..c.clone()
        });
        let content = serde_json::to_value(content).unwrap_or(Value::Null);
        if ctx
            .written
            .pending(&key, &content, obj.metadata.resource_version.as_deref())
        {
            continue;
        }
        let mut patch = json!({
            "apiVersion": format!("{}/{}", target.group, target.version),
            "kind": target.kind,
            "metadata": {"name": name, "namespace": ns},
        });
        if let Some(c) = &change {
            patch["status"] = json!({"conditions": [c]});
        }
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &api_resource);
        match api.patch_status(name, &apply, &Patch::Apply(&patch)).await {
            Ok(_) => {
                ctx.written
                    .record(key, content, obj.metadata.resource_version.clone());
                tracing::info!(kind = %target.kind, namespace = %ns, name = %name, "{condition_type} {}",
                    change.as_ref().map_or("removed", |c| c.status.as_str()));
                writes += 1;
            }
            Err(e) => {
                tracing::warn!(kind = %target.kind, namespace = %ns, name = %name, "writing {condition_type} failed: {e}");
                error.get_or_insert_with(|| format!("{}/status {ns}/{name}: {e}", target.kind));
            }
        }
    }
    (writes, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(extra: &str) -> crate::topology::Topology {
        let yaml = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: ns}}\n\
            spec: {{gatewayClassName: istio, listeners: [{{name: a, port: 8080, protocol: HTTP}}]}}\n---\n\
            apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: ns}}\n\
            spec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: mcp, port: 8080}}]}}]}}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {{name: tools, namespace: ns}}\n\
            spec: {{mcp: {{serviceName: mcp, port: 8080}}}}\n---\n{extra}"
        );
        let istio = toolgate_policy::compile::ClusterNaming::Istio {
            cluster_domain: "cluster.local".into(),
        };
        crate::topology::topology_of(&yaml, istio)
    }

    fn policy(name: &str, target: &str, annotations: &str) -> String {
        let target = match target {
            "tools" => {
                "{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}".to_string()
            }
            "gw/a" => "{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: a}"
                .to_string(),
            other => format!("{{group: gateway.networking.k8s.io, kind: Gateway, name: {other}}}"),
        };
        format!(
            "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n\
            metadata: {{name: {name}, namespace: ns, annotations: {{{annotations}}}}}\n\
            spec: {{targetRefs: [{target}], action: Allow}}\n---\n"
        )
    }

    /// The target conditions of a pass whose writes are all current except those `failing` names.
    fn pass(extra: &str, failing: &str) -> BTreeMap<TargetKey, Condition> {
        pass_with(
            extra,
            failing,
            programmed::Failure::Refused("forbidden".into()),
            &Conflicts::new(),
        )
    }

    fn pass_with(
        extra: &str,
        failing: &str,
        failure: programmed::Failure,
        conflicts: &Conflicts,
    ) -> BTreeMap<TargetKey, Condition> {
        let topo = topology(extra);
        let carriers = programmed::Carriers::of(&topo, "WasmPlugin", "EnvoyFilter", false);
        let mut statuses = topo.statuses.clone();
        for s in &mut statuses {
            carriers.add_programmed(
                s,
                |k| {
                    if !failing.is_empty() && k.2 == failing {
                        Err(failure.clone())
                    } else {
                        Ok(())
                    }
                },
                "t",
            );
        }
        conditions(&statuses, conflicts, "t")
    }

    fn key(kind: &str, name: &str) -> TargetKey {
        (kind.into(), "ns".into(), name.into())
    }

    fn summary(c: &Condition) -> (&str, &str) {
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn each_target_says_which_policies_affect_it() {
        let all = pass(
            &(policy("on-gw", "gw", "")
                + &policy("on-listener", "gw/a", "")
                + &policy("shadow", "tools", "toolgate.dev/dry-run: 'true'")),
            "",
        );
        assert_eq!(all.len(), 2, "{all:?}");
        let gw = &all[&key("Gateway", "gw")];
        assert_eq!(
            (gw.condition_type.as_str(), summary(gw)),
            (AFFECTED, ("True", PROGRAMMED))
        );
        assert_eq!(
            gw.message,
            "XAccessPolicy ns/on-gw: enforced; ns/on-listener (listener a): enforced"
        );
        let tools = &all[&key("XBackend", "tools")];
        assert_eq!(summary(tools), ("True", "DryRun"));
        assert_eq!(
            tools.message,
            "XAccessPolicy ns/shadow: in dry-run (not enforced)"
        );

        // An output that cannot be written: accepted, not Programmed.
        let failed = pass(&policy("on-gw", "gw", ""), "toolgate-gw");
        let gw = &failed[&key("Gateway", "gw")];
        assert_eq!(summary(gw), ("False", RECONCILING));
        assert!(
            gw.message
                .contains("ns/on-gw: accepted, not Programmed yet"),
            "{}",
            gw.message
        );

        // Only a policy the Gateway does not accept (its target does not exist is another matter:
        // no object, nothing written).
        let invalid = "apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n\
            metadata: {name: bad, namespace: ns}\nspec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}], \
            action: ExternalAuth}\n---\n";
        let rejected = pass(invalid, "");
        let gw = &rejected[&key("Gateway", "gw")];
        assert_eq!(summary(gw), ("False", "NotAccepted"), "{gw:?}");
        assert!(
            gw.message
                .starts_with("XAccessPolicy ns/bad: not accepted ("),
            "{}",
            gw.message
        );

        // No policy: no condition for anything.
        assert!(pass("", "").is_empty());
    }

    #[test]
    fn a_taken_output_name_is_on_the_gateway_and_the_policies() {
        let taken = "WasmPlugin ns/toolgate-gw-a: exists and is not Toolgate's".to_string();
        let conflicts =
            Conflicts::from([(("ns".to_string(), "gw".to_string()), vec![taken.clone()])]);
        let conflict = programmed::Failure::Conflict("exists and is not Toolgate's".into());
        let all = pass_with(
            &(policy("on-gw", "gw", "") + &policy("on-tools", "tools", "")),
            "toolgate-gw-a",
            conflict,
            &conflicts,
        );
        let gw = &all[&key("Gateway", "gw")];
        assert_eq!(summary(gw), ("False", OUTPUT_CONFLICT));
        assert!(
            gw.message.starts_with(&format!(
                "outputs not written, their names taken: {taken}. XAccessPolicy "
            )),
            "{}",
            gw.message
        );
        assert!(
            gw.message
                .contains("ns/on-gw: accepted, not Programmed (an output's name is taken)"),
            "{}",
            gw.message
        );
        let tools = &all[&key("XBackend", "tools")];
        assert_eq!(
            summary(tools),
            ("False", OUTPUT_CONFLICT),
            "{}",
            tools.message
        );

        // A Gateway whose outputs only XBackend policies bring still says so.
        let only = pass_with(
            &policy("on-tools", "tools", ""),
            "toolgate-gw-a",
            programmed::Failure::Conflict("x".into()),
            &conflicts,
        );
        let gw = &only[&key("Gateway", "gw")];
        assert_eq!(
            (summary(gw), gw.message.as_str()),
            (
                ("False", OUTPUT_CONFLICT),
                format!("outputs not written, their names taken: {taken}").as_str()
            )
        );
    }

    #[test]
    fn an_update_only_when_the_condition_changes() {
        let all = pass(&policy("on-gw", "gw", ""), "");
        let want = &all[&key("Gateway", "gw")];
        let theirs = json!({"type": "Programmed", "status": "True", "reason": "Programmed", "message": "istio",
            "lastTransitionTime": "2026-01-01T00:00:00Z"});

        // Missing: written, with the object's generation.
        let status = json!({"conditions": [theirs]});
        let Some(Some(c)) = update(AFFECTED, Some(want), Some(&status), Some(3)) else {
            panic!("no write")
        };
        assert_eq!(
            (c.observed_generation, c.last_transition_time.as_str()),
            (Some(3), "t")
        );

        // Present and the same (another time stamp, as a later pass has): nothing to do.
        let written = serde_json::to_value(Condition {
            last_transition_time: "2026-01-02T00:00:00Z".into(),
            ..c.clone()
        })
        .unwrap();
        let status = json!({"conditions": [theirs, written]});
        assert_eq!(update(AFFECTED, Some(want), Some(&status), Some(3)), None);

        // The object's spec changed (a new generation): written again, the transition time kept.
        let Some(Some(c)) = update(AFFECTED, Some(want), Some(&status), Some(4)) else {
            panic!("no write")
        };
        assert_eq!(
            (c.observed_generation, c.last_transition_time.as_str()),
            (Some(4), "2026-01-02T00:00:00Z")
        );

        // Its status changed: a new transition time.
        let pending = Condition {
            status: "False".into(),
            reason: RECONCILING.into(),
            ..want.clone()
        };
        let Some(Some(c)) = update(AFFECTED, Some(&pending), Some(&status), Some(3)) else {
            panic!("no write")
        };
        assert_eq!(c.last_transition_time, "t");

        // No policy targets it any more: removed; never there: nothing.
        assert_eq!(update(AFFECTED, None, Some(&status), Some(3)), Some(None));
        assert_eq!(
            update(
                AFFECTED,
                None,
                Some(&json!({"conditions": [theirs]})),
                Some(3)
            ),
            None
        );
        assert_eq!(update(AFFECTED, None, None, None), None);
    }
}
