//! The `agentic.networking.x-k8s.io` API as plain Rust data: `XAccessPolicy` (v1alpha1) and
//! `XBackend` (v0alpha0) specs, in the JSON shape the upstream CRDs use.
//!
//! These types carry no behaviour. Validation (OpenAPI limits, CEL rules, our stricter checks) lives in
//! the controller crate, which works on the raw objects so that its messages match the API server's;
//! [`crate::compile`] turns a valid spec into plan data.

use serde::{Deserialize, Serialize};

pub const GROUP: &str = "agentic.networking.x-k8s.io";
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// `XAccessPolicy.spec` (v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicySpec {
    pub target_refs: Vec<PolicyTargetRef>,
    pub action: PolicyAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<HttpExternalAuthFilter>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<AccessRule>,
}

/// Gateway API `LocalPolicyTargetReferenceWithSectionName`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PolicyAction {
    #[default]
    Allow,
    ExternalAuth,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessRule {
    pub name: String,
    /// Omitted (or empty) = any caller, including unauthenticated ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<AccessRuleSource>,
    /// Omitted = every request from the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<AuthorizationRule>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessRuleSource {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<SourceType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spiffe: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountRef>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SourceType {
    ServiceAccount,
    #[serde(rename = "SPIFFE")]
    Spiffe,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountRef {
    /// Defaults to the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationRule {
    #[serde(rename = "type")]
    pub rule_type: AuthorizationRuleType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<HttpPathMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HttpHeaderMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpAttributes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelRule>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AuthorizationRuleType {
    #[default]
    Inline,
    #[serde(rename = "CEL")]
    Cel,
}

/// Gateway API `HTTPPathMatch`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpPathMatch {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<PathMatchType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PathMatchType {
    Exact,
    #[default]
    PathPrefix,
    RegularExpression,
}

/// Gateway API `HTTPHeaderMatch`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpHeaderMatch {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<HeaderMatchType>,
    pub name: String,
    pub value: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum HeaderMatchType {
    #[default]
    Exact,
    RegularExpression,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpAttributes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<McpMethod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_base_protocol_methods_option: Option<BaseProtocolMethodsOption>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BaseProtocolMethodsOption {
    #[default]
    SkipBaseProtocolMethods,
    MatchBaseProtocolMethods,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpMethod {
    /// One of the upstream enum values: `tools`, `prompts`, `resources` (categories),
    /// `tools/list`, ..., `tools/call`, `prompts/get`, `resources/read`, ...
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CelRule {
    pub expression: String,
}

/// Gateway API `HTTPExternalAuthFilter`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpExternalAuthFilter {
    pub protocol: ExternalAuthProtocol,
    pub backend_ref: BackendObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAuthConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpAuthConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_body: Option<ForwardBodyConfig>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ExternalAuthProtocol {
    #[serde(rename = "HTTP")]
    Http,
    #[default]
    #[serde(rename = "GRPC")]
    Grpc,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GrpcAuthConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpAuthConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_response_headers: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForwardBodyConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u32>,
}

/// `XBackend.spec` (v0alpha0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendSpec {
    pub mcp: McpBackend,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpBackend {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: u16,
    /// Defaults to `/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl McpBackend {
    pub fn path_or_default(&self) -> &str {
        self.path.as_deref().unwrap_or("/mcp")
    }
}
