//! A route's policy levels, and deciding a request on them step by step up to authorizer calls
//! (docs/semantics.md §3, §4): the walk the filter runs, and that `explain` records.

use super::decision::{Decision, DenyReason, Level, RuleRef, Verdict, MAX_AUTHZ_CALLS};
use super::index::{Candidates, IndexTrace, LevelIndex, Subject};
use super::mcp_headers::{check_mcp_headers, HeaderTrace};
use super::{host_matches_any, BodyInput, HttpRequest};
use crate::list_filter::ListKind;
use crate::log_safe::{Quoted, ShownText};
use crate::mcp::McpMessage;
use crate::plan::{AuthorizerPlan, CompiledPlan, LevelPlan, RulePlan};

/// The policy levels that apply to one route, in evaluation order.
#[derive(Clone, Copy, Debug)]
pub struct Route<'e> {
    pub(super) levels: [Option<&'e LevelIndex>; 2],
    /// The plan and the backend level's cluster, for the record (the index keeps no matcher it
    /// does not decide with).
    pub(super) plan: &'e CompiledPlan,
    pub(super) cluster: Option<&'e str>,
    /// The levels include the dry-run policies (a shadow route).
    pub(super) dry_run: bool,
    /// The route is decided by deny-by-default (no policy applies): the level's plan.
    pub(super) default_deny: Option<&'e LevelPlan>,
}

impl<'e> Route<'e> {
    /// The authorizer of `level`'s ExternalAuth policy on this route, if it has one (the one a
    /// [`Step::Authorize`] at that level calls).
    pub fn authorizer(&self, level: Level) -> Option<&'e AuthorizerPlan> {
        self.levels
            .iter()
            .flatten()
            .find(|l| l.level == level)?
            .external_auth
            .as_ref()
            .map(|ea| &ea.authorizer)
    }

    /// False when no policy applies: the filter lets the request through without reading it (a
    /// default-deny route is under policy).
    pub fn under_policy(&self) -> bool {
        self.levels.iter().any(Option::is_some)
    }

    /// Whether no policy applies and the plan denies by default (docs/semantics.md §6a).
    pub fn is_default_deny(&self) -> bool {
        self.default_deny.is_some()
    }

    /// Whether `req` is for a host the plan's default deny lets through (`defaultDenyExceptHosts`).
    fn default_deny_excepts(&self, req: &HttpRequest<'_>) -> bool {
        let settings = &self.plan.settings;
        let by_host = !settings.default_deny_except_hosts.is_empty()
            && host_matches_any(&settings.default_deny_except_hosts, req.host());
        let by_server_name = req
            .server_name
            .is_some_and(|sni| host_matches_any(&settings.default_deny_except_server_names, sni));
        by_host || by_server_name
    }

    /// Whether the route's levels include dry-run policies (a [`Evaluator::shadow_route`]).
    pub fn is_shadow(&self) -> bool {
        self.dry_run
    }

    /// The dry-run policies of the route's levels (`namespace/name`), in order (none on a route
    /// that is not a shadow route).
    pub fn dry_run_policies(&self) -> Vec<&'e str> {
        if !self.dry_run {
            return Vec::new();
        }
        let plans = [
            Some(&self.plan.gateway),
            self.cluster.and_then(|c| self.plan.backends.get(c)),
        ];
        plans
            .into_iter()
            .zip(self.levels)
            .filter_map(|(plan, index)| index.and(plan))
            .flat_map(|l| {
                l.external_auth
                    .iter()
                    .filter(|ea| ea.dry_run)
                    .map(|ea| ea.policy.as_str())
                    .chain(
                        l.allow
                            .iter()
                            .filter(|p| p.dry_run)
                            .map(|p| p.name.as_str()),
                    )
            })
            .fold(Vec::new(), |mut names, name| {
                // A policy targeting both levels is named once.
                if !names.contains(&name) {
                    names.push(name);
                }
                names
            })
    }

    /// The plans of the rules of the level in `slot` (0 gateway, 1 backend), in the order its index
    /// holds them (for the record: the texts the index does not keep).
    fn rule_plans(&self, slot: usize) -> impl Iterator<Item = &'e RulePlan> {
        let level = match (slot, self.default_deny) {
            (0, Some(dd)) => Some(dd),
            (0, None) => Some(&self.plan.gateway),
            _ => self.cluster.and_then(|c| self.plan.backends.get(c)),
        };
        let dry_run = self.dry_run;
        // The index holds the enforced policies, or all of them on a shadow route.
        level
            .into_iter()
            .flat_map(|l| &l.allow)
            .filter(move |p| dry_run || !p.dry_run)
            .flat_map(|p| &p.rules)
    }

    /// Decides a request (docs/semantics.md §3, §4) as if every external authorizer allowed it: the
    /// whole decision for a route without ExternalAuth. The filter uses [`Route::step`].
    pub fn decide(&self, req: &HttpRequest<'_>, body: BodyInput<'_, '_>) -> Decision<'e> {
        let mut authorized = 0;
        loop {
            match self.step(req, body, authorized) {
                Step::Decided(decision) => return decision,
                Step::Authorize(_) => authorized += 1,
            }
        }
    }

    /// Decides a request (docs/semantics.md §3, §4) up to the next authorizer call it needs. `authorized`: how
    /// many authorizer calls for this request have allowed so far; after the call a
    /// [`Step::Authorize`] asks for allowed, step again with one more (the walk is the same each time,
    /// so each call is asked for once). For a batch every element must be allowed; headers are
    /// checked for every message before any policy (docs/semantics.md §5).
    pub fn step(
        &self,
        req: &HttpRequest<'_>,
        body: BodyInput<'_, '_>,
        authorized: u32,
    ) -> Step<'e> {
        self.walk(req, body, authorized, &mut NoTrace)
    }

    pub(super) fn walk<T: Trace>(
        &self,
        req: &HttpRequest<'_>,
        body: BodyInput<'_, '_>,
        authorized: u32,
        trace: &mut T,
    ) -> Step<'e> {
        trace.walk(self, body);
        let step = self.walk_to_step(req, body, authorized, trace);
        trace.end(&step);
        step
    }

    fn walk_to_step<T: Trace>(
        &self,
        req: &HttpRequest<'_>,
        body: BodyInput<'_, '_>,
        authorized: u32,
        trace: &mut T,
    ) -> Step<'e> {
        let mut walk = Walk {
            decision: Decision::allow(self.under_policy()),
            authorized,
            calls: 0,
        };
        if !walk.decision.under_policy {
            return Step::Decided(walk.decision);
        }
        // docs/semantics.md §6a: another listener's request on a shared port passes a default-deny route.
        if self.default_deny.is_some() && self.default_deny_excepts(req) {
            trace.excepted_host();
            return Step::Decided(Decision::allow(false));
        }
        match body {
            BodyInput::Mcp(mcp) => {
                let batch = mcp.is_batch();
                for (i, msg) in mcp.messages().iter().enumerate() {
                    if let Err(header) = check_mcp_headers(req, msg, batch.then_some(i), trace) {
                        walk.decision.verdict =
                            Verdict::Deny(DenyReason::McpHeaderMismatch { header });
                        walk.decision.message = batch.then_some(i);
                        return Step::Decided(walk.decision);
                    }
                }
                for (i, msg) in mcp.messages().iter().enumerate() {
                    walk.decision.message = batch.then_some(i);
                    let subject = Subject::Message(msg);
                    trace.subject(walk.decision.message, &subject, None);
                    if let Some(step) = self.decide_one(req, &subject, Some(i), &mut walk, trace) {
                        return step;
                    }
                    // docs/semantics.md §3: `subscriptions/listen` is judged as a set: its list-change parts are base
                    // methods (above), and each resource URI must be allowed as a `resources/subscribe`.
                    for subscribe in msg.listen_subscribes() {
                        let subject = Subject::Message(&subscribe);
                        trace.subject(walk.decision.message, &subject, subscribe.uri.as_deref());
                        if let Some(step) =
                            self.decide_one(req, &subject, Some(i), &mut walk, trace)
                        {
                            return step;
                        }
                    }
                }
                walk.decision.message = None;
            }
            BodyInput::None | BodyInput::NotMcp(_) => {
                let subject = if matches!(body, BodyInput::None) && is_base_http(req) {
                    Subject::BaseHttp
                } else {
                    Subject::Http
                };
                trace.subject(None, &subject, None);
                if let Some(step) = self.decide_one(req, &subject, None, &mut walk, trace) {
                    if let (BodyInput::NotMcp(e), Step::Decided(d)) = (body, &step) {
                        let mut d = d.clone();
                        d.not_mcp = (!d.allowed()).then(|| e.to_string());
                        return Step::Decided(d);
                    }
                    return step;
                }
            }
        }
        Step::Decided(walk.decision)
    }

    /// Runs both levels for one message (`message`: its index in the body). None when both allow;
    /// otherwise the denial, or the authorizer call to make next.
    fn decide_one<T: Trace>(
        &self,
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        message: Option<usize>,
        walk: &mut Walk<'e>,
        trace: &mut T,
    ) -> Option<Step<'e>> {
        for (slot, level) in self.levels.iter().enumerate() {
            let Some(level) = level else { continue };
            if let Some(ea) = &level.external_auth {
                let applies = ea.index.first_match(req, subject, &mut NoTrace).is_some();
                trace.external_auth(level.level, &ea.policy, applies);
                if applies {
                    if walk.calls >= walk.authorized {
                        if walk.calls >= MAX_AUTHZ_CALLS {
                            walk.decision.verdict =
                                Verdict::Deny(DenyReason::TooManyAuthorizerCalls {
                                    level: level.level,
                                });
                            return Some(Step::Decided(walk.decision.clone()));
                        }
                        return Some(Step::Authorize(AuthzCall {
                            level: level.level,
                            policy: &ea.policy,
                            authorizer: &ea.authorizer,
                            message,
                            decision: walk.decision.clone(),
                        }));
                    }
                    walk.calls += 1;
                    walk.decision.authorized[slot] = Some(&ea.policy);
                }
            }
            if level.policies.is_empty() {
                continue; // only an ExternalAuth policy at this level
            }
            if T::ON {
                trace.level(level, self.rule_plans(slot));
            }
            match level.first_match(req, subject, trace) {
                Some(rule) => {
                    let r = Some(RuleRef {
                        policy: level.policy_name(rule),
                        rule: level.name(rule.name),
                    });
                    if slot == 0 {
                        walk.decision.gateway_rule = r;
                    } else {
                        walk.decision.backend_rule = r;
                    }
                }
                None => {
                    walk.decision.verdict = if self.default_deny.is_some() {
                        Verdict::Deny(DenyReason::DefaultDeny)
                    } else {
                        Verdict::Deny(DenyReason::NoRuleMatched {
                            level: level.level,
                            policies: level.policies.len(),
                            request: describe(req, subject),
                            considered: level.considered.clone(),
                        })
                    };
                    return Some(Step::Decided(walk.decision.clone()));
                }
            }
        }
        None
    }
}

impl<'e> Route<'e> {
    /// Whether the caller of `req` may use an entry of a list response (docs/semantics.md §5 list filtering): a
    /// call to it (`tools/call` or `prompts/get` by name, `resources/read` by uri) on this route
    /// matches a rule at every level. What an entry cannot tell counts as possibly allowing: an
    /// ExternalAuth policy's authorizer is not asked, and a CEL rule on `request.mcp.params`
    /// matches. The MCP header check is not made: the request's `Mcp-*` headers name the list.
    pub fn may_use(&self, req: &HttpRequest<'_>, kind: ListKind, entry: &str) -> bool {
        self.list_judge(req).may_use(kind, entry)
    }

    /// [`Route::may_use`] for every entry of the list responses to one request: the caller's and
    /// each call method's part of the levels' indexes is looked up once, not once per entry.
    pub fn list_judge<'j>(&'j self, req: &'j HttpRequest<'j>) -> ListJudge<'j, 'e> {
        ListJudge {
            route: self,
            req,
            resolved: [None; 3],
        }
    }
}

/// [`Route::list_judge`]: the route and request whose list entries are judged, and for each list
/// kind met so far the levels' candidates of its call method.
pub struct ListJudge<'j, 'e> {
    route: &'j Route<'e>,
    req: &'j HttpRequest<'j>,
    resolved: [Option<[Option<Candidates<'e>>; 2]>; 3],
}

impl ListJudge<'_, '_> {
    /// [`Route::may_use`].
    pub fn may_use(&mut self, kind: ListKind, entry: &str) -> bool {
        let entry = Some(std::borrow::Cow::Borrowed(entry));
        let call = McpMessage {
            method: Some(std::borrow::Cow::Borrowed(kind.call_method())),
            id: None,
            name: if kind == ListKind::Resources {
                None
            } else {
                entry.clone()
            },
            uri: if kind == ListKind::Resources {
                entry
            } else {
                None
            },
            subscriptions: Vec::new(),
            protocol_version: None,
            params: None,
        };
        let subject = Subject::Listed(&call);
        let (route, req) = (self.route, self.req);
        let slot = match kind {
            ListKind::Tools => 0,
            ListKind::Prompts => 1,
            ListKind::Resources => 2,
        };
        let resolved = self.resolved.get_mut(slot).map(|r| {
            *r.get_or_insert_with(|| {
                route
                    .levels
                    .map(|level| level.map(|l| l.candidates(req, Some(kind.call_method()))))
            })
        });
        let Some(resolved) = resolved else {
            return false;
        };
        route
            .levels
            .iter()
            .zip(resolved)
            .all(|(level, found)| match (level, found) {
                (None, _) => true,
                (Some(level), _) if level.policies.is_empty() => true,
                (Some(level), Some(found)) => level
                    .first_match_in(&found, req, &subject, &mut NoTrace)
                    .is_some(),
                (Some(_), None) => false,
            })
    }
}

/// What a walk tells whoever records it ([`super::trace::Record`]; the filter's [`NoTrace`] records
/// nothing). Every method does nothing by default. The candidates' lookups and the header check,
/// below the walk, report through the supertraits.
pub(super) trait Trace: IndexTrace + HeaderTrace {
    fn walk(&mut self, _route: &Route<'_>, _body: BodyInput<'_, '_>) {}
    fn excepted_host(&mut self) {}
    fn subject(
        &mut self,
        _message: Option<usize>,
        _subject: &Subject<'_, '_>,
        _listened: Option<&str>,
    ) {
    }
    fn external_auth(&mut self, _level: Level, _policy: &str, _applies: bool) {}
    fn level<'r>(&mut self, _index: &LevelIndex, _rules: impl Iterator<Item = &'r RulePlan>) {}
    fn end(&mut self, _step: &Step<'_>) {}
}

/// The filter's trace: records nothing.
pub(super) struct NoTrace;

impl IndexTrace for NoTrace {
    const ON: bool = false;
}

impl HeaderTrace for NoTrace {}

impl Trace for NoTrace {}

/// What [`Route::step`] found.
#[derive(Clone, Debug)]
pub enum Step<'e> {
    Decided(Decision<'e>),
    /// Ask an authorizer; if it allows, step again with one more authorized call, otherwise deny.
    Authorize(AuthzCall<'e>),
}

/// An authorizer call a request needs.
#[derive(Clone, Debug)]
pub struct AuthzCall<'e> {
    pub level: Level,
    /// The ExternalAuth policy, `namespace/name`.
    pub policy: &'e str,
    pub authorizer: &'e AuthorizerPlan,
    /// The message of the body the call is about (None: a request without a readable MCP body).
    pub message: Option<usize>,
    /// The decision so far (the rules and authorizers that allowed earlier levels and messages), to
    /// complete with the authorizer's answer when it denies.
    pub decision: Decision<'e>,
}

/// The state of one walk of [`Route::step`].
struct Walk<'e> {
    decision: Decision<'e>,
    /// Authorizer calls that allowed, from earlier steps.
    authorized: u32,
    /// Authorizer calls met in this walk.
    calls: u32,
}

/// GET (the SSE stream) and DELETE with `mcp-session-id` (session close) are base-protocol requests.
fn is_base_http(req: &HttpRequest<'_>) -> bool {
    req.method == "GET" || (req.method == "DELETE" && req.header("mcp-session-id").is_some())
}

/// What a denial says was asked: the MCP method and the name or URI it is about, or the HTTP
/// method and path; what the client chose quoted (log_safe.rs) unless it is a plain method name.
fn describe(req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> ShownText {
    use std::fmt::Write;
    let mut out = ShownText::default();
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= crate::log_safe::MAX_SHOWN
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b))
    };
    // Writing to a ShownText never fails (it cuts what does not fit).
    let _ = match subject {
        Subject::Message(m) | Subject::Listed(m) => {
            let _ = match m.method.as_deref() {
                Some(method) if plain(method) => out.write_str(method),
                Some(method) => write!(out, "{}", Quoted(method)),
                None => out.write_str("a JSON-RPC response"),
            };
            match m.name.as_deref().or(m.uri.as_deref()) {
                Some(about) => write!(out, " {}", Quoted(about)),
                None => Ok(()),
            }
        }
        Subject::BaseHttp | Subject::Http if plain(req.method) => {
            write!(out, "{} {}", req.method, Quoted(req.url_path()))
        }
        Subject::BaseHttp | Subject::Http => {
            write!(out, "{} {}", Quoted(req.method), Quoted(req.url_path()))
        }
    };
    out
}
