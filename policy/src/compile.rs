//! Compiling one `XAccessPolicy` spec into plan data ([`PolicyPlan`]).
//!
//! This is the per-policy half of compilation: sources become principals, inline matchers become
//! ready-to-run matchers. Which policies apply to which listener and backend (topology) is the
//! controller's job. Schema-level validation (the CRD rules) runs before this; the checks here are
//! the ones a schema cannot express (regular expressions that compile, sources that agree with
//! their type, actions this version enforces).

use crate::api::{
    AccessPolicySpec, AccessRule, AuthorizationRule, AuthorizationRuleType, BaseProtocolMethodsOption,
    HeaderMatchType, PathMatchType, PolicyAction, SourceType,
};
use crate::eval::full_match_regex;
use crate::plan::{
    HeaderMatch, HostMatch, HttpMatch, McpMatch, McpMethodMatch, MethodPattern, PathMatch, PolicyPlan, RulePlan,
    ValueMatch, IMPLICIT_RULE,
};

pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

/// Ends the message of every [`CompileError::Unsupported`], so that status readers can tell a
/// valid-but-unenforced policy from an invalid one.
pub const NOT_ENFORCED: &str = "is not enforced by this version of Toolgate; the policy is not accepted";

#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Trust domain of ServiceAccount sources: `spiffe://<trust domain>/ns/<ns>/sa/<name>`.
    pub trust_domain: String,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self { trust_domain: DEFAULT_TRUST_DOMAIN.to_string() }
    }
}

/// Why a policy cannot be enforced. Each names the field it is about, relative to the policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A semantic error (status reason `Invalid`).
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A CEL expression that does not compile or uses unknown variables (status reason `InvalidCEL`).
    #[error("{field}: {message}")]
    InvalidCel { field: String, message: String },
    /// Valid API, but a feature this version does not enforce (status reason `Invalid`): the
    /// policy is left out rather than enforced partially.
    #[error("{field}: {message}")]
    Unsupported { field: String, message: String },
}

impl CompileError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid { field: field.into(), message: message.into() }
    }
    pub fn field(&self) -> &str {
        match self {
            Self::Invalid { field, .. } | Self::InvalidCel { field, .. } | Self::Unsupported { field, .. } => field,
        }
    }
    /// The status condition reason (SPEC §7).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid { .. } | Self::Unsupported { .. } => "Invalid",
            Self::InvalidCel { .. } => "InvalidCEL",
        }
    }
}

/// Compiles an Allow policy `namespace/name`.
pub fn compile_policy(
    namespace: &str,
    name: &str,
    spec: &AccessPolicySpec,
    opts: &CompileOptions,
) -> Result<PolicyPlan, CompileError> {
    if spec.action != PolicyAction::Allow {
        return Err(CompileError::Unsupported {
            field: "spec.action".into(),
            message: format!("action ExternalAuth {NOT_ENFORCED}"),
        });
    }
    let rules = if spec.rules.is_empty() {
        vec![RulePlan { name: IMPLICIT_RULE.to_string(), ..RulePlan::default() }]
    } else {
        spec.rules
            .iter()
            .enumerate()
            .map(|(i, rule)| compile_rule(namespace, &format!("spec.rules[{i}]"), rule, opts))
            .collect::<Result<_, _>>()?
    };
    Ok(PolicyPlan { name: format!("{namespace}/{name}"), rules })
}

fn compile_rule(namespace: &str, field: &str, rule: &AccessRule, opts: &CompileOptions) -> Result<RulePlan, CompileError> {
    let principal = match &rule.source {
        None => None,
        Some(src) => {
            let f = format!("{field}.source");
            match (src.source_type, &src.spiffe, &src.service_account) {
                (None, None, None) => None,
                (Some(_), Some(_), Some(_)) => {
                    return Err(CompileError::invalid(f, "only one of spiffe or serviceAccount may be specified"))
                }
                (None, _, _) => {
                    return Err(CompileError::invalid(f, "type must be set when spiffe or serviceAccount is specified"))
                }
                (Some(SourceType::Spiffe), Some(id), None) => Some(id.clone()),
                (Some(SourceType::Spiffe), _, _) => {
                    return Err(CompileError::invalid(f, "spiffe must be specified when type is set to 'SPIFFE'"))
                }
                (Some(SourceType::ServiceAccount), None, Some(sa)) => {
                    let ns = sa.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(namespace);
                    Some(format!("spiffe://{}/ns/{ns}/sa/{}", opts.trust_domain, sa.name))
                }
                (Some(SourceType::ServiceAccount), _, _) => {
                    return Err(CompileError::invalid(
                        f,
                        "serviceAccount must be specified when type is set to 'ServiceAccount'",
                    ))
                }
            }
        }
    };
    let (http, mcp) = match &rule.authorization {
        None => (HttpMatch::default(), None),
        Some(authz) => compile_authorization(&format!("{field}.authorization"), authz)?,
    };
    Ok(RulePlan { name: rule.name.clone(), principal, http, mcp })
}

fn compile_authorization(field: &str, authz: &AuthorizationRule) -> Result<(HttpMatch, Option<McpMatch>), CompileError> {
    if authz.rule_type == AuthorizationRuleType::Cel {
        return Err(CompileError::Unsupported {
            field: format!("{field}.cel.expression"),
            message: format!("type CEL {NOT_ENFORCED}"),
        });
    }
    let methods = authz.methods.iter().map(|m| m.to_ascii_uppercase()).collect();
    let paths = authz
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let value = p.value.clone().unwrap_or_else(|| "/".to_string());
            Ok(match p.match_type.unwrap_or_default() {
                PathMatchType::Exact => PathMatch::Exact(value),
                PathMatchType::PathPrefix => PathMatch::Prefix(value),
                PathMatchType::RegularExpression => {
                    full_match_regex(&value).map_err(|m| CompileError::invalid(format!("{field}.paths[{i}].value"), m))?;
                    PathMatch::Regex(value)
                }
            })
        })
        .collect::<Result<_, CompileError>>()?;
    let headers = authz
        .headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let value = match h.match_type.unwrap_or_default() {
                HeaderMatchType::Exact => ValueMatch::Exact(h.value.clone()),
                HeaderMatchType::RegularExpression => {
                    full_match_regex(&h.value)
                        .map_err(|m| CompileError::invalid(format!("{field}.headers[{i}].value"), m))?;
                    ValueMatch::Regex(h.value.clone())
                }
            };
            Ok(HeaderMatch { name: h.name.to_ascii_lowercase(), value })
        })
        .collect::<Result<_, CompileError>>()?;
    let hosts = authz
        .hosts
        .iter()
        .map(|h| {
            let h = h.to_ascii_lowercase();
            match h.strip_prefix('*') {
                Some(suffix) => HostMatch::Suffix(suffix.to_string()),
                None => HostMatch::Exact(h),
            }
        })
        .collect();
    let http = HttpMatch { methods, paths, headers, hosts, ports: authz.ports.clone() };

    let mcp = authz.mcp.as_ref().and_then(|mcp| {
        let base = mcp.mcp_base_protocol_methods_option == Some(BaseProtocolMethodsOption::MatchBaseProtocolMethods);
        if mcp.methods.is_empty() && !base {
            return None; // SKIP with no methods: no MCP restriction
        }
        let methods = mcp
            .methods
            .iter()
            .map(|m| McpMethodMatch {
                method: if matches!(m.name.as_str(), "tools" | "prompts" | "resources") {
                    MethodPattern::Category(m.name.clone())
                } else {
                    MethodPattern::Exact(m.name.clone())
                },
                params: m.params.clone(),
            })
            .collect();
        Some(McpMatch { base_protocol: base, methods })
    });
    Ok((http, mcp))
}
