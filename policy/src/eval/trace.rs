//! Why the engine decided, as the walk of [`Route::step`] met it: the `Mcp-*` header comparisons,
//! each message (or the request without an MCP body), and per level the ExternalAuth policy and
//! every rule with whether it matched and, if not, why. The record is made by the one evaluation
//! the filter runs (docs/semantics.md §7, `toolgate explain`): the walk is generic over
//! [`super::route::Trace`] (with the parts its lookups and header check report through), and the
//! filter's instance is [`super::route::NoTrace`], whose methods are empty and compiled away, so the
//! filter neither allocates nor branches for a record nobody asked for. A [`Record`] is asked for
//! through [`crate::lifecycle::Host::recorder`]. This module is above the walk: it reads the route,
//! the index and the messages to say what they met.

use super::index::{IndexTrace, LevelIndex, Miss, Subject, ANY_SOURCE};
use super::mcp_headers::{param_of, HeaderCheck, HeaderTrace};
use super::route::Trace;
use super::{BodyInput, Decision, HttpRequest, Level, Route, Step};
use crate::mcp::McpMessage;
use crate::plan::RulePlan;

/// What the walks of one request met: the enforced route's last walk, and the shadow route's
/// (docs/semantics.md §6a). Each walk replaces the previous one of its route: after an authorizer
/// call the lifecycle walks again from the start, and the last walk is the one that decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub enforced: Option<WalkRecord>,
    pub shadow: Option<WalkRecord>,
    /// The level being walked: its rules' outcomes, filled in as candidates are evaluated.
    scratch: Vec<Pending>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    rule: RuleRecord,
    /// The rule's source, as the index numbers it, and as the plan names it.
    principal: u32,
    principal_name: Option<String>,
    cel: Option<String>,
    /// Evaluated as a candidate (else it was not one).
    outcome: Option<Result<(), String>>,
}

/// One walk of a route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkRecord {
    /// The route's levels include dry-run policies; they are these (`namespace/name`).
    pub dry_run_policies: Vec<String>,
    /// Some policy applies (the walk stops at once otherwise).
    pub under_policy: bool,
    /// No policy applies and the plan denies by default.
    pub default_deny: bool,
    /// Another listener's host on a shared port, which the default deny lets through.
    pub excepted_host: bool,
    /// The body could not be read as MCP: why.
    pub not_mcp: Option<String>,
    pub headers: Vec<HeaderRecord>,
    pub messages: Vec<MessageRecord>,
    /// How the walk ended.
    pub end: Option<WalkEnd>,
}

/// One `Mcp-*` header comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderRecord {
    /// The batch element compared with.
    pub message: Option<usize>,
    /// `Mcp-Method`, `Mcp-Name` or `MCP-Protocol-Version`.
    pub header: &'static str,
    pub agrees: bool,
    /// What was compared, e.g. `"tools/list" DISAGREES with the body's method ("tools/call")`.
    pub text: String,
}

/// A message (or the request without an MCP body) and what each level found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRecord {
    /// Index in a batch.
    pub message: Option<usize>,
    /// e.g. `tools/call "get-sum"`.
    pub what: String,
    pub levels: Vec<LevelRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelRecord {
    pub level: Level,
    /// The level's ExternalAuth policy and whether its rules apply to the message (its authorizer
    /// is then asked).
    pub external_auth: Option<(String, bool)>,
    /// The Allow policies' rules in evaluation order (none: no Allow policy at this level).
    pub rules: Vec<RuleRecord>,
}

impl LevelRecord {
    /// Whether the level allows (a rule matches, or it has no Allow policy).
    pub fn allows(&self) -> bool {
        self.rules.is_empty() || self.rules.iter().any(|r| r.outcome.is_ok())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRecord {
    pub policy: String,
    pub rule: String,
    /// Ok when the rule matches; otherwise the matcher that failed and why.
    pub outcome: Result<(), String>,
}

/// How a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// Decided: allowed or not, and the decision's summary.
    Decided { allowed: bool, summary: String },
    /// At an authorizer call (the lifecycle makes it, then walks again).
    Authorize { level: Level, policy: String },
}

impl Record {
    /// The last walk recorded: the shadow route's when there is one, else the enforced route's.
    pub fn last(&self) -> Option<&WalkRecord> {
        self.shadow.as_ref().or(self.enforced.as_ref())
    }

    fn walking(&mut self) -> Option<&mut WalkRecord> {
        // The walk in progress is the one without an end.
        [self.shadow.as_mut(), self.enforced.as_mut()]
            .into_iter()
            .flatten()
            .find(|w| w.end.is_none())
    }
}

impl IndexTrace for Record {
    const ON: bool = true;

    fn candidate(&mut self, ordinal: u32, outcome: Result<(), Miss>) {
        let Some(p) = self.scratch.get_mut(ordinal as usize) else {
            return;
        };
        p.outcome = Some(outcome.map_err(|miss| match miss {
            Miss::Http(name) => format!("{name}: the request does not match"),
            Miss::Cel => format!(
                "cel: {:?} is not true for this request",
                p.cel.as_deref().unwrap_or("")
            ),
        }));
    }

    fn level_done(
        &mut self,
        index: &LevelIndex,
        (caller, caller_name): (Option<u32>, Option<&str>),
        subject: &Subject<'_, '_>,
    ) {
        // A rule that was not a candidate names another source, or its MCP matcher does not
        // hold (the index files rules by source and by MCP method).
        let rules = std::mem::take(&mut self.scratch)
            .into_iter()
            .map(|p| {
                let outcome = p.outcome.unwrap_or_else(|| {
                    if p.principal != ANY_SOURCE && Some(p.principal) != caller {
                        let wanted = p.principal_name.as_deref().unwrap_or("");
                        return Err(match caller_name {
                            Some(c) => format!("source: caller {c} is not {wanted}"),
                            None => {
                                format!("source: the caller has no identity (rule wants {wanted})")
                            }
                        });
                    }
                    Err(subject.mcp_miss().to_string())
                });
                RuleRecord { outcome, ..p.rule }
            })
            .collect();
        if let Some(m) = self.walking().and_then(|w| w.messages.last_mut()) {
            match m.levels.last_mut() {
                Some(l)
                    if l.level == index.level
                        && l.rules.is_empty()
                        && l.external_auth.is_some() =>
                {
                    l.rules = rules
                }
                _ => m.levels.push(LevelRecord {
                    level: index.level,
                    external_auth: None,
                    rules,
                }),
            }
        }
    }
}

impl HeaderTrace for Record {
    fn header(&mut self, message: Option<usize>, msg: &McpMessage<'_>, check: HeaderCheck<'_>) {
        let (header, agrees, text) = match check {
            HeaderCheck::Repeated { header, times } => {
                (header, false, format!("sent {times} times: a mismatch (a server may read another field than this check)"))
            }
            HeaderCheck::NothingToCompare { header, sent } => {
                (header, true, format!("{sent:?}; the body has no params._meta protocol version: nothing to compare"))
            }
            HeaderCheck::Compared { header, sent, decoded, agrees } => {
                let (field, body) = match header {
                    "Mcp-Method" => ("method", msg.method.as_deref()),
                    "MCP-Protocol-Version" => ("params._meta protocolVersion", msg.protocol_version.as_deref()),
                    _ if msg.method.as_deref().is_some_and(|m| m.starts_with("resources/")) => ("params.uri", param_of(msg)),
                    _ => ("params.name", param_of(msg)),
                };
                let shown = match decoded {
                    Some(d) if d != sent => format!("{sent:?} (decoded {d:?})"),
                    Some(_) => format!("{sent:?}"),
                    None => format!("{sent:?} (not valid base64 UTF-8)"),
                };
                let text = if agrees {
                    format!("{shown} agrees with the body's {field}")
                } else {
                    let body = body.map_or_else(|| "absent".to_string(), |b| format!("{b:?}"));
                    format!("{shown} DISAGREES with the body's {field} ({body})")
                };
                (header, agrees, text)
            }
        };
        if let Some(w) = self.walking() {
            w.headers.push(HeaderRecord {
                message,
                header,
                agrees,
                text,
            });
        }
    }
}

impl Trace for Record {
    fn walk(&mut self, route: &Route<'_>, body: BodyInput<'_, '_>) {
        let walk = WalkRecord {
            dry_run_policies: route
                .dry_run_policies()
                .into_iter()
                .map(str::to_string)
                .collect(),
            under_policy: route.under_policy(),
            default_deny: route.is_default_deny(),
            not_mcp: match body {
                BodyInput::NotMcp(e) => Some(e.to_string()),
                _ => None,
            },
            ..WalkRecord::default()
        };
        if route.is_shadow() {
            self.shadow = Some(walk);
        } else {
            self.enforced = Some(walk);
            self.shadow = None;
        }
    }

    fn excepted_host(&mut self) {
        if let Some(w) = self.walking() {
            w.excepted_host = true;
        }
    }

    fn subject(
        &mut self,
        message: Option<usize>,
        subject: &Subject<'_, '_>,
        listened: Option<&str>,
    ) {
        let what = match listened {
            Some(uri) => format!(
                "resourceSubscriptions {uri:?}, judged as {}",
                subject.describe()
            ),
            None => subject.describe(),
        };
        if let Some(w) = self.walking() {
            w.messages.push(MessageRecord {
                message,
                what,
                levels: Vec::new(),
            });
        }
    }

    fn external_auth(&mut self, level: Level, policy: &str, applies: bool) {
        if let Some(m) = self.walking().and_then(|w| w.messages.last_mut()) {
            m.levels.push(LevelRecord {
                level,
                external_auth: Some((policy.to_string(), applies)),
                rules: Vec::new(),
            });
        }
    }

    fn level<'r>(&mut self, index: &LevelIndex, rules: impl Iterator<Item = &'r RulePlan>) {
        // The index holds the plan's rules in the same (flattened) order.
        self.scratch = index
            .rules
            .iter()
            .zip(rules)
            .map(|(indexed, plan)| Pending {
                rule: RuleRecord {
                    policy: index.policy_name(indexed).to_string(),
                    rule: index.name(indexed.name).to_string(),
                    outcome: Ok(()),
                },
                principal: indexed.principal,
                principal_name: plan.principal.clone(),
                cel: plan.cel.clone(),
                outcome: None,
            })
            .collect();
    }

    fn end(&mut self, step: &Step<'_>) {
        let end = match step {
            Step::Decided(d) => WalkEnd::Decided {
                allowed: d.allowed(),
                summary: d.summary(),
            },
            Step::Authorize(call) => WalkEnd::Authorize {
                level: call.level,
                policy: call.policy.to_string(),
            },
        };
        if let Some(w) = self.walking() {
            w.end = Some(end);
        }
    }
}

/// The walk with a record: what `toolgate explain` and the lifecycle's recorder use.
impl<'e> Route<'e> {
    /// [`Route::decide`], recording in `record` why (its last walk is the one that decided).
    pub fn decide_recorded(
        &self,
        req: &HttpRequest<'_>,
        body: BodyInput<'_, '_>,
        record: &mut Record,
    ) -> Decision<'e> {
        let mut authorized = 0;
        loop {
            match self.walk(req, body, authorized, record) {
                Step::Decided(decision) => return decision,
                Step::Authorize(_) => authorized += 1,
            }
        }
    }

    /// [`Route::step`], recording in `record` why it decides (what `toolgate explain` prints): the
    /// same walk, which also evaluates the candidate rules after the first that matches.
    pub fn step_recorded(
        &self,
        req: &HttpRequest<'_>,
        body: BodyInput<'_, '_>,
        authorized: u32,
        record: &mut Record,
    ) -> Step<'e> {
        self.walk(req, body, authorized, record)
    }
}

impl Subject<'_, '_> {
    fn describe(&self) -> String {
        match self {
            Subject::BaseHttp => {
                "HTTP request of the MCP base protocol (GET stream or DELETE session)".into()
            }
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

    /// Why a rule whose source matches was not a candidate for this subject: its MCP matcher.
    fn mcp_miss(&self) -> &'static str {
        let base = match self {
            Subject::Http => return "mcp: the request has no readable MCP body",
            Subject::BaseHttp => true,
            Subject::Message(m) | Subject::Listed(m) => m
                .method
                .as_deref()
                .is_none_or(super::mcp_headers::is_base_method),
        };
        if base {
            "mcp: a base-protocol message, but the rule does not MATCH_BASE_PROTOCOL_METHODS"
        } else {
            "mcp: no listed method (and params) matches"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{Evaluator, HttpRequest};
    use crate::mcp::{read_body, ReadOptions};
    use crate::plan::{CompiledPlan, McpMatch, PolicyPlan};

    fn walk(headers: &[(&str, &str)], body: &str) -> (bool, WalkRecord) {
        let rule = RulePlan {
            name: "base".into(),
            mcp: Some(McpMatch {
                base_protocol: true,
                methods: Vec::new(),
            }),
            ..RulePlan::default()
        };
        let mut plan = CompiledPlan::empty("ns/gw/l");
        plan.gateway.allow.push(PolicyPlan {
            name: "ns/p".into(),
            rules: vec![rule],
            dry_run: false,
        });
        let ev = Evaluator::from_plan(plan).unwrap();
        let req = HttpRequest {
            method: "POST",
            path: "/mcp",
            authority: "gw",
            port: 80,
            headers,
            principal: None,
            server_name: None,
            auth: None,
            time_ms: 0,
        };
        let read = read_body(body.as_bytes(), ReadOptions::default()).unwrap();
        let mut record = Record::default();
        let d = ev
            .route(None)
            .decide_recorded(&req, BodyInput::Mcp(&read), &mut record);
        assert_eq!(d, ev.route(None).decide(&req, BodyInput::Mcp(&read)));
        (d.allowed(), record.enforced.unwrap())
    }

    #[test]
    fn the_header_check_is_recorded_as_made() {
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let (allowed, w) = walk(
            &[
                ("mcp-method", "ping"),
                ("mcp-protocol-version", "2026-07-28"),
            ],
            ping,
        );
        assert!(allowed);
        let texts: Vec<_> = w
            .headers
            .iter()
            .map(|h| (h.header, h.agrees, h.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                (
                    "Mcp-Method",
                    true,
                    r#""ping" agrees with the body's method"#
                ),
                (
                    "MCP-Protocol-Version",
                    true,
                    r#""2026-07-28"; the body has no params._meta protocol version: nothing to compare"#
                ),
            ]
        );
        assert_eq!(w.messages[0].what, "ping");
        assert_eq!(w.messages[0].levels[0].rules[0].outcome, Ok(()));
        // A repeated field: a mismatch before any rule.
        let (allowed, w) = walk(&[("mcp-method", "ping"), ("mcp-method", "ping")], ping);
        assert!(!allowed && w.messages.is_empty());
        assert_eq!(
            w.headers[0].text,
            "sent 2 times: a mismatch (a server may read another field than this check)"
        );
        // docs/semantics.md §4: an `Mcp-Name` that does not decode matches nothing, not even a
        // message without a name (the filter used to let it pass; the old explain said it disagreed).
        let (allowed, w) = walk(&[("mcp-name", "=?base64?%%%?=")], ping);
        assert!(!allowed && w.messages.is_empty());
        assert_eq!(
            w.headers[0].text,
            r#""=?base64?%%%?=" (not valid base64 UTF-8) DISAGREES with the body's params.name (absent)"#
        );
        assert!(
            matches!(&w.end, Some(WalkEnd::Decided { allowed: false, summary }) if summary.contains("Mcp-Name"))
        );
    }

    #[test]
    fn every_rule_is_shown_with_why_it_did_not_match() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        let (allowed, w) = walk(&[], call);
        assert!(!allowed);
        let level = &w.messages[0].levels[0];
        assert_eq!(
            level.rules[0].outcome,
            Err("mcp: no listed method (and params) matches".into())
        );
        assert!(!level.allows());
    }
}
