//! One level's rules, indexed: candidate lists keyed by MCP method, `params.name`/`params.uri` and
//! caller principal, so that deciding a message costs a few hash lookups whatever the plan's size.

use super::http::CompiledHttp;
use super::mcp_headers::{is_base_method, param_of};
use super::{HttpRequest, Level, PlanError};
use crate::cel_rule::{CelRule, Uses};
use crate::mcp::McpMessage;
use crate::plan::METHOD_CATEGORIES;
use crate::plan::{AuthorizerPlan, LevelPlan, McpMatch, MethodPattern, PolicyPlan, RulePlan};
use crate::str_map::StrMap;
use std::sync::Arc;

/// What rules are matched against: one MCP message, or a request classified by HTTP only.
pub(super) enum Subject<'m, 'a> {
    Message(&'m McpMessage<'a>),
    /// A call to an entry of a list response, as the caller could make it (list filtering): a
    /// CEL rule that reads `params`, which the call would carry, counts as matching.
    Listed(&'m McpMessage<'a>),
    /// GET, or DELETE with `mcp-session-id`: a base-protocol transport request.
    BaseHttp,
    /// Anything else without a readable MCP body.
    Http,
}

/// Why a candidate rule did not match (the matcher that failed).
#[derive(Clone, Copy, Debug)]
pub(super) enum Miss {
    /// An HTTP matcher, by name (`methods`, `paths`, ...).
    Http(&'static str),
    Cel,
}

/// What looking up a level's candidates tells whoever records the walk (the walk's
/// [`super::route::Trace`], of which this is a part). Every method does nothing by default.
pub(super) trait IndexTrace {
    /// Whether anything is recorded. When it is, the walk also evaluates the candidate rules after
    /// the first that matches (so that each is shown); the decision is the same.
    const ON: bool;
    fn candidate(&mut self, _ordinal: u32, _outcome: Result<(), Miss>) {}
    fn level_done(
        &mut self,
        _index: &LevelIndex,
        _caller: (Option<u32>, Option<&str>),
        _subject: &Subject<'_, '_>,
    ) {
    }
}

/// How many policies, and rules of each, a denial names ([`LevelIndex::considered`]).
const NAMED: usize = 3;

/// One level's rules, flattened in evaluation order, plus candidate lists.
#[derive(Debug)]
pub(super) struct LevelIndex {
    pub(super) level: Level,
    /// The policies' and rules' names, one after the other (one allocation per level).
    pub(super) names: String,
    /// Each policy's name in `names`.
    pub(super) policies: Vec<Name>,
    pub(super) rules: Vec<IndexedRule>,
    /// The principals rules name, numbered from 1 ([`ANY_SOURCE`] is 0): buckets list them by number.
    pub(super) principals: StrMap<u32>,
    /// Rules without an MCP restriction: candidates for everything.
    pub(super) unrestricted: Bucket,
    /// Rules with MATCH_BASE_PROTOCOL_METHODS.
    pub(super) base: Bucket,
    /// `Exact(method)` matchers.
    pub(super) by_method: StrMap<MethodIndex>,
    /// `Category(c)`.
    pub(super) by_category: StrMap<Bucket>,
    /// The level's ExternalAuth policy.
    pub(super) external_auth: Option<Box<AuthIndex>>,
    /// What the level's CEL rules read.
    pub(super) cel_uses: Uses,
    /// The level's Allow policies and their rules, as a denial names them (`considered_text`),
    /// written once when the plan loads: a denial copies a pointer, never allocates.
    pub(super) considered: Arc<str>,
}

/// An ExternalAuth policy: its rules (when to call) indexed like a level of one Allow policy.
#[derive(Debug)]
pub(super) struct AuthIndex {
    pub(super) policy: String,
    pub(super) authorizer: AuthorizerPlan,
    pub(super) index: LevelIndex,
}

/// What deciding needs of a rule; the record of a walk (trace.rs) reads the rest from the plan.
#[derive(Debug)]
pub(super) struct IndexedRule {
    /// Index in `LevelIndex::policies`.
    pub(super) policy: usize,
    pub(super) name: Name,
    /// The rule's source: a number of `LevelIndex::principals`, or [`ANY_SOURCE`].
    pub(super) principal: u32,
    /// None: no HTTP matcher (most rules).
    pub(super) http: Option<Box<CompiledHttp>>,
    /// A CEL expression (rules of type CEL).
    pub(super) cel: Option<Box<CelRule>>,
}

impl IndexedRule {
    /// Whether a candidate rule (its source and MCP matcher hold: the index offered it) matches:
    /// its HTTP matchers, then its CEL expression.
    pub(super) fn check(
        &self,
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
    ) -> Result<(), Miss> {
        if let Some(name) = self.http.as_ref().and_then(|http| http.first_failure(req)) {
            return Err(Miss::Http(name));
        }
        match &self.cel {
            Some(cel) if !cel_matches(cel, req, subject) => Err(Miss::Cel),
            _ => Ok(()),
        }
    }
}

/// A CEL rule applies to `tools/call` messages only (the index offers it nothing else).
pub(super) fn cel_matches(cel: &CelRule, req: &HttpRequest<'_>, subject: &Subject<'_, '_>) -> bool {
    let m = match subject {
        Subject::Message(m) => m,
        Subject::Listed(_) if cel.uses.params => return true,
        Subject::Listed(m) => m,
        Subject::Http | Subject::BaseHttp => return false,
    };
    let input = crate::cel_rule::Input {
        req,
        method: m.method.as_deref(),
        tool_name: m.name.as_deref(),
        params: m.params,
    };
    cel.matches(&input)
}

/// A range of `LevelIndex::names`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Name {
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The rules naming one MCP method.
#[derive(Debug)]
pub(super) struct MethodIndex {
    /// Without params.
    pub(super) any_param: Bucket,
    /// With params: param -> rules.
    pub(super) by_param: StrMap<Bucket>,
}

/// [`Bucket`] principal number of rules without a principal.
pub(super) const ANY_SOURCE: u32 = 0;

/// Candidate rules: (principal number, rule ordinal), sorted, so that a caller only scans the rules
/// that name it or name no one, each in evaluation order (ascending ordinals).
#[derive(Debug, Default)]
pub(super) enum Bucket {
    #[default]
    Empty,
    /// Most buckets (a tool named by one rule): no allocation.
    One((u32, u32)),
    Many(Vec<(u32, u32)>),
}

impl Bucket {
    /// Ordinals arrive ascending; [`LevelIndex::build`] sorts by principal at the end.
    pub(super) fn push(&mut self, principal: u32, ordinal: u32) {
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

    pub(super) fn entries(&self) -> &[(u32, u32)] {
        match self {
            Bucket::Empty => &[],
            Bucket::One(entry) => std::slice::from_ref(entry),
            Bucket::Many(list) => list,
        }
    }

    /// Smallest ordinal of this bucket whose rule matches, if smaller than `best`. `caller`: the
    /// caller's principal number, if a rule of the level names it. A trace that records sees every
    /// candidate evaluated, also those after the first that matches.
    pub(super) fn first_match<T: IndexTrace>(
        &self,
        rules: &[IndexedRule],
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        caller: Option<u32>,
        best: &mut Option<u32>,
        trace: &mut T,
    ) {
        // `list` starts with `principal`'s entries (in evaluation order); they end where another's start.
        let mut scan = |principal: u32, list: &[(u32, u32)]| {
            for &(p, o) in list {
                let later = best.is_some_and(|b| o >= b);
                if p != principal || (later && !T::ON) {
                    return;
                }
                let Some(rule) = rules.get(o as usize) else {
                    continue;
                };
                let outcome = rule.check(req, subject);
                let matched = outcome.is_ok();
                trace.candidate(o, outcome);
                if matched && !later {
                    *best = Some(o);
                    if !T::ON {
                        return;
                    }
                }
            }
        };
        let entries = self.entries();
        scan(ANY_SOURCE, entries);
        if let Some(c) = caller {
            scan(
                c,
                entries
                    .get(entries.partition_point(|&(p, _)| p < c)..)
                    .unwrap_or_default(),
            );
        }
    }
}

/// Each method's params in a level's rules (how many, how many bytes), to size its map up front:
/// growing a map rehashes every key in it.
fn param_sizes(plan: &LevelPlan) -> StrMap<(usize, usize)> {
    let mut params: StrMap<(usize, usize)> = StrMap::default();
    for m in plan
        .allow
        .iter()
        .flat_map(|p| &p.rules)
        .filter_map(|r| r.mcp.as_ref())
        .flat_map(|mcp| &mcp.methods)
    {
        if let MethodPattern::Exact(method) = &m.method {
            let (keys, bytes) = params.get_or_insert_with(method, || (0, 0));
            *keys += m.params.len();
            *bytes += m.params.iter().map(String::len).sum::<usize>();
        }
    }
    params
}

impl LevelIndex {
    pub(super) fn build(level: Level, plan: &LevelPlan) -> Result<Self, PlanError> {
        let mut index = LevelIndex::with_capacity(level, plan);
        if let Some(ea) = &plan.external_auth {
            let rules = LevelPlan {
                external_auth: None,
                allow: vec![PolicyPlan {
                    name: ea.policy.clone(),
                    rules: ea.rules.clone(),
                    dry_run: false,
                }],
            };
            let ea_index = LevelIndex::build(level, &rules)?;
            index.cel_uses = ea_index.cel_uses;
            index.external_auth = Some(Box::new(AuthIndex {
                policy: ea.policy.clone(),
                authorizer: ea.authorizer.clone(),
                index: ea_index,
            }));
        }
        let params = param_sizes(plan);
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
                return Err(err(
                    "policy has no rules (a policy without rules compiles to one implicit rule)"
                        .into(),
                ));
            }
            let name = index.push_name(&policy.name);
            index.policies.push(name);
            for rule in &policy.rules {
                index.add_rule(policy_number, rule, &params, &err)?;
            }
        }
        for bucket in index.buckets_mut() {
            if let Bucket::Many(list) = bucket {
                list.sort_unstable();
            }
        }
        index.considered = index.considered_text().into();
        Ok(index)
    }

    /// An empty index for `plan`'s policies, its names and rules allocated up front.
    fn with_capacity(level: Level, plan: &LevelPlan) -> Self {
        let rule_names = plan
            .allow
            .iter()
            .flat_map(|p| &p.rules)
            .map(|r| r.name.len());
        LevelIndex {
            level,
            names: String::with_capacity(
                plan.allow
                    .iter()
                    .map(|p| p.name.len())
                    .chain(rule_names)
                    .sum(),
            ),
            policies: Vec::with_capacity(plan.allow.len()),
            rules: Vec::with_capacity(plan.allow.iter().map(|p| p.rules.len()).sum()),
            principals: StrMap::default(),
            unrestricted: Bucket::default(),
            base: Bucket::default(),
            by_method: StrMap::default(),
            by_category: StrMap::default(),
            external_auth: None,
            cel_uses: Uses::default(),
            considered: Arc::from(""),
        }
    }

    /// Adds a rule of policy `policy_number`: its matchers compiled, filed under its source and
    /// its MCP methods. `params`: each method's params, to size its map ([`param_sizes`]).
    fn add_rule(
        &mut self,
        policy_number: usize,
        rule: &RulePlan,
        params: &StrMap<(usize, usize)>,
        err: &impl Fn(String) -> PlanError,
    ) -> Result<(), PlanError> {
        let ordinal = u32::try_from(self.rules.len()).map_err(|_| err("too many rules".into()))?;
        let rerr = |problem: String| err(format!("rule {:?}: {problem}", rule.name));
        let http = if rule.http.is_any() {
            None
        } else {
            Some(Box::new(CompiledHttp::compile(&rule.http).map_err(rerr)?))
        };
        let principal = match rule.principal.as_deref() {
            None => ANY_SOURCE,
            Some(p) if !p.starts_with("spiffe://") => {
                return Err(rerr(format!(
                    "principal {:?} is not a SPIFFE ID",
                    rule.principal.as_deref()
                )))
            }
            Some(p) => {
                let next = u32::try_from(self.principals.len() + 1)
                    .map_err(|_| err("too many principals".into()))?;
                *self.principals.get_or_insert_with(p, || next)
            }
        };
        match &rule.mcp {
            None => self.unrestricted.push(principal, ordinal),
            Some(mcp) => self.file_mcp(mcp, (principal, ordinal), params, &rerr)?,
        }
        let cel = match &rule.cel {
            None => None,
            Some(expression) => {
                let compiled = crate::cel_rule::compile(expression)
                    .map_err(|e| rerr(format!("CEL expression {expression:?}: {e}")))?;
                self.cel_uses = self.cel_uses.union(compiled.uses);
                Some(Box::new(compiled))
            }
        };
        let name = self.push_name(&rule.name);
        self.rules.push(IndexedRule {
            policy: policy_number,
            name,
            principal,
            http,
            cel,
        });
        Ok(())
    }

    /// Files a rule (its principal number and ordinal) under what its MCP matcher names:
    /// the base protocol, method categories, methods with or without params.
    fn file_mcp(
        &mut self,
        mcp: &McpMatch,
        (principal, ordinal): (u32, u32),
        params: &StrMap<(usize, usize)>,
        rerr: &impl Fn(String) -> PlanError,
    ) -> Result<(), PlanError> {
        if !mcp.base_protocol && mcp.methods.is_empty() {
            return Err(rerr(
                "mcp matcher with no methods and no base protocol matches nothing; omit it instead"
                    .into(),
            ));
        }
        if mcp.base_protocol {
            self.base.push(principal, ordinal);
        }
        for m in &mcp.methods {
            match &m.method {
                MethodPattern::Category(c) => {
                    if !METHOD_CATEGORIES.contains(&c.as_str()) {
                        return Err(rerr(format!("unknown MCP method category {c:?}")));
                    }
                    if !m.params.is_empty() {
                        return Err(rerr(format!("params are not allowed on category {c:?}")));
                    }
                    self.by_category
                        .get_or_insert_with(c, Bucket::default)
                        .push(principal, ordinal);
                }
                MethodPattern::Exact(method) => {
                    let mi = self.by_method.get_or_insert_with(method, || {
                        let (keys, bytes) = params.get(method).copied().unwrap_or_default();
                        let by_param = StrMap::with_capacity(keys, bytes);
                        MethodIndex {
                            any_param: Bucket::default(),
                            by_param,
                        }
                    });
                    if m.params.is_empty() {
                        mi.any_param.push(principal, ordinal);
                    }
                    for param in &m.params {
                        mi.by_param
                            .get_or_insert_with(param, Bucket::default)
                            .push(principal, ordinal);
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn buckets_mut(&mut self) -> impl Iterator<Item = &mut Bucket> {
        let by_method = self.by_method.values_mut().flat_map(|m| {
            [&mut m.any_param]
                .into_iter()
                .chain(m.by_param.values_mut())
        });
        [&mut self.unrestricted, &mut self.base]
            .into_iter()
            .chain(self.by_category.values_mut())
            .chain(by_method)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.policies.is_empty() && self.external_auth.is_none()
    }

    pub(super) fn push_name(&mut self, name: &str) -> Name {
        let start = self.names.len();
        self.names.push_str(name);
        Name {
            start,
            end: self.names.len(),
        }
    }

    pub(super) fn name(&self, name: Name) -> &str {
        self.names.get(name.start..name.end).unwrap_or_default()
    }

    /// The level's Allow policies with their rules' names, for a denial that none matched:
    /// `ns/a (r1, r2), ns/b (r3)`, at most [`NAMED`] of each (the rest counted).
    fn considered_text(&self) -> String {
        let mut out = String::new();
        for (i, &policy) in self.policies.iter().enumerate().take(NAMED) {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(self.name(policy));
            let rules: Vec<&str> = self
                .rules
                .iter()
                .filter(|r| r.policy == i)
                .map(|r| self.name(r.name))
                .collect();
            if !rules.is_empty() {
                out.push_str(" (");
                out.push_str(&rules[..rules.len().min(NAMED)].join(", "));
                if rules.len() > NAMED {
                    out.push_str(&format!(" and {} more", rules.len() - NAMED));
                }
                out.push(')');
            }
        }
        if self.policies.len() > NAMED {
            out.push_str(&format!(" and {} more", self.policies.len() - NAMED));
        }
        out
    }

    pub(super) fn policy_name(&self, rule: &IndexedRule) -> &str {
        self.policies.get(rule.policy).map_or("", |&p| self.name(p))
    }

    /// The first rule of the level (in evaluation order) that matches. `trace` sees each candidate
    /// evaluated, then the level done.
    pub(super) fn first_match<T: IndexTrace>(
        &self,
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        trace: &mut T,
    ) -> Option<&IndexedRule> {
        let method = match subject {
            Subject::Http | Subject::BaseHttp => None,
            Subject::Message(msg) | Subject::Listed(msg) => msg.method.as_deref(),
        };
        self.first_match_in(&self.candidates(req, method), req, subject, trace)
    }

    /// What of the index a subject's candidates come from that depends only on the caller and the
    /// method (`method`: the message's, None for another subject): resolved once, it serves every
    /// entry of a list response ([`super::route::ListJudge`]).
    pub(super) fn candidates(&self, req: &HttpRequest<'_>, method: Option<&str>) -> Candidates<'_> {
        let caller = req.principal.and_then(|p| self.principals.get(p)).copied();
        let Some(method) = method else {
            return Candidates {
                caller,
                base: true,
                method: None,
                category: None,
            };
        };
        // The category: what precedes the first `/` (a byte search; `split_once` runs str's
        // generic pattern searcher).
        let category = if self.by_category.is_empty() {
            None
        } else {
            method
                .bytes()
                .position(|c| c == b'/')
                .and_then(|i| method.get(..i))
        };
        Candidates {
            caller,
            base: is_base_method(method),
            method: self.by_method.get(method),
            category: category.and_then(|c| self.by_category.get(c)),
        }
    }

    /// [`LevelIndex::first_match`] with the caller's and the method's part of the index resolved
    /// (`found`, by [`LevelIndex::candidates`] for this subject's method).
    pub(super) fn first_match_in<T: IndexTrace>(
        &self,
        found: &Candidates<'_>,
        req: &HttpRequest<'_>,
        subject: &Subject<'_, '_>,
        trace: &mut T,
    ) -> Option<&IndexedRule> {
        let mut best = None;
        let caller = found.caller;
        let mut probe = |bucket: &Bucket| {
            bucket.first_match(&self.rules, req, subject, caller, &mut best, &mut *trace)
        };
        probe(&self.unrestricted);
        match subject {
            Subject::Http => {}
            Subject::BaseHttp => probe(&self.base),
            // A message without a method is a client-sent JSON-RPC response (sampling,
            // elicitation): base protocol, as `found.base` says.
            Subject::Message(msg) | Subject::Listed(msg) => {
                if found.base {
                    probe(&self.base);
                }
                if let Some(m) = found.method {
                    probe(&m.any_param);
                    if let Some(b) = param_of(msg).and_then(|param| m.by_param.get(param)) {
                        probe(b);
                    }
                }
                if let Some(b) = found.category {
                    probe(b);
                }
            }
        }
        trace.level_done(self, (caller, req.principal), subject);
        best.and_then(|o| self.rules.get(o as usize))
    }
}

/// The part of a level's index that a subject's candidate rules come from, as far as it depends on
/// the caller and the method only ([`LevelIndex::candidates`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidates<'i> {
    /// The caller's principal number, if a rule of the level names it.
    caller: Option<u32>,
    /// Whether the base-protocol rules are candidates.
    base: bool,
    /// The rules naming the method.
    method: Option<&'i MethodIndex>,
    /// The rules naming its category.
    category: Option<&'i Bucket>,
}
