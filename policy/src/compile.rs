//! Compiling one `XAccessPolicy` spec into plan data ([`PolicyPlan`]).
//!
//! This is the per-policy half of compilation: sources become principals, inline matchers become
//! ready-to-run matchers. Which policies apply to which listener and backend (topology) is the
//! controller's job. Schema-level validation (the CRD rules) runs before this; the checks here are
//! the ones a schema cannot express (regular expressions that compile, sources that agree with
//! their type, actions this version enforces).

use crate::api::{
    AccessPolicySpec, AccessRule, AuthorizationRule, AuthorizationRuleType,
    BaseProtocolMethodsOption, ExternalAuthProtocol, HeaderMatchType, PathMatchType, PolicyAction,
    SourceType,
};
use crate::eval::full_match_regex;
use crate::plan::{
    AuthorizerPlan, AuthorizerProtocol, ExternalAuthPlan, HeaderMatch, HostMatch, HttpMatch,
    McpMatch, McpMethodMatch, MethodPattern, PathMatch, PolicyPlan, RulePlan, ValueMatch,
    IMPLICIT_RULE,
};

pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Trust domain of ServiceAccount sources: `spiffe://<trust domain>/ns/<ns>/sa/<name>`.
    pub trust_domain: String,
    /// How the Envoy the plans are for names its clusters.
    pub clusters: ClusterNaming,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            trust_domain: DEFAULT_TRUST_DOMAIN.to_string(),
            clusters: ClusterNaming::Rendered,
        }
    }
}

/// The cluster names of upstreams (XBackends, authorizers) in the plans: what the filter sees as
/// `xds.cluster_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterNaming {
    /// `toolgate render`'s: `xbackend/<ns>/<name>`, `authz/<ns>/<name>/<port>`.
    Rendered,
    /// Istio's: `outbound|<port>||<name>.<ns>.svc.<cluster domain>` for a Service,
    /// `outbound|<port>||<host>` for a host name.
    Istio { cluster_domain: String },
}

impl ClusterNaming {
    /// The host name of Service `namespace/name`.
    pub fn service_host(&self, namespace: &str, name: &str) -> String {
        let domain = match self {
            ClusterNaming::Rendered => DEFAULT_CLUSTER_DOMAIN,
            ClusterNaming::Istio { cluster_domain } => cluster_domain,
        };
        format!("{name}.{namespace}.svc.{domain}")
    }
}

/// The default Kubernetes cluster domain.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Istio's name of the cluster of `host:port`.
pub fn istio_cluster(host: &str, port: u16) -> String {
    format!("outbound|{port}||{host}")
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
}

impl CompileError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn field(&self) -> &str {
        match self {
            Self::Invalid { field, .. } | Self::InvalidCel { field, .. } => field,
        }
    }
    /// The status condition reason (docs/semantics.md §7).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "Invalid",
            Self::InvalidCel { .. } => "InvalidCEL",
        }
    }
}

/// A policy compiled for its action.
#[derive(Clone, Debug, PartialEq)]
pub enum CompiledPolicy {
    Allow(PolicyPlan),
    ExternalAuth(ExternalAuthPlan),
}

/// Compiles policy `namespace/name` for its action.
pub fn compile(
    namespace: &str,
    name: &str,
    spec: &AccessPolicySpec,
    opts: &CompileOptions,
) -> Result<CompiledPolicy, CompileError> {
    let plan = compile_policy(namespace, name, spec, opts)?;
    Ok(match spec.action {
        PolicyAction::Allow => CompiledPolicy::Allow(plan),
        PolicyAction::ExternalAuth => CompiledPolicy::ExternalAuth(ExternalAuthPlan {
            authorizer: compile_authorizer(namespace, spec, &opts.clusters)?,
            policy: plan.name,
            rules: plan.rules,
            dry_run: false,
        }),
    })
}

/// The Envoy cluster a rendered configuration gives the authorizer Service `namespace/name:port`.
pub fn authorizer_cluster(namespace: &str, name: &str, port: u16) -> String {
    format!("authz/{namespace}/{name}/{port}")
}

/// The namespace, name and port of an [`authorizer_cluster`] name.
pub fn parse_authorizer_cluster(cluster: &str) -> Option<(&str, &str, u16)> {
    let mut parts = cluster.strip_prefix("authz/")?.split('/');
    let (ns, name, port) = (parts.next()?, parts.next()?, parts.next()?.parse().ok()?);
    parts.next().is_none().then_some((ns, name, port))
}

/// The authorizer of an ExternalAuth policy (`spec.externalAuth`).
fn compile_authorizer(
    namespace: &str,
    spec: &AccessPolicySpec,
    naming: &ClusterNaming,
) -> Result<AuthorizerPlan, CompileError> {
    let invalid = |field: &str, message: String| {
        CompileError::invalid(format!("spec.externalAuth{field}"), message)
    };
    let ea = spec.external_auth.as_ref().ok_or_else(|| {
        invalid(
            "",
            "externalAuth must be specified when action is set to 'ExternalAuth'".into(),
        )
    })?;
    let b = &ea.backend_ref;
    let (group, kind) = (
        b.group.as_deref().unwrap_or(""),
        b.kind.as_deref().unwrap_or("Service"),
    );
    if !group.is_empty() || kind != "Service" {
        return Err(invalid(
            ".backendRef",
            format!("kind {group}/{kind} is not supported: the authorizer must be a Service"),
        ));
    }
    let port = b
        .port
        .ok_or_else(|| invalid(".backendRef", "Must have port for Service reference".into()))?;
    let ns = b.namespace.as_deref().unwrap_or(namespace);
    let lower = |field: &str, names: &[String]| -> Result<Vec<String>, CompileError> {
        names
            .iter()
            .map(|n| {
                if n.is_empty()
                    || n.bytes()
                        .any(|c| c.is_ascii_whitespace() || c.is_ascii_control() || c == b':')
                {
                    Err(invalid(field, format!("{n:?} is not a header name")))
                } else {
                    Ok(n.to_ascii_lowercase())
                }
            })
            .collect()
    };
    let (protocol, allowed_headers) = match ea.protocol {
        ExternalAuthProtocol::Grpc => {
            let grpc = ea.grpc.as_ref().ok_or_else(|| {
                invalid(
                    "",
                    "grpc must be specified when protocol is set to 'GRPC'".into(),
                )
            })?;
            (
                AuthorizerProtocol::Grpc,
                lower(".grpc.allowedHeaders", &grpc.allowed_headers)?,
            )
        }
        ExternalAuthProtocol::Http => {
            let http = ea.http.as_ref().ok_or_else(|| {
                invalid(
                    "",
                    "http must be specified when protocol is set to 'HTTP'".into(),
                )
            })?;
            let path_prefix = http.path.clone().unwrap_or_default();
            if !(path_prefix.is_empty() || path_prefix.starts_with('/')) {
                return Err(invalid(
                    ".http.path",
                    format!("{path_prefix:?} must start with '/'"),
                ));
            }
            let protocol = AuthorizerProtocol::Http {
                path_prefix: path_prefix.trim_end_matches('/').to_string(),
                allowed_response_headers: lower(
                    ".http.allowedResponseHeaders",
                    &http.allowed_response_headers,
                )?,
            };
            (
                protocol,
                lower(".http.allowedHeaders", &http.allowed_headers)?,
            )
        }
    };
    Ok(AuthorizerPlan {
        cluster: match naming {
            ClusterNaming::Rendered => authorizer_cluster(ns, &b.name, port),
            ClusterNaming::Istio { .. } => istio_cluster(&naming.service_host(ns, &b.name), port),
        },
        authority: naming.service_host(ns, &b.name),
        protocol,
        allowed_headers,
        forward_body_bytes: ea
            .forward_body
            .as_ref()
            .and_then(|f| f.max_size)
            .unwrap_or(0),
    })
}

/// Compiles the rules of policy `namespace/name` (either action: an ExternalAuth policy's rules say
/// when its authorizer is called).
pub fn compile_policy(
    namespace: &str,
    name: &str,
    spec: &AccessPolicySpec,
    opts: &CompileOptions,
) -> Result<PolicyPlan, CompileError> {
    let rules = if spec.rules.is_empty() {
        vec![RulePlan {
            name: IMPLICIT_RULE.to_string(),
            ..RulePlan::default()
        }]
    } else {
        spec.rules
            .iter()
            .enumerate()
            .map(|(i, rule)| compile_rule(namespace, &format!("spec.rules[{i}]"), rule, opts))
            .collect::<Result<_, _>>()?
    };
    Ok(PolicyPlan {
        name: format!("{namespace}/{name}"),
        rules,
        dry_run: false,
    })
}

fn compile_rule(
    namespace: &str,
    field: &str,
    rule: &AccessRule,
    opts: &CompileOptions,
) -> Result<RulePlan, CompileError> {
    let principal = match &rule.source {
        None => None,
        Some(src) => {
            let f = format!("{field}.source");
            match (src.source_type, &src.spiffe, &src.service_account) {
                (None, None, None) => None,
                (Some(_), Some(_), Some(_)) => {
                    return Err(CompileError::invalid(
                        f,
                        "only one of spiffe or serviceAccount may be specified",
                    ))
                }
                (None, _, _) => {
                    return Err(CompileError::invalid(
                        f,
                        "type must be set when spiffe or serviceAccount is specified",
                    ))
                }
                (Some(SourceType::Spiffe), Some(id), None) => Some(id.clone()),
                (Some(SourceType::Spiffe), _, _) => {
                    return Err(CompileError::invalid(
                        f,
                        "spiffe must be specified when type is set to 'SPIFFE'",
                    ))
                }
                (Some(SourceType::ServiceAccount), None, Some(sa)) => {
                    let ns = sa
                        .namespace
                        .as_deref()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(namespace);
                    Some(format!(
                        "spiffe://{}/ns/{ns}/sa/{}",
                        opts.trust_domain, sa.name
                    ))
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
    let name = rule.name.clone();
    let authz = match &rule.authorization {
        None => {
            return Ok(RulePlan {
                name,
                principal,
                ..RulePlan::default()
            })
        }
        Some(authz) => authz,
    };
    let field = format!("{field}.authorization");
    if authz.rule_type == AuthorizationRuleType::Cel {
        // docs/semantics.md §3: CEL rules apply to tools/call only.
        let mcp = McpMatch {
            base_protocol: false,
            methods: vec![McpMethodMatch {
                method: MethodPattern::Exact("tools/call".into()),
                params: vec![],
            }],
        };
        let cel = compile_cel(&field, authz)?;
        return Ok(RulePlan {
            name,
            principal,
            http: HttpMatch::default(),
            mcp: Some(mcp),
            cel: Some(cel),
        });
    }
    let (http, mcp) = compile_authorization(&field, authz)?;
    Ok(RulePlan {
        name,
        principal,
        http,
        mcp,
        cel: None,
    })
}

/// A rule's CEL expression, checked (syntax, variables, size: `cel_rule::compile`).
fn compile_cel(field: &str, authz: &AuthorizationRule) -> Result<String, CompileError> {
    let field = format!("{field}.cel.expression");
    let expression = authz
        .cel
        .as_ref()
        .map(|c| c.expression.clone())
        .unwrap_or_default();
    if expression.trim().is_empty() {
        return Err(CompileError::InvalidCel {
            field,
            message: "cel.expression must be set when type is set to 'CEL'".into(),
        });
    }
    match crate::cel_rule::compile(&expression) {
        Ok(_) => Ok(expression),
        Err(problem) => Err(CompileError::InvalidCel {
            field,
            message: format!("invalid CEL expression {expression:?}: {problem}"),
        }),
    }
}

fn compile_authorization(
    field: &str,
    authz: &AuthorizationRule,
) -> Result<(HttpMatch, Option<McpMatch>), CompileError> {
    let methods = authz
        .methods
        .iter()
        .map(|m| m.to_ascii_uppercase())
        .collect();
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
                    full_match_regex(&value).map_err(|m| {
                        CompileError::invalid(format!("{field}.paths[{i}].value"), m)
                    })?;
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
                    full_match_regex(&h.value).map_err(|m| {
                        CompileError::invalid(format!("{field}.headers[{i}].value"), m)
                    })?;
                    ValueMatch::Regex(h.value.clone())
                }
            };
            Ok(HeaderMatch {
                name: h.name.to_ascii_lowercase(),
                value,
            })
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
    let http = HttpMatch {
        methods,
        paths,
        headers,
        hosts,
        server_names: Vec::new(),
        ports: authz.ports.clone(),
    };

    let mcp = authz.mcp.as_ref().and_then(|mcp| {
        let base = mcp.mcp_base_protocol_methods_option
            == Some(BaseProtocolMethodsOption::MatchBaseProtocolMethods);
        if mcp.methods.is_empty() && !base {
            return None; // SKIP with no methods: no MCP restriction
        }
        let methods = mcp
            .methods
            .iter()
            .map(|m| McpMethodMatch {
                method: if crate::plan::METHOD_CATEGORIES.contains(&m.name.as_str()) {
                    MethodPattern::Category(m.name.clone())
                } else {
                    MethodPattern::Exact(m.name.clone())
                },
                params: m.params.clone(),
            })
            .collect();
        Some(McpMatch {
            base_protocol: base,
            methods,
        })
    });
    Ok((http, mcp))
}
