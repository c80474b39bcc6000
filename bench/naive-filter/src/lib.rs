//! The "naive" reference filter of `make bench` (configuration (s)): holds a request's body, parses
//! it with serde_json into a `Value` and allows it when `params.name` is one of the 20 benchmark tools
//! (tool-00000 ... tool-00019), else answers 403. No identity, levels, metrics or access-log record:
//! the cost of one body read plus a general-purpose JSON parse over the no-op floor.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Naive))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Naive;

impl Context for Naive {}

const TOOLS: [&str; 20] = [
    "tool-00000",
    "tool-00001",
    "tool-00002",
    "tool-00003",
    "tool-00004",
    "tool-00005",
    "tool-00006",
    "tool-00007",
    "tool-00008",
    "tool-00009",
    "tool-00010",
    "tool-00011",
    "tool-00012",
    "tool-00013",
    "tool-00014",
    "tool-00015",
    "tool-00016",
    "tool-00017",
    "tool-00018",
    "tool-00019",
];

fn allowed(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("params")?
                .get("name")?
                .as_str()
                .map(|n| TOOLS.contains(&n))
        })
        .unwrap_or(false)
}

impl HttpContext for Naive {
    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        let body = self.get_http_request_body(0, body_size).unwrap_or_default();
        if allowed(&body) {
            Action::Continue
        } else {
            self.send_http_response(403, vec![("content-type", "text/plain")], Some(b"denied"));
            Action::Pause
        }
    }
}
