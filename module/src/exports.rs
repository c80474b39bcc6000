//! The hooks Envoy calls: every `envoy_dynamic_module_on_*` export of the module (checked against
//! the pinned Envoy by `tests/e2e/test_native_abi.py`). Each runs inside the panic guard
//! (`guard.rs`) and routes the hook to the filter configuration (`config.rs`), the stream's filter
//! (`stream.rs`) or the callout it answers (`callout.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use toolgate_policy::lifecycle::Action;

use crate::abi::*;
use crate::callout::{copy_headers, http_answer};
use crate::config::Config;
#[cfg(feature = "panic-probe")]
use crate::guard::probe;
use crate::guard::{
    body_status, grpc_hook, guard, headers_status, request_hook, response_hook, trailers_status,
};
use crate::host::Phase;
use crate::stream::{filter, Filter};

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
            let (name, bytes) = unsafe {
                (
                    String::from_utf8_lossy(name.bytes()).into_owned(),
                    config.bytes(),
                )
            };
            match Config::load(config_envoy, name, bytes) {
                Some(config) => Box::into_raw(Box::new(config)) as FilterConfigModulePtr,
                None => std::ptr::null(),
            }
        },
        std::ptr::null,
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(
    config: FilterConfigModulePtr,
) {
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
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: EnvoyBuffer,
    _config: EnvoyBuffer,
) -> PerRouteConfigModulePtr {
    // Toolgate has no per-route configuration: refused.
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    _config: PerRouteConfigModulePtr,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: FilterConfigModulePtr,
    envoy: FilterEnvoyPtr,
) -> FilterModulePtr {
    guard(
        "on_http_filter_new",
        || {
            // SAFETY: the pointer `on_http_filter_config_new` returned; Envoy keeps the configuration
            // alive while its filters live. None: a plugin without a plan, which denies every request.
            let config = unsafe { (config as *const Config).as_ref() };
            Box::into_raw(Box::new(Filter::new(config, envoy))) as FilterModulePtr
        },
        // Null: Envoy closes the stream.
        std::ptr::null,
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    request_hook(
        filter,
        "on_request_headers",
        Phase::RequestHeaders,
        headers_status,
        |s| {
            #[cfg(feature = "panic-probe")]
            probe(s, Phase::RequestHeaders);
            s.request.on_request_headers(&mut s.host, end_of_stream)
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    request_hook(
        filter,
        "on_request_body",
        Phase::RequestBody,
        body_status,
        |s| {
            let received_is_buffered = s.host.received_is_buffered_request();
            let size = s.host.body_size(
                BUFFERED_REQUEST_BODY,
                RECEIVED_REQUEST_BODY,
                received_is_buffered,
            );
            s.request.on_request_body(&mut s.host, size, end_of_stream)
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
) -> u32 {
    request_hook(
        filter,
        "on_request_trailers",
        Phase::RequestTrailers,
        trailers_status,
        |s| s.request.on_request_trailers(&mut s.host),
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    response_hook(
        filter,
        "on_response_headers",
        Phase::ResponseHeaders,
        end_of_stream,
        headers_status,
        |s| {
            #[cfg(feature = "panic-probe")]
            probe(s, Phase::ResponseHeaders);
            s.request.on_response_headers(&mut s.host, end_of_stream)
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    end_of_stream: bool,
) -> u32 {
    response_hook(
        filter,
        "on_response_body",
        Phase::ResponseBody,
        end_of_stream,
        body_status,
        |s| {
            // Most responses are not read: no callbacks for their size (docs/design/native-host.md;
            // measured by `make bench`, row (cm)).
            if !s.request.reads_response() {
                return Action::Continue;
            }
            #[cfg(feature = "panic-probe")]
            probe(s, Phase::ResponseBody);
            let received_is_buffered = s.host.received_is_buffered_response();
            let size = s.host.body_size(
                BUFFERED_RESPONSE_BODY,
                RECEIVED_RESPONSE_BODY,
                received_is_buffered,
            );
            s.request.on_response_body(&mut s.host, size, end_of_stream)
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
) -> u32 {
    response_hook(
        filter,
        "on_response_trailers",
        Phase::ResponseTrailers,
        false,
        trailers_status,
        |s| s.request.on_response_trailers(&mut s.host),
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _envoy: FilterEnvoyPtr,
    _filter: FilterModulePtr,
) {
}

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
    let Some(filter) = (unsafe { filter(filter_ptr) }) else {
        return;
    };
    guard(
        "on_http_callout_done",
        || {
            // SAFETY: Envoy's arrays of `headers_size` headers and `body_chunks_size` buffers,
            // valid for this hook.
            let answer = unsafe {
                http_answer(result, headers, headers_size, body_chunks, body_chunks_size)
            };
            filter.answer(callout_id, answer);
        },
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _envoy: FilterEnvoyPtr,
    filter_ptr: FilterModulePtr,
    _event_id: u64,
) {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(filter_ptr) }) else {
        return;
    };
    guard(
        "on_http_filter_scheduled",
        || filter.scheduled(),
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
        },
    )
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

// The streamed callout's hooks: the gRPC calls to ExternalAuth authorizers.

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
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    stream_id: u64,
) {
    grpc_hook(filter, "on_http_stream_complete", |f| {
        f.grpc_end(stream_id, true)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _envoy: FilterEnvoyPtr,
    filter: FilterModulePtr,
    stream_id: u64,
    _reason: u32,
) {
    grpc_hook(filter, "on_http_stream_reset", |f| {
        f.grpc_end(stream_id, false)
    })
}

// The hooks Envoy 1.40 resolves for every HTTP filter module whether or not it uses them

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _event_id: u64,
) {
}

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
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _envoy: FilterConfigEnvoyPtr,
    _config: FilterConfigModulePtr,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _envoy: FilterEnvoyPtr,
    _filter: FilterModulePtr,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _envoy: FilterEnvoyPtr,
    _filter: FilterModulePtr,
) {
}
