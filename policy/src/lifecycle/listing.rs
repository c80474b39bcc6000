//! The response side of the lifecycle: list filtering (docs/semantics.md §5). An allowed request that holds
//! `tools/list`, `prompts/list` or `resources/list` keeps its state into the response, whose list
//! results are rewritten ([`crate::list_filter`]) to the entries the caller may use; a response
//! that cannot be read is replaced by a JSON-RPC error, never passed on. Every other response is
//! not looked at: its callbacks return at once.

use super::headers::{self, RequestHeaders};
use super::{http_request, Action, Counter, Held, Host, LogLevel, Request, State};
use crate::list_filter::{self, ListKind, ListRequests, SseFilter, Unreadable};

/// An allowed list request, until its response is through.
pub(super) struct Listing {
    held: Box<Held>,
    requests: ListRequests,
    /// The decision's summary, completed with what filtering did.
    summary: String,
    phase: Phase,
}

enum Phase {
    /// Waiting for the response headers.
    Headers,
    /// A JSON body, buffered to its end.
    Json { buffered: usize },
    /// An event stream, filtered event by event.
    Sse(SseFilter),
    /// Unreadable: the body is dropped and replaced by an error at its end.
    Refused { why: Unreadable, sse: bool },
}

impl Listing {
    pub(super) fn new(held: Box<Held>, requests: ListRequests, summary: String) -> Self {
        Listing {
            held,
            requests,
            summary,
            phase: Phase::Headers,
        }
    }
}

/// Whether a JSON POST may be a list request, by its headers: MCP 2026-07-28 clients name the
/// method in `Mcp-Method`; without it (2025-11-25), only the body tells.
pub(super) fn may_be_a_list(held: &RequestHeaders) -> bool {
    held.first(headers::MCP_METHOD)
        .is_none_or(|m| ListKind::of_method(m.trim()).is_some())
}

impl Request {
    /// Whether the response is looked at (an allowed list request's): when not, a host may answer
    /// the response callbacks at once, without reading what the lifecycle would not use.
    pub fn reads_response(&self) -> bool {
        matches!(self.state, State::Listing(_))
    }

    pub fn on_response_headers(&mut self, host: &mut impl Host, end_of_stream: bool) -> Action {
        let State::Listing(listing) = &mut self.state else {
            return Action::Continue;
        };
        if !matches!(listing.phase, Phase::Headers) {
            return Action::Continue;
        }
        let status = host.response_header(":status").unwrap_or_default();
        // Only a successful response can hold a list result (an error status is not one to a
        // client); a response without a body has none.
        if end_of_stream || !status.starts_with('2') {
            self.state = State::Done;
            return Action::Continue;
        }
        let content_type = host.response_header("content-type").unwrap_or_default();
        let encoding = host.response_header("content-encoding").unwrap_or_default();
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let sse = media == "text/event-stream";
        listing.phase =
            if !encoding.trim().is_empty() && !encoding.trim().eq_ignore_ascii_case("identity") {
                host.remove_response_header("content-encoding");
                Phase::Refused {
                    why: Unreadable::Encoded(encoding),
                    sse,
                }
            } else if sse {
                Phase::Sse(SseFilter::default())
            } else if media == "application/json" {
                Phase::Json { buffered: 0 }
            } else {
                Phase::Refused {
                    why: Unreadable::ContentType(content_type),
                    sse: false,
                }
            };
        // The body's length changes.
        host.remove_response_header("content-length");
        Action::Continue
    }

    pub fn on_response_body(
        &mut self,
        host: &mut impl Host,
        body_size: usize,
        end_of_stream: bool,
    ) -> Action {
        let State::Listing(listing) = &mut self.state else {
            return Action::Continue;
        };
        let Some(loaded) = self.loaded.clone() else {
            return Action::Continue;
        };
        let limit = loaded.evaluator.plan().settings.max_body_bytes as usize;
        let Listing {
            held,
            requests,
            phase,
            ..
        } = &mut **listing;
        let route = loaded.evaluator.route(held.cluster.as_deref());
        let done = match phase {
            Phase::Headers | Phase::Refused { .. } => None,
            Phase::Json { buffered } => {
                if body_size > limit {
                    Some(Err(Unreadable::TooLarge(limit)))
                } else if !end_of_stream {
                    *buffered = body_size;
                    return Action::Pause;
                } else {
                    let body = host.response_body(body_size).unwrap_or_default();
                    let rewritten = match std::str::from_utf8(&body) {
                        Ok(text) => http_request(held, |req| {
                            let mut judge = route.list_judge(req);
                            list_filter::rewrite_json(text, requests, &mut |kind, name| {
                                judge.may_use(kind, name)
                            })
                        }),
                        Err(_) => Err(Unreadable::Syntax("the response is not UTF-8".into())),
                    };
                    if let Ok(Some(text)) = rewritten.as_ref().map(|r| r.text.as_ref()) {
                        host.replace_response_body(body_size, text.as_bytes());
                    }
                    Some(rewritten)
                }
            }
            Phase::Sse(filter) => {
                let chunk = host.response_body(body_size).unwrap_or_default();
                let fed = http_request(held, |req| {
                    let mut judge = route.list_judge(req);
                    filter.feed(&chunk, end_of_stream, limit, requests, &mut |kind, name| {
                        judge.may_use(kind, name)
                    })
                });
                match fed {
                    Ok(out) => {
                        if out != chunk {
                            host.replace_response_body(body_size, &out);
                        }
                        end_of_stream.then(|| Ok(std::mem::take(&mut filter.done)))
                    }
                    Err(why) => Some(Err(why)),
                }
            }
        };
        match done {
            Some(Ok(rewrite)) => {
                self.finish(host, Ok(rewrite));
                return Action::Continue;
            }
            Some(Err(why)) => {
                let sse = matches!(phase, Phase::Sse(_));
                *phase = Phase::Refused { why, sse };
            }
            None => {}
        }
        // Refused: nothing of the response goes on; at its end, the error in its place.
        let Phase::Refused { why, sse } = phase else {
            return Action::Continue;
        };
        if !end_of_stream {
            host.replace_response_body(body_size, b"");
            return Action::Continue;
        }
        let error = list_filter::error_reply(requests.first_id(), why);
        let body = if *sse {
            format!("event: message\ndata: {error}\n\n")
        } else {
            error
        };
        host.replace_response_body(body_size, body.as_bytes());
        let why = why.clone();
        self.finish(host, Err(why));
        Action::Continue
    }

    /// Trailers end the response without an end-of-stream body callback: end it here.
    pub fn on_response_trailers(&mut self, host: &mut impl Host) -> Action {
        let State::Listing(listing) = &self.state else {
            return Action::Continue;
        };
        let buffered = match &listing.phase {
            Phase::Json { buffered } => *buffered,
            Phase::Headers => return Action::Continue,
            Phase::Sse(_) | Phase::Refused { .. } => 0,
        };
        self.on_response_body(host, buffered, true)
    }

    /// Counts and records what filtering did, once the response is through.
    fn finish(&mut self, host: &mut impl Host, outcome: Result<list_filter::Rewrite, Unreadable>) {
        let State::Listing(listing) = std::mem::replace(&mut self.state, State::Done) else {
            return;
        };
        let Listing { held, summary, .. } = *listing;
        let (method, path) = (
            held.headers.get(headers::METHOD),
            held.headers.get(headers::PATH),
        );
        match outcome {
            Ok(done) => {
                host.count_by(Counter::ListFiltered, done.lists as u64);
                host.count_by(Counter::ListEntriesRemoved, done.removed as u64);
                super::record(
                    host,
                    method,
                    path,
                    &format!(
                        "{summary} list=filtered removed={}/{}",
                        done.removed, done.entries
                    ),
                );
            }
            Err(why) => {
                host.count(Counter::ListUnreadable);
                super::record(host, method, path, &format!("{summary} list=refused"));
                host.log(
                    LogLevel::Warn,
                    &format!("toolgate: list response refused, replaced by an error: {why}"),
                );
            }
        }
    }
}
