//! `XAccessPolicy` v0alpha0: the older shape, served for reading old objects (docs/semantics.md §1). Each rule carries
//! its own authorization: `InlineTools` (a tool allowlist), `ExternalAuth` (a per-rule authorizer) or
//! `CEL`. [`AccessPolicySpec::to_v1alpha1`] converts it into the v1alpha1 policies that enforce the same.

use serde::{Deserialize, Serialize};

use super::{
    AccessRule as RuleV1, AccessRuleSource, AuthorizationRule as AuthzV1,
    AuthorizationRuleType as AuthzTypeV1, BaseProtocolMethodsOption, CelRule as CelV1,
    HttpExternalAuthFilter, McpAttributes, McpMethod, PolicyAction, PolicyTargetRef,
    ServiceAccountRef, SourceType,
};
#[cfg(feature = "schema")]
use super::{DNS_SUBDOMAIN_PATTERN, SPIFFE_PATTERN};

/// `XAccessPolicy.spec` (v0alpha0): targets and rules, each rule with its own authorization
/// (`InlineTools`, `ExternalAuth` or `CEL`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicySpec {
    /// TargetRefs are the objects the policy applies to: Gateways or XBackends in the policy's
    /// namespace. Between 1 and 10, all of the same kind.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 10)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [
                {"rule": "self.all(x, (x.group == 'agentic.networking.x-k8s.io' && x.kind == 'XBackend') || (x.group == 'gateway.networking.k8s.io' && x.kind == 'Gateway'))",
                 "message": "TargetRef must have group agentic.networking.x-k8s.io and kind XBackend, or group gateway.networking.k8s.io and kind Gateway"},
                {"rule": "self.all(ref, ref.kind == self[0].kind)",
                 "message": "All targetRefs must have the same Kind"},
            ]
        ))
    )]
    pub target_refs: Vec<PolicyTargetRef>,
    /// Rules are the allowed callers and what each may do. Between 1 and 10, with unique names; at most
    /// one rule may use `ExternalAuth`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 10)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [
                {"rule": "self.all(r, self.filter(x, x.name == r.name).size() == 1)",
                 "message": "AccessRule names must be unique"},
                {"rule": "self.filter(r, has(r.authorization) && r.authorization.type == 'ExternalAuth').size() <= 1",
                 "message": "a maximum of one rule per policy can specify 'ExternalAuth' authorization type"},
            ]
        ))
    )]
    pub rules: Vec<AccessRule>,
}

/// A v0alpha0 rule: a caller and what it may do.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessRule {
    /// Name of the rule, unique within the policy.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(DNS_SUBDOMAIN_PATTERN))
    )]
    pub name: String,
    /// Source is the caller the rule matches.
    pub source: Source,
    /// Authorization is what the caller may do. Omitted = everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<AuthorizationRule>,
}

/// A v0alpha0 caller: `type` is required and names the field that is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.type == 'SPIFFE' ? has(self.spiffe) : true",
         "message": "spiffe must be specified when type is set to 'SPIFFE'"},
        {"rule": "self.type == 'ServiceAccount' ? has(self.serviceAccount) : true",
         "message": "serviceAccount must be specified when type is set to 'ServiceAccount'"},
        {"rule": "!(has(self.spiffe) && has(self.serviceAccount))",
         "message": "only one of spiffe or serviceAccount may be specified"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// Type of the source: `SPIFFE` or `ServiceAccount`.
    #[serde(rename = "type")]
    pub source_type: SourceType,
    /// SPIFFE is the caller's SPIFFE ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(SPIFFE_PATTERN)))]
    pub spiffe: Option<String>,
    /// ServiceAccount is a Kubernetes ServiceAccount of the same trust domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountRef>,
}

/// A v0alpha0 authorization: exactly the field named by `type`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.type == 'InlineTools' ? has(self.tools) : true",
         "message": "tools must be specified when type is set to 'InlineTools'"},
        {"rule": "self.type == 'ExternalAuth' ? has(self.externalAuth) : true",
         "message": "externalAuth must be specified when type is set to 'ExternalAuth'"},
        {"rule": "self.type == 'CEL' ? has(self.cel) : true",
         "message": "cel must be specified when type is set to 'CEL'"},
        {"rule": "[has(self.tools), has(self.externalAuth), has(self.cel)].filter(x, x).size() <= 1",
         "message": "only one of tools, externalAuth or cel can be specified"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationRule {
    /// Type of the authorization: `InlineTools`, `ExternalAuth` or `CEL`.
    #[serde(rename = "type")]
    pub rule_type: AuthorizationRuleType,
    /// Tools are the tools the caller may call (`tools/call` with one of these names). Empty = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set")))]
    pub tools: Option<Vec<String>>,
    /// ExternalAuth is the authorizer that decides the caller's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<HttpExternalAuthFilter>,
    /// CEL is an expression the caller's `tools/call` requests must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelRule>,
}

/// Kind of a v0alpha0 authorization.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AuthorizationRuleType {
    #[default]
    InlineTools,
    ExternalAuth,
    #[serde(rename = "CEL")]
    Cel,
}

/// A v0alpha0 CEL expression.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CelRule {
    /// Expression to evaluate.
    pub expression: String,
    /// Message to return when the expression is not true (not used by v1alpha1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The v1alpha1 policies a v0alpha0 policy becomes (docs/semantics.md §1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Converted {
    /// The Allow policy: one rule per v0alpha0 rule (an `ExternalAuth` rule becomes a rule that allows
    /// its source, the authorizer having been asked first).
    pub allow: AccessPolicySpec1,
    /// The ExternalAuth policy, when a rule used `ExternalAuth`: its authorizer, with one rule
    /// matching that rule's source.
    pub external_auth: Option<AccessPolicySpec1>,
}

/// The v1alpha1 spec (named here to tell it apart from the v0alpha0 one).
pub type AccessPolicySpec1 = super::AccessPolicySpec;

impl AccessPolicySpec {
    /// Converts to v1alpha1. `InlineTools` becomes `mcp.methods: [{name: tools/call, params: tools}]`
    /// (with the base protocol methods allowed, so that clients can initialize and list tools; an
    /// empty tool list allows no tool, which is a CEL rule `false`); `CEL` becomes a CEL rule; and
    /// the `ExternalAuth` rule moves its authorizer to a separate ExternalAuth policy.
    pub fn to_v1alpha1(&self) -> Converted {
        let mut allow_rules = Vec::new();
        let mut external_auth = None;
        for rule in &self.rules {
            let source = Some(rule.source.to_v1alpha1());
            let authorization = match &rule.authorization {
                None => None,
                Some(a) => match a.rule_type {
                    AuthorizationRuleType::InlineTools => {
                        let tools = a.tools.clone().unwrap_or_default();
                        if tools.is_empty() {
                            Some(AuthzV1 {
                                rule_type: AuthzTypeV1::Cel,
                                cel: Some(CelV1 {
                                    expression: "false".into(),
                                }),
                                ..AuthzV1::default()
                            })
                        } else {
                            Some(AuthzV1 {
                                rule_type: AuthzTypeV1::Inline,
                                mcp: Some(McpAttributes {
                                    methods: vec![McpMethod {
                                        name: "tools/call".into(),
                                        params: tools,
                                    }],
                                    mcp_base_protocol_methods_option: Some(
                                        BaseProtocolMethodsOption::MatchBaseProtocolMethods,
                                    ),
                                }),
                                ..AuthzV1::default()
                            })
                        }
                    }
                    AuthorizationRuleType::Cel => Some(AuthzV1 {
                        rule_type: AuthzTypeV1::Cel,
                        cel: Some(CelV1 {
                            expression: a
                                .cel
                                .as_ref()
                                .map(|c| c.expression.clone())
                                .unwrap_or_default(),
                        }),
                        ..AuthzV1::default()
                    }),
                    AuthorizationRuleType::ExternalAuth => {
                        if external_auth.is_none() {
                            external_auth = Some(AccessPolicySpec1 {
                                target_refs: self.target_refs.clone(),
                                action: PolicyAction::ExternalAuth,
                                external_auth: a.external_auth.clone(),
                                rules: vec![RuleV1 {
                                    name: rule.name.clone(),
                                    source: source.clone(),
                                    authorization: None,
                                }],
                            });
                        }
                        None
                    }
                },
            };
            allow_rules.push(RuleV1 {
                name: rule.name.clone(),
                source,
                authorization,
            });
        }
        Converted {
            allow: AccessPolicySpec1 {
                target_refs: self.target_refs.clone(),
                action: PolicyAction::Allow,
                external_auth: None,
                rules: allow_rules,
            },
            external_auth,
        }
    }
}

impl Source {
    pub fn to_v1alpha1(&self) -> AccessRuleSource {
        AccessRuleSource {
            source_type: Some(self.source_type),
            spiffe: self.spiffe.clone(),
            service_account: self.service_account.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_inline_tools_and_external_auth() {
        let spec: AccessPolicySpec = serde_json::from_value(serde_json::json!({
            "targetRefs": [{"group": "agentic.networking.x-k8s.io", "kind": "XBackend", "name": "b"}],
            "rules": [
                {"name": "a", "source": {"type": "SPIFFE", "spiffe": "spiffe://td/a"},
                 "authorization": {"type": "InlineTools", "tools": ["get-sum"]}},
                {"name": "b", "source": {"type": "ServiceAccount", "serviceAccount": {"name": "b"}},
                 "authorization": {"type": "ExternalAuth", "externalAuth": {
                     "protocol": "GRPC", "backendRef": {"name": "authz", "port": 9000}, "grpc": {}}}},
                {"name": "c", "source": {"type": "SPIFFE", "spiffe": "spiffe://td/c"},
                 "authorization": {"type": "InlineTools", "tools": []}},
            ]
        }))
        .unwrap();
        let c = spec.to_v1alpha1();
        assert_eq!(c.allow.action, PolicyAction::Allow);
        assert_eq!(c.allow.rules.len(), 3);
        let mcp = c.allow.rules[0]
            .authorization
            .as_ref()
            .unwrap()
            .mcp
            .as_ref()
            .unwrap();
        assert_eq!(mcp.methods[0].name, "tools/call");
        assert_eq!(mcp.methods[0].params, vec!["get-sum".to_string()]);
        assert!(c.allow.rules[1].authorization.is_none());
        assert_eq!(
            c.allow.rules[2].authorization.as_ref().unwrap().rule_type,
            AuthzTypeV1::Cel
        );
        let ea = c.external_auth.unwrap();
        assert_eq!(ea.action, PolicyAction::ExternalAuth);
        assert_eq!(ea.external_auth.unwrap().backend_ref.port, Some(9000));
        assert_eq!(ea.rules.len(), 1);
        assert_eq!(
            ea.rules[0].source.as_ref().unwrap().source_type,
            Some(SourceType::ServiceAccount)
        );
    }
}
