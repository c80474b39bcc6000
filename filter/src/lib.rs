//! Toolgate's Envoy HTTP filter: thin proxy-wasm glue over `toolgate-policy`.
//!
//! Per request: read the HTTP attributes, the caller's SPIFFE ID (first URI SAN of the verified
//! client certificate) and the routed cluster; if no policy applies, continue untouched. Otherwise
//! a JSON POST is held until its whole body is buffered (headers continue, body pauses; the
//! rendered config puts Envoy's buffer filter after this one so the router sees nothing before the
//! decision), read as MCP and decided; everything else is decided on its headers.
//!
//! Never panics on input: every host value is optional and every failure denies.

mod host;

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType};
use toolgate_policy::eval::{self, BodyInput, Decision, Evaluator, HttpRequest, Verdict};
use toolgate_policy::log_safe::Quoted;
use toolgate_policy::mcp::{self, NotMcp, ReadOptions};
use toolgate_policy::plan::{CompiledPlan, RulePlan};
use toolgate_policy::response::{self, Reply};
use toolgate_policy::str_map::StrMap;

proxy_wasm::main! {{
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// Counters (Envoy stats `wasmcustom.toolgate.*`), defined once per worker VM.
#[derive(Clone, Copy, Default)]
struct Metrics {
    allow: u32,
    allow_unrestricted: u32,
    deny_gateway: u32,
    deny_backend: u32,
    deny_mcp_header: u32,
    deny_no_plan: u32,
    too_large: u32,
    plan_rejected: u32,
}

impl Metrics {
    fn define() -> Self {
        let d = host::define_counter;
        Metrics {
            allow: d("toolgate.decision.allow"),
            allow_unrestricted: d("toolgate.decision.allow_no_policy"),
            deny_gateway: d("toolgate.decision.deny.gateway"),
            deny_backend: d("toolgate.decision.deny.backend"),
            deny_mcp_header: d("toolgate.decision.deny.mcp_header_mismatch"),
            deny_no_plan: d("toolgate.decision.deny.no_plan"),
            too_large: d("toolgate.decision.too_large"),
            plan_rejected: d("toolgate.plan.rejected"),
        }
    }

    fn inc(id: u32) {
        host::increment(id);
    }
}

/// Shared-data key under which the last good plan of a plugin instance is kept, so that a
/// configuration update with an invalid plan keeps serving the previous one.
fn last_good_key(plugin: &str) -> String {
    format!("toolgate/last-good-plan/{plugin}")
}

/// The request attributes the loaded plan can look at. Every attribute the filter does not need is a
/// host call, plus a call back into the VM to allocate its copy, saved on every request: the largest
/// part of the filter's per-request cost (docs/benchmarks.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Needs {
    /// Some XBackend-level policy exists: the routed cluster selects it.
    cluster: bool,
    /// Some rule names a source (SPIFFE ID).
    principal: bool,
    /// Some rule matches listener ports.
    port: bool,
}

impl Needs {
    fn of(plan: &CompiledPlan) -> Self {
        Needs {
            cluster: plan.backends.values().any(|l| !l.is_empty()),
            principal: rules(plan).any(|r| r.principal.is_some()),
            port: rules(plan).any(|r| !r.http.ports.is_empty()),
        }
    }
}

fn rules(plan: &CompiledPlan) -> impl Iterator<Item = &RulePlan> {
    std::iter::once(&plan.gateway).chain(plan.backends.values()).flat_map(|l| &l.allow).flat_map(|p| &p.rules)
}

/// Request headers the filter reads itself, in this order (indexes: [`METHOD`] ...).
const FILTER_HEADERS: [&str; 5] = [":method", ":path", ":authority", "content-type", "content-encoding"];
const METHOD: usize = 0;
const PATH: usize = 1;
const AUTHORITY: usize = 2;
const CONTENT_TYPE: usize = 3;
const CONTENT_ENCODING: usize = 4;

/// The request headers that can matter to a decision: the filter's, the evaluator's
/// ([`eval::HEADERS_READ`]) and those the plan's header matchers name. Only these are kept of the
/// host's header map (less work in the VM per request); the decisions are the same.
/// The filter's own are numbered first, by their indexes in [`FILTER_HEADERS`]. Looked up by hash:
/// the work per request header does not grow with the number of names the plan's matchers use.
#[derive(Debug, Default)]
struct WantedHeaders(StrMap<usize>);

impl WantedHeaders {
    fn of(plan: &CompiledPlan) -> Self {
        Self::with(FILTER_HEADERS.iter().chain(eval::HEADERS_READ.iter()).copied().chain(
            rules(plan).flat_map(|r| &r.http.headers).map(|h| h.name.as_str()),
        ))
    }

    fn with<'n>(names: impl Iterator<Item = &'n str>) -> Self {
        let mut map = StrMap::default();
        for name in names {
            let next = map.len();
            map.get_or_insert_with(name, || next);
        }
        WantedHeaders(map)
    }

    fn position(&self, name: &[u8]) -> Option<usize> {
        std::str::from_utf8(name).ok().and_then(|n| self.0.get(n)).copied()
    }
}

/// The request headers that can matter to a decision ([`WantedHeaders`]), from one host call. The
/// host's serialised block is kept as it is and the wanted headers are byte ranges into it: no
/// allocation per header. Never panics: a malformed block yields the headers that could be read.
#[derive(Debug, Default)]
struct RequestHeaders {
    /// The block's names and values as text (without its length table; the ranges start and end
    /// next to its NUL separators, so on character boundaries); if some header in it is not UTF-8,
    /// the wanted headers, converted lossily.
    text: String,
    /// Name and value of each wanted header present, in order (repeated names kept).
    wanted: Vec<(Range<usize>, Range<usize>)>,
    /// Where in `wanted` the first of each of [`FILTER_HEADERS`] is.
    filter: [Option<usize>; FILTER_HEADERS.len()],
}

impl RequestHeaders {
    fn read(wanted: &WantedHeaders) -> Self {
        host::request_header_pairs().map_or_else(Self::default, |block| Self::from_block(block, wanted))
    }

    fn from_block(mut block: Vec<u8>, wanted: &WantedHeaders) -> Self {
        let (text_start, spans, filter) = header_spans(&block, wanted);
        // Only the text after the length table needs to be UTF-8 (a length of 128 or more is not).
        block.drain(..text_start.min(block.len()));
        match String::from_utf8(block) {
            Ok(text) => RequestHeaders { text, wanted: spans, filter },
            Err(e) => {
                let block = e.into_bytes();
                let mut text = String::new();
                let mut copy = |range: Range<usize>| {
                    let start = text.len();
                    text.push_str(&String::from_utf8_lossy(block.get(range).unwrap_or_default()));
                    start..text.len()
                };
                let wanted = spans.into_iter().map(|(k, v)| (copy(k), copy(v))).collect();
                RequestHeaders { text, wanted, filter }
            }
        }
    }

    fn text(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or_default()
    }

    /// The first value of one of [`FILTER_HEADERS`], or "".
    fn get(&self, filter_header: usize) -> &str {
        match self.filter.get(filter_header).copied().flatten().and_then(|i| self.wanted.get(i)) {
            Some((_, v)) => self.text(v),
            None => "",
        }
    }

    fn pairs(&self) -> Vec<(&str, &str)> {
        self.wanted.iter().map(|(k, v)| (self.text(k), self.text(v))).collect()
    }
}

/// A serialised header map (proxy-wasm ABI: a count, a table of name and value lengths, then each
/// name and value followed by a NUL): where the text after the table starts, the ranges (relative to
/// that start) of the names and values of the headers `wanted` names, and where the first of each of
/// [`FILTER_HEADERS`] is among them.
#[allow(clippy::type_complexity)]
fn header_spans(
    bytes: &[u8],
    wanted: &WantedHeaders,
) -> (usize, Vec<(Range<usize>, Range<usize>)>, [Option<usize>; FILTER_HEADERS.len()]) {
    let word = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let mut filter = [None; FILTER_HEADERS.len()];
    let Some(count) = word(0) else { return (0, Vec::new(), filter) };
    // Sized for the common case; it grows only with what the request sends, never with the plan.
    let mut out = Vec::with_capacity(FILTER_HEADERS.len() + eval::HEADERS_READ.len());
    let text_start = count.saturating_mul(8).saturating_add(4);
    let mut p = text_start;
    for n in 0..count {
        let (Some(klen), Some(vlen)) = (word(4 + n * 8), word(8 + n * 8)) else { break };
        let key = p..p.saturating_add(klen);
        let value = key.end.saturating_add(1)..key.end.saturating_add(1).saturating_add(vlen);
        let Some(name) = bytes.get(key.clone()) else { break };
        if bytes.get(value.clone()).is_none() {
            break;
        }
        p = value.end.saturating_add(1);
        if let Some(at) = wanted.position(name) {
            if let Some(slot @ None) = filter.get_mut(at) {
                *slot = Some(out.len());
            }
            out.push((key.start - text_start..key.end - text_start, value.start - text_start..value.end - text_start));
        }
    }
    (text_start, out, filter)
}

#[derive(Default)]
struct Root {
    evaluator: Option<Rc<Evaluator>>,
    needs: Needs,
    headers: Rc<WantedHeaders>,
    metrics: Rc<RefCell<Option<Metrics>>>,
}

impl Context for Root {}

impl Root {
    fn plugin_name(&self) -> String {
        host::property(host::PLUGIN_NAME)
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| "toolgate".to_string())
    }

    fn metrics(&self) -> Metrics {
        *self.metrics.borrow_mut().get_or_insert_with(Metrics::define)
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let metrics = self.metrics();
        let plugin = self.plugin_name();
        let config = self.get_plugin_configuration().unwrap_or_default();
        let started = self.get_current_time();
        match Evaluator::load(&config) {
            Ok(ev) => {
                let took = self.get_current_time().duration_since(started).unwrap_or_default();
                let plan = ev.plan();
                info(format_args!(
                    "toolgate: plugin {plugin}: loaded plan {} for listener {} ({} gateway-level, {} backend-level policies; {} bytes in {:.1} ms)",
                    short(&plan.hash),
                    plan.listener,
                    plan.gateway.allow.len(),
                    plan.backends.values().map(|b| b.allow.len()).sum::<usize>(),
                    config.len(),
                    took.as_secs_f64() * 1e3
                ));
                let _ = self.set_shared_data(&last_good_key(&plugin), Some(&config), None);
                self.needs = Needs::of(ev.plan());
                self.headers = Rc::new(WantedHeaders::of(ev.plan()));
                self.evaluator = Some(Rc::new(ev));
            }
            Err(e) => {
                Metrics::inc(metrics.plan_rejected);
                // Restore the last good plan of this plugin (kept in the VM's shared data across
                // configuration updates); with none, every request under this filter is denied.
                let restored = self
                    .get_shared_data(&last_good_key(&plugin))
                    .0
                    .and_then(|bytes| Evaluator::load(&bytes).ok());
                match restored {
                    Some(ev) => {
                        error(format_args!(
                            "toolgate: plugin {plugin}: REFUSED new plan ({e}); keeping last good plan {}",
                            short(&ev.plan().hash)
                        ));
                        self.needs = Needs::of(ev.plan());
                        self.headers = Rc::new(WantedHeaders::of(ev.plan()));
                        self.evaluator = Some(Rc::new(ev));
                    }
                    None => {
                        error(format_args!(
                            "toolgate: plugin {plugin}: REFUSED plan ({e}); no good plan yet: denying every request"
                        ));
                        self.evaluator = None;
                    }
                }
            }
        }
        // Returning true even for a refused plan: the filter stays installed and fails closed.
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Request {
            evaluator: self.evaluator.clone(),
            needs: self.needs,
            headers: Rc::clone(&self.headers),
            metrics: self.metrics(),
            held: None,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

fn info(message: std::fmt::Arguments<'_>) {
    host::log(host::INFO, &message.to_string());
}

fn error(message: std::fmt::Arguments<'_>) {
    host::log(host::ERROR, &message.to_string());
}

/// Records a decision: the filter state the access log prints, and one debug-log line when the
/// host logs at debug (`--component-log-level wasm:debug`; checked per request, so the admin
/// `/logging` endpoint takes effect at once).
fn record(method: &str, path: &str, summary: &str) {
    host::set_property(host::DECISION, summary.as_bytes());
    debug_line(method, path, summary);
}

/// The debug-log line of a decision (SPEC §5: every decision is visible to operators).
fn debug_line(method: &str, path: &str, summary: &str) {
    if host::logs_at(host::DEBUG) {
        host::log(host::DEBUG, &format!("toolgate: {} {}: {summary}", Quoted(method), Quoted(path)));
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// What the filter keeps of a JSON POST while its body is buffered.
struct Held {
    headers: RequestHeaders,
    principal: Option<String>,
    port: u16,
    cluster: Option<String>,
    encoded: Option<String>,
    /// Body bytes buffered so far.
    buffered: usize,
}

struct Request {
    evaluator: Option<Rc<Evaluator>>,
    needs: Needs,
    headers: Rc<WantedHeaders>,
    metrics: Metrics,
    held: Option<Held>,
}

impl Context for Request {}

impl Request {
    fn property_string(path: &'static [u8]) -> Option<String> {
        host::property(path).and_then(|b| String::from_utf8(b).ok()).filter(|s| !s.is_empty())
    }

    /// The listener port (`destination.port` is the local address of the downstream connection).
    fn listener_port() -> u16 {
        host::property(host::DESTINATION_PORT)
            .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
            .map(i64::from_le_bytes)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0)
    }

    fn reply(&mut self, reply: &Reply) -> Action {
        // If the host refused the local response, the request must still not continue: pausing
        // leaves it to Envoy's stream timeouts (never forwarded).
        host::send_response(reply.status, &[("content-type", "application/json")], reply.body.as_bytes());
        Action::Pause
    }

    /// Records and enforces a decision.
    fn enforce(
        &mut self,
        req: &HttpRequest<'_>,
        decision: &Decision<'_>,
        body: BodyInput<'_, '_>,
        debug_reasons: bool,
    ) -> Action {
        let summary = decision.summary();
        record(req.method, req.path, &summary);
        match &decision.verdict {
            Verdict::Allow => {
                Metrics::inc(if decision.under_policy { self.metrics.allow } else { self.metrics.allow_unrestricted });
                Action::Continue
            }
            Verdict::Deny(reason) => {
                use toolgate_policy::eval::{DenyReason, Level};
                Metrics::inc(match reason {
                    DenyReason::NoRuleMatched { level: Level::Gateway, .. } => self.metrics.deny_gateway,
                    DenyReason::NoRuleMatched { level: Level::Backend, .. } => self.metrics.deny_backend,
                    DenyReason::McpHeaderMismatch { .. } => self.metrics.deny_mcp_header,
                });
                let reply = response::denial(body, decision, debug_reasons);
                self.reply(&reply)
            }
        }
    }

    fn deny_without_plan(&mut self) -> Action {
        Metrics::inc(self.metrics.deny_no_plan);
        host::set_property(host::DECISION, b"deny: no valid plan loaded");
        host::log(host::WARN, "toolgate: denying request: no valid plan loaded");
        let reply = response::denial(BodyInput::None, &no_plan_decision(), false);
        self.reply(&reply)
    }
}

/// The decision reported when no plan could ever be loaded.
fn no_plan_decision() -> Decision<'static> {
    Decision {
        verdict: Verdict::Deny(toolgate_policy::eval::DenyReason::NoRuleMatched {
            level: toolgate_policy::eval::Level::Gateway,
            policies: 0,
        }),
        under_policy: true,
        message: None,
        gateway_rule: None,
        backend_rule: None,
        not_mcp: None,
    }
}

/// `application/json`, case-insensitive, parameters allowed.
fn is_json(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let Some(ev) = self.evaluator.clone() else { return self.deny_without_plan() };
        // Attributes no rule of the plan looks at are not read (same decisions, fewer host calls).
        let cluster = if self.needs.cluster { Self::property_string(host::CLUSTER_NAME) } else { None };
        let route = ev.route(cluster.as_deref());
        if !route.under_policy() {
            Metrics::inc(self.metrics.allow_unrestricted);
            if host::logs_at(host::DEBUG) {
                let headers = RequestHeaders::read(&self.headers);
                debug_line(headers.get(METHOD), headers.get(PATH), "allow (no policy)");
            }
            return Action::Continue;
        }
        let headers = RequestHeaders::read(&self.headers);
        let principal = if self.needs.principal {
            Self::property_string(host::PEER_URI_SAN).filter(|p| p.starts_with("spiffe://"))
        } else {
            None
        };
        let port = if self.needs.port { Self::listener_port() } else { 0 };
        let json_post = headers.get(METHOD) == "POST" && is_json(headers.get(CONTENT_TYPE));
        if json_post && !end_of_stream {
            let encoding = headers.get(CONTENT_ENCODING).trim();
            let encoded = (!encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity")).then(|| encoding.to_string());
            self.held = Some(Held { headers, principal, port, cluster, encoded, buffered: 0 });
            return Action::Continue; // the body callback pauses until the whole body is here
        }
        // Decided on HTTP attributes alone (a JSON POST without a body is not MCP).
        let not_mcp = NotMcp::EmptyBody;
        let body = if json_post { BodyInput::NotMcp(&not_mcp) } else { BodyInput::None };
        let pairs = headers.pairs();
        let req = HttpRequest {
            method: headers.get(METHOD),
            path: headers.get(PATH),
            authority: headers.get(AUTHORITY),
            port,
            headers: &pairs,
            principal: principal.as_deref(),
        };
        let decision = route.decide(&req, body);
        self.enforce(&req, &decision, body, ev.plan().settings.debug_reasons)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let Some(ev) = self.evaluator.clone() else { return Action::Continue };
        if self.held.is_none() {
            return Action::Continue;
        }
        let limit = ev.plan().settings.max_body_bytes as usize;
        if body_size > limit {
            Metrics::inc(self.metrics.too_large);
            if let Some(held) = self.held.take() {
                record("POST", held.headers.get(PATH), "deny: body over the limit");
            }
            return self.reply(&response::too_large());
        }
        if !end_of_stream {
            if let Some(held) = &mut self.held {
                held.buffered = body_size;
            }
            return Action::Pause;
        }
        self.decide_held(&ev, body_size)
    }

    /// A body that ends with trailers (HTTP/2) never reaches `end_of_stream` in the body callback:
    /// decide here, or the buffered body would continue undecided.
    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        let Some(ev) = self.evaluator.clone() else { return Action::Continue };
        match self.held.as_ref().map(|h| h.buffered) {
            Some(buffered) => self.decide_held(&ev, buffered),
            None => Action::Continue,
        }
    }
}

impl Request {
    /// Reads the whole buffered body of a held JSON POST and enforces the decision.
    fn decide_held(&mut self, ev: &Evaluator, body_size: usize) -> Action {
        let Some(held) = self.held.take() else { return Action::Continue };
        // An unreadable body is an empty one: not MCP, so it can only pass rules without MCP constraints.
        let bytes = host::request_body(body_size).unwrap_or_default();
        let read = match &held.encoded {
            Some(encoding) => Err(NotMcp::Encoded { encoding: encoding.clone() }),
            None => mcp::read_body(&bytes, ReadOptions::default()),
        };
        let body = match &read {
            Ok(mcp) => BodyInput::Mcp(mcp),
            Err(not_mcp) => BodyInput::NotMcp(not_mcp),
        };
        let pairs = held.headers.pairs();
        let req = HttpRequest {
            method: "POST",
            path: held.headers.get(PATH),
            authority: held.headers.get(AUTHORITY),
            port: held.port,
            headers: &pairs,
            principal: held.principal.as_deref(),
        };
        let decision = ev.route(held.cluster.as_deref()).decide(&req, body);
        self.enforce(&req, &decision, body, ev.plan().settings.debug_reasons)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header block as the host serialises it.
    fn block(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
        for (k, v) in pairs {
            out.extend((k.len() as u32).to_le_bytes());
            out.extend((v.len() as u32).to_le_bytes());
        }
        for (k, v) in pairs {
            out.extend(*k);
            out.push(0);
            out.extend(*v);
            out.push(0);
        }
        out
    }

    fn wanted(extra: &[&str]) -> WantedHeaders {
        WantedHeaders::with(FILTER_HEADERS.iter().chain(eval::HEADERS_READ.iter()).chain(extra).copied())
    }

    #[test]
    fn request_headers_keep_only_wanted_ones_in_order() {
        let pairs: &[(&[u8], &[u8])] = &[
            (b":method", b"POST"),
            (b"x-request-id", b"abc"),
            (b"mcp-name", b"echo"),
            (b"x-team", b"blue"),
            (b"content-type", b"application/json"),
            (b"x-team", b"red"),
        ];
        let h = RequestHeaders::from_block(block(pairs), &wanted(&["x-team"]));
        assert_eq!(
            h.pairs(),
            vec![(":method", "POST"), ("mcp-name", "echo"), ("x-team", "blue"), ("content-type", "application/json"), ("x-team", "red")]
        );
        assert_eq!(h.get(METHOD), "POST");
        assert_eq!(h.get(CONTENT_TYPE), "application/json");
        assert_eq!(h.get(PATH), "");
    }

    #[test]
    fn wanted_headers_are_found_by_hash_whatever_their_number() {
        // A plan whose matchers name 5,000 headers: the filter's own keep their indexes, and the
        // last name is found like the first (one hash lookup per request header).
        let names: Vec<String> = (0..5000).map(|i| format!("x-h{i}")).collect();
        let w = wanted(&names.iter().map(String::as_str).collect::<Vec<_>>());
        for (i, name) in FILTER_HEADERS.iter().enumerate() {
            assert_eq!(w.position(name.as_bytes()), Some(i));
        }
        assert!(w.position(b"x-h4999").is_some());
        assert_eq!(w.position(b"x-h5000"), None);
        assert_eq!(w.position(b"\xff"), None);
        let pairs: &[(&[u8], &[u8])] = &[(b"x-h4999", b"v"), (b":method", b"POST"), (b"x-other", b"o")];
        let h = RequestHeaders::from_block(block(pairs), &w);
        assert_eq!(h.pairs(), vec![("x-h4999", "v"), (":method", "POST")]);
        assert_eq!(h.get(METHOD), "POST");
    }

    #[test]
    fn local_responses_serialise_headers_as_the_abi_says() {
        let map = host::serialize_map(&[("content-type", "application/json"), ("a", "")]);
        assert_eq!(map, block(&[(b"content-type", b"application/json"), (b"a", b"")]));
    }

    #[test]
    fn long_values_and_many_headers() {
        // Lengths of 128 and more are not UTF-8 in the length table; the text still is.
        let long = "v".repeat(300);
        let accents = "é".repeat(100);
        let names: Vec<String> = (0..40).map(|i| format!("x-h{i}")).collect();
        let mut pairs: Vec<(&[u8], &[u8])> = names.iter().map(|n| (n.as_bytes(), long.as_bytes())).collect();
        pairs.push((b"mcp-name", accents.as_bytes()));
        let h = RequestHeaders::from_block(block(&pairs), &wanted(&["x-h7"]));
        assert_eq!(h.pairs(), vec![("x-h7", long.as_str()), ("mcp-name", accents.as_str())]);
    }

    #[test]
    fn first_of_a_repeated_filter_header_wins() {
        let pairs: &[(&[u8], &[u8])] = &[(b"content-type", b"text/plain"), (b"content-type", b"application/json")];
        let h = RequestHeaders::from_block(block(pairs), &wanted(&[]));
        assert_eq!(h.get(CONTENT_TYPE), "text/plain");
        assert_eq!(h.pairs().len(), 2);
    }

    #[test]
    fn a_value_that_is_not_utf8_is_converted_lossily() {
        let pairs: &[(&[u8], &[u8])] = &[(b":path", b"/mcp"), (b"x-team", b"bl\xffue"), (b"x-other", b"\xfe")];
        let h = RequestHeaders::from_block(block(pairs), &wanted(&["x-team"]));
        assert_eq!(h.pairs(), vec![(":path", "/mcp"), ("x-team", "bl\u{FFFD}ue")]);
        assert_eq!(h.get(PATH), "/mcp");
    }

    #[test]
    fn a_malformed_block_yields_what_could_be_read() {
        let whole = block(&[(b":method", b"GET"), (b":path", b"/mcp")]);
        let all = [(":method", "GET"), (":path", "/mcp")];
        for cut in 0..whole.len() {
            let h = RequestHeaders::from_block(whole[..cut].to_vec(), &wanted(&[]));
            let read = h.pairs();
            assert!(all.starts_with(&read), "cut at {cut}: {read:?}");
            // The last header is complete once its value is (its closing NUL may be cut).
            assert_eq!(read.len() == 2, cut >= whole.len() - 1, "cut at {cut}: {read:?}");
        }
        // A count far larger than the block, and lengths that overflow.
        let mut bad = u32::MAX.to_le_bytes().to_vec();
        bad.extend(u32::MAX.to_le_bytes());
        bad.extend(u32::MAX.to_le_bytes());
        assert!(RequestHeaders::from_block(bad, &wanted(&[])).pairs().is_empty());
        assert!(RequestHeaders::from_block(Vec::new(), &wanted(&[])).pairs().is_empty());
    }
    /// `make wasm` keeps only the exports in filter/exports.txt, so a callback implemented here but
    /// missing there would never be called by Envoy.
    #[test]
    fn every_implemented_callback_is_exported() {
        let kept: Vec<&str> = include_str!("../exports.txt").lines().filter(|l| !l.starts_with('#')).collect();
        let source = include_str!("lib.rs").split("#[cfg(test)]").next().unwrap_or_default();
        let mut checked = 0;
        for (at, _) in source.match_indices("    fn on_") {
            let name: String = source[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let export = format!("proxy_{}", name.replacen("on_http_", "on_", 1));
            assert!(kept.contains(&export.as_str()), "{name} is implemented but {export} is not in filter/exports.txt");
            checked += 1;
        }
        assert!(checked >= 4, "found only {checked} callbacks");
    }
}
