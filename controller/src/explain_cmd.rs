//! `toolgate explain`: the decision for a described request, and why (level, policy, rule, the
//! matcher that failed). Everything comes from the filter's own request lifecycle
//! (`toolgate_policy::lifecycle`) run against a simulated host: classification (JSON POST, body
//! limit, encoding), the `Mcp-*` header check, the decision, authorizer calls and replies are the
//! filter's, and the reasons are the engine's record of the walk that decided
//! ([`toolgate_policy::eval::Record`], kept through `Host::recorder`). External authorizers are
//! assumed to allow unless the request file says `authorizers: deny`.
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
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::authz::assumed_answer;
use toolgate_policy::eval::{MessageRecord, Record, WalkRecord};
use toolgate_policy::lifecycle::headers;
use toolgate_policy::lifecycle::{self, CallAnswer, Callout, Counter, LogLevel, Plugin, Property};

use crate::cli::{self, Failure, InputArgs, PlanArgs};

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

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Assumed {
    #[default]
    Allow,
    Deny,
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
    let text = std::fs::read_to_string(&args.request).map_err(|e| {
        eprintln!("error: --request {}: {e}", args.request.display());
        Failure::Usage
    })?;
    let described: RequestFile = yaml_serde::from_str(&text).map_err(|e| {
        eprintln!("error: --request {}: {e}", args.request.display());
        Failure::Invalid
    })?;
    let inv = cli::load_inventory(&args.input)?;
    let topo = cli::build_topology(&inv, &args.plan, true)?;

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

    let method = described
        .method
        .as_deref()
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let path = described.path.as_deref().unwrap_or("/mcp");
    let host = described.host.as_deref().unwrap_or("localhost");
    let mut headers: Vec<(String, String)> = described
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
    let body_bytes: Option<Vec<u8>> = described
        .body
        .as_ref()
        .map(|b| match b {
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        })
        .filter(|b| !b.is_empty());
    if body_bytes.is_some() && !headers.iter().any(|(k, _)| k == "content-type") {
        headers.push(("content-type".into(), "application/json".into()));
    }

    let rule = listener.select_route(host, path, &method, &headers);
    let cluster = rule
        .and_then(|r| r.backends.first())
        .map(|(u, _)| u.cluster_name());
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

    // The filter's lifecycle, on a host that keeps the engine's record of why it decides.
    let mut plugin = Plugin::default();
    let plan_json = serde_json::to_vec(&listener.plan).map_err(|e| {
        eprintln!("error: the compiled plan does not serialise: {e}");
        Failure::Invalid
    })?;
    let mut root = Quiet::default();
    plugin.configure(&mut root, &plan_json);
    if let Some(error) = root.error {
        eprintln!("error: the compiled plan does not load: {error}");
        return Err(Failure::Invalid);
    }
    let metadata = described
        .claims
        .clone()
        .map(|c| toolgate_policy::jwt::metadata_with_claims(&Value::Object(c)));
    let mut host = Simulated {
        headers,
        method,
        path: path.to_string(),
        authority: host.to_string(),
        principal: described.principal.clone(),
        metadata,
        cluster,
        port: crate::model::port(&listener.listener),
        body: body_bytes.clone().unwrap_or_default(),
        assumed: described.authorizers.unwrap_or_default(),
        ..Simulated::default()
    };
    let mut request = plugin.request();
    let mut paused =
        request.on_request_headers(&mut host, body_bytes.is_none()) == lifecycle::Action::Pause;
    if let Some(bytes) = &body_bytes {
        if host.outcome.is_none() {
            paused =
                request.on_request_body(&mut host, bytes.len(), true) == lifecycle::Action::Pause;
        }
    }
    while let Some((token, answer)) = host.pending.take() {
        request.on_call_answer(&mut host, token, answer);
    }

    if let Some(walk) = &host.trace.enforced {
        print_walk(walk);
    }
    // docs/semantics.md §6a: the dry-run policies, as if they were enforced.
    if let Some(shadow) = &host.trace.shadow {
        println!(
            "dry-run policies on this route (not enforced): {}; as if enforced:",
            shadow.dry_run_policies.join(", ")
        );
        print_messages(&shadow.messages);
    }
    for call in &host.calls {
        println!("{call}");
    }
    let verdict = match (&host.outcome, &host.summary) {
        (Some((status, reply)), summary) => {
            println!(
                "decision: DENY ({}); reply HTTP {status} {reply}",
                summary.as_deref().unwrap_or("no decision recorded")
            );
            Verdict::NotAllowed
        }
        (None, Some(summary)) if !paused || host.resumed => {
            println!("decision: ALLOW ({summary})");
            Verdict::Allow
        }
        (None, None) if !paused || host.resumed => {
            println!("decision: ALLOW (no policy applies to this listener and route)");
            Verdict::Allow
        }
        _ => {
            println!("decision: none (the request would stay paused)");
            Verdict::NotAllowed
        }
    };
    if host.trace.shadow.is_some() {
        // The filter records the shadow decision after ` shadow=` when it differs from the decision.
        match host
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
    Ok(verdict)
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

/// A plan-loading host that keeps only why a plan was refused.
#[derive(Default)]
struct Quiet {
    error: Option<String>,
}

impl lifecycle::HostBase for Quiet {
    fn log(&mut self, level: LogLevel, message: &str) {
        if level == LogLevel::Error {
            self.error = Some(message.to_string());
        }
    }

    fn count(&mut self, _: Counter) {}

    fn now_ms(&mut self) -> u64 {
        0
    }
}

impl lifecycle::RootHost for Quiet {
    fn plugin_name(&mut self) -> String {
        "explain".into()
    }
    fn shared_get(&mut self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn shared_set(&mut self, _: &str, _: &[u8]) {}
}

/// The described request as the filter's host would present it.
#[derive(Default)]
struct Simulated {
    headers: Vec<(String, String)>,
    method: String,
    path: String,
    authority: String,
    principal: Option<String>,
    metadata: Option<Vec<u8>>,
    cluster: Option<String>,
    port: u16,
    body: Vec<u8>,
    assumed: Assumed,
    pending: Option<(u32, CallAnswer)>,
    calls: Vec<String>,
    /// The decision's summary (what the access log prints).
    summary: Option<String>,
    /// The engine's record of why it decided.
    trace: Record,
    outcome: Option<(u32, String)>,
    resumed: bool,
}

impl lifecycle::HostBase for Simulated {
    fn log(&mut self, _: LogLevel, _: &str) {}

    fn count(&mut self, _: Counter) {}

    fn now_ms(&mut self) -> u64 {
        0
    }
}

impl lifecycle::Host for Simulated {
    fn request_headers(&mut self) -> Option<Vec<u8>> {
        let mut pairs: Vec<(&str, &str)> = vec![
            (":method", &self.method),
            (":path", &self.path),
            (":authority", &self.authority),
            (":scheme", "https"),
        ];
        pairs.extend(self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Some(headers::serialize_map(&pairs))
    }
    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        match property {
            Property::PeerUriSan => self.principal.clone().map(String::into_bytes),
            Property::ClusterName => self.cluster.clone().map(String::into_bytes),
            Property::DestinationPort => Some(i64::from(self.port).to_le_bytes().to_vec()),
            Property::RequestProtocol => Some(b"HTTP/1.1".to_vec()),
            // A client asks for the host it names (SNI = the authority without its port).
            Property::RequestedServerName => Some(
                self.authority
                    .rsplit_once(':')
                    .map_or(self.authority.as_str(), |(h, _)| h)
                    .as_bytes()
                    .to_vec(),
            ),
        }
    }
    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        self.metadata.clone()
    }
    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        self.body
            .get(..size.min(self.body.len()))
            .map(<[u8]>::to_vec)
    }
    fn send_reply(&mut self, status: u32, _headers: &[(&str, &str)], body: &[u8]) -> bool {
        self.outcome = Some((status, String::from_utf8_lossy(body).into_owned()));
        true
    }
    fn resume(&mut self) {
        self.resumed = true;
    }
    fn call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        let (kind, cluster) = match callout {
            Callout::Grpc { cluster, .. } => ("gRPC Check", cluster),
            Callout::Http { cluster, .. } => ("HTTP", cluster),
        };
        let token = self.calls.len() as u32 + 1;
        let answer = if self.assumed == Assumed::Allow {
            "allows"
        } else {
            "denies"
        };
        self.calls.push(format!(
            "authorizer call {token}: {kind} to cluster {cluster} (assumed: it {answer})"
        ));
        self.pending = Some((
            token,
            assumed_answer(callout, self.assumed == Assumed::Allow),
        ));
        Some(token)
    }
    fn set_request_header(&mut self, _: &str, _: &str) {}
    fn add_request_header(&mut self, _: &str, _: &str) {}
    fn remove_request_header(&mut self, _: &str) {}
    // explain decides on the request; it has no response to filter (list filtering, docs/semantics.md §5).
    fn response_header(&mut self, _: &str) -> Option<String> {
        None
    }
    fn remove_response_header(&mut self, _: &str) {}
    fn response_body(&mut self, _: usize) -> Option<Vec<u8>> {
        None
    }
    fn replace_response_body(&mut self, _: usize, _: &[u8]) -> bool {
        false
    }
    fn record(&mut self, summary: &str) {
        self.summary = Some(summary.to_string());
    }
    const RECORDS: bool = true;
    fn recorder(&mut self) -> Option<&mut Record> {
        Some(&mut self.trace)
    }
    fn logs_at(&mut self, _: LogLevel) -> bool {
        false
    }
}
