//! Toolgate's Envoy HTTP filter as an Envoy dynamic module (a native `.so`, Envoy 1.40's
//! dynamic-module ABI "v0.2.0"), over the engine's request lifecycle (`toolgate_policy::lifecycle`).
//! The second host of the engine beside the proxy-wasm filter (`filter/`), which it mirrors: it routes
//! Envoy's event hooks to the lifecycle and implements [`Host`] and [`RootHost`] with ABI callbacks.
//! No decision logic here.
//!
//! No SDK (Envoy's Rust SDK is not on crates.io and is built with bindgen): the ABI functions used are
//! declared by hand in `abi.rs`, and checked against the pinned Envoy's exports by
//! `tests/e2e/test_native_abi.py`.
//!
//! Istio loads dynamic modules from 1.31 on only (and not through WasmPlugin): the controller keeps
//! rendering the Wasm filter for Istio; this module is for `toolgate render --native-module`.
//!
//! # Threads
//!
//! Envoy creates a filter configuration (`on_http_filter_config_new`) on the main thread and runs its
//! streams on the worker threads, concurrently. The engine's [`Plugin`] is not `Send` (it shares the
//! loaded plan by `Rc`, as a Wasm VM is single-threaded), so the configuration keeps the plan's bytes
//! and each worker thread loads its own [`Plugin`] from them on its first stream (as Envoy's Wasm
//! runs one VM per worker). The main thread loads the plan first, to log, count and refuse it.
//!
//! # The `unsafe` surface
//!
//! - `abi.rs`: the `extern "C"` declarations of Envoy's callbacks. Their signatures were transcribed
//!   from `abi.h`; a mismatch is undefined behaviour that no compiler checks (the ABI test checks the
//!   names only).
//! - Calling a callback: every pointer passed is a live Rust slice or struct for the duration of the
//!   call; `filter_envoy_ptr` / `config_envoy_ptr` are the ones Envoy gave this hook (valid until
//!   `on_http_filter_destroy` / `on_http_filter_config_destroy`).
//! - Reading what Envoy returns (`EnvoyBuffer`, `EnvoyHttpHeader`): valid until the end of the current
//!   hook; copied out before any setter is called.
//! - The module's own objects: a `Box<Config>` and a `Box<Filter>` are turned into the
//!   `*_module_ptr`s Envoy hands back; they are borrowed (never as `&mut`: the mutable state is in a
//!   `RefCell`, so a hook re-entered from inside a callback, e.g. the response hooks of a local reply
//!   sent from a request hook, finds it busy instead of aliasing it) and freed exactly once in the
//!   matching `_destroy` hook.
//! - Panics: every hook runs inside `std::panic::catch_unwind` ([`guard`]); a panic in a request hook
//!   denies the request (500, counted as `toolgate.module.panic`), elsewhere it is counted and logged.
//!   No panic unwinds into Envoy. This needs `panic = "unwind"`: the workspace's release profile
//!   aborts on panic, so `make module` builds with the `release-module` profile (a compile error
//!   stops any build of this crate with `panic = "abort"`).

// The exported hooks take Envoy's pointers as plain arguments (Envoy is the only caller, and the ABI
// is what makes them valid): each dereference is an `unsafe` block with its SAFETY note instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[cfg(panic = "abort")]
compile_error!("toolgate-module must be built with panic = \"unwind\" (cargo build --profile release-module -p toolgate-module; make module)");

mod abi;

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use abi::*;
use toolgate_policy::lifecycle::{
    Action, CallAnswer, Callout, Counter, Host, HostBase, LogLevel, Plugin, Property, Request, RootHost,
};

/// Filter state key of the decision summary, read by the access log (`%FILTER_STATE(...:PLAIN)%`).
const DECISION_KEY: &[u8] = b"toolgate.decision";
/// Tells a streamed callout's id (a gRPC call) from a one-shot callout's in [`ModuleHost::calls`].
const GRPC_CALL: u64 = 1 << 63;
/// gRPC status codes the module itself gives a call: INTERNAL (no status in the answer) and
/// UNAVAILABLE (not HTTP 200).
const GRPC_INTERNAL: u32 = 13;
const GRPC_UNAVAILABLE: u32 = 14;

/// The counter of panics caught at a hook (not one of the engine's counters).
const PANIC_COUNTER: &str = "toolgate.module.panic";

// ---- configuration ----------------------------------------------------------------------------

/// Counter ids, defined on the main thread when the configuration is created.
#[derive(Clone, Copy)]
struct Counters {
    ids: [Option<usize>; Counter::ALL.len()],
    panic: Option<usize>,
}

impl Counters {
    const NONE: Counters = Counters { ids: [None; Counter::ALL.len()], panic: None };

    fn define(config: FilterConfigEnvoyPtr) -> Self {
        let define = |name: &str| {
            let mut id = 0usize;
            // SAFETY: `config` is the pointer of the current `on_http_filter_config_new`; the name and
            // `id` live for the call; no labels.
            let status = unsafe {
                envoy_dynamic_module_callback_http_filter_config_define_counter(config, ModuleBuffer::of(name.as_bytes()), std::ptr::null(), 0, &mut id)
            };
            (status == METRICS_SUCCESS).then_some(id)
        };
        let mut ids = [None; Counter::ALL.len()];
        for (id, counter) in ids.iter_mut().zip(Counter::ALL) {
            *id = define(counter.name());
        }
        Counters { ids, panic: define(PANIC_COUNTER) }
    }

    fn id(&self, counter: Counter) -> Option<usize> {
        Counter::ALL.iter().position(|c| *c == counter).and_then(|i| self.ids[i])
    }
}

/// One filter configuration (one listener's plan), shared by the worker threads: read-only.
struct Config {
    /// Tells the per-thread plugins of this configuration apart (a freed configuration's address may
    /// be reused).
    id: u64,
    /// Dropped with the configuration: the per-thread plugins of dead configurations are pruned.
    alive: Arc<()>,
    /// The filter's name (`filter_name`), the engine's plugin name.
    name: String,
    plan: Vec<u8>,
    counters: Counters,
}

static NEXT_CONFIG_ID: AtomicU64 = AtomicU64::new(1);

/// The engine's shared data (last good plan per plugin), process-wide as Wasm's is per VM id.
static SHARED: Mutex<Option<HashMap<String, Vec<u8>>>> = Mutex::new(None);

thread_local! {
    /// This worker's plugin per configuration.
    static PLUGINS: RefCell<HashMap<u64, (Weak<()>, Plugin)>> = RefCell::new(HashMap::new());
}

/// The host of a plan load on the main thread: logs, counts (on the configuration), shared data.
struct LoadHost {
    config: FilterConfigEnvoyPtr,
    name: String,
    counters: Counters,
}

impl HostBase for LoadHost {
    fn log(&mut self, level: LogLevel, message: &str) {
        log(level, message);
    }

    fn count(&mut self, counter: Counter) {
        if let Some(id) = self.counters.id(counter) {
            // SAFETY: `config` is the pointer of the current `on_http_filter_config_new`.
            unsafe {
                envoy_dynamic_module_callback_http_filter_config_increment_counter(self.config, id, std::ptr::null(), 0, 1);
            }
        }
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl RootHost for LoadHost {
    fn plugin_name(&mut self) -> String {
        self.name.clone()
    }

    fn shared_get(&mut self, key: &str) -> Option<Vec<u8>> {
        SHARED.lock().ok()?.as_ref()?.get(key).cloned()
    }

    fn shared_set(&mut self, key: &str, value: &[u8]) {
        if let Ok(mut shared) = SHARED.lock() {
            shared.get_or_insert_with(HashMap::new).insert(key.to_string(), value.to_vec());
        }
    }
}

/// The host of a worker thread's load of a plan the main thread has loaded (and logged) already.
struct QuietHost(String);

impl HostBase for QuietHost {
    fn log(&mut self, _: LogLevel, _: &str) {}
    fn count(&mut self, _: Counter) {}
    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl RootHost for QuietHost {
    fn plugin_name(&mut self) -> String {
        self.0.clone()
    }
    fn shared_get(&mut self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn shared_set(&mut self, _: &str, _: &[u8]) {}
}

/// A new request's lifecycle under `config`'s plan, loading the plan on this thread the first time.
fn new_request(config: &Config) -> Request {
    PLUGINS.with(|plugins| {
        let Ok(mut plugins) = plugins.try_borrow_mut() else { return Plugin::default().request() };
        if !plugins.contains_key(&config.id) {
            plugins.retain(|_, (alive, _)| alive.strong_count() > 0);
            let mut plugin = Plugin::default();
            plugin.configure(&mut QuietHost(config.name.clone()), &config.plan);
            plugins.insert(config.id, (Arc::downgrade(&config.alive), plugin));
        }
        plugins.get(&config.id).map(|(_, p)| p.request()).unwrap_or_else(|| Plugin::default().request())
    })
}

// ---- helpers ----------------------------------------------------------------------------------

fn log_level(l: LogLevel) -> u32 {
    match l {
        LogLevel::Debug => LOG_DEBUG,
        LogLevel::Info => LOG_INFO,
        LogLevel::Warn => LOG_WARN,
        LogLevel::Error => LOG_ERROR,
    }
}

fn log(level: LogLevel, message: &str) {
    // SAFETY: the message lives for the call.
    unsafe { envoy_dynamic_module_callback_log(log_level(level), ModuleBuffer::of(message.as_bytes())) }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A header map in the proxy-wasm serialisation the lifecycle reads (`headers::serialize_map`, on
/// bytes: header values need not be UTF-8).
fn serialize_raw(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    let mut out = Vec::with_capacity(4 + pairs.iter().map(|(k, v)| 10 + k.len() + v.len()).sum::<usize>());
    out.extend(len(pairs.len()));
    for (k, v) in pairs {
        out.extend(len(k.len()));
        out.extend(len(v.len()));
    }
    for (k, v) in pairs {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// The authority in a serialised `GrpcService { envoy_grpc: { cluster_name = 1, authority = 2 } = 1 }`
/// (what the engine hands proxy-wasm's `grpc_call`), if any.
fn grpc_authority(upstream: &[u8]) -> Option<&str> {
    fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i)?;
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    // Length-delimited field `field` of a message: its bytes.
    fn field(b: &[u8], field: u64) -> Option<&[u8]> {
        let mut i = 0;
        while i < b.len() {
            let key = varint(b, &mut i)?;
            if key & 7 != 2 {
                return None;
            }
            let len = usize::try_from(varint(b, &mut i)?).ok()?;
            let value = b.get(i..i.checked_add(len)?)?;
            i += len;
            if key >> 3 == field {
                return Some(value);
            }
        }
        None
    }
    std::str::from_utf8(field(field(upstream, 1)?, 2)?).ok().filter(|a| !a.is_empty())
}

/// A gRPC call on a streamed callout, as its hooks arrive.
#[derive(Default)]
struct GrpcCall {
    id: u64,
    http_status: Option<u32>,
    grpc_status: Option<u32>,
    data: Vec<u8>,
}

impl GrpcCall {
    fn headers(&mut self, headers: &[(Vec<u8>, Vec<u8>)]) {
        for (k, v) in headers {
            let v = std::str::from_utf8(v).ok().and_then(|v| v.trim().parse().ok());
            match k.as_slice() {
                b":status" => self.http_status = v,
                b"grpc-status" => self.grpc_status = v,
                _ => {}
            }
        }
    }

    /// The answer once the stream completed: the status, and the one message (uncompressed).
    fn answer(self) -> CallAnswer {
        let status = match (self.grpc_status, self.http_status) {
            (Some(s), _) => s,
            (None, Some(200)) => GRPC_INTERNAL,
            (None, _) => GRPC_UNAVAILABLE,
        };
        if status != 0 {
            return CallAnswer::Grpc { status, message: Vec::new() };
        }
        let d = &self.data;
        match (d.first(), d.get(1..5)) {
            (Some(0), Some(len)) => {
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                match d.get(5..).filter(|m| m.len() == len) {
                    Some(message) => CallAnswer::Grpc { status: 0, message: message.to_vec() },
                    None => CallAnswer::Grpc { status: GRPC_INTERNAL, message: Vec::new() },
                }
            }
            _ => CallAnswer::Grpc { status: GRPC_INTERNAL, message: Vec::new() },
        }
    }
}

/// Envoy's headers, copied out.
///
/// SAFETY: `headers` must be Envoy's array of `size` headers, valid for the current hook (or null).
unsafe fn copy_headers(headers: *const EnvoyHttpHeader, size: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    if headers.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(headers, size)
        .iter()
        .map(|h| {
            let (k, v) = h.parts();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Runs a hook body, catching a panic: `on_panic` gives the hook's result then.
fn guard<T>(what: &str, f: impl FnOnce() -> T, on_panic: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            // Logging cannot panic in a way that matters here; guard it all the same.
            let _ = catch_unwind(|| log(LogLevel::Error, &format!("toolgate: panic in {what}; request denied")));
            on_panic()
        }
    }
}

// ---- the request's host ------------------------------------------------------------------------

/// Where a request hook is: which body Envoy delivers now, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Outside Envoy's stream hooks (a call's answer, a scheduled event).
    Outside,
    RequestHeaders,
    RequestBody,
    RequestTrailers,
    ResponseHeaders,
    ResponseBody,
    ResponseTrailers,
}

struct ModuleHost {
    envoy: FilterEnvoyPtr,
    counters: Counters,
    phase: Phase,
    /// Envoy's callout id → the lifecycle's token.
    calls: Vec<(u64, u32)>,
    next_token: u32,
    scheduler: SchedulerPtr,
    /// `resume` was asked for inside a request hook: done from a scheduled event instead.
    resume_later: bool,
}

impl ModuleHost {
    fn schedule(&mut self) {
        if self.scheduler.is_null() {
            // SAFETY: `envoy` is this filter's pointer.
            self.scheduler = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.envoy) };
        }
        if !self.scheduler.is_null() {
            // SAFETY: a scheduler this filter created and has not deleted.
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(self.scheduler, 0) }
        }
    }

    fn increment(&self, id: Option<usize>, n: u64) {
        if let Some(id) = id {
            // SAFETY: `envoy` is this filter's pointer; no labels.
            unsafe {
                envoy_dynamic_module_callback_http_filter_increment_counter(self.envoy, id, std::ptr::null(), 0, n);
            }
        }
    }

    fn body(&self, buffered: u32, received: u32, in_hook: bool, received_is_buffered: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut kinds = vec![buffered];
        if in_hook && !received_is_buffered {
            kinds.push(received);
        }
        for kind in kinds {
            // SAFETY: `envoy` is this filter's pointer; the vector has room for `n` buffers; the
            // buffers are copied out before any other callback.
            unsafe {
                let n = envoy_dynamic_module_callback_http_get_body_chunks_size(self.envoy, kind);
                if n == 0 {
                    continue;
                }
                let mut chunks = vec![EnvoyBuffer::null(); n];
                if envoy_dynamic_module_callback_http_get_body_chunks(self.envoy, kind, chunks.as_mut_ptr()) {
                    for c in &chunks {
                        out.extend_from_slice(c.bytes());
                    }
                }
            }
        }
        out
    }

    fn received_is_buffered_request(&self) -> bool {
        // SAFETY: `envoy` is this filter's pointer.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_request_body(self.envoy) }
    }

    fn received_is_buffered_response(&self) -> bool {
        // SAFETY: as above.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_response_body(self.envoy) }
    }

    /// The body size Envoy holds for this filter now (what was buffered, and what this hook brings).
    fn body_size(&self, buffered: u32, received: u32, received_is_buffered: bool) -> usize {
        // SAFETY: `envoy` is this filter's pointer.
        unsafe {
            let b = envoy_dynamic_module_callback_http_get_body_size(self.envoy, buffered);
            if received_is_buffered {
                b
            } else {
                b + envoy_dynamic_module_callback_http_get_body_size(self.envoy, received)
            }
        }
    }

    fn attribute_string(&self, id: u32) -> Option<Vec<u8>> {
        let mut buf = EnvoyBuffer::null();
        // SAFETY: `envoy` is this filter's pointer; `buf` lives for the call and is copied out.
        unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_string(self.envoy, id, &mut buf).then(|| buf.bytes().to_vec()) }
    }

    fn set_header(&self, kind: u32, name: &str, value: Option<&str>) {
        let value = value.map_or(ModuleBuffer::null(), |v| ModuleBuffer::of(v.as_bytes()));
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_header(self.envoy, kind, ModuleBuffer::of(name.as_bytes()), value);
        }
    }
}

impl HostBase for ModuleHost {
    fn log(&mut self, level: LogLevel, message: &str) {
        log(level, message);
    }

    fn count(&mut self, counter: Counter) {
        self.increment(self.counters.id(counter), 1);
    }

    fn count_by(&mut self, counter: Counter, n: u64) {
        if n > 0 {
            self.increment(self.counters.id(counter), n);
        }
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }
}

impl Host for ModuleHost {
    fn request_headers(&mut self) -> Option<Vec<u8>> {
        // SAFETY: `envoy` is this filter's pointer; the vector has room for `n` headers, copied out
        // (serialised) before any other callback.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_headers_size(self.envoy, REQUEST_HEADER);
            let mut headers = vec![EnvoyHttpHeader::null(); n];
            if n > 0 && !envoy_dynamic_module_callback_http_get_headers(self.envoy, REQUEST_HEADER, headers.as_mut_ptr()) {
                return None;
            }
            let pairs: Vec<(&[u8], &[u8])> = headers.iter().map(|h| h.parts()).collect();
            Some(serialize_raw(&pairs))
        }
    }

    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        match property {
            Property::PeerUriSan => self.attribute_string(ATTR_CONNECTION_URI_SAN_PEER_CERTIFICATE).filter(|v| !v.is_empty()),
            Property::ClusterName => self.attribute_string(ATTR_XDS_CLUSTER_NAME),
            Property::RequestProtocol => self.attribute_string(ATTR_REQUEST_PROTOCOL),
            Property::DestinationPort => {
                let mut port = 0u64;
                // SAFETY: `envoy` is this filter's pointer; `port` lives for the call.
                let ok = unsafe { envoy_dynamic_module_callback_http_filter_get_attribute_int(self.envoy, ATTR_DESTINATION_PORT, &mut port) };
                // The lifecycle reads the port as proxy-wasm gives it: 8 bytes, little-endian.
                ok.then(|| (port as i64).to_le_bytes().to_vec())
            }
        }
    }

    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        let in_hook = self.phase == Phase::RequestBody;
        let mut body = self.body(BUFFERED_REQUEST_BODY, RECEIVED_REQUEST_BODY, in_hook, in_hook && self.received_is_buffered_request());
        body.truncate(size);
        Some(body)
    }

    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
        let mut pairs: Vec<ModuleHttpHeader> = headers.iter().map(|(k, v)| ModuleHttpHeader::of(k, v)).collect();
        // SAFETY: `envoy` is this filter's pointer; headers and body live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_send_response(self.envoy, status, pairs.as_mut_ptr(), pairs.len(), ModuleBuffer::of(body), ModuleBuffer::null());
        }
        true
    }

    fn resume(&mut self) {
        match self.phase {
            // A call's answer: the request is stopped; continue it now.
            Phase::Outside => {
                // SAFETY: `envoy` is this filter's pointer.
                unsafe { envoy_dynamic_module_callback_http_filter_continue_decoding(self.envoy) }
            }
            // Inside a hook Envoy has not seen this hook's result yet: continue from a scheduled event.
            _ => {
                self.resume_later = true;
                self.schedule();
            }
        }
    }

    fn call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        match *callout {
            // The ABI has no gRPC callout: a unary gRPC call is made as what it is on the wire, an
            // HTTP/2 POST of one length-prefixed message, on a streamed HTTP callout (whose hooks,
            // unlike the one-shot callout's, give the trailers that carry `grpc-status`).
            Callout::Grpc { cluster, upstream, service, method, message, timeout_ms } => {
                let path = format!("/{service}/{method}");
                let authority = grpc_authority(upstream).unwrap_or(cluster);
                let timeout = format!("{timeout_ms}m");
                let headers = [
                    (":method", "POST"),
                    (":path", path.as_str()),
                    (":authority", authority),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                    ("grpc-timeout", timeout.as_str()),
                ];
                let mut pairs: Vec<ModuleHttpHeader> = headers.iter().map(|(k, v)| ModuleHttpHeader::of(k, v)).collect();
                let mut body = Vec::with_capacity(5 + message.len());
                body.push(0);
                body.extend(u32::try_from(message.len()).ok()?.to_be_bytes());
                body.extend_from_slice(message);
                let mut id = 0u64;
                // SAFETY: `envoy` is this filter's pointer; every buffer lives for the call.
                let status = unsafe {
                    envoy_dynamic_module_callback_http_filter_start_http_stream(
                        self.envoy,
                        &mut id,
                        ModuleBuffer::of(cluster.as_bytes()),
                        pairs.as_mut_ptr(),
                        pairs.len(),
                        ModuleBuffer::of(&body),
                        true,
                        u64::from(timeout_ms),
                    )
                };
                if status != CALLOUT_INIT_SUCCESS {
                    return None;
                }
                let token = self.next_token;
                self.next_token = self.next_token.wrapping_add(1);
                self.calls.push((id | GRPC_CALL, token));
                Some(token)
            }
            Callout::Http { cluster, headers, body, timeout_ms } => {
                let mut pairs: Vec<ModuleHttpHeader> = headers.iter().map(|(k, v)| ModuleHttpHeader::of(k, v)).collect();
                let mut id = 0u64;
                // SAFETY: `envoy` is this filter's pointer; every buffer lives for the call.
                let status = unsafe {
                    envoy_dynamic_module_callback_http_filter_http_callout(
                        self.envoy,
                        &mut id,
                        ModuleBuffer::of(cluster.as_bytes()),
                        pairs.as_mut_ptr(),
                        pairs.len(),
                        ModuleBuffer::of(body),
                        u64::from(timeout_ms),
                    )
                };
                if status != CALLOUT_INIT_SUCCESS {
                    return None;
                }
                let token = self.next_token;
                self.next_token = self.next_token.wrapping_add(1);
                self.calls.push((id, token));
                Some(token)
            }
        }
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        self.set_header(REQUEST_HEADER, name, Some(value));
    }

    fn add_request_header(&mut self, name: &str, value: &str) {
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_add_header(self.envoy, REQUEST_HEADER, ModuleBuffer::of(name.as_bytes()), ModuleBuffer::of(value.as_bytes()));
        }
    }

    fn remove_request_header(&mut self, name: &str) {
        self.set_header(REQUEST_HEADER, name, None);
    }

    fn record(&mut self, summary: &str) {
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(self.envoy, ModuleBuffer::of(DECISION_KEY), ModuleBuffer::of(summary.as_bytes()));
        }
    }

    fn logs_at(&mut self, level: LogLevel) -> bool {
        // SAFETY: a plain value.
        unsafe { envoy_dynamic_module_callback_log_enabled(log_level(level)) }
    }

    fn response_header(&mut self, lower_name: &str) -> Option<String> {
        let mut buf = EnvoyBuffer::null();
        // SAFETY: `envoy` is this filter's pointer; `buf` is copied out at once.
        unsafe {
            envoy_dynamic_module_callback_http_get_header(self.envoy, RESPONSE_HEADER, ModuleBuffer::of(lower_name.as_bytes()), &mut buf, 0, std::ptr::null_mut())
                .then(|| buf.bytes().to_vec())
        }
        .filter(|_| !buf.ptr.is_null())
        .and_then(|v| String::from_utf8(v).ok())
    }

    fn remove_response_header(&mut self, name: &str) {
        self.set_header(RESPONSE_HEADER, name, None);
    }

    fn response_body(&mut self, size: usize) -> Option<Vec<u8>> {
        let in_hook = self.phase == Phase::ResponseBody;
        let mut body = self.body(BUFFERED_RESPONSE_BODY, RECEIVED_RESPONSE_BODY, in_hook, in_hook && self.received_is_buffered_response());
        body.truncate(size);
        Some(body)
    }

    fn replace_response_body(&mut self, _size: usize, body: &[u8]) -> bool {
        let in_hook = self.phase == Phase::ResponseBody;
        let received_is_buffered = in_hook && self.received_is_buffered_response();
        // SAFETY: `envoy` is this filter's pointer; `body` lives for the call.
        unsafe {
            let buffered = envoy_dynamic_module_callback_http_get_body_size(self.envoy, BUFFERED_RESPONSE_BODY);
            envoy_dynamic_module_callback_http_drain_body(self.envoy, BUFFERED_RESPONSE_BODY, buffered);
            let target = if in_hook && !received_is_buffered {
                let received = envoy_dynamic_module_callback_http_get_body_size(self.envoy, RECEIVED_RESPONSE_BODY);
                envoy_dynamic_module_callback_http_drain_body(self.envoy, RECEIVED_RESPONSE_BODY, received);
                RECEIVED_RESPONSE_BODY
            } else {
                BUFFERED_RESPONSE_BODY
            };
            envoy_dynamic_module_callback_http_append_body(self.envoy, target, ModuleBuffer::of(body))
        }
    }
}

// ---- the filter --------------------------------------------------------------------------------

struct Stream {
    request: Request,
    host: ModuleHost,
}

/// One stream's filter. `stream` is busy while a hook runs; `early` takes the call answers that
/// arrive while it is (Envoy may answer a callout inline, from inside the hook that made it): they
/// are delivered from a scheduled event, after Envoy has seen the hook's result.
struct Filter {
    stream: RefCell<Stream>,
    early: RefCell<Vec<(u64, CallAnswer)>>,
    /// gRPC calls in flight (their hooks may come while `stream` is busy).
    grpc: RefCell<Vec<GrpcCall>>,
    envoy: FilterEnvoyPtr,
    scheduler_for_early: std::cell::Cell<SchedulerPtr>,
}

impl Filter {
    /// Runs a stream hook on this filter; `None` if the stream is busy (a re-entered hook).
    fn with(&self, phase: Phase, f: impl FnOnce(&mut Stream) -> u32) -> Option<u32> {
        let mut stream = self.stream.try_borrow_mut().ok()?;
        stream.host.phase = phase;
        let result = f(&mut stream);
        stream.host.phase = Phase::Outside;
        drop(stream);
        if self.early.try_borrow().map(|e| !e.is_empty()).unwrap_or(false) {
            self.schedule_early();
        }
        Some(result)
    }

    fn schedule_early(&self) {
        if let Ok(mut stream) = self.stream.try_borrow_mut() {
            stream.host.schedule();
            return;
        }
        // Inside a hook: a scheduler of its own (rare: an answer arrived inline).
        let mut s = self.scheduler_for_early.get();
        if s.is_null() {
            // SAFETY: `envoy` is this filter's pointer.
            s = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.envoy) };
            self.scheduler_for_early.set(s);
        }
        if !s.is_null() {
            // SAFETY: a scheduler this filter created and has not deleted.
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(s, 0) }
        }
    }

    /// Delivers a call's answer to the lifecycle (outside any hook).
    fn answer(&self, callout_id: u64, answer: CallAnswer) {
        match self.stream.try_borrow_mut() {
            Ok(mut stream) => {
                let Some(i) = stream.host.calls.iter().position(|(id, _)| *id == callout_id) else { return };
                let (_, token) = stream.host.calls.swap_remove(i);
                stream.host.phase = Phase::Outside;
                let Stream { request, host } = &mut *stream;
                request.on_call_answer(host, token, answer);
            }
            Err(_) => {
                if let Ok(mut early) = self.early.try_borrow_mut() {
                    early.push((callout_id, answer));
                }
                self.schedule_early();
            }
        }
    }

    fn scheduled(&self) {
        let early = self.early.try_borrow_mut().map(|mut e| std::mem::take(&mut *e)).unwrap_or_default();
        for (id, answer) in early {
            self.answer(id, answer);
        }
        let resume = match self.stream.try_borrow_mut() {
            Ok(mut stream) => std::mem::take(&mut stream.host.resume_later),
            Err(_) => false,
        };
        if resume {
            // SAFETY: `envoy` is this filter's pointer.
            unsafe { envoy_dynamic_module_callback_http_filter_continue_decoding(self.envoy) }
        }
    }

    /// A hook of the streamed callout `id` (a gRPC call): `f` updates the call.
    fn grpc_event(&self, id: u64, f: impl FnOnce(&mut GrpcCall)) {
        let Ok(mut calls) = self.grpc.try_borrow_mut() else { return };
        let i = match calls.iter().position(|c| c.id == id) {
            Some(i) => i,
            None => {
                calls.push(GrpcCall { id, ..GrpcCall::default() });
                calls.len() - 1
            }
        };
        f(&mut calls[i]);
    }

    /// The streamed callout `id` ended: completed (its answer) or reset (failed).
    fn grpc_end(&self, id: u64, completed: bool) {
        let call = self.grpc.try_borrow_mut().ok().and_then(|mut calls| {
            let i = calls.iter().position(|c| c.id == id)?;
            Some(calls.swap_remove(i))
        });
        let answer = match (completed, call) {
            (true, Some(call)) => call.answer(),
            (true, None) => CallAnswer::Grpc { status: GRPC_INTERNAL, message: Vec::new() },
            (false, _) => CallAnswer::Failed,
        };
        self.answer(id | GRPC_CALL, answer);
    }

    /// A panic in a request hook: deny the request (the lifecycle's state is unknown).
    fn deny_after_panic(&self) {
        if let Ok(stream) = self.stream.try_borrow() {
            stream.host.increment(stream.host.counters.panic, 1);
        }
        let summary = b"deny: internal error in the module (panic)";
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(self.envoy, ModuleBuffer::of(DECISION_KEY), ModuleBuffer::of(summary));
        }
        let body = br#"{"error":"internal error"}"#;
        let mut headers = [ModuleHttpHeader::of("content-type", "application/json")];
        // SAFETY: `envoy` is this filter's pointer; headers and body live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_send_response(self.envoy, 500, headers.as_mut_ptr(), 1, ModuleBuffer::of(body), ModuleBuffer::null());
        }
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        let schedulers = [self.stream.get_mut().host.scheduler, self.scheduler_for_early.get()];
        for s in schedulers {
            if !s.is_null() {
                // SAFETY: a scheduler this filter created, deleted once.
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(s) }
            }
        }
    }
}

/// SAFETY: `ptr` must be a `Box<Filter>` from `on_http_filter_new` not yet destroyed.
unsafe fn filter<'a>(ptr: FilterModulePtr) -> Option<&'a Filter> {
    (ptr as *const Filter).as_ref()
}

fn headers_status(a: Action) -> u32 {
    match a {
        Action::Continue => HEADERS_CONTINUE,
        Action::Pause => HEADERS_STOP_ITERATION,
    }
}

fn body_status(a: Action) -> u32 {
    match a {
        Action::Continue => BODY_CONTINUE,
        Action::Pause => BODY_STOP_ITERATION_AND_BUFFER,
    }
}

fn trailers_status(a: Action) -> u32 {
    match a {
        Action::Continue => TRAILERS_CONTINUE,
        Action::Pause => TRAILERS_STOP_ITERATION,
    }
}

/// A request hook: the lifecycle's action; a busy stream is paused (as the Wasm host's unknown
/// context); a panic denies the request.
fn request_hook(ptr: FilterModulePtr, what: &str, phase: Phase, status: fn(Action) -> u32, f: impl FnOnce(&mut Stream) -> Action) -> u32 {
    // SAFETY: Envoy passes back the pointer `on_http_filter_new` returned.
    let Some(filter) = (unsafe { filter(ptr) }) else { return status(Action::Pause) };
    guard(
        what,
        || filter.with(phase, |s| status(f(s))).unwrap_or(status(Action::Pause)),
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
            status(Action::Pause)
        },
    )
}

/// A response hook: the lifecycle's action; a busy stream continues; a panic continues the
/// response (the request was decided already) and is counted.
fn response_hook(ptr: FilterModulePtr, what: &str, phase: Phase, status: fn(Action) -> u32, f: impl FnOnce(&mut Stream) -> Action) -> u32 {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(ptr) }) else { return status(Action::Continue) };
    guard(
        what,
        || filter.with(phase, |s| status(f(s))).unwrap_or(status(Action::Continue)),
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                if let Ok(stream) = filter.stream.try_borrow() {
                    stream.host.increment(stream.host.counters.panic, 1);
                }
            }));
            status(Action::Continue)
        },
    )
}

// ---- event hooks ---------------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const std::ffi::c_char {
    ABI_VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: FilterConfigEnvoyPtr,
    name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> FilterConfigModulePtr {
    guard(
        "on_http_filter_config_new",
        || {
            // SAFETY: both buffers are Envoy's, valid for this hook; copied out.
            let (name, plan) = unsafe { (String::from_utf8_lossy(name.bytes()).into_owned(), config.bytes().to_vec()) };
            let counters = Counters::define(config_envoy);
            let mut host = LoadHost { config: config_envoy, name: name.clone(), counters };
            // The main thread's load: logs, counts, refuses an update with a bad plan (null: Envoy
            // rejects the configuration and keeps the one in force).
            if !Plugin::default().configure(&mut host, &plan) {
                return std::ptr::null();
            }
            let config = Config { id: NEXT_CONFIG_ID.fetch_add(1, Ordering::Relaxed), alive: Arc::new(()), name, plan, counters };
            Box::into_raw(Box::new(config)) as FilterConfigModulePtr
        },
        std::ptr::null,
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: FilterConfigModulePtr) {
    guard(
        "on_http_filter_config_destroy",
        || {
            if !config.is_null() {
                // SAFETY: the pointer `on_http_filter_config_new` returned, destroyed once.
                drop(unsafe { Box::from_raw(config as *mut Config) });
            }
        },
        || {},
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(_name: EnvoyBuffer, _config: EnvoyBuffer) -> PerRouteConfigModulePtr {
    // Toolgate has no per-route configuration: refused.
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(_config: PerRouteConfigModulePtr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(config: FilterConfigModulePtr, envoy: FilterEnvoyPtr) -> FilterModulePtr {
    guard(
        "on_http_filter_new",
        || {
            // SAFETY: the pointer `on_http_filter_config_new` returned; Envoy keeps the configuration
            // alive while its filters live.
            let config = unsafe { (config as *const Config).as_ref() };
            let (request, counters) = match config {
                Some(c) => (new_request(c), c.counters),
                // No configuration: a plugin without a plan, which denies every request.
                None => (Plugin::default().request(), Counters::NONE),
            };
            let host = ModuleHost {
                envoy,
                counters,
                phase: Phase::Outside,
                calls: Vec::new(),
                next_token: 1,
                scheduler: std::ptr::null_mut(),
                resume_later: false,
            };
            let filter = Filter {
                stream: RefCell::new(Stream { request, host }),
                early: RefCell::new(Vec::new()),
                grpc: RefCell::new(Vec::new()),
                envoy,
                scheduler_for_early: std::cell::Cell::new(std::ptr::null_mut()),
            };
            Box::into_raw(Box::new(filter)) as FilterModulePtr
        },
        // Null: Envoy closes the stream.
        std::ptr::null,
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, end_of_stream: bool) -> u32 {
    request_hook(filter, "on_request_headers", Phase::RequestHeaders, headers_status, |s| {
        #[cfg(feature = "panic-probe")]
        if s.host.request_headers().is_some_and(|h| h.windows(22).any(|w| w == b"x-toolgate-panic-probe")) {
            panic!("panic probe");
        }
        s.request.on_request_headers(&mut s.host, end_of_stream)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, end_of_stream: bool) -> u32 {
    request_hook(filter, "on_request_body", Phase::RequestBody, body_status, |s| {
        let received_is_buffered = s.host.received_is_buffered_request();
        let size = s.host.body_size(BUFFERED_REQUEST_BODY, RECEIVED_REQUEST_BODY, received_is_buffered);
        s.request.on_request_body(&mut s.host, size, end_of_stream)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(_envoy: FilterEnvoyPtr, filter: FilterModulePtr) -> u32 {
    request_hook(filter, "on_request_trailers", Phase::RequestTrailers, trailers_status, |s| s.request.on_request_trailers(&mut s.host))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, end_of_stream: bool) -> u32 {
    response_hook(filter, "on_response_headers", Phase::ResponseHeaders, headers_status, |s| s.request.on_response_headers(&mut s.host, end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, end_of_stream: bool) -> u32 {
    response_hook(filter, "on_response_body", Phase::ResponseBody, body_status, |s| {
        let received_is_buffered = s.host.received_is_buffered_response();
        let size = s.host.body_size(BUFFERED_RESPONSE_BODY, RECEIVED_RESPONSE_BODY, received_is_buffered);
        s.request.on_response_body(&mut s.host, size, end_of_stream)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(_envoy: FilterEnvoyPtr, filter: FilterModulePtr) -> u32 {
    response_hook(filter, "on_response_trailers", Phase::ResponseTrailers, trailers_status, |s| s.request.on_response_trailers(&mut s.host))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(_envoy: FilterEnvoyPtr, _filter: FilterModulePtr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter: FilterModulePtr) {
    guard(
        "on_http_filter_destroy",
        || {
            if !filter.is_null() {
                // SAFETY: the pointer `on_http_filter_new` returned, destroyed once.
                drop(unsafe { Box::from_raw(filter as *mut Filter) });
            }
        },
        || {},
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _envoy: FilterEnvoyPtr,
    filter_ptr: FilterModulePtr,
    callout_id: u64,
    result: u32,
    headers: *const EnvoyHttpHeader,
    headers_size: usize,
    body_chunks: *const EnvoyBuffer,
    body_chunks_size: usize,
) {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(filter_ptr) }) else { return };
    guard(
        "on_http_callout_done",
        || {
            let answer = if result != CALLOUT_SUCCESS || headers.is_null() {
                CallAnswer::Failed
            } else {
                // SAFETY: Envoy's arrays of `headers_size` headers and `body_chunks_size` buffers,
                // valid for this hook; copied out.
                let (headers, body) = unsafe {
                    let headers = std::slice::from_raw_parts(headers, headers_size)
                        .iter()
                        .map(|h| {
                            let (k, v) = h.parts();
                            (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned())
                        })
                        .collect();
                    let mut body = Vec::new();
                    if !body_chunks.is_null() {
                        for c in std::slice::from_raw_parts(body_chunks, body_chunks_size) {
                            body.extend_from_slice(c.bytes());
                        }
                    }
                    (headers, body)
                };
                CallAnswer::Http { headers, body }
            };
            filter.answer(callout_id, answer);
        },
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(_envoy: FilterEnvoyPtr, filter_ptr: FilterModulePtr, _event_id: u64) {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(filter_ptr) }) else { return };
    guard("on_http_filter_scheduled", || filter.scheduled(), || {
        let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _envoy: FilterEnvoyPtr,
    _filter: FilterModulePtr,
    _response_code: u32,
    _details: EnvoyBuffer,
    _reset_imminent: bool,
) -> u32 {
    LOCAL_REPLY_CONTINUE
}

// The hooks Envoy 1.40 resolves for every HTTP filter module whether or not it uses them
// (configuration-level callouts and events, write-buffer watermarks): Toolgate uses none.

// The streamed callout's hooks: the gRPC calls to ExternalAuth authorizers.

/// A streamed-callout hook on the filter `ptr`; a panic denies the request.
fn grpc_hook(ptr: FilterModulePtr, what: &str, f: impl FnOnce(&Filter)) {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(ptr) }) else { return };
    guard(what, || f(filter), || {
        let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    stream_id: u64,
    headers: *const EnvoyHttpHeader,
    headers_size: usize,
    _end_stream: bool,
) {
    grpc_hook(filter, "on_http_stream_headers", |f| {
        // SAFETY: Envoy's headers for this hook.
        let headers = unsafe { copy_headers(headers, headers_size) };
        f.grpc_event(stream_id, |c| c.headers(&headers));
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    stream_id: u64,
    data: *const EnvoyBuffer,
    data_count: usize,
    _end_stream: bool,
) {
    grpc_hook(filter, "on_http_stream_data", |f| {
        f.grpc_event(stream_id, |c| {
            if !data.is_null() {
                // SAFETY: Envoy's `data_count` buffers for this hook, copied out.
                for b in unsafe { std::slice::from_raw_parts(data, data_count) } {
                    c.data.extend_from_slice(unsafe { b.bytes() });
                }
            }
        });
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    stream_id: u64,
    trailers: *const EnvoyHttpHeader,
    trailers_size: usize,
) {
    grpc_hook(filter, "on_http_stream_trailers", |f| {
        // SAFETY: Envoy's trailers for this hook.
        let trailers = unsafe { copy_headers(trailers, trailers_size) };
        f.grpc_event(stream_id, |c| c.headers(&trailers));
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, stream_id: u64) {
    grpc_hook(filter, "on_http_stream_complete", |f| f.grpc_end(stream_id, true))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(_envoy: FilterEnvoyPtr, filter: FilterModulePtr, stream_id: u64, _reason: u32) {
    grpc_hook(filter, "on_http_stream_reset", |f| f.grpc_end(stream_id, false))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(_envoy: FilterConfigEnvoyPtr, _config: FilterConfigModulePtr, _event_id: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _callout_id: u64,
    _result: u32,
    _headers: *const EnvoyHttpHeader,
    _headers_size: usize,
    _body_chunks: *const EnvoyBuffer,
    _body_chunks_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
    _headers: *const EnvoyHttpHeader,
    _headers_size: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
    _data: *const EnvoyBuffer,
    _data_count: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
    _trailers: *const EnvoyHttpHeader,
    _trailers_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(_envoy: FilterConfigEnvoyPtr, _config: FilterConfigModulePtr, _stream_id: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(_envoy: FilterEnvoyPtr, _filter: FilterModulePtr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(_envoy: FilterEnvoyPtr, _filter: FilterModulePtr) {}
