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
//! authorizer's cluster (proxy-wasm's `upstream`), and the CheckRequest. Then, for measuring what
//! single host calls cost Envoy (`make bench-host-calls`, docs/design/host-calls.md;
//! `BENCH_G0_ARGS` of bench/run.py adds them to (g0)), any of these words, each done N times when
//! the answer comes (default: none):
//! - `read_answer=N`: reads the answer (`proxy_get_buffer_bytes`, the gRPC receive buffer);
//! - `read_protocol=N`: reads the `request.protocol` property (`proxy_get_property`);
//! - `clock=N`: reads the clock (`proxy_get_current_time_nanoseconds`);
//! - `count=N`: increments a counter (`proxy_increment_metric`);
//! - `http=CLUSTER_HEX,AUTHORITY_HEX`: the same gRPC request (HTTP/2 POST, length-prefixed message)
//!   sent through proxy-wasm's HTTP call instead; `read_answer` then reads its headers, trailers and
//!   body, what a gRPC answer needs over that call.

use std::time::{Duration, UNIX_EPOCH};

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

#[derive(Clone, Default)]
struct Call {
    upstream: String,
    message: Vec<u8>,
    /// Through proxy-wasm's HTTP call: cluster and authority (`message` is then length-prefixed).
    http: Option<(String, String)>,
    extra: Extra,
}

/// The host calls made when the answer comes (see the module's documentation).
#[derive(Clone, Copy, Default)]
struct Extra {
    read_answer: usize,
    read_protocol: usize,
    clock: usize,
    count: usize,
    counter: u32,
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
    b.chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect()
}

fn unhex_text(s: &str) -> Option<String> {
    unhex(s).and_then(|b| String::from_utf8(b).ok())
}

/// The words after the two hex strings; None if one is not understood.
fn options(words: std::str::SplitWhitespace<'_>) -> Option<(Extra, Option<(String, String)>)> {
    let mut extra = Extra::default();
    let mut http = None;
    for word in words {
        let (key, value) = word.split_once('=')?;
        let n = || value.parse::<usize>().ok();
        match key {
            "read_answer" => extra.read_answer = n()?,
            "read_protocol" => extra.read_protocol = n()?,
            "clock" => extra.clock = n()?,
            "count" => extra.count = n()?,
            "http" => {
                let (cluster, authority) = value.split_once(',')?;
                http = Some((unhex_text(cluster)?, unhex_text(authority)?));
            }
            _ => return None,
        }
    }
    if extra.count > 0 {
        extra.counter = hostcalls::define_metric(MetricType::Counter, "callout.count").ok()?;
    }
    Some((extra, http))
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let text = String::from_utf8(config).unwrap_or_default();
        let mut words = text.split_whitespace();
        let upstream = words.next().and_then(unhex_text);
        let message = words.next().and_then(unhex);
        match (upstream, message, options(words)) {
            (Some(upstream), Some(mut message), Some((extra, http))) => {
                if http.is_some() {
                    let mut framed = vec![0];
                    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                    framed.append(&mut message);
                    message = framed;
                }
                self.call = Call {
                    upstream,
                    message,
                    http,
                    extra,
                };
                true
            }
            _ => false,
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Callout {
            call: self.call.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Callout {
    call: Call,
}

impl Callout {
    /// The host calls of [`Extra`] but the answer's reads; what they return is summed so that none is
    /// optimised away.
    fn extra_calls(&self) -> usize {
        let e = self.call.extra;
        let mut n = 0;
        for _ in 0..e.read_protocol {
            n += self
                .get_property(vec!["request", "protocol"])
                .map_or(0, |b| b.len());
        }
        for _ in 0..e.clock {
            n += self
                .get_current_time()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as usize & 1);
        }
        for _ in 0..e.count {
            n += hostcalls::increment_metric(e.counter, 1).map_or(1, |_| 0);
        }
        n
    }

    /// Resumes the request; the sum keeps the reads from being optimised away.
    fn resume(&self, read: usize) {
        if read != usize::MAX {
            self.resume_http_request();
        }
    }
}

impl Context for Callout {
    fn on_grpc_call_response(&mut self, _token_id: u32, _status_code: u32, response_size: usize) {
        let mut n = self.extra_calls();
        for _ in 0..self.call.extra.read_answer {
            n += self
                .get_grpc_call_response_body(0, response_size)
                .map_or(0, |b| b.len());
        }
        self.resume(n);
    }

    fn on_http_call_response(
        &mut self,
        _token_id: u32,
        _headers: usize,
        body_size: usize,
        trailers: usize,
    ) {
        let mut n = self.extra_calls();
        for _ in 0..self.call.extra.read_answer {
            n += self.get_http_call_response_headers().len();
            if trailers > 0 {
                n += self.get_http_call_response_trailers().len();
            }
            n += self
                .get_http_call_response_body(0, body_size)
                .map_or(0, |b| b.len());
        }
        self.resume(n);
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
        let timeout = Duration::from_secs(5);
        let sent = match &self.call.http {
            Some((cluster, authority)) => self
                .dispatch_http_call(
                    cluster,
                    vec![
                        (":method", "POST"),
                        (":path", "/envoy.service.auth.v3.Authorization/Check"),
                        (":authority", authority),
                        ("content-type", "application/grpc"),
                        ("te", "trailers"),
                    ],
                    Some(&self.call.message),
                    vec![],
                    timeout,
                )
                .is_ok(),
            None => self
                .dispatch_grpc_call(
                    &self.call.upstream,
                    "envoy.service.auth.v3.Authorization",
                    "Check",
                    Vec::new(),
                    Some(&self.call.message),
                    timeout,
                )
                .is_ok(),
        };
        if sent {
            Action::Pause
        } else {
            Action::Continue
        }
    }
}
