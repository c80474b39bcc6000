//! A response the module refuses itself (docs/semantics.md §5): an allowed list request's response
//! is a confidentiality control, so a response hook that cannot run the lifecycle on it (it
//! panicked, or Envoy re-entered it while the stream was busy) never lets it pass unfiltered. The
//! client gets an error instead: Envoy's 500 from the response headers hook, and after the headers
//! went downstream (the lifecycle lets a list's headers through at once) a JSON-RPC error in place
//! of the body, as the lifecycle answers a list response it cannot read. From then on the lifecycle
//! is not asked again: after a panic its state is unknown.

use std::cell::Cell;

use toolgate_policy::lifecycle::{Counter, LogLevel};

use crate::abi::*;
use crate::base::log;
use crate::counters::{self, Counters};
use crate::host::{replace_response_body, response_header, send_internal_error, Phase};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The lifecycle decides the response.
    None,
    /// The 500 is being sent: its own response hooks, if Envoy runs them, let it through.
    Replying,
    /// Nothing more of the upstream's response passes; the error ends its body.
    Refused,
}

/// In place of the list: what the lifecycle's own refusals say, with no id (after a panic the
/// request's is not read again; JSON-RPC's answer to an id it cannot tell).
const ERROR: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Toolgate could not filter the list response: internal error in the module"}}"#;

/// Refuses the response of the filter `envoy` in the response hook `phase` (`end_of_stream`: its
/// body ends in this hook), `refusal` being the filter's state of it; `why` is said once, in the log
/// (and counted on `counters`). The hook's status.
pub(crate) fn refuse_response(
    envoy: FilterEnvoyPtr,
    refusal: &Cell<Refusal>,
    counters: &Counters,
    phase: Phase,
    end_of_stream: bool,
    why: &str,
) -> u32 {
    if refusal.get() == Refusal::None {
        counters::increment(envoy, counters.id(Counter::ListUnreadable), 1);
        log(
            LogLevel::Error,
            &format!("toolgate: list response refused, replaced by an error: {why}"),
        );
    }
    match phase {
        Phase::ResponseHeaders => {
            // Once: Envoy sends it in place of the response, or resets the stream.
            if refusal.get() == Refusal::None {
                refusal.set(Refusal::Replying);
                send_internal_error(envoy);
            }
            refusal.set(Refusal::Refused);
            HEADERS_STOP_ITERATION
        }
        Phase::ResponseBody | Phase::ResponseTrailers => {
            refusal.set(Refusal::Refused);
            let end = end_of_stream || phase == Phase::ResponseTrailers;
            let body = if !end {
                String::new()
            } else if event_stream(envoy) {
                format!("event: message\ndata: {ERROR}\n\n")
            } else {
                ERROR.to_string()
            };
            replace_response_body(envoy, phase == Phase::ResponseBody, body.as_bytes());
            if phase == Phase::ResponseBody {
                BODY_CONTINUE
            } else {
                TRAILERS_CONTINUE
            }
        }
        // Not a response hook: nothing to refuse here.
        _ => HEADERS_CONTINUE,
    }
}

/// Whether the response of the filter `envoy` is an event stream (its error is an event then).
fn event_stream(envoy: FilterEnvoyPtr) -> bool {
    response_header(envoy, "content-type").is_some_and(|t| {
        t.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("text/event-stream")
    })
}

/// The status of a response hook that lets nothing pass (when refusing failed too).
pub(crate) fn stopped(phase: Phase) -> u32 {
    match phase {
        Phase::ResponseBody => BODY_STOP_ITERATION_AND_BUFFER,
        Phase::ResponseTrailers => TRAILERS_STOP_ITERATION,
        _ => HEADERS_STOP_ITERATION,
    }
}
