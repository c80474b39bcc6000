//! Arguments and steps shared by the commands that read objects (`crate::commands`: `validate`,
//! `compile`, `render`, `explain`): reading the inputs into the model, the topology with what it
//! refused printed, writing a file; how a command failed ([`Failure`]). Below the commands and what
//! they call: `render` writes with it, and the controller's arguments (`crate::runtime`) use its
//! parsers of durations and switches.

use std::collections::HashSet;
use std::path::PathBuf;

use clap::Args;
use toolgate_policy::compile::{CompileOptions, DEFAULT_TRUST_DOMAIN};
use toolgate_policy::plan::{PlanSettings, DEFAULT_MAX_BODY_BYTES};

use crate::inputs::{self, OtherKinds, RawObject};
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
    /// Skip documents of kinds Toolgate does not read (printed as `skipped:`), for manifests that
    /// mix in other objects; without it they are errors. Documents without apiVersion or kind stay
    /// errors.
    #[arg(long)]
    pub ignore_unknown_kinds: bool,
}

impl InputArgs {
    /// The documents of the inputs; those skipped (`--ignore-unknown-kinds`) printed on stderr.
    pub fn read(&self) -> Result<Vec<RawObject>, inputs::InputError> {
        let other_kinds = if self.ignore_unknown_kinds {
            OtherKinds::Skip
        } else {
            OtherKinds::Refuse
        };
        let loaded = inputs::load(&self.files, other_kinds)?;
        for skipped in &loaded.skipped {
            eprintln!("skipped: {skipped}");
        }
        Ok(loaded.objects)
    }
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
    /// Exit 1 when any policy given is left out of the plans: not Accepted, or in no listener's plan.
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
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let scale = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        _ => {
            return Err(format!(
                "{text:?}: a number followed by ms, s or m (e.g. 5s)"
            ))
        }
    };
    let ms = number
        .parse::<u64>()
        .map_err(|_| format!("{text:?}: a number followed by ms, s or m"))?
        * scale;
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
    let raw = input.read().map_err(|e| match e {
        inputs::InputError::Io { .. } => {
            eprintln!("error: {e}");
            Failure::Usage
        }
        inputs::InputError::Syntax { .. } => {
            eprintln!("error: {e}");
            Failure::Invalid
        }
        inputs::InputError::Unreadable(documents) => {
            for d in documents {
                eprintln!("error: {d}");
            }
            Failure::Invalid
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
pub fn build_topology(
    inv: &Inventory,
    args: &PlanArgs,
    pause_headers: bool,
) -> Result<Topology, Failure> {
    let opts = TopologyOptions {
        compile: CompileOptions {
            trust_domain: args.trust_domain.clone(),
            ..CompileOptions::default()
        },
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
        eprintln!(
            "error: --max-body-bytes must be in 1..={}",
            toolgate_policy::eval::MAX_BODY_LIMIT
        );
        return Err(Failure::Usage);
    }
    let topo = topology::build(inv, &opts);
    let mut rejected = inv.rejected_policies.len();
    let mut rejected_keys = HashSet::new();
    for r in &inv.rejected_policies {
        eprintln!(
            "policy {}/{} not accepted: Invalid: {}",
            r.namespace, r.name, r.message
        );
        rejected_keys.insert(format!("{}/{}", r.namespace, r.name));
    }
    for status in topo
        .statuses
        .iter()
        .filter(|s| !rejected_keys.contains(&s.policy))
    {
        for problem in status.problems() {
            rejected += 1;
            eprintln!("policy {} not accepted: {problem}", status.policy);
        }
    }
    for key in policies_in_no_plan(inv, &topo, &opts, &rejected_keys) {
        rejected += 1;
        eprintln!("policy {key} left out: in no listener's plan (no route of the Gateways handled reaches what it targets)");
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

/// The policies given that no plan of `topo` holds, though no target refused them (those refused
/// are reported with their reason): a policy on an XBackend no route reaches, or one without
/// targets. A policy in a plan of a Gateway `--gateway-class` leaves out is where it belongs.
fn policies_in_no_plan(
    inv: &Inventory,
    topo: &Topology,
    opts: &TopologyOptions,
    refused: &HashSet<String>,
) -> Vec<String> {
    fn in_plans(topo: &Topology) -> HashSet<&str> {
        let levels = topo
            .gateways
            .iter()
            .flat_map(|g| &g.listeners)
            .flat_map(|l| std::iter::once(&l.plan.gateway).chain(l.plan.backends.values()));
        levels
            .flat_map(|level| {
                level
                    .allow
                    .iter()
                    .map(|p| p.name.as_str())
                    .chain(level.external_auth.iter().map(|ea| ea.policy.as_str()))
            })
            .collect()
    }
    let planned = in_plans(topo);
    let mut out: Vec<String> = topo
        .statuses
        .iter()
        .filter(|s| {
            !refused.contains(&s.policy)
                && s.problems().is_empty()
                && !planned.contains(s.policy.as_str())
        })
        .map(|s| s.policy.clone())
        .collect();
    if !out.is_empty() && !opts.gateway_classes.is_empty() {
        let every_gateway = topology::build(
            inv,
            &TopologyOptions {
                gateway_classes: Vec::new(),
                ..opts.clone()
            },
        );
        let planned = in_plans(&every_gateway);
        out.retain(|key| !planned.contains(key.as_str()));
    }
    out
}

pub fn write_file(path: &std::path::Path, contents: &[u8]) -> Result<(), Failure> {
    // Write then rename, so a running Envoy watching the file never reads half of it.
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, contents)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            eprintln!("error: {}: {e}", path.display());
            Failure::Usage
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many objects the model typed or refused (none: it ignored them).
    fn kept(objects: Vec<RawObject>) -> usize {
        let (inv, errors) = Inventory::from_raw(objects, "default");
        let typed = inv.policies.len()
            + inv.backends.len()
            + inv.gateways.len()
            + inv.routes.len()
            + inv.grants.len()
            + inv.secrets.len()
            + inv.config_maps.len()
            + inv.rejected_policies.len()
            + inv.request_authentications.len()
            + inv.namespaces.len();
        typed + errors.len()
    }

    /// Every kind the reading lets through is one the model reads: none passes the check only to be
    /// dropped unseen.
    #[test]
    fn every_kind_read_is_one_the_model_reads() {
        let object = |api_version: String, kind: &str| RawObject {
            file: "t".into(),
            doc: 0,
            value: serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}),
        };
        for (group, kind) in inputs::KINDS_READ {
            let api_version = if *group == "v1" {
                "v1".to_string()
            } else {
                format!("{group}/v1")
            };
            assert_eq!(kept(vec![object(api_version, kind)]), 1, "{group} {kind}");
        }
        assert_eq!(kept(vec![object("apps/v1".into(), "Deployment")]), 0);
    }
}
