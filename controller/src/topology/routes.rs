//! HTTPRoutes attached to a listener, and where their backendRefs send traffic: Services,
//! XBackends and Istio's `Hostname` kind, resolved with Gateway API's attachment and ReferenceGrant
//! rules (docs/semantics.md §2, §7).

use std::collections::{HashMap, HashSet};

use gateway_api::apis::standard::httproutes::HttpRouteRulesFiltersType;
use toolgate_policy::api::{BackendSpec, GATEWAY_GROUP};
use toolgate_policy::compile::{istio_cluster, ClusterNaming};

use super::{backend_keys, BackendTarget, RouteOut, RouteRuleOut, Upstream};
use crate::grants;
use crate::model::{self, BackendRef, GatewaySpec, Inventory, Listener, Object};

/// XBackends by namespace and name, for policies and routes that name thousands of them. Of
/// duplicates, the first in input order.
pub(super) struct XBackends<'a>(HashMap<(&'a str, &'a str), &'a Object<BackendSpec>>);

impl<'a> XBackends<'a> {
    pub(super) fn new(inv: &'a Inventory) -> Self {
        let mut map = HashMap::with_capacity(inv.backends.len());
        for b in &inv.backends {
            map.entry((b.namespace.as_str(), b.name.as_str()))
                .or_insert(b);
        }
        XBackends(map)
    }

    pub(super) fn get(&self, namespace: &str, name: &str) -> Option<&'a Object<BackendSpec>> {
        self.0.get(&(namespace, name)).copied()
    }
}

/// HTTPRoutes attached to a listener, with their backends resolved to upstreams.
pub(super) fn attached_routes(
    inv: &Inventory,
    xbackends: &XBackends<'_>,
    gw: &Object<GatewaySpec>,
    listener: &Listener,
    naming: &ClusterNaming,
    warnings: &mut Vec<String>,
    errors: &mut Vec<String>,
) -> Vec<RouteOut> {
    let mut routes: Vec<&Object<_>> = inv
        .routes
        .iter()
        .filter(|route| {
            route.spec.parent_refs.iter().flatten().any(|p| {
                p.group.as_deref().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP
                    && p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
                    && p.name == gw.name
                    && p.namespace.as_deref().unwrap_or(&route.namespace) == gw.namespace
                    && p.section_name.as_deref().is_none_or(|s| s == listener.name)
                    && p.port.is_none_or(|port| port == listener.port)
            }) && match model::admits_routes_from(
                listener,
                &gw.namespace,
                &route.namespace,
                &inv.namespaces,
            ) {
                Ok(admitted) => admitted,
                Err(e) => {
                    // Undecided: counted as attached, so that its backends' policies are in the plan
                    // (under Istio that only adds enforcement); the CLI fails on the error instead.
                    errors.push(format!(
                        "Gateway {} listener {}: HTTPRoute {}: {e}",
                        gw.key(),
                        listener.name,
                        route.key()
                    ));
                    true
                }
            }
        })
        .collect();
    // Gateway API precedence between routes: oldest first, then namespace/name.
    routes.sort_by(|a, b| {
        a.creation_timestamp
            .as_deref()
            .unwrap_or("")
            .cmp(b.creation_timestamp.as_deref().unwrap_or(""))
            .then(a.key().cmp(&b.key()))
    });
    routes
        .into_iter()
        .map(|route| RouteOut {
            name: route.key(),
            hostnames: route.spec.hostnames.clone().unwrap_or_default(),
            rules: route
                .spec
                .rules
                .iter()
                .flatten()
                .map(|rule| RouteRuleOut {
                    matches: rule.matches.clone().unwrap_or_default(),
                    rewrite: rule
                        .filters
                        .iter()
                        .flatten()
                        .find(|f| f.r#type == HttpRouteRulesFiltersType::UrlRewrite)
                        .and_then(|f| f.url_rewrite.clone()),
                    timeout: rule
                        .timeouts
                        .as_ref()
                        .and_then(|t| t.request.clone().or_else(|| t.backend_request.clone())),
                    backends: rule
                        .backend_refs
                        .iter()
                        .flatten()
                        .filter_map(|b| {
                            match resolve_backend(inv, xbackends, naming, &route.namespace, b) {
                                // Weights are checked not to be negative on reading.
                                Ok(u) => Some((
                                    u,
                                    b.weight.and_then(|w| u32::try_from(w).ok()).unwrap_or(1),
                                )),
                                Err(e) => {
                                    warnings.push(format!("HTTPRoute {}: {e}", route.key()));
                                    None
                                }
                            }
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// The XBackends a listener's routes can send traffic to: those they name, those naming a Service
/// they name (in the Service's namespace, any port: the plan's key carries the XBackend's), and those
/// naming a host they name (Istio's `Hostname` kind); and with each, every XBackend naming the same
/// cluster, so that whichever of them keys it (`BackendKeys`) is in the plan.
pub(super) fn reachable_xbackends<'a>(
    inv: &'a Inventory,
    routes: &[RouteOut],
    naming: &ClusterNaming,
) -> Vec<&'a Object<BackendSpec>> {
    let upstreams: Vec<&Upstream> = routes
        .iter()
        .flat_map(|r| &r.rules)
        .flat_map(|r| &r.backends)
        .map(|(u, _)| u)
        .collect();
    let clusters: Vec<Option<String>> = inv
        .backends
        .iter()
        .map(|xb| backend_keys::cluster_of(xb, naming))
        .collect();
    let named: Vec<bool> = inv
        .backends
        .iter()
        .zip(&clusters)
        .map(|(xb, cluster)| {
            upstreams.iter().any(|u| match u {
                Upstream::XBackend {
                    namespace, name, ..
                } => namespace == &xb.namespace && name == &xb.name,
                Upstream::Service {
                    namespace, name, ..
                } => {
                    namespace == &xb.namespace
                        && xb.spec.mcp.service_name.as_deref() == Some(name.as_str())
                }
                Upstream::Host { host, port } => {
                    cluster.as_deref() == Some(istio_cluster(host, *port).as_str())
                }
            })
        })
        .collect();
    let reached: HashSet<&str> = clusters
        .iter()
        .zip(&named)
        .filter(|(_, n)| **n)
        .filter_map(|(c, _)| c.as_deref())
        .collect();
    inv.backends
        .iter()
        .zip(clusters.iter().zip(&named))
        .filter(|(_, (cluster, named))| {
            **named || cluster.as_deref().is_some_and(|c| reached.contains(c))
        })
        .map(|(xb, _)| xb)
        .collect()
}

/// Istio's backendRef kind for a host it knows (`name` is the host).
const ISTIO_HOSTNAME: (&str, &str) = ("networking.istio.io", "Hostname");

fn resolve_backend(
    inv: &Inventory,
    xbackends: &XBackends<'_>,
    naming: &ClusterNaming,
    route_ns: &str,
    b: &BackendRef,
) -> Result<Upstream, String> {
    let namespace = b.namespace.clone().unwrap_or_else(|| route_ns.to_string());
    let kind = if model::is_xbackend(b) {
        grants::XBACKEND
    } else {
        grants::SERVICE
    };
    if (model::is_xbackend(b) || model::is_service(b))
        && !grants::permits(inv, grants::HTTP_ROUTE, route_ns, kind, &namespace, &b.name)
    {
        return Err(format!(
            "backendRef: {}",
            grants::not_permitted(grants::HTTP_ROUTE, route_ns, kind, &namespace, &b.name)
        ));
    }
    if model::is_xbackend(b) {
        let xb = xbackends
            .get(&namespace, &b.name)
            .ok_or_else(|| format!("backendRef XBackend {namespace}/{} not found", b.name))?;
        let mcp = &xb.spec.mcp;
        let target = match (&mcp.service_name, &mcp.hostname) {
            (Some(name), None) => BackendTarget::Service {
                name: name.clone(),
                port: mcp.port,
            },
            (None, Some(host)) => BackendTarget::Hostname {
                host: host.clone(),
                port: mcp.port,
            },
            _ => {
                return Err(format!(
                    "XBackend {namespace}/{}: exactly one of serviceName or hostname must be set",
                    b.name
                ))
            }
        };
        Ok(Upstream::XBackend {
            namespace,
            name: b.name.clone(),
            target,
            path: mcp.path_or_default().to_string(),
        })
    } else if (b.group.as_deref(), b.kind.as_deref())
        == (Some(ISTIO_HOSTNAME.0), Some(ISTIO_HOSTNAME.1))
        && matches!(naming, ClusterNaming::Istio { .. })
    {
        let port = b.port.and_then(|p| u16::try_from(p).ok());
        let port = port.ok_or_else(|| format!("backendRef Hostname {} has no port", b.name))?;
        Ok(Upstream::Host {
            host: b.name.trim_end_matches('.').to_ascii_lowercase(),
            port,
        })
    } else if model::is_service(b) {
        // Ports are checked to fit on reading.
        let port = b.port.and_then(|p| u16::try_from(p).ok());
        let port =
            port.ok_or_else(|| format!("backendRef Service {namespace}/{} has no port", b.name))?;
        Ok(Upstream::Service {
            namespace,
            name: b.name.clone(),
            port,
        })
    } else {
        Err(format!(
            "backendRef {}/{} {} is not supported",
            b.group.as_deref().unwrap_or(""),
            b.kind.as_deref().unwrap_or("Service"),
            b.name
        ))
    }
}
