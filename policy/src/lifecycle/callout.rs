//! Authorizer calls (docs/semantics.md §3): reading an answer, then going on to the next step or answering the
//! denial as the authorizer's status says.

use super::{
    deny_counter, with_request, CallAnswer, Context, Counter, Finish, Host, Request, State,
};
use crate::authz::{self, Answer};
use crate::eval::{AuthzCall, AuthzFailure, BodyInput, Decision, DenyReason, Step, Verdict};
use crate::response;

/// How much earlier than the plan's timeout a failed call still counts as timed out (see
/// `on_call_answer`).
const TIMEOUT_SLACK_MS: u64 = 20;

impl Request {
    /// The answer to the call with `token`. An answer the lifecycle is not waiting for (another
    /// token, or after the decision) is ignored. Long: one pass over the answer's outcomes (allowed,
    /// denied, failed, timed out) for the request, the batch element and the shadow walk, each of
    /// which moves the same held state on.
    pub fn on_call_answer(&mut self, host: &mut impl Host, token: u32, answer: CallAnswer) {
        let State::Calling(_, pending) = &self.state else {
            return;
        };
        if pending.token != token {
            return;
        }
        let State::Calling(mut held, pending) = std::mem::replace(&mut self.state, State::Done)
        else {
            return;
        };
        let Some(loaded) = self.loaded.clone() else {
            return;
        };
        let ev = &loaded.evaluator;
        let timeout = u64::from(ev.plan().settings.authz_timeout_ms);
        // Envoy ends a call at its timeout by its own (coarse, cached) clock: measured against ours the
        // call can end a few ms "early" (observed with Envoy 1.40), hence the slack.
        let timed_out =
            || host.now_ms().saturating_sub(pending.started_ms) + TIMEOUT_SLACK_MS >= timeout;
        // The answer is read by the authorizer of the level that called. An allow needs nothing
        // else: the request goes on to its next step (which rebuilds the body's read from what the
        // first step kept). Anything else is answered from the call, re-derived (the walk is
        // deterministic): the decision so far.
        let debug_reasons = ev.plan().settings.debug_reasons;
        if pending.shadow {
            // docs/semantics.md §6a: a dry-run authorizer's answer decides the shadow decision only
            // (its header changes are not made).
            let Some(route) = ev.shadow_route(held.cluster.as_deref()) else {
                return;
            };
            let read = route
                .authorizer(pending.level)
                .map_or(Answer::Fail(AuthzFailure::Malformed), |a| {
                    authz::read_answer(a, answer, timed_out)
                });
            host.count(authz_counter(&read));
            match read {
                Answer::Allow(_) => {
                    if let Some(shadow) = held.shadow.as_deref_mut() {
                        shadow.calls.push((pending.level, pending.message));
                        shadow.authorized += 1;
                    }
                    self.shadow_step(host, &loaded, held, Context::Answer);
                }
                denied => {
                    let authorized = held.shadow.as_deref().map_or(0, |s| s.authorized);
                    let summary = with_request(
                        &held,
                        &loaded,
                        |req, body| match route.step(req, body, authorized) {
                            Step::Authorize(call) => denial_of(call, denied, body, false).summary,
                            Step::Decided(d) => d.summary(), // unreachable: the step that made the call makes it again
                        },
                        |_| false,
                    )
                    .0;
                    self.shadow_decided(host, &loaded, held, false, &summary, Context::Answer);
                }
            }
            return;
        }
        let read = ev
            .route(held.cluster.as_deref())
            .authorizer(pending.level)
            .map_or(Answer::Fail(AuthzFailure::Malformed), |a| {
                authz::read_answer(a, answer, timed_out)
            });
        if ev.has_dry_run() {
            // For the shadow walk, which asks the same calls (docs/semantics.md §6a).
            let failure = match &read {
                Answer::Allow(_) => None,
                Answer::Fail(f) => Some(*f),
                Answer::Deny(d) => Some(AuthzFailure::Denied {
                    status: if d.status == 0 { 403 } else { d.status },
                }),
            };
            held.answers.push((pending.level, pending.message, failure));
        }
        let outcome = match read {
            Answer::Allow(edits) => Ok(edits),
            denied => {
                with_request(
                    &held,
                    &loaded,
                    |req, body| match ev.route(held.cluster.as_deref()).step(
                        req,
                        body,
                        held.authorized,
                    ) {
                        Step::Authorize(call) => Err(denial_of(call, denied, body, debug_reasons)),
                        // Unreachable: the step that made the call makes it again.
                        Step::Decided(d) => Err(Outcome::decided(&d)),
                    },
                    |_| false,
                )
                .0
            }
        };
        match outcome {
            Ok(edits) => {
                host.count(Counter::AuthzAllow);
                for edit in &edits {
                    match edit {
                        authz::HeaderEdit::Set(name, value) => host.set_request_header(name, value),
                        authz::HeaderEdit::Append(name, value) => {
                            host.add_request_header(name, value)
                        }
                        authz::HeaderEdit::Remove(name) => host.remove_request_header(name),
                    }
                }
                held.authorized += 1;
                self.advance(host, &loaded, held, Context::Answer);
            }
            Err(outcome) => {
                let failed = match outcome.failure {
                    Some(AuthzFailure::Denied { .. }) => Counter::AuthzDeny,
                    Some(AuthzFailure::Timeout) => Counter::AuthzTimeout,
                    Some(AuthzFailure::Unavailable) => Counter::AuthzUnavailable,
                    Some(AuthzFailure::Malformed) | None => Counter::AuthzMalformed,
                };
                let finish = Finish::Deny {
                    summary: outcome.summary,
                    counters: vec![failed, outcome.counter],
                    status: outcome.status,
                    headers: outcome.reply_headers,
                    body: outcome.body,
                };
                self.decided(host, &loaded, held, finish, Context::Answer);
            }
        }
    }
}

/// The counter of an authorizer's answer.
fn authz_counter(answer: &Answer) -> Counter {
    match answer {
        Answer::Allow(_) => Counter::AuthzAllow,
        Answer::Deny(_) => Counter::AuthzDeny,
        Answer::Fail(AuthzFailure::Timeout) => Counter::AuthzTimeout,
        Answer::Fail(AuthzFailure::Unavailable) => Counter::AuthzUnavailable,
        Answer::Fail(AuthzFailure::Malformed | AuthzFailure::Denied { .. }) => {
            Counter::AuthzMalformed
        }
    }
}

/// How a denial by (or a failure of) an authorizer is answered.
struct Outcome {
    summary: String,
    counter: Counter,
    failure: Option<AuthzFailure>,
    status: u32,
    reply_headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Outcome {
    fn decided(d: &Decision<'_>) -> Self {
        let reply = response::denial(BodyInput::None, d, false);
        Outcome {
            summary: d.summary(),
            counter: deny_counter(d),
            failure: None,
            status: reply.status,
            reply_headers: vec![("content-type".into(), "application/json".into())],
            body: reply.body.into_bytes(),
        }
    }
}

/// The answer to a request an authorizer did not allow (docs/semantics.md §3): a 403 (or a gRPC denial without
/// a status), a timeout, a failure or an unreadable answer get the docs/semantics.md §5 denial, nothing of the
/// authorizer's leaking; a denial with another status (e.g. 401 with `WWW-Authenticate`) is
/// passed to the caller as the authorizer gave it.
fn denial_of(
    call: AuthzCall<'_>,
    answer: Answer,
    body: BodyInput<'_, '_>,
    debug_reasons: bool,
) -> Outcome {
    let (failure, passed) = match answer {
        Answer::Allow(_) => (AuthzFailure::Malformed, None), // not called with an allow
        Answer::Fail(f) => (f, None),
        Answer::Deny(denied) => {
            let status = if denied.status == 0 {
                403
            } else {
                denied.status
            };
            (
                AuthzFailure::Denied { status },
                (status != 403).then_some(denied),
            )
        }
    };
    let mut decision = call.decision;
    decision.verdict = Verdict::Deny(DenyReason::ExternalAuth {
        level: call.level,
        policy: call.policy.to_string(),
        failure,
    });
    let summary = decision.summary();
    let counter = deny_counter(&decision);
    match passed {
        Some(denied) => Outcome {
            summary,
            counter,
            failure: Some(failure),
            status: denied.status,
            reply_headers: denied.headers,
            body: denied.body,
        },
        None => {
            let reply = response::denial(body, &decision, debug_reasons);
            Outcome {
                summary,
                counter,
                failure: Some(failure),
                status: reply.status,
                reply_headers: vec![("content-type".into(), "application/json".into())],
                body: reply.body.into_bytes(),
            }
        }
    }
}
