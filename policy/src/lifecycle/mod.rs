//! The request lifecycle (docs/semantics.md §3–§6) as a state machine over a [`Host`]: classify the request,
//! hold a JSON POST until its body is here, read it, decide, call external authorizers (pause, call,
//! resume or deny), reply, record and count. The two Envoy hosts (the proxy-wasm filter and the
//! dynamic module) are thin implementations of [`Host`] and [`RootHost`], whose documentation is
//! their contract; the tests drive the lifecycle natively with a fake host.
//!
//! A request moves `Start → (Buffering →) (Calling ⇄) Done` (an allowed list request through `Listing`
//! until its response is filtered: listing.rs). Each callback of the host is a method
//! of [`Request`]; a callback in a state that does not expect it does nothing (and never resumes a
//! request twice).

mod callout;
pub mod headers;
mod host;
mod listing;
mod request;
mod shadow;

pub use crate::call::{CallAnswer, Callout};
pub use headers::HeaderSink;
pub use host::{Action, Counter, Host, HostBase, LogLevel, Property, RootHost};

use std::cell::RefCell;
use std::rc::Rc;

use crate::authz;
use crate::eval::{
    AuthzFailure, BodyInput, Decision, DenyReason, Evaluator, Level, PlanError, Step, Verdict,
};
use crate::list_filter::ListRequests;
use crate::log_safe::Quoted;
use crate::mcp::{KeptBody, NotMcp, ReadScratch};
use crate::response;
use headers::{Classified, Needs, RequestHeaders, WantedHeaders};
use request::{
    http_request, listener_port, one_credential, prepare_call, property_string, read_headers, step,
    with_request,
};

/// The token of a call the host refused to start.
const REFUSED: u32 = u32::MAX;

/// One filter instance: the plan in force and what it needs of each request.
#[derive(Default)]
pub struct Plugin {
    loaded: Option<Rc<Loaded>>,
}

/// A validated plan and what requests need to be read for it.
struct Loaded {
    evaluator: Evaluator,
    needs: Needs,
    wanted: WantedHeaders,
    /// The reader's working memory, reused by this plugin's requests (one thread's).
    reader: RefCell<ReadScratch>,
}

impl Loaded {
    fn new(evaluator: Evaluator) -> Self {
        let cel = evaluator.cel_uses();
        Loaded {
            needs: Needs::of(evaluator.plan(), cel),
            wanted: WantedHeaders::of(evaluator.plan(), cel),
            evaluator,
            reader: RefCell::default(),
        }
    }
}

/// Shared-data key under which the last good plan of a plugin instance is kept: its presence tells an
/// update (refused: Envoy keeps the configuration in force) from a first load (denies everything).
fn last_good_key(plugin: &str) -> String {
    format!("toolgate/last-good-plan/{plugin}")
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

impl Plugin {
    /// Loads a plan (the plugin configuration). An invalid plan is refused with a log line. If this
    /// plugin had a good plan before (an update), false: Envoy rejects the update and the plan in
    /// force keeps serving. Not a stored copy of the last plan loaded: Envoy reuses the root context
    /// of a configuration it still holds (a draining filter chain's) without calling `configure`, so
    /// the last plan loaded need not be the one in force, and restoring it could bring back a revoked
    /// permission. If there never was a good plan (a first load), true, and every request is denied
    /// (docs/semantics.md §6): the filter stays installed and fails closed.
    pub fn configure(&mut self, host: &mut impl RootHost, config: &[u8]) -> bool {
        let plugin = host.plugin_name();
        let started = host.now_ms();
        let loaded = Evaluator::load(config).and_then(|ev| {
            if ev.plan().settings.list_filtering && !host.filters_responses() {
                return Err(PlanError::ListFilteringUnsupported);
            }
            Ok(ev)
        });
        match loaded {
            Ok(ev) => {
                let plan = ev.plan();
                let message = format!(
                    "toolgate: plugin {plugin}: loaded plan {} for listener {} ({} gateway-level, {} backend-level policies, {} authorizers; {} bytes in {} ms)",
                    short(&plan.hash),
                    plan.listener,
                    plan.gateway.allow.len(),
                    plan.backends.values().map(|b| b.allow.len()).sum::<usize>(),
                    headers::authorizers(plan).count(),
                    config.len(),
                    host.now_ms().saturating_sub(started)
                );
                host.log(LogLevel::Info, &message);
                host.shared_set(&last_good_key(&plugin), config);
                self.loaded = Some(Rc::new(Loaded::new(ev)));
            }
            Err(e) => {
                host.count(Counter::PlanRejected);
                if host.shared_get(&last_good_key(&plugin)).is_some() {
                    host.log(
                        LogLevel::Error,
                        &format!("toolgate: plugin {plugin}: REFUSED new plan ({e}); update rejected, keeping the plan in force"),
                    );
                    return false;
                }
                host.log(
                    LogLevel::Error,
                    &format!("toolgate: plugin {plugin}: REFUSED plan ({e}); no good plan yet: denying every request"),
                );
                self.loaded = None;
            }
        }
        true
    }

    /// The lifecycle of a new request under the plan now in force.
    pub fn request(&self) -> Request {
        Request {
            loaded: self.loaded.clone(),
            state: State::Start,
        }
    }
}

/// One request's lifecycle.
pub struct Request {
    loaded: Option<Rc<Loaded>>,
    state: State,
}

enum State {
    Start,
    /// A JSON POST under policy: the body is being buffered (body callbacks pause).
    Buffering(Box<Held>),
    /// Paused for an authorizer's answer.
    Calling(Box<Held>, Pending),
    /// An allowed list request whose response is filtered (docs/semantics.md §5).
    Listing(Box<listing::Listing>),
    /// Decided: later callbacks let the request continue (if it was allowed) and do nothing else.
    Done,
}

/// What the lifecycle keeps of a request under policy.
struct Held {
    headers: RequestHeaders,
    principal: Option<String>,
    /// The TLS server name (SNI), read when the plan matches on it.
    server_name: Option<String>,
    /// The verified token (docs/semantics.md §6b), read when the plan needs it.
    auth: Option<crate::jwt::Auth>,
    port: u16,
    cluster: Option<String>,
    protocol: Option<String>,
    classified: Classified,
    /// Body bytes buffered so far (JSON POSTs).
    buffered: usize,
    /// The whole body, once here (JSON POSTs).
    body: Vec<u8>,
    /// Authorizer calls that allowed so far.
    authorized: u32,
    /// What the first read of the body found (JSON POSTs, kept once a step makes an authorizer
    /// call): later steps rebuild it instead of reading the body again (mcp/kept.rs).
    read: Option<Result<KeptBody, NotMcp>>,
    /// The host's clock when the headers arrived (only read for CEL rules on `request.time`).
    time_ms: u64,
    /// docs/semantics.md §6a, on a route with dry-run policies: the answers of the enforced
    /// authorizer calls, in order (level, message, None when it allowed), which the shadow walk
    /// reuses instead of asking again; and the shadow walk's state.
    answers: Vec<(Level, Option<usize>, Option<AuthzFailure>)>,
    shadow: Option<Box<Shadow>>,
}

/// The shadow decision in progress (docs/semantics.md §6a): the enforced outcome waits for it.
struct Shadow {
    /// Shadow authorizer calls that allowed (reused answers included), and which they were.
    authorized: u32,
    calls: Vec<(Level, Option<usize>)>,
    finish: Finish,
}

/// The enforced outcome of a request, carried out once the shadow decision is known.
enum Finish {
    Allow {
        summary: String,
        counter: Counter,
        lists: ListRequests,
    },
    Deny {
        summary: String,
        counters: Vec<Counter>,
        status: u32,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

/// An authorizer call in flight.
struct Pending {
    token: u32,
    started_ms: u64,
    /// The level whose ExternalAuth policy made the call (its authorizer reads the answer).
    level: Level,
    /// The message the call is about.
    message: Option<usize>,
    /// A call of the shadow walk (docs/semantics.md §6a): its answer decides only the shadow decision.
    shadow: bool,
}

/// Where a decision is made: in a request callback (the host continues or stops the request by
/// the returned action), or in a call's answer (the request is paused and must be resumed).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Callback,
    Answer,
}

impl Request {
    /// The request's headers: what the plan needs of them read once, then the first decision or
    /// the wait for the body. Long: the steps in the order every request takes them, kept in one
    /// function on the hot path.
    pub fn on_request_headers(&mut self, host: &mut impl Host, end_of_stream: bool) -> Action {
        if !matches!(self.state, State::Start) {
            return Action::Continue;
        }
        let Some(loaded) = self.loaded.clone() else {
            return self.deny_without_plan(host);
        };
        let needs = loaded.needs;
        // Attributes no rule of the plan looks at are not read (same decisions, fewer host calls).
        let cluster = if needs.cluster {
            property_string(host, Property::ClusterName)
        } else {
            None
        };
        let route = loaded.evaluator.route(cluster.as_deref());
        // A route under dry-run policies only is read for the shadow decision, and passes.
        if !route.under_policy() && loaded.evaluator.shadow_route(cluster.as_deref()).is_none() {
            self.state = State::Done;
            host.count(Counter::AllowNoPolicy);
            if host.logs_at(LogLevel::Debug) {
                let headers = read_headers(host, &loaded.wanted);
                debug_line(
                    host,
                    headers.get(headers::METHOD),
                    headers.get(headers::PATH),
                    "allow (no policy)",
                );
            }
            return Action::Continue;
        }
        let headers = read_headers(host, &loaded.wanted);
        let principal = if needs.principal {
            property_string(host, Property::PeerUriSan).filter(|p| p.starts_with("spiffe://"))
        } else {
            None
        };
        let auth = if needs.auth && one_credential(&headers) {
            host.dynamic_metadata()
                .and_then(|m| crate::jwt::Auth::from_metadata(&m))
        } else {
            None
        };
        let port = if needs.port { listener_port(host) } else { 0 };
        let server_name = if needs.server_name {
            property_string(host, Property::RequestedServerName)
        } else {
            None
        };
        let protocol = if needs.external_auth {
            property_string(host, Property::RequestProtocol)
        } else {
            None
        };
        let classified = headers::classify(
            headers.get(headers::METHOD),
            headers.get(headers::CONTENT_TYPE),
            headers.get(headers::CONTENT_ENCODING),
            end_of_stream,
        );
        let held = Box::new(Held {
            headers,
            principal,
            server_name,
            auth,
            port,
            cluster,
            protocol,
            classified,
            buffered: 0,
            body: Vec::new(),
            authorized: 0,
            read: None,
            time_ms: if needs.time { host.now_ms() } else { 0 },
            answers: Vec::new(),
            shadow: None,
        });
        // A JSON POST is read once its body is whole; a GET or DELETE with a body is held to its end
        // too, to see whether the body was empty after all (HTTP/2 can end a stream with an empty
        // DATA frame).
        if matches!(
            held.classified,
            Classified::JsonBody { .. } | Classified::BodyNotRead(_)
        ) {
            // List filtering removes `accept-encoding` from a list request, which it knows as one
            // only from its body: its headers are held where they can be, else the header is
            // removed from every request that may be one.
            let settings = &loaded.evaluator.plan().settings;
            let strip = settings.list_filtering
                && matches!(held.classified, Classified::JsonBody { .. })
                && listing::may_be_a_list(&held.headers)
                && held.headers.first(headers::ACCEPT_ENCODING).is_some();
            let pause_headers = pauses_headers(settings, host);
            if strip && !pause_headers {
                host.remove_request_header("accept-encoding");
            }
            self.state = State::Buffering(held);
            // The body callback pauses until the whole body is here. The headers continue (in
            // Envoy, pausing them stops body delivery, and the buffer filter after the filter holds
            // them), unless the host keeps delivering the body and an authorizer may ask for header
            // changes, or list filtering for one; or the host holds the request itself.
            let hold = host.holds_request() || ((needs.external_auth || strip) && pause_headers);
            return if hold {
                Action::Pause
            } else {
                Action::Continue
            };
        }
        self.advance(host, &loaded, held, Context::Callback)
    }

    pub fn on_request_body(
        &mut self,
        host: &mut impl Host,
        body_size: usize,
        end_of_stream: bool,
    ) -> Action {
        let State::Buffering(held) = &mut self.state else {
            return self.after_decision();
        };
        let Some(loaded) = self.loaded.clone() else {
            return Action::Pause;
        };
        let limit = loaded.evaluator.plan().settings.max_body_bytes as usize;
        if body_size > limit {
            let (method, path) = (
                held.headers.get(headers::METHOD).to_string(),
                held.headers.get(headers::PATH).to_string(),
            );
            self.state = State::Done;
            host.count(Counter::TooLarge);
            record(host, &method, &path, "deny: body over the limit");
            let reply = response::too_large();
            host.send_reply(
                reply.status,
                &[("content-type", "application/json")],
                reply.body.as_bytes(),
            );
            return Action::Pause;
        }
        if !end_of_stream {
            held.buffered = body_size;
            return Action::Pause;
        }
        self.decide_held(host, &loaded, body_size)
    }

    /// A body that ends with trailers (HTTP/2) never reaches `end_of_stream` in the body callback:
    /// decide here, or the buffered body would continue undecided.
    pub fn on_request_trailers(&mut self, host: &mut impl Host) -> Action {
        let State::Buffering(held) = &self.state else {
            return self.after_decision();
        };
        let buffered = held.buffered;
        let Some(loaded) = self.loaded.clone() else {
            return Action::Pause;
        };
        self.decide_held(host, &loaded, buffered)
    }

    /// A callback after the decision: an allowed request goes on; a denied one was answered.
    fn after_decision(&self) -> Action {
        match self.state {
            State::Calling(..) => Action::Pause,
            _ => Action::Continue,
        }
    }

    fn deny_without_plan(&mut self, host: &mut impl Host) -> Action {
        self.state = State::Done;
        host.count(Counter::DenyNoPlan);
        host.record("deny: no valid plan loaded");
        host.log(
            LogLevel::Warn,
            "toolgate: denying request: no valid plan loaded",
        );
        let decision = Decision {
            verdict: Verdict::Deny(DenyReason::NoRuleMatched {
                level: Level::Gateway,
                policies: 0,
                request: Default::default(),
                considered: "".into(),
            }),
            ..Decision::allow(true)
        };
        let reply = response::denial(BodyInput::None, &decision, false);
        host.send_reply(
            reply.status,
            &[("content-type", "application/json")],
            reply.body.as_bytes(),
        );
        Action::Pause
    }

    /// Reads the whole buffered body of a held JSON POST and decides; a held GET or DELETE is decided
    /// on whether its body was empty.
    fn decide_held(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        body_size: usize,
    ) -> Action {
        let State::Buffering(mut held) = std::mem::replace(&mut self.state, State::Done) else {
            return Action::Continue;
        };
        if matches!(held.classified, Classified::BodyNotRead(_)) {
            // Not read; empty, it was the GET or DELETE it would have been without the stream open.
            if body_size == 0 {
                held.classified = Classified::Http;
            }
            return self.advance(host, loaded, held, Context::Callback);
        }
        // An unreadable body is an empty one: not MCP, so it can only pass rules without MCP constraints.
        held.body = host.request_body(body_size).unwrap_or_default();
        self.advance(host, loaded, held, Context::Callback)
    }

    /// Decides as far as possible: allow, deny, or start the next authorizer call.
    fn advance(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        mut held: Box<Held>,
        context: Context,
    ) -> Action {
        let ev = &loaded.evaluator;
        let debug_reasons = ev.plan().settings.debug_reasons;
        let timeout_ms = ev.plan().settings.authz_timeout_ms;
        // The shadow walk reads the body too: keep the read for it.
        let shadow = ev.has_dry_run() && ev.shadow_route(held.cluster.as_deref()).is_some();
        enum Next<'p> {
            Allowed(String, Counter, ListRequests),
            Denied(String, Counter, response::Reply),
            Call(authz::Prepared<'p>, Level, Option<usize>),
        }
        let (next, read) = with_request(
            &held,
            loaded,
            |req, body| match step(
                &mut *host,
                &ev.route(held.cluster.as_deref()),
                req,
                body,
                held.authorized,
            ) {
                Step::Decided(d) if d.allowed() => {
                    // A route without (enforced) policy is read only for the shadow decision: its lists pass.
                    let lists = match body {
                        BodyInput::Mcp(mcp)
                            if ev.plan().settings.list_filtering && d.under_policy =>
                        {
                            ListRequests::of(mcp)
                        }
                        _ => ListRequests::default(),
                    };
                    Next::Allowed(
                        d.summary(),
                        if d.under_policy {
                            Counter::Allow
                        } else {
                            Counter::AllowNoPolicy
                        },
                        lists,
                    )
                }
                Step::Decided(d) => Next::Denied(
                    d.summary(),
                    deny_counter(&d),
                    response::denial(body, &d, debug_reasons),
                ),
                Step::Authorize(call) => Next::Call(
                    prepare_call(call.authorizer, &held, req, body, call.message),
                    call.level,
                    call.message,
                ),
            },
            |next| matches!(next, Next::Call(..)) || shadow,
        );
        if read.is_some() {
            held.read = read;
        }
        match next {
            Next::Allowed(summary, counter, lists) => self.decided(
                host,
                loaded,
                held,
                Finish::Allow {
                    summary,
                    counter,
                    lists,
                },
                context,
            ),
            Next::Denied(summary, counter, reply) => {
                let finish = Finish::Deny {
                    summary,
                    counters: vec![counter],
                    status: reply.status,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: reply.body.into_bytes(),
                };
                self.decided(host, loaded, held, finish, context)
            }
            Next::Call(prepared, level, message) => {
                self.start_call(host, held, &prepared, level, message, false, timeout_ms)
            }
        }
    }

    /// Starts an authorizer call and pauses for its answer.
    #[allow(clippy::too_many_arguments)]
    fn start_call(
        &mut self,
        host: &mut impl Host,
        held: Box<Held>,
        prepared: &authz::Prepared<'_>,
        level: Level,
        message: Option<usize>,
        shadow: bool,
        timeout_ms: u32,
    ) -> Action {
        // Before the call: the host's timeout runs from its start.
        let started_ms = host.now_ms();
        let token = match &prepared.call {
            authz::PreparedCall::Grpc { upstream, message } => host.call(&Callout::Grpc {
                cluster: prepared.cluster,
                upstream,
                service: authz::GRPC_SERVICE,
                method: authz::GRPC_METHOD,
                message,
                timeout_ms,
            }),
            authz::PreparedCall::Http { headers, body } => {
                let pairs: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                host.call(&Callout::Http {
                    cluster: prepared.cluster,
                    headers: &pairs,
                    body,
                    timeout_ms,
                })
            }
        };
        match token {
            Some(token) if token != REFUSED => {
                self.state = State::Calling(
                    held,
                    Pending {
                        token,
                        started_ms,
                        level,
                        message,
                        shadow,
                    },
                )
            }
            // The host refused to start the call (e.g. no such cluster): as if it failed.
            _ => {
                self.state = State::Calling(
                    held,
                    Pending {
                        token: REFUSED,
                        started_ms,
                        level,
                        message,
                        shadow,
                    },
                );
                self.on_call_answer(host, REFUSED, CallAnswer::Failed);
            }
        }
        Action::Pause
    }

    /// Carries out the enforced outcome; `shadow`: what the access log adds about the shadow
    /// decision (empty when it agrees).
    fn carry_out(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        held: Box<Held>,
        finish: Finish,
        shadow: &str,
        context: Context,
    ) -> Action {
        let ev = &loaded.evaluator;
        let (method, path) = (
            held.headers.get(headers::METHOD),
            held.headers.get(headers::PATH),
        );
        match finish {
            Finish::Allow {
                mut summary,
                counter,
                lists,
            } => {
                summary.push_str(shadow);
                host.count(counter);
                record(host, method, path, &summary);
                self.state = if lists.is_empty() {
                    State::Done
                } else {
                    if pauses_headers(&ev.plan().settings, host)
                        && held.headers.first(headers::ACCEPT_ENCODING).is_some()
                    {
                        host.remove_request_header("accept-encoding");
                    }
                    State::Listing(Box::new(listing::Listing::new(held, lists, summary)))
                };
                if context == Context::Answer {
                    host.resume();
                }
                Action::Continue
            }
            Finish::Deny {
                mut summary,
                counters,
                status,
                headers,
                body,
            } => {
                summary.push_str(shadow);
                for counter in counters {
                    host.count(counter);
                }
                record(host, method, path, &summary);
                self.state = State::Done;
                let headers: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                host.send_reply(status, &headers, &body);
                Action::Pause
            }
        }
    }
}

/// Whether the host keeps delivering the body after the filter paused the request headers: the
/// plan says so of the Envoy it is for (`pause_headers`), or the host holds requests itself.
fn pauses_headers(settings: &crate::plan::PlanSettings, host: &impl Host) -> bool {
    settings.pause_headers || host.holds_request()
}

fn deny_counter(d: &Decision<'_>) -> Counter {
    match &d.verdict {
        Verdict::Deny(DenyReason::McpHeaderMismatch { .. }) => Counter::DenyMcpHeader,
        Verdict::Deny(DenyReason::DefaultDeny) => Counter::DenyDefault,
        Verdict::Deny(
            DenyReason::NoRuleMatched { level, .. }
            | DenyReason::ExternalAuth { level, .. }
            | DenyReason::TooManyAuthorizerCalls { level },
        ) => match level {
            Level::Gateway => Counter::DenyGateway,
            Level::Backend => Counter::DenyBackend,
        },
        Verdict::Allow => Counter::Allow,
    }
}

/// Records a decision: the summary the access log prints, and one debug-log line when the host
/// logs at debug (docs/semantics.md §5: every decision is visible to operators).
fn record(host: &mut impl Host, method: &str, path: &str, summary: &str) {
    host.record(summary);
    debug_line(host, method, path, summary);
}

fn debug_line(host: &mut impl Host, method: &str, path: &str, summary: &str) {
    if host.logs_at(LogLevel::Debug) {
        host.log(
            LogLevel::Debug,
            &format!("toolgate: {} {}: {summary}", Quoted(method), Quoted(path)),
        );
    }
}

#[cfg(test)]
mod tests;
