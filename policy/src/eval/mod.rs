//! The evaluator: a [`CompiledPlan`] validated and indexed for deciding requests (docs/semantics.md §3).
//!
//! Loading builds, per level, candidate lists keyed by what a request can be looked up by (MCP
//! method, `params.name`/`params.uri`, caller principal). Deciding a message therefore costs a few
//! hash lookups plus the rules that really are candidates, whatever the number of policies, and
//! allocates nothing in proportion to the plan.
//!
//! Here: loading, the levels in force for a route, and deciding step by step up to authorizer calls.
//! `decision` holds what a decision yields, `index` the per-level candidate lists, `http` the
//! compiled HTTP matchers, `explain` the slow path behind `toolgate explain`.

mod decision;
mod explain;
mod http;
mod index;

/// Compiles an RE2 expression that must match the whole input (policy path and header matchers).
pub use crate::re2::full_match_regex;
pub use decision::{AuthzFailure, Decision, DenyReason, Level, RuleRef, Verdict};
pub use explain::{LevelExplanation, MessageExplanation, RuleExplanation};
pub use http::{host_suffix_covers, path_prefix_matches};
use index::LevelIndex;

use crate::cel_rule::Uses;
use crate::list_filter::ListKind;
use crate::mcp::{McpBody, McpMessage, NotMcp};
use crate::plan::{json_content_hash, AuthorizerPlan, CompiledPlan, LevelPlan, McpMatch, PolicyPlan, RulePlan, PLAN_VERSION};
use crate::str_map::StrMap;

/// Largest body limit a plan may ask for; the filter buffers the whole body in Envoy's memory.
pub const MAX_BODY_LIMIT: u32 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("plan is not valid JSON for this filter: {0}")]
    Syntax(String),
    #[error("plan version {found} is not supported (this filter reads version {PLAN_VERSION})")]
    Version { found: u32 },
    #[error("plan hash {declared} does not match its content ({actual})")]
    Hash { declared: String, actual: String },
    #[error("settings.maxBodyBytes {0} is out of range 1..={MAX_BODY_LIMIT}")]
    BodyLimit(u32),
    #[error("{level} level, policy {policy:?}: {problem}")]
    Policy { level: String, policy: String, problem: String },
    #[error(
        "settings.listFiltering is on, but this module was built without the response callbacks \
             (toolgate_filter_no_list_filtering.wasm): render with --list-filtering off, or load toolgate_filter.wasm"
    )]
    ListFilteringUnsupported,
}

/// HTTP attributes of a request, as the filter reads them from Envoy.
#[derive(Clone, Copy, Debug)]
pub struct HttpRequest<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// Path as received, query included; matchers see it without the query.
    pub path: &'a str,
    /// `:authority` as received (may carry a port).
    pub authority: &'a str,
    /// Port of the listener the request arrived on.
    pub port: u16,
    /// Request headers, lower-case names (borrowed: the filter points into the host's header block).
    pub headers: &'a [(&'a str, &'a str)],
    /// The caller's SPIFFE ID from the verified client certificate, if any.
    pub principal: Option<&'a str>,
    /// The JWT Envoy's `jwt_authn` verified, if any (docs/semantics.md §6b; read only when a CEL
    /// rule reads `request.auth` or an authorizer is called).
    pub auth: Option<&'a crate::jwt::Auth>,
    /// Wall-clock time of the request, milliseconds since the Unix epoch (0 when not read: only CEL
    /// rules on `request.time` need it).
    pub time_ms: u64,
}

impl<'a> HttpRequest<'a> {
    pub fn header(&self, lower_name: &str) -> Option<&'a str> {
        self.headers.iter().find(|(n, _)| *n == lower_name).map(|(_, v)| *v)
    }
    fn header_values(&self, lower_name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| *n == lower_name).map(|(_, v)| *v)
    }
    fn url_path(&self) -> &'a str {
        self.path.split_once('?').map_or(self.path, |(p, _)| p)
    }
    fn host(&self) -> &'a str {
        let a = self.authority;
        if let Some(rest) = a.strip_prefix('[') {
            // IPv6 literal: [::1]:8080
            return rest.split_once(']').map_or(a, |(h, _)| h);
        }
        a.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(a, |(h, _)| h)
    }
}

/// What the filter learned from the body.
#[derive(Clone, Copy)]
pub enum BodyInput<'b, 'a> {
    /// Not a JSON POST: classified by HTTP attributes only.
    None,
    /// A JSON POST whose body could not be read as MCP (or is encoded): only rules without MCP
    /// constraints can allow it.
    NotMcp(&'b NotMcp),
    Mcp(&'b McpBody<'a>),
}

/// A plan ready to decide requests.
#[derive(Debug)]
pub struct Evaluator {
    plan: CompiledPlan,
    /// The levels as enforced (without dry-run policies).
    gateway: LevelIndex,
    /// By cluster.
    backends: StrMap<LevelIndex>,
    /// docs/semantics.md §6a: the levels that have dry-run policies, with them, as if they were
    /// enforced (the shadow decision). None without dry-run policies: nothing to do per request.
    shadow: Option<Box<ShadowLevels>>,
    /// docs/semantics.md §6a deny by default (`settings.defaultDeny`): the level in force on a route
    /// where no enforced policy applies, and the plan it was built from (for `explain`).
    default_deny: Option<Box<(LevelPlan, LevelIndex)>>,
}

/// The levels that have dry-run policies, indexed with them.
#[derive(Debug)]
struct ShadowLevels {
    /// None when the gateway level has no dry-run policy (the shadow uses the enforced one).
    gateway: Option<LevelIndex>,
    /// By cluster, only the backend levels with a dry-run policy.
    backends: StrMap<LevelIndex>,
}

/// The name of the policy a default-deny route is decided by, in summaries and `explain`.
pub const DEFAULT_DENY_POLICY: &str = "(no policy: default deny)";

/// docs/semantics.md §6a: on a default-deny route only the base protocol passes: one rule that matches
/// the base protocol's messages and its GET and DELETE, nothing else.
fn default_deny_level() -> LevelPlan {
    let rule = RulePlan {
        name: "(base protocol)".into(),
        mcp: Some(McpMatch { base_protocol: true, methods: Vec::new() }),
        ..RulePlan::default()
    };
    LevelPlan {
        external_auth: None,
        allow: vec![PolicyPlan { name: DEFAULT_DENY_POLICY.into(), rules: vec![rule], dry_run: false }],
    }
}

impl Evaluator {
    /// Parses and validates a plan (the filter's plugin configuration).
    pub fn load(json: &[u8]) -> Result<Self, PlanError> {
        // serde_json checks UTF-8 string by string when reading bytes; checking the whole text at
        // once is cheaper. Invalid UTF-8 still gets serde_json's own error, from `from_slice`.
        let parsed = match std::str::from_utf8(json) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(json),
        };
        let plan: CompiledPlan = parsed.map_err(|e| PlanError::Syntax(e.to_string()))?;
        Self::new(plan, Some(json))
    }

    pub fn from_plan(plan: CompiledPlan) -> Result<Self, PlanError> {
        Self::new(plan, None)
    }

    /// `json`: the text `plan` was parsed from, hashed as is when it is the controller's serialisation.
    fn new(plan: CompiledPlan, json: Option<&[u8]>) -> Result<Self, PlanError> {
        if plan.version != PLAN_VERSION {
            return Err(PlanError::Version { found: plan.version });
        }
        // Re-serialising the plan to hash it costs as much as parsing it: hash the text when it
        // is the serialisation the hash was made of (compact or pretty), else the re-serialisation
        // (e.g. a control plane re-formatted the JSON).
        if !plan.hash.is_empty() && json.is_none_or(|json| json_content_hash(json) != plan.hash) {
            let actual = plan.content_hash();
            if actual != plan.hash {
                return Err(PlanError::Hash { declared: plan.hash.clone(), actual });
            }
        }
        let limit = plan.settings.max_body_bytes;
        if limit == 0 || limit > MAX_BODY_LIMIT {
            return Err(PlanError::BodyLimit(limit));
        }
        // A level with dry-run policies is indexed twice: as enforced, and with them (the shadow).
        let build = |level: Level, plan: &LevelPlan| -> Result<(LevelIndex, Option<LevelIndex>), PlanError> {
            if plan.has_dry_run() {
                let shadow = LevelIndex::build(level, plan)?;
                Ok((LevelIndex::build(level, &plan.enforced())?, Some(shadow)))
            } else {
                Ok((LevelIndex::build(level, plan)?, None))
            }
        };
        let (gateway, shadow_gateway) = build(Level::Gateway, &plan.gateway)?;
        let mut backends = StrMap::with_capacity(plan.backends.len(), plan.backends.keys().map(String::len).sum());
        let mut shadow_backends = StrMap::default();
        for (cluster, level) in &plan.backends {
            let (index, shadow) = build(Level::Backend, level)?;
            // Clusters are distinct (map keys): this inserts.
            backends.get_or_insert_with(cluster, || index);
            if let Some(shadow) = shadow {
                shadow_backends.get_or_insert_with(cluster, || shadow);
            }
        }
        let shadow = (shadow_gateway.is_some() || !shadow_backends.is_empty())
            .then(|| Box::new(ShadowLevels { gateway: shadow_gateway, backends: shadow_backends }));
        for host in &plan.settings.default_deny_except_hosts {
            if let crate::plan::HostMatch::Suffix(s) = host {
                if !s.starts_with('.') {
                    return Err(PlanError::Syntax(format!("settings.defaultDenyExceptHosts: suffix {s:?} must start with '.'")));
                }
            }
        }
        let default_deny = if plan.settings.default_deny {
            let level = default_deny_level();
            let index = LevelIndex::build(Level::Gateway, &level)?;
            Some(Box::new((level, index)))
        } else {
            None
        };
        Ok(Self { plan, gateway, backends, shadow, default_deny })
    }

    /// Whether the plan has dry-run policies (docs/semantics.md §6a).
    pub fn has_dry_run(&self) -> bool {
        self.shadow.is_some()
    }

    pub fn plan(&self) -> &CompiledPlan {
        &self.plan
    }

    /// What the plan's CEL rules read of a request (nothing, without CEL rules).
    pub fn cel_uses(&self) -> Uses {
        self.backends.values().map(|l| l.cel_uses).fold(self.gateway.cel_uses, Uses::union)
    }

    /// The levels in force for a request routed to `cluster`. Where none is and the plan denies by
    /// default, the default-deny level (docs/semantics.md §6a).
    pub fn route(&self, cluster: Option<&str>) -> Route<'_> {
        let gateway = Some(&self.gateway).filter(|l| !l.is_empty());
        let backend = cluster.and_then(|c| self.backends.get_key_value(c)).filter(|(_, l)| !l.is_empty());
        let mut route = Route {
            levels: [gateway, backend.map(|(_, l)| l)],
            plan: &self.plan,
            cluster: backend.map(|(c, _)| c),
            dry_run: false,
            default_deny: None,
        };
        if let (None, None, Some(dd)) = (gateway, backend, &self.default_deny) {
            route.levels = [Some(&dd.1), None];
            route.default_deny = Some(&dd.0);
        }
        route
    }

    /// docs/semantics.md §6a: the levels of a request routed to `cluster` with the dry-run policies
    /// as if they were enforced, when a dry-run policy applies to it (None otherwise: the shadow
    /// decision is the decision). Costs one branch for a plan without dry-run policies.
    pub fn shadow_route(&self, cluster: Option<&str>) -> Option<Route<'_>> {
        let shadow = self.shadow.as_deref()?;
        let backend_shadow = cluster.and_then(|c| shadow.backends.get_key_value(c));
        if shadow.gateway.is_none() && backend_shadow.is_none() {
            return None;
        }
        let gateway = shadow.gateway.as_ref().or(Some(&self.gateway)).filter(|l| !l.is_empty());
        let backend =
            backend_shadow.or_else(|| cluster.and_then(|c| self.backends.get_key_value(c))).filter(|(_, l)| !l.is_empty());
        Some(Route {
            levels: [gateway, backend.map(|(_, l)| l)],
            plan: &self.plan,
            cluster: backend.map(|(c, _)| c),
            dry_run: true,
            default_deny: None,
        })
    }
}

/// The policy levels that apply to one route, in evaluation order.
#[derive(Clone, Copy, Debug)]
pub struct Route<'e> {
    levels: [Option<&'e LevelIndex>; 2],
    /// The plan and the backend level's cluster, for `explain` (the index keeps no matcher it
    /// does not decide with).
    plan: &'e CompiledPlan,
    cluster: Option<&'e str>,
    /// The levels include the dry-run policies (a shadow route).
    dry_run: bool,
    /// The route is decided by deny-by-default (no policy applies): the level's plan, for `explain`.
    default_deny: Option<&'e LevelPlan>,
}

impl<'e> Route<'e> {
    /// The authorizer of `level`'s ExternalAuth policy on this route, if it has one (the one a
    /// [`Step::Authorize`] at that level calls).
    pub fn authorizer(&self, level: Level) -> Option<&'e AuthorizerPlan> {
        self.levels.iter().flatten().find(|l| l.level == level)?.external_auth.as_ref().map(|ea| &ea.authorizer)
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
        let hosts = &self.plan.settings.default_deny_except_hosts;
        if hosts.is_empty() {
            return false;
        }
        let host = req.host();
        hosts.iter().any(|m| match m {
            crate::plan::HostMatch::Exact(h) => host.eq_ignore_ascii_case(h),
            crate::plan::HostMatch::Suffix(s) => host_suffix_covers(s, host),
        })
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
        let plans = [Some(&self.plan.gateway), self.cluster.and_then(|c| self.plan.backends.get(c))];
        plans
            .into_iter()
            .zip(self.levels)
            .filter_map(|(plan, index)| index.and(plan))
            .flat_map(|l| {
                l.external_auth
                    .iter()
                    .filter(|ea| ea.dry_run)
                    .map(|ea| ea.policy.as_str())
                    .chain(l.allow.iter().filter(|p| p.dry_run).map(|p| p.name.as_str()))
            })
            .fold(Vec::new(), |mut names, name| {
                // A policy targeting both levels is named once.
                if !names.contains(&name) {
                    names.push(name);
                }
                names
            })
    }

    /// Decides a request (docs/semantics.md §3, §4) as if every external authorizer allowed it: the whole decision
    /// for a route without ExternalAuth, and what `explain` shows otherwise. The filter uses
    /// [`Route::step`].
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
    pub fn step(&self, req: &HttpRequest<'_>, body: BodyInput<'_, '_>, authorized: u32) -> Step<'e> {
        let mut walk = Walk { decision: Decision::allow(self.under_policy()), authorized, calls: 0 };
        if !walk.decision.under_policy {
            return Step::Decided(walk.decision);
        }
        // docs/semantics.md §6a: another listener's request on a shared port passes a default-deny route.
        if self.default_deny.is_some() && self.default_deny_excepts(req) {
            return Step::Decided(Decision::allow(false));
        }
        match body {
            BodyInput::Mcp(mcp) => {
                let batch = mcp.is_batch();
                for (i, msg) in mcp.messages().iter().enumerate() {
                    if let Err(header) = check_mcp_headers(req, msg) {
                        walk.decision.verdict = Verdict::Deny(DenyReason::McpHeaderMismatch { header });
                        walk.decision.message = batch.then_some(i);
                        return Step::Decided(walk.decision);
                    }
                }
                for (i, msg) in mcp.messages().iter().enumerate() {
                    walk.decision.message = batch.then_some(i);
                    if let Some(step) = self.decide_one(req, &Subject::Message(msg), Some(i), &mut walk) {
                        return step;
                    }
                    // docs/semantics.md §3: `subscriptions/listen` is judged as a set: its list-change parts are base
                    // methods (above), and each resource URI must be allowed as a `resources/subscribe`.
                    for subscribe in msg.listen_subscribes() {
                        if let Some(step) = self.decide_one(req, &Subject::Message(&subscribe), Some(i), &mut walk) {
                            return step;
                        }
                    }
                }
                walk.decision.message = None;
            }
            BodyInput::None | BodyInput::NotMcp(_) => {
                let subject =
                    if matches!(body, BodyInput::None) && is_base_http(req) { Subject::BaseHttp } else { Subject::Http };
                if let Some(step) = self.decide_one(req, &subject, None, &mut walk) {
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
    fn decide_one(
        &self,
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        message: Option<usize>,
        walk: &mut Walk<'e>,
    ) -> Option<Step<'e>> {
        for (slot, level) in self.levels.iter().enumerate() {
            let Some(level) = level else { continue };
            if let Some(ea) = &level.external_auth {
                if ea.index.first_match(req, subject).is_some() {
                    if walk.calls >= walk.authorized {
                        if walk.calls >= MAX_AUTHZ_CALLS {
                            walk.decision.verdict = Verdict::Deny(DenyReason::TooManyAuthorizerCalls { level: level.level });
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
            match level.first_match(req, subject) {
                Some(rule) => {
                    let r = Some(RuleRef { policy: level.policy_name(rule), rule: level.name(rule.name) });
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
                        Verdict::Deny(DenyReason::NoRuleMatched { level: level.level, policies: level.policies.len() })
                    };
                    return Some(Step::Decided(walk.decision.clone()));
                }
            }
        }
        None
    }
}

impl Route<'_> {
    /// Whether the caller of `req` may use an entry of a list response (docs/semantics.md §5 list filtering): a
    /// call to it (`tools/call` or `prompts/get` by name, `resources/read` by uri) on this route
    /// matches a rule at every level. What an entry cannot tell counts as possibly allowing: an
    /// ExternalAuth policy's authorizer is not asked, and a CEL rule on `request.mcp.params`
    /// matches. The MCP header check is not made: the request's `Mcp-*` headers name the list.
    pub fn may_use(&self, req: &HttpRequest<'_>, kind: ListKind, entry: &str) -> bool {
        let entry = Some(std::borrow::Cow::Borrowed(entry));
        let call = McpMessage {
            method: Some(std::borrow::Cow::Borrowed(kind.call_method())),
            id: None,
            name: if kind == ListKind::Resources { None } else { entry.clone() },
            uri: if kind == ListKind::Resources { entry } else { None },
            subscriptions: Vec::new(),
            protocol_version: None,
            params: None,
        };
        let subject = Subject::Listed(&call);
        self.levels.iter().flatten().all(|level| level.policies.is_empty() || level.first_match(req, &subject).is_some())
    }
}

/// At most this many authorizer calls are made for one request (a batch makes one per element that
/// triggers an ExternalAuth policy, per level); a request that needs more is denied.
pub const MAX_AUTHZ_CALLS: u32 = 32;

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

/// What rules are matched against: one MCP message, or a request classified by HTTP only.
enum Subject<'m, 'a> {
    Message(&'m McpMessage<'a>),
    /// A call to an entry of a list response, as the caller could make it (list filtering): a
    /// CEL rule that reads `params`, which the call would carry, counts as matching.
    Listed(&'m McpMessage<'a>),
    /// GET, or DELETE with `mcp-session-id`: a base-protocol transport request.
    BaseHttp,
    /// Anything else without a readable MCP body.
    Http,
}

/// GET (the SSE stream) and DELETE with `mcp-session-id` (session close) are base-protocol requests.
fn is_base_http(req: &HttpRequest<'_>) -> bool {
    req.method == "GET" || (req.method == "DELETE" && req.header("mcp-session-id").is_some())
}

/// The request headers the evaluator reads by name, besides those named by the plan's header
/// matchers ([`crate::plan::HeaderMatch`]). A caller may pass only these (plus the matchers' names) in
/// [`HttpRequest::headers`] and get the same decisions: the Envoy filter copies no other header out of
/// the host. Keep in sync with every `req.header(..)` in this module.
pub const HEADERS_READ: [&str; 4] = ["mcp-method", "mcp-name", "mcp-session-id", "mcp-protocol-version"];

/// docs/semantics.md §4: `Mcp-Method` must equal the message's method and `Mcp-Name` its `params.name`
/// (`params.uri` for resources methods); `Mcp-Name` on a message with neither is a mismatch.
fn check_mcp_headers(req: &HttpRequest<'_>, msg: &McpMessage<'_>) -> Result<(), &'static str> {
    // The first value of each and whether it repeats, in one pass over the headers (this runs for
    // every message).
    const NAMES: [&str; 3] = ["Mcp-Method", "Mcp-Name", "MCP-Protocol-Version"];
    let mut first: [Option<&str>; 3] = [None; 3];
    let mut repeated = [false; 3];
    for &(name, value) in req.headers {
        let i = match name {
            "mcp-method" => 0,
            "mcp-name" => 1,
            "mcp-protocol-version" => 2,
            _ => continue,
        };
        if let (Some(seen), Some(again)) = (first.get_mut(i), repeated.get_mut(i)) {
            *again |= seen.is_some();
            seen.get_or_insert(value);
        }
    }
    // Each may come once: with two fields, a server reading the last one (or the joined value) and
    // this check reading the first would disagree (the bypass corpus found it).
    if let Some((_, header)) = repeated.iter().zip(NAMES).find(|(again, _)| **again) {
        return Err(header);
    }
    let [method, name, version] = first;
    if let Some(h) = method {
        if msg.method.as_deref() != mcp_header_value("mcp-method", h).as_deref() {
            return Err("Mcp-Method");
        }
    }
    if let Some(h) = name {
        if param_of(msg) != mcp_header_value("mcp-name", h).as_deref() {
            return Err("Mcp-Name");
        }
    }
    // Where both say which revision the message is, they must agree.
    if let (Some(h), Some(v)) = (version, msg.protocol_version.as_deref()) {
        if h.trim() != v {
            return Err("MCP-Protocol-Version");
        }
    }
    Ok(())
}

/// A request header's value as policies and the body check see it (docs/semantics.md §4): `Mcp-Name` and
/// `Mcp-Param-*` values sent as `=?base64?…?=` (MCP 2026-07-28, SEP-2243, for values that are not
/// plain ASCII) decoded; None when such a value does not decode to UTF-8 (it then matches nothing: a
/// mismatch). The revision allows the form for those headers only, so an encoded `Mcp-Method` is
/// compared as sent (and is a mismatch), as a server reads it.
pub fn mcp_header_value<'v>(lower_name: &str, value: &'v str) -> Option<std::borrow::Cow<'v, str>> {
    use base64::Engine as _;
    let may_encode = lower_name == "mcp-name" || lower_name.starts_with("mcp-param-");
    let encoded = may_encode.then(|| value.strip_prefix("=?base64?")?.strip_suffix("?=")).flatten();
    match encoded {
        None => Some(std::borrow::Cow::Borrowed(value)),
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
    }
}

/// The value `params` matchers compare: `params.uri` for resources methods, else `params.name`.
fn param_of<'m>(msg: &'m McpMessage<'_>) -> Option<&'m str> {
    match msg.method.as_deref() {
        Some(m) if m.starts_with("resources/") => msg.uri.as_deref(),
        _ => msg.name.as_deref(),
    }
}

/// docs/semantics.md §3: the methods MATCH_BASE_PROTOCOL_METHODS adds.
fn is_base_method(method: &str) -> bool {
    // MCP 2026-07-28: `server/discover` replaces `initialize`; `subscriptions/listen` is base for its
    // list-change parts (its resource subscriptions are checked one by one: `Route::step`).
    matches!(method, "initialize" | "ping" | "tools/list" | "server/discover" | "subscriptions/listen")
        || method.starts_with("completion/")
        || method.starts_with("logging/")
        || method.starts_with("notifications/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LevelPlan, PolicyPlan, RulePlan};

    fn sealed_plan() -> CompiledPlan {
        let rule = RulePlan { name: "r".into(), principal: Some("spiffe://td/ns/a/sa/b".into()), ..Default::default() };
        let mut plan = CompiledPlan::empty("ns/gw/l");
        plan.gateway.allow.push(PolicyPlan { name: "ns/p".into(), rules: vec![rule.clone()], dry_run: false });
        let backend = PolicyPlan { name: "ns/b".into(), rules: vec![rule], dry_run: false };
        plan.backends.insert("xbackend/ns/b".into(), LevelPlan { allow: vec![backend], ..Default::default() });
        plan.seal()
    }

    #[test]
    fn the_hash_is_checked_on_the_text_or_on_the_plan() {
        let plan = sealed_plan();
        let compact = serde_json::to_string(&plan).unwrap();
        let pretty = serde_json::to_string_pretty(&plan).unwrap();
        // What the controller writes: the hash of the text is the plan's.
        for json in [&compact, &pretty] {
            assert_eq!(json_content_hash(json.as_bytes()), plan.hash);
            assert_eq!(Evaluator::load(json.as_bytes()).unwrap().plan(), &plan);
        }
        // Re-formatted elsewhere (keys reordered): checked on the re-serialised plan.
        let value: serde_json::Value = serde_json::from_str(&compact).unwrap();
        let reordered = serde_json::to_string(&value).unwrap();
        assert_ne!(json_content_hash(reordered.as_bytes()), plan.hash);
        assert_eq!(Evaluator::load(reordered.as_bytes()).unwrap().plan(), &plan);
    }

    #[test]
    fn a_tampered_plan_is_refused_whatever_its_formatting() {
        let plan = sealed_plan();
        let mut tampered = plan.clone();
        tampered.gateway.allow[0].rules[0].principal = Some("spiffe://td/ns/a/sa/c".into());
        let expected = PlanError::Hash { declared: plan.hash.clone(), actual: tampered.content_hash() };
        let compact = serde_json::to_string(&tampered).unwrap();
        let pretty = serde_json::to_string_pretty(&tampered).unwrap();
        let value: serde_json::Value = serde_json::from_str(&compact).unwrap();
        for json in [compact, pretty, serde_json::to_string(&value).unwrap()] {
            assert_eq!(Evaluator::load(json.as_bytes()).unwrap_err(), expected, "{json}");
        }
        // The hash itself altered.
        let json = serde_json::to_string(&plan).unwrap().replace(&plan.hash, &"0".repeat(64));
        assert!(matches!(Evaluator::load(json.as_bytes()), Err(PlanError::Hash { .. })));
        // The version is checked first.
        let json = serde_json::to_string(&plan).unwrap().replace(r#""version":1"#, r#""version":2"#);
        assert_eq!(Evaluator::load(json.as_bytes()).unwrap_err(), PlanError::Version { found: 2 });
    }

    #[test]
    fn allow_summaries() {
        let mut d = Decision {
            verdict: Verdict::Allow,
            under_policy: true,
            message: None,
            gateway_rule: Some(RuleRef { policy: "ns/p", rule: "r1" }),
            backend_rule: None,
            not_mcp: None,
            authorized: [None, None],
        };
        assert_eq!(d.summary(), "allow gateway=ns/p:r1 backend=-");
        d.backend_rule = Some(RuleRef { policy: "ns/b", rule: "(all requests)" });
        assert_eq!(d.summary(), "allow gateway=ns/p:r1 backend=ns/b:(all requests)");
        d.gateway_rule = None;
        assert_eq!(d.summary(), "allow gateway=- backend=ns/b:(all requests)");
        d.under_policy = false;
        assert_eq!(d.summary(), "allow (no policy)");
    }
}
