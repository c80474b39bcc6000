//! The hooks Envoy calls (every `envoy_dynamic_module_on_*` export of the module, checked against the
//! pinned Envoy by `tests/e2e/test_native_abi.py`), each run inside [`guard`], which catches panics
//! so that none unwinds into Envoy.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use toolgate_policy::jwt::{module_config, ModuleConfig, PayloadHeader};
use toolgate_policy::lifecycle::{Action, CallAnswer, Counter, HostBase, LogLevel, Plugin};

use crate::abi::*;
use crate::base::log;
use crate::callout::copy_headers;
use crate::config::{log_claims_source, new_request, Config, LoadHost, NEXT_CONFIG_ID};
use crate::counters::Counters;
use crate::filter::{filter, Filter, Stream};
use crate::host::{ModuleHost, Phase};
use crate::refusal::{stopped, Refusal};

/// Runs a hook body, catching a panic: `on_panic` gives the hook's result then.
fn guard<T>(what: &str, f: impl FnOnce() -> T, on_panic: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            // Logging cannot panic in a way that matters here; guard it all the same.
            let _ = catch_unwind(|| log(LogLevel::Error, &format!("toolgate: panic in {what}")));
            on_panic()
        }
    }
}

/// The test-only panic trigger (feature `panic-probe`, tests/e2e/test_native_module.py): the request
/// header `x-toolgate-panic-probe` names the hook that panics, `response-headers` or `response-body`
/// while the response is an allowed list's; any other value, the request headers hook.
#[cfg(feature = "panic-probe")]
fn probe(s: &mut Stream, phase: Phase) {
    let Some(value) = s
        .host
        .request_header_values("x-toolgate-panic-probe")
        .into_iter()
        .next()
    else {
        return;
    };
    let hook = match value.as_slice() {
        b"response-headers" => Phase::ResponseHeaders,
        b"response-body" => Phase::ResponseBody,
        _ => Phase::RequestHeaders,
    };
    if hook == phase && (phase == Phase::RequestHeaders || s.request.reads_response()) {
        panic!("panic probe");
    }
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
fn request_hook(
    ptr: FilterModulePtr,
    what: &str,
    phase: Phase,
    status: fn(Action) -> u32,
    f: impl FnOnce(&mut Stream) -> Action,
) -> u32 {
    // SAFETY: Envoy passes back the pointer `on_http_filter_new` returned.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return status(Action::Pause);
    };
    guard(
        what,
        || {
            filter
                .with(phase, |s| status(f(s)))
                .unwrap_or(status(Action::Pause))
        },
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
            status(Action::Pause)
        },
    )
}

/// A response hook: the lifecycle's action. The request was decided already, so a busy stream (a
/// re-entered hook) or a panic lets the response continue (the panic counted), except while it is
/// an allowed list's: list filtering fails closed, the module refuses the response itself
/// (`refusal.rs`), and does so for the rest of it.
fn response_hook(
    ptr: FilterModulePtr,
    what: &str,
    phase: Phase,
    end_of_stream: bool,
    status: fn(Action) -> u32,
    f: impl FnOnce(&mut Stream) -> Action,
) -> u32 {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return status(Action::Continue);
    };
    match filter.refusal.get() {
        Refusal::None => {}
        Refusal::Replying => return status(Action::Continue),
        Refusal::Refused => {
            return catch_unwind(AssertUnwindSafe(|| {
                filter.refuse_response(phase, end_of_stream, what)
            }))
            .unwrap_or(stopped(phase))
        }
    }
    guard(
        what,
        || match filter.with(phase, |s| status(f(s))) {
            Some(result) => result,
            // The lifecycle cannot be asked: what the last hook that ran it left says whether the
            // response is a list's.
            None if filter.listing.get() => {
                filter.refuse_response(phase, end_of_stream, &format!("{what} re-entered"))
            }
            None => status(Action::Continue),
        },
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.increment(filter.counters.panic)));
            let listing = filter.listing.get()
                || filter
                    .stream
                    .try_borrow()
                    .is_ok_and(|s| s.request.reads_response());
            if !listing {
                return status(Action::Continue);
            }
            catch_unwind(AssertUnwindSafe(|| {
                filter.refuse_response(
                    phase,
                    end_of_stream,
                    &format!("internal error in the module (panic in {what})"),
                )
            }))
            .unwrap_or(stopped(phase))
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
            let (name, bytes) = unsafe {
                (
                    String::from_utf8_lossy(name.bytes()).into_owned(),
                    config.bytes(),
                )
            };
            let counters = Counters::define(config_envoy);
            let mut host = LoadHost {
                config: config_envoy,
                name: name.clone(),
                counters,
            };
            let ModuleConfig {
                plan,
                payload_header,
            } = match module_config(bytes) {
                Ok(c) => c,
                Err(e) => {
                    host.count(Counter::PlanRejected);
                    log(
                        LogLevel::Error,
                        &format!(
                            "toolgate: plugin {name}: REFUSED configuration ({e}); update rejected"
                        ),
                    );
                    return std::ptr::null();
                }
            };
            let plan = plan.to_vec();
            // The main thread's load: logs, counts, refuses an update with a bad plan (null: Envoy
            // rejects the configuration and keeps the one in force).
            if !Plugin::default().configure(&mut host, &plan) {
                return std::ptr::null();
            }
            log_claims_source(&name, payload_header);
            let id = NEXT_CONFIG_ID.fetch_add(1, Ordering::Relaxed);
            let config = Config {
                id,
                alive: Arc::new(()),
                name,
                plan,
                counters,
                payload_header,
            };
            Box::into_raw(Box::new(config)) as FilterConfigModulePtr
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
            // alive while its filters live.
            let config = unsafe { (config as *const Config).as_ref() };
            let (request, counters, payload_header) = match config {
                // SAFETY: the lifetime is not checked: Envoy's filter holds its configuration, which
                // is destroyed (`on_http_filter_config_destroy`) only after the last of its filters.
                Some(c) => (
                    new_request(c),
                    unsafe { &*std::ptr::addr_of!(c.counters) },
                    c.payload_header,
                ),
                // No configuration: a plugin without a plan, which denies every request.
                None => (
                    Plugin::default().request(),
                    &Counters::NONE,
                    PayloadHeader::Unknown,
                ),
            };
            let host = ModuleHost {
                envoy,
                counters,
                phase: Phase::Outside,
                calls: Vec::new(),
                next_token: 1,
                scheduler: std::ptr::null_mut(),
                resume_later: false,
                payload_header,
            };
            let filter = Filter {
                stream: RefCell::new(Stream { request, host }),
                early: RefCell::new(Vec::new()),
                grpc: RefCell::new(Vec::new()),
                envoy,
                scheduler_for_early: Cell::new(std::ptr::null_mut()),
                counters,
                listing: Cell::new(false),
                refusal: Cell::new(Refusal::None),
            };
            Box::into_raw(Box::new(filter)) as FilterModulePtr
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
            // Most responses are not read: no callbacks for their size (issue 27: about 0.3 k
            // instructions per request).
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
                            (
                                String::from_utf8_lossy(k).into_owned(),
                                String::from_utf8_lossy(v).into_owned(),
                            )
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

/// A streamed-callout hook on the filter `ptr`; a panic denies the request.
fn grpc_hook(ptr: FilterModulePtr, what: &str, f: impl FnOnce(&Filter)) {
    // SAFETY: as in `request_hook`.
    let Some(filter) = (unsafe { filter(ptr) }) else {
        return;
    };
    guard(
        what,
        || f(filter),
        || {
            let _ = catch_unwind(AssertUnwindSafe(|| filter.deny_after_panic()));
        },
    )
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
