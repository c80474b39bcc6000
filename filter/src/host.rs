//! The host calls the filter makes (all per-request ones), straight to the proxy-wasm ABI 0.2.1.
//!
//! The SDK's wrappers take a property path as a `Vec<&str>` and serialise it into another `Vec`
//! (two allocations in the VM per call), and panic on a status they do not expect (a panic kills the
//! VM). These take the path already serialised (parts joined by NUL, a `&'static [u8]`), allocate
//! nothing but the result the host hands over, and turn every failure into `None`.

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
