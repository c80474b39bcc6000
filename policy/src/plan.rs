//! The compiled plan: everything the filter needs to decide requests on one Gateway listener, as
//! versioned plain data. The controller/CLI writes it; the filter receives it as its plugin
//! configuration and validates it on load ([`crate::eval::Evaluator::load`]).
//!
//! Policies are already accepted, ordered (creationTimestamp, then namespace/name) and flattened:
//! the filter never sorts, resolves references or looks at Kubernetes objects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bumped on any incompatible change of the plan's shape or meaning.
pub const PLAN_VERSION: u32 = 1;

/// Default limit for a buffered request body (SPEC §4).
pub const DEFAULT_MAX_BODY_BYTES: u32 = 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledPlan {
    pub version: u32,
    /// Hex SHA-256 of the plan serialised with `hash` empty: identifies the plan in logs and status.
    #[serde(default)]
    pub hash: String,
    /// `namespace/gateway/listener`, for logs.
    pub listener: String,
    #[serde(default)]
    pub settings: PlanSettings,
    /// Policies targeting the Gateway (all listeners, or this one by `sectionName`).
    pub gateway: LevelPlan,
    /// Policies targeting an XBackend, keyed by the Envoy cluster the route selects for it.
    #[serde(default)]
    pub backends: BTreeMap<String, LevelPlan>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanSettings {
    /// Bodies over this many bytes are refused with 413.
    pub max_body_bytes: u32,
    /// Put the deciding level/policy/rule into denial bodies (never on by default: SPEC §5).
    #[serde(default)]
    pub debug_reasons: bool,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self { max_body_bytes: DEFAULT_MAX_BODY_BYTES, debug_reasons: false }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelPlan {
    /// Allow policies in evaluation order. Empty = the level places no restriction.
    #[serde(default)]
    pub allow: Vec<PolicyPlan>,
}

impl LevelPlan {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPlan {
    /// `namespace/name`.
    pub name: String,
    /// At least one rule: a policy without rules compiles to one rule matching everything.
    pub rules: Vec<RulePlan>,
}

/// Name given to the rule a policy without rules implicitly has.
pub const IMPLICIT_RULE: &str = "(all requests)";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulePlan {
    pub name: String,
    /// The caller's SPIFFE ID must equal this (case-sensitive). None = any caller, even without identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "HttpMatch::is_any")]
    pub http: HttpMatch,
    /// None = no MCP restriction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpMatch>,
}

/// HTTP matchers; every non-empty list must hold (AND); within a list any item (OR), except
/// `headers`, where all must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpMatch {
    /// Upper-case HTTP methods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostMatch>,
    /// Listener ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

impl HttpMatch {
    pub fn is_any(&self) -> bool {
        self.methods.is_empty()
            && self.paths.is_empty()
            && self.headers.is_empty()
            && self.hosts.is_empty()
            && self.ports.is_empty()
    }
}

/// Matched against the path as received, without the query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PathMatch {
    Exact(String),
    /// Gateway API PathPrefix: element-wise (`/a` matches `/a` and `/a/b`, not `/ab`).
    Prefix(String),
    /// RE2 syntax, must match the whole path.
    Regex(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// Lower-case header name.
    pub name: String,
    #[serde(flatten)]
    pub value: ValueMatch,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ValueMatch {
    Exact(String),
    /// RE2 syntax, must match the whole value.
    Regex(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HostMatch {
    /// Lower-case host name.
    Exact(String),
    /// `*.example.com` stored as `.example.com`: any deeper name, not `example.com` itself.
    Suffix(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct McpMatch {
    /// MATCH_BASE_PROTOCOL_METHODS: the base protocol (initialize, ping, notifications, GET, ...)
    /// is allowed in addition to `methods`.
    #[serde(default)]
    pub base_protocol: bool,
    /// OR-ed. Empty with `base_protocol` false = the rule places no MCP restriction (compiles to
    /// `mcp: None` instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<McpMethodMatch>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpMethodMatch {
    pub method: MethodPattern,
    /// `params.name` (tools/call, prompts/get) or `params.uri` (resources/*) must equal one of
    /// these. Empty = any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MethodPattern {
    /// `tools`, `prompts`, `resources`: any method under `<category>/`.
    Category(String),
    Exact(String),
}

impl CompiledPlan {
    /// An empty plan for a listener: no policy, every request allowed.
    pub fn empty(listener: impl Into<String>) -> Self {
        Self {
            version: PLAN_VERSION,
            hash: String::new(),
            listener: listener.into(),
            settings: PlanSettings::default(),
            gateway: LevelPlan::default(),
            backends: BTreeMap::new(),
        }
    }

    /// The hash of the plan's content (everything but `hash` itself).
    pub fn content_hash(&self) -> String {
        let mut unhashed = self.clone();
        unhashed.hash.clear();
        // Serialising plain data cannot fail; an empty string would only make the hash weaker.
        let bytes = serde_json::to_vec(&unhashed).unwrap_or_default();
        use sha2::Digest;
        let digest = sha2::Sha256::digest(&bytes);
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Sets `hash` to the content hash.
    pub fn seal(mut self) -> Self {
        self.hash = self.content_hash();
        self
    }
}
