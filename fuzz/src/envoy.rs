//! A fake of Envoy's side of the dynamic-module ABI, for the `module_hooks` target: every callback
//! `module/src/abi.rs` declares is defined here (`#[no_mangle]`), so the module's rlib links into a
//! fuzz binary without Envoy, and runs exactly the code the `.so` runs. One stream at a time, on the
//! thread's [`State`]; the target drives the module's hooks as Envoy would and reads what the
//! module did from it.
//!
//! A callback added to abi.rs without a fake here fails the fuzz build at link time (an undefined
//! symbol): add it here, and to the list in envoy/signatures.rs, which fails the build when a fake's
//! type differs from its declaration's.

use std::cell::RefCell;

use toolgate_module::abi::*;
use toolgate_module::exports;

mod signatures;

/// The pointers this fake gives the module for "its" configuration and stream; every callback checks
/// that the module passes back the one it was given.
pub const CONFIG_ENVOY: FilterConfigEnvoyPtr = 0x1000 as FilterConfigEnvoyPtr;
pub const FILTER_ENVOY: FilterEnvoyPtr = 0x2000 as FilterEnvoyPtr;

/// A call the module started: a one-shot HTTP callout or a streamed one (its gRPC calls).
#[derive(Debug, Clone)]
pub struct Callout {
    pub id: u64,
    pub grpc: bool,
    pub cluster: Vec<u8>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
}

#[derive(Default, Clone)]
pub struct State {
    pub request_headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub response_headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Body chunks by `envoy_dynamic_module_type_http_body_type` (received/buffered request/response).
    pub bodies: [Vec<Vec<u8>>; 4],
    pub principal: Option<Vec<u8>>,
    pub cluster: Option<Vec<u8>>,
    pub protocol: Vec<u8>,
    pub port: u64,
    pub debug: bool,
    /// Callouts that Envoy fails to start (`http_callout` / `start_http_stream` returns an error).
    pub refuse_callouts: bool,
    /// The module's filter, for the hooks Envoy re-enters from a local reply.
    pub filter: usize,
    // What the module did.
    pub counter_names: Vec<String>,
    pub counts: Vec<u64>,
    pub replies: Vec<(u32, Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>)>,
    pub filter_state: Vec<(Vec<u8>, Vec<u8>)>,
    pub callouts: Vec<Callout>,
    pub next_callout: u64,
    pub schedulers_created: usize,
    pub schedulers_deleted: usize,
    /// Scheduled events not yet delivered (`on_http_filter_scheduled`).
    pub pending_events: usize,
    pub continued: u32,
    pub logs: usize,
}

thread_local! {
    pub static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Runs `f` on the thread's state (never across a call into the module).
pub fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

impl State {
    pub fn count(&self, name: &str) -> u64 {
        self.counter_names
            .iter()
            .position(|n| n == name)
            .map_or(0, |i| self.counts[i])
    }

    pub fn decision(&self) -> Option<&[u8]> {
        self.filter_state
            .iter()
            .rev()
            .find(|(k, _)| k == b"toolgate.decision")
            .map(|(_, v)| v.as_slice())
    }

    fn headers(&mut self, kind: u32) -> Option<&mut Vec<(Vec<u8>, Vec<u8>)>> {
        match kind {
            REQUEST_HEADER => Some(&mut self.request_headers),
            RESPONSE_HEADER => Some(&mut self.response_headers),
            _ => None,
        }
    }

    fn body(&mut self, kind: u32) -> &mut Vec<Vec<u8>> {
        assert!(kind < 4, "body type {kind}");
        &mut self.bodies[kind as usize]
    }

    /// Moves what the module was given in the last body hook into the buffered body (Envoy's
    /// StopIterationAndBuffer).
    pub fn buffer_received(&mut self, received: u32, buffered: u32) {
        let chunks = std::mem::take(self.body(received));
        self.body(buffered).extend(chunks);
    }
}

fn check_filter(filter: FilterEnvoyPtr) {
    assert_eq!(
        filter, FILTER_ENVOY,
        "a callback on a filter pointer Envoy did not give"
    );
}

/// SAFETY: the module's buffer, valid for the call.
unsafe fn module_bytes(b: ModuleBuffer) -> Vec<u8> {
    EnvoyBuffer {
        ptr: b.ptr,
        length: b.length,
    }
    .bytes()
    .to_vec()
}

/// SAFETY: the module's array of `n` headers, valid for the call.
unsafe fn module_headers(h: *const ModuleHttpHeader, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    if n == 0 {
        return Vec::new();
    }
    assert!(!h.is_null(), "{n} headers at a null pointer");
    std::slice::from_raw_parts(h, n)
        .iter()
        .map(|h| {
            let k = EnvoyBuffer {
                ptr: h.key_ptr,
                length: h.key_length,
            }
            .bytes()
            .to_vec();
            let v = EnvoyBuffer {
                ptr: h.value_ptr,
                length: h.value_length,
            }
            .bytes()
            .to_vec();
            (k, v)
        })
        .collect()
}

fn buffer(bytes: &[u8]) -> EnvoyBuffer {
    EnvoyBuffer {
        ptr: bytes.as_ptr(),
        length: bytes.len(),
    }
}

// ---- the callbacks -------------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_log(_level: u32, message: ModuleBuffer) {
    // SAFETY: the module's message.
    let _ = unsafe { module_bytes(message) };
    with(|s| s.logs += 1);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool {
    with(|s| level >= LOG_INFO || s.debug)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_config_define_counter(
    config: FilterConfigEnvoyPtr,
    name: ModuleBuffer,
    _label_names: *const ModuleBuffer,
    label_names_length: usize,
    counter_id: *mut usize,
) -> u32 {
    assert_eq!(config, CONFIG_ENVOY);
    assert_eq!(label_names_length, 0);
    // SAFETY: the module's name; `counter_id` its out-parameter.
    let name = String::from_utf8(unsafe { module_bytes(name) }).expect("a counter name is UTF-8");
    with(|s| {
        let id = s
            .counter_names
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| {
                s.counter_names.push(name);
                s.counts.push(0);
                s.counts.len() - 1
            });
        unsafe { *counter_id = id };
    });
    METRICS_SUCCESS
}

fn increment(id: usize, value: u64) -> u32 {
    with(|s| {
        let c = s.counts.get_mut(id).expect("a counter id the fake defined");
        *c += value;
    });
    METRICS_SUCCESS
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
    config: FilterConfigEnvoyPtr,
    id: usize,
    _label_values: *const ModuleBuffer,
    _label_values_length: usize,
    value: u64,
) -> u32 {
    assert_eq!(config, CONFIG_ENVOY);
    increment(id, value)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_increment_counter(
    filter: FilterEnvoyPtr,
    id: usize,
    _label_values: *const ModuleBuffer,
    _label_values_length: usize,
    value: u64,
) -> u32 {
    check_filter(filter);
    increment(id, value)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_header(
    filter: FilterEnvoyPtr,
    header_type: u32,
    key: ModuleBuffer,
    result: *mut EnvoyBuffer,
    index: usize,
    optional_size: *mut usize,
) -> bool {
    check_filter(filter);
    // SAFETY: the module's key and out-parameters; the value points into the state's header map,
    // which the module copies out before any setter.
    let key = unsafe { module_bytes(key) };
    with(|s| {
        let Some(headers) = s.headers(header_type) else {
            return false;
        };
        let values: Vec<&(Vec<u8>, Vec<u8>)> = headers.iter().filter(|(k, _)| *k == key).collect();
        if !optional_size.is_null() {
            unsafe { *optional_size = values.len() };
        }
        match values.get(index) {
            Some((_, v)) => {
                unsafe { *result = buffer(v) };
                true
            }
            None => {
                unsafe { *result = EnvoyBuffer::null() };
                false
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_headers_size(
    filter: FilterEnvoyPtr,
    header_type: u32,
) -> usize {
    check_filter(filter);
    with(|s| s.headers(header_type).map_or(0, |h| h.len()))
}

/// No dynamic metadata (no token callers here).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_metadata_keys_count(
    filter: FilterEnvoyPtr,
    _source: u32,
    namespace: ModuleBuffer,
) -> usize {
    check_filter(filter);
    // SAFETY: the module's namespace.
    let _ = unsafe { module_bytes(namespace) };
    0
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_metadata_keys(
    filter: FilterEnvoyPtr,
    _source: u32,
    _namespace: ModuleBuffer,
    _result: *mut EnvoyBuffer,
) -> bool {
    check_filter(filter);
    false
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_headers(
    filter: FilterEnvoyPtr,
    header_type: u32,
    result: *mut EnvoyHttpHeader,
) -> bool {
    check_filter(filter);
    with(|s| {
        let Some(headers) = s.headers(header_type) else {
            return false;
        };
        for (i, (k, v)) in headers.iter().enumerate() {
            // SAFETY: the module sized `result` with get_headers_size.
            unsafe {
                *result.add(i) = EnvoyHttpHeader {
                    key_ptr: k.as_ptr(),
                    key_length: k.len(),
                    value_ptr: v.as_ptr(),
                    value_length: v.len(),
                };
            }
        }
        true
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_add_header(
    filter: FilterEnvoyPtr,
    header_type: u32,
    key: ModuleBuffer,
    value: ModuleBuffer,
) -> bool {
    check_filter(filter);
    // SAFETY: the module's buffers.
    let (k, v) = unsafe { (module_bytes(key), module_bytes(value)) };
    with(|s| s.headers(header_type).map(|h| h.push((k, v))).is_some())
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_set_header(
    filter: FilterEnvoyPtr,
    header_type: u32,
    key: ModuleBuffer,
    value: ModuleBuffer,
) -> bool {
    check_filter(filter);
    // SAFETY: the module's buffers (a null value removes the header).
    let k = unsafe { module_bytes(key) };
    let v = (!value.ptr.is_null()).then(|| unsafe { module_bytes(value) });
    with(|s| {
        let Some(h) = s.headers(header_type) else {
            return false;
        };
        h.retain(|(name, _)| *name != k);
        if let Some(v) = v {
            h.push((k, v));
        }
        true
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_send_response(
    filter: FilterEnvoyPtr,
    status_code: u32,
    headers: *mut ModuleHttpHeader,
    headers_size: usize,
    body: ModuleBuffer,
    _details: ModuleBuffer,
) {
    check_filter(filter);
    // SAFETY: the module's headers and body.
    let (h, b) = unsafe { (module_headers(headers, headers_size), module_bytes(body)) };
    let module = with(|s| {
        s.replies.push((status_code, h.clone(), b.clone()));
        s.response_headers = h;
        s.bodies[RECEIVED_RESPONSE_BODY as usize] = vec![b];
        s.filter as FilterModulePtr
    });
    // Envoy sends a local reply through the encoder filters at once: the module's response hooks
    // are re-entered from inside the hook that sent it.
    exports::envoy_dynamic_module_on_http_filter_response_headers(FILTER_ENVOY, module, false);
    exports::envoy_dynamic_module_on_http_filter_response_body(FILTER_ENVOY, module, true);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks_size(
    filter: FilterEnvoyPtr,
    body_type: u32,
) -> usize {
    check_filter(filter);
    with(|s| s.body(body_type).len())
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks(
    filter: FilterEnvoyPtr,
    body_type: u32,
    result: *mut EnvoyBuffer,
) -> bool {
    check_filter(filter);
    with(|s| {
        for (i, c) in s.body(body_type).iter().enumerate() {
            // SAFETY: the module sized `result` with get_body_chunks_size.
            unsafe { *result.add(i) = buffer(c) };
        }
        true
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_size(
    filter: FilterEnvoyPtr,
    body_type: u32,
) -> usize {
    check_filter(filter);
    with(|s| s.body(body_type).iter().map(Vec::len).sum())
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_append_body(
    filter: FilterEnvoyPtr,
    body_type: u32,
    data: ModuleBuffer,
) -> bool {
    check_filter(filter);
    // SAFETY: the module's data.
    let data = unsafe { module_bytes(data) };
    with(|s| s.body(body_type).push(data));
    true
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_drain_body(
    filter: FilterEnvoyPtr,
    body_type: u32,
    number_of_bytes: usize,
) -> bool {
    check_filter(filter);
    with(|s| {
        let mut all: Vec<u8> = s.body(body_type).concat();
        all.drain(..number_of_bytes.min(all.len()));
        *s.body(body_type) = if all.is_empty() {
            Vec::new()
        } else {
            vec![all]
        };
    });
    true
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_received_buffered_request_body(
    filter: FilterEnvoyPtr,
) -> bool {
    check_filter(filter);
    false
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_received_buffered_response_body(
    filter: FilterEnvoyPtr,
) -> bool {
    check_filter(filter);
    false
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
    filter: FilterEnvoyPtr,
    key: ModuleBuffer,
    value: ModuleBuffer,
) -> bool {
    check_filter(filter);
    // SAFETY: the module's buffers.
    let (k, v) = unsafe { (module_bytes(key), module_bytes(value)) };
    with(|s| s.filter_state.push((k, v)));
    true
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
    filter: FilterEnvoyPtr,
    attribute_id: u32,
    result: *mut EnvoyBuffer,
) -> bool {
    check_filter(filter);
    with(|s| {
        let value = match attribute_id {
            ATTR_CONNECTION_URI_SAN_PEER_CERTIFICATE => s.principal.as_deref(),
            ATTR_XDS_CLUSTER_NAME => s.cluster.as_deref(),
            ATTR_REQUEST_PROTOCOL => Some(s.protocol.as_slice()),
            _ => None,
        };
        // SAFETY: the module's out-parameter; the value points into the state.
        match value {
            Some(v) => unsafe { *result = buffer(v) },
            None => return false,
        }
        true
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
    filter: FilterEnvoyPtr,
    attribute_id: u32,
    result: *mut u64,
) -> bool {
    check_filter(filter);
    if attribute_id != ATTR_DESTINATION_PORT {
        return false;
    }
    // SAFETY: the module's out-parameter.
    with(|s| unsafe { *result = s.port });
    true
}

fn start_callout(
    id_out: *mut u64,
    grpc: bool,
    cluster: ModuleBuffer,
    headers: *mut ModuleHttpHeader,
    n: usize,
    body: ModuleBuffer,
) -> u32 {
    // SAFETY: the module's buffers and out-parameter.
    let (cluster, headers, body) = unsafe {
        (
            module_bytes(cluster),
            module_headers(headers, n),
            module_bytes(body),
        )
    };
    with(|s| {
        if s.refuse_callouts {
            return 1; // envoy_dynamic_module_type_http_callout_init_result: MissingRequiredHeaders
        }
        s.next_callout += 1;
        let id = s.next_callout;
        unsafe { *id_out = id };
        s.callouts.push(Callout {
            id,
            grpc,
            cluster,
            headers,
            body,
        });
        CALLOUT_INIT_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_http_callout(
    filter: FilterEnvoyPtr,
    callout_id: *mut u64,
    cluster_name: ModuleBuffer,
    headers: *mut ModuleHttpHeader,
    headers_size: usize,
    body: ModuleBuffer,
    _timeout_milliseconds: u64,
) -> u32 {
    check_filter(filter);
    start_callout(callout_id, false, cluster_name, headers, headers_size, body)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_start_http_stream(
    filter: FilterEnvoyPtr,
    stream_id: *mut u64,
    cluster_name: ModuleBuffer,
    headers: *mut ModuleHttpHeader,
    headers_size: usize,
    body: ModuleBuffer,
    end_stream: bool,
    _timeout_milliseconds: u64,
) -> u32 {
    check_filter(filter);
    assert!(end_stream, "a gRPC call is one message");
    start_callout(stream_id, true, cluster_name, headers, headers_size, body)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_new(
    filter: FilterEnvoyPtr,
) -> SchedulerPtr {
    check_filter(filter);
    with(|s| {
        s.schedulers_created += 1;
        (0x3000 + s.schedulers_created) as SchedulerPtr
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
    scheduler: SchedulerPtr,
    _event_id: u64,
) {
    assert!(
        !scheduler.is_null() && (scheduler as usize) > 0x3000,
        "a scheduler the fake did not create"
    );
    with(|s| s.pending_events += 1);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_delete(
    scheduler: SchedulerPtr,
) {
    assert!(
        !scheduler.is_null() && (scheduler as usize) > 0x3000,
        "a scheduler the fake did not create"
    );
    with(|s| s.schedulers_deleted += 1);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_continue_decoding(
    filter: FilterEnvoyPtr,
) {
    check_filter(filter);
    with(|s| s.continued += 1);
}

/// Delivers the scheduled events the module committed (Envoy runs them on the worker's dispatcher,
/// after the current hook), until none is left; at most `limit` rounds.
pub fn run_scheduled(module: FilterModulePtr, limit: usize) {
    for _ in 0..limit {
        let n = with(|s| std::mem::take(&mut s.pending_events));
        if n == 0 {
            return;
        }
        for _ in 0..n {
            exports::envoy_dynamic_module_on_http_filter_scheduled(FILTER_ENVOY, module, 0);
        }
    }
    panic!("the module schedules events without end");
}

/// A header list for a hook (`*const EnvoyHttpHeader` and its length), valid while `headers` lives.
pub fn envoy_headers(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<EnvoyHttpHeader> {
    headers
        .iter()
        .map(|(k, v)| EnvoyHttpHeader {
            key_ptr: k.as_ptr(),
            key_length: k.len(),
            value_ptr: v.as_ptr(),
            value_length: v.len(),
        })
        .collect()
}

/// Buffers for a hook, valid while `chunks` lives.
pub fn envoy_buffers(chunks: &[Vec<u8>]) -> Vec<EnvoyBuffer> {
    chunks.iter().map(|c| buffer(c)).collect()
}
