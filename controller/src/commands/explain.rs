//! `toolgate explain`: the decision for a described request, and why (level, policy, rule, the
//! matcher that failed). Everything comes from the filter's own request lifecycle run against a
//! simulated host (`crate::explain`); this reads the request file and prints the answer. External
//! authorizers are assumed to allow unless the request file says `authorizers: deny`.
//!
//! Both MCP revisions are described the same way: a 2025-11-25 request (`initialize`, a session's
//! `mcp-session-id`, a GET stream, DELETE) or a 2026-07-28 one (`server/discover`,
//! `subscriptions/listen`, `params._meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//! headers, values sent as `=?base64?…?=`). The headers are compared with each message before any
//! policy: the comparisons are shown, and a mismatch is the filter's HTTP 400 with `-32020`. A
//! `subscriptions/listen` is shown as the set the filter judges: its list-change part, then each
//! `resourceSubscriptions` URI as a `resources/subscribe` of that URI. The walk stops where the
//! request is denied: what follows was not consulted and is not shown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::eval::{MessageRecord, WalkRecord};

use crate::cli::{self, Failure, InputArgs, PlanArgs};
use crate::explain::{self, Assumed, Outcome, Request};
use crate::topology::{GatewayOut, ListenerOut, Topology};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The request, as YAML or JSON: gateway (ns/name), listener, method, path, host, headers
    /// (name: value, or name: [value, ...] for a repeated field), principal (SPIFFE ID), claims (a
    /// verified JWT payload, e.g. `{iss: https://issuer, sub: agent-7, scope: tools:read}`), body (JSON,
    /// or a string taken as the raw body), authorizers (allow | deny). E.g. a 2026-07-28 call:
    /// `headers: {MCP-Protocol-Version: 2026-07-28, Mcp-Method: tools/call, Mcp-Name: get-sum}` and
    /// `body: {jsonrpc: "2.0", id: 1, method: tools/call, params: {name: get-sum}}`.
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
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
    /// Header fields; a list of values is a repeated field.
    #[serde(default)]
    headers: BTreeMap<String, HeaderValues>,
    /// The caller's SPIFFE ID (from its client certificate); absent = no identity.
    principal: Option<String>,
    /// The payload of a JWT as Envoy's jwt_authn verified it (docs/semantics.md §6b): what CEL
    /// rules read as `request.auth.claims`; absent = no token.
    claims: Option<serde_json::Map<String, Value>>,
    /// A JSON body (an MCP message or a batch), or a string taken as the raw body.
    body: Option<Value>,
    /// How external authorizers answer: `allow` (the default) or `deny`.
    authorizers: Option<Assumed>,
}

/// One header value, or the values of a repeated field.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

/// What `explain` exits with, as `kubectl auth can-i` does: 0 when the request would pass, 1 when
/// it would not, so that a pipeline can gate on it; 2 (any error) tells it apart from a denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Denied, or held for good (`decision: none`): either way the request does not reach its
    /// upstream.
    NotAllowed,
}

impl Verdict {
    pub fn exit_code(result: Result<Verdict, Failure>) -> u8 {
        match result {
            Ok(Verdict::Allow) => 0,
            Ok(Verdict::NotAllowed) => 1,
            Err(Failure::Usage | Failure::Invalid) => 2,
        }
    }
}

/// Prints the explanation; the decision enforced (not the shadow one of dry-run policies) is the
/// verdict.
pub fn run(args: &ExplainArgs) -> Result<Verdict, Failure> {
    let described = read_request_file(&args.request)?;
    let inv = cli::load_inventory(&args.input)?;
    let topo = cli::build_topology(&inv, &args.plan, true)?;
    let (gw, listener) = select(&topo, &described)?;
    let request = described.request();
    let cluster = explain::cluster(listener, &request);
    println!(
        "listener {}/{} (port {}), plan {}",
        gw.gateway.key(),
        listener.listener.name,
        listener.listener.port,
        listener.plan.hash
    );
    println!(
        "route: {}",
        cluster.as_deref().map_or(
            "no route matches (Envoy answers 404)".to_string(),
            |c| format!("cluster {c}")
        )
    );
    let outcome = explain::run(listener, &request, cluster).map_err(|e| {
        eprintln!("error: {e}");
        Failure::Invalid
    })?;
    if let Some(walk) = &outcome.record.enforced {
        print_walk(walk);
    }
    // docs/semantics.md §6a: the dry-run policies, as if they were enforced.
    if let Some(shadow) = &outcome.record.shadow {
        println!(
            "dry-run policies on this route (not enforced): {}; as if enforced:",
            shadow.dry_run_policies.join(", ")
        );
        print_messages(&shadow.messages);
    }
    for call in &outcome.calls {
        println!("{call}");
    }
    let verdict = print_decision(&outcome);
    if outcome.record.shadow.is_some() {
        print_shadow_decision(&outcome);
    }
    Ok(verdict)
}

fn read_request_file(path: &Path) -> Result<RequestFile, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        eprintln!("error: --request {}: {e}", path.display());
        Failure::Usage
    })?;
    yaml_serde::from_str(&text).map_err(|e| {
        eprintln!("error: --request {}: {e}", path.display());
        Failure::Invalid
    })
}

/// The Gateway and listener the request file names, or the only ones.
fn select<'t>(
    topo: &'t Topology,
    described: &RequestFile,
) -> Result<(&'t GatewayOut, &'t ListenerOut), Failure> {
    let gateways: Vec<_> = topo
        .gateways
        .iter()
        .filter(|g| {
            described
                .gateway
                .as_deref()
                .is_none_or(|n| n == g.gateway.key())
        })
        .collect();
    let [gw] = gateways.as_slice() else {
        eprintln!(
            "error: {} Gateways match; name one with `gateway: namespace/name`",
            gateways.len()
        );
        return Err(Failure::Invalid);
    };
    let listeners: Vec<_> = gw
        .listeners
        .iter()
        .filter(|l| {
            described
                .listener
                .as_deref()
                .is_none_or(|n| n == l.listener.name)
        })
        .collect();
    let [listener] = listeners.as_slice() else {
        eprintln!(
            "error: {} listeners of {} match; name one with `listener:`",
            listeners.len(),
            gw.gateway.key()
        );
        return Err(Failure::Invalid);
    };
    Ok((gw, listener))
}

impl RequestFile {
    /// The request described, with the defaults: `POST /mcp`, host `localhost`, a JSON body's
    /// `content-type`.
    fn request(&self) -> Request {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .flat_map(|(k, v)| {
                let values = match v {
                    HeaderValues::One(one) => std::slice::from_ref(one),
                    HeaderValues::Many(many) => many.as_slice(),
                };
                values
                    .iter()
                    .map(move |v| (k.to_ascii_lowercase(), v.clone()))
            })
            .collect();
        // An empty body is none, as Envoy sees it (the headers end the stream).
        let body: Option<Vec<u8>> = self
            .body
            .as_ref()
            .map(|b| match b {
                Value::String(s) => s.clone().into_bytes(),
                other => other.to_string().into_bytes(),
            })
            .filter(|b| !b.is_empty());
        if body.is_some() && !headers.iter().any(|(k, _)| k == "content-type") {
            headers.push(("content-type".into(), "application/json".into()));
        }
        Request {
            method: self
                .method
                .as_deref()
                .unwrap_or("POST")
                .to_ascii_uppercase(),
            path: self.path.as_deref().unwrap_or("/mcp").to_string(),
            authority: self.host.as_deref().unwrap_or("localhost").to_string(),
            headers,
            principal: self.principal.clone(),
            claims: self.claims.clone(),
            body,
            authorizers: self.authorizers.unwrap_or_default(),
        }
    }
}

/// Prints the decision enforced: DENY with the reply, ALLOW, or none (the request stays paused).
fn print_decision(outcome: &Outcome) -> Verdict {
    match (&outcome.reply, &outcome.summary) {
        (Some((status, reply)), summary) => {
            println!(
                "decision: DENY ({}); reply HTTP {status} {reply}",
                summary.as_deref().unwrap_or("no decision recorded")
            );
            Verdict::NotAllowed
        }
        (None, Some(summary)) if outcome.went_on => {
            println!("decision: ALLOW ({summary})");
            Verdict::Allow
        }
        (None, None) if outcome.went_on => {
            println!("decision: ALLOW (no policy applies to this listener and route)");
            Verdict::Allow
        }
        _ => {
            println!("decision: none (the request would stay paused)");
            Verdict::NotAllowed
        }
    }
}

/// Prints the shadow decision (docs/semantics.md §6a): the dry-run policies' as if enforced.
fn print_shadow_decision(outcome: &Outcome) {
    // The filter records the shadow decision after ` shadow=` when it differs from the decision.
    match outcome
        .summary
        .as_deref()
        .and_then(|r| r.split_once(" shadow="))
    {
        Some((_, rest)) => {
            let summary = rest.rsplit_once(" dry-run=").map_or(rest, |(s, _)| s);
            let verdict = if summary.starts_with("allow") {
                "ALLOW"
            } else {
                "DENY"
            };
            println!(
                "shadow decision (dry-run policies enforced): {verdict} ({summary}): differs, counted as toolgate.shadow.{}",
                verdict.to_ascii_lowercase()
            );
        }
        None => {
            println!("shadow decision (dry-run policies enforced): the same as the decision")
        }
    }
}

/// Prints the engine's record of the enforced route's walk: how the body was read, the `Mcp-*`
/// header comparisons (docs/semantics.md §4), then each message the walk judged.
fn print_walk(walk: &WalkRecord) {
    if let Some(e) = &walk.not_mcp {
        println!("body: not MCP ({e}): only rules without MCP constraints can allow it");
    }
    if !walk.under_policy {
        return;
    }
    for h in &walk.headers {
        let at = h
            .message
            .map(|i| format!(" (batch element {i})"))
            .unwrap_or_default();
        println!("header {}: {}{at}", h.header, h.text);
    }
    if walk.headers.iter().any(|h| !h.agrees) {
        println!("headers: mismatch, checked before any policy (MCP 2026-07-28 HeaderMismatch): HTTP 400, -32020; no rule is consulted");
    }
    if walk.default_deny {
        println!("no policy applies to this route; the Gateway denies by default: only the MCP base protocol passes");
    }
    if walk.excepted_host {
        println!("the host is one the default deny lets through (defaultDenyExceptHosts): no rule is consulted");
    }
    print_messages(&walk.messages);
}

/// Prints the messages a walk judged (a `subscriptions/listen` followed by the `resources/subscribe`
/// of each URI, as the filter judges it), level by level, rule by rule. The walk stops where the
/// request is denied (or an authorizer is asked): what follows was not consulted.
fn print_messages(messages: &[MessageRecord]) {
    for m in messages {
        let index = m.message.map(|i| format!("[{i}] ")).unwrap_or_default();
        println!("{index}{}", m.what);
        for level in &m.levels {
            let name = level.level.as_str();
            if let Some((policy, applies)) = &level.external_auth {
                let what = if *applies {
                    "applies: its authorizer is asked"
                } else {
                    "does not apply"
                };
                println!("  {name} level: ExternalAuth policy {policy} {what}");
                if level.rules.is_empty() {
                    continue;
                }
            }
            println!(
                "  {name} level: {}",
                if level.allows() {
                    "allows"
                } else {
                    "DENIES (no rule matches)"
                }
            );
            for r in &level.rules {
                match &r.outcome {
                    Ok(()) => println!("    {} rule {}: matches", r.policy, r.rule),
                    Err(why) => println!("    {} rule {}: no ({why})", r.policy, r.rule),
                }
            }
        }
    }
}
