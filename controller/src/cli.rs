//! Arguments and steps shared by the commands that read objects (`compile`, `render`, `explain`).

use std::collections::HashSet;
use std::path::PathBuf;

use clap::Args;
use toolgate_policy::compile::{CompileOptions, DEFAULT_TRUST_DOMAIN};
use toolgate_policy::plan::{PlanSettings, DEFAULT_MAX_BODY_BYTES};

use crate::inputs;
use crate::model::Inventory;
use crate::topology::{self, Topology, TopologyOptions};

#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// A YAML file or a folder of them (repeatable), as in kubectl.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Namespace of objects without metadata.namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
}

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Only Gateways of this GatewayClass.
    #[arg(long, value_name = "NAME")]
    pub gateway_class: Option<String>,
    /// Trust domain of ServiceAccount sources.
    #[arg(long, default_value = DEFAULT_TRUST_DOMAIN)]
    pub trust_domain: String,
    /// Largest request body the filter buffers; larger ones are refused with 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: u32,
    /// Put the deciding level/policy/rule into denial bodies (for debugging only).
    #[arg(long)]
    pub debug_reasons: bool,
    /// How long an ExternalAuth authorizer may take to answer (e.g. 5s, 250ms); past it the request is
    /// denied.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_timeout_ms)]
    pub authz_timeout: u32,
    /// List filtering (docs/semantics.md §5): `on` rewrites the result of an allowed tools/list, prompts/list or
    /// resources/list to the entries the caller could use (tools/call, prompts/get, resources/read
    /// by the same caller would be allowed); `off` passes lists on unchanged and the filter does no
    /// work on responses.
    #[arg(long, value_name = "on|off", default_value = "on")]
    #[arg(value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub list_filtering: bool,
    /// Deny by default on every Gateway (docs/semantics.md §6a): on routes where no policy applies,
    /// MCP calls other than the base protocol are denied, and so are requests that are not MCP (a
    /// Gateway opts in alone with the annotation `toolgate.dev/default: deny`).
    #[arg(long)]
    pub default_deny: bool,
    /// Exit 1 when any policy is not Accepted.
    #[arg(long)]
    pub strict: bool,
}

/// `on` / `off` as a bool (the spelling of Toolgate's switches, e.g. `--list-filtering off`).
pub fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{text:?}: on or off")),
    }
}

/// `5s`, `1500ms`, `2m` as milliseconds, 1 ms to 10 minutes.
pub fn parse_timeout_ms(text: &str) -> Result<u32, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let scale = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        _ => return Err(format!("{text:?}: a number followed by ms, s or m (e.g. 5s)")),
    };
    let ms = number.parse::<u64>().map_err(|_| format!("{text:?}: a number followed by ms, s or m"))? * scale;
    if ms == 0 || ms > 600_000 {
        return Err(format!("{text:?}: must be between 1ms and 10m"));
    }
    Ok(ms as u32)
}

/// A usage or I/O error (exit 2) or invalid input (exit 1), already printed.
#[derive(Debug)]
pub enum Failure {
    Usage,
    Invalid,
}

pub fn load_inventory(input: &InputArgs) -> Result<Inventory, Failure> {
    let raw = inputs::load(&input.files).map_err(|e| {
        eprintln!("error: {e}");
        match e {
            inputs::InputError::Io { .. } => Failure::Usage,
            inputs::InputError::Syntax { .. } => Failure::Invalid,
        }
    })?;
    let (inv, errors) = Inventory::from_raw(raw, &input.namespace);
    for e in &errors {
        eprintln!("error: {e}");
    }
    if errors.is_empty() {
        Ok(inv)
    } else {
        Err(Failure::Invalid)
    }
}

/// Builds the topology and reports policies that are not accepted and warnings on stderr.
/// `pause_headers`: the Envoy the plans are for keeps delivering the body after the filter pauses
/// the headers (the configuration `render` writes does).
pub fn build_topology(inv: &Inventory, args: &PlanArgs, pause_headers: bool) -> Result<Topology, Failure> {
    let opts = TopologyOptions {
        compile: CompileOptions { trust_domain: args.trust_domain.clone(), ..CompileOptions::default() },
        settings: PlanSettings {
            max_body_bytes: args.max_body_bytes,
            debug_reasons: args.debug_reasons,
            authz_timeout_ms: args.authz_timeout,
            pause_headers,
            list_filtering: args.list_filtering,
            default_deny: args.default_deny,
            ..PlanSettings::default()
        },
        gateway_classes: args.gateway_class.iter().cloned().collect(),
    };
    if args.max_body_bytes == 0 || args.max_body_bytes > toolgate_policy::eval::MAX_BODY_LIMIT {
        eprintln!("error: --max-body-bytes must be in 1..={}", toolgate_policy::eval::MAX_BODY_LIMIT);
        return Err(Failure::Usage);
    }
    let topo = topology::build(inv, &opts);
    let mut rejected = inv.rejected_policies.len();
    let mut rejected_keys = HashSet::new();
    for r in &inv.rejected_policies {
        eprintln!("policy {}/{} not accepted: Invalid: {}", r.namespace, r.name, r.message);
        rejected_keys.insert(format!("{}/{}", r.namespace, r.name));
    }
    for status in topo.statuses.iter().filter(|s| !rejected_keys.contains(&s.policy)) {
        for problem in status.problems() {
            rejected += 1;
            eprintln!("policy {} not accepted: {problem}", status.policy);
        }
    }
    for w in &topo.warnings {
        eprintln!("warning: {w}");
    }
    for e in &topo.errors {
        eprintln!("error: {e}");
    }
    if !topo.errors.is_empty() {
        return Err(Failure::Invalid);
    }
    if args.strict && rejected > 0 {
        return Err(Failure::Invalid);
    }
    Ok(topo)
}

pub fn write_file(path: &std::path::Path, contents: &[u8]) -> Result<(), Failure> {
    // Write then rename, so a running Envoy watching the file never reads half of it.
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
        eprintln!("error: {}: {e}", path.display());
        Failure::Usage
    })
}
