//! `toolgate render`: a runnable Envoy configuration per Gateway (docs/semantics.md §7).
//!
//! Per Gateway, a folder with:
//! - `envoy.json`: the bootstrap (admin, access log, file-based dynamic resources);
//! - `lds.json`: the listeners: TLS with client-certificate validation, routes, the Toolgate Wasm
//!   filter carrying the listener's plan, Envoy's buffer filter, the router (with `--native-module`:
//!   the dynamic module, which holds the request itself, and the router);
//! - `cds.json`: the upstream clusters;
//! - `certs/`: server certificates, keys and client CAs taken from Secrets and ConfigMaps.
//!
//! Envoy watches `lds.json` and `cds.json`; rendering again replaces them atomically (write and
//! rename), so a changed policy reaches a running Envoy without a restart.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use serde_json::{json, Value};

use crate::cli::{self, Failure};
use crate::model::Inventory;
use crate::topology::{GatewayOut, ListenerOut};

mod clusters;
mod routes;
mod tls;

pub use routes::envoy_duration;

/// What every Gateway's configuration is rendered with besides the topology: the command's options,
/// read and checked (`crate::commands::render`).
pub struct Options<'a> {
    /// The filter: the Wasm module, or with `native_module` the dynamic module (absolute paths).
    pub filter: &'a Path,
    pub native_module: bool,
    /// Address the listeners bind to.
    pub bind: &'a str,
    /// The admin interface's address.
    pub admin: SocketAddr,
    /// Services and XBackend serviceNames mapped to local addresses (`NAME.NAMESPACE` → host, port).
    pub resolve: &'a BTreeMap<String, (String, u16)>,
    /// The client CA (PEM) of HTTPS listeners without a spec.tls.frontend CA.
    pub client_ca: Option<&'a str>,
    /// A duration Envoy's `envoy_duration` reads (checked by the command).
    pub stream_idle_timeout: &'a str,
    /// The access log's file (None: stdout).
    pub access_log: Option<&'a Path>,
}

/// Writes Gateway `gw`'s folder `dir`: `envoy.json`, `lds.json`, `cds.json` and `certs/`. An error is
/// printed, and says whether it is the input's or the machine's.
pub fn write_gateway(
    options: &Options<'_>,
    inv: &Inventory,
    gw: &GatewayOut,
    dir: &Path,
) -> Result<(), Failure> {
    Ctx { options, inv, dir }.render_gateway(gw)
}

struct Ctx<'a> {
    options: &'a Options<'a>,
    inv: &'a Inventory,
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
        let ras =
            crate::request_authn::for_gateway(self.inv, &gw.gateway.namespace, &gw.gateway.name);
        let tokens =
            crate::request_authn::render(&ras, self.options.native_module).map_err(|e| {
                eprintln!("error: {e}");
                Failure::Invalid
            })?;
        for up in &tokens.jwks {
            clusters.insert(up.cluster.clone(), self.jwks_cluster(up));
        }
        for l in &gw.listeners {
            listeners.push(self.listener(gw, l, &tokens)?);
            for upstream in l
                .routes
                .iter()
                .flat_map(|r| &r.rules)
                .flat_map(|r| &r.backends)
                .map(|(u, _)| u)
            {
                clusters
                    .entry(upstream.cluster_name())
                    .or_insert_with(|| self.cluster(upstream));
            }
            let levels = std::iter::once(&l.plan.gateway).chain(l.plan.backends.values());
            for authorizer in levels
                .filter_map(|level| level.external_auth.as_ref())
                .map(|ea| &ea.authorizer)
            {
                if !clusters.contains_key(&authorizer.cluster) {
                    clusters.insert(
                        authorizer.cluster.clone(),
                        self.authorizer_cluster(authorizer)?,
                    );
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
                "address": { "socket_address": { "address": self.options.admin.ip().to_string(), "port_value": self.options.admin.port() } },
            },
            "dynamic_resources": { "lds_config": watched("lds.json"), "cds_config": watched("cds.json") },
        })
    }

    /// One listener: its connection manager (routes, access log, the filters) and TLS. Long, as one
    /// JSON literal laid out as Envoy reads it.
    fn listener(
        &self,
        gw: &GatewayOut,
        l: &ListenerOut,
        tokens: &crate::request_authn::Rendered,
    ) -> Result<Value, Failure> {
        let listener = &l.listener;
        let id = format!(
            "{}/{}/{}",
            gw.gateway.namespace, gw.gateway.name, listener.name
        );
        let limit = l.plan.settings.max_body_bytes;
        let plan_json = serde_json::to_string(&l.plan).expect("plans serialise");
        let access_log_path = self
            .options
            .access_log
            .map_or_else(|| "/dev/stdout".to_string(), |p| p.display().to_string());
        let mut hcm = json!({
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": format!("toolgate_{}_{}_{}", gw.gateway.namespace, gw.gateway.name, listener.name),
                "stream_idle_timeout": envoy_duration(self.options.stream_idle_timeout).unwrap_or_else(|| "3600.000s".into()),
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
                            if self.options.native_module { "toolgate.decision" } else { "wasm.toolgate_decision" }) } },
                    },
                }],
                // Envoy's jwt_authn (and the removal of the headers it writes) before Toolgate, which
                // reads what it verified (docs/semantics.md §6b).
                "http_filters": tokens.filters.iter().cloned().chain([
                    if self.options.native_module { native_filter(&id, self.options.filter, &plan_json, !tokens.filters.is_empty()) } else { json!(
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
                                    "code": { "local": { "filename": self.options.filter } },
                                },
                            },
                        },
                    }) },
                    // The dynamic module holds the request itself (the lifecycle's
                    // `Host::holds_request`); the Wasm filter needs the buffer filter after it.
                ]).chain((!self.options.native_module).then(|| hold_filter(limit))).chain([
                    json!({ "name": "envoy.filters.http.router", "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } }),
                ]).collect::<Vec<Value>>(),
            },
        });
        // jwt_authn's wrong-audience 403 answered 401, as its other invalid tokens (docs/semantics.md §6b).
        if let Some(local_reply) = &tokens.local_reply_config {
            hcm["typed_config"]["local_reply_config"] = local_reply.clone();
        }
        let mut chain = json!({ "filters": [hcm] });
        match listener.protocol.as_str() {
            "HTTP" => {}
            "HTTPS" => {
                chain["transport_socket"] = self.downstream_tls(gw, listener)?;
            }
            other => {
                eprintln!(
                    "error: listener {id}: protocol {other} is not supported (HTTP or HTTPS)"
                );
                return Err(Failure::Invalid);
            }
        }
        Ok(json!({
            "@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
            "name": id,
            "address": { "socket_address": { "address": self.options.bind, "port_value": listener.port } },
            // Larger than the body limit, so that the filter answers 413 before Envoy's own limit.
            "per_connection_buffer_limit_bytes": limit.saturating_mul(2).max(1024 * 1024),
            "filter_chains": [chain],
        }))
    }
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("JSON values serialise");
    out.push(b'\n');
    out
}

/// The Toolgate filter as an Envoy dynamic module (`--native-module`, module/): the same plan, as the
/// filter configuration. Envoy loads the `.so` from `module.local.filename`; `name` (what Envoy 1.40
/// also accepts alone, searched as `lib<name>.so` in `ENVOY_DYNAMIC_MODULES_SEARCH_PATH`) is the
/// file's name without `lib` and `.so`. `do_not_close`: the module keeps process-wide state (the
/// plugins' last good plans), which must survive a configuration update that briefly leaves no user.
/// `jwt_authn`: the jwt_authn rendered before the module has every provider write the verified payload
/// to the header the module reads claims from; the configuration says so, or the module reads none
/// (docs/semantics.md §6b).
pub fn native_filter(id: &str, module: &Path, plan_json: &str, jwt_authn: bool) -> Value {
    let stem = module
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("toolgate_module");
    let config = if jwt_authn {
        toolgate_policy::jwt::module_config_with_payload_header(plan_json)
    } else {
        plan_json.to_string()
    };
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
            "filter_config": { "@type": "type.googleapis.com/google.protobuf.StringValue", "value": config },
        },
    })
}

/// Envoy's buffer filter, placed after the Toolgate Wasm filter (here, and under Istio by the controller's
/// EnvoyFilter; not after the dynamic module, which holds the request itself): it holds the request,
/// headers included, until the Toolgate filter decided, so a
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
