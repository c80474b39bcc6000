//! The evaluator: a [`CompiledPlan`] validated and indexed for deciding requests (docs/semantics.md §3).
//!
//! Loading builds, per level, candidate lists keyed by what a request can be looked up by (MCP
//! method, `params.name`/`params.uri`, caller principal). Deciding a message therefore costs a few
//! hash lookups plus the rules that really are candidates, whatever the number of policies, and
//! allocates nothing in proportion to the plan.
//!
//! Here: loading, and the levels in force for a route. `route` decides step by step up to
//! authorizer calls, `decision` holds what a decision yields, `index` the per-level candidate
//! lists, `http` the compiled HTTP matchers, `mcp_headers` the `Mcp-*` header check, `trace` the
//! record of why a walk decided (what `toolgate explain` prints). Each imports only those before it
//! in this order: `decision`, `mcp_headers`, `http`, `index`, `route`, `trace` (the walk reports to
//! a `route::Trace`, which the record implements).

mod decision;
mod http;
mod index;
mod mcp_headers;
pub(crate) use mcp_headers::is_base_method;
mod route;
mod trace;

pub use crate::http_request::HttpRequest;
/// Compiles an RE2 expression that must match the whole input (policy path and header matchers).
pub use crate::re2::full_match_regex;
pub use decision::{AuthzFailure, Decision, DenyReason, Level, RuleRef, Verdict, MAX_AUTHZ_CALLS};
pub use http::{host_matches_any, host_suffix_covers, path_prefix_matches};
use index::LevelIndex;
pub use mcp_headers::{mcp_header_value, HEADERS_READ};
pub use route::{AuthzCall, ListJudge, Route, Step};
pub use trace::{
    HeaderRecord, LevelRecord, MessageRecord, Record, RuleRecord, WalkEnd, WalkRecord,
};

use crate::cel_rule::Uses;
use crate::mcp::{McpBody, NotMcp};
use crate::plan::{
    json_content_hash, CompiledPlan, LevelPlan, McpMatch, PolicyPlan, RulePlan, PLAN_VERSION,
};
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
    Policy {
        level: String,
        policy: String,
        problem: String,
    },
    #[error(
        "settings.listFiltering is on, but this module was built without the response callbacks \
             (toolgate_filter_no_list_filtering.wasm): render with --list-filtering off, or load toolgate_filter.wasm"
    )]
    ListFilteringUnsupported,
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
    /// where no enforced policy applies, and the plan it was built from (for the record of a walk).
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
        mcp: Some(McpMatch {
            base_protocol: true,
            methods: Vec::new(),
        }),
        ..RulePlan::default()
    };
    LevelPlan {
        external_auth: None,
        allow: vec![PolicyPlan {
            name: DEFAULT_DENY_POLICY.into(),
            rules: vec![rule],
            dry_run: false,
        }],
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
            return Err(PlanError::Version {
                found: plan.version,
            });
        }
        // Re-serialising the plan to hash it costs as much as parsing it: hash the text when it
        // is the serialisation the hash was made of (compact or pretty), else the re-serialisation
        // (e.g. a control plane re-formatted the JSON).
        if !plan.hash.is_empty() && json.is_none_or(|json| json_content_hash(json) != plan.hash) {
            let actual = plan.content_hash();
            if actual != plan.hash {
                return Err(PlanError::Hash {
                    declared: plan.hash.clone(),
                    actual,
                });
            }
        }
        let limit = plan.settings.max_body_bytes;
        if limit == 0 || limit > MAX_BODY_LIMIT {
            return Err(PlanError::BodyLimit(limit));
        }
        // A level with dry-run policies is indexed twice: as enforced, and with them (the shadow).
        let build = |level: Level,
                     plan: &LevelPlan|
         -> Result<(LevelIndex, Option<LevelIndex>), PlanError> {
            if plan.has_dry_run() {
                let shadow = LevelIndex::build(level, plan)?;
                Ok((LevelIndex::build(level, &plan.enforced())?, Some(shadow)))
            } else {
                Ok((LevelIndex::build(level, plan)?, None))
            }
        };
        let (gateway, shadow_gateway) = build(Level::Gateway, &plan.gateway)?;
        let mut backends = StrMap::with_capacity(
            plan.backends.len(),
            plan.backends.keys().map(String::len).sum(),
        );
        let mut shadow_backends = StrMap::default();
        for (cluster, level) in &plan.backends {
            let (index, shadow) = build(Level::Backend, level)?;
            // Clusters are distinct (map keys): this inserts.
            backends.get_or_insert_with(cluster, || index);
            if let Some(shadow) = shadow {
                shadow_backends.get_or_insert_with(cluster, || shadow);
            }
        }
        let shadow = (shadow_gateway.is_some() || !shadow_backends.is_empty()).then(|| {
            Box::new(ShadowLevels {
                gateway: shadow_gateway,
                backends: shadow_backends,
            })
        });
        for host in plan
            .settings
            .default_deny_except_hosts
            .iter()
            .chain(&plan.settings.default_deny_except_server_names)
        {
            if let crate::plan::HostMatch::Suffix(s) = host {
                if !s.starts_with('.') {
                    return Err(PlanError::Syntax(format!(
                        "settings.defaultDenyExceptHosts: suffix {s:?} must start with '.'"
                    )));
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
        Ok(Self {
            plan,
            gateway,
            backends,
            shadow,
            default_deny,
        })
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
        self.backends
            .values()
            .map(|l| l.cel_uses)
            .fold(self.gateway.cel_uses, Uses::union)
    }

    /// The levels in force for a request routed to `cluster`. Where none is and the plan denies by
    /// default, the default-deny level (docs/semantics.md §6a).
    pub fn route(&self, cluster: Option<&str>) -> Route<'_> {
        let gateway = Some(&self.gateway).filter(|l| !l.is_empty());
        let backend = cluster
            .and_then(|c| self.backends.get_key_value(c))
            .filter(|(_, l)| !l.is_empty());
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
        let gateway = shadow
            .gateway
            .as_ref()
            .or(Some(&self.gateway))
            .filter(|l| !l.is_empty());
        let backend = backend_shadow
            .or_else(|| cluster.and_then(|c| self.backends.get_key_value(c)))
            .filter(|(_, l)| !l.is_empty());
        Some(Route {
            levels: [gateway, backend.map(|(_, l)| l)],
            plan: &self.plan,
            cluster: backend.map(|(c, _)| c),
            dry_run: true,
            default_deny: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LevelPlan, PolicyPlan, RulePlan};

    fn sealed_plan() -> CompiledPlan {
        let rule = RulePlan {
            name: "r".into(),
            principal: Some("spiffe://td/ns/a/sa/b".into()),
            ..Default::default()
        };
        let mut plan = CompiledPlan::empty("ns/gw/l");
        plan.gateway.allow.push(PolicyPlan {
            name: "ns/p".into(),
            rules: vec![rule.clone()],
            dry_run: false,
        });
        let backend = PolicyPlan {
            name: "ns/b".into(),
            rules: vec![rule],
            dry_run: false,
        };
        plan.backends.insert(
            "xbackend/ns/b".into(),
            LevelPlan {
                allow: vec![backend],
                ..Default::default()
            },
        );
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
        let expected = PlanError::Hash {
            declared: plan.hash.clone(),
            actual: tampered.content_hash(),
        };
        let compact = serde_json::to_string(&tampered).unwrap();
        let pretty = serde_json::to_string_pretty(&tampered).unwrap();
        let value: serde_json::Value = serde_json::from_str(&compact).unwrap();
        for json in [compact, pretty, serde_json::to_string(&value).unwrap()] {
            assert_eq!(
                Evaluator::load(json.as_bytes()).unwrap_err(),
                expected,
                "{json}"
            );
        }
        // The hash itself altered.
        let json = serde_json::to_string(&plan)
            .unwrap()
            .replace(&plan.hash, &"0".repeat(64));
        assert!(matches!(
            Evaluator::load(json.as_bytes()),
            Err(PlanError::Hash { .. })
        ));
        // The version is checked first.
        let json = serde_json::to_string(&plan)
            .unwrap()
            .replace(r#""version":1"#, r#""version":2"#);
        assert_eq!(
            Evaluator::load(json.as_bytes()).unwrap_err(),
            PlanError::Version { found: 2 }
        );
    }

    #[test]
    fn allow_summaries() {
        let mut d = Decision {
            verdict: Verdict::Allow,
            under_policy: true,
            message: None,
            gateway_rule: Some(RuleRef {
                policy: "ns/p",
                rule: "r1",
            }),
            backend_rule: None,
            not_mcp: None,
            authorized: [None, None],
        };
        assert_eq!(d.summary(), "allow gateway=ns/p:r1 backend=-");
        d.backend_rule = Some(RuleRef {
            policy: "ns/b",
            rule: "(all requests)",
        });
        assert_eq!(
            d.summary(),
            "allow gateway=ns/p:r1 backend=ns/b:(all requests)"
        );
        d.gateway_rule = None;
        assert_eq!(d.summary(), "allow gateway=- backend=ns/b:(all requests)");
        d.under_policy = false;
        assert_eq!(d.summary(), "allow (no policy)");
    }
}
