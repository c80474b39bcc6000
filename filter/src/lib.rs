//! Toolgate's Envoy HTTP filter: the proxy-wasm ABI 0.2.1, implemented directly, over the engine's
//! request lifecycle (`toolgate_policy::lifecycle`). This crate holds no decision logic: it routes
//! the host's callbacks to the lifecycle and implements [`Host`] and [`RootHost`] with host calls.
//!
//! No proxy-wasm SDK: its dispatcher and host-call wrappers panic on statuses and tokens they do not
//! expect (a panic kills the VM), and it exports every callback, which Envoy then calls on every
//! request. The exports here are exactly the callbacks the filter needs.
//!
//! Never panics on input: every host value is optional, every failure fails closed, and a callback
//! for an unknown context or token does nothing.

mod host;

use std::cell::RefCell;
use std::collections::HashMap;

use toolgate_policy::lifecycle::headers::{deserialize_map, serialize_map};
use toolgate_policy::lifecycle::{
    Action, CallAnswer, Callout, Counter, Host, HostBase, LogLevel, Plugin, Property, Request,
    RootHost,
};

/// A root context: one plugin instance (one listener's plan) in this VM.
struct Root {
    plugin: Plugin,
    counters: Counters,
}

/// Counter ids, defined once per root context.
#[derive(Clone, Copy, Default)]
struct Counters([u32; Counter::ALL.len()]);

impl Counters {
    fn define() -> Self {
        let mut ids = [0; Counter::ALL.len()];
        for (id, counter) in ids.iter_mut().zip(Counter::ALL) {
            *id = host::define_counter(counter.name());
        }
        Counters(ids)
    }

    fn increment(&self, counter: Counter, n: u64) {
        if let Some(i) = Counter::ALL.iter().position(|c| *c == counter) {
            host::increment(
                self.0.get(i).copied().unwrap_or(0),
                i64::try_from(n).unwrap_or(i64::MAX),
            );
        }
    }
}

/// An HTTP context: one request.
struct Stream {
    request: Request,
    counters: Counters,
}

/// How often the host's log level is read again (a per-request host call for it measurably cost
/// (c) in `make bench`); a change through Envoy's `/logging` takes effect within this time.
const LOG_LEVEL_REFRESH_MS: u32 = 1000;

/// Maps keyed by the host's context ids and call tokens (Envoy's counters, not a client's input):
/// hashed with foldhash rather than std's SipHash, which costs several hundred instructions in the VM
/// at each of a request's 4 to 6 callbacks.
type IdMap<V> = HashMap<u32, V, foldhash::fast::FixedState>;

thread_local! {
    /// The host's log level as last read (at plan load, then every [`LOG_LEVEL_REFRESH_MS`]).
    static LOG_LEVEL: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
    static ROOTS: RefCell<IdMap<Root>> = RefCell::new(IdMap::default());
    static STREAMS: RefCell<IdMap<Stream>> = RefCell::new(IdMap::default());
    /// Call token → the context that made the call.
    static CALLS: RefCell<IdMap<u32>> = RefCell::new(IdMap::default());
}

/// Runs `f` on the stream of `context_id`, if there is one (and no other callback holds it).
fn with_stream<T>(context_id: u32, f: impl FnOnce(&mut Stream, &mut FilterHost) -> T) -> Option<T> {
    STREAMS.with(|streams| {
        let mut streams = streams.try_borrow_mut().ok()?;
        let stream = streams.get_mut(&context_id)?;
        let mut host = FilterHost {
            context_id,
            counters: stream.counters,
        };
        Some(f(stream, &mut host))
    })
}

fn action(a: Action) -> u32 {
    match a {
        Action::Continue => 0,
        Action::Pause => 1,
    }
}

// ---- exports ----------------------------------------------------------------------------------

#[cfg(target_os = "wasi")]
extern "C" {
    fn __wasm_call_ctors();
}

/// WASI reactor initialisation (static constructors).
#[no_mangle]
pub extern "C" fn _initialize() {
    #[cfg(target_os = "wasi")]
    // SAFETY: called once by the host before any other export, as WASI reactors require.
    unsafe {
        __wasm_call_ctors();
    }
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// The host allocates the memory of every value it hands over here: a boxed slice of exactly
/// `size` bytes, which `host::owned` takes back as a `Vec`.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut memory: Vec<std::mem::MaybeUninit<u8>> = Vec::with_capacity(size);
    // SAFETY: the capacity is `size`; the host writes the bytes before they are read.
    unsafe { memory.set_len(size) };
    Box::into_raw(memory.into_boxed_slice()) as *mut u8
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_root_context_id: u32, _vm_configuration_size: usize) -> u32 {
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(context_id: u32, parent_context_id: u32) {
    if parent_context_id == 0 {
        ROOTS.with(|roots| {
            if let Ok(mut roots) = roots.try_borrow_mut() {
                roots.insert(
                    context_id,
                    Root {
                        plugin: Plugin::default(),
                        counters: Counters::default(),
                    },
                );
            }
        });
        return;
    }
    let stream = ROOTS.with(|roots| {
        let roots = roots.try_borrow().ok()?;
        let root = roots.get(&parent_context_id)?;
        Some(Stream {
            request: root.plugin.request(),
            counters: root.counters,
        })
    });
    if let Some(stream) = stream {
        STREAMS.with(|streams| {
            if let Ok(mut streams) = streams.try_borrow_mut() {
                streams.insert(context_id, stream);
            }
        });
    }
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(root_context_id: u32, configuration_size: usize) -> u32 {
    LOG_LEVEL.with(|l| l.set(host::log_level()));
    host::set_tick_period(LOG_LEVEL_REFRESH_MS);
    let config = host::buffer(host::PLUGIN_CONFIGURATION, configuration_size).unwrap_or_default();
    ROOTS.with(|roots| {
        let Ok(mut roots) = roots.try_borrow_mut() else {
            return 1;
        };
        let Some(root) = roots.get_mut(&root_context_id) else {
            return 1;
        };
        if root.counters.0.iter().all(|id| *id == 0) {
            root.counters = Counters::define();
        }
        let mut host = FilterHost {
            context_id: root_context_id,
            counters: root.counters,
        };
        u32::from(root.plugin.configure(&mut host, &config))
    })
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(_root_context_id: u32) {
    LOG_LEVEL.with(|l| l.set(host::log_level()));
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(
    context_id: u32,
    _headers: usize,
    end_of_stream: u32,
) -> u32 {
    // A request without a stream (its root was never created) is not one Toolgate knows: deny it.
    let done = with_stream(context_id, |s, host| {
        s.request.on_request_headers(host, end_of_stream != 0)
    });
    action(done.unwrap_or_else(|| {
        Plugin::default()
            .request()
            .on_request_headers(&mut FilterHost::orphan(context_id), end_of_stream != 0)
    }))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(
    context_id: u32,
    body_size: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        with_stream(context_id, |s, host| {
            s.request
                .on_request_body(host, body_size, end_of_stream != 0)
        })
        .unwrap_or(Action::Pause),
    )
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(context_id: u32, _trailers: usize) -> u32 {
    action(
        with_stream(context_id, |s, host| s.request.on_request_trailers(host))
            .unwrap_or(Action::Pause),
    )
}

// The response callbacks: list filtering (docs/semantics.md §5). For every other request the lifecycle returns
// at once; a response without a stream is not Toolgate's to change. Built without the
// `list-filtering` feature, the module does not export them (Envoy then makes no response call into
// the VM) and refuses plans that filter lists ([`RootHost::filters_responses`]).
//
// Their `Continue` when `with_stream` finds nothing cannot pass a list unfiltered: a context without a
// stream had its request denied (`proxy_on_request_headers`), and the streams are never busy here, as
// Envoy's Wasm host does not nest callbacks (a local reply asked for inside one is sent after it
// returns). A panic aborts, which traps, and Envoy fails the stream (`fail_open: false`): its error
// before the response headers, a reset after (tests/e2e/test_resilience.py).

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_headers(
    context_id: u32,
    _headers: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        with_stream(context_id, |s, host| {
            s.request.on_response_headers(host, end_of_stream != 0)
        })
        .unwrap_or(Action::Continue),
    )
}

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_body(
    context_id: u32,
    body_size: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        with_stream(context_id, |s, host| {
            s.request
                .on_response_body(host, body_size, end_of_stream != 0)
        })
        .unwrap_or(Action::Continue),
    )
}

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(context_id: u32, _trailers: usize) -> u32 {
    action(
        with_stream(context_id, |s, host| s.request.on_response_trailers(host))
            .unwrap_or(Action::Continue),
    )
}

/// The context that made the call with `token` (forgotten: each call is answered once).
fn caller(token: u32) -> Option<u32> {
    CALLS.with(|calls| calls.try_borrow_mut().ok()?.remove(&token))
}

fn answer(token: u32, answer: impl FnOnce() -> CallAnswer) {
    let Some(context_id) = caller(token) else {
        return;
    };
    host::set_effective_context(context_id);
    let answer = answer();
    with_stream(context_id, |s, host| {
        s.request.on_call_answer(host, token, answer)
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_http_call_response(
    _context_id: u32,
    token: u32,
    headers: usize,
    body_size: usize,
    _trailers: usize,
) {
    answer(token, || {
        if headers == 0 {
            // Envoy reports a failed call (reset, timeout, no upstream) as a response without headers.
            return CallAnswer::Failed;
        }
        let headers = host::header_map(host::HTTP_CALL_RESPONSE_HEADERS)
            .map(|m| deserialize_map(&m))
            .unwrap_or_default();
        let body = if body_size == 0 {
            Vec::new()
        } else {
            host::buffer(host::HTTP_CALL_RESPONSE_BODY, body_size).unwrap_or_default()
        };
        CallAnswer::Http { headers, body }
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_grpc_receive(_context_id: u32, token: u32, message_size: usize) {
    answer(token, || CallAnswer::Grpc {
        status: 0,
        message: host::buffer(host::GRPC_RECEIVE_BUFFER, message_size).unwrap_or_default(),
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_grpc_close(_context_id: u32, token: u32, status: u32) {
    // A unary call that was answered was forgotten already: this is a failure.
    answer(token, || CallAnswer::Grpc {
        status: if status == 0 { 13 } else { status },
        message: Vec::new(),
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_delete(context_id: u32) {
    STREAMS.with(|streams| {
        if let Ok(mut streams) = streams.try_borrow_mut() {
            streams.remove(&context_id);
        }
    });
    CALLS.with(|calls| {
        if let Ok(mut calls) = calls.try_borrow_mut() {
            calls.retain(|_, c| *c != context_id);
        }
    });
    ROOTS.with(|roots| {
        if let Ok(mut roots) = roots.try_borrow_mut() {
            roots.remove(&context_id);
        }
    });
}

// ---- the lifecycle's host -----------------------------------------------------------------------

/// The host of a request (or, for loading plans, of a root context).
struct FilterHost {
    context_id: u32,
    counters: Counters,
}

impl FilterHost {
    /// The host of a request that has no stream of its own.
    fn orphan(context_id: u32) -> Self {
        FilterHost {
            context_id,
            counters: Counters::default(),
        }
    }
}

fn level(l: LogLevel) -> u32 {
    match l {
        LogLevel::Debug => host::DEBUG,
        LogLevel::Info => host::INFO,
        LogLevel::Warn => host::WARN,
        LogLevel::Error => host::ERROR,
    }
}

impl HostBase for FilterHost {
    fn log(&mut self, l: LogLevel, message: &str) {
        host::log(level(l), message);
    }

    fn count(&mut self, counter: Counter) {
        self.counters.increment(counter, 1);
    }

    fn count_by(&mut self, counter: Counter, n: u64) {
        if n > 0 {
            self.counters.increment(counter, n);
        }
    }

    fn now_ms(&mut self) -> u64 {
        host::now_ms()
    }
}

impl Host for FilterHost {
    fn request_headers(&mut self) -> Option<Vec<u8>> {
        host::header_map(host::REQUEST_HEADERS)
    }

    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        host::property(match property {
            Property::PeerUriSan => host::PEER_URI_SAN,
            Property::ClusterName => host::CLUSTER_NAME,
            Property::DestinationPort => host::DESTINATION_PORT,
            Property::RequestProtocol => host::REQUEST_PROTOCOL,
            Property::RequestedServerName => host::REQUESTED_SERVER_NAME,
        })
    }

    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        host::property(host::METADATA)
    }

    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        host::buffer(host::REQUEST_BODY, size)
    }

    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
        host::send_response(status, &serialize_map(headers), body)
    }

    fn resume(&mut self) {
        host::resume_request();
    }

    fn call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        let token = match *callout {
            Callout::Grpc {
                upstream,
                service,
                method,
                message,
                timeout_ms,
                ..
            } => host::grpc_call(upstream, service, method, message, timeout_ms),
            Callout::Http {
                cluster,
                headers,
                body,
                timeout_ms,
            } => host::http_call(cluster, &serialize_map(headers), body, timeout_ms),
        }?;
        let context_id = self.context_id;
        CALLS.with(|calls| {
            calls
                .try_borrow_mut()
                .ok()
                .map(|mut calls| calls.insert(token, context_id))
        })?;
        Some(token)
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        host::replace_header(name, value);
    }

    fn add_request_header(&mut self, name: &str, value: &str) {
        host::add_header(name, value);
    }

    fn remove_request_header(&mut self, name: &str) {
        host::remove_header(host::REQUEST_HEADERS, name);
    }

    fn record(&mut self, summary: &str) {
        host::set_property(host::DECISION, summary.as_bytes());
    }

    fn logs_at(&mut self, l: LogLevel) -> bool {
        LOG_LEVEL.with(|current| current.get() <= level(l))
    }

    fn response_header(&mut self, lower_name: &str) -> Option<String> {
        host::header(host::RESPONSE_HEADERS, lower_name).and_then(|v| String::from_utf8(v).ok())
    }

    fn remove_response_header(&mut self, name: &str) {
        host::remove_header(host::RESPONSE_HEADERS, name);
    }

    fn response_body(&mut self, size: usize) -> Option<Vec<u8>> {
        host::buffer(host::RESPONSE_BODY, size)
    }

    fn replace_response_body(&mut self, size: usize, body: &[u8]) -> bool {
        host::replace_buffer(host::RESPONSE_BODY, size, body)
    }
}

impl RootHost for FilterHost {
    fn filters_responses(&self) -> bool {
        cfg!(feature = "list-filtering")
    }

    fn plugin_name(&mut self) -> String {
        host::property(host::PLUGIN_NAME)
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| "toolgate".to_string())
    }

    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>> {
        host::shared_data(key)
    }

    fn shared_set(&mut self, key: &str, value: &[u8]) {
        host::set_shared_data(key, value);
    }
}
