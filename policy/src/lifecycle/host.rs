//! What the lifecycle needs of the proxy: the [`Host`] of a request and the [`RootHost`] of a plugin
//! instance, and the values that cross between them (actions, properties, counters, calls).

/// What a callback tells the host to do with the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    Pause,
}

/// Host properties the lifecycle reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// The first URI SAN of the verified client certificate.
    PeerUriSan,
    /// The cluster the route selected.
    ClusterName,
    /// The listener's port (8-byte little-endian integer).
    DestinationPort,
    /// `HTTP/1.1`, `HTTP/2`, ...
    RequestProtocol,
    /// The server name (SNI) the client asked for in its TLS handshake.
    RequestedServerName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// The counters (Envoy stats `wasmcustom.<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    Allow,
    AllowNoPolicy,
    DenyGateway,
    DenyBackend,
    DenyMcpHeader,
    DenyNoPlan,
    TooLarge,
    PlanRejected,
    AuthzAllow,
    AuthzDeny,
    AuthzTimeout,
    AuthzUnavailable,
    AuthzMalformed,
    ListFiltered,
    ListEntriesRemoved,
    ListUnreadable,
    /// docs/semantics.md §6a: denied on a route without policy by deny-by-default.
    DenyDefault,
    /// docs/semantics.md §6a: allowed, but the dry-run policies would have denied it.
    ShadowDeny,
    /// docs/semantics.md §6a: denied, but with the dry-run policies it would have been allowed.
    ShadowAllow,
}

impl Counter {
    pub const ALL: [Counter; 19] = [
        Counter::Allow,
        Counter::AllowNoPolicy,
        Counter::DenyGateway,
        Counter::DenyBackend,
        Counter::DenyMcpHeader,
        Counter::DenyNoPlan,
        Counter::TooLarge,
        Counter::PlanRejected,
        Counter::AuthzAllow,
        Counter::AuthzDeny,
        Counter::AuthzTimeout,
        Counter::AuthzUnavailable,
        Counter::AuthzMalformed,
        Counter::ListFiltered,
        Counter::ListEntriesRemoved,
        Counter::ListUnreadable,
        Counter::DenyDefault,
        Counter::ShadowDeny,
        Counter::ShadowAllow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Counter::Allow => "toolgate.decision.allow",
            Counter::AllowNoPolicy => "toolgate.decision.allow_no_policy",
            Counter::DenyGateway => "toolgate.decision.deny.gateway",
            Counter::DenyBackend => "toolgate.decision.deny.backend",
            Counter::DenyMcpHeader => "toolgate.decision.deny.mcp_header_mismatch",
            Counter::DenyNoPlan => "toolgate.decision.deny.no_plan",
            Counter::TooLarge => "toolgate.decision.too_large",
            Counter::PlanRejected => "toolgate.plan.rejected",
            Counter::AuthzAllow => "toolgate.authz.allow",
            Counter::AuthzDeny => "toolgate.authz.deny",
            Counter::AuthzTimeout => "toolgate.authz.timeout",
            Counter::AuthzUnavailable => "toolgate.authz.unavailable",
            Counter::AuthzMalformed => "toolgate.authz.malformed",
            Counter::ListFiltered => "toolgate.list.filtered",
            Counter::ListEntriesRemoved => "toolgate.list.entries_removed",
            Counter::ListUnreadable => "toolgate.list.unreadable",
            Counter::DenyDefault => "toolgate.decision.deny.default_deny",
            Counter::ShadowDeny => "toolgate.shadow.deny",
            Counter::ShadowAllow => "toolgate.shadow.allow",
        }
    }
}

/// A call to an external authorizer.
#[derive(Clone, Copy, Debug)]
pub enum Callout<'a> {
    /// A unary gRPC call. `upstream`: what proxy-wasm's `grpc_call` takes to name the upstream, here
    /// a serialised `envoy.config.core.v3.GrpcService` (cluster and authority).
    Grpc {
        cluster: &'a str,
        upstream: &'a [u8],
        service: &'a str,
        method: &'a str,
        message: &'a [u8],
        timeout_ms: u32,
    },
    /// An HTTP call (`headers` include `:method`, `:path`, `:authority`).
    Http {
        cluster: &'a str,
        headers: &'a [(&'a str, &'a str)],
        body: &'a [u8],
        timeout_ms: u32,
    },
}

/// How a call ended, as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallAnswer {
    /// gRPC: the status code (0 = OK) and, when OK, the response message.
    Grpc { status: u32, message: Vec<u8> },
    /// HTTP: the response headers (`:status` included) and body.
    Http {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// The call could not be made or did not complete (connection refused or reset, timeout).
    Failed,
}

/// What loading a plan and deciding a request both need of the proxy: its log, its counters, its
/// clock.
pub trait HostBase {
    fn log(&mut self, level: LogLevel, message: &str);
    fn count(&mut self, counter: Counter);
    /// Adds `n` to a counter.
    fn count_by(&mut self, counter: Counter, n: u64) {
        for _ in 0..n {
            self.count(counter);
        }
    }
    /// Milliseconds on the host's (wall) clock.
    fn now_ms(&mut self) -> u64;
}

/// What the lifecycle needs of the proxy for one request. Every method is infallible from the
/// lifecycle's point of view: a value that cannot be read is `None` (and fails closed).
pub trait Host: HostBase {
    /// The request headers, serialised as the proxy-wasm ABI does ([`headers::serialize_map`]).
    fn request_headers(&mut self) -> Option<Vec<u8>>;
    /// Whether this host gives the request headers as name/value pairs
    /// ([`Host::each_request_header`]) rather than as [`Host::request_headers`]'s block: the dynamic
    /// module, which then builds and parses no block (1.3 k instructions a request, bench/notes.md).
    const HEADER_PAIRS: bool = false;
    /// Whether this host holds a request itself: it keeps delivering the body to a filter that
    /// paused the headers, and nothing after the filter is relied on to hold them (the dynamic
    /// module: `toolgate render --native-module` puts no buffer filter after it). Then every request
    /// held for its body is paused from its headers on, whatever the plan's `pause_headers`.
    fn holds_request(&self) -> bool {
        false
    }
    /// The request headers as name/value pairs (for [`Host::HEADER_PAIRS`]): `each` gets every
    /// header, in order; false if they cannot be read.
    fn each_request_header(&mut self, each: &mut dyn FnMut(&[u8], &[u8])) -> bool {
        let _ = each;
        false
    }
    fn property(&mut self, property: Property) -> Option<Vec<u8>>;
    /// The request's dynamic metadata as a serialised `envoy.config.core.v3.Metadata` (at least its
    /// [`crate::jwt::JWT_METADATA_NAMESPACE`] namespace: where Envoy's `jwt_authn` leaves verified
    /// token payloads, docs/semantics.md §6b), or None where the host cannot read it (no claims).
    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// The first `size` bytes of the buffered request body.
    fn request_body(&mut self, size: usize) -> Option<Vec<u8>>;
    /// Answers the request with a local reply; false if the host refused.
    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool;
    /// Lets a request paused by an earlier callback continue.
    fn resume(&mut self);
    /// Starts a call; its token, or None if the host refused to start it.
    fn call(&mut self, callout: &Callout<'_>) -> Option<u32>;
    /// Replaces (or adds) a request header for the upstream.
    fn set_request_header(&mut self, name: &str, value: &str);
    /// Adds a request header value for the upstream (keeping existing ones).
    fn add_request_header(&mut self, name: &str, value: &str);
    fn remove_request_header(&mut self, name: &str);
    /// Stores the decision summary where the access log reads it.
    fn record(&mut self, summary: &str);
    /// Whether this host keeps the engine's record of why it decides ([`Host::recorder`]). False
    /// in the proxies (the default): their lifecycle is compiled without the recording walk.
    const RECORDS: bool = false;
    /// Where `toolgate explain` keeps why the engine decided (docs/semantics.md §7): the walks of
    /// the request's routes, recorded as the engine makes them. Read only when [`Host::RECORDS`].
    fn recorder(&mut self) -> Option<&mut crate::eval::Record> {
        None
    }
    /// Whether the host logs at `level` now.
    fn logs_at(&mut self, level: LogLevel) -> bool;
    /// The first value of a response header (`lower_name`), if sent.
    fn response_header(&mut self, lower_name: &str) -> Option<String>;
    fn remove_response_header(&mut self, name: &str);
    /// The response body buffered so far (its first `size` bytes).
    fn response_body(&mut self, size: usize) -> Option<Vec<u8>>;
    /// Replaces the buffered response body (all `size` bytes of it) with `body`; false if the host
    /// refused.
    fn replace_response_body(&mut self, size: usize, body: &[u8]) -> bool;
}

/// What loading a plan needs of the proxy.
pub trait RootHost: HostBase {
    /// Whether the host calls the response callbacks (a module built without them cannot filter
    /// lists, so it refuses a plan that does).
    fn filters_responses(&self) -> bool {
        true
    }
    fn plugin_name(&mut self) -> String;
    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>>;
    fn shared_set(&mut self, key: &str, value: &[u8]);
}
