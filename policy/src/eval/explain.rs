//! Why each rule matches or not: the slow path behind `toolgate explain`. The decision itself
//! always comes from [`Route::decide`] / [`Route::step`].

use super::index::{cel_matches, IndexedRule, LevelIndex};
use super::{is_base_http, is_base_method, param_of, BodyInput, HttpRequest, Level, Route, Subject};
use crate::plan::{LevelPlan, MethodPattern, RulePlan};

impl Route<'_> {
    /// Why each rule of the levels in force matches or not, per message: the slow path behind
    /// `toolgate explain` (the decision itself always comes from [`Route::decide`]). A
    /// `subscriptions/listen` is followed by the `resources/subscribe` of each of its URIs, as
    /// [`Route::step`] judges it.
    pub fn explain(&self, req: &HttpRequest<'_>, body: BodyInput<'_, '_>) -> Vec<MessageExplanation> {
        let expanded: Vec<(Option<usize>, Vec<crate::mcp::McpMessage<'_>>)> = match body {
            BodyInput::Mcp(mcp) => {
                let batch = mcp.is_batch();
                mcp.messages().iter().enumerate().map(|(i, m)| (batch.then_some(i), m.listen_subscribes().collect())).collect()
            }
            _ => Vec::new(),
        };
        // (index in a batch, subject, the URI when it is a listen's subscription)
        let subjects: Vec<(Option<usize>, Subject<'_, '_>, Option<&str>)> = match body {
            BodyInput::Mcp(mcp) => mcp
                .messages()
                .iter()
                .zip(&expanded)
                .flat_map(|(m, (index, subscribes))| {
                    std::iter::once((*index, Subject::Message(m), None))
                        .chain(subscribes.iter().map(|s| (*index, Subject::Message(s), s.uri.as_deref())))
                })
                .collect(),
            BodyInput::None if is_base_http(req) => vec![(None, Subject::BaseHttp, None)],
            _ => vec![(None, Subject::Http, None)],
        };
        let plans = match self.default_deny {
            Some(level) => [Some(level), None],
            None => [Some(&self.plan.gateway), self.cluster.and_then(|c| self.plan.backends.get(c))],
        };
        let dry_run = self.dry_run;
        let levels: Vec<(&LevelIndex, &LevelPlan)> =
            self.levels.iter().zip(plans).filter_map(|(index, plan)| Some(((*index)?, plan?))).collect();
        subjects
            .iter()
            .map(|(index, subject, listened)| MessageExplanation {
                message: *index,
                what: match listened {
                    Some(uri) => format!("resourceSubscriptions {uri:?}, judged as {}", subject.describe()),
                    None => subject.describe(),
                },
                levels: levels
                    .iter()
                    .map(|(index, plan)| LevelExplanation {
                        level: index.level,
                        // The index holds the plan's rules in the same (flattened) order.
                        rules: plan
                            .allow
                            .iter()
                            // The index holds the enforced policies, or all of them on a shadow route.
                            .filter(|policy| dry_run || !policy.dry_run)
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
            Subject::Message(m) | Subject::Listed(m) => match m.method.as_deref() {
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
            Subject::Message(m) | Subject::Listed(m) => m.method.as_deref().is_none_or(is_base_method),
        };
        if base && mcp.base_protocol {
            return Ok(());
        }
        if let Subject::Message(m) | Subject::Listed(m) = subject {
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
