//! What deciding a request yields: the verdict, why a request was denied, the rules and
//! authorizers that allowed it, and the one-line summary the access log prints.

use std::sync::Arc;

use crate::log_safe::ShownText;

/// At most this many authorizer calls are made for one request (a batch makes one per element that
/// triggers an ExternalAuth policy, per level); a request that needs more is denied.
pub const MAX_AUTHZ_CALLS: u32 = 32;

/// Where a policy sits (docs/semantics.md §2).
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
    /// Allow policies exist at the level and none of their rules matched. `request`: what was
    /// asked (`tools/call 'get-env'`, `GET '/path'`; request-derived text quoted, log_safe.rs);
    /// `considered`: the level's Allow policies and their rules (`ns/p (r1, r2)`). Both empty
    /// where nothing was evaluated (no plan).
    NoRuleMatched {
        level: Level,
        policies: usize,
        request: ShownText,
        considered: Arc<str>,
    },
    /// `Mcp-Method` / `Mcp-Name` headers disagree with the body.
    McpHeaderMismatch { header: &'static str },
    /// The level's ExternalAuth policy (`namespace/name`) called its authorizer, which did not allow.
    ExternalAuth {
        level: Level,
        policy: String,
        failure: AuthzFailure,
    },
    /// The request would need more than [`MAX_AUTHZ_CALLS`] authorizer calls.
    TooManyAuthorizerCalls { level: Level },
    /// No policy applies to the route, the plan denies by default, and the request is not the base
    /// protocol (docs/semantics.md §6a).
    DefaultDeny,
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
                let rules: usize = [&self.gateway_rule, &self.backend_rule]
                    .iter()
                    .flat_map(|r| r.iter())
                    .map(|r| r.policy.len() + r.rule.len())
                    .sum();
                let authorized: usize = self.authorized.iter().flatten().map(|p| p.len() + 1).sum();
                let mut out = String::with_capacity(
                    32 + rules + authorized + if authorized > 0 { 15 } else { 0 },
                );
                out.push_str("allow gateway=");
                for (i, rule) in [&self.gateway_rule, &self.backend_rule]
                    .into_iter()
                    .enumerate()
                {
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
                let mut at = self
                    .message
                    .map(|i| format!(" (batch element {i})"))
                    .unwrap_or_default();
                if let Some(why) = &self.not_mcp {
                    at.push_str(&format!(" (body is not MCP: {why})"));
                }
                match reason {
                    DenyReason::NoRuleMatched {
                        level,
                        policies,
                        request,
                        considered,
                    } if !considered.is_empty() => format!(
                        "deny {}: {request} matched no rule of {considered}{at}",
                        level.as_str(),
                    ),
                    DenyReason::NoRuleMatched {
                        level, policies, ..
                    } => format!(
                        "deny {}: no rule of {policies} allow polic{} matched{at}",
                        level.as_str(),
                        if *policies == 1 { "y" } else { "ies" }
                    ),
                    DenyReason::McpHeaderMismatch { header } => {
                        format!("deny: {header} header does not match the body{at}")
                    }
                    DenyReason::ExternalAuth {
                        level,
                        policy,
                        failure,
                    } => {
                        format!(
                            "deny {}: the authorizer of {policy} {}{at}",
                            level.as_str(),
                            failure.describe()
                        )
                    }
                    DenyReason::DefaultDeny => format!("deny: no policy (default deny){at}"),
                    DenyReason::TooManyAuthorizerCalls { level } => {
                        format!("deny {}: the request needs more than {MAX_AUTHZ_CALLS} authorizer calls{at}", level.as_str())
                    }
                }
            }
        }
    }
}
