//! A fake proxy host for driving the [lifecycle](crate::lifecycle) natively: what the lifecycle
//! tests, the `lifecycle` fuzz target (fuzz/) and the lifecycle benchmark (benches/lifecycle.rs) run
//! requests against. Behind the `test-host` feature (and `cfg(test)`): the filter never builds it.
//!
//! It serves a request's attributes from its fields and records what the lifecycle did (replies,
//! resumes, calls, header edits, records, logs, counters). It also checks what every host may
//! assume of the lifecycle: a reply's status is a final HTTP status and its headers are clean, a
//! call has a timeout, an edited header has a name, a summary cannot end the access log's quotes.
//!
//! [`oracle`]: independent judges of the MCP body reader (strict JSON, depth, case-folded keys), for
//! the reader's tests and the fuzz targets.

use prost::Message;
use toolgate_ext_authz_proto::envoy::config::core::v3::GrpcService;
use toolgate_ext_authz_proto::envoy::service::auth::v3::CheckRequest;

use crate::lifecycle::{
    Callout, Counter, HeaderSink, Host, HostBase, LogLevel, Property, RootHost,
};

pub mod oracle;

/// A call the lifecycle made, with the token the host gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum Made {
    /// `authority`: of the serialised GrpcService upstream (its cluster is checked to be `cluster`).
    Grpc {
        token: u32,
        cluster: String,
        authority: String,
        message: Vec<u8>,
        timeout_ms: u32,
    },
    Http {
        token: u32,
        cluster: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

impl Made {
    pub fn token(&self) -> u32 {
        match self {
            Made::Grpc { token, .. } | Made::Http { token, .. } => *token,
        }
    }
}

/// A local reply: status, headers, body.
pub type Sent = (u32, Vec<(String, String)>, Vec<u8>);

/// The first token the host gives a call (then 101, 102, ...).
pub const FIRST_TOKEN: u32 = 101;

#[derive(Default, Clone)]
pub struct FakeHost {
    // The request.
    pub headers: Vec<(String, String)>,
    pub principal: Option<String>,
    /// The TLS server name (SNI) of the connection.
    pub server_name: Option<String>,
    /// The dynamic metadata (a serialised `Metadata`, e.g. [`crate::jwt::metadata_with_claims`]).
    pub metadata: Option<Vec<u8>>,
    pub cluster: Option<String>,
    /// The listener port.
    pub port: i64,
    /// `request.protocol` (empty: `HTTP/1.1`).
    pub protocol: String,
    pub body: Vec<u8>,
    /// The host logs at debug level.
    pub debug: bool,
    /// Calls are refused (e.g. no such cluster).
    pub refuse_calls: bool,
    pub now: u64,
    /// Shared data (root context).
    pub shared: Vec<(String, Vec<u8>)>,
    pub plugin_name: String,
    /// A module built without the response callbacks (root context).
    pub no_response_callbacks: bool,
    // What the lifecycle did.
    pub replies: Vec<Sent>,
    pub resumed: u32,
    pub calls: Vec<Made>,
    pub edits: Vec<String>,
    pub records: Vec<String>,
    pub logs: Vec<(LogLevel, String)>,
    pub counts: Vec<Counter>,
    // The response: its headers, the body buffered now (the host's buffer).
    pub response_headers: Vec<(String, String)>,
    pub response_body: Vec<u8>,
    /// Some: the host keeps the engine's record of why it decides, as `toolgate explain`'s does.
    pub trace: Option<crate::eval::Record>,
    /// The host holds requests itself (as the dynamic module: [`Host::holds_request`]).
    pub holds_request: bool,
}

pub fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl FakeHost {
    /// A JSON POST of `body` to `/mcp` on listener port 8443, routed to `cluster`.
    pub fn post(body: &[u8], cluster: Option<&str>) -> Self {
        FakeHost {
            headers: pairs(&[
                (":method", "POST"),
                (":path", "/mcp"),
                (":authority", "gw"),
                ("content-type", "application/json"),
            ]),
            body: body.to_vec(),
            cluster: cluster.map(str::to_string),
            port: 8443,
            ..FakeHost::default()
        }
    }

    /// A GET of `/mcp` on listener port 8443, routed to `cluster`.
    pub fn get(cluster: Option<&str>) -> Self {
        FakeHost {
            headers: pairs(&[(":method", "GET"), (":path", "/mcp"), (":authority", "gw")]),
            cluster: cluster.map(str::to_string),
            port: 8443,
            ..FakeHost::default()
        }
    }

    /// With a JWT payload as Envoy's jwt_authn verified it (docs/semantics.md §6b).
    pub fn token(mut self, claims: serde_json::Value) -> Self {
        self.metadata = Some(crate::jwt::metadata_with_claims(&claims));
        self
    }

    /// With the caller's SPIFFE ID.
    pub fn caller(mut self, principal: &str) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// With one more request header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The last local reply's status and body.
    pub fn reply(&self) -> (u32, String) {
        let (status, _, body) = self.replies.last().expect("a reply");
        (*status, String::from_utf8_lossy(body).into_owned())
    }

    /// The CheckRequest of the `i`th call (a gRPC call).
    pub fn check_request(&self, i: usize) -> CheckRequest {
        match &self.calls[i] {
            Made::Grpc { message, .. } => {
                CheckRequest::decode(message.as_slice()).expect("a CheckRequest")
            }
            other => panic!("not gRPC: {other:?}"),
        }
    }

    /// Requests allowed (counted `allow` or `allow_no_policy`).
    pub fn allows(&self) -> usize {
        self.counts
            .iter()
            .filter(|c| matches!(c, Counter::Allow | Counter::AllowNoPolicy))
            .count()
    }

    /// Requests denied by a decision (authorizer failures are counted besides the decision).
    pub fn denies(&self) -> usize {
        self.counts
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Counter::DenyGateway
                        | Counter::DenyBackend
                        | Counter::DenyMcpHeader
                        | Counter::DenyNoPlan
                        | Counter::DenyDefault
                        | Counter::TooLarge
                )
            })
            .count()
    }

    /// Forgets what the lifecycle did (keeps the request and the buffers' capacity).
    pub fn clear(&mut self) {
        self.replies.clear();
        self.resumed = 0;
        self.calls.clear();
        self.edits.clear();
        self.records.clear();
        self.logs.clear();
        self.counts.clear();
    }
}

impl HostBase for FakeHost {
    fn log(&mut self, level: LogLevel, message: &str) {
        assert!(!message.is_empty());
        self.logs.push((level, message.into()));
    }

    fn count(&mut self, counter: Counter) {
        self.counts.push(counter);
    }

    fn now_ms(&mut self) -> u64 {
        self.now
    }
}

impl Host for FakeHost {
    fn holds_request(&self) -> bool {
        self.holds_request
    }

    /// As one buffer handed over whole, as the Wasm filter hands over its header map (each name and
    /// value followed by a NUL); the dynamic module's way, pair by pair, gives the same headers
    /// (lifecycle/headers.rs's tests).
    fn request_headers(&mut self, headers: &mut HeaderSink<'_>) -> bool {
        let mut buffer = Vec::new();
        for (k, v) in &self.headers {
            buffer.extend(k.as_bytes());
            buffer.push(0);
            buffer.extend(v.as_bytes());
            buffer.push(0);
        }
        let mut lengths = self.headers.iter().map(|(k, v)| (k.len(), v.len()));
        let mut at = 0;
        headers.adopt(buffer, 0, |_| {
            let (k, v) = lengths.next()?;
            let name = at..at + k;
            let value = name.end + 1..name.end + 1 + v;
            at = value.end + 1;
            Some((name, value))
        });
        true
    }

    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        match property {
            Property::PeerUriSan => self.principal.clone().map(String::into_bytes),
            Property::ClusterName => self.cluster.clone().map(String::into_bytes),
            Property::RequestedServerName => self.server_name.clone().map(String::into_bytes),
            Property::DestinationPort => Some(self.port.to_le_bytes().to_vec()),
            Property::RequestProtocol => Some(if self.protocol.is_empty() {
                b"HTTP/1.1".to_vec()
            } else {
                self.protocol.clone().into_bytes()
            }),
        }
    }

    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        self.metadata.clone()
    }

    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        Some(self.body.get(..size.min(self.body.len()))?.to_vec())
    }

    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
        assert!((200..600).contains(&status), "reply status {status}");
        assert!(
            headers
                .iter()
                .all(|(n, v)| !n.is_empty() && !v.contains(['\r', '\n'])),
            "reply headers {headers:?}"
        );
        self.replies.push((status, pairs(headers), body.to_vec()));
        true
    }

    fn resume(&mut self) {
        self.resumed += 1;
    }

    fn call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        if self.refuse_calls {
            return None;
        }
        let token = FIRST_TOKEN + self.calls.len() as u32;
        self.calls.push(match *callout {
            Callout::Grpc {
                cluster,
                upstream,
                service,
                method,
                message,
                timeout_ms,
            } => {
                assert!(timeout_ms > 0);
                assert_eq!(
                    (service, method),
                    ("envoy.service.auth.v3.Authorization", "Check")
                );
                let grpc = GrpcService::decode(upstream)
                    .expect("a GrpcService")
                    .envoy_grpc
                    .expect("an EnvoyGrpc");
                assert_eq!(grpc.cluster_name, cluster);
                Made::Grpc {
                    token,
                    cluster: cluster.into(),
                    authority: grpc.authority,
                    message: message.to_vec(),
                    timeout_ms,
                }
            }
            Callout::Http {
                cluster,
                headers,
                body,
                timeout_ms,
            } => {
                assert!(timeout_ms > 0);
                Made::Http {
                    token,
                    cluster: cluster.into(),
                    headers: pairs(headers),
                    body: body.to_vec(),
                }
            }
        });
        Some(token)
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        assert!(!name.is_empty());
        self.edits.push(format!("set {name}: {value}"));
    }

    fn add_request_header(&mut self, name: &str, value: &str) {
        assert!(!name.is_empty());
        self.edits.push(format!("add {name}: {value}"));
    }

    fn remove_request_header(&mut self, name: &str) {
        self.edits.push(format!("remove {name}"));
    }

    fn record(&mut self, summary: &str) {
        // The access log prints the summary inside double quotes: no request text may end them.
        assert!(!summary.contains(['"', '\n', '\r']), "summary {summary:?}");
        self.records.push(summary.into());
    }

    fn logs_at(&mut self, level: LogLevel) -> bool {
        self.debug || level > LogLevel::Debug
    }
    const RECORDS: bool = true;
    fn recorder(&mut self) -> Option<&mut crate::eval::Record> {
        self.trace.as_mut()
    }

    fn response_header(&mut self, lower_name: &str) -> Option<String> {
        self.response_headers
            .iter()
            .find(|(k, _)| k == lower_name)
            .map(|(_, v)| v.clone())
    }

    fn remove_response_header(&mut self, name: &str) {
        self.response_headers.retain(|(k, _)| k != name);
    }

    fn response_body(&mut self, size: usize) -> Option<Vec<u8>> {
        Some(
            self.response_body
                .get(..size.min(self.response_body.len()))?
                .to_vec(),
        )
    }

    fn replace_response_body(&mut self, size: usize, body: &[u8]) -> bool {
        let size = size.min(self.response_body.len());
        self.response_body.splice(..size, body.iter().copied());
        true
    }
}

impl RootHost for FakeHost {
    fn filters_responses(&self) -> bool {
        !self.no_response_callbacks
    }

    fn plugin_name(&mut self) -> String {
        if self.plugin_name.is_empty() {
            "toolgate:test".into()
        } else {
            self.plugin_name.clone()
        }
    }

    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.shared
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn shared_set(&mut self, key: &str, value: &[u8]) {
        self.shared.retain(|(k, _)| k != key);
        self.shared.push((key.to_string(), value.to_vec()));
    }
}
