//! One stream's filter: the request's lifecycle and its host, kept busy while a hook runs, and the
//! call answers and events that arrive meanwhile (delivered from a scheduled event).

use std::cell::{Cell, RefCell};

use toolgate_policy::lifecycle::{CallAnswer, Request};

use crate::abi::*;
use crate::callout::GrpcCall;
use crate::counters::{Counters, DECISION_KEY};
use crate::host::{ModuleHost, Phase};
use crate::refusal::Refusal;

pub(crate) struct Stream {
    pub(crate) request: Request,
    pub(crate) host: ModuleHost,
}

/// One stream's filter. `stream` is busy while a hook runs; `early` takes the call answers that
/// arrive while it is (Envoy may answer a callout inline, from inside the hook that made it): they
/// are delivered from a scheduled event, after Envoy has seen the hook's result.
pub(crate) struct Filter {
    pub(crate) stream: RefCell<Stream>,
    pub(crate) early: RefCell<Vec<(u64, CallAnswer)>>,
    /// gRPC calls in flight (their hooks may come while `stream` is busy).
    pub(crate) grpc: RefCell<Vec<GrpcCall>>,
    pub(crate) envoy: FilterEnvoyPtr,
    pub(crate) scheduler_for_early: Cell<SchedulerPtr>,
    /// The configuration's counter ids (as the stream's host has them), for what is counted while
    /// the stream is busy or after a panic.
    pub(crate) counters: &'static Counters,
    /// The request was an allowed list request whose response is still to be filtered, as the last
    /// hook that ran the lifecycle left it: readable while `stream` is busy, and after a panic.
    pub(crate) listing: Cell<bool>,
    /// Whether the module refuses the response itself (`refusal.rs`).
    pub(crate) refusal: Cell<Refusal>,
}

impl Filter {
    /// Runs a stream hook on this filter; `None` if the stream is busy (a re-entered hook).
    pub(crate) fn with(&self, phase: Phase, f: impl FnOnce(&mut Stream) -> u32) -> Option<u32> {
        let mut stream = self.stream.try_borrow_mut().ok()?;
        stream.host.phase = phase;
        let result = f(&mut stream);
        stream.host.phase = Phase::Outside;
        self.listing.set(stream.request.reads_response());
        drop(stream);
        if self
            .early
            .try_borrow()
            .map(|e| !e.is_empty())
            .unwrap_or(false)
        {
            self.schedule_early();
        }
        Some(result)
    }

    fn schedule_early(&self) {
        if let Ok(mut stream) = self.stream.try_borrow_mut() {
            stream.host.schedule();
            return;
        }
        // Inside a hook: a scheduler of its own (rare: an answer arrived inline).
        let mut s = self.scheduler_for_early.get();
        if s.is_null() {
            // SAFETY: `envoy` is this filter's pointer.
            s = unsafe { envoy_dynamic_module_callback_http_filter_scheduler_new(self.envoy) };
            self.scheduler_for_early.set(s);
        }
        if !s.is_null() {
            // SAFETY: a scheduler this filter created and has not deleted.
            unsafe { envoy_dynamic_module_callback_http_filter_scheduler_commit(s, 0) }
        }
    }

    /// Delivers a call's answer to the lifecycle (outside any hook).
    pub(crate) fn answer(&self, callout_id: u64, answer: CallAnswer) {
        match self.stream.try_borrow_mut() {
            Ok(mut stream) => {
                let Some(i) = stream
                    .host
                    .calls
                    .iter()
                    .position(|(id, _)| *id == callout_id)
                else {
                    return;
                };
                let (_, token) = stream.host.calls.swap_remove(i);
                stream.host.phase = Phase::Outside;
                let Stream { request, host } = &mut *stream;
                request.on_call_answer(host, token, answer);
                self.listing.set(request.reads_response());
            }
            Err(_) => {
                if let Ok(mut early) = self.early.try_borrow_mut() {
                    early.push((callout_id, answer));
                }
                self.schedule_early();
            }
        }
    }

    pub(crate) fn scheduled(&self) {
        let early = self
            .early
            .try_borrow_mut()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default();
        for (id, answer) in early {
            self.answer(id, answer);
        }
        let resume = match self.stream.try_borrow_mut() {
            Ok(mut stream) => std::mem::take(&mut stream.host.resume_later),
            Err(_) => false,
        };
        if resume {
            // SAFETY: `envoy` is this filter's pointer.
            unsafe { envoy_dynamic_module_callback_http_filter_continue_decoding(self.envoy) }
        }
    }

    /// Counts one on the counter `id` (none: not defined), without the stream, which may be busy.
    pub(crate) fn increment(&self, id: Option<usize>) {
        if let Some(id) = id {
            // SAFETY: `envoy` is this filter's pointer; no labels.
            unsafe {
                envoy_dynamic_module_callback_http_filter_increment_counter(
                    self.envoy,
                    id,
                    std::ptr::null(),
                    0,
                    1,
                );
            }
        }
    }

    /// A panic in a request hook: deny the request (the lifecycle's state is unknown).
    pub(crate) fn deny_after_panic(&self) {
        if let Ok(stream) = self.stream.try_borrow() {
            stream.host.increment(stream.host.counters.panic, 1);
        }
        let summary = b"deny: internal error in the module (panic)";
        // SAFETY: `envoy` is this filter's pointer; the buffers live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.envoy,
                ModuleBuffer::of(DECISION_KEY),
                ModuleBuffer::of(summary),
            );
        }
        self.send_internal_error();
    }

    /// Envoy's local reply 500 `{"error":"internal error"}`: through the filters before any response
    /// headers, directly to the client before any went downstream, and a reset stream after.
    pub(crate) fn send_internal_error(&self) {
        let body = br#"{"error":"internal error"}"#;
        let mut headers = [ModuleHttpHeader::of("content-type", "application/json")];
        // SAFETY: `envoy` is this filter's pointer; headers and body live for the call.
        unsafe {
            envoy_dynamic_module_callback_http_send_response(
                self.envoy,
                500,
                headers.as_mut_ptr(),
                1,
                ModuleBuffer::of(body),
                ModuleBuffer::null(),
            );
        }
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        let schedulers = [
            self.stream.get_mut().host.scheduler,
            self.scheduler_for_early.get(),
        ];
        for s in schedulers {
            if !s.is_null() {
                // SAFETY: a scheduler this filter created, deleted once.
                unsafe { envoy_dynamic_module_callback_http_filter_scheduler_delete(s) }
            }
        }
    }
}

/// SAFETY: `ptr` must be a `Box<Filter>` from `on_http_filter_new` not yet destroyed.
pub(crate) unsafe fn filter<'a>(ptr: FilterModulePtr) -> Option<&'a Filter> {
    unsafe { (ptr as *const Filter).as_ref() }
}
