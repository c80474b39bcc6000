//! The evaluator: a [`CompiledPlan`] validated and indexed for deciding requests (SPEC §3).
//!
//! Loading builds, per level, candidate lists keyed by what a request can be looked up by (MCP
//! method, `params.name`/`params.uri`, caller principal). Deciding a message therefore costs a few
//! hash lookups plus the rules that really are candidates, whatever the number of policies, and
//! allocates nothing in proportion to the plan.

use regex::Regex;

use crate::mcp::{McpBody, McpMessage, NotMcp};
use crate::plan::{
    json_content_hash, AuthorizerPlan, CompiledPlan, HeaderMatch, HostMatch, HttpMatch, LevelPlan, MethodPattern, PathMatch, PolicyPlan, RulePlan,
    ValueMatch, PLAN_VERSION,
};
use crate::cel_rule::{CelRule, Uses};
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
}

/// Where a policy sits (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Gateway,
    Backend,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Gateway => "gateway",
            Level::Backend => "backend",
        }
    }
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

/// The rule that allowed a request at one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleRef<'p> {
    pub policy: &'p str,
    pub rule: &'p str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny(DenyReason),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// Allow policies exist at the level and none of their rules matched.
    NoRuleMatched { level: Level, policies: usize },
    /// `Mcp-Method` / `Mcp-Name` headers disagree with the body.
    McpHeaderMismatch { header: &'static str },
    /// The level's ExternalAuth policy (`namespace/name`) called its authorizer, which did not allow.
    ExternalAuth { level: Level, policy: String, failure: AuthzFailure },
    /// The request would need more than [`MAX_AUTHZ_CALLS`] authorizer calls.
    TooManyAuthorizerCalls { level: Level },
}

/// Why an authorizer call did not allow a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthzFailure {
    /// It answered and denied (the HTTP status its denial asks for).
    Denied { status: u32 },
    /// No answer within the plan's timeout.
    Timeout,
    /// The call failed (connection refused or reset, the cluster unknown, a gRPC error status).
    Unavailable,
    /// An answer that cannot be read (not a CheckResponse, a broken HTTP response).
    Malformed,
}

impl AuthzFailure {
    fn describe(self) -> String {
        match self {
            AuthzFailure::Denied { status } => format!("denied (HTTP {status})"),
            AuthzFailure::Timeout => "did not answer in time".into(),
            AuthzFailure::Unavailable => "could not be reached".into(),
            AuthzFailure::Malformed => "answered something unreadable".into(),
        }
    }
}

/// The outcome for a whole request (every message of a batch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision<'p> {
    pub verdict: Verdict,
    /// Whether any policy applies to the request's route at all.
    pub under_policy: bool,
    /// Index of the message that was denied, for batches.
    pub message: Option<usize>,
    /// The rules that allowed the (last evaluated) message, per level.
    pub gateway_rule: Option<RuleRef<'p>>,
    pub backend_rule: Option<RuleRef<'p>>,
    /// Why the body was not read as MCP, when that mattered to a denial.
    pub not_mcp: Option<String>,
    /// The ExternalAuth policies whose authorizers allowed the (last evaluated) message, per level.
    pub authorized: [Option<&'p str>; 2],
}

impl<'p> Decision<'p> {
    /// An allow without any rule yet (`under_policy`: whether any policy applies).
    pub fn allow(under_policy: bool) -> Self {
        Decision {
            verdict: Verdict::Allow,
            under_policy,
            message: None,
            gateway_rule: None,
            backend_rule: None,
            not_mcp: None,
            authorized: [None, None],
        }
    }

    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }

    /// One line for logs and access logs, e.g.
    /// `allow gateway=ns/p:rule backend=-` or `deny backend: no rule of 2 allow policies matched`.
    pub fn summary(&self) -> String {
        match &self.verdict {
            Verdict::Allow if !self.under_policy => "allow (no policy)".to_string(),
            Verdict::Allow => {
                // Built without `format!`: this runs for every allowed request in the filter.
                let mut out = String::with_capacity(64);
                out.push_str("allow gateway=");
                for (i, rule) in [&self.gateway_rule, &self.backend_rule].into_iter().enumerate() {
                    if i == 1 {
                        out.push_str(" backend=");
                    }
                    match rule {
                        Some(r) => {
                            out.push_str(r.policy);
                            out.push(':');
                            out.push_str(r.rule);
                        }
                        None => out.push('-'),
                    }
                }
                for (i, policy) in self.authorized.iter().flatten().enumerate() {
                    out.push_str(if i == 0 { " authorized-by=" } else { "," });
                    out.push_str(policy);
                }
                out
            }
            Verdict::Deny(reason) => {
                let mut at = self.message.map(|i| format!(" (batch element {i})")).unwrap_or_default();
                if let Some(why) = &self.not_mcp {
                    at.push_str(&format!(" (body is not MCP: {why})"));
                }
                match reason {
                    DenyReason::NoRuleMatched { level, policies } => format!(
                        "deny {}: no rule of {policies} allow polic{} matched{at}",
                        level.as_str(),
                        if *policies == 1 { "y" } else { "ies" }
                    ),
                    DenyReason::McpHeaderMismatch { header } => {
                        format!("deny: {header} header does not match the body{at}")
                    }
                    DenyReason::ExternalAuth { level, policy, failure } => {
                        format!("deny {}: the authorizer of {policy} {}{at}", level.as_str(), failure.describe())
                    }
                    DenyReason::TooManyAuthorizerCalls { level } => format!(
                        "deny {}: the request needs more than {MAX_AUTHZ_CALLS} authorizer calls{at}",
                        level.as_str()
                    ),
                }
            }
        }
    }
}

/// A plan ready to decide requests.
#[derive(Debug)]
pub struct Evaluator {
    plan: CompiledPlan,
    gateway: LevelIndex,
    /// By cluster.
    backends: StrMap<LevelIndex>,
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
        let gateway = LevelIndex::build(Level::Gateway, &plan.gateway)?;
        let mut backends = StrMap::with_capacity(plan.backends.len(), plan.backends.keys().map(String::len).sum());
        for (cluster, level) in &plan.backends {
            let index = LevelIndex::build(Level::Backend, level)?;
            // Clusters are distinct (map keys): this inserts.
            backends.get_or_insert_with(cluster, || index);
        }
        Ok(Self { plan, gateway, backends })
    }

    pub fn plan(&self) -> &CompiledPlan {
        &self.plan
    }

    /// What the plan's CEL rules read of a request (nothing, without CEL rules).
    pub fn cel_uses(&self) -> Uses {
        self.backends.values().map(|l| l.cel_uses).fold(self.gateway.cel_uses, Uses::union)
    }

    /// The levels in force for a request routed to `cluster`.
    pub fn route(&self, cluster: Option<&str>) -> Route<'_> {
        let gateway = Some(&self.gateway).filter(|l| !l.is_empty());
        let backend = cluster.and_then(|c| self.backends.get_key_value(c)).filter(|(_, l)| !l.is_empty());
        Route {
            levels: [gateway, backend.map(|(_, l)| l)],
            plan: &self.plan,
            cluster: backend.map(|(c, _)| c),
        }
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
}

impl<'e> Route<'e> {
    /// False when no policy applies: the filter lets the request through without reading it.
    pub fn under_policy(&self) -> bool {
        self.levels.iter().any(Option::is_some)
    }

    /// Decides a request (SPEC §3, §4) as if every external authorizer allowed it: the whole decision
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

    /// Decides a request (SPEC §3, §4) up to the next authorizer call it needs. `authorized`: how
    /// many authorizer calls for this request have allowed so far; after the call a
    /// [`Step::Authorize`] asks for allowed, step again with one more (the walk is the same each time,
    /// so each call is asked for once). For a batch every element must be allowed; headers are
    /// checked for every message before any policy (SPEC §5).
    pub fn step(&self, req: &HttpRequest<'_>, body: BodyInput<'_, '_>, authorized: u32) -> Step<'e> {
        let mut walk = Walk { decision: Decision::allow(self.under_policy()), authorized, calls: 0 };
        if !walk.decision.under_policy {
            return Step::Decided(walk.decision);
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
                    // SPEC §3: `subscriptions/listen` is judged as a set: its list-change parts are base
                    // methods (above), and each resource URI must be allowed as a `resources/subscribe`.
                    if msg.method.as_deref() == Some("subscriptions/listen") {
                        for uri in &msg.subscriptions {
                            let subscribe = McpMessage {
                                method: Some(std::borrow::Cow::Borrowed("resources/subscribe")),
                                id: msg.id,
                                name: None,
                                uri: Some(std::borrow::Cow::Borrowed(uri.as_ref())),
                                subscriptions: Vec::new(),
                                protocol_version: None,
                                params: None,
                            };
                            if let Some(step) = self.decide_one(req, &Subject::Message(&subscribe), Some(i), &mut walk) {
                                return step;
                            }
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

    /// Why each rule of the levels in force matches or not, per message: the slow path behind
    /// `toolgate explain` (the decision itself always comes from [`Route::decide`]).
    pub fn explain(&self, req: &HttpRequest<'_>, body: BodyInput<'_, '_>) -> Vec<MessageExplanation> {
        let subjects: Vec<(Option<usize>, Subject<'_, '_>)> = match body {
            BodyInput::Mcp(mcp) => {
                let batch = mcp.is_batch();
                mcp.messages().iter().enumerate().map(|(i, m)| (batch.then_some(i), Subject::Message(m))).collect()
            }
            BodyInput::None if is_base_http(req) => vec![(None, Subject::BaseHttp)],
            _ => vec![(None, Subject::Http)],
        };
        let plans = [Some(&self.plan.gateway), self.cluster.and_then(|c| self.plan.backends.get(c))];
        let levels: Vec<(&LevelIndex, &LevelPlan)> =
            self.levels.iter().zip(plans).filter_map(|(index, plan)| Some(((*index)?, plan?))).collect();
        subjects
            .iter()
            .map(|(index, subject)| MessageExplanation {
                message: *index,
                what: subject.describe(),
                levels: levels
                    .iter()
                    .map(|(index, plan)| LevelExplanation {
                        level: index.level,
                        // The index holds the plan's rules in the same (flattened) order.
                        rules: plan
                            .allow
                            .iter()
                            .flat_map(|policy| policy.rules.iter().map(move |rule| (policy, rule)))
                            .zip(&index.rules)
                            .map(|((policy, rule), indexed)| RuleExplanation {
                                policy: policy.name.clone(),
                                rule: rule.name.clone(),
                                outcome: indexed.explain(rule, req, subject),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect()
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
                    walk.decision.verdict =
                        Verdict::Deny(DenyReason::NoRuleMatched { level: level.level, policies: level.policies.len() });
                    return Some(Step::Decided(walk.decision.clone()));
                }
            }
        }
        None
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
    /// GET, or DELETE with `mcp-session-id`: a base-protocol transport request.
    BaseHttp,
    /// Anything else without a readable MCP body.
    Http,
}

/// GET (the SSE stream) and DELETE with `mcp-session-id` (session close) are base-protocol requests.
fn is_base_http(req: &HttpRequest<'_>) -> bool {
    req.method == "GET" || (req.method == "DELETE" && req.header("mcp-session-id").is_some())
}

/// What `explain` says about one message (or the request, when it has no MCP body).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageExplanation {
    /// Index in a batch.
    pub message: Option<usize>,
    /// e.g. `tools/call "get-sum"`.
    pub what: String,
    pub levels: Vec<LevelExplanation>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelExplanation {
    pub level: Level,
    pub rules: Vec<RuleExplanation>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleExplanation {
    pub policy: String,
    pub rule: String,
    /// Ok when the rule matches; otherwise the matcher that failed and why.
    pub outcome: Result<(), String>,
}

impl Subject<'_, '_> {
    fn describe(&self) -> String {
        match self {
            Subject::BaseHttp => "HTTP request of the MCP base protocol (GET stream or DELETE session)".into(),
            Subject::Http => "HTTP request without an MCP body".into(),
            Subject::Message(m) => match m.method.as_deref() {
                None => "JSON-RPC response sent by the client".into(),
                Some(method) => match param_of(m) {
                    Some(p) => format!("{method} {p:?}"),
                    None => method.to_string(),
                },
            },
        }
    }
}

impl IndexedRule {
    /// The same decision as the buckets reach, matcher by matcher, with the reason it fails.
    /// `plan`: the rule this was built from.
    fn explain(&self, plan: &RulePlan, req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> Result<(), String> {
        if let Some(p) = &plan.principal {
            match req.principal {
                Some(caller) if caller == p => {}
                Some(caller) => return Err(format!("source: caller {caller} is not {p}")),
                None => return Err(format!("source: the caller has no identity (rule wants {p})")),
            }
        }
        if let Some(name) = self.http.as_ref().and_then(|http| http.first_failure(req)) {
            return Err(format!("{name}: the request does not match"));
        }
        if let Some(cel) = &self.cel {
            if !cel_matches(cel, req, subject) {
                return Err(format!("cel: {:?} is not true for this request", plan.cel.as_deref().unwrap_or("")));
            }
        }
        let Some(mcp) = &plan.mcp else { return Ok(()) };
        let base = match subject {
            Subject::Http => return Err("mcp: the request has no readable MCP body".into()),
            Subject::BaseHttp => true,
            Subject::Message(m) => m.method.as_deref().is_none_or(is_base_method),
        };
        if base && mcp.base_protocol {
            return Ok(());
        }
        if let Subject::Message(m) = subject {
            if let Some(method) = m.method.as_deref() {
                for mm in &mcp.methods {
                    let method_ok = match &mm.method {
                        MethodPattern::Category(c) => method.split_once('/').is_some_and(|(cat, _)| cat == c),
                        MethodPattern::Exact(e) => e == method,
                    };
                    if method_ok && (mm.params.is_empty() || param_of(m).is_some_and(|p| mm.params.iter().any(|x| x == p))) {
                        return Ok(());
                    }
                }
            }
        }
        Err(if base {
            "mcp: a base-protocol message, but the rule does not MATCH_BASE_PROTOCOL_METHODS".into()
        } else {
            "mcp: no listed method (and params) matches".into()
        })
    }
}

/// The request headers the evaluator reads by name, besides those named by the plan's header
/// matchers ([`crate::plan::HeaderMatch`]). A caller may pass only these (plus the matchers' names) in
/// [`HttpRequest::headers`] and get the same decisions: the Envoy filter copies no other header out of
/// the host. Keep in sync with every `req.header(..)` in this module.
pub const HEADERS_READ: [&str; 4] = ["mcp-method", "mcp-name", "mcp-session-id", "mcp-protocol-version"];

/// SPEC §4: `Mcp-Method` must equal the message's method and `Mcp-Name` its `params.name`
/// (`params.uri` for resources methods); `Mcp-Name` on a message with neither is a mismatch.
fn check_mcp_headers(req: &HttpRequest<'_>, msg: &McpMessage<'_>) -> Result<(), &'static str> {
    // Each may come once: with two fields, a server reading the last one (or the joined value) and
    // this check reading the first would disagree (the bypass corpus found it).
    for (name, header) in [("mcp-method", "Mcp-Method"), ("mcp-name", "Mcp-Name"), ("mcp-protocol-version", "MCP-Protocol-Version")] {
        if req.header_values(name).nth(1).is_some() {
            return Err(header);
        }
    }
    if let Some(h) = req.header("mcp-method") {
        if msg.method.as_deref() != mcp_header_value("mcp-method", h).as_deref() {
            return Err("Mcp-Method");
        }
    }
    if let Some(h) = req.header("mcp-name") {
        if param_of(msg) != mcp_header_value("mcp-name", h).as_deref() {
            return Err("Mcp-Name");
        }
    }
    // Where both say which revision the message is, they must agree.
    if let (Some(h), Some(v)) = (req.header("mcp-protocol-version"), msg.protocol_version.as_deref()) {
        if h.trim() != v {
            return Err("MCP-Protocol-Version");
        }
    }
    Ok(())
}

/// A request header's value as policies and the body check see it (SPEC §4): `Mcp-*` values sent
/// as `=?base64?…?=` (MCP 2026-07-28, SEP-2243, for values that are not plain ASCII) decoded; None
/// when such a value does not decode to UTF-8 (it then matches nothing: a mismatch).
pub fn mcp_header_value<'v>(lower_name: &str, value: &'v str) -> Option<std::borrow::Cow<'v, str>> {
    use base64::Engine as _;
    let encoded = lower_name.starts_with("mcp-").then(|| value.strip_prefix("=?base64?")?.strip_suffix("?=")).flatten();
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

/// SPEC §3: the methods MATCH_BASE_PROTOCOL_METHODS adds.
fn is_base_method(method: &str) -> bool {
    // MCP 2026-07-28: `server/discover` replaces `initialize`; `subscriptions/listen` is base for its
    // list-change parts (its resource subscriptions are checked one by one: `Route::step`).
    matches!(method, "initialize" | "ping" | "tools/list" | "server/discover" | "subscriptions/listen")
        || method.starts_with("completion/")
        || method.starts_with("logging/")
        || method.starts_with("notifications/")
}

const CATEGORIES: [&str; 3] = ["tools", "prompts", "resources"];

/// One level's rules, flattened in evaluation order, plus candidate lists.
#[derive(Debug)]
struct LevelIndex {
    level: Level,
    /// The policies' and rules' names, one after the other (one allocation per level).
    names: String,
    /// Each policy's name in `names`.
    policies: Vec<Name>,
    rules: Vec<IndexedRule>,
    /// The principals rules name, numbered from 1 ([`ANY_SOURCE`] is 0): buckets list them by number.
    principals: StrMap<u32>,
    /// Rules without an MCP restriction: candidates for everything.
    unrestricted: Bucket,
    /// Rules with MATCH_BASE_PROTOCOL_METHODS.
    base: Bucket,
    /// `Exact(method)` matchers.
    by_method: StrMap<MethodIndex>,
    /// `Category(c)`.
    by_category: StrMap<Bucket>,
    /// The level's ExternalAuth policy.
    external_auth: Option<Box<AuthIndex>>,
    /// What the level's CEL rules read.
    cel_uses: Uses,
}

/// An ExternalAuth policy: its rules (when to call) indexed like a level of one Allow policy.
#[derive(Debug)]
struct AuthIndex {
    policy: String,
    authorizer: AuthorizerPlan,
    index: LevelIndex,
}

/// What deciding needs of a rule; `explain` reads the rest from the plan.
#[derive(Debug)]
struct IndexedRule {
    /// Index in `LevelIndex::policies`.
    policy: usize,
    name: Name,
    /// None: no HTTP matcher (most rules).
    http: Option<Box<CompiledHttp>>,
    /// A CEL expression (rules of type CEL).
    cel: Option<Box<CelRule>>,
}

impl IndexedRule {
    fn matches(&self, req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> bool {
        self.http.as_ref().is_none_or(|http| http.matches(req)) && self.cel.as_ref().is_none_or(|cel| cel_matches(cel, req, subject))
    }
}

/// A CEL rule applies to `tools/call` messages only (the index offers it nothing else).
fn cel_matches(cel: &CelRule, req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> bool {
    let Subject::Message(m) = subject else { return false };
    let input = crate::cel_rule::Input { req, method: m.method.as_deref(), tool_name: m.name.as_deref(), params: m.params };
    cel.matches(&input)
}

/// A range of `LevelIndex::names`.
#[derive(Clone, Copy, Debug)]
struct Name {
    start: usize,
    end: usize,
}

/// The rules naming one MCP method.
#[derive(Debug)]
struct MethodIndex {
    /// Without params.
    any_param: Bucket,
    /// With params: param -> rules.
    by_param: StrMap<Bucket>,
}

/// [`Bucket`] principal number of rules without a principal.
const ANY_SOURCE: u32 = 0;

/// Candidate rules: (principal number, rule ordinal), sorted, so that a caller only scans the rules
/// that name it or name no one, each in evaluation order (ascending ordinals).
#[derive(Debug, Default)]
enum Bucket {
    #[default]
    Empty,
    /// Most buckets (a tool named by one rule): no allocation.
    One((u32, u32)),
    Many(Vec<(u32, u32)>),
}

impl Bucket {
    /// Ordinals arrive ascending; [`LevelIndex::build`] sorts by principal at the end.
    fn push(&mut self, principal: u32, ordinal: u32) {
        let entry = (principal, ordinal);
        match self {
            Bucket::Empty => *self = Bucket::One(entry),
            Bucket::One(first) if *first != entry => *self = Bucket::Many(vec![*first, entry]),
            Bucket::One(_) => {}
            Bucket::Many(list) => {
                if list.last() != Some(&entry) {
                    list.push(entry);
                }
            }
        }
    }

    fn entries(&self) -> &[(u32, u32)] {
        match self {
            Bucket::Empty => &[],
            Bucket::One(entry) => std::slice::from_ref(entry),
            Bucket::Many(list) => list,
        }
    }

    /// Smallest ordinal of this bucket whose rule matches, if smaller than `best`. `caller`: the
    /// caller's principal number, if a rule of the level names it.
    fn first_match(
        &self,
        rules: &[IndexedRule],
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        caller: Option<u32>,
        best: &mut Option<u32>,
    ) {
        // `list` starts with `principal`'s entries (in evaluation order); they end where another's start.
        let mut scan = |principal: u32, list: &[(u32, u32)]| {
            for &(p, o) in list {
                if p != principal || best.is_some_and(|b| o >= b) {
                    return;
                }
                if rules.get(o as usize).is_some_and(|r| r.matches(req, subject)) {
                    *best = Some(o);
                    return;
                }
            }
        };
        let entries = self.entries();
        scan(ANY_SOURCE, entries);
        if let Some(c) = caller {
            scan(c, entries.get(entries.partition_point(|&(p, _)| p < c)..).unwrap_or_default());
        }
    }
}

impl LevelIndex {
    fn build(level: Level, plan: &LevelPlan) -> Result<Self, PlanError> {
        let rule_names = plan.allow.iter().flat_map(|p| &p.rules).map(|r| r.name.len());
        let mut index = LevelIndex {
            level,
            names: String::with_capacity(plan.allow.iter().map(|p| p.name.len()).chain(rule_names).sum()),
            policies: Vec::with_capacity(plan.allow.len()),
            rules: Vec::with_capacity(plan.allow.iter().map(|p| p.rules.len()).sum()),
            principals: StrMap::default(),
            unrestricted: Bucket::default(),
            base: Bucket::default(),
            by_method: StrMap::default(),
            by_category: StrMap::default(),
            external_auth: None,
            cel_uses: Uses::default(),
        };
        if let Some(ea) = &plan.external_auth {
            let rules = LevelPlan {
                external_auth: None,
                allow: vec![PolicyPlan { name: ea.policy.clone(), rules: ea.rules.clone() }],
            };
            let ea_index = LevelIndex::build(level, &rules)?;
            index.cel_uses = ea_index.cel_uses;
            index.external_auth = Some(Box::new(AuthIndex {
                policy: ea.policy.clone(),
                authorizer: ea.authorizer.clone(),
                index: ea_index,
            }));
        }
        // Each method's params (how many, how many bytes), to size its map up front: growing a
        // map rehashes every key in it.
        let mut params: StrMap<(usize, usize)> = StrMap::default();
        for m in plan.allow.iter().flat_map(|p| &p.rules).filter_map(|r| r.mcp.as_ref()).flat_map(|mcp| &mcp.methods) {
            if let MethodPattern::Exact(method) = &m.method {
                let (keys, bytes) = params.get_or_insert_with(method, || (0, 0));
                *keys += m.params.len();
                *bytes += m.params.iter().map(String::len).sum::<usize>();
            }
        }
        for (policy_number, policy) in plan.allow.iter().enumerate() {
            let err = |problem: String| PlanError::Policy {
                level: level.as_str().to_string(),
                policy: policy.name.clone(),
                problem,
            };
            if policy.name.is_empty() {
                return Err(err("policy name is empty".into()));
            }
            if policy.rules.is_empty() {
                return Err(err("policy has no rules (a policy without rules compiles to one implicit rule)".into()));
            }
            let name = index.push_name(&policy.name);
            index.policies.push(name);
            for rule in &policy.rules {
                let ordinal = u32::try_from(index.rules.len()).map_err(|_| err("too many rules".into()))?;
                let rerr = |problem: String| err(format!("rule {:?}: {problem}", rule.name));
                let http = if rule.http.is_any() {
                    None
                } else {
                    Some(Box::new(CompiledHttp::compile(&rule.http).map_err(rerr)?))
                };
                let principal = match rule.principal.as_deref() {
                    None => ANY_SOURCE,
                    Some(p) if !p.starts_with("spiffe://") => {
                        return Err(rerr(format!("principal {:?} is not a SPIFFE ID", rule.principal.as_deref())))
                    }
                    Some(p) => {
                        let next =
                            u32::try_from(index.principals.len() + 1).map_err(|_| err("too many principals".into()))?;
                        *index.principals.get_or_insert_with(p, || next)
                    }
                };
                match &rule.mcp {
                    None => index.unrestricted.push(principal, ordinal),
                    Some(mcp) => {
                        if !mcp.base_protocol && mcp.methods.is_empty() {
                            return Err(rerr("mcp matcher with no methods and no base protocol matches nothing; omit it instead".into()));
                        }
                        if mcp.base_protocol {
                            index.base.push(principal, ordinal);
                        }
                        for m in &mcp.methods {
                            match &m.method {
                                MethodPattern::Category(c) => {
                                    if !CATEGORIES.contains(&c.as_str()) {
                                        return Err(rerr(format!("unknown MCP method category {c:?}")));
                                    }
                                    if !m.params.is_empty() {
                                        return Err(rerr(format!("params are not allowed on category {c:?}")));
                                    }
                                    index.by_category.get_or_insert_with(c, Bucket::default).push(principal, ordinal);
                                }
                                MethodPattern::Exact(method) => {
                                    let mi = index.by_method.get_or_insert_with(method, || {
                                        let (keys, bytes) = params.get(method).copied().unwrap_or_default();
                                        let by_param = StrMap::with_capacity(keys, bytes);
                                        MethodIndex { any_param: Bucket::default(), by_param }
                                    });
                                    if m.params.is_empty() {
                                        mi.any_param.push(principal, ordinal);
                                    }
                                    for param in &m.params {
                                        mi.by_param.get_or_insert_with(param, Bucket::default).push(principal, ordinal);
                                    }
                                }
                            }
                        }
                    }
                }
                let cel = match &rule.cel {
                    None => None,
                    Some(expression) => {
                        let compiled = crate::cel_rule::compile(expression)
                            .map_err(|e| rerr(format!("CEL expression {expression:?}: {e}")))?;
                        index.cel_uses = index.cel_uses.union(compiled.uses);
                        Some(Box::new(compiled))
                    }
                };
                let name = index.push_name(&rule.name);
                index.rules.push(IndexedRule { policy: policy_number, name, http, cel });
            }
        }
        for bucket in index.buckets_mut() {
            if let Bucket::Many(list) = bucket {
                list.sort_unstable();
            }
        }
        Ok(index)
    }

    fn buckets_mut(&mut self) -> impl Iterator<Item = &mut Bucket> {
        let by_method =
            self.by_method.values_mut().flat_map(|m| [&mut m.any_param].into_iter().chain(m.by_param.values_mut()));
        [&mut self.unrestricted, &mut self.base].into_iter().chain(self.by_category.values_mut()).chain(by_method)
    }

    fn is_empty(&self) -> bool {
        self.policies.is_empty() && self.external_auth.is_none()
    }

    fn push_name(&mut self, name: &str) -> Name {
        let start = self.names.len();
        self.names.push_str(name);
        Name { start, end: self.names.len() }
    }

    fn name(&self, name: Name) -> &str {
        self.names.get(name.start..name.end).unwrap_or_default()
    }

    fn policy_name(&self, rule: &IndexedRule) -> &str {
        self.policies.get(rule.policy).map_or("", |&p| self.name(p))
    }

    fn first_match(&self, req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> Option<&IndexedRule> {
        let mut best = None;
        let caller = req.principal.and_then(|p| self.principals.get(p)).copied();
        let mut probe = |bucket: &Bucket| bucket.first_match(&self.rules, req, subject, caller, &mut best);
        probe(&self.unrestricted);
        match subject {
            Subject::Http => {}
            Subject::BaseHttp => probe(&self.base),
            Subject::Message(msg) => match msg.method.as_deref() {
                // A client-sent JSON-RPC response (sampling, elicitation): base protocol.
                None => probe(&self.base),
                Some(method) => {
                    if is_base_method(method) {
                        probe(&self.base);
                    }
                    if let Some(m) = self.by_method.get(method) {
                        probe(&m.any_param);
                        if let Some(b) = param_of(msg).and_then(|param| m.by_param.get(param)) {
                            probe(b);
                        }
                    }
                    if let Some(b) = method.split_once('/').and_then(|(c, _)| self.by_category.get(c)) {
                        probe(b);
                    }
                }
            },
        }
        best.and_then(|o| self.rules.get(o as usize))
    }
}

/// [`HttpMatch`] with regular expressions compiled.
#[derive(Debug, Default)]
struct CompiledHttp {
    methods: Vec<String>,
    paths: Vec<CompiledPath>,
    headers: Vec<(String, CompiledValue)>,
    hosts: Vec<HostMatch>,
    ports: Vec<u16>,
}

#[derive(Debug)]
enum CompiledPath {
    Exact(String),
    Prefix(String),
    Regex(Regex),
}

#[derive(Debug)]
enum CompiledValue {
    Exact(String),
    Regex(Regex),
}

/// Compiles an RE2 expression that must match the whole input: see [`crate::re2`].
pub use crate::re2::full_match_regex;

impl CompiledHttp {
    fn compile(m: &HttpMatch) -> Result<Self, String> {
        for method in &m.methods {
            if method.is_empty() || method.bytes().any(|b| !b.is_ascii_uppercase()) {
                return Err(format!("HTTP method {method:?} must be upper-case letters"));
            }
        }
        let paths = m
            .paths
            .iter()
            .map(|p| {
                Ok(match p {
                    PathMatch::Exact(v) => CompiledPath::Exact(v.clone()),
                    PathMatch::Prefix(v) => {
                        if !v.starts_with('/') {
                            return Err(format!("path prefix {v:?} must start with '/'"));
                        }
                        CompiledPath::Prefix(if v.len() > 1 { v.trim_end_matches('/').to_string() } else { v.clone() })
                    }
                    PathMatch::Regex(r) => CompiledPath::Regex(full_match_regex(r)?),
                })
            })
            .collect::<Result<_, String>>()?;
        let headers = m
            .headers
            .iter()
            .map(|HeaderMatch { name, value }| {
                if name.is_empty() || name.bytes().any(|b| b.is_ascii_uppercase()) {
                    return Err(format!("header name {name:?} must be non-empty lower-case"));
                }
                let v = match value {
                    ValueMatch::Exact(v) => CompiledValue::Exact(v.clone()),
                    ValueMatch::Regex(r) => CompiledValue::Regex(full_match_regex(r)?),
                };
                Ok((name.clone(), v))
            })
            .collect::<Result<_, String>>()?;
        for host in &m.hosts {
            let h = match host {
                HostMatch::Exact(h) => h.as_str(),
                HostMatch::Suffix(s) => s.strip_prefix('.').ok_or_else(|| format!("host suffix {s:?} must start with '.'"))?,
            };
            if h.is_empty() || h.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(format!("host {host:?} must be non-empty lower-case"));
            }
        }
        Ok(Self { methods: m.methods.clone(), paths, headers, hosts: m.hosts.clone(), ports: m.ports.clone() })
    }

    fn matches(&self, req: &HttpRequest<'_>) -> bool {
        self.first_failure(req).is_none()
    }

    /// The first HTTP matcher that does not hold, by name (`methods`, `ports`, ...).
    fn first_failure(&self, req: &HttpRequest<'_>) -> Option<&'static str> {
        if !(self.methods.is_empty() || self.methods.iter().any(|m| m == req.method)) {
            return Some("methods");
        }
        if !(self.ports.is_empty() || self.ports.contains(&req.port)) {
            return Some("ports");
        }
        if !self.paths.is_empty() {
            let path = req.url_path();
            let ok = self.paths.iter().any(|p| match p {
                CompiledPath::Exact(v) => path == v,
                CompiledPath::Prefix(v) => {
                    v == "/" || path.strip_prefix(v.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                }
                CompiledPath::Regex(r) => r.is_match(path),
            });
            if !ok {
                return Some("paths");
            }
        }
        if !self.hosts.is_empty() {
            let host = req.host();
            let ok = self.hosts.iter().any(|h| match h {
                HostMatch::Exact(v) => host.eq_ignore_ascii_case(v),
                HostMatch::Suffix(s) => {
                    host.len() > s.len()
                        && host.is_char_boundary(host.len() - s.len())
                        && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
                }
            });
            if !ok {
                return Some("hosts");
            }
        }
        let headers_ok = self.headers.iter().all(|(name, v)| {
            req.header_values(name).filter_map(|value| mcp_header_value(name, value)).any(|value| match v {
                CompiledValue::Exact(e) => *value == **e,
                CompiledValue::Regex(r) => r.is_match(&value),
            })
        });
        (!headers_ok).then_some("headers")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{PolicyPlan, RulePlan};

    fn sealed_plan() -> CompiledPlan {
        let rule = RulePlan { name: "r".into(), principal: Some("spiffe://td/ns/a/sa/b".into()), ..Default::default() };
        let mut plan = CompiledPlan::empty("ns/gw/l");
        plan.gateway.allow.push(PolicyPlan { name: "ns/p".into(), rules: vec![rule.clone()] });
        let backend = PolicyPlan { name: "ns/b".into(), rules: vec![rule] };
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
