//! How a hook runs: inside [`guard`], which catches panics so that none unwinds into Envoy, and, for
//! the stream hooks, on the stream's filter: what a busy stream (a re-entered hook) or a panic gives
//! each kind of hook (`exports.rs` has the hooks themselves).

use std::panic::{catch_unwind, AssertUnwindSafe};

use toolgate_policy::lifecycle::{Action, LogLevel};

use crate::abi::*;
use crate::base::log;
use crate::host::Phase;
use crate::refusal::{stopped, Refusal};
use crate::stream::{filter, Filter, Stream};

/// Runs a hook body, catching a panic: `on_panic` gives the hook's result then.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> T, on_panic: impl FnOnce() -> T) -> T {
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
pub(crate) fn probe(s: &mut Stream, phase: Phase) {
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

pub(crate) fn headers_status(a: Action) -> u32 {
    match a {
        Action::Continue => HEADERS_CONTINUE,
        Action::Pause => HEADERS_STOP_ITERATION,
    }
}

pub(crate) fn body_status(a: Action) -> u32 {
    match a {
        Action::Continue => BODY_CONTINUE,
        Action::Pause => BODY_STOP_ITERATION_AND_BUFFER,
    }
}

pub(crate) fn trailers_status(a: Action) -> u32 {
    match a {
        Action::Continue => TRAILERS_CONTINUE,
        Action::Pause => TRAILERS_STOP_ITERATION,
    }
}

/// A request hook: the lifecycle's action; a busy stream is paused (as the Wasm host's unknown
/// context); a panic denies the request.
pub(crate) fn request_hook(
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
pub(crate) fn response_hook(
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

/// A streamed-callout hook on the filter `ptr`; a panic denies the request.
pub(crate) fn grpc_hook(ptr: FilterModulePtr, what: &str, f: impl FnOnce(&Filter)) {
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
