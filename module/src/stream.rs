//! One stream's filter: the request's lifecycle and its host, kept busy while a hook runs, the call
//! answers and events that arrive meanwhile (delivered from a scheduled event), and the gRPC calls
//! in flight, put together from their streamed callouts' hooks.

use std::cell::{Cell, RefCell};

use toolgate_policy::jwt::PayloadHeader;
use toolgate_policy::lifecycle::{CallAnswer, Plugin, Request};

use crate::abi::*;
use crate::callout::{GrpcCall, GRPC_CALL, GRPC_INTERNAL};
use crate::config::{new_request, Config};
use crate::counters::{self, Counters, DECISION_KEY};
use crate::host::{send_internal_error, ModuleHost, Phase};
use crate::refusal::{self, Refusal};

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
    /// The filter of a new stream of Envoy's filter `envoy`, under `config` (none: a plugin without
    /// a plan, which denies every request).
    pub(crate) fn new(config: Option<&Config>, envoy: FilterEnvoyPtr) -> Filter {
        let (request, counters, payload_header) = match config {
            // SAFETY: the lifetime is not checked: Envoy's filter holds its configuration, which is
            // destroyed (`on_http_filter_config_destroy`) only after the last of its filters.
            Some(c) => (
                new_request(c),
                unsafe { &*std::ptr::addr_of!(c.counters) },
                c.payload_header,
            ),
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
        Filter {
            stream: RefCell::new(Stream { request, host }),
            early: RefCell::new(Vec::new()),
            grpc: RefCell::new(Vec::new()),
            envoy,
            scheduler_for_early: Cell::new(std::ptr::null_mut()),
            counters,
            listing: Cell::new(false),
            refusal: Cell::new(Refusal::None),
        }
    }

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
        counters::increment(self.envoy, id, 1);
    }

    /// Refuses the response itself (`refusal.rs`) in the response hook `phase`; the hook's status.
    pub(crate) fn refuse_response(&self, phase: Phase, end_of_stream: bool, why: &str) -> u32 {
        refusal::refuse_response(
            self.envoy,
            &self.refusal,
            self.counters,
            phase,
            end_of_stream,
            why,
        )
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
        send_internal_error(self.envoy);
    }

    // The gRPC calls in flight, from their streamed callouts' hooks.

    /// A hook of the streamed callout `id` (a gRPC call): `f` updates the call.
    pub(crate) fn grpc_event(&self, id: u64, f: impl FnOnce(&mut GrpcCall)) {
        let Ok(mut calls) = self.grpc.try_borrow_mut() else {
            return;
        };
        let i = match calls.iter().position(|c| c.id == id) {
            Some(i) => i,
            None => {
                calls.push(GrpcCall::new(id));
                calls.len() - 1
            }
        };
        f(&mut calls[i]);
    }

    /// The streamed callout `id` ended: completed (its answer) or reset (failed).
    pub(crate) fn grpc_end(&self, id: u64, completed: bool) {
        let call = self.grpc.try_borrow_mut().ok().and_then(|mut calls| {
            let i = calls.iter().position(|c| c.id == id)?;
            Some(calls.swap_remove(i))
        });
        let answer = match (completed, call) {
            (true, Some(call)) => call.answer(),
            (true, None) => CallAnswer::Grpc {
                status: GRPC_INTERNAL,
                message: Vec::new(),
            },
            (false, _) => CallAnswer::Failed,
        };
        self.answer(id | GRPC_CALL, answer);
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
