//! The shadow decision (docs/semantics.md §6a): on a route with dry-run policies, the walk with them
//! as if they were enforced, made once the enforced outcome is known and before it is carried out;
//! it reuses the enforced walk's authorizer answers and asks only the calls that walk did not make.

use std::rc::Rc;

use super::request::{prepare_call, step, with_request};
use super::{Action, Context, Counter, Finish, Held, Host, Loaded, Request, Shadow};
use crate::authz;
use crate::eval::{DenyReason, Level, Step, Verdict};

impl Request {
    /// The enforced outcome is known: on a route with dry-run policies, the shadow decision first
    /// (docs/semantics.md §6a), then the outcome is carried out.
    pub(super) fn decided(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        mut held: Box<Held>,
        finish: Finish,
        context: Context,
    ) -> Action {
        if loaded
            .evaluator
            .shadow_route(held.cluster.as_deref())
            .is_none()
        {
            return self.carry_out(host, loaded, held, finish, "", context);
        }
        held.shadow = Some(Box::new(Shadow {
            authorized: 0,
            calls: Vec::new(),
            finish,
        }));
        self.shadow_step(host, loaded, held, context)
    }

    /// Walks the shadow route as far as possible: to the shadow decision (then the enforced outcome
    /// is carried out), or to an authorizer call whose answer the enforced walk did not get.
    pub(super) fn shadow_step(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        mut held: Box<Held>,
        context: Context,
    ) -> Action {
        let ev = &loaded.evaluator;
        let timeout_ms = ev.plan().settings.authz_timeout_ms;
        let Some(route) = ev.shadow_route(held.cluster.as_deref()) else {
            return Action::Continue;
        };
        enum Next<'p> {
            Decided(bool, String),
            Reused(Level, Option<usize>),
            Call(authz::Prepared<'p>, Level, Option<usize>),
        }
        loop {
            let Some(shadow) = held.shadow.as_deref() else {
                return Action::Continue;
            };
            let authorized = shadow.authorized;
            let (next, read) = with_request(
                &held,
                loaded,
                |req, body| match step(&mut *host, &route, req, body, authorized) {
                    Step::Decided(d) => Next::Decided(d.allowed(), d.summary()),
                    Step::Authorize(call) => {
                        // The enforced walk's answer to the same call (the n-th for this level and message), if it got one.
                        let key = (call.level, call.message);
                        let nth = shadow.calls.iter().filter(|c| **c == key).count();
                        let known = held
                            .answers
                            .iter()
                            .filter(|(l, m, _)| (*l, *m) == key)
                            .nth(nth)
                            .map(|(_, _, f)| *f);
                        match known {
                            Some(None) => Next::Reused(call.level, call.message),
                            Some(Some(failure)) => {
                                let mut d = call.decision;
                                d.verdict = Verdict::Deny(DenyReason::ExternalAuth {
                                    level: call.level,
                                    policy: call.policy.to_string(),
                                    failure,
                                });
                                Next::Decided(false, d.summary())
                            }
                            None => Next::Call(
                                prepare_call(call.authorizer, &held, req, body, call.message),
                                call.level,
                                call.message,
                            ),
                        }
                    }
                },
                |next| matches!(next, Next::Call(..)),
            );
            if read.is_some() {
                held.read = read;
            }
            match next {
                Next::Reused(level, message) => {
                    if let Some(shadow) = held.shadow.as_deref_mut() {
                        shadow.calls.push((level, message));
                        shadow.authorized += 1;
                    }
                }
                Next::Call(prepared, level, message) => {
                    return self
                        .start_call(host, held, &prepared, level, message, true, timeout_ms);
                }
                Next::Decided(allowed, summary) => {
                    return self.shadow_decided(host, loaded, held, allowed, &summary, context)
                }
            }
        }
    }

    /// The shadow decision is made: when it differs from the enforced one, the access log says so
    /// and a counter moves; then the enforced outcome is carried out.
    pub(super) fn shadow_decided(
        &mut self,
        host: &mut impl Host,
        loaded: &Rc<Loaded>,
        mut held: Box<Held>,
        allowed: bool,
        summary: &str,
        context: Context,
    ) -> Action {
        let Some(shadow) = held.shadow.take() else {
            return Action::Continue;
        };
        let enforced_allowed = matches!(shadow.finish, Finish::Allow { .. });
        let mut suffix = String::new();
        if allowed != enforced_allowed {
            host.count(if allowed {
                Counter::ShadowAllow
            } else {
                Counter::ShadowDeny
            });
            let dry_run = loaded
                .evaluator
                .shadow_route(held.cluster.as_deref())
                .map(|r| r.dry_run_policies())
                .unwrap_or_default();
            suffix = format!(" shadow={summary} dry-run={}", dry_run.join(","));
        }
        self.carry_out(host, loaded, held, shadow.finish, &suffix, context)
    }
}
