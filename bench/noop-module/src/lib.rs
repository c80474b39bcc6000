//! An Envoy dynamic-module HTTP filter that does nothing: every event continues. `make bench` runs it
//! in Toolgate's filter position as row (nm), the floor any native filter pays (Envoy's dynamic-module
//! filter, its calls into the module, a filter object per stream), as bench/noop-filter is for Wasm.
//!
//! It exports only the hooks the pinned Envoy 1.40 (dynamic-module ABI v0.2.0) refuses to load an HTTP
//! filter module without (found by loading it: Envoy names the first missing symbol; the configuration's
//! scheduler and callout hooks, `local_reply` and the per-route configuration hooks may be absent).
//! tests/e2e/test_native_abi.py checks Toolgate's module exports every hook Envoy looks up. The
//! signatures are module/src/exports.rs's, with the types reduced to what this filter reads (none
//! of its arguments). No Envoy callback is called.

use std::ffi::{c_char, c_void};

type Ptr = *const c_void;

/// `envoy_dynamic_module_type_envoy_buffer`: bytes owned by Envoy.
#[repr(C)]
pub struct EnvoyBuffer {
    ptr: *const u8,
    length: usize,
}

/// Any non-null pointer: Envoy only hands it back (null would refuse the configuration or the stream).
static TOKEN: u8 = 0;

fn token() -> Ptr {
    &TOKEN as *const u8 as Ptr
}

const CONTINUE: u32 = 0;

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    c"v0.2.0".as_ptr()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    _envoy: *mut c_void,
    _name: EnvoyBuffer,
    _config: EnvoyBuffer,
) -> Ptr {
    token()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(_config: Ptr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    _config: Ptr,
    _envoy: *mut c_void,
) -> Ptr {
    token()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(_filter: Ptr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _envoy: *mut c_void,
    _filter: Ptr,
    _end: bool,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _envoy: *mut c_void,
    _filter: Ptr,
    _end: bool,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _envoy: *mut c_void,
    _filter: Ptr,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _envoy: *mut c_void,
    _filter: Ptr,
    _end: bool,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _envoy: *mut c_void,
    _filter: Ptr,
    _end: bool,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _envoy: *mut c_void,
    _filter: Ptr,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _envoy: *mut c_void,
    _filter: Ptr,
) {
}

// Required although this filter starts no callout, schedules nothing and never watches the write buffer.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _envoy: *mut c_void,
    _filter: Ptr,
    _callout_id: u64,
    _result: u32,
    _headers: *const c_void,
    _headers_size: usize,
    _body: *const c_void,
    _body_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _envoy: *mut c_void,
    _filter: Ptr,
    _stream_id: u64,
    _headers: *const c_void,
    _size: usize,
    _end: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _envoy: *mut c_void,
    _filter: Ptr,
    _stream_id: u64,
    _data: *const c_void,
    _count: usize,
    _end: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _envoy: *mut c_void,
    _filter: Ptr,
    _stream_id: u64,
    _trailers: *const c_void,
    _size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _envoy: *mut c_void,
    _filter: Ptr,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _envoy: *mut c_void,
    _filter: Ptr,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _envoy: *mut c_void,
    _filter: Ptr,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _envoy: *mut c_void,
    _filter: Ptr,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _envoy: *mut c_void,
    _filter: Ptr,
) {
}
