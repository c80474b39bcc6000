//! One stream (an HTTP context): the request's lifecycle and the counters of its root context, the
//! host each callback runs it with, and the call answers delivered to it.

use std::cell::RefCell;

use toolgate_policy::lifecycle::{Action, CallAnswer, Plugin, Request};

use crate::abi;
use crate::base::IdMap;
use crate::callout;
use crate::config;
use crate::counters::Counters;
use crate::host::FilterHost;

/// An HTTP context: one request.
pub(crate) struct Stream {
    pub(crate) request: Request,
    counters: Counters,
}

thread_local! {
    static STREAMS: RefCell<IdMap<Stream>> = RefCell::new(IdMap::default());
}

/// An HTTP context was created under the root context `parent_context_id`: its request runs under
/// the plan in force there. None is kept when there is no such root: its request is denied
/// ([`deny_orphan`]).
pub(crate) fn create(context_id: u32, parent_context_id: u32) {
    config::with_root(parent_context_id, |plugin, counters| {
        let stream = Stream {
            request: plugin.request(),
            counters,
        };
        STREAMS.with(|streams| {
            if let Ok(mut streams) = streams.try_borrow_mut() {
                streams.insert(context_id, stream);
            }
        });
    });
}

/// Runs `f` on the stream of `context_id`, if there is one (and no other callback holds it).
pub(crate) fn with_stream<T>(
    context_id: u32,
    f: impl FnOnce(&mut Stream, &mut FilterHost) -> T,
) -> Option<T> {
    STREAMS.with(|streams| {
        let mut streams = streams.try_borrow_mut().ok()?;
        let stream = streams.get_mut(&context_id)?;
        let mut host = FilterHost {
            context_id,
            counters: stream.counters,
        };
        Some(f(stream, &mut host))
    })
}

/// The request headers of a context without a stream (its root was never created): not a request
/// Toolgate knows, denied as under no plan.
pub(crate) fn deny_orphan(context_id: u32, end_of_stream: bool) -> Action {
    Plugin::default()
        .request()
        .on_request_headers(&mut FilterHost::orphan(context_id), end_of_stream)
}

/// Delivers the answer of the call `token` to the stream that made it (`answer` reads it from the
/// host, once the stream is the host's current context again).
pub(crate) fn answer(token: u32, answer: impl FnOnce() -> CallAnswer) {
    let Some(context_id) = callout::caller(token) else {
        return;
    };
    abi::set_effective_context(context_id);
    let answer = answer();
    with_stream(context_id, |s, host| {
        s.request.on_call_answer(host, token, answer)
    });
}

/// Forgets the stream of a context that is deleted (nothing if `context_id` is not one).
pub(crate) fn delete(context_id: u32) {
    STREAMS.with(|streams| {
        if let Ok(mut streams) = streams.try_borrow_mut() {
            streams.remove(&context_id);
        }
    });
}
