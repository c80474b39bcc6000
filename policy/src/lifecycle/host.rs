//! The adapter contract between the engine and a proxy: the [`Host`] of a request, the
//! [`RootHost`] of a plugin instance (one listener's plan), what both share ([`HostBase`]), and the
//! values that cross between them (actions, properties, counters; calls are in [`crate::call`]).
//! `filter/` (proxy-wasm) and `module/` (Envoy's dynamic modules) implement it, and so do
//! `toolgate explain`'s simulated host and the fake host of the tests ([`crate::testing`]).
//!
//! The contract a host keeps is on [`Host`]: what it must do, what it may and may not decide.

use super::headers::HeaderSink;
use crate::call::Callout;

/// What a callback tells the host to do with the request (or, in a response callback, the response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Let it go on to the next filter.
    Continue,
    /// Stop it here, buffering its body, until the lifecycle resumes it or replies.
    Pause,
}

/// Host properties the lifecycle reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// The first URI SAN of the verified client certificate.
    PeerUriSan,
    /// The cluster the route selected.
    ClusterName,
    /// The listener's port, as an 8-byte little-endian integer.
    DestinationPort,
    /// `HTTP/1.1`, `HTTP/2`, ...
    RequestProtocol,
    /// The server name (SNI) the client asked for in its TLS handshake.
    RequestedServerName,
}

/// A log line's level, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// The counters: Envoy stats `wasmcustom.<name>` on the Wasm filter, `dynamicmodulescustom.<name>`
/// on the native module ([`Counter::name`]).
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

/// What loading a plan and deciding a request both need of the proxy: its log, its counters, its
/// clock. None of them can fail from the engine's point of view: a line or a count the proxy refuses
/// is lost, nothing else.
pub trait HostBase {
    /// Writes `message` to the proxy's log at `level` (if the proxy logs at that level).
    fn log(&mut self, level: LogLevel, message: &str);
    /// Adds one to `counter`.
    fn count(&mut self, counter: Counter);
    /// Adds `n` to a counter (`n` may be 0: then nothing is counted, and a host need not call the
    /// proxy).
    fn count_by(&mut self, counter: Counter, n: u64) {
        for _ in 0..n {
            self.count(counter);
        }
    }
    /// Milliseconds on the host's wall clock (0 if it cannot be read). Authorizer timeouts are
    /// measured on it, and CEL's `request.time` read from it.
    fn now_ms(&mut self) -> u64;
}

/// What the lifecycle needs of the proxy for one request: reading the request (headers, properties,
/// body), acting on it (reply, resume, edit headers for the upstream), calling authorizers, recording
/// the decision, and, for an allowed list request, reading and rewriting the response.
///
/// The lifecycle calls these only from inside one of its own callbacks (a [`super::Request`]
/// method), which the host calls from the proxy's callback for the same request, so a host may
/// assume the proxy's current request is this one.
///
/// # What a host is
///
/// A host is glue: it routes the proxy's callbacks to the lifecycle ([`super::Plugin`] for a
/// configuration, [`super::Request`] for each request) and carries out what the lifecycle asks of
/// it with the proxy's own calls. It holds no decision logic: it does not read a body, a header or a
/// property to decide anything, and it never allows, denies, answers or changes a request on its own.
/// Everything a decision depends on (which attributes are read, whether a request is held, what a
/// denial replies, what is counted and logged) is the engine's, so both hosts decide alike.
///
/// What a host does decide is how to talk to its proxy: how a value is fetched (and cached, as the
/// log level), how a call is made and its answer put together, how a paused request is resumed.
///
/// # Obligations
///
/// - **Actions.** Each [`Action`] a lifecycle callback returns is carried out as it says:
///   [`Action::Continue`] lets the request or response go on, [`Action::Pause`] stops it (and keeps
///   buffering its body) until the lifecycle resumes it ([`Host::resume`]) or replies
///   ([`Host::send_reply`]). A host that cannot run a callback (no stream for it, the stream busy, a
///   panic caught) pauses or denies a request it has not seen decided; it lets through only a
///   response whose request was decided and is not an allowed list's
///   ([`super::Request::reads_response`]).
/// - **Fail closed.** A value that cannot be read is `None` (or `false`): never a default, a guess or
///   a value from a source a client controls. The engine then decides as the plan says of a request
///   without it (an unreadable body is not MCP, a missing identity matches no source). A call the
///   host cannot start is `None`; one that does not complete is answered
///   [`CallAnswer::Failed`](crate::call::CallAnswer::Failed), and the plan says what that means.
/// - **No panics.** A host never panics on what the proxy or a client sends. Where a panic can be
///   caught (the native module), the request it happened in is denied.
/// - **Once.** Each call's answer is delivered at most once, with the token [`Host::call`] gave it;
///   [`Host::resume`] is asked for at most once per pause.
/// - **Cheap.** The methods are on the request path: a host reads nothing the lifecycle did not ask
///   for, and copies a value only to hand it over (request headers it already holds in one buffer
///   are handed over as they are: [`HeaderSink::adopt`]).
pub trait Host: HostBase {
    /// Whether this host holds a request itself: it keeps delivering the body to a filter that
    /// paused the headers, and nothing after the filter is relied on to hold them (the dynamic
    /// module: `toolgate render --native-module` puts no buffer filter after it). Then every request
    /// held for its body is paused from its headers on, whatever the plan's `pause_headers`. A host
    /// says true only if both hold: otherwise a request could reach the upstream undecided.
    fn holds_request(&self) -> bool {
        false
    }
    /// Puts every request header, in the order the proxy has them (a repeated name once per value),
    /// into `headers`: pair by pair ([`HeaderSink::push`]) or as a buffer the host already owns
    /// ([`HeaderSink::adopt`], kept without a copy). The engine keeps only the headers the plan can
    /// look at. False if the headers cannot be read: the request is then read as having none.
    fn request_headers(&mut self, headers: &mut HeaderSink<'_>) -> bool;
    /// A property of the request or its connection, as bytes ([`Property`] says the form); `None`
    /// if the proxy does not have it. [`Property::PeerUriSan`] is the proxy's own reading of the
    /// client certificate, never anything a client sends in the request.
    fn property(&mut self, property: Property) -> Option<Vec<u8>>;
    /// The request's dynamic metadata as a serialised `envoy.config.core.v3.Metadata` (at least its
    /// [`crate::jwt::JWT_METADATA_NAMESPACE`] namespace: where Envoy's `jwt_authn` leaves verified
    /// token payloads, docs/semantics.md §6b), or None where the host cannot read it (no claims).
    /// Only what the proxy verified: a host that can only see something a client could have sent
    /// returns None.
    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// The first `size` bytes of the buffered request body (`size`: what the body callback
    /// reported). Fewer bytes are read as a shorter body; `None` as an empty one.
    fn request_body(&mut self, size: usize) -> Option<Vec<u8>>;
    /// Answers the request with a local reply instead of forwarding it: `status`, `headers` (never
    /// `:status`, which `status` is) and `body`, sent as they are. False if the proxy refused; the
    /// request stays paused either way and must never reach the upstream.
    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool;
    /// Lets a request go on that an earlier callback paused: asked for from a call's answer, once
    /// per pause. A host that cannot resume from where it is asked (inside a callback of the proxy
    /// that has not returned yet) resumes as soon as it can.
    fn resume(&mut self);
    /// Starts a call to an authorizer, with `callout`'s timeout enforced by the proxy; the call's
    /// token, by which its answer is delivered ([`super::Request::on_call_answer`]), or None if the
    /// proxy refused to start it (no such cluster). A token is unique among the request's calls in
    /// flight and never `u32::MAX` (read as a refusal). The answer is delivered once, later, never
    /// from inside this method: a proxy that answers at once has its answer held until the
    /// lifecycle callback that made the call has returned (as the native module does).
    fn call(&mut self, callout: &Callout<'_>) -> Option<u32>;
    /// Replaces (or adds) a request header for the upstream.
    fn set_request_header(&mut self, name: &str, value: &str);
    /// Adds a request header value for the upstream (keeping existing ones).
    fn add_request_header(&mut self, name: &str, value: &str);
    /// Removes every value of a request header before the upstream sees the request.
    fn remove_request_header(&mut self, name: &str);
    /// Stores the decision's summary where the access log reads it (Envoy's filter state, which the
    /// rendered access log prints), replacing an earlier one.
    fn record(&mut self, summary: &str);
    /// Whether this host keeps the engine's record of why it decides ([`Host::recorder`]). False
    /// in the proxies (the default): their lifecycle is compiled without the recording walk.
    const RECORDS: bool = false;
    /// Where `toolgate explain` keeps why the engine decided (docs/semantics.md §7): the walks of
    /// the request's routes, recorded as the engine makes them. Read only when [`Host::RECORDS`].
    fn recorder(&mut self) -> Option<&mut crate::eval::Record> {
        None
    }
    /// Whether the proxy logs at `level` now. Asked on every request: a host may cache the answer
    /// (the Wasm filter reads it again every second).
    fn logs_at(&mut self, level: LogLevel) -> bool;
    /// The first value of a response header (`lower_name`, lowercase; `:status` included), if it
    /// was sent and is UTF-8. Asked only while an allowed list's response is read (list filtering,
    /// docs/semantics.md §5), as are the methods below.
    fn response_header(&mut self, lower_name: &str) -> Option<String>;
    /// Removes every value of a response header before the client sees the response.
    fn remove_response_header(&mut self, name: &str);
    /// The response body buffered so far (its first `size` bytes: what the body callback reported).
    fn response_body(&mut self, size: usize) -> Option<Vec<u8>>;
    /// Replaces the buffered response body (all `size` bytes of it) with `body`; false if the proxy
    /// refused.
    fn replace_response_body(&mut self, size: usize, body: &[u8]) -> bool;
}

/// What loading a plan needs of the proxy ([`super::Plugin::configure`]). When `configure` returns
/// false the host makes the proxy reject the configuration update, so that the plan in force keeps
/// serving.
pub trait RootHost: HostBase {
    /// Whether the host calls the response callbacks (a module built without them cannot filter
    /// lists, so it refuses a plan that does).
    fn filters_responses(&self) -> bool {
        true
    }
    /// The plugin's name, the same for every configuration of one filter (the key of its last good
    /// plan in the shared data).
    fn plugin_name(&mut self) -> String;
    /// A value the host keeps for every configuration and every thread of the proxy (or VM), across
    /// configuration updates; None if there is none.
    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>>;
    /// Sets a value [`RootHost::shared_get`] returns; a refusal is ignored.
    fn shared_set(&mut self, key: &str, value: &[u8]);
}
