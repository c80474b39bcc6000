//! `toolgate explain`: the decision for a described request, and why (level, policy, rule, the
//! matcher that failed). Runs the same plan and evaluator as the filter.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest, Verdict};
use toolgate_policy::mcp::{self, ReadOptions};
use toolgate_policy::response;

use crate::cli::{self, Failure, InputArgs, PlanArgs};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The request, as YAML or JSON (see `toolgate explain --help`):
    /// gateway (ns/name), listener, method, path, host, headers, principal, body.
    #[arg(long, value_name = "FILE")]
    pub request: PathBuf,
}

/// A described request. Defaults: the only Gateway and listener, `POST /mcp`, host `localhost`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RequestFile {
    gateway: Option<String>,
    listener: Option<String>,
    method: Option<String>,
    path: Option<String>,
    host: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The caller's SPIFFE ID (from its client certificate); absent = no identity.
    principal: Option<String>,
    /// A JSON body (an MCP message or a batch), or a string taken as the raw body.
    body: Option<Value>,
}

pub fn run(args: &ExplainArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&args.request).map_err(|e| {
        eprintln!("error: --request {}: {e}", args.request.display());
        Failure::Usage
    })?;
    let described: RequestFile = serde_yaml::from_str(&text).map_err(|e| {
        eprintln!("error: --request {}: {e}", args.request.display());
        Failure::Invalid
    })?;
    let inv = cli::load_inventory(&args.input)?;
    let topo = cli::build_topology(&inv, &args.plan)?;

    let gateways: Vec<_> = topo
        .gateways
        .iter()
        .filter(|g| described.gateway.as_deref().is_none_or(|n| n == g.gateway.key()))
        .collect();
    let [gw] = gateways.as_slice() else {
        eprintln!("error: {} Gateways match; name one with `gateway: namespace/name`", gateways.len());
        return Err(Failure::Invalid);
    };
    let listeners: Vec<_> =
        gw.listeners.iter().filter(|l| described.listener.as_deref().is_none_or(|n| n == l.listener.name)).collect();
    let [listener] = listeners.as_slice() else {
        eprintln!("error: {} listeners of {} match; name one with `listener:`", listeners.len(), gw.gateway.key());
        return Err(Failure::Invalid);
    };

    let method = described.method.as_deref().unwrap_or("POST").to_ascii_uppercase();
    let path = described.path.as_deref().unwrap_or("/mcp");
    let host = described.host.as_deref().unwrap_or("localhost");
    let mut headers: Vec<(String, String)> =
        described.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect();
    let body_bytes: Option<Vec<u8>> = described.body.as_ref().map(|b| match b {
        Value::String(s) => s.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    });
    if body_bytes.is_some() && !headers.iter().any(|(k, _)| k == "content-type") {
        headers.push(("content-type".into(), "application/json".into()));
    }

    let rule = listener.select_route(host, path, &method, &headers);
    let cluster = rule.and_then(|r| r.backends.first()).map(|(u, _)| u.cluster_name());
    println!("listener {}/{} (port {}), plan {}", gw.gateway.key(), listener.listener.name, listener.listener.port, listener.plan.hash);
    println!("route: {}", cluster.as_deref().map_or("no route matches (Envoy answers 404)".to_string(), |c| format!("cluster {c}")));

    let ev = Evaluator::from_plan(listener.plan.clone()).map_err(|e| {
        eprintln!("error: the compiled plan does not load: {e}");
        Failure::Invalid
    })?;
    let route = ev.route(cluster.as_deref());
    let header_refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let req = HttpRequest {
        method: &method,
        path,
        authority: host,
        port: listener.listener.port,
        headers: &header_refs,
        principal: described.principal.as_deref(),
    };
    let json_post = method == "POST"
        && headers.iter().any(|(k, v)| k == "content-type" && v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
    let encoding = headers.iter().find(|(k, _)| k == "content-encoding").map(|(_, v)| v.trim()).filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("identity"));
    let read = match (&body_bytes, encoding) {
        (_, Some(e)) => Err(mcp::NotMcp::Encoded { encoding: e.to_string() }),
        (Some(bytes), None) => mcp::read_body(bytes, ReadOptions::default()),
        (None, None) => Err(mcp::NotMcp::EmptyBody),
    };
    if body_bytes.as_ref().is_some_and(|b| b.len() > listener.plan.settings.max_body_bytes as usize) {
        println!("decision: REFUSED with 413 (body over {} bytes)", listener.plan.settings.max_body_bytes);
        return Ok(());
    }
    let body = match (&read, json_post) {
        (_, false) => BodyInput::None,
        (Ok(m), true) => BodyInput::Mcp(m),
        (Err(e), true) => BodyInput::NotMcp(e),
    };
    if let (Err(e), true) = (&read, json_post) {
        println!("body: not MCP ({e}): only rules without MCP constraints can allow it");
    }
    if !route.under_policy() {
        println!("decision: ALLOW (no policy applies to this listener and route)");
        return Ok(());
    }
    for m in route.explain(&req, body) {
        let index = m.message.map(|i| format!("[{i}] ")).unwrap_or_default();
        println!("{index}{}", m.what);
        for level in &m.levels {
            let matched = level.rules.iter().any(|r| r.outcome.is_ok());
            println!("  {} level: {}", level.level.as_str(), if matched { "allows" } else { "DENIES (no rule matches)" });
            for r in &level.rules {
                match &r.outcome {
                    Ok(()) => println!("    {} rule {}: matches", r.policy, r.rule),
                    Err(why) => println!("    {} rule {}: no ({why})", r.policy, r.rule),
                }
            }
        }
    }
    let decision = route.decide(&req, body);
    match decision.verdict {
        Verdict::Allow => println!("decision: ALLOW ({})", decision.summary()),
        Verdict::Deny(_) => {
            let reply = response::denial(body, &decision, false);
            println!("decision: DENY ({}); reply HTTP {} {}", decision.summary(), reply.status, reply.body);
        }
    }
    Ok(())
}
