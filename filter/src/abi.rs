//! The proxy-wasm ABI 0.2.1 as the filter uses it (no SDK): the host's imports, declared by hand, and
//! one safe function per call, with the ABI's constants. The module's own exports are in
//! `exports.rs`.
//!
//! Every call allocates nothing but the result the host hands over and turns every failure into
//! `None` / `false` / nothing: a status the SDK's wrappers did not expect made them panic, and a
//! panic kills the VM. Property paths are already serialised (parts joined by NUL); header maps are
//! in the ABI's serialisation (`header_map.rs`).

/// `connection.uri_san_peer_certificate`: the first URI SAN of the verified client certificate.
pub const PEER_URI_SAN: &[u8] = b"connection\0uri_san_peer_certificate";
/// `metadata`: the request's dynamic metadata, an `envoy.config.core.v3.Metadata` message serialised
/// (where `jwt_authn` leaves verified token payloads, docs/semantics.md §6b). Asked whole: a path
/// into `filter_metadata` would be handed over as CEL map pairs, which lose the claims' types.
pub const METADATA: &[u8] = b"metadata";
/// `xds.cluster_name`: the cluster the route selected (docs/envoy-notes.md §1).
pub const CLUSTER_NAME: &[u8] = b"xds\0cluster_name";
/// `destination.port`: the listener's port, an 8-byte little-endian integer.
pub const DESTINATION_PORT: &[u8] = b"destination\0port";
pub const REQUESTED_SERVER_NAME: &[u8] = b"connection\0requested_server_name";
/// `request.protocol`: `HTTP/1.1`, `HTTP/2`, ...
pub const REQUEST_PROTOCOL: &[u8] = b"request\0protocol";
/// `plugin_name`: the Wasm filter's configured name (read once, when the plan loads).
pub const PLUGIN_NAME: &[u8] = b"plugin_name";

// Map, buffer and stream types of the ABI.
pub const REQUEST_HEADERS: u32 = 0;
pub const RESPONSE_HEADERS: u32 = 2;
pub const HTTP_CALL_RESPONSE_HEADERS: u32 = 6;
pub const REQUEST_BODY: u32 = 0;
pub const RESPONSE_BODY: u32 = 1;
pub const HTTP_CALL_RESPONSE_BODY: u32 = 4;
pub const GRPC_RECEIVE_BUFFER: u32 = 5;
pub const PLUGIN_CONFIGURATION: u32 = 7;
const STREAM_HTTP_REQUEST: u32 = 0;
const OK: u32 = 0;

/// proxy-wasm log levels.
pub const DEBUG: u32 = 1;
pub const INFO: u32 = 2;
pub const WARN: u32 = 3;
pub const ERROR: u32 = 4;

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_header_map_pairs(
        map_type: u32,
        return_map_data: *mut *mut u8,
        return_map_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_value(
        map_type: u32,
        key: *const u8,
        key_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_set_buffer_bytes(
        buffer_type: u32,
        start: usize,
        size: usize,
        data: *const u8,
        data_size: usize,
    ) -> u32;
    fn proxy_replace_header_map_value(
        map_type: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_add_header_map_value(
        map_type: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_remove_header_map_value(map_type: u32, key: *const u8, key_size: usize) -> u32;
    fn proxy_get_property(
        path: *const u8,
        path_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_set_property(
        path: *const u8,
        path_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_log(level: u32, message: *const u8, message_size: usize) -> u32;
    fn proxy_get_log_level(return_level: *mut u32) -> u32;
    fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
    fn proxy_define_metric(
        metric_type: u32,
        name: *const u8,
        name_size: usize,
        return_id: *mut u32,
    ) -> u32;
    fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_send_local_response(
        status_code: u32,
        details: *const u8,
        details_size: usize,
        body: *const u8,
        body_size: usize,
        headers: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_continue_stream(stream_type: u32) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_http_call(
        upstream: *const u8,
        upstream_size: usize,
        headers: *const u8,
        headers_size: usize,
        body: *const u8,
        body_size: usize,
        trailers: *const u8,
        trailers_size: usize,
        timeout_ms: u32,
        return_token: *mut u32,
    ) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_grpc_call(
        upstream: *const u8,
        upstream_size: usize,
        service: *const u8,
        service_size: usize,
        method: *const u8,
        method_size: usize,
        initial_metadata: *const u8,
        initial_metadata_size: usize,
        message: *const u8,
        message_size: usize,
        timeout_ms: u32,
        return_token: *mut u32,
    ) -> u32;
    fn proxy_set_effective_context(context_id: u32) -> u32;
    fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
    fn proxy_get_shared_data(
        key: *const u8,
        key_size: usize,
        return_value: *mut *mut u8,
        return_value_size: *mut usize,
        return_cas: *mut u32,
    ) -> u32;
    fn proxy_set_shared_data(
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
        cas: u32,
    ) -> u32;
}

/// Takes ownership of a block the host returned.
///
/// SAFETY: `data` must come from the host after a successful call: a block it got from
/// `proxy_on_memory_allocate` (a boxed slice of exactly `size` bytes, see `exports.rs`).
unsafe fn owned(status: u32, data: *mut u8, size: usize) -> Option<Vec<u8>> {
    unsafe { (status == OK && !data.is_null()).then(|| Vec::from_raw_parts(data, size, size)) }
}

/// A serialised header map (`header_map.rs` reads it).
pub fn header_map(map_type: u32) -> Option<Vec<u8>> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe {
        owned(
            proxy_get_header_map_pairs(map_type, &mut data, &mut size),
            data,
            size,
        )
    }
}

/// One header's value (the first, if repeated); `None` if absent.
pub fn header(map_type: u32, name: &str) -> Option<Vec<u8>> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`; `name` is valid for its length for the duration of the call.
    unsafe {
        owned(
            proxy_get_header_map_value(map_type, name.as_ptr(), name.len(), &mut data, &mut size),
            data,
            size,
        )
    }
}

pub fn replace_header(name: &str, value: &str) {
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    unsafe {
        proxy_replace_header_map_value(
            REQUEST_HEADERS,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        );
    }
}

pub fn add_header(name: &str, value: &str) {
    // SAFETY: as above.
    unsafe {
        proxy_add_header_map_value(
            REQUEST_HEADERS,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        );
    }
}

pub fn remove_header(map_type: u32, name: &str) {
    // SAFETY: as above.
    unsafe {
        proxy_remove_header_map_value(map_type, name.as_ptr(), name.len());
    }
}

/// A property's value; `None` if it is missing or cannot be read.
pub fn property(path: &'static [u8]) -> Option<Vec<u8>> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe {
        owned(
            proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size),
            data,
            size,
        )
    }
}

/// Sets a property (filter state); a refusal is ignored, as there is nothing better to do with it.
pub fn set_property(path: &'static [u8], value: &[u8]) {
    // SAFETY: both pointers are valid for their lengths for the duration of the call.
    unsafe {
        proxy_set_property(path.as_ptr(), path.len(), value.as_ptr(), value.len());
    }
}

/// The first `size` bytes of a buffer.
pub fn buffer(buffer_type: u32, size: usize) -> Option<Vec<u8>> {
    let (mut data, mut len) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe {
        owned(
            proxy_get_buffer_bytes(buffer_type, 0, size, &mut data, &mut len),
            data,
            len,
        )
    }
}

/// Replaces the first `size` bytes of a buffer with `data`; false if the host refused.
pub fn replace_buffer(buffer_type: u32, size: usize, data: &[u8]) -> bool {
    // SAFETY: `data` is valid for its length for the duration of the call.
    unsafe { proxy_set_buffer_bytes(buffer_type, 0, size, data.as_ptr(), data.len()) == OK }
}

/// The host's log level now (Envoy: the `wasm` log component's, which `--component-log-level
/// wasm:debug` or the admin `/logging` endpoint set); `u32::MAX` (nothing) if it cannot be read.
pub fn log_level() -> u32 {
    let mut current = u32::MAX;
    // SAFETY: `current` is valid for the call.
    let status = unsafe { proxy_get_log_level(&mut current) };
    if status == OK {
        current
    } else {
        u32::MAX
    }
}

/// Asks the host to call `proxy_on_tick` of the current root context every `ms` milliseconds.
pub fn set_tick_period(ms: u32) {
    // SAFETY: a plain value.
    unsafe {
        proxy_set_tick_period_milliseconds(ms);
    }
}

/// Writes a line to the host's log; a refusal is ignored.
pub fn log(level: u32, message: &str) {
    // SAFETY: the pointer is valid for its length for the duration of the call.
    unsafe {
        proxy_log(level, message.as_ptr(), message.len());
    }
}

/// Defines a counter; 0 (never a valid id here, increments of it are skipped) if the host refuses.
pub fn define_counter(name: &str) -> u32 {
    const COUNTER: u32 = 0;
    let mut id = 0;
    // SAFETY: the pointers are valid for the duration of the call.
    let status = unsafe { proxy_define_metric(COUNTER, name.as_ptr(), name.len(), &mut id) };
    if status == OK {
        id
    } else {
        0
    }
}

/// Adds `n` to a counter from [`define_counter`]; a refusal is ignored.
pub fn increment(counter: u32, n: i64) {
    if counter != 0 {
        // SAFETY: plain values.
        unsafe {
            proxy_increment_metric(counter, n);
        }
    }
}

/// Answers the request with a local response instead of forwarding it (`headers`: a serialised
/// header map); false if the host refused.
pub fn send_response(status: u32, headers: &[u8], body: &[u8]) -> bool {
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    let result = unsafe {
        proxy_send_local_response(
            status,
            std::ptr::null(),
            0,
            body.as_ptr(),
            body.len(),
            headers.as_ptr(),
            headers.len(),
            -1,
        )
    };
    result == OK
}

/// Lets the paused request continue.
pub fn resume_request() {
    // SAFETY: a plain value.
    unsafe {
        proxy_continue_stream(STREAM_HTTP_REQUEST);
    }
}

/// Starts an HTTP call (`headers`: a serialised header map); its token.
pub fn http_call(cluster: &str, headers: &[u8], body: &[u8], timeout_ms: u32) -> Option<u32> {
    let mut token = 0;
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    let status = unsafe {
        proxy_http_call(
            cluster.as_ptr(),
            cluster.len(),
            headers.as_ptr(),
            headers.len(),
            body.as_ptr(),
            body.len(),
            std::ptr::null(),
            0,
            timeout_ms,
            &mut token,
        )
    };
    (status == OK).then_some(token)
}

/// Starts a unary gRPC call to `upstream` (a cluster name, or a serialised GrpcService); its token.
pub fn grpc_call(
    upstream: &[u8],
    service: &str,
    method: &str,
    message: &[u8],
    timeout_ms: u32,
) -> Option<u32> {
    let mut token = 0;
    // No initial metadata: an empty serialised map.
    let metadata = [0u8; 4];
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    let status = unsafe {
        proxy_grpc_call(
            upstream.as_ptr(),
            upstream.len(),
            service.as_ptr(),
            service.len(),
            method.as_ptr(),
            method.len(),
            metadata.as_ptr(),
            metadata.len(),
            message.as_ptr(),
            message.len(),
            timeout_ms,
            &mut token,
        )
    };
    (status == OK).then_some(token)
}

/// Makes `context_id` the context later host calls act on (needed in call answers).
pub fn set_effective_context(context_id: u32) -> bool {
    // SAFETY: a plain value.
    unsafe { proxy_set_effective_context(context_id) == OK }
}

/// Milliseconds of the host's clock (0 if it cannot be read).
pub fn now_ms() -> u64 {
    let mut nanos = 0u64;
    // SAFETY: `nanos` is valid for the call.
    let status = unsafe { proxy_get_current_time_nanoseconds(&mut nanos) };
    if status == OK {
        nanos / 1_000_000
    } else {
        0
    }
}

pub fn shared_data(key: &str) -> Option<Vec<u8>> {
    let (mut data, mut size, mut cas) = (std::ptr::null_mut(), 0, 0);
    // SAFETY: see `owned`.
    unsafe {
        owned(
            proxy_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut size, &mut cas),
            data,
            size,
        )
    }
}

pub fn set_shared_data(key: &str, value: &[u8]) {
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    unsafe {
        proxy_set_shared_data(key.as_ptr(), key.len(), value.as_ptr(), value.len(), 0);
    }
}
