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
use toolgate_policy::eval::{BodyInput, Decision, Evaluator, HttpRequest, Verdict};
use toolgate_policy::mcp::{self, NotMcp, ReadOptions};
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

#[derive(Default)]
struct Root {
    evaluator: Option<Rc<Evaluator>>,
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
        match Evaluator::load(&config) {
            Ok(ev) => {
                let plan = ev.plan();
                log::info!(
                    "toolgate: plugin {plugin}: loaded plan {} for listener {} ({} gateway-level, {} backend-level policies)",
                    short(&plan.hash),
                    plan.listener,
                    plan.gateway.allow.len(),
                    plan.backends.values().map(|b| b.allow.len()).sum::<usize>()
                );
                let _ = self.set_shared_data(&last_good_key(&plugin), Some(&config), None);
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
        Some(Box::new(Request { evaluator: self.evaluator.clone(), metrics: self.metrics(), held: None }))
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
}

struct Request {
    evaluator: Option<Rc<Evaluator>>,
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
        let _ = self.set_property(vec!["toolgate_decision"], Some(summary.as_bytes()));
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
        let _ = self.set_property(vec!["toolgate_decision"], Some(b"deny: no valid plan loaded"));
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
        let cluster = self.property_string(vec!["xds", "cluster_name"]);
        let route = ev.route(cluster.as_deref());
        if !route.under_policy() {
            Metrics::inc(self.metrics.allow_unrestricted);
            return Action::Continue;
        }
        let headers = self.get_http_request_headers();
        let principal =
            self.property_string(vec!["connection", "uri_san_peer_certificate"]).filter(|p| p.starts_with("spiffe://"));
        let port = self.listener_port();
        let method = header(&headers, ":method");
        if method == "POST" && is_json(header(&headers, "content-type")) && !end_of_stream {
            let encoding = header(&headers, "content-encoding").trim();
            let encoded = (!encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity")).then(|| encoding.to_string());
            self.held = Some(Held { headers, principal, port, cluster, encoded });
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
            let _ = self.set_property(vec!["toolgate_decision"], Some(b"deny: body over the limit"));
            return self.reply(&response::too_large());
        }
        if !end_of_stream {
            return Action::Pause;
        }
        let Some(held) = self.held.take() else { return Action::Continue };
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
