//! Toolgate's Envoy HTTP filter: thin proxy-wasm glue over `toolgate-policy`.
//!
//! Per request: read the HTTP attributes, the caller's SPIFFE ID (first URI SAN of the verified
//! client certificate) and the routed cluster; if no policy applies, continue untouched. Otherwise
//! a JSON POST is held until its whole body is buffered (headers continue, body pauses; the
//! rendered config puts Envoy's buffer filter after this one so the router sees nothing before the
//! decision), read as MCP and decided; everything else is decided on its headers.
//!
//! Never panics on input: every host value is optional and every failure denies.

use std::cell::RefCell;
use std::rc::Rc;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType};
use toolgate_policy::eval::{self, BodyInput, Decision, Evaluator, HttpRequest, Verdict};
use toolgate_policy::mcp::{self, NotMcp, ReadOptions};
use toolgate_policy::plan::{CompiledPlan, RulePlan};
use toolgate_policy::response::{self, Reply};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
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
        let d = |name: &str| proxy_wasm::hostcalls::define_metric(MetricType::Counter, name).unwrap_or(0);
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
        if id != 0 {
            let _ = proxy_wasm::hostcalls::increment_metric(id, 1);
        }
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

/// Request headers the filter reads itself.
const FILTER_HEADERS: [&str; 5] = [":method", ":path", ":authority", "content-type", "content-encoding"];

/// The request headers that can matter to a decision: the filter's, the evaluator's
/// ([`eval::HEADERS_READ`]) and those the plan's header matchers name. Only these are copied out of
/// the host's header map (fewer allocations in the VM per request); the decisions are the same.
#[derive(Debug, Default)]
struct WantedHeaders(Vec<String>);

impl WantedHeaders {
    fn of(plan: &CompiledPlan) -> Self {
        let mut names: Vec<String> =
            FILTER_HEADERS.iter().chain(eval::HEADERS_READ.iter()).map(|n| n.to_string()).collect();
        for h in rules(plan).flat_map(|r| &r.http.headers) {
            if !names.contains(&h.name) {
                names.push(h.name.clone());
            }
        }
        WantedHeaders(names)
    }

    fn contains(&self, name: &[u8]) -> bool {
        self.0.iter().any(|n| n.as_bytes() == name)
    }
}

extern "C" {
    /// proxy-wasm ABI 0.2.1 (also declared, privately, by the SDK): the serialised header map.
    fn proxy_get_header_map_pairs(map_type: u32, return_map_data: *mut *mut u8, return_map_size: *mut usize) -> u32;
}

/// The request headers named in `wanted`, in order (repeated names kept), from one host call. Unlike
/// the SDK's `get_http_request_headers`, allocates only for these and never panics (a value that is
/// not UTF-8 is converted lossily; a malformed map yields what could be read).
fn request_headers(wanted: &WantedHeaders) -> Vec<(String, String)> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: on success the host hands over a block it got from `proxy_on_memory_allocate` (the
    // SDK's allocator: a boxed slice of exactly `size` bytes), as the SDK's own `get_map` assumes.
    let bytes = unsafe {
        if proxy_get_header_map_pairs(0 /* HttpRequestHeaders */, &mut data, &mut size) != 0 || data.is_null() {
            return Vec::new();
        }
        Vec::from_raw_parts(data, size, size)
    };
    let word = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let Some(count) = word(0) else { return Vec::new() };
    let mut out = Vec::with_capacity(wanted.0.len());
    let mut p = count.saturating_mul(8).saturating_add(4);
    for n in 0..count {
        let (Some(klen), Some(vlen)) = (word(4 + n * 8), word(8 + n * 8)) else { break };
        let value_at = p.saturating_add(klen).saturating_add(1);
        let (Some(key), Some(value)) = (bytes.get(p..p.saturating_add(klen)), bytes.get(value_at..value_at.saturating_add(vlen)))
        else {
            break;
        };
        p = value_at.saturating_add(vlen).saturating_add(1);
        if wanted.contains(key) {
            out.push((utf8(key), utf8(value)));
        }
    }
    out
}

fn utf8(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
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
        self.get_property(vec!["plugin_name"])
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
                log::info!(
                    "toolgate: plugin {plugin}: loaded plan {} for listener {} ({} gateway-level, {} backend-level policies; {} bytes in {:.1} ms)",
                    short(&plan.hash),
                    plan.listener,
                    plan.gateway.allow.len(),
                    plan.backends.values().map(|b| b.allow.len()).sum::<usize>(),
                    config.len(),
                    took.as_secs_f64() * 1e3
                );
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
                        log::error!(
                            "toolgate: plugin {plugin}: REFUSED new plan ({e}); keeping last good plan {}",
                            short(&ev.plan().hash)
                        );
                        self.needs = Needs::of(ev.plan());
                        self.headers = Rc::new(WantedHeaders::of(ev.plan()));
                        self.evaluator = Some(Rc::new(ev));
                    }
                    None => {
                        log::error!(
                            "toolgate: plugin {plugin}: REFUSED plan ({e}); no good plan yet: denying every request"
                        );
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

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// What the filter keeps of a JSON POST while its body is buffered.
struct Held {
    headers: Vec<(String, String)>,
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
    fn property_string(&self, path: Vec<&str>) -> Option<String> {
        self.get_property(path).and_then(|b| String::from_utf8(b).ok()).filter(|s| !s.is_empty())
    }

    /// The listener port (`destination.port` is the local address of the downstream connection).
    fn listener_port(&self) -> u16 {
        self.get_property(vec!["destination", "port"])
            .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
            .map(i64::from_le_bytes)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0)
    }

    fn reply(&mut self, reply: &Reply) -> Action {
        self.send_http_response(reply.status, vec![("content-type", "application/json")], Some(reply.body.as_bytes()));
        Action::Pause
    }

    /// Records and enforces a decision.
    fn enforce(&mut self, decision: &Decision<'_>, body: BodyInput<'_, '_>, debug_reasons: bool) -> Action {
        let summary = decision.summary();
        self.set_property(vec!["toolgate_decision"], Some(summary.as_bytes()));
        log::debug!("toolgate: {summary}");
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
        self.set_property(vec!["toolgate_decision"], Some(b"deny: no valid plan loaded"));
        log::warn!("toolgate: denying request: no valid plan loaded");
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

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers.iter().find(|(n, _)| n == name).map_or("", |(_, v)| v.as_str())
}

/// `application/json`, case-insensitive, parameters allowed.
fn is_json(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let Some(ev) = self.evaluator.clone() else { return self.deny_without_plan() };
        // Attributes no rule of the plan looks at are not read (same decisions, fewer host calls).
        let cluster = if self.needs.cluster { self.property_string(vec!["xds", "cluster_name"]) } else { None };
        let route = ev.route(cluster.as_deref());
        if !route.under_policy() {
            Metrics::inc(self.metrics.allow_unrestricted);
            return Action::Continue;
        }
        let headers = request_headers(&self.headers);
        let principal = if self.needs.principal {
            self.property_string(vec!["connection", "uri_san_peer_certificate"]).filter(|p| p.starts_with("spiffe://"))
        } else {
            None
        };
        let port = if self.needs.port { self.listener_port() } else { 0 };
        let method = header(&headers, ":method");
        if method == "POST" && is_json(header(&headers, "content-type")) && !end_of_stream {
            let encoding = header(&headers, "content-encoding").trim();
            let encoded = (!encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity")).then(|| encoding.to_string());
            self.held = Some(Held { headers, principal, port, cluster, encoded, buffered: 0 });
            return Action::Continue; // the body callback pauses until the whole body is here
        }
        // Decided on HTTP attributes alone (a JSON POST without a body is not MCP).
        let not_mcp = NotMcp::EmptyBody;
        let body = if method == "POST" && is_json(header(&headers, "content-type")) {
            BodyInput::NotMcp(&not_mcp)
        } else {
            BodyInput::None
        };
        let req = HttpRequest {
            method,
            path: header(&headers, ":path"),
            authority: header(&headers, ":authority"),
            port,
            headers: &headers,
            principal: principal.as_deref(),
        };
        let decision = route.decide(&req, body);
        self.enforce(&decision, body, ev.plan().settings.debug_reasons)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let Some(ev) = self.evaluator.clone() else { return Action::Continue };
        if self.held.is_none() {
            return Action::Continue;
        }
        let limit = ev.plan().settings.max_body_bytes as usize;
        if body_size > limit {
            Metrics::inc(self.metrics.too_large);
            self.held = None;
            self.set_property(vec!["toolgate_decision"], Some(b"deny: body over the limit"));
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
        let bytes = self.get_http_request_body(0, body_size).unwrap_or_default();
        let read = match &held.encoded {
            Some(encoding) => Err(NotMcp::Encoded { encoding: encoding.clone() }),
            None => mcp::read_body(&bytes, ReadOptions::default()),
        };
        let body = match &read {
            Ok(mcp) => BodyInput::Mcp(mcp),
            Err(not_mcp) => BodyInput::NotMcp(not_mcp),
        };
        if let Err(e) = &read {
            log::debug!("toolgate: body is not MCP: {e}");
        }
        let req = HttpRequest {
            method: "POST",
            path: header(&held.headers, ":path"),
            authority: header(&held.headers, ":authority"),
            port: held.port,
            headers: &held.headers,
            principal: held.principal.as_deref(),
        };
        let decision = ev.route(held.cluster.as_deref()).decide(&req, body);
        self.enforce(&decision, body, ev.plan().settings.debug_reasons)
    }
}

#[cfg(test)]
mod tests {
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
