//! `toolgate render`: reads the inputs and the options, then writes each Gateway's Envoy
//! configuration (`crate::render`, which says what is in it) into `<output>/<namespace>.<name>/`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::{self, Failure, InputArgs, PlanArgs};
use crate::render::{self, envoy_duration, Options};

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
    let filter = absolute(code)?;
    if !filter.is_file() {
        eprintln!(
            "error: {flag} {}: no such file (build it with `{make}`)",
            filter.display()
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
    let options = Options {
        filter: &filter,
        native_module: args.native_module.is_some(),
        bind: &args.bind,
        admin: args.admin,
        resolve: &resolve,
        client_ca: client_ca.as_deref(),
        stream_idle_timeout: &args.stream_idle_timeout,
        access_log: args.access_log.as_deref(),
    };
    for gw in &topo.gateways {
        let dir = absolute(
            &args
                .output
                .join(format!("{}.{}", gw.gateway.namespace, gw.gateway.name)),
        )?;
        render::write_gateway(&options, &inv, gw, &dir)?;
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
