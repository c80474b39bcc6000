//! What `toolgate explain` answers with: a described request run through the filter's own request
//! lifecycle (`toolgate_policy::lifecycle`) against a simulated host. Classification (JSON POST,
//! body limit, encoding), the `Mcp-*` header check, the decision, authorizer calls and replies are
//! the filter's, and the reasons are the engine's record of the walk that decided
//! ([`toolgate_policy::eval::Record`], kept through `Host::recorder`). External authorizers are
//! assumed to allow unless the request says otherwise ([`Assumed`]). The command
//! (`crate::commands::explain`) reads the request file and prints what this returns.

use serde::Deserialize;
use serde_json::Value;
use toolgate_policy::authz::assumed_answer;
use toolgate_policy::eval::Record;
use toolgate_policy::lifecycle::{
    self, CallAnswer, Callout, Counter, HeaderSink, LogLevel, Plugin, Property,
};

use crate::topology::ListenerOut;

/// How external authorizers are assumed to answer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assumed {
    #[default]
    Allow,
    Deny,
}

/// A described request, with the command's defaults applied.
pub struct Request {
    /// Upper-case.
    pub method: String,
    pub path: String,
    /// The host the request names (`:authority`).
    pub authority: String,
    /// Lower-case names; a repeated field is repeated.
    pub headers: Vec<(String, String)>,
    /// The caller's SPIFFE ID (from its client certificate); None: no identity.
    pub principal: Option<String>,
    /// The payload of a JWT Envoy's jwt_authn verified (docs/semantics.md §6b); None: no token.
    pub claims: Option<serde_json::Map<String, Value>>,
    /// The body; None: no body (an empty one is none, as Envoy sees it).
    pub body: Option<Vec<u8>>,
    pub authorizers: Assumed,
}

/// The cluster the listener's routes send `request` to; None when no route matches.
pub fn cluster(listener: &ListenerOut, request: &Request) -> Option<String> {
    let rule = listener.select_route(
        &request.authority,
        &request.path,
        &request.method,
        &request.headers,
    );
    rule.and_then(|r| r.backends.first())
        .map(|(u, _)| u.cluster_name())
}

/// What the filter's lifecycle did with a request.
pub struct Outcome {
    /// The engine's record of why it decided: the enforced route's walk, and the shadow route's.
    pub record: Record,
    /// The authorizer calls made, one line each.
    pub calls: Vec<String>,
    /// The decision's summary (what the access log prints).
    pub summary: Option<String>,
    /// The reply sent instead of the upstream's: status and body.
    pub reply: Option<(u32, String)>,
    /// The request went on: the filter did not pause it, or resumed it.
    pub went_on: bool,
}

/// Runs `request`, routed to `cluster`, through the lifecycle of a filter configured with
/// `listener`'s plan; Err: why the plan does not load.
pub fn run(
    listener: &ListenerOut,
    request: &Request,
    cluster: Option<String>,
) -> Result<Outcome, String> {
    // The filter's lifecycle, on a host that keeps the engine's record of why it decides.
    let mut plugin = Plugin::default();
    let plan_json = serde_json::to_vec(&listener.plan)
        .map_err(|e| format!("the compiled plan does not serialise: {e}"))?;
    let mut root = Quiet::default();
    plugin.configure(&mut root, &plan_json);
    if let Some(error) = root.error {
        return Err(format!("the compiled plan does not load: {error}"));
    }
    let metadata = request
        .claims
        .clone()
        .map(|c| toolgate_policy::jwt::metadata_with_claims(&Value::Object(c)));
    let mut host = Simulated {
        headers: request.headers.clone(),
        method: request.method.clone(),
        path: request.path.clone(),
        authority: request.authority.clone(),
        principal: request.principal.clone(),
        metadata,
        cluster,
        port: crate::model::port(&listener.listener),
        body: request.body.clone().unwrap_or_default(),
        assumed: request.authorizers,
        ..Simulated::default()
    };
    let mut filter = plugin.request();
    let mut paused =
        filter.on_request_headers(&mut host, request.body.is_none()) == lifecycle::Action::Pause;
    if let Some(bytes) = &request.body {
        if host.outcome.is_none() {
            paused =
                filter.on_request_body(&mut host, bytes.len(), true) == lifecycle::Action::Pause;
        }
    }
    while let Some((token, answer)) = host.pending.take() {
        filter.on_call_answer(&mut host, token, answer);
    }
    Ok(Outcome {
        went_on: !paused || host.resumed,
        record: host.trace,
        calls: host.calls,
        summary: host.summary,
        reply: host.outcome,
    })
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
    fn request_headers(&mut self, headers: &mut HeaderSink<'_>) -> bool {
        let pseudo = [
            (":method", self.method.as_str()),
            (":path", self.path.as_str()),
            (":authority", self.authority.as_str()),
            (":scheme", "https"),
        ];
        let given = self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        for (name, value) in pseudo.into_iter().chain(given) {
            headers.push(name.as_bytes(), value.as_bytes());
        }
        true
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
