//! The part of Envoy's dynamic-module ABI (Envoy 1.40, ABI version "v0.2.0") this module uses,
//! declared by hand from reading `source/extensions/dynamic_modules/abi/abi.h`: no bindgen, no SDK.
//!
//! Every declaration here is checked against the pinned Envoy binary's exported symbols by
//! `tests/e2e/test_native_abi.py` (names only: the types were transcribed from the header; see
//! docs/envoy-notes.md §"Dynamic modules").
//!
//! C mapping (x86-64 / aarch64 System V): an `enum` parameter or result is an `int`-sized value,
//! passed here as `u32`; `bool` is Rust's `bool` (C `_Bool`); `size_t` is `usize`. Structs passed by
//! value are `#[repr(C)]` pairs of a pointer and a length.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// The ABI version this module was written against, returned by `envoy_dynamic_module_on_program_init`.
pub const ABI_VERSION: &std::ffi::CStr = c"v0.2.0";

/// Bytes owned by Envoy, valid until the end of the current event hook (unless a setter is called).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    pub ptr: *const u8,
    pub length: usize,
}

impl EnvoyBuffer {
    pub const fn null() -> Self {
        EnvoyBuffer {
            ptr: std::ptr::null(),
            length: 0,
        }
    }

    /// SAFETY: `ptr`/`length` must be what Envoy wrote in the current hook (or null).
    pub unsafe fn bytes<'a>(&self) -> &'a [u8] {
        unsafe {
            if self.ptr.is_null() || self.length == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(self.ptr, self.length)
            }
        }
    }
}

/// Bytes owned by the module for the duration of a callback.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleBuffer {
    pub ptr: *const u8,
    pub length: usize,
}

impl ModuleBuffer {
    pub fn of(bytes: &[u8]) -> Self {
        ModuleBuffer {
            ptr: bytes.as_ptr(),
            length: bytes.len(),
        }
    }

    pub const fn null() -> Self {
        ModuleBuffer {
            ptr: std::ptr::null(),
            length: 0,
        }
    }
}

/// A header the module hands over (key and value owned by the module).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleHttpHeader {
    pub key_ptr: *const u8,
    pub key_length: usize,
    pub value_ptr: *const u8,
    pub value_length: usize,
}

impl ModuleHttpHeader {
    pub fn of(key: &str, value: &str) -> Self {
        ModuleHttpHeader {
            key_ptr: key.as_ptr(),
            key_length: key.len(),
            value_ptr: value.as_ptr(),
            value_length: value.len(),
        }
    }
}

/// A header Envoy hands over (owned by its header map).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyHttpHeader {
    pub key_ptr: *const u8,
    pub key_length: usize,
    pub value_ptr: *const u8,
    pub value_length: usize,
}

impl EnvoyHttpHeader {
    pub const fn null() -> Self {
        EnvoyHttpHeader {
            key_ptr: std::ptr::null(),
            key_length: 0,
            value_ptr: std::ptr::null(),
            value_length: 0,
        }
    }

    /// SAFETY: as [`EnvoyBuffer::bytes`].
    pub unsafe fn parts<'a>(&self) -> (&'a [u8], &'a [u8]) {
        unsafe {
            (
                EnvoyBuffer {
                    ptr: self.key_ptr,
                    length: self.key_length,
                }
                .bytes(),
                EnvoyBuffer {
                    ptr: self.value_ptr,
                    length: self.value_length,
                }
                .bytes(),
            )
        }
    }
}

// Pointers: Envoy's objects (`*_envoy_ptr`) are opaque to the module; the module's own objects
// (`*_module_ptr`) are whatever the module returned from the matching `_new` hook.
pub type FilterConfigEnvoyPtr = *mut c_void;
pub type FilterConfigModulePtr = *const c_void;
pub type FilterEnvoyPtr = *mut c_void;
pub type FilterModulePtr = *const c_void;
pub type PerRouteConfigModulePtr = *const c_void;
pub type SchedulerPtr = *mut c_void;

// envoy_dynamic_module_type_http_header_type
pub const REQUEST_HEADER: u32 = 0;
pub const RESPONSE_HEADER: u32 = 2;

// envoy_dynamic_module_type_metadata_source
pub const METADATA_SOURCE_DYNAMIC: u32 = 0;

// envoy_dynamic_module_type_http_body_type
pub const RECEIVED_REQUEST_BODY: u32 = 0;
pub const BUFFERED_REQUEST_BODY: u32 = 1;
pub const RECEIVED_RESPONSE_BODY: u32 = 2;
pub const BUFFERED_RESPONSE_BODY: u32 = 3;

// envoy_dynamic_module_type_log_level
pub const LOG_DEBUG: u32 = 1;
pub const LOG_INFO: u32 = 2;
pub const LOG_WARN: u32 = 3;
pub const LOG_ERROR: u32 = 4;

// envoy_dynamic_module_type_attribute_id (the positions in the header's enum)
pub const ATTR_REQUEST_PROTOCOL: u32 = 10;
pub const ATTR_DESTINATION_PORT: u32 = 27;
pub const ATTR_CONNECTION_REQUESTED_SERVER_NAME: u32 = 30;
pub const ATTR_CONNECTION_URI_SAN_PEER_CERTIFICATE: u32 = 37;
pub const ATTR_XDS_CLUSTER_NAME: u32 = 57;

// envoy_dynamic_module_type_on_http_filter_request_headers_status (and the response's)
pub const HEADERS_CONTINUE: u32 = 0;
pub const HEADERS_STOP_ITERATION: u32 = 1;
// envoy_dynamic_module_type_on_http_filter_request_body_status (and the response's)
pub const BODY_CONTINUE: u32 = 0;
pub const BODY_STOP_ITERATION_AND_BUFFER: u32 = 1;
// envoy_dynamic_module_type_on_http_filter_request_trailers_status (and the response's)
pub const TRAILERS_CONTINUE: u32 = 0;
pub const TRAILERS_STOP_ITERATION: u32 = 1;
// envoy_dynamic_module_type_on_http_filter_local_reply_status
pub const LOCAL_REPLY_CONTINUE: u32 = 0;

// envoy_dynamic_module_type_http_callout_init_result
pub const CALLOUT_INIT_SUCCESS: u32 = 0;
// envoy_dynamic_module_type_http_callout_result
pub const CALLOUT_SUCCESS: u32 = 0;

// envoy_dynamic_module_type_metrics_result
pub const METRICS_SUCCESS: u32 = 0;

// The callbacks Envoy exports (resolved when Envoy dlopen()s the module). Keep one declaration per
// line starting with `pub fn envoy_dynamic_module_callback_`: the ABI test reads them from here.
extern "C" {
    pub fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);
    pub fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: FilterConfigEnvoyPtr,
        name: ModuleBuffer,
        label_names: *const ModuleBuffer,
        label_names_length: usize,
        counter_id: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
        config: FilterConfigEnvoyPtr,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: FilterEnvoyPtr,
        id: usize,
        label_values: *const ModuleBuffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_get_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        result: *mut EnvoyBuffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: FilterEnvoyPtr,
        header_type: u32,
    ) -> usize;
    /// The keys of a metadata namespace (a namespace's values may be Structs, which no callback reads).
    pub fn envoy_dynamic_module_callback_http_get_metadata_keys_count(
        filter: FilterEnvoyPtr,
        source: u32,
        namespace: ModuleBuffer,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_metadata_keys(
        filter: FilterEnvoyPtr,
        source: u32,
        namespace: ModuleBuffer,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_headers(
        filter: FilterEnvoyPtr,
        header_type: u32,
        result: *mut EnvoyHttpHeader,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_add_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    /// A null `value` removes the header.
    pub fn envoy_dynamic_module_callback_http_set_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_send_response(
        filter: FilterEnvoyPtr,
        status_code: u32,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );

    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: FilterEnvoyPtr,
        body_type: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_body_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_append_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_drain_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        number_of_bytes: usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_request_body(
        filter: FilterEnvoyPtr,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_response_body(
        filter: FilterEnvoyPtr,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: FilterEnvoyPtr,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_string(
        filter: FilterEnvoyPtr,
        attribute_id: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_int(
        filter: FilterEnvoyPtr,
        attribute_id: u32,
        result: *mut u64,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: FilterEnvoyPtr,
        callout_id: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        timeout_milliseconds: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: FilterEnvoyPtr,
        stream_id: *mut u64,
        cluster_name: ModuleBuffer,
        headers: *mut ModuleHttpHeader,
        headers_size: usize,
        body: ModuleBuffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_filter_scheduler_new(
        filter: FilterEnvoyPtr,
    ) -> SchedulerPtr;
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
        scheduler: SchedulerPtr,
        event_id: u64,
    );
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: SchedulerPtr);

    pub fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: FilterEnvoyPtr);
}
