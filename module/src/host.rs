//! The engine's [`Host`] for one request: the lifecycle's reads and writes of the stream, made with
//! Envoy's callbacks on the filter's pointer (calls to authorizers: `callout.rs`).

use toolgate_policy::jwt::{PayloadHeader, JWT_METADATA_NAMESPACE, JWT_PAYLOAD_HEADER};
use toolgate_policy::lifecycle::{
    Callout, Counter, HeaderSink, Host, HostBase, LogLevel, Property,
};

use crate::abi::*;
use crate::base::{log, log_level, now_ms};
use crate::counters::{self, Counters, DECISION_KEY};

/// Where a request hook is: which body Envoy delivers now, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Outside Envoy's stream hooks (a call's answer, a scheduled event).
    Outside,
    RequestHeaders,
    RequestBody,
    RequestTrailers,
    ResponseHeaders,
    ResponseBody,
    ResponseTrailers,
}

pub(crate) struct ModuleHost {
    pub(crate) envoy: FilterEnvoyPtr,
    /// The configuration's counter ids, by pointer: a copy cost `memcpy`s on every request in
    /// `on_http_filter_new` (docs/design/native-host.md; callgrind, row (cm)). Envoy's filter holds
    /// its configuration (a `shared_ptr`), so the configuration outlives every filter made from it.
    pub(crate) counters: &'static Counters,
    pub(crate) phase: Phase,
    /// Envoy's callout id → the lifecycle's token.
    pub(crate) calls: Vec<(u64, u32)>,
    pub(crate) next_token: u32,
    pub(crate) scheduler: SchedulerPtr,
    /// `resume` was asked for inside a request hook: done from a scheduled event instead.
    pub(crate) resume_later: bool,
    /// Whether the configuration says jwt_authn writes [`JWT_PAYLOAD_HEADER`] (else it is not read).
    pub(crate) payload_header: PayloadHeader,
}

impl ModuleHost {
    /// Envoy's request header array, to `f` before any other callback; None if Envoy cannot list it.
    /// Listed on the stack for the usual number of headers (a vector was an allocation and its free
    /// on every request: docs/design/native-host.md).
    fn with_request_headers<R>(&mut self, f: impl FnOnce(&[EnvoyHttpHeader]) -> R) -> Option<R> {
        const ON_STACK: usize = 24;
        // SAFETY: `envoy` is this filter's pointer; the array or vector has room for `n` headers.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_headers_size(self.envoy, REQUEST_HEADER);
            if n == 0 {
                return Some(f(&[]));
            }
            let read = |headers: &mut [EnvoyHttpHeader]| {
                envoy_dynamic_module_callback_http_get_headers(
                    self.envoy,
                    REQUEST_HEADER,
                    headers.as_mut_ptr(),
                )
                .then(|| f(headers))
            };
            if n <= ON_STACK {
                let mut headers = [EnvoyHttpHeader::null(); ON_STACK];
                read(headers.get_mut(..n).unwrap_or_default())
            } else {
                read(&mut vec![EnvoyHttpHeader::null(); n])
            }
        }
    }

    pub(crate) fn schedule(&mut self) {
        if self.scheduler.is_null() {
            // SAFETY: `envoy` is this filter's pointer.
            self.scheduler =
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.envoy) };
        }
        if !self.scheduler.is_null() {
            // SAFETY: a scheduler this filter created and has not deleted.
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(self.scheduler, 0) }
        }
    }

    pub(crate) fn increment(&self, id: Option<usize>, n: u64) {
        counters::increment(self.envoy, id, n);
    }

    /// Calls `f` with the chunks Envoy holds in body `kind` (borrowed: valid until the next callback
    /// that changes the body), listed on the stack for the usual few (a vector per read was an
    /// allocation and its free on every request: docs/design/native-host.md).
    fn with_chunks<T>(&self, kind: u32, f: impl FnOnce(&[EnvoyBuffer]) -> T) -> T {
        const ON_STACK: usize = 8;
        // SAFETY: `envoy` is this filter's pointer; the array or vector has room for `n` buffers.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_body_chunks_size(self.envoy, kind);
            if n == 0 {
                return f(&[]);
            }
            if n <= ON_STACK {
                let mut chunks = [EnvoyBuffer::null(); ON_STACK];
                let ok = envoy_dynamic_module_callback_http_get_body_chunks(
                    self.envoy,
                    kind,
                    chunks.as_mut_ptr(),
                );
                return f(if ok {
                    chunks.get(..n).unwrap_or_default()
                } else {
                    &[]
                });
            }
            let mut chunks = vec![EnvoyBuffer::null(); n];
            let ok = envoy_dynamic_module_callback_http_get_body_chunks(
                self.envoy,
                kind,
                chunks.as_mut_ptr(),
            );
            f(if ok { &chunks } else { &[] })
        }
    }

    /// The first `size` bytes of the body: the buffered chunks, then (inside the body hook, when
    /// Envoy has not buffered them yet) the received ones, copied once into a vector allocated at
    /// its final size (growing it chunk by chunk re-copied a large answer in reallocs).
    /// `size` is what Envoy reported (the lifecycle's body size): it bounds the allocation, which the
    /// chunks' own total bounds too.
    fn body(
        &self,
        buffered: u32,
        received: u32,
        in_hook: bool,
        received_is_buffered: bool,
        size: usize,
    ) -> Vec<u8> {
        let total = |chunks: &[EnvoyBuffer]| {
            chunks
                .iter()
                .fold(0usize, |t, c| t.saturating_add(c.length))
        };
        let copy = |chunks: &[EnvoyBuffer], out: &mut Vec<u8>| {
            for c in chunks {
                let room = size.saturating_sub(out.len());
                if room == 0 {
                    break;
                }
                // SAFETY: the buffers Envoy just wrote, copied out before any other callback.
                let bytes = unsafe { c.bytes() };
                out.extend_from_slice(bytes.get(..room).unwrap_or(bytes));
            }
        };
        let with_received = in_hook && !received_is_buffered;
        self.with_chunks(buffered, |held| {
            // Envoy's HTTP/1 codec ends a body with an empty hook: the buffered chunks hold it all,
            // and the received ones need not be listed (a callback into Envoy saved per request).
            if !with_received || total(held) >= size {
                let mut out = Vec::with_capacity(total(held).min(size));
                copy(held, &mut out);
                return out;
            }
            // Both lists are Envoy's until the next callback that changes a body; none is made here.
            self.with_chunks(received, |new| {
                let mut out = Vec::with_capacity(total(held).saturating_add(total(new)).min(size));
                copy(held, &mut out);
                copy(new, &mut out);
                out
            })
        })
    }

    pub(crate) fn received_is_buffered_request(&self) -> bool {
        // SAFETY: `envoy` is this filter's pointer.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_request_body(self.envoy) }
    }

    pub(crate) fn received_is_buffered_response(&self) -> bool {
        // SAFETY: as above.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_response_body(self.envoy) }
    }

    /// The body size Envoy holds for this filter now (what was buffered, and what this hook brings).
    pub(crate) fn body_size(
        &self,
        buffered: u32,
        received: u32,
        received_is_buffered: bool,
    ) -> usize {
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
        unsafe {
            envoy_dynamic_module_callback_http_filter_get_attribute_string(self.envoy, id, &mut buf)
                .then(|| buf.bytes().to_vec())
        }
    }

    /// The keys of the dynamic metadata namespace `namespace` (none if it is absent).
    fn metadata_keys(&self, namespace: &str) -> Vec<Vec<u8>> {
        let ns = ModuleBuffer::of(namespace.as_bytes());
        // SAFETY: `envoy` is this filter's pointer; the vector has room for `n` keys, copied out
        // before any other callback.
        unsafe {
            let n = envoy_dynamic_module_callback_http_get_metadata_keys_count(
                self.envoy,
                METADATA_SOURCE_DYNAMIC,
                ns,
            );
            let mut keys = vec![EnvoyBuffer::null(); n];
            if n == 0
                || !envoy_dynamic_module_callback_http_get_metadata_keys(
                    self.envoy,
                    METADATA_SOURCE_DYNAMIC,
                    ns,
                    keys.as_mut_ptr(),
                )
            {
                return Vec::new();
            }
            keys.iter().map(|k| k.bytes().to_vec()).collect()
        }
    }

    /// Every value of the request header `lower_name`, in order.
    pub(crate) fn request_header_values(&self, lower_name: &str) -> Vec<Vec<u8>> {
        let mut values = Vec::new();
        let mut total = 0usize;
        let mut index = 0usize;
        loop {
            let mut buf = EnvoyBuffer::null();
            // SAFETY: `envoy` is this filter's pointer; `buf` and `total` live for the call and the
            // value is copied out at once.
            let found = unsafe {
                envoy_dynamic_module_callback_http_get_header(
                    self.envoy,
                    REQUEST_HEADER,
                    ModuleBuffer::of(lower_name.as_bytes()),
                    &mut buf,
                    index,
                    &mut total,
                )
            };
            if !found || buf.ptr.is_null() {
                return values;
            }
            // SAFETY: as above.
            values.push(unsafe { buf.bytes() }.to_vec());
            index += 1;
            if index >= total {
                return values;
            }
        }
    }

    fn set_header(&self, kind: u32, name: &str, value: Option<&str>) {
        let value = value.map_or(ModuleBuffer::null(), |v| ModuleBuffer::of(v.as_bytes()));
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_header(
                self.envoy,
                kind,
                ModuleBuffer::of(name.as_bytes()),
                value,
            );
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
    /// Envoy delivers the body to a dynamic module that paused the headers, and the module holds the
    /// request to its decision: `render --native-module` puts no buffer filter after it, and saves
    /// the buffer filter's work on every request (docs/design/holding-the-request.md).
    fn holds_request(&self) -> bool {
        true
    }

    /// Envoy's header array handed to the engine pair by pair: no buffer to build
    /// (docs/design/reading-the-request.md).
    fn request_headers(&mut self, sink: &mut HeaderSink<'_>) -> bool {
        let read = self.with_request_headers(|headers| {
            for h in headers {
                // SAFETY: Envoy wrote the array in this hook; `push` copies what it keeps.
                let (k, v) = unsafe { h.parts() };
                sink.push(k, v);
            }
        });
        read.is_some()
    }

    /// docs/semantics.md §6b: Envoy 1.40's ABI reads a metadata namespace's keys and top-level
    /// scalars, not the Struct jwt_authn writes under the issuer. `toolgate render --native-module`
    /// has jwt_authn also write the verified payload to [`JWT_PAYLOAD_HEADER`] and says so in the
    /// module's configuration; only then is the header read, and the engine makes the Wasm host's
    /// `Metadata` of it beside exactly one verified issuer in the namespace (which no client can
    /// write): [`toolgate_policy::jwt::metadata_from_payload_header`]. Elsewhere the header may be
    /// the client's: no claims.
    fn dynamic_metadata(&mut self) -> Option<Vec<u8>> {
        if self.payload_header != PayloadHeader::JwtAuthn {
            return None;
        }
        let issuers = self.metadata_keys(JWT_METADATA_NAMESPACE);
        if issuers.is_empty() {
            return None;
        }
        let payloads = self.request_header_values(JWT_PAYLOAD_HEADER);
        toolgate_policy::jwt::metadata_from_payload_header(self.payload_header, &issuers, &payloads)
    }

    fn property(&mut self, property: Property) -> Option<Vec<u8>> {
        match property {
            Property::PeerUriSan => self
                .attribute_string(ATTR_CONNECTION_URI_SAN_PEER_CERTIFICATE)
                .filter(|v| !v.is_empty()),
            Property::ClusterName => self.attribute_string(ATTR_XDS_CLUSTER_NAME),
            Property::RequestProtocol => self.attribute_string(ATTR_REQUEST_PROTOCOL),
            Property::RequestedServerName => {
                self.attribute_string(ATTR_CONNECTION_REQUESTED_SERVER_NAME)
            }
            Property::DestinationPort => {
                let mut port = 0u64;
                // SAFETY: `envoy` is this filter's pointer; `port` lives for the call.
                let ok = unsafe {
                    envoy_dynamic_module_callback_http_filter_get_attribute_int(
                        self.envoy,
                        ATTR_DESTINATION_PORT,
                        &mut port,
                    )
                };
                // The lifecycle reads the port as proxy-wasm gives it: 8 bytes, little-endian.
                ok.then(|| (port as i64).to_le_bytes().to_vec())
            }
        }
    }

    fn request_body(&mut self, size: usize) -> Option<Vec<u8>> {
        let in_hook = self.phase == Phase::RequestBody;
        let received_is_buffered = in_hook && self.received_is_buffered_request();
        Some(self.body(
            BUFFERED_REQUEST_BODY,
            RECEIVED_REQUEST_BODY,
            in_hook,
            received_is_buffered,
            size,
        ))
    }

    fn send_reply(&mut self, status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
        let mut pairs: Vec<ModuleHttpHeader> = headers
            .iter()
            .map(|(k, v)| ModuleHttpHeader::of(k, v))
            .collect();
        // SAFETY: `envoy` is this filter's pointer; headers and body live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_send_response(
                self.envoy,
                status,
                pairs.as_mut_ptr(),
                pairs.len(),
                ModuleBuffer::of(body),
                ModuleBuffer::null(),
            );
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
        self.start_call(callout)
    }

    fn set_request_header(&mut self, name: &str, value: &str) {
        self.set_header(REQUEST_HEADER, name, Some(value));
    }

    fn add_request_header(&mut self, name: &str, value: &str) {
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_add_header(
                self.envoy,
                REQUEST_HEADER,
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            );
        }
    }

    fn remove_request_header(&mut self, name: &str) {
        self.set_header(REQUEST_HEADER, name, None);
    }

    fn record(&mut self, summary: &str) {
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.envoy,
                ModuleBuffer::of(DECISION_KEY),
                ModuleBuffer::of(summary.as_bytes()),
            );
        }
    }

    fn logs_at(&mut self, level: LogLevel) -> bool {
        // SAFETY: a plain value.
        unsafe { envoy_dynamic_module_callback_log_enabled(log_level(level)) }
    }

    fn response_header(&mut self, lower_name: &str) -> Option<String> {
        response_header(self.envoy, lower_name)
    }

    fn remove_response_header(&mut self, name: &str) {
        self.set_header(RESPONSE_HEADER, name, None);
    }

    fn response_body(&mut self, size: usize) -> Option<Vec<u8>> {
        let in_hook = self.phase == Phase::ResponseBody;
        let received_is_buffered = in_hook && self.received_is_buffered_response();
        Some(self.body(
            BUFFERED_RESPONSE_BODY,
            RECEIVED_RESPONSE_BODY,
            in_hook,
            received_is_buffered,
            size,
        ))
    }

    fn replace_response_body(&mut self, _size: usize, body: &[u8]) -> bool {
        replace_response_body(self.envoy, self.phase == Phase::ResponseBody, body)
    }
}

/// Envoy's local reply 500 `{"error":"internal error"}` on the stream of the filter `envoy`: through
/// the filters before any response headers, directly to the client before any went downstream, and
/// a reset stream after.
pub(crate) fn send_internal_error(envoy: FilterEnvoyPtr) {
    let body = br#"{"error":"internal error"}"#;
    let mut headers = [ModuleHttpHeader::of("content-type", "application/json")];
    // SAFETY: `envoy` is the filter's pointer; headers and body live for the call.
    unsafe {
        envoy_dynamic_module_callback_http_send_response(
            envoy,
            500,
            headers.as_mut_ptr(),
            1,
            ModuleBuffer::of(body),
            ModuleBuffer::null(),
        );
    }
}

/// The first value of the response header `lower_name` of the filter `envoy`, if it is UTF-8.
pub(crate) fn response_header(envoy: FilterEnvoyPtr, lower_name: &str) -> Option<String> {
    let mut buf = EnvoyBuffer::null();
    // SAFETY: `envoy` is the filter's pointer; `buf` is copied out at once.
    unsafe {
        envoy_dynamic_module_callback_http_get_header(
            envoy,
            RESPONSE_HEADER,
            ModuleBuffer::of(lower_name.as_bytes()),
            &mut buf,
            0,
            std::ptr::null_mut(),
        )
        .then(|| buf.bytes().to_vec())
    }
    .filter(|_| !buf.ptr.is_null())
    .and_then(|v| String::from_utf8(v).ok())
}

/// Puts `body` in place of all of the response body Envoy holds for the filter `envoy`: what it
/// buffered, and (inside the response body hook, `in_body_hook`) what this hook brings.
pub(crate) fn replace_response_body(
    envoy: FilterEnvoyPtr,
    in_body_hook: bool,
    body: &[u8],
) -> bool {
    // SAFETY: `envoy` is the filter's pointer, called inside one of its hooks; `body` lives for the call.
    unsafe {
        let received_is_buffered = in_body_hook
            && envoy_dynamic_module_callback_http_received_buffered_response_body(envoy);
        let buffered =
            envoy_dynamic_module_callback_http_get_body_size(envoy, BUFFERED_RESPONSE_BODY);
        envoy_dynamic_module_callback_http_drain_body(envoy, BUFFERED_RESPONSE_BODY, buffered);
        let target = if in_body_hook && !received_is_buffered {
            let received =
                envoy_dynamic_module_callback_http_get_body_size(envoy, RECEIVED_RESPONSE_BODY);
            envoy_dynamic_module_callback_http_drain_body(envoy, RECEIVED_RESPONSE_BODY, received);
            RECEIVED_RESPONSE_BODY
        } else {
            BUFFERED_RESPONSE_BODY
        };
        envoy_dynamic_module_callback_http_append_body(envoy, target, ModuleBuffer::of(body))
    }
}
