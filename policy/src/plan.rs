//! The compiled plan: everything the filter needs to decide requests on one Gateway listener, as
//! versioned plain data. The controller/CLI writes it; the filter receives it as its plugin
//! configuration and validates it on load ([`crate::eval::Evaluator::load`]).
//!
//! Policies are already accepted, ordered (creationTimestamp, then namespace/name) and flattened:
//! the filter never sorts, resolves references or looks at Kubernetes objects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelPlan {
    /// The level's ExternalAuth policy (at most one is accepted per target), run before `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "externalAuth")]
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
        self.external_auth.as_ref().is_some_and(|ea| ea.dry_run) || self.allow.iter().any(|p| p.dry_run)
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
    #[serde(default, skip_serializing_if = "is_zero", deserialize_with = "whole::u32")]
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
    /// Listener ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "whole::u16_vec")]
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
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "exact_vec")]
    pub methods: Vec<McpMethodMatch>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpMethodMatch {
    pub method: MethodPattern,
    /// `params.name` (tools/call, prompts/get) or `params.uri` (resources/*) must equal one of
    /// these. Empty = any.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "exact_vec")]
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

    /// The hash of the plan's content (everything but `hash` itself): hex SHA-256 of the plan's
    /// compact serde_json serialisation with `hash` empty.
    pub fn content_hash(&self) -> String {
        // The same fields, in the same order, as the derived `Serialize`, with `hash` empty: cloning
        // the plan to clear it would copy every policy. Destructuring keeps the two in step when a
        // field is added (`content_hash_ignores_only_the_hash` pins the result).
        #[derive(Serialize)]
        struct Unhashed<'p> {
            version: u32,
            hash: &'static str,
            listener: &'p str,
            settings: &'p PlanSettings,
            gateway: &'p LevelPlan,
            backends: &'p BTreeMap<String, LevelPlan>,
        }
        let CompiledPlan { version, hash: _, listener, settings, gateway, backends } = self;
        let unhashed = Unhashed { version: *version, hash: "", listener, settings, gateway, backends };
        // Serialising plain data cannot fail; an empty string would only make the hash weaker.
        let bytes = serde_json::to_vec(&unhashed).unwrap_or_default();
        hex(&Sha256::digest(&bytes))
    }

    /// Sets `hash` to the content hash.
    pub fn seal(mut self) -> Self {
        self.hash = self.content_hash();
        self
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
        Vec::<Number>::deserialize(d)?.into_iter().map(convert).collect()
    }
}

/// A vector without spare capacity, grown at most rarely. serde grows vectors by doubling from 4
/// elements and a plan is mostly short vectors: a third of a loaded plan's memory was spare capacity
/// and every growth a reallocation (memory is slow to grow in a Wasm VM). Same errors as `Vec`'s.
fn exact_vec<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    struct Exact<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Exact<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            // Room for 256 bytes of elements to start with: most vectors then never grow.
            let mut v = Vec::with_capacity(256 / std::mem::size_of::<T>().max(1));
            while let Some(x) = seq.next_element()? {
                v.push(x);
            }
            v.shrink_to_fit();
            Ok(v)
        }
    }
    d.deserialize_seq(Exact(std::marker::PhantomData))
}

/// [`CompiledPlan::content_hash`] of the plan `json` holds, computed from the text instead of a
/// re-serialisation: SHA-256 of `json` without whitespace between tokens and with the top-level
/// `hash` value emptied. serde_json's pretty output is its compact output plus such whitespace, so
/// for a plan serde_json wrote (the controller writes plans compact or pretty) this is the content
/// hash. Any other rendering of the same plan (keys reordered, other escapes, `null` for an absent
/// field) gives another value: callers fall back to `content_hash` when it does not match.
///
/// `json` must have parsed as a plan: for other input the result is meaningless (never a panic).
pub(crate) fn json_content_hash(json: &[u8]) -> String {
    let mut sha = Sha256::new();
    // json[hashed..i] is still to be fed to `sha`.
    let mut hashed = 0;
    let mut depth = 0u32;
    // The last token was the top-level key `"hash"` / the `:` after it.
    let (mut after_hash_key, mut before_hash_value) = (false, false);
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                if hashed < i {
                    sha.update(json.get(hashed..i).unwrap_or_default());
                }
                hashed = i + 1;
            }
            b'"' => {
                let end = string_end(json, i + 1);
                if before_hash_value {
                    // Hash the opening quote, skip the value up to the closing one.
                    sha.update(json.get(hashed..=i).unwrap_or_default());
                    hashed = end;
                    before_hash_value = false;
                } else {
                    after_hash_key = depth == 1 && json.get(i + 1..end) == Some(&b"hash"[..]);
                }
                i = end;
            }
            _ => {
                match b {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                before_hash_value = after_hash_key && b == b':';
                after_hash_key = false;
            }
        }
        i += 1;
    }
    sha.update(json.get(hashed..).unwrap_or_default());
    hex(&sha.finalize())
}

/// Index of the quote closing the JSON string whose content starts at `start` (`json.len()` if none).
fn string_end(json: &[u8], start: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    /// The high bit of each zero byte of `word`, and maybe of bytes after the first zero one: the
    /// lowest set bit is exact.
    fn zero_bytes(word: u64) -> u64 {
        word.wrapping_sub(ONES) & !word & (ONES << 7)
    }
    let mut i = start;
    loop {
        // Skip eight bytes at a time to the next quote or backslash.
        while let Some(Ok(chunk)) = json.get(i..i + 8).map(<[u8; 8]>::try_from) {
            let word = u64::from_le_bytes(chunk);
            let special = zero_bytes(word ^ (ONES * u64::from(b'"'))) | zero_bytes(word ^ (ONES * u64::from(b'\\')));
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match json.get(i) {
            None => return json.len(),
            Some(b'"') => return i,
            Some(b'\\') => i += 2,
            Some(_) => i += 1,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed plan with what could trip a text scan: whitespace, quotes, backslashes, escapes and
    /// non-ASCII in strings, and `hash` as a name at other depths.
    fn tricky_plan() -> CompiledPlan {
        let rule = |name: &str| RulePlan {
            name: name.into(),
            principal: Some("spiffe://td/ns/a b/sa/\"q\"".into()),
            mcp: Some(McpMatch {
                base_protocol: false,
                methods: vec![McpMethodMatch {
                    method: MethodPattern::Exact("tools/call".into()),
                    params: vec!["hash".into(), "a\\\"b\n\t\u{1}é😀".into(), " ".into()],
                }],
            }),
            ..RulePlan::default()
        };
        let mut plan = CompiledPlan::empty("ns/gw/l \"hash\":\"x\"");
        plan.gateway.allow.push(PolicyPlan {
            name: "ns/p".into(),
            rules: vec![rule(IMPLICIT_RULE), rule("hash")],
            dry_run: false,
        });
        let backend = PolicyPlan { name: "hash".into(), rules: vec![rule("r")], dry_run: false };
        plan.backends.insert("hash".into(), LevelPlan { allow: vec![backend], ..Default::default() });
        plan.seal()
    }

    /// Istio's rendering of a plan: keys in another order, numbers as doubles.
    #[test]
    fn whole_numbers_written_as_doubles_load() {
        let mut plan = tricky_plan();
        plan.gateway.allow[0].rules[0].http.ports = vec![8443, 80];
        let plan = plan.seal();
        let json = serde_json::to_string(&plan).unwrap();
        let doubled = json
            .replace(r#""version":1"#, r#""version":1.0"#)
            .replace(r#""maxBodyBytes":1048576"#, r#""maxBodyBytes":1.048576e+06"#)
            .replace(r#""ports":[8443,80]"#, r#""ports":[8443.0,8e1]"#);
        assert_ne!(doubled, json);
        assert_eq!(crate::eval::Evaluator::load(doubled.as_bytes()).unwrap().plan(), &plan);
        for bad in [r#""version":1.5"#, r#""version":-1"#, r#""version":4294967296"#] {
            let text = json.replace(r#""version":1"#, bad);
            assert!(crate::eval::Evaluator::load(text.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_hash_ignores_only_the_hash() {
        let plan = tricky_plan();
        let mut unhashed = plan.clone();
        unhashed.hash.clear();
        let expected = hex(&Sha256::digest(serde_json::to_vec(&unhashed).unwrap()));
        assert_eq!(plan.hash, expected);
        assert_eq!(unhashed.content_hash(), expected);
        unhashed.listener.push('x');
        assert_ne!(unhashed.content_hash(), expected);
    }

    #[test]
    fn the_text_hash_of_serde_json_output_is_the_content_hash() {
        for plan in [tricky_plan(), CompiledPlan::empty("l").seal()] {
            for json in [serde_json::to_vec(&plan).unwrap(), serde_json::to_vec_pretty(&plan).unwrap()] {
                assert_eq!(json_content_hash(&json), plan.hash, "{}", String::from_utf8_lossy(&json));
            }
        }
        let plan = tricky_plan();
        // Equal with or without a hash, whatever its value.
        let mut unhashed = plan.clone();
        unhashed.hash = "0".repeat(64);
        assert_eq!(json_content_hash(&serde_json::to_vec(&unhashed).unwrap()), plan.hash);
        unhashed.hash.clear();
        assert_eq!(json_content_hash(&serde_json::to_vec(&unhashed).unwrap()), plan.hash);
    }

    #[test]
    fn the_text_hash_of_other_renderings_differs() {
        let plan = tricky_plan();
        let compact = serde_json::to_string(&plan).unwrap();
        // Keys reordered (serde_json::Value sorts them), `/` escaped, a field spelled out.
        let value: serde_json::Value = serde_json::from_str(&compact).unwrap();
        let reordered = serde_json::to_string(&value).unwrap();
        let escaped = compact.replace("ns/", "ns\\/");
        let spelled_out = compact.replace(r#""name":"r","#, r#""name":"r","http":{},"#);
        let tampered = compact.replace("ns/p", "ns/q");
        for json in [reordered, escaped, spelled_out, tampered] {
            assert_ne!(compact, json);
            assert_ne!(json_content_hash(json.as_bytes()), plan.hash, "{json}");
        }
    }
}
