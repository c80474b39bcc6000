//! GEP-713's `Programmed` policy condition: per ancestor of an accepted policy, whether every output
//! that carries the policy to a gateway is written and current.
//!
//! The outputs that carry a policy are read off the topology: a Gateway ancestor (optionally one
//! listener, `sectionName`) is carried by the WasmPlugins of that Gateway's enforced listeners and by
//! its EnvoyFilter (without which a denial is not complete); an XBackend ancestor by the WasmPlugins
//! of every listener whose plan has its backend level, and their Gateways' EnvoyFilters (with
//! `--plan-configmaps`, also each such listener's plan ConfigMap). The runtime says, for each
//! output, whether this pass left it current (or has it in flight), or did not write it: the API
//! server refused (the error), or an object of its name exists that the controller does not own
//! (`write`). `True`/`Programmed` needs every carrier written and current; else it is
//! `False`/`OutputConflict` when a carrier's name is taken, `False`/`Reconciling` otherwise, with the
//! failed writes in the message. An accepted policy that no output carries (an XBackend no route of
//! any Gateway reaches) is not Programmed either.

use std::collections::BTreeMap;

use toolgate_policy::api::Condition;

use super::names;
use crate::topology::{PolicyStatus, Topology};

pub const PROGRAMMED: &str = "Programmed";
pub const RECONCILING: &str = "Reconciling";
/// An output's name is taken by an object the controller does not own: it is not overwritten.
pub const OUTPUT_CONFLICT: &str = "OutputConflict";

/// Whether an `Accepted` condition is a dry-run policy's (the topology says so in its message).
pub fn is_dry_run(accepted: &Condition) -> bool {
    accepted.message.contains("dry-run")
}

/// An output object: (kind, namespace, name).
pub type OutputKey = (String, String, String);

/// What a pass knows of one output: written and current (`Ok`), or why it is not. A pass computes
/// statuses after writing outputs, so an output is never pending then.
pub type Outcome = Result<(), Failure>;

/// Why an output was not written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The API server refused the write (its error).
    Refused(String),
    /// An object of the output's name exists that the controller does not own (what it is).
    Conflict(String),
}

impl Failure {
    pub fn is_conflict(&self) -> bool {
        matches!(self, Failure::Conflict(_))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(e) | Failure::Conflict(e) => f.write_str(e),
        }
    }
}

/// Who carries what: each per-listener output with its Gateway, listener, and the policies of its
/// Gateway level and of each XBackend's level.
#[derive(Clone, Debug, Default)]
pub struct Carriers(Vec<Carrier>);

#[derive(Clone, Debug)]
struct Carrier {
    output: OutputKey,
    /// The Gateway's EnvoyFilter, which every listener output of the Gateway needs.
    hold: OutputKey,
    /// The listener's plan ConfigMap, with `--plan-configmaps`.
    configmap: Option<OutputKey>,
    gateway: (String, String),
    listener: String,
    gateway_level: Vec<String>,
    backend_levels: BTreeMap<(String, String), Vec<String>>,
}

fn names(level: &toolgate_policy::plan::LevelPlan) -> Vec<String> {
    level
        .external_auth
        .iter()
        .map(|e| e.policy.clone())
        .chain(level.allow.iter().map(|p| p.name.clone()))
        .collect()
}

impl Carriers {
    /// `plan_kind` is the kind of the per-listener outputs (WasmPlugin or TrafficExtension),
    /// `hold_kind` the Gateway's EnvoyFilter's; `configmaps`: plans are written as ConfigMaps too.
    pub fn of(topo: &Topology, plan_kind: &str, hold_kind: &str, configmaps: bool) -> Self {
        let mut out = Vec::new();
        for gw in &topo.gateways {
            let (ns, name) = (&gw.gateway.namespace, &gw.gateway.name);
            for l in gw
                .listeners
                .iter()
                .filter(|l| !(l.plan.gateway.is_empty() && l.plan.backends.is_empty()))
            {
                // The listener's own plan (`shared_port` scoping adds no user's policy to it).
                let backend_levels = l
                    .backend_targets
                    .iter()
                    .map(|(target, key)| {
                        (
                            target.clone(),
                            l.plan.backends.get(key).map(names).unwrap_or_default(),
                        )
                    })
                    .collect();
                out.push(Carrier {
                    output: (
                        plan_kind.to_string(),
                        ns.clone(),
                        names::plan_output(ns, name, &l.listener.name),
                    ),
                    hold: (
                        hold_kind.to_string(),
                        ns.clone(),
                        names::hold_output(ns, name),
                    ),
                    configmap: configmaps.then(|| {
                        (
                            "ConfigMap".to_string(),
                            ns.clone(),
                            names::plan_configmap(ns, name, &l.listener.name),
                        )
                    }),
                    gateway: (ns.clone(), name.clone()),
                    listener: l.listener.name.clone(),
                    gateway_level: names(&l.plan.gateway),
                    backend_levels,
                });
            }
        }
        Carriers(out)
    }

    /// The outputs that carry `policy` for one ancestor: the listener outputs, then their Gateways'
    /// EnvoyFilters.
    fn for_ancestor(
        &self,
        policy: &str,
        ns: &str,
        r: &toolgate_policy::api::ParentReference,
    ) -> Vec<OutputKey> {
        let target = (ns.to_string(), r.name.clone());
        let mut outputs: Vec<OutputKey> = Vec::new();
        let mut holds: Vec<OutputKey> = Vec::new();
        for c in &self.0 {
            let carries = if r.kind.as_deref() == Some("Gateway") {
                c.gateway == target
                    && r.section_name.as_deref().is_none_or(|s| s == c.listener)
                    && c.gateway_level.iter().any(|p| p == policy)
            } else {
                c.backend_levels
                    .get(&target)
                    .is_some_and(|ps| ps.iter().any(|p| p == policy))
            };
            if carries {
                outputs.push(c.output.clone());
                outputs.extend(c.configmap.clone());
                if !holds.contains(&c.hold) {
                    holds.push(c.hold.clone());
                }
            }
        }
        outputs.extend(holds);
        outputs
    }

    /// The `Programmed` condition of each accepted ancestor of `status` is added to it (replacing
    /// one it had); ancestors that are not accepted get none.
    pub fn add_programmed(
        &self,
        status: &mut PolicyStatus,
        outcome: impl Fn(&OutputKey) -> Outcome,
        now: &str,
    ) {
        let policy_ns = status
            .policy
            .split_once('/')
            .map_or("", |(ns, _)| ns)
            .to_string();
        for a in &mut status.ancestors {
            a.conditions.retain(|c| c.condition_type != PROGRAMMED);
            let Some(accepted) = a
                .conditions
                .iter()
                .find(|c| c.condition_type == "Accepted" && c.status == "True")
            else {
                continue;
            };
            let (generation, dry_run) = (accepted.observed_generation, is_dry_run(accepted));
            let ns = a
                .ancestor_ref
                .namespace
                .clone()
                .unwrap_or_else(|| policy_ns.clone());
            let carriers = self.for_ancestor(&status.policy, &ns, &a.ancestor_ref);
            let failures: Vec<(&OutputKey, Failure)> = carriers
                .iter()
                .filter_map(|key| outcome(key).err().map(|e| (key, e)))
                .collect();
            let failed: Vec<String> = failures
                .iter()
                .map(|((kind, ns, name), e)| format!("{kind} {ns}/{name}: {e}"))
                .collect();
            let conflict = failures.iter().any(|(_, e)| e.is_conflict());
            let (ok, message) = if carriers.is_empty() {
                (false, "no Gateway listener's routes reach this target, so no output carries the policy".to_string())
            } else if !failed.is_empty() {
                (false, format!("not written: {}", failed.join("; ")))
            } else {
                let outputs: Vec<String> = carriers
                    .iter()
                    .map(|(k, ns, n)| format!("{k} {ns}/{n}"))
                    .collect();
                (
                    true,
                    format!(
                        "{} by {}",
                        if dry_run {
                            "in dry-run (not enforced), carried"
                        } else {
                            "enforced"
                        },
                        outputs.join(", ")
                    ),
                )
            };
            a.conditions.push(Condition {
                condition_type: PROGRAMMED.into(),
                status: if ok { "True" } else { "False" }.into(),
                reason: if ok {
                    PROGRAMMED
                } else if conflict {
                    OUTPUT_CONFLICT
                } else {
                    RECONCILING
                }
                .into(),
                message,
                observed_generation: generation,
                last_transition_time: now.to_string(),
            });
        }
    }
}

/// The outputs not written in a pass, with why.
pub type Failures = BTreeMap<OutputKey, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        let yaml = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: ns}\n\
            spec: {gatewayClassName: istio, listeners: [{name: a, port: 8080, protocol: HTTP}, {name: b, port: 9090, protocol: HTTP}]}\n---\n\
            apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: ns}\n\
            spec: {parentRefs: [{name: gw, sectionName: a}], rules: [{backendRefs: [{name: mcp, port: 8080}]}]}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: tools, namespace: ns}\n\
            spec: {mcp: {serviceName: mcp, port: 8080}}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {name: unrouted, namespace: ns}\n\
            spec: {mcp: {serviceName: nobody, port: 8080}}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: on-b, namespace: ns}\n\
            spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: b}], action: Allow}\n---\n\
            apiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {name: on-tools, namespace: ns}\n\
            spec: {targetRefs: [{group: agentic.networking.x-k8s.io, kind: XBackend, name: tools}, {group: agentic.networking.x-k8s.io, kind: XBackend, name: unrouted}], action: Allow}\n";
        let istio = toolgate_policy::compile::ClusterNaming::Istio {
            cluster_domain: "cluster.local".into(),
        };
        crate::topology::topology_of(yaml, istio)
    }

    fn programmed(status: &PolicyStatus) -> Vec<(String, String, String)> {
        status
            .ancestors
            .iter()
            .map(|a| {
                let c = a
                    .conditions
                    .iter()
                    .find(|c| c.condition_type == PROGRAMMED)
                    .unwrap();
                (c.status.clone(), c.reason.clone(), c.message.clone())
            })
            .collect()
    }

    fn key(kind: &str, name: &str) -> OutputKey {
        (kind.into(), "ns".into(), name.into())
    }

    #[test]
    fn programmed_once_every_carrier_is_current() {
        let topo = topology();
        let carriers = Carriers::of(&topo, "WasmPlugin", "EnvoyFilter", false);
        let status = |name: &str| {
            topo.statuses
                .iter()
                .find(|s| s.policy == format!("ns/{name}"))
                .unwrap()
                .clone()
        };

        let mut on_b = status("on-b");
        carriers.add_programmed(&mut on_b, |_| Ok(()), "t");
        let [(s, r, m)] = programmed(&on_b).try_into().unwrap();
        assert_eq!((s.as_str(), r.as_str()), ("True", PROGRAMMED));
        assert!(
            m.contains("WasmPlugin ns/toolgate-gw-b") && m.contains("EnvoyFilter ns/toolgate-gw"),
            "{m}"
        );
        assert!(
            !m.contains("toolgate-gw-a"),
            "listener a does not carry a policy on b: {m}"
        );

        // The EnvoyFilter's write failed: not programmed, the error named.
        let mut on_b = status("on-b");
        let failing = |k: &OutputKey| {
            if k.0 == "EnvoyFilter" {
                Err(Failure::Refused("forbidden".into()))
            } else {
                Ok(())
            }
        };
        carriers.add_programmed(&mut on_b, failing, "t");
        let [(s, r, m)] = programmed(&on_b).try_into().unwrap();
        assert_eq!((s.as_str(), r.as_str()), ("False", RECONCILING));
        assert!(m.contains("EnvoyFilter ns/toolgate-gw: forbidden"), "{m}");

        // The backend policy: carried by listener a's WasmPlugin (its route reaches `tools`); the
        // unrouted XBackend's ancestor is carried by nothing.
        let mut on_tools = status("on-tools");
        let taken = |k: &OutputKey| {
            if *k == key("WasmPlugin", "toolgate-gw-a") {
                Err(Failure::Conflict("exists and is not Toolgate's".into()))
            } else {
                Ok(())
            }
        };
        carriers.add_programmed(&mut on_tools, taken, "t");
        let [tools, unrouted] = programmed(&on_tools).try_into().unwrap();
        assert_eq!(
            (tools.0.as_str(), tools.1.as_str()),
            ("False", OUTPUT_CONFLICT)
        );
        assert!(
            tools
                .2
                .contains("WasmPlugin ns/toolgate-gw-a: exists and is not Toolgate's"),
            "{}",
            tools.2
        );
        let mut on_tools = status("on-tools");
        carriers.add_programmed(&mut on_tools, |_| Ok(()), "t");
        let [tools, _] = programmed(&on_tools).try_into().unwrap();
        assert_eq!(tools.0, "True");
        assert!(
            tools.2.contains("WasmPlugin ns/toolgate-gw-a") && !tools.2.contains("toolgate-gw-b"),
            "{}",
            tools.2
        );
        assert_eq!(unrouted.0, "False");
        assert!(unrouted.2.contains("no Gateway listener"), "{}", unrouted.2);
    }

    #[test]
    fn plan_configmaps_carry_the_policy_when_written() {
        let topo = topology();
        let carriers = Carriers::of(&topo, "WasmPlugin", "EnvoyFilter", true);
        let mut on_b = topo
            .statuses
            .iter()
            .find(|s| s.policy == "ns/on-b")
            .unwrap()
            .clone();
        carriers.add_programmed(&mut on_b, |_| Ok(()), "t");
        let [(s, _, m)] = programmed(&on_b).try_into().unwrap();
        assert_eq!(s, "True");
        assert!(m.contains("ConfigMap ns/toolgate-plan-gw-b"), "{m}");
        let taken = |k: &OutputKey| {
            if k.0 == "ConfigMap" {
                Err(Failure::Conflict("taken".into()))
            } else {
                Ok(())
            }
        };
        carriers.add_programmed(&mut on_b, taken, "t");
        let [(s, r, m)] = programmed(&on_b).try_into().unwrap();
        assert_eq!((s.as_str(), r.as_str()), ("False", OUTPUT_CONFLICT), "{m}");
    }
}
