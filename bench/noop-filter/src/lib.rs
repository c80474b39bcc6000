//! A proxy-wasm HTTP filter that does nothing: every callback continues. `make bench` runs it in
//! the same V8 runtime and filter position as Toolgate, to measure the floor any Wasm filter pays
//! (VM entry per callback, context creation, the SDK's dispatch).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Noop))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// Every callback keeps its default: `Action::Continue`.
struct Noop;

impl Context for Noop {}

impl HttpContext for Noop {}
