//! `toolgate explain`: the decision for a described request, and why (level, policy, rule, the
//! matcher that failed). The decision comes from the filter's own request lifecycle
//! (`toolgate_policy::lifecycle`) run against a simulated host, so classification (JSON POST, body
//! limit, encoding), authorizer calls and replies are the filter's; external authorizers are
//! assumed to allow unless the request file says `authorizers: deny`.
//!
//! Both MCP revisions are described the same way: a 2025-11-25 request (`initialize`, a session's
//! `mcp-session-id`, a GET stream, DELETE) or a 2026-07-28 one (`server/discover`,
//! `subscriptions/listen`, `params._meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//! headers, values sent as `=?base64?…?=`). The headers are compared with each message as the filter
//! does, before any policy: a mismatch is shown, and the decision is the filter's HTTP 400 with
//! `-32020`. A `subscriptions/listen` is explained as the set the filter judges: its list-change part,
//! then each `resourceSubscriptions` URI as a `resources/subscribe` of that URI.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::authz::assumed_answer;
use toolgate_policy::eval::{mcp_header_value, BodyInput, Evaluator, HttpRequest, MessageExplanation};
use toolgate_policy::lifecycle::headers::{self, Classified};
use toolgate_policy::lifecycle::{self, CallAnswer, Callout, Counter, LogLevel, Plugin, Property};
use toolgate_policy::mcp::{self, McpMessage, ReadOptions};

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

pub fn run(args: &ExplainArgs) -> Result<(), Failure> {
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

    let gateways: Vec<_> =
        topo.gateways.iter().filter(|g| described.gateway.as_deref().is_none_or(|n| n == g.gateway.key())).collect();
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
    let mut headers: Vec<(String, String)> = described
        .headers
        .iter()
        .flat_map(|(k, v)| {
            let values = match v {
                HeaderValues::One(one) => std::slice::from_ref(one),
                HeaderValues::Many(many) => many.as_slice(),
            };
            values.iter().map(move |v| (k.to_ascii_lowercase(), v.clone()))
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
    let cluster = rule.and_then(|r| r.backends.first()).map(|(u, _)| u.cluster_name());
    println!(
        "listener {}/{} (port {}), plan {}",
        gw.gateway.key(),
        listener.listener.name,
        listener.listener.port,
        listener.plan.hash
    );
    println!(
        "route: {}",
        cluster.as_deref().map_or("no route matches (Envoy answers 404)".to_string(), |c| format!("cluster {c}"))
    );

    let ev = Evaluator::from_plan(listener.plan.clone()).map_err(|e| {
        eprintln!("error: the compiled plan does not load: {e}");
        Failure::Invalid
    })?;
    let route = ev.route(cluster.as_deref());
    let header_refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let metadata = described.claims.clone().map(|c| toolgate_policy::jwt::metadata_with_claims(&Value::Object(c)));
    let auth = metadata.as_deref().and_then(toolgate_policy::jwt::Auth::from_metadata);
    let req = HttpRequest {
        method: &method,
        path,
        authority: host,
        port: crate::model::port(&listener.listener),
        headers: &header_refs,
        principal: described.principal.as_deref(),
        auth: auth.as_ref(),
        time_ms: 0,
    };
    let classified = headers::classify(
        &method,
        header_refs.iter().find(|(k, _)| *k == "content-type").map_or("", |(_, v)| v),
        header_refs.iter().find(|(k, _)| *k == "content-encoding").map_or("", |(_, v)| v),
        body_bytes.is_none(),
    );
    let read = match (&classified, &body_bytes) {
        (Classified::JsonBody { encoded: Some(e) }, _) => Err(mcp::NotMcp::Encoded { encoding: e.clone() }),
        (&Classified::BodyNotRead(method), _) => Err(mcp::NotMcp::BodyNotRead { method }),
        (Classified::JsonBody { encoded: None }, Some(bytes)) => mcp::read_body(bytes, ReadOptions::default()),
        _ => Err(mcp::NotMcp::EmptyBody),
    };
    let body = match (&classified, &read) {
        (Classified::Http, _) => BodyInput::None,
        (_, Ok(m)) => BodyInput::Mcp(m),
        (_, Err(e)) => BodyInput::NotMcp(e),
    };
    if let BodyInput::NotMcp(e) = body {
        println!("body: not MCP ({e}): only rules without MCP constraints can allow it");
    }
    if route.under_policy() {
        let mismatch = match body {
            BodyInput::Mcp(m) => explain_mcp_headers(&headers, m.messages(), m.is_batch()),
            _ => false,
        };
        if mismatch {
            println!("headers: mismatch, checked before any policy (MCP 2026-07-28 HeaderMismatch): HTTP 400, -32020; the rules below are not consulted");
        }
        if route.is_default_deny() {
            println!("no policy applies to this route; the Gateway denies by default: only the MCP base protocol passes");
        }
        // A subscriptions/listen comes with the resources/subscribe of each URI, as the filter judges it.
        print_explanations(&route.explain(&req, body));
    }
    // docs/semantics.md §6a: the dry-run policies, as if they were enforced.
    let shadow = ev.shadow_route(cluster.as_deref());
    if let Some(shadow) = &shadow {
        println!("dry-run policies on this route (not enforced): {}; as if enforced:", shadow.dry_run_policies().join(", "));
        print_explanations(&shadow.explain(&req, body));
    }

    // The decision, as the filter reaches it.
    let mut plugin = Plugin::default();
    let plan_json = serde_json::to_vec(&listener.plan).map_err(|e| {
        eprintln!("error: the compiled plan does not serialise: {e}");
        Failure::Invalid
    })?;
    plugin.configure(&mut Quiet, &plan_json);
    let mut host = Simulated {
        headers: headers.clone(),
        method: method.clone(),
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
    let mut paused = request.on_request_headers(&mut host, body_bytes.is_none()) == lifecycle::Action::Pause;
    if let Some(bytes) = &body_bytes {
        if host.outcome.is_none() {
            paused = request.on_request_body(&mut host, bytes.len(), true) == lifecycle::Action::Pause;
        }
    }
    while let Some((token, answer)) = host.pending.take() {
        request.on_call_answer(&mut host, token, answer);
    }
    for call in &host.calls {
        println!("{call}");
    }
    match (&host.outcome, &host.record) {
        (Some((status, reply)), record) => {
            println!("decision: DENY ({}); reply HTTP {status} {reply}", record.as_deref().unwrap_or("no decision recorded"))
        }
        (None, Some(record)) if !paused || host.resumed => println!("decision: ALLOW ({record})"),
        (None, None) if !paused || host.resumed => {
            println!("decision: ALLOW (no policy applies to this listener and route)")
        }
        _ => println!("decision: none (the request would stay paused)"),
    }
    if shadow.is_some() {
        // The filter records the shadow decision after ` shadow=` when it differs from the decision.
        match host.record.as_deref().and_then(|r| r.split_once(" shadow=")) {
            Some((_, rest)) => {
                let summary = rest.rsplit_once(" dry-run=").map_or(rest, |(s, _)| s);
                let verdict = if summary.starts_with("allow") { "ALLOW" } else { "DENY" };
                println!(
                    "shadow decision (dry-run policies enforced): {verdict} ({summary}): differs, counted as toolgate.shadow.{}",
                    verdict.to_ascii_lowercase()
                );
            }
            None => println!("shadow decision (dry-run policies enforced): the same as the decision"),
        }
    }
    Ok(())
}

/// Prints what `Route::explain` says; `part`: the batch index and a prefix, for the parts of a
/// `subscriptions/listen`.
fn print_explanations(explained: &[MessageExplanation]) {
    for m in explained {
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
}

/// Compares the MCP 2026-07-28 request headers with each message as the filter does (docs/semantics.md §4), and
/// prints each comparison; true when one disagrees (the filter then answers HTTP 400, -32020).
fn explain_mcp_headers(headers: &[(String, String)], messages: &[McpMessage<'_>], batch: bool) -> bool {
    const CHECKED: [(&str, &str); 3] =
        [("mcp-method", "Mcp-Method"), ("mcp-name", "Mcp-Name"), ("mcp-protocol-version", "MCP-Protocol-Version")];
    let values = |name: &str| headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    let mut mismatch = false;
    for (name, shown) in CHECKED {
        let v = values(name);
        if v.len() > 1 {
            println!("header {shown}: sent {} times: a mismatch (a server may read another field than this check)", v.len());
            mismatch = true;
        }
    }
    if mismatch {
        return true;
    }
    for (i, msg) in messages.iter().enumerate() {
        let at = if batch { format!(" (batch element {i})") } else { String::new() };
        for (name, shown) in CHECKED {
            let Some(&sent) = values(name).first() else { continue };
            let (header, body, field) = match name {
                "mcp-protocol-version" => {
                    let Some(v) = msg.protocol_version.as_deref() else {
                        println!(
                            "header {shown}: {sent:?}; the body has no params._meta protocol version{at}: nothing to compare"
                        );
                        continue;
                    };
                    (Some(Cow::Borrowed(sent.trim())), Some(v), "params._meta protocolVersion")
                }
                "mcp-method" => (mcp_header_value(name, sent), msg.method.as_deref(), "method"),
                _ => {
                    let resources = msg.method.as_deref().is_some_and(|m| m.starts_with("resources/"));
                    let (value, field) =
                        if resources { (msg.uri.as_deref(), "params.uri") } else { (msg.name.as_deref(), "params.name") };
                    (mcp_header_value(name, sent), value, field)
                }
            };
            let shown_value = match &header {
                Some(h) if h.as_ref() != sent => format!("{sent:?} (decoded {h:?})"),
                Some(_) => format!("{sent:?}"),
                None => format!("{sent:?} (not valid base64 UTF-8)"),
            };
            if header.is_some() && header.as_deref() == body {
                println!("header {shown}: {shown_value} agrees with the body's {field}{at}");
            } else {
                let body = body.map_or_else(|| "absent".to_string(), |b| format!("{b:?}"));
                println!("header {shown}: {shown_value} DISAGREES with the body's {field} ({body}){at}");
                mismatch = true;
            }
        }
    }
    mismatch
}

/// A plan-loading host that keeps nothing.
struct Quiet;

impl lifecycle::HostBase for Quiet {
    fn log(&mut self, _: LogLevel, _: &str) {}

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
    record: Option<String>,
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
        let mut pairs: Vec<(&str, &str)> =
            vec![(":method", &self.method), (":path", &self.path), (":authority", &self.authority), (":scheme", "https")];
        pairs.extend(self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Some(headers::serialize_map(&pairs))
    }
    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        match property {
            Property::PeerUriSan => self.principal.clone().map(String::into_bytes),
            Property::ClusterName => self.cluster.clone().map(String::into_bytes),
            Property::DestinationPort => Some(i64::from(self.port).to_le_bytes().to_vec()),
            Property::RequestProtocol => Some(b"HTTP/1.1".to_vec()),
        }
    }
    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        self.metadata.clone()
    }
    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        self.body.get(..size.min(self.body.len())).map(<[u8]>::to_vec)
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
        let answer = if self.assumed == Assumed::Allow { "allows" } else { "denies" };
        self.calls.push(format!("authorizer call {token}: {kind} to cluster {cluster} (assumed: it {answer})"));
        self.pending = Some((token, assumed_answer(callout, self.assumed == Assumed::Allow)));
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
        self.record = Some(summary.to_string());
    }
    fn logs_at(&mut self, _: LogLevel) -> bool {
        false
    }
}
