//! Calls to ExternalAuth authorizers: proxy-wasm's `grpc_call` and `http_call`, which context made
//! each call (by its token), and the answers put together from the host's callbacks.

use std::cell::RefCell;

use toolgate_policy::lifecycle::{CallAnswer, Callout};

use crate::abi;
use crate::base::IdMap;
use crate::header_map;
use crate::host::FilterHost;

/// gRPC status INTERNAL: what a call closed without its answer gives.
const GRPC_INTERNAL: u32 = 13;

thread_local! {
    /// Call token → the context that made the call.
    static CALLS: RefCell<IdMap<u32>> = RefCell::new(IdMap::default());
}

impl FilterHost {
    /// Starts `callout` ([`toolgate_policy::lifecycle::Host::call`]): the host's token, by which
    /// its answer comes back to this context.
    pub(crate) fn start_call(&mut self, callout: &Callout<'_>) -> Option<u32> {
        let token = match *callout {
            Callout::Grpc {
                upstream,
                service,
                method,
                message,
                timeout_ms,
                ..
            } => abi::grpc_call(upstream, service, method, message, timeout_ms),
            Callout::Http {
                cluster,
                headers,
                body,
                timeout_ms,
            } => abi::http_call(cluster, &header_map::serialize(headers), body, timeout_ms),
        }?;
        let context_id = self.context_id;
        CALLS.with(|calls| {
            calls
                .try_borrow_mut()
                .ok()
                .map(|mut calls| calls.insert(token, context_id))
        })?;
        Some(token)
    }
}

/// The context that made the call with `token` (forgotten: each call is answered once).
pub(crate) fn caller(token: u32) -> Option<u32> {
    CALLS.with(|calls| calls.try_borrow_mut().ok()?.remove(&token))
}

/// Forgets the calls of a context that is deleted.
pub(crate) fn forget(context_id: u32) {
    CALLS.with(|calls| {
        if let Ok(mut calls) = calls.try_borrow_mut() {
            calls.retain(|_, c| *c != context_id);
        }
    });
}

/// An HTTP call's answer (`proxy_on_http_call_response`): `headers` is the number of its headers.
pub(crate) fn http_answer(headers: usize, body_size: usize) -> CallAnswer {
    if headers == 0 {
        // Envoy reports a failed call (reset, timeout, no upstream) as a response without headers.
        return CallAnswer::Failed;
    }
    let headers = abi::header_map(abi::HTTP_CALL_RESPONSE_HEADERS)
        .map(|m| header_map::pairs(&m))
        .unwrap_or_default();
    let body = if body_size == 0 {
        Vec::new()
    } else {
        abi::buffer(abi::HTTP_CALL_RESPONSE_BODY, body_size).unwrap_or_default()
    };
    CallAnswer::Http { headers, body }
}

/// A gRPC call's response message (`proxy_on_grpc_receive`).
pub(crate) fn grpc_message(message_size: usize) -> CallAnswer {
    CallAnswer::Grpc {
        status: 0,
        message: abi::buffer(abi::GRPC_RECEIVE_BUFFER, message_size).unwrap_or_default(),
    }
}

/// A gRPC call closed (`proxy_on_grpc_close`): a unary call that was answered was forgotten
/// already, so this is a failure.
pub(crate) fn grpc_closed(status: u32) -> CallAnswer {
    CallAnswer::Grpc {
        status: if status == 0 { GRPC_INTERNAL } else { status },
        message: Vec::new(),
    }
}
