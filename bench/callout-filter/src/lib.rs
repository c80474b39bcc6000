//! A proxy-wasm HTTP filter that makes one fixed gRPC call per request and nothing else: it holds
//! the request (headers and body), sends a CheckRequest given in its configuration, whole, to
//! `envoy.service.auth.v3.Authorization/Check`, and lets the request go on when any answer comes.
//! It reads no header, no body, no answer, keeps no count and records nothing.
//!
//! `make bench` runs it as row (g0) in (g1)'s place, with the CheckRequest Toolgate sends for the
//! benchmark's call (as bench/run.py writes it): what a callout costs through the proxy-wasm ABI in
//! this Envoy before any of Toolgate's own work, to compare with Envoy's ext_authz (g2).
//!
//! Configuration: two hex strings separated by a space: the serialised `GrpcService` that names the
//! authorizer's cluster (proxy-wasm's `upstream`), and the CheckRequest.

use std::time::Duration;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

#[derive(Clone, Default)]
struct Call {
    upstream: String,
    message: Vec<u8>,
}

#[derive(Default)]
struct Root {
    call: Call,
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2).map(|p| std::str::from_utf8(p).ok().and_then(|p| u8::from_str_radix(p, 16).ok())).collect()
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let text = String::from_utf8(config).unwrap_or_default();
        let mut parts = text.split_whitespace();
        let upstream = parts.next().and_then(unhex).and_then(|u| String::from_utf8(u).ok());
        let message = parts.next().and_then(unhex);
        match (upstream, message) {
            (Some(upstream), Some(message)) => {
                self.call = Call { upstream, message };
                true
            }
            _ => false,
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Callout { call: self.call.clone() }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Callout {
    call: Call,
}

impl Context for Callout {
    fn on_grpc_call_response(&mut self, _token_id: u32, _status_code: u32, _response_size: usize) {
        self.resume_http_request();
    }
}

impl HttpContext for Callout {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        if end_of_stream {
            return Action::Continue;
        }
        Action::Pause
    }

    fn on_http_request_body(&mut self, _body_size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        let sent = self.dispatch_grpc_call(
            &self.call.upstream,
            "envoy.service.auth.v3.Authorization",
            "Check",
            Vec::new(),
            Some(&self.call.message),
            Duration::from_secs(5),
        );
        match sent {
            Ok(_) => Action::Pause,
            Err(_) => Action::Continue,
        }
    }
}
