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
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use crate::cli::{self, Failure, InputArgs, PlanArgs};
use crate::model::Inventory;
use crate::topology::{GatewayOut, ListenerOut};

mod clusters;
mod routes;
mod tls;

use routes::envoy_duration;

#[derive(Args, Debug)]
pub struct RenderArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The compiled filter (toolgate_filter.wasm).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "native_module",
        conflicts_with = "native_module"
    )]
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
        eprintln!(
            "error: --stream-idle-timeout {:?}: a duration like 1h, 30m, 90s or 500ms",
            args.stream_idle_timeout
        );
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
        eprintln!(
            "error: {flag} {}: no such file (build it with `{make}`)",
            wasm.display()
        );
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
            args.plan
                .gateway_class
                .as_ref()
                .map(|c| format!(" with class {c}"))
                .unwrap_or_default()
        );
        return Err(Failure::Invalid);
    }
    for gw in &topo.gateways {
        let dir = absolute(
            &args
                .output
                .join(format!("{}.{}", gw.gateway.namespace, gw.gateway.name)),
        )?;
        let ctx = Ctx {
            args,
            inv: &inv,
            resolve: &resolve,
            wasm: &wasm,
            client_ca: client_ca.as_deref(),
            dir: &dir,
        };
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
            Some((
                name.to_string(),
                (
                    host.trim_matches(['[', ']']).to_string(),
                    port.parse().ok()?,
                ),
            ))
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
        let ras =
            crate::request_authn::for_gateway(self.inv, &gw.gateway.namespace, &gw.gateway.name);
        let tokens = crate::request_authn::render(&ras, self.args.native_module.is_some())
            .map_err(|e| {
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
                "address": { "socket_address": { "address": self.args.admin.ip().to_string(), "port_value": self.args.admin.port() } },
            },
            "dynamic_resources": { "lds_config": watched("lds.json"), "cds_config": watched("cds.json") },
        })
    }

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
            .args
            .access_log
            .as_ref()
            .map_or_else(|| "/dev/stdout".to_string(), |p| p.display().to_string());
        let mut hcm = json!({
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
                    if self.args.native_module.is_some() { native_filter(&id, self.wasm, &plan_json, !tokens.filters.is_empty()) } else { json!(
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
                    // The dynamic module holds the request itself (the lifecycle's
                    // `Host::holds_request`); the Wasm filter needs the buffer filter after it.
                ]).chain(self.args.native_module.is_none().then(|| hold_filter(limit))).chain([
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
            "address": { "socket_address": { "address": self.args.bind, "port_value": listener.port } },
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
