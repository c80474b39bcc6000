//! The host calls the filter makes (all per-request ones, logs and counters too), straight to the
//! proxy-wasm ABI 0.2.1.
//!
//! The SDK's wrappers take a property path as a `Vec<&str>` and serialise it into another `Vec`
//! (two allocations in the VM per call), and panic on a status they do not expect (a panic kills the
//! VM: `send_http_response`, `log`, `get_log_level`, `define_metric` all do). These take the path
//! already serialised (parts joined by NUL, a `&'static [u8]`), allocate nothing but the result the
//! host hands over, and turn every failure into `None` / `false` / nothing.

/// `connection.uri_san_peer_certificate`: the first URI SAN of the verified client certificate.
pub const PEER_URI_SAN: &[u8] = b"connection\0uri_san_peer_certificate";
/// `xds.cluster_name`: the cluster the route selected (docs/envoy-notes.md §1).
pub const CLUSTER_NAME: &[u8] = b"xds\0cluster_name";
/// `destination.port`: the listener's port, an 8-byte little-endian integer.
pub const DESTINATION_PORT: &[u8] = b"destination\0port";
/// `plugin_name`: the Wasm filter's configured name (read once, when the plan loads).
pub const PLUGIN_NAME: &[u8] = b"plugin_name";
/// Filter state `wasm.toolgate_decision`, read by access logs (`%FILTER_STATE(...)%`).
pub const DECISION: &[u8] = b"toolgate_decision";

const HTTP_REQUEST_HEADERS: u32 = 0;
const HTTP_REQUEST_BODY: u32 = 0;
const OK: u32 = 0;

extern "C" {
    fn proxy_get_header_map_pairs(map_type: u32, return_map_data: *mut *mut u8, return_map_size: *mut usize) -> u32;
    fn proxy_get_property(
        path_data: *const u8,
        path_size: usize,
        return_value_data: *mut *mut u8,
        return_value_size: *mut usize,
    ) -> u32;
    fn proxy_set_property(path_data: *const u8, path_size: usize, value_data: *const u8, value_size: usize) -> u32;
    fn proxy_log(level: u32, message_data: *const u8, message_size: usize) -> u32;
    fn proxy_get_log_level(return_level: *mut u32) -> u32;
    fn proxy_define_metric(metric_type: u32, name_data: *const u8, name_size: usize, return_id: *mut u32) -> u32;
    fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_send_local_response(
        status_code: u32,
        status_code_details_data: *const u8,
        status_code_details_size: usize,
        body_data: *const u8,
        body_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_buffer_data: *mut *mut u8,
        return_buffer_size: *mut usize,
    ) -> u32;
}

/// Takes ownership of a block the host returned.
///
/// SAFETY: `data` must come from the host after a successful call: a block it got from
/// `proxy_on_memory_allocate` (the SDK's allocator: a boxed slice of exactly `size` bytes), as the
/// SDK's own wrappers assume.
unsafe fn owned(status: u32, data: *mut u8, size: usize) -> Option<Vec<u8>> {
    (status == OK && !data.is_null()).then(|| Vec::from_raw_parts(data, size, size))
}

/// The serialised request header map (count, then key/value lengths, then NUL-terminated text).
pub fn request_header_pairs() -> Option<Vec<u8>> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe { owned(proxy_get_header_map_pairs(HTTP_REQUEST_HEADERS, &mut data, &mut size), data, size) }
}

/// A property's value; `None` if it is missing or cannot be read.
pub fn property(path: &'static [u8]) -> Option<Vec<u8>> {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe { owned(proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size), data, size) }
}

/// Sets a property (filter state); a refusal is ignored, as there is nothing better to do with it.
pub fn set_property(path: &'static [u8], value: &[u8]) {
    // SAFETY: both pointers are valid for their lengths for the duration of the call.
    unsafe {
        proxy_set_property(path.as_ptr(), path.len(), value.as_ptr(), value.len());
    }
}

/// The first `size` bytes of the buffered request body.
pub fn request_body(size: usize) -> Option<Vec<u8>> {
    let (mut data, mut len) = (std::ptr::null_mut(), 0);
    // SAFETY: see `owned`.
    unsafe { owned(proxy_get_buffer_bytes(HTTP_REQUEST_BODY, 0, size, &mut data, &mut len), data, len) }
}

/// proxy-wasm log levels.
pub const DEBUG: u32 = 1;
pub const INFO: u32 = 2;
pub const WARN: u32 = 3;
pub const ERROR: u32 = 4;

/// Whether the host logs at `level` now (Envoy: the `wasm` log component's level, which
/// `--component-log-level wasm:debug` or the admin `/logging` endpoint set). No allocation.
pub fn logs_at(level: u32) -> bool {
    let mut current = u32::MAX;
    // SAFETY: `current` is valid for the call.
    let status = unsafe { proxy_get_log_level(&mut current) };
    status == OK && current <= level
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

/// Adds one to a counter from [`define_counter`]; a refusal is ignored.
pub fn increment(counter: u32) {
    if counter != 0 {
        // SAFETY: plain values.
        unsafe {
            proxy_increment_metric(counter, 1);
        }
    }
}

/// Answers the request with a local response instead of forwarding it; false if the host refused.
pub fn send_response(status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
    let map = serialize_map(headers);
    // SAFETY: the pointers are valid for their lengths for the duration of the call.
    let result = unsafe {
        proxy_send_local_response(
            status,
            std::ptr::null(),
            0,
            body.as_ptr(),
            body.len(),
            map.as_ptr(),
            map.len(),
            -1,
        )
    };
    result == OK
}

/// A header map as the ABI serialises it: the count, each name's and value's length (u32 LE), then
/// each name and value followed by a NUL.
pub fn serialize_map(pairs: &[(&str, &str)]) -> Vec<u8> {
    let text: usize = pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut out = Vec::with_capacity(4 + 8 * pairs.len() + text);
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    out.extend(len(pairs.len()));
    for (k, v) in pairs {
        out.extend(len(k.len()));
        out.extend(len(v.len()));
    }
    for (k, v) in pairs {
        out.extend(k.as_bytes());
        out.push(0);
        out.extend(v.as_bytes());
        out.push(0);
    }
    out
}
