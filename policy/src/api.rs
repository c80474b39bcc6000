//! The `agentic.networking.x-k8s.io` API as plain Rust data: `XAccessPolicy` (v1alpha1, and the older
//! v0alpha0 in [`v0alpha0`]) and `XBackend` (v0alpha0) specs and statuses, in the JSON shape the upstream
//! CRDs use.
//!
//! These types carry no behaviour. With the `schema` feature they also describe the CRDs: doc comments
//! become the OpenAPI descriptions, and the `schemars` attributes carry every OpenAPI limit and
//! `x-kubernetes-validations` rule (the controller crate generates `crds/` from them and evaluates the same
//! schema offline in `toolgate validate`). Validation itself lives in the controller crate, which works on
//! the raw objects so that its messages match the API server's; [`crate::compile`] turns a valid spec
//! into plan data.

use serde::{Deserialize, Serialize};

pub mod v0alpha0;

pub const GROUP: &str = "agentic.networking.x-k8s.io";
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Pattern of a DNS subdomain (RFC 1123), as in Gateway API.
pub const DNS_SUBDOMAIN_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of a DNS label (RFC 1123).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Pattern of an API group: empty (the core group) or a DNS subdomain.
pub const GROUP_PATTERN: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of a Kind.
pub const KIND_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
/// Pattern of a SPIFFE ID accepted by `source.spiffe`.
pub const SPIFFE_PATTERN: &str = r"^spiffe://[a-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$";
/// Pattern of a Gateway API `Hostname` (optionally with a leading `*.` wildcard label).
pub const HOSTNAME_PATTERN: &str = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of an HTTP header name (RFC 7230 token).
pub const HEADER_NAME_PATTERN: &str = r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$";
/// Pattern of an absolute path made of valid URI characters.
pub const HTTP_PATH_PATTERN: &str = r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$";
/// Maximum length of one `mcp.methods[].params` item (upstream allows 20; SPEC §9.6).
pub const MCP_PARAM_MAX_LENGTH: usize = 128;

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
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(GROUP_PATTERN)))]
    pub group: String,
    /// Kind of the target: `Gateway` or `XBackend`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 63), pattern(KIND_PATTERN)))]
    pub kind: String,
    /// Name of the target.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// SectionName selects part of the target: for a Gateway, the listener of that name. Without it
    /// the policy applies to the whole target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN_PATTERN)))]
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
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 63), pattern(DNS_SUBDOMAIN_PATTERN)))]
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

/// AuthorizationRule restricts the requests a rule matches. `Inline`: every matcher that is present
/// must hold (within a list any item may match, except `headers` where all must). `CEL`: the expression
/// must evaluate to true (it applies to `tools/call` requests).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.type == 'CEL' ? has(self.cel) : true",
         "message": "cel must be specified when type is set to 'CEL'"},
        {"rule": "self.type == 'Inline' ? !has(self.cel) : true",
         "message": "cel must not be specified when type is set to 'Inline'"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationRule {
    /// Type of the rule: `Inline` (matchers in this object) or `CEL` (an expression in `cel`).
    #[serde(rename = "type")]
    pub rule_type: AuthorizationRuleType,
    /// Methods are HTTP methods; the request's method must be one of them. Empty = any method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 9)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "x-kubernetes-list-type" = "set",
            "items" = {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]}
        ))
    )]
    pub methods: Vec<String>,
    /// Paths match the request path (without the query, as received); one of them must match.
    /// Empty = any path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10), extend("x-kubernetes-list-type" = "atomic")))]
    pub paths: Vec<HttpPathMatch>,
    /// Headers match request headers; all of them must match. Empty = no header condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10), extend("x-kubernetes-list-type" = "atomic")))]
    pub headers: Vec<HttpHeaderMatch>,
    /// Hosts match the request authority without its port; one of them must match. `*.example.com`
    /// matches any name below example.com. Empty = any host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 10), inner(length(min = 1, max = 253), pattern(HOSTNAME_PATTERN)))
    )]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set")))]
    pub hosts: Vec<String>,
    /// Ports are listener ports; the request must arrive on one of them. Empty = any port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10), inner(range(min = 1, max = 65535))))]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set")))]
    pub ports: Vec<u16>,
    /// MCP matches the JSON-RPC messages of MCP requests. Omitted = no MCP condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpAttributes>,
    /// CEL is the expression of a `CEL` rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelRule>,
}

/// Kind of an authorization rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AuthorizationRuleType {
    #[default]
    Inline,
    #[serde(rename = "CEL")]
    Cel,
}

/// Gateway API `HTTPPathMatch`: how a request path is matched.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/') : true",
         "message": "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('//') : true",
         "message": "must not contain '//' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('/./') : true",
         "message": "must not contain '/./' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('/../') : true",
         "message": "must not contain '/../' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('%2f') : true",
         "message": "must not contain '%2f' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('%2F') : true",
         "message": "must not contain '%2F' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.contains('#') : true",
         "message": "must not contain '#' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.endsWith('/..') : true",
         "message": "must not end with '/..' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? !self.value.endsWith('/.') : true",
         "message": "must not end with '/.' when type one of ['Exact', 'PathPrefix']"},
        {"rule": "self.type in ['Exact','PathPrefix'] || self.type == 'RegularExpression'",
         "message": "type must be one of ['Exact', 'PathPrefix', 'RegularExpression']"},
        {"rule": "(self.type in ['Exact','PathPrefix']) ? self.value.matches(r\"\"\"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$\"\"\") : true",
         "message": "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct HttpPathMatch {
    /// Type of the match: `Exact`, `PathPrefix` (default; whole path segments) or
    /// `RegularExpression` (RE2, matching the whole path).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "PathPrefix")))]
    pub match_type: Option<PathMatchType>,
    /// Value is the path, prefix or expression. Defaults to `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024), extend("default" = "/")))]
    pub value: Option<String>,
}

/// How a path is matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PathMatchType {
    Exact,
    #[default]
    PathPrefix,
    RegularExpression,
}

/// Gateway API `HTTPHeaderMatch`: a request header condition. Header names are case-insensitive.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpHeaderMatch {
    /// Type of the match: `Exact` (default) or `RegularExpression` (RE2, matching the whole value).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "Exact")))]
    pub match_type: Option<HeaderMatchType>,
    /// Name of the header.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN)))]
    pub name: String,
    /// Value to match.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 4096)))]
    pub value: String,
}

/// How a header value is matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum HeaderMatchType {
    #[default]
    Exact,
    RegularExpression,
}

/// MCP conditions: the JSON-RPC methods (and their tool, prompt or resource) a rule allows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpAttributes {
    /// Methods are the MCP methods allowed; a message must match one of them. Empty = any method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))
    )]
    pub methods: Vec<McpMethod>,
    /// MCPBaseProtocolMethodsOption: `MATCH_BASE_PROTOCOL_METHODS` also allows the base protocol
    /// (initialize, ping, tools/list, completion/*, logging/*, notifications/*, the SSE GET, the session
    /// DELETE, and client-sent JSON-RPC responses); `SKIP_BASE_PROTOCOL_METHODS` (default) does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "SKIP_BASE_PROTOCOL_METHODS")))]
    pub mcp_base_protocol_methods_option: Option<BaseProtocolMethodsOption>,
}

/// Whether a rule also allows the MCP base protocol methods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BaseProtocolMethodsOption {
    #[default]
    SkipBaseProtocolMethods,
    MatchBaseProtocolMethods,
}

/// One MCP method, optionally limited to some tools, prompts or resources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.params) && self.params.size() > 0 ? self.name in ['prompts/get', 'tools/call', 'resources/subscribe', 'resources/unsubscribe', 'resources/read'] : true",
         "message": "Params can only be specified for get, call, subscribe, unsubscribe, or read methods"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct McpMethod {
    /// Name of the method. `tools`, `prompts` and `resources` match every method under that prefix;
    /// the other values (`tools/list`, `tools/call`, `prompts/get`, `resources/read`, ...) match exactly.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("enum" = [
            "tools", "prompts", "resources", "prompts/list", "tools/list", "resources/list",
            "resources/templates/list", "prompts/get", "tools/call", "resources/subscribe",
            "resources/unsubscribe", "resources/read", "server/discover", "subscriptions/listen"
        ]))
    )]
    pub name: String,
    /// Params are the allowed tool or prompt names (`params.name` of tools/call and prompts/get) or
    /// resource URIs (`params.uri` of resources/read, subscribe and unsubscribe), compared exactly.
    /// Empty = any. Only for those five methods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10), inner(length(max = 128))))]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set")))]
    pub params: Vec<String>,
}

/// A CEL authorization expression.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CelRule {
    /// Expression to evaluate; the rule matches when it yields `true`. Variables: `request.mcp.tool_name`,
    /// `request.mcp.method`, `request.mcp.params`, `request.path`, `request.url_path`, `request.method`,
    /// `request.host`, `request.headers`, `request.time`, `source.principal`.
    pub expression: String,
}

/// Gateway API `HTTPExternalAuthFilter`: the external authorizer and how to call it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.protocol == 'GRPC' ? has(self.grpc) : true",
         "message": "grpc must be specified when protocol is set to 'GRPC'"},
        {"rule": "has(self.grpc) ? self.protocol == 'GRPC' : true",
         "message": "protocol must be 'GRPC' when grpc is set"},
        {"rule": "self.protocol == 'HTTP' ? has(self.http) : true",
         "message": "http must be specified when protocol is set to 'HTTP'"},
        {"rule": "has(self.http) ? self.protocol == 'HTTP' : true",
         "message": "protocol must be 'HTTP' when http is set"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct HttpExternalAuthFilter {
    /// Protocol of the authorizer: `GRPC` (Envoy `envoy.service.auth.v3.Authorization`) or `HTTP`
    /// (a 2xx answer allows).
    pub protocol: ExternalAuthProtocol,
    /// BackendRef is the authorizer's Service (with its port) or other backend.
    pub backend_ref: BackendObjectReference,
    /// GRPC settings; required with protocol `GRPC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAuthConfig>,
    /// HTTP settings; required with protocol `HTTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpAuthConfig>,
    /// ForwardBody sends up to `maxSize` bytes of the request body to the authorizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_body: Option<ForwardBodyConfig>,
}

/// Protocol of an external authorizer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ExternalAuthProtocol {
    #[serde(rename = "HTTP")]
    Http,
    #[default]
    #[serde(rename = "GRPC")]
    Grpc,
}

/// Gateway API `BackendObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
         "message": "Must have port for Service reference"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    /// Group of the referent; empty (the default) is the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = "")))]
    pub group: Option<String>,
    /// Kind of the referent; defaults to `Service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Service"))
    )]
    pub kind: Option<String>,
    /// Name of the referent.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// Namespace of the referent; defaults to the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 63), pattern(DNS_LABEL_PATTERN)))]
    pub namespace: Option<String>,
    /// Port of the referent (the Service port); required for Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<u16>,
}

/// gRPC authorizer settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GrpcAuthConfig {
    /// AllowedHeaders are the request headers sent to the authorizer. Empty = all headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Vec<String>,
}

/// HTTP authorizer settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpAuthConfig {
    /// Path is a prefix added to the request path in the call to the authorizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024), pattern(HTTP_PATH_PATTERN)))]
    pub path: Option<String>,
    /// AllowedHeaders are request headers sent to the authorizer, besides Host, Method, Path,
    /// Content-Length and Authorization.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Vec<String>,
    /// AllowedResponseHeaders are the authorizer's response headers copied to the upstream request.
    /// Empty = all but Authority and Host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_response_headers: Vec<String>,
}

/// Whether the request body is sent to the authorizer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForwardBodyConfig {
    /// MaxSize is the largest body prefix, in bytes, sent to the authorizer; 0 or unset sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u32>,
}

/// `XAccessPolicy.status` (v1alpha1 and v0alpha0): one entry per target (Gateway API policy status).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicyStatus {
    /// Ancestors are the targets of the policy and whether the policy is accepted for each.
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub ancestors: Vec<PolicyAncestorStatus>,
}

/// Gateway API `PolicyAncestorStatus`: the status of a policy for one ancestor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    /// AncestorRef is the ancestor (the Gateway or XBackend the policy targets).
    pub ancestor_ref: ParentReference,
    /// ControllerName is the controller that wrote this entry, `DOMAIN/PATH`.
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = 253),
            pattern(
                r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
            )
        )
    )]
    pub controller_name: String,
    /// Conditions of the policy for this ancestor (`Accepted`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 8)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
}

/// Gateway API `ParentReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// Group of the referent; defaults to `gateway.networking.k8s.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = "gateway.networking.k8s.io"))
    )]
    pub group: Option<String>,
    /// Kind of the referent; defaults to `Gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Gateway"))
    )]
    pub kind: Option<String>,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 63), pattern(DNS_LABEL_PATTERN)))]
    pub namespace: Option<String>,
    /// Name of the referent.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// SectionName is a section of the referent (a Gateway listener).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN_PATTERN)))]
    pub section_name: Option<String>,
    /// Port of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<u16>,
}

/// Kubernetes `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, in CamelCase or `foo.example.com/CamelCase`.
    #[serde(rename = "type")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 316),
            pattern(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
        )
    )]
    pub condition_type: String,
    /// Status of the condition: `True`, `False` or `Unknown`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["True", "False", "Unknown"])))]
    pub status: String,
    /// ObservedGeneration is the `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub observed_generation: Option<i64>,
    /// LastTransitionTime is when the status last changed (RFC 3339).
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub last_transition_time: String,
    /// Reason is a CamelCase identifier of why the condition has its status.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 1024), pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"))
    )]
    pub reason: String,
    /// Message is a human-readable explanation; it may be empty.
    #[cfg_attr(feature = "schema", schemars(length(max = 32768)))]
    pub message: String,
}

/// `XBackend.spec` (v0alpha0): an MCP server behind a Kubernetes Service or an external hostname.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendSpec {
    /// MCP describes the MCP server.
    pub mcp: McpBackend,
}

/// An MCP server: exactly one of `serviceName` (a Service in the XBackend's namespace) and `hostname`
/// (an external server, reached with TLS).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "[has(self.serviceName),has(self.hostname)].filter(x,x==true).size() == 1",
         "message": "exactly one of the fields in [serviceName hostname] must be set"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct McpBackend {
    /// ServiceName is the name of the Kubernetes Service of the MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Hostname is the DNS name of an external MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Port of the MCP server.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: u16,
    /// Path of the MCP endpoint. Defaults to `/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "/mcp")))]
    pub path: Option<String>,
}

impl McpBackend {
    pub fn path_or_default(&self) -> &str {
        self.path.as_deref().unwrap_or("/mcp")
    }
}

/// `XBackend.status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    /// Conditions of the XBackend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
}
