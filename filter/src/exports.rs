//! The callbacks the proxy calls: every export of the module (`filter/exports.txt` lists them, and
//! `make wasm` keeps exactly those). Each routes the callback to the root context's configuration
//! (`config.rs`), the request's stream (`stream.rs`) or the call it answers (`callout.rs`), and turns
//! the lifecycle's action into the ABI's.

use toolgate_policy::lifecycle::Action;

use crate::base::refresh_log_level;
use crate::{callout, config, stream};

fn action(a: Action) -> u32 {
    match a {
        Action::Continue => 0,
        Action::Pause => 1,
    }
}

#[cfg(target_os = "wasi")]
extern "C" {
    fn __wasm_call_ctors();
}

/// WASI reactor initialisation (static constructors).
#[no_mangle]
pub extern "C" fn _initialize() {
    #[cfg(target_os = "wasi")]
    // SAFETY: called once by the host before any other export, as WASI reactors require.
    unsafe {
        __wasm_call_ctors();
    }
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// The host allocates the memory of every value it hands over here: a boxed slice of exactly
/// `size` bytes, which `abi::owned` takes back as a `Vec`.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut memory: Vec<std::mem::MaybeUninit<u8>> = Vec::with_capacity(size);
    // SAFETY: the capacity is `size`; the host writes the bytes before they are read.
    unsafe { memory.set_len(size) };
    Box::into_raw(memory.into_boxed_slice()) as *mut u8
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_root_context_id: u32, _vm_configuration_size: usize) -> u32 {
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(context_id: u32, parent_context_id: u32) {
    if parent_context_id == 0 {
        config::create(context_id);
    } else {
        stream::create(context_id, parent_context_id);
    }
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(root_context_id: u32, configuration_size: usize) -> u32 {
    u32::from(config::configure(root_context_id, configuration_size))
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(_root_context_id: u32) {
    refresh_log_level();
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(
    context_id: u32,
    _headers: usize,
    end_of_stream: u32,
) -> u32 {
    // A request without a stream (its root was never created) is not one Toolgate knows: deny it.
    let done = stream::with_stream(context_id, |s, host| {
        s.request.on_request_headers(host, end_of_stream != 0)
    });
    action(done.unwrap_or_else(|| stream::deny_orphan(context_id, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(
    context_id: u32,
    body_size: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        stream::with_stream(context_id, |s, host| {
            s.request
                .on_request_body(host, body_size, end_of_stream != 0)
        })
        .unwrap_or(Action::Pause),
    )
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(context_id: u32, _trailers: usize) -> u32 {
    action(
        stream::with_stream(context_id, |s, host| s.request.on_request_trailers(host))
            .unwrap_or(Action::Pause),
    )
}

// The response callbacks: list filtering (docs/semantics.md §5). For every other request the lifecycle returns
// at once; a response without a stream is not Toolgate's to change. Built without the
// `list-filtering` feature, the module does not export them (Envoy then makes no response call into
// the VM) and refuses plans that filter lists ([`RootHost::filters_responses`]).
//
// Their `Continue` when `with_stream` finds nothing cannot pass a list unfiltered: a context without a
// stream had its request denied (`proxy_on_request_headers`), and the streams are never busy here, as
// Envoy's Wasm host does not nest callbacks (a local reply asked for inside one is sent after it
// returns). A panic aborts, which traps, and Envoy fails the stream (`fail_open: false`): its error
// before the response headers, a reset after (tests/e2e/test_resilience.py).
//
// [`RootHost::filters_responses`]: toolgate_policy::lifecycle::RootHost::filters_responses

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_headers(
    context_id: u32,
    _headers: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        stream::with_stream(context_id, |s, host| {
            s.request.on_response_headers(host, end_of_stream != 0)
        })
        .unwrap_or(Action::Continue),
    )
}

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_body(
    context_id: u32,
    body_size: usize,
    end_of_stream: u32,
) -> u32 {
    action(
        stream::with_stream(context_id, |s, host| {
            s.request
                .on_response_body(host, body_size, end_of_stream != 0)
        })
        .unwrap_or(Action::Continue),
    )
}

#[cfg(feature = "list-filtering")]
#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(context_id: u32, _trailers: usize) -> u32 {
    action(
        stream::with_stream(context_id, |s, host| s.request.on_response_trailers(host))
            .unwrap_or(Action::Continue),
    )
}

#[no_mangle]
pub extern "C" fn proxy_on_http_call_response(
    _context_id: u32,
    token: u32,
    headers: usize,
    body_size: usize,
    _trailers: usize,
) {
    stream::answer(token, || callout::http_answer(headers, body_size));
}

#[no_mangle]
pub extern "C" fn proxy_on_grpc_receive(_context_id: u32, token: u32, message_size: usize) {
    stream::answer(token, || callout::grpc_message(message_size));
}

#[no_mangle]
pub extern "C" fn proxy_on_grpc_close(_context_id: u32, token: u32, status: u32) {
    stream::answer(token, || callout::grpc_closed(status));
}

#[no_mangle]
pub extern "C" fn proxy_on_delete(context_id: u32) {
    stream::delete(context_id);
    callout::forget(context_id);
    config::delete(context_id);
}
