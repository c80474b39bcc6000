//! `toolgate render`: a runnable Envoy configuration per Gateway (docs/semantics.md §7).
//!
//! Per Gateway, a folder with:
//! - `envoy.json`: the bootstrap (admin, access log, file-based dynamic resources);
//! - `lds.json`: the listeners: TLS with client-certificate validation, routes, the Toolgate Wasm
//!   filter carrying the listener's plan, Envoy's buffer filter, the router;
//! - `cds.json`: the upstream clusters;
//! - `certs/`: server certificates, keys and client CAs taken from Secrets and ConfigMaps.
//!
//! Envoy watches `lds.json` and `cds.json`; rendering again replaces them atomically (write and
//! rename), so a changed policy reaches a running Envoy without a restart.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use toolgate_policy::compile::parse_authorizer_cluster;
use toolgate_policy::plan::{AuthorizerPlan, AuthorizerProtocol};

use crate::cli::{self, Failure, InputArgs, PlanArgs};
use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;
use gateway_api::apis::standard::httproutes::{
    HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};

use crate::model::{self, CaRef, Inventory, Listener, RouteMatch, UrlRewrite};
use crate::topology::{path_of, BackendTarget, GatewayOut, ListenerOut, Precedence, RouteOut, Upstream};

#[derive(Args, Debug)]
pub struct RenderArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The compiled filter (toolgate_filter.wasm).
    #[arg(long, value_name = "FILE", required_unless_present = "native_module", conflicts_with = "native_module")]
    pub wasm: Option<PathBuf>,
    /// Instead of --wasm: the filter as an Envoy dynamic module (libtoolgate_module.so, `make module`),
    /// loaded by Envoy's dynamic_modules HTTP filter from this path. Not for Istio (which loads
    /// dynamic modules from 1.31 on only): the controller renders the Wasm filter.
    #[arg(long, value_name = "FILE")]
    pub native_module: Option<PathBuf>,
    /// Output folder: one sub-folder per Gateway, `<namespace>.<name>`.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Address the listeners bind to.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub bind: String,
    /// Admin interface address (port 0 picks one; see admin.address file).
    #[arg(long, default_value = "127.0.0.1:9901", value_name = "ADDR:PORT")]
    pub admin: SocketAddr,
    /// Map a Service or XBackend serviceName to a local address: NAME.NAMESPACE=HOST:PORT (repeatable).
    #[arg(long = "resolve", value_name = "NAME.NAMESPACE=HOST:PORT")]
    pub resolve: Vec<String>,
    /// Client CA (PEM) for HTTPS listeners without a spec.tls.frontend CA, as a trust bundle.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// How long a stream (an SSE response, a GET stream, a slow tool call) may stay without any data
    /// before Envoy resets it; MCP routes have no request timeout unless the HTTPRoute sets one.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub stream_idle_timeout: String,
    /// Envoy log file for the access log (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
}

pub fn run(args: &RenderArgs) -> Result<(), Failure> {
    let inv = cli::load_inventory(&args.input)?;
    let topo = cli::build_topology(&inv, &args.plan, true)?;
    let resolve = parse_resolve(&args.resolve)?;
    if envoy_duration(&args.stream_idle_timeout).is_none() {
        eprintln!("error: --stream-idle-timeout {:?}: a duration like 1h, 30m, 90s or 500ms", args.stream_idle_timeout);
        return Err(Failure::Usage);
    }
    let (flag, code, make) = match (&args.wasm, &args.native_module) {
        (_, Some(native)) => ("--native-module", native, "make module"),
        (Some(wasm), None) => ("--wasm", wasm, "make wasm"),
        (None, None) => {
            eprintln!("error: --wasm or --native-module is required");
            return Err(Failure::Usage);
        }
    };
    let wasm = absolute(code)?;
    if !wasm.is_file() {
        eprintln!("error: {flag} {}: no such file (build it with `{make}`)", wasm.display());
        return Err(Failure::Usage);
    }
    let client_ca = match &args.client_ca {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
            eprintln!("error: --client-ca {}: {e}", p.display());
            Failure::Usage
        })?),
        None => None,
    };
    if topo.gateways.is_empty() {
        eprintln!(
            "error: no Gateway found in the input{}",
            args.plan.gateway_class.as_ref().map(|c| format!(" with class {c}")).unwrap_or_default()
        );
        return Err(Failure::Invalid);
    }
    for gw in &topo.gateways {
        let dir = absolute(&args.output.join(format!("{}.{}", gw.gateway.namespace, gw.gateway.name)))?;
        let ctx = Ctx { args, inv: &inv, resolve: &resolve, wasm: &wasm, client_ca: client_ca.as_deref(), dir: &dir };
        ctx.render_gateway(gw)?;
        println!(
            "{}: Envoy configuration for Gateway {}/{} ({} listeners)",
            dir.display(),
            gw.gateway.namespace,
            gw.gateway.name,
            gw.listeners.len()
        );
    }
    Ok(())
}

fn absolute(p: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(p).map_err(|e| {
        eprintln!("error: {}: {e}", p.display());
        Failure::Usage
    })
}

fn parse_resolve(items: &[String]) -> Result<BTreeMap<String, (String, u16)>, Failure> {
    let mut out = BTreeMap::new();
    for item in items {
        let parsed = item.split_once('=').and_then(|(name, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            Some((name.to_string(), (host.trim_matches(['[', ']']).to_string(), port.parse().ok()?)))
        });
        match parsed {
            Some((name, addr)) if name.contains('.') => {
                out.insert(name, addr);
            }
            _ => {
                eprintln!("error: --resolve {item:?}: expected NAME.NAMESPACE=HOST:PORT");
                return Err(Failure::Usage);
            }
        }
    }
    Ok(out)
}

struct Ctx<'a> {
    args: &'a RenderArgs,
    inv: &'a Inventory,
    resolve: &'a BTreeMap<String, (String, u16)>,
    wasm: &'a Path,
    client_ca: Option<&'a str>,
    dir: &'a Path,
}

impl Ctx<'_> {
    fn render_gateway(&self, gw: &GatewayOut) -> Result<(), Failure> {
        std::fs::create_dir_all(self.dir.join("certs")).map_err(|e| {
            eprintln!("error: {}: {e}", self.dir.display());
            Failure::Usage
        })?;
        let mut listeners = Vec::new();
        let mut clusters: BTreeMap<String, Value> = BTreeMap::new();
        // Token callers (docs/semantics.md §6b): the Gateway's RequestAuthentications as jwt_authn.
        let ras = crate::request_authn::for_gateway(self.inv, &gw.gateway.namespace, &gw.gateway.name);
        let tokens = crate::request_authn::render(&ras).map_err(|e| {
            eprintln!("error: {e}");
            Failure::Invalid
        })?;
        for up in &tokens.jwks {
            clusters.insert(up.cluster.clone(), self.jwks_cluster(up));
        }
        for l in &gw.listeners {
            listeners.push(self.listener(gw, l, &tokens)?);
            for upstream in l.routes.iter().flat_map(|r| &r.rules).flat_map(|r| &r.backends).map(|(u, _)| u) {
                clusters.entry(upstream.cluster_name()).or_insert_with(|| self.cluster(upstream));
            }
            let levels = std::iter::once(&l.plan.gateway).chain(l.plan.backends.values());
            for authorizer in levels.filter_map(|level| level.external_auth.as_ref()).map(|ea| &ea.authorizer) {
                if !clusters.contains_key(&authorizer.cluster) {
                    clusters.insert(authorizer.cluster.clone(), self.authorizer_cluster(authorizer)?);
                }
            }
        }
        let lds = json!({ "version_info": "toolgate", "resources": listeners });
        let cds = json!({ "version_info": "toolgate", "resources": clusters.into_values().collect::<Vec<_>>() });
        // Clusters first: a listener update may reference a new cluster.
        cli::write_file(&self.dir.join("cds.json"), &pretty(&cds))?;
        cli::write_file(&self.dir.join("lds.json"), &pretty(&lds))?;
        cli::write_file(&self.dir.join("envoy.json"), &pretty(&self.bootstrap(gw)))
    }

    fn bootstrap(&self, gw: &GatewayOut) -> Value {
        let watched = |file: &str| {
            json!({
                "path_config_source": {
                    "path": self.dir.join(file),
                    "watched_directory": { "path": self.dir },
                },
                "resource_api_version": "V3",
            })
        };
        json!({
            "node": { "id": format!("toolgate-{}-{}", gw.gateway.namespace, gw.gateway.name), "cluster": "toolgate" },
            "admin": {
                "address": { "socket_address": { "address": self.args.admin.ip().to_string(), "port_value": self.args.admin.port() } },
            },
            "dynamic_resources": { "lds_config": watched("lds.json"), "cds_config": watched("cds.json") },
        })
    }

    fn listener(&self, gw: &GatewayOut, l: &ListenerOut, tokens: &crate::request_authn::Rendered) -> Result<Value, Failure> {
        let listener = &l.listener;
        let id = format!("{}/{}/{}", gw.gateway.namespace, gw.gateway.name, listener.name);
        let limit = l.plan.settings.max_body_bytes;
        let plan_json = serde_json::to_string(&l.plan).expect("plans serialise");
        let access_log_path =
            self.args.access_log.as_ref().map_or_else(|| "/dev/stdout".to_string(), |p| p.display().to_string());
        let hcm = json!({
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": format!("toolgate_{}_{}_{}", gw.gateway.namespace, gw.gateway.name, listener.name),
                "stream_idle_timeout": envoy_duration(&self.args.stream_idle_timeout).unwrap_or_else(|| "3600.000s".into()),
                // The path the routes and the Toolgate filter see must be the path the upstream gets:
                // without normalisation, `/mcp/public/../private` passes a PathPrefix /mcp/public rule
                // and an upstream that resolves dot segments serves /mcp/private. Envoy's edge best
                // practice: RFC 3986 normalisation, merged slashes, escaped slashes unescaped and
                // redirected (so they are never forwarded).
                "normalize_path": true,
                "merge_slashes": true,
                "path_with_escaped_slashes_action": "UNESCAPE_AND_REDIRECT",
                "route_config": self.route_config(&id, listener, &l.routes, &tokens.upstream_removed),
                "access_log": [{
                    "name": "envoy.access_loggers.file",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                        "path": access_log_path,
                        "log_format": { "text_format_source": { "inline_string": format!(
                            "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%\" %RESPONSE_CODE% \
                             peer=%DOWNSTREAM_PEER_URI_SAN% cluster=%UPSTREAM_CLUSTER% toolgate=\"%FILTER_STATE({}:PLAIN)%\"\n",
                            // The filter state the Wasm filter's decision property, or the module's, is in.
                            if self.args.native_module.is_some() { "toolgate.decision" } else { "wasm.toolgate_decision" }) } },
                    },
                }],
                // Envoy's jwt_authn (and the removal of the headers it writes) before Toolgate, which
                // reads what it verified (docs/semantics.md §6b).
                "http_filters": tokens.filters.iter().cloned().chain([
                    if self.args.native_module.is_some() { native_filter(&id, self.wasm, &plan_json) } else { json!(
                    {
                        "name": "envoy.filters.http.wasm",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
                            "config": {
                                "name": format!("toolgate:{id}"),
                                "root_id": "toolgate",
                                "fail_open": false,
                                // Body callbacks after the filter paused the headers: Toolgate holds
                                // a JSON POST under an ExternalAuth policy from its headers on, so
                                // the authorizer's header changes can be applied (plan setting
                                // `pauseHeaders`; docs/envoy-notes.md).
                                "allow_on_headers_stop_iteration": true,
                                "configuration": { "@type": "type.googleapis.com/google.protobuf.StringValue", "value": plan_json },
                                "vm_config": {
                                    "vm_id": "toolgate",
                                    "runtime": "envoy.wasm.runtime.v8",
                                    "code": { "local": { "filename": self.wasm } },
                                },
                            },
                        },
                    }) },
                    hold_filter(limit),
                    json!({ "name": "envoy.filters.http.router", "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } }),
                ]).collect::<Vec<Value>>(),
            },
        });
        let mut chain = json!({ "filters": [hcm] });
        match listener.protocol.as_str() {
            "HTTP" => {}
            "HTTPS" => {
                chain["transport_socket"] = self.downstream_tls(gw, listener)?;
            }
            other => {
                eprintln!("error: listener {id}: protocol {other} is not supported (HTTP or HTTPS)");
                return Err(Failure::Invalid);
            }
        }
        Ok(json!({
            "@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
            "name": id,
            "address": { "socket_address": { "address": self.args.bind, "port_value": listener.port } },
            // Larger than the body limit, so that the filter answers 413 before Envoy's own limit.
            "per_connection_buffer_limit_bytes": limit.saturating_mul(2).max(1024 * 1024),
            "filter_chains": [chain],
        }))
    }

    fn downstream_tls(&self, gw: &GatewayOut, listener: &Listener) -> Result<Value, Failure> {
        let ns = &gw.gateway.namespace;
        let tls = listener.tls.as_ref();
        if let Some(GatewayListenersTlsMode::Passthrough) = tls.and_then(|t| t.mode.as_ref()) {
            eprintln!("error: listener {}: TLS mode Passthrough is not supported (Terminate only)", listener.name);
            return Err(Failure::Invalid);
        }
        let cert_ref = tls.and_then(|t| t.certificate_refs.as_ref()).and_then(|refs| refs.first()).ok_or_else(|| {
            eprintln!("error: listener {}: HTTPS needs tls.certificateRefs", listener.name);
            Failure::Invalid
        })?;
        let secret_ns = cert_ref.namespace.as_deref().unwrap_or(ns);
        let secret = self.inv.secret(secret_ns, &cert_ref.name).ok_or_else(|| {
            eprintln!("error: listener {}: Secret {secret_ns}/{} not found in the input", listener.name, cert_ref.name);
            Failure::Invalid
        })?;
        let (Some(crt), Some(key)) = (secret.spec.get("tls.crt"), secret.spec.get("tls.key")) else {
            eprintln!("error: Secret {secret_ns}/{}: needs tls.crt and tls.key", cert_ref.name);
            return Err(Failure::Invalid);
        };
        let base = format!("{}-{}", listener.name, cert_ref.name);
        let crt_path = self.write_cert(&format!("{base}.crt"), crt)?;
        let key_path = self.write_cert(&format!("{base}.key"), key)?;
        let mut context = json!({
            "common_tls_context": {
                "tls_certificates": [{ "certificate_chain": { "filename": crt_path }, "private_key": { "filename": key_path } }],
            },
        });
        let refs = model::client_ca_refs(&gw.gateway.spec, listener.port);
        let ca = match refs.as_slice() {
            [] => self.client_ca.map(str::to_string),
            refs => Some(self.client_ca_bundle(ns, refs)?),
        };
        if let Some(ca) = ca {
            let ca_path = self.write_cert(&format!("{}-client-ca.crt", listener.name), &ca)?;
            context["require_client_certificate"] = json!(true);
            context["common_tls_context"]["validation_context"] = json!({ "trusted_ca": { "filename": ca_path } });
        }
        context["@type"] = json!("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext");
        Ok(json!({ "name": "envoy.transport_sockets.tls", "typed_config": context }))
    }

    fn client_ca_bundle(&self, ns: &str, refs: &[CaRef]) -> Result<String, Failure> {
        let mut bundle = String::new();
        for r in refs {
            let ref_ns = r.namespace.unwrap_or(ns);
            let kind = r.kind;
            let data = match kind {
                "ConfigMap" => self.inv.config_map(ref_ns, r.name),
                "Secret" => self.inv.secret(ref_ns, r.name),
                _ => None,
            };
            let pem = data.and_then(|d| d.spec.get("ca.crt")).ok_or_else(|| {
                eprintln!("error: client CA {kind} {ref_ns}/{} with key ca.crt not found in the input", r.name);
                Failure::Invalid
            })?;
            bundle.push_str(pem);
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
        }
        Ok(bundle)
    }

    fn write_cert(&self, name: &str, pem: &str) -> Result<PathBuf, Failure> {
        let path = self.dir.join("certs").join(name);
        cli::write_file(&path, pem.as_bytes())?;
        Ok(path)
    }

    fn route_config(&self, id: &str, listener: &Listener, routes: &[RouteOut], removed: &[String]) -> Value {
        // One virtual host per distinct hostname set; routes without hostnames take the listener's.
        let mut vhosts: BTreeMap<Vec<String>, Vec<(Precedence, Value)>> = BTreeMap::new();
        for route in routes {
            let mut domains: Vec<String> = if route.hostnames.is_empty() {
                vec![listener.hostname.clone().unwrap_or_else(|| "*".to_string())]
            } else {
                route.hostnames.clone()
            };
            domains.sort();
            let entries = vhosts.entry(domains).or_default();
            for (r, rule) in route.rules.iter().enumerate() {
                let matches = if rule.matches.is_empty() { vec![RouteMatch::default()] } else { rule.matches.clone() };
                for m in &matches {
                    entries.push((
                        Precedence::of(m, entries.len()),
                        json!({
                            "name": format!("{}/rule{r}", route.name),
                            "match": route_match(m),
                            "route": route_action(rule.rewrite.as_ref(), m, &rule.backends, rule.timeout.as_deref()),
                        }),
                    ));
                }
                if rule.backends.is_empty() {
                    if let Some((_, last)) = entries.last_mut() {
                        last.as_object_mut().map(|o| o.remove("route"));
                        last["direct_response"] = json!({ "status": 500 });
                    }
                }
            }
        }
        let virtual_hosts: Vec<Value> = vhosts
            .into_iter()
            .enumerate()
            .map(|(i, (domains, mut entries))| {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                // Envoy matches the port too unless told otherwise; accept both forms.
                let domains: Vec<String> = domains.iter().flat_map(|d| [d.clone(), format!("{d}:*")]).filter(|d| d != "*:*").collect();
                json!({ "name": format!("vh{i}"), "domains": domains, "routes": entries.into_iter().map(|e| e.1).collect::<Vec<_>>() })
            })
            .collect();
        // Envoy reads lds.json and cds.json as two subscriptions, in no set order: a render that adds a
        // cluster and a route to it could have its listener update rejected ("unknown cluster") when the
        // listeners arrive first, and never applied. Without the check the listener is taken at once; a
        // request routed to a cluster not there yet gets Envoy's 503 until it is.
        let mut config = json!({ "name": id, "virtual_hosts": virtual_hosts, "validate_clusters": false });
        if !removed.is_empty() {
            // Token headers jwt_authn kept for the filter (docs/semantics.md §6b), not forwarded.
            config["request_headers_to_remove"] = json!(removed);
        }
        config
    }

    fn cluster(&self, upstream: &Upstream) -> Value {
        let name = upstream.cluster_name();
        let (host, port, tls_sni) = match upstream {
            Upstream::Service { namespace, name, port } => {
                let (h, p) = self.resolved(name, namespace, *port);
                (h, p, None)
            }
            Upstream::XBackend { namespace, target: BackendTarget::Service { name, port }, .. } => {
                let (h, p) = self.resolved(name, namespace, *port);
                (h, p, None)
            }
            Upstream::XBackend { target: BackendTarget::Hostname { host, port }, .. } => {
                (host.clone(), *port, Some(host.clone()))
            }
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
    fn authorizer_cluster(&self, authorizer: &AuthorizerPlan) -> Result<Value, Failure> {
        let Some((namespace, name, port)) = parse_authorizer_cluster(&authorizer.cluster) else {
            eprintln!("error: authorizer cluster {:?} is not one render makes", authorizer.cluster);
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
    fn jwks_cluster(&self, up: &crate::request_authn::JwksUpstream) -> Value {
        let (host, port) = crate::request_authn::resolve_keys(&up.host)
            .iter()
            .find_map(|k| self.resolve.get(k).cloned())
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
        self.resolve
            .get(&format!("{name}.{namespace}"))
            .cloned()
            .unwrap_or_else(|| (format!("{name}.{namespace}.svc.cluster.local"), port))
    }
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("JSON values serialise");
    out.push(b'\n');
    out
}

fn string_match(regex: bool, value: &str) -> Value {
    if regex {
        json!({ "safe_regex": { "regex": value } })
    } else {
        json!({ "exact": value })
    }
}

fn route_match(m: &RouteMatch) -> Value {
    let (kind, value) = path_of(m);
    let mut out = match kind {
        HttpRouteRulesMatchesPathType::Exact => json!({ "path": value }),
        HttpRouteRulesMatchesPathType::RegularExpression => json!({ "safe_regex": { "regex": value } }),
        HttpRouteRulesMatchesPathType::PathPrefix if value == "/" => json!({ "prefix": "/" }),
        HttpRouteRulesMatchesPathType::PathPrefix => json!({ "path_separated_prefix": value.trim_end_matches('/') }),
    };
    let mut headers: Vec<Value> = m
        .headers
        .iter()
        .flatten()
        .map(|h| {
            let regex = h.r#type == Some(HttpRouteRulesMatchesHeadersType::RegularExpression);
            json!({ "name": h.name, "string_match": string_match(regex, &h.value) })
        })
        .collect();
    if let Some(method) = &m.method {
        headers.push(json!({ "name": ":method", "string_match": { "exact": model::method_name(method) } }));
    }
    if !headers.is_empty() {
        out["headers"] = json!(headers);
    }
    if let Some(query_params) = m.query_params.as_ref().filter(|q| !q.is_empty()) {
        out["query_parameters"] = json!(query_params
            .iter()
            .map(|q| {
                let regex = q.r#type == Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression);
                json!({ "name": q.name, "string_match": string_match(regex, &q.value) })
            })
            .collect::<Vec<_>>());
    }
    out
}

/// A Gateway API duration (`1h`, `1m30s`, `500ms`, `0s`) as Envoy's (`5400s`, `0.500s`).
fn envoy_duration(gateway_api: &str) -> Option<String> {
    let mut ms: u64 = 0;
    let mut rest = gateway_api;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let (n, tail) = rest.split_at(digits);
        let n: u64 = n.parse().ok()?;
        let (scale, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (1, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3_600_000, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60_000, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1000, t)
        } else {
            return None;
        };
        ms = ms.checked_add(n.checked_mul(scale)?)?;
        rest = tail;
    }
    Some(format!("{}.{:03}s", ms / 1000, ms % 1000))
}

fn route_action(rewrite: Option<&UrlRewrite>, m: &RouteMatch, backends: &[(Upstream, u32)], timeout: Option<&str>) -> Value {
    let mut action = match backends {
        [(u, _)] => json!({ "cluster": u.cluster_name() }),
        many => {
            json!({ "weighted_clusters": { "clusters": many.iter().map(|(u, w)| json!({ "name": u.cluster_name(), "weight": w })).collect::<Vec<_>>() } })
        }
    };
    // No request timeout unless the HTTPRoute gives one (docs/semantics.md §9.14): Envoy's default 15 s would cut
    // long tool calls and SSE streams; the connection manager's stream idle timeout applies instead.
    action["timeout"] = json!(timeout.and_then(envoy_duration).unwrap_or_else(|| "0s".to_string()));
    if let Some(rw) = rewrite {
        if let Some(host) = &rw.hostname {
            action["host_rewrite_literal"] = json!(host);
        }
        if let Some(path) = &rw.path {
            match (&path.r#type, &path.replace_full_path, &path.replace_prefix_match) {
                (HttpRouteRulesFiltersUrlRewritePathType::ReplaceFullPath, Some(full), _) => {
                    action["regex_rewrite"] = json!({ "pattern": { "regex": "^/.*$" }, "substitution": full });
                }
                (HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch, _, Some(prefix)) => {
                    let (_, matched) = path_of(m);
                    if matched == "/" || matched.trim_end_matches('/').is_empty() {
                        // Every path matches "/": put the new prefix in front of the whole path.
                        let prefix = prefix.trim_end_matches('/');
                        action["regex_rewrite"] =
                            json!({ "pattern": { "regex": "^/(.*)$" }, "substitution": format!("{prefix}/\\1") });
                    } else {
                        action["prefix_rewrite"] = json!(prefix);
                    }
                }
                _ => {}
            }
        }
    }
    action
}

/// The Toolgate filter as an Envoy dynamic module (`--native-module`, module/): the same plan, as the
/// filter configuration. Envoy loads the `.so` from `module.local.filename`; `name` (what Envoy 1.40
/// also accepts alone, searched as `lib<name>.so` in `ENVOY_DYNAMIC_MODULES_SEARCH_PATH`) is the
/// file's name without `lib` and `.so`. `do_not_close`: the module keeps process-wide state (the
/// plugins' last good plans), which must survive a configuration update that briefly leaves no user.
pub fn native_filter(id: &str, module: &Path, plan_json: &str) -> Value {
    let stem = module.file_stem().and_then(|s| s.to_str()).unwrap_or("toolgate_module");
    json!({
        "name": "envoy.filters.http.dynamic_modules",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
            "dynamic_module_config": {
                "name": stem.strip_prefix("lib").unwrap_or(stem),
                "do_not_close": true,
                "module": { "local": { "filename": module } },
            },
            "filter_name": format!("toolgate:{id}"),
            "filter_config": { "@type": "type.googleapis.com/google.protobuf.StringValue", "value": plan_json },
        },
    })
}

/// Envoy's buffer filter, placed after the Toolgate filter (here, and under Istio by the controller's
/// EnvoyFilter): it holds the request, headers included, until the Toolgate filter decided, so a
/// denied request never reaches the upstream (docs/envoy-notes.md §3). Its limit is also the stream's
/// buffer limit: it leaves room so that the Toolgate filter, which sees the body first, answers 413
/// for bodies over the plan's limit `max_body_bytes`.
pub fn hold_filter(max_body_bytes: u32) -> Value {
    json!({
        "name": "envoy.filters.http.buffer",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
            "max_request_bytes": max_body_bytes.saturating_mul(2).max(max_body_bytes.saturating_add(256 * 1024)),
        },
    })
}
