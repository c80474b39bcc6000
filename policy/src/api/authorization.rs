//! The `authorization` of a rule: inline HTTP matchers (methods, paths, headers, hosts, ports), MCP, CEL.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use super::{HEADER_NAME_PATTERN, HOSTNAME_PATTERN};

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
        schemars(
            length(max = 10),
            inner(length(min = 1, max = 253), pattern(HOSTNAME_PATTERN))
        )
    )]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set")))]
    pub hosts: Vec<String>,
    /// Ports are listener ports; the request must arrive on one of them. Empty = any port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 10), inner(range(min = 1, max = 65535)))
    )]
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
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN))
    )]
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
    /// Name of the method. `tools`, `prompts`, `resources` and `tasks` match every method under that
    /// prefix; the other values (`tools/list`, `tools/call`, `prompts/get`, `resources/read`,
    /// `tasks/result`, ...) match exactly. The `tasks` values (MCP's tasks: `tasks/get`,
    /// `tasks/result`, `tasks/list`, `tasks/cancel`) are Toolgate's, beside the upstream API's.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("enum" = [
            "tools", "prompts", "resources", "prompts/list", "tools/list", "resources/list",
            "resources/templates/list", "prompts/get", "tools/call", "resources/subscribe",
            "resources/unsubscribe", "resources/read", "server/discover", "subscriptions/listen",
            "tasks", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel"
        ]))
    )]
    pub name: String,
    /// Params are the allowed tool or prompt names (`params.name` of tools/call and prompts/get) or
    /// resource URIs (`params.uri` of resources/read, subscribe and unsubscribe), compared exactly.
    /// Empty = any. Only for those five methods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 10), inner(length(max = 128)))
    )]
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
