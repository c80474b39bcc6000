//! Under Istio, which XBackend's policies judge the requests to an Istio cluster (docs/semantics.md §2,
//! "Tenancy").
//!
//! Istio routes to Services and hosts, never to an XBackend kind: the filter sees the cluster
//! (`outbound|<port>||<host>`) and the plan keys backend levels by it. What a namespace's owner creates
//! must not claim another namespace's cluster, and no input order may decide who does:
//!
//! - a Service's host (`<service>.<namespace>.svc.<cluster domain>`) belongs to its namespace: a
//!   `hostname` XBackend naming it from another namespace is refused (`HostNotOwned`);
//! - of the XBackends of one namespace that name one cluster, the oldest (creationTimestamp, then
//!   name) keys it, and the others are refused (`Conflicted`);
//! - a cluster that XBackends of several namespaces name (an external host belongs to no namespace)
//!   is contested: every one of them is refused (`Conflicted`) and the plan denies every request to
//!   it, so that no namespace's policy, nor its authorizer, judges or sees another's requests.

use std::collections::{BTreeMap, HashMap};

use toolgate_policy::api::BackendSpec;
use toolgate_policy::compile::{istio_cluster, ClusterNaming};
use toolgate_policy::plan::{HttpMatch, LevelPlan, PolicyPlan, RulePlan};

use crate::model::{Inventory, Object};

/// Why an XBackend keys no cluster: the status reason and message of the policies targeting it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct BackendKeys {
    /// The cluster each keying XBackend (`namespace`, `name`) keys.
    keyed: HashMap<(String, String), String>,
    refused: HashMap<(String, String), Refusal>,
    /// Contested clusters, with the XBackends naming them.
    contested: BTreeMap<String, Vec<String>>,
}

/// An XBackend's cluster under Istio naming: the host lower-cased without a final dot, as Istio
/// writes it.
pub fn cluster_of(xb: &Object<BackendSpec>, naming: &ClusterNaming) -> Option<String> {
    let mcp = &xb.spec.mcp;
    let host = match (&mcp.service_name, &mcp.hostname) {
        (Some(service), None) => naming.service_host(&xb.namespace, service),
        (None, Some(host)) => host.trim_end_matches('.').to_ascii_lowercase(),
        _ => return None,
    };
    Some(istio_cluster(&host, mcp.port))
}

/// The namespace a cluster-local Service host belongs to (`<service>.<namespace>.svc.<domain>`).
fn service_namespace<'a>(host: &'a str, naming: &ClusterNaming) -> Option<&'a str> {
    let suffix = naming.service_host("", "");
    // `service_host("", "")` is `..svc.<domain>`: `.svc.<domain>` follows the namespace.
    let rest = host.strip_suffix(&suffix[1..])?;
    let (_service, namespace) = rest.rsplit_once('.')?;
    Some(namespace)
}

impl BackendKeys {
    pub fn new(inv: &Inventory, naming: &ClusterNaming) -> Self {
        let mut keys = BackendKeys::default();
        if matches!(naming, ClusterNaming::Rendered) {
            // `render` names a cluster per XBackend: nothing to share.
            return keys;
        }
        let mut claims: BTreeMap<String, Vec<&Object<BackendSpec>>> = BTreeMap::new();
        for xb in &inv.backends {
            let Some(cluster) = cluster_of(xb, naming) else {
                continue;
            };
            let host = cluster.rsplit("||").next().unwrap_or("");
            if let Some(owner) =
                service_namespace(host, naming).filter(|owner| *owner != xb.namespace)
            {
                keys.refused.insert(
                    (xb.namespace.clone(), xb.name.clone()),
                    Refusal {
                        reason: "HostNotOwned",
                        message: format!(
                            "XBackend {}: hostname {host} is a Service of namespace {owner}; only that namespace's \
                             XBackends can name it",
                            xb.key()
                        ),
                    },
                );
                continue;
            }
            claims.entry(cluster).or_default().push(xb);
        }
        for (cluster, mut claimants) in claims {
            claimants.sort_by(|a, b| {
                (
                    a.creation_timestamp.as_deref().unwrap_or(""),
                    &a.namespace,
                    &a.name,
                )
                    .cmp(&(
                        b.creation_timestamp.as_deref().unwrap_or(""),
                        &b.namespace,
                        &b.name,
                    ))
            });
            claimants.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
            let names: Vec<String> = claimants.iter().map(|x| x.key()).collect();
            let one_namespace = claimants
                .iter()
                .all(|x| x.namespace == claimants[0].namespace);
            for (i, xb) in claimants.iter().enumerate() {
                let id = (xb.namespace.clone(), xb.name.clone());
                if one_namespace && i == 0 {
                    keys.keyed.insert(id, cluster.clone());
                } else if one_namespace {
                    let message = format!(
                        "XBackend {} names {cluster}, which the older XBackend {} keys",
                        xb.key(),
                        claimants[0].key()
                    );
                    keys.refused.insert(
                        id,
                        Refusal {
                            reason: "Conflicted",
                            message,
                        },
                    );
                } else {
                    let message = format!(
                        "XBackends of several namespaces name {cluster} ({}): none of them keys it, and every request \
                         to it is denied",
                        names.join(", ")
                    );
                    keys.refused.insert(
                        id,
                        Refusal {
                            reason: "Conflicted",
                            message,
                        },
                    );
                }
            }
            if !one_namespace {
                keys.contested.insert(cluster, names);
            }
        }
        keys
    }

    pub fn refusal(&self, namespace: &str, name: &str) -> Option<&Refusal> {
        self.refused.get(&(namespace.to_string(), name.to_string()))
    }

    /// The cluster this XBackend keys, if it keys one.
    pub fn key(&self, namespace: &str, name: &str) -> Option<&str> {
        self.keyed
            .get(&(namespace.to_string(), name.to_string()))
            .map(String::as_str)
    }

    /// The contested cluster this XBackend names, if any.
    pub fn contested_cluster(
        &self,
        xb: &Object<BackendSpec>,
        naming: &ClusterNaming,
    ) -> Option<String> {
        cluster_of(xb, naming).filter(|c| self.contested.contains_key(c))
    }

    /// The level that denies every request to a contested cluster, naming why.
    pub fn contested_level(&self, cluster: &str) -> LevelPlan {
        let names = self
            .contested
            .get(cluster)
            .map(|n| n.join(", "))
            .unwrap_or_default();
        LevelPlan {
            allow: vec![PolicyPlan {
                name: format!("(contested: {names})"),
                // A request's port is its listener's, never 0: the rule matches no request.
                rules: vec![RulePlan {
                    name: "(no request: XBackends of several namespaces name this cluster)".into(),
                    http: HttpMatch {
                        ports: vec![0],
                        ..HttpMatch::default()
                    },
                    ..RulePlan::default()
                }],
                dry_run: false,
            }],
            ..LevelPlan::default()
        }
    }
}
