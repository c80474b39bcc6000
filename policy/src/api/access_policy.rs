//! `XAccessPolicy.spec` (v1alpha1): targets, action, rules and the sources (callers) rules match.

use serde::{Deserialize, Serialize};

use super::{AuthorizationRule, HttpExternalAuthFilter, GATEWAY_GROUP, GROUP};
#[cfg(feature = "schema")]
use super::{DNS_SUBDOMAIN_PATTERN, GROUP_PATTERN, KIND_PATTERN, SPIFFE_PATTERN};

/// `XAccessPolicy.spec` (v1alpha1): which targets a policy applies to, what it does when its rules
/// match (allow, or delegate to an external authorizer), and the rules.
///
/// Requests that are not MCP are answered with a plain HTTP denial; MCP requests with a JSON-RPC error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.action == 'ExternalAuth' ? has(self.externalAuth) : true",
         "message": "externalAuth must be specified when action is set to 'ExternalAuth'"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicySpec {
    /// TargetRefs are the objects the policy applies to: Gateways (optionally one listener, by
    /// `sectionName`) or XBackends, in the policy's namespace. Between 1 and 10, all of the same kind.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 10)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [
                {"rule": "self.all(ref, ref.kind == self[0].kind)",
                 "message": "All targetRefs must have the same Kind"},
                {"rule": "self.all(x, (x.group == 'agentic.networking.x-k8s.io' && x.kind == 'XBackend') || (x.group == 'gateway.networking.k8s.io' && x.kind == 'Gateway'))",
                 "message": "TargetRef must have group agentic.networking.x-k8s.io and kind XBackend, or group gateway.networking.k8s.io and kind Gateway"},
            ]
        ))
    )]
    pub target_refs: Vec<PolicyTargetRef>,
    /// Action is what happens when a rule matches. `Allow`: the request is allowed by this policy
    /// (at a level with Allow policies, a request no rule of theirs matches is denied). `ExternalAuth`:
    /// the request is sent to the external authorizer first, and denied if it refuses. ExternalAuth
    /// runs before the Allow policies of the same target.
    pub action: PolicyAction,
    /// ExternalAuth is the authorizer an `ExternalAuth` policy calls (Gateway API
    /// `HTTPExternalAuthFilter`). At most one ExternalAuth policy is accepted per target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<HttpExternalAuthFilter>,
    /// Rules select the requests the action applies to; a request matches the policy when any rule
    /// matches. Without rules the policy matches every request at its level. At most 10, with unique names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [
                {"rule": "self.all(r, self.filter(x, x.name == r.name).size() == 1)",
                 "message": "AccessRule names must be unique"},
            ]
        ))
    )]
    pub rules: Vec<AccessRule>,
}

/// A Gateway API `LocalPolicyTargetReferenceWithSectionName`: an object in the policy's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    /// Group of the target: `gateway.networking.k8s.io` (Gateway) or `agentic.networking.x-k8s.io` (XBackend).
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 253), pattern(GROUP_PATTERN))
    )]
    pub group: String,
    /// Kind of the target: `Gateway` or `XBackend`.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(KIND_PATTERN))
    )]
    pub kind: String,
    /// Name of the target.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// SectionName selects part of the target: for a Gateway, the listener of that name. Without it
    /// the policy applies to the whole target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN_PATTERN))
    )]
    pub section_name: Option<String>,
}

impl PolicyTargetRef {
    pub fn is_gateway(&self) -> bool {
        self.group == GATEWAY_GROUP && self.kind == "Gateway"
    }
    pub fn is_backend(&self) -> bool {
        self.group == GROUP && self.kind == "XBackend"
    }
}

/// What a policy does when one of its rules matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PolicyAction {
    #[default]
    Allow,
    ExternalAuth,
}

/// AccessRule selects requests by who sends them (`source`) and what they ask for (`authorization`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessRule {
    /// Name of the rule, unique within the policy (a DNS subdomain of at most 63 characters).
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(DNS_SUBDOMAIN_PATTERN))
    )]
    pub name: String,
    /// Source is the caller the rule matches. Omitted (or empty) = any caller, including
    /// unauthenticated ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<AccessRuleSource>,
    /// Authorization restricts the requests of the source the rule matches. Omitted = every request
    /// from the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<AuthorizationRule>,
}

/// The caller of a request: a SPIFFE ID, or a Kubernetes ServiceAccount (which stands for
/// `spiffe://<trust domain>/ns/<namespace>/sa/<name>`). `type` names which field is set, and exactly
/// that field must be set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.type) && self.type == 'SPIFFE' ? has(self.spiffe) : true",
         "message": "spiffe must be specified when type is set to 'SPIFFE'"},
        {"rule": "has(self.type) && self.type == 'ServiceAccount' ? has(self.serviceAccount) : true",
         "message": "serviceAccount must be specified when type is set to 'ServiceAccount'"},
        {"rule": "has(self.type) || !(has(self.spiffe) || has(self.serviceAccount))",
         "message": "type must be set when spiffe or serviceAccount is specified"},
        {"rule": "!(has(self.spiffe) && has(self.serviceAccount))",
         "message": "only one of spiffe or serviceAccount may be specified"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct AccessRuleSource {
    /// Type of the source: `SPIFFE` (set `spiffe`) or `ServiceAccount` (set `serviceAccount`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<SourceType>,
    /// SPIFFE is the caller's SPIFFE ID, `spiffe://<trust domain>/<workload path>`, compared exactly
    /// with the first URI SAN of the caller's verified client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(SPIFFE_PATTERN)))]
    pub spiffe: Option<String>,
    /// ServiceAccount is a Kubernetes ServiceAccount of the same trust domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountRef>,
}

/// Which kind of caller identity a source names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SourceType {
    #[default]
    ServiceAccount,
    #[serde(rename = "SPIFFE")]
    Spiffe,
}

/// A Kubernetes ServiceAccount.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountRef {
    /// Namespace of the ServiceAccount. Defaults to the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the ServiceAccount.
    pub name: String,
}
