//! The compiled plan: everything the filter needs to decide requests on one Gateway listener, as
//! versioned plain data. The controller/CLI writes it; the filter receives it as its plugin
//! configuration and validates it on load ([`crate::eval::Evaluator::load`]).
//!
//! Policies are already accepted, ordered (creationTimestamp, then namespace/name) and flattened:
//! the filter never sorts, resolves references or looks at Kubernetes objects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod hash;

pub(crate) use hash::json_content_hash;

/// Bumped on any incompatible change of the plan's shape or meaning.
pub const PLAN_VERSION: u32 = 1;

/// Default limit for a buffered request body (docs/semantics.md §4).
pub const DEFAULT_MAX_BODY_BYTES: u32 = 1024 * 1024;

/// Default time an external authorizer has to answer (docs/semantics.md §3).
pub const DEFAULT_AUTHZ_TIMEOUT_MS: u32 = 5000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledPlan {
    #[serde(deserialize_with = "whole::u32")]
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
    #[serde(deserialize_with = "whole::u32")]
    pub max_body_bytes: u32,
    /// Put the deciding level/policy/rule into denial bodies (never on by default: docs/semantics.md §5).
    #[serde(default)]
    pub debug_reasons: bool,
    /// How long an external authorizer may take to answer; past it the request is denied.
    #[serde(default = "default_authz_timeout", deserialize_with = "whole::u32")]
    pub authz_timeout_ms: u32,
    /// The host keeps delivering the body after the filter pauses on the request headers (Envoy
    /// 1.35 and later, with the Wasm PluginConfig's `allow_on_headers_stop_iteration`, which
    /// `render` sets). Then a JSON POST under an ExternalAuth policy is held from its headers on, so that
    /// the header changes an authorizer asks for can still be made (Envoy stops taking header
    /// changes once the filter lets the headers continue).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pause_headers: bool,
    /// docs/semantics.md §5 list filtering: the results of allowed `tools/list`, `prompts/list` and
    /// `resources/list` keep only the entries the caller may use (on by default; written only when
    /// off, so that plans without the setting keep their hash).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub list_filtering: bool,
    /// docs/semantics.md §6a deny by default: on a route where no (enforced) policy applies at either
    /// level, MCP messages other than the base protocol's are denied, and so is every request that
    /// is not MCP (the base protocol's GET and DELETE pass). Written only when on, so that plans
    /// without the setting keep their hash.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default_deny: bool,
    /// With `default_deny`, requests for these hosts pass a route where no policy applies, as
    /// without the setting: the controller lists the other listeners' hostnames on a shared port
    /// (their own plans decide them). Written only when not empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_deny_except_hosts: Vec<HostMatch>,
    /// The same by TLS server name (SNI), where Istio picks the listener by SNI (HTTPS listeners
    /// sharing a port). Written only when not empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_deny_except_server_names: Vec<HostMatch>,
    /// The listener lets clients through with certificates it has not verified (the Gateway API's
    /// frontend validation `mode: AllowInsecureFallback`, which istiod turns into a TLS server that
    /// accepts untrusted chains). A URI SAN there is what the client claims, not who it is: the
    /// filter never reads the peer certificate, so rules with a `source` match no one and
    /// authorizers are told no caller (docs/semantics.md §2). Written only when on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified_client_certificates: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn default_authz_timeout() -> u32 {
    DEFAULT_AUTHZ_TIMEOUT_MS
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            debug_reasons: false,
            authz_timeout_ms: DEFAULT_AUTHZ_TIMEOUT_MS,
            pause_headers: false,
            list_filtering: true,
            default_deny: false,
            default_deny_except_hosts: Vec::new(),
            default_deny_except_server_names: Vec::new(),
            unverified_client_certificates: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelPlan {
    /// The level's ExternalAuth policy (at most one is accepted per target), run before `allow`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "externalAuth"
    )]
    pub external_auth: Option<ExternalAuthPlan>,
    /// Allow policies in evaluation order. Empty = the level places no restriction.
    #[serde(default, deserialize_with = "exact_vec")]
    pub allow: Vec<PolicyPlan>,
}

impl LevelPlan {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.external_auth.is_none()
    }

    /// Whether a dry-run policy is at this level.
    pub fn has_dry_run(&self) -> bool {
        self.external_auth.as_ref().is_some_and(|ea| ea.dry_run)
            || self.allow.iter().any(|p| p.dry_run)
    }

    /// The level as enforced: without its dry-run policies.
    pub fn enforced(&self) -> LevelPlan {
        LevelPlan {
            external_auth: self.external_auth.clone().filter(|ea| !ea.dry_run),
            allow: self.allow.iter().filter(|p| !p.dry_run).cloned().collect(),
        }
    }
}

/// An ExternalAuth policy: when a request matches one of its rules (any request, when it has
/// none), the authorizer is asked, and the request is denied unless it allows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalAuthPlan {
    /// `namespace/name`.
    pub policy: String,
    /// The rules that make the call, at least one: a policy without rules has the implicit rule
    /// that matches every request.
    #[serde(deserialize_with = "exact_vec")]
    pub rules: Vec<RulePlan>,
    pub authorizer: AuthorizerPlan,
    /// docs/semantics.md §6a: the authorizer is asked, but its answer only decides the shadow
    /// decision (written only when set: plans without dry-run policies keep their hash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not", rename = "dryRun")]
    pub dry_run: bool,
}

/// How to reach an external authorizer and what to send it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthorizerPlan {
    /// The Envoy cluster of the authorizer (`authz/<ns>/<name>/<port>` in a rendered config;
    /// `outbound|<port>||<host>` under Istio).
    pub cluster: String,
    /// The authorizer's host name: the `:authority` of gRPC calls (`<name>.<namespace>.svc.<cluster
    /// domain>` for a Service).
    pub authority: String,
    pub protocol: AuthorizerProtocol,
    /// Request headers (lower-case) sent to the authorizer. gRPC: empty = all. HTTP: besides
    /// `host`, `:method`, `:path`, `content-length` and `authorization`, which are always sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    /// Up to this many bytes of a buffered (JSON POST) body are sent; 0 = none.
    #[serde(
        default,
        skip_serializing_if = "is_zero",
        deserialize_with = "whole::u32"
    )]
    pub forward_body_bytes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum AuthorizerProtocol {
    /// `envoy.service.auth.v3.Authorization/Check`.
    Grpc,
    Http {
        /// Prefix of the path of the call (the original path follows it).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        path_prefix: String,
        /// The authorizer's response headers (lower-case) copied to the upstream request on an
        /// allow; empty = all but hop-by-hop ones, `host` and pseudo-headers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allowed_response_headers: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPlan {
    /// `namespace/name`.
    pub name: String,
    /// At least one rule: a policy without rules compiles to one rule matching everything.
    #[serde(deserialize_with = "exact_vec")]
    pub rules: Vec<RulePlan>,
    /// docs/semantics.md §6a: evaluated for the shadow decision only, never enforced (written only
    /// when set: plans without dry-run policies keep their hash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not", rename = "dryRun")]
    pub dry_run: bool,
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
    /// A CEL expression that must yield `true` (docs/semantics.md §3; such a rule's `mcp` is `tools/call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
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
    /// The TLS server name (SNI) the client asked for: written by the controller where Istio picks
    /// the listener by SNI (HTTPS listeners sharing a port), never from a policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "serverNames")]
    pub server_names: Vec<HostMatch>,
    /// Listener ports.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "whole::u16_vec"
    )]
    pub ports: Vec<u16>,
}

impl HttpMatch {
    pub fn is_any(&self) -> bool {
        self.methods.is_empty()
            && self.paths.is_empty()
            && self.headers.is_empty()
            && self.hosts.is_empty()
            && self.server_names.is_empty()
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
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub methods: Vec<McpMethodMatch>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpMethodMatch {
    pub method: MethodPattern,
    /// `params.name` (tools/call, prompts/get) or `params.uri` (resources/*) must equal one of
    /// these. Empty = any.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub params: Vec<String>,
}

/// The method names that match every method under `<name>/` (`MethodPattern::Category`).
pub const METHOD_CATEGORIES: [&str; 4] = ["tools", "prompts", "resources", "tasks"];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MethodPattern {
    /// `tools`, `prompts`, `resources`, `tasks`: any method under `<category>/`.
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
}

/// Integers that may arrive as JSON doubles. Istio hands a WasmPlugin's `pluginConfig` (a protobuf
/// Struct, whose numbers are doubles) to the filter as JSON text: `1048576` may come as
/// `1.048576e+06` or `1048576.0`. Any number with no fraction, in range, is accepted.
mod whole {
    use serde::{Deserialize, Deserializer};

    fn from_f64<T: TryFrom<u64>, E: serde::de::Error>(f: f64) -> Result<T, E> {
        if f.fract() != 0.0 || !(0.0..=u64::MAX as f64).contains(&f) {
            return Err(E::custom(format!("{f} is not a whole number")));
        }
        T::try_from(f as u64).map_err(|_| E::custom(format!("{f} is out of range")))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Int(u64),
        Float(f64),
    }

    fn convert<T: TryFrom<u64>, E: serde::de::Error>(n: Number) -> Result<T, E> {
        match n {
            Number::Int(i) => T::try_from(i).map_err(|_| E::custom(format!("{i} is out of range"))),
            Number::Float(f) => from_f64(f),
        }
    }

    pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        convert(Number::deserialize(d)?)
    }

    pub fn u16_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        Vec::<Number>::deserialize(d)?
            .into_iter()
            .map(convert)
            .collect()
    }
}

/// A vector without spare capacity, grown at most rarely. serde grows vectors by doubling from 4
/// elements and a plan is mostly short vectors: a third of a loaded plan's memory was spare capacity
/// and every growth a reallocation (memory is slow to grow in a Wasm VM). Same errors as `Vec`'s.
fn exact_vec<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    struct Exact<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Exact<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            // Room for 256 bytes of elements to start with: most vectors then never grow.
            let mut v = Vec::with_capacity(256 / size_of::<T>().max(1));
            while let Some(x) = seq.next_element()? {
                v.push(x);
            }
            v.shrink_to_fit();
            Ok(v)
        }
    }
    d.deserialize_seq(Exact(std::marker::PhantomData))
}

#[cfg(test)]
mod tests;
