//! The upstream clusters: backends (Services and XBackends), ExternalAuth authorizers, JWKS hosts.

use serde_json::{json, Value};
use toolgate_policy::compile::parse_authorizer_cluster;
use toolgate_policy::plan::{AuthorizerPlan, AuthorizerProtocol};

use super::Ctx;
use crate::cli::Failure;
use crate::topology::{BackendTarget, Upstream};

impl Ctx<'_> {
    pub(super) fn cluster(&self, upstream: &Upstream) -> Value {
        let name = upstream.cluster_name();
        let (host, port, tls_sni) = match upstream {
            Upstream::Service {
                namespace,
                name,
                port,
            } => {
                let (h, p) = self.resolved(name, namespace, *port);
                (h, p, None)
            }
            Upstream::XBackend {
                namespace,
                target: BackendTarget::Service { name, port },
                ..
            } => {
                let (h, p) = self.resolved(name, namespace, *port);
                (h, p, None)
            }
            Upstream::XBackend {
                target: BackendTarget::Hostname { host, port },
                ..
            } => (host.clone(), *port, Some(host.clone())),
            // Only under Istio naming (topology::resolve_backend); plain DNS as Istio does by default.
            Upstream::Host { host, port } => (host.clone(), *port, None),
        };
        let mut cluster = json!({
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": name,
            "type": "STRICT_DNS",
            "dns_lookup_family": "V4_PREFERRED",
            "connect_timeout": "5s",
            "load_assignment": {
                "cluster_name": name,
                "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": { "socket_address": { "address": host, "port_value": port } } } }] }],
            },
        });
        if let Some(sni) = tls_sni {
            cluster["transport_socket"] = json!({
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "sni": sni,
                    "common_tls_context": { "validation_context": {
                        "trusted_ca": { "filename": "/etc/ssl/certs/ca-certificates.crt" },
                        "match_typed_subject_alt_names": [{ "san_type": "DNS", "matcher": { "exact": sni } }],
                    } },
                },
            });
        }
        cluster
    }

    /// The cluster of an ExternalAuth authorizer (a Service): HTTP/2 for gRPC, HTTP/1.1 otherwise.
    pub(super) fn authorizer_cluster(&self, authorizer: &AuthorizerPlan) -> Result<Value, Failure> {
        let Some((namespace, name, port)) = parse_authorizer_cluster(&authorizer.cluster) else {
            eprintln!(
                "error: authorizer cluster {:?} is not one render makes",
                authorizer.cluster
            );
            return Err(Failure::Invalid);
        };
        let (host, port) = self.resolved(name, namespace, port);
        let mut cluster = json!({
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": authorizer.cluster,
            "type": "STRICT_DNS",
            "dns_lookup_family": "V4_PREFERRED",
            "connect_timeout": "5s",
            "load_assignment": {
                "cluster_name": authorizer.cluster,
                "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": { "socket_address": { "address": host, "port_value": port } } } }] }],
            },
        });
        if authorizer.protocol == AuthorizerProtocol::Grpc {
            cluster["typed_extension_protocol_options"] = json!({
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": { "http2_protocol_options": {} },
                },
            });
        }
        Ok(cluster)
    }

    /// The cluster a RequestAuthentication's jwksUri is fetched through (`--resolve` applies to its
    /// host, or to `name.namespace` of a Service's DNS name).
    pub(super) fn jwks_cluster(&self, up: &crate::request_authn::JwksUpstream) -> Value {
        let (host, port) = crate::request_authn::resolve_keys(&up.host)
            .iter()
            .find_map(|k| self.options.resolve.get(k).cloned())
            .unwrap_or_else(|| (up.host.clone(), up.port));
        let mut cluster = json!({
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": up.cluster,
            "type": "STRICT_DNS",
            "dns_lookup_family": "V4_PREFERRED",
            "connect_timeout": "5s",
            "load_assignment": {
                "cluster_name": up.cluster,
                "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": { "socket_address": { "address": host, "port_value": port } } } }] }],
            },
        });
        if up.tls {
            cluster["transport_socket"] = json!({
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "sni": up.host,
                    "common_tls_context": { "validation_context": {
                        "trusted_ca": { "filename": "/etc/ssl/certs/ca-certificates.crt" },
                        "match_typed_subject_alt_names": [{ "san_type": "DNS", "matcher": { "exact": up.host } }],
                    } },
                },
            });
        }
        cluster
    }

    /// `--resolve name.namespace=HOST:PORT`, or the in-cluster DNS name.
    fn resolved(&self, name: &str, namespace: &str, port: u16) -> (String, u16) {
        self.options
            .resolve
            .get(&format!("{name}.{namespace}"))
            .cloned()
            .unwrap_or_else(|| (format!("{name}.{namespace}.svc.cluster.local"), port))
    }
}
