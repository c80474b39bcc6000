//! The MCP 2026-07-28 revision (stateless, per-request `_meta`), beside the
//! 2025-11-25 one on the same endpoint. Pure functions: no I/O.
//!
//! What this server does for a 2026-07-28 request (docs/specification/2026-07-28,
//! basic/transports/streamable-http.mdx "Request Metadata" and "Server Validation"):
//! - `MCP-Protocol-Version` is required and must equal
//!   `params._meta["io.modelcontextprotocol/protocolVersion"]` where the body has it;
//! - `Mcp-Method` is required and must equal `method`;
//! - `Mcp-Name` is required for `tools/call`, `prompts/get` (`params.name`) and
//!   `resources/read` (`params.uri`) and, where sent, must equal the body's value after
//!   decoding the `=?base64?…?=` form; on a message with neither name nor uri it is a mismatch;
//! - a repeated `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` field is a mismatch;
//! - any mismatch is HTTP 400 with JSON-RPC error -32020 (HeaderMismatch), never executed;
//! - an unsupported version is HTTP 400 with -32022 and `data.supported`; an unknown method
//!   (incl. the removed `initialize`, `ping`, `resources/subscribe`) is HTTP 404 with -32601;
//! - every result has `resultType: "complete"` and `_meta` serverInfo; `server/discover`, the
//!   lists and `resources/read` carry `ttlMs` and `cacheScope`.
//!
//! `Mcp-Param-*` headers are not interpreted (no tool declares `x-mcp-header`).

use serde_json::{json, Map, Value};

use crate::mcp::{self, RpcError};

/// The revision this module speaks.
pub const VERSION: &str = "2026-07-28";
/// The versions this server answers with the `initialize` handshake.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// `ttlMs` of cacheable results (milliseconds).
pub const TTL_MS: u64 = 60_000;

/// The body's `params._meta` protocol version, if it is a string.
pub fn meta_version(msg: &Value) -> Option<&str> {
    msg.get("params")?
        .get("_meta")?
        .get(META_PROTOCOL_VERSION)?
        .as_str()
}

/// Whether a POST is a 2026-07-28 (or later) request: its `MCP-Protocol-Version` header names a
/// version that is not a handshake-era one, or its (single) message carries the `_meta` version.
pub fn is_modern(header_version: Option<&str>, body: &Value) -> bool {
    if let Some(v) = header_version {
        if !LEGACY_VERSIONS.contains(&v) {
            return true;
        }
    }
    body.is_object() && meta_version(body).is_some()
}

/// Whether a GET or DELETE says it is 2026-07-28 traffic (these have no such thing: 405).
pub fn header_is_modern(header_version: Option<&str>) -> bool {
    matches!(header_version, Some(v) if !LEGACY_VERSIONS.contains(&v))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Canonical, padded standard base64 only (what `base64_encode` produces), else None.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let bytes = s.as_bytes();
    for (ci, chunk) in bytes.chunks(4).enumerate() {
        let last = ci + 1 == bytes.len() / 4;
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &c) in chunk.iter().enumerate() {
            let v = if c == b'=' {
                if !last || i < 2 {
                    return None;
                }
                pad += 1;
                0
            } else {
                if pad > 0 {
                    return None;
                }
                B64.iter().position(|&x| x == c)? as u32
            };
            n = (n << 6) | v;
        }
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    (base64_encode(&out) == s).then_some(out)
}

/// The value of an `Mcp-Name` / `Mcp-Param-*` header: the `=?base64?…?=` form decoded (UTF-8),
/// other values as sent. None for a malformed encoded value.
pub fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(payload) => String::from_utf8(base64_decode(payload)?).ok(),
        None => Some(v.to_string()),
    }
}

/// The body value `Mcp-Name` mirrors: `params.uri` for resources methods, else `params.name`
/// (falling back to the other one for methods that name neither kind).
fn body_name<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let get = |k: &str| params.and_then(|p| p.get(k)).and_then(Value::as_str);
    if method.starts_with("resources/") {
        get("uri").or_else(|| get("name"))
    } else {
        get("name").or_else(|| get("uri"))
    }
}

/// Whether `Mcp-Name` is required for this method.
fn name_bearing(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// Checks the standard request headers against one message. `values(name)` returns every field
/// of a (lower-case) header name. Err is the text after "Header mismatch: ".
pub fn check_headers<'a>(
    values: impl Fn(&str) -> Vec<&'a str>,
    method: &str,
    params: Option<&Value>,
    body_version: Option<&str>,
) -> Result<(), String> {
    let one = |name: &str, shown: &str| -> Result<Option<&'a str>, String> {
        let v = values(name);
        match v.len() {
            0 => Ok(None),
            1 => Ok(Some(v[0])),
            n => Err(format!("{shown} header sent {n} times")),
        }
    };
    match one("mcp-protocol-version", "MCP-Protocol-Version")? {
        None => return Err("MCP-Protocol-Version header is missing".into()),
        Some(h) => {
            if let Some(b) = body_version {
                if h != b {
                    return Err(format!(
                        "MCP-Protocol-Version header value '{h}' does not match body value '{b}'"
                    ));
                }
            }
        }
    }
    match one("mcp-method", "Mcp-Method")? {
        None => return Err("Mcp-Method header is missing".into()),
        Some(h) if h != method => {
            return Err(format!(
                "Mcp-Method header value '{h}' does not match body value '{method}'"
            ))
        }
        Some(_) => {}
    }
    let body = body_name(method, params);
    match one("mcp-name", "Mcp-Name")? {
        None if name_bearing(method) => Err("Mcp-Name header is missing".into()),
        None => Ok(()),
        Some(h) => {
            let decoded = decode_header_value(h)
                .ok_or_else(|| format!("Mcp-Name header value '{h}' is not valid base64 UTF-8"))?;
            match body {
                None => Err(format!("Mcp-Name header sent for a message without params.name or params.uri ('{decoded}')")),
                Some(b) if b != decoded => Err(format!("Mcp-Name header value '{decoded}' does not match body value '{b}'")),
                Some(_) => Ok(()),
            }
        }
    }
}

/// The error of a header mismatch.
pub fn mismatch(why: &str) -> RpcError {
    RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {why}"))
}

/// The error for a protocol version this server does not speak.
pub fn unsupported(requested: &str) -> RpcError {
    let mut e = RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!("Unsupported protocol version: {requested}"),
    );
    e.data = Some(json!({"supported": [VERSION], "requested": requested}));
    e
}

fn server_meta(server_name: &str) -> Value {
    json!({META_SERVER_INFO: {"name": server_name, "version": env!("CARGO_PKG_VERSION")}})
}

/// The capabilities advertised by `server/discover`.
pub fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "completions": {}
    })
}

/// Methods this revision removed; a 2026-07-28 request for them is "method not found".
const REMOVED: &[&str] = &[
    "initialize",
    "ping",
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
];

/// Whether a result of this method is cacheable (carries `ttlMs` and `cacheScope`).
fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// Executes a 2026-07-28 request (not `subscriptions/listen`, which is a stream) and returns its
/// decorated `result`, or the error.
#[cfg(test)]
pub fn handle(server_name: &str, method: &str, params: Option<&Value>) -> Result<Value, RpcError> {
    handle_with(server_name, method, params, mcp::Hooks::default())
}

/// [`handle`] with the test hooks of the request's headers.
pub fn handle_with(
    server_name: &str,
    method: &str,
    params: Option<&Value>,
    hooks: mcp::Hooks,
) -> Result<Value, RpcError> {
    if REMOVED.contains(&method) {
        return Err(RpcError::new(
            mcp::METHOD_NOT_FOUND,
            format!("Method not found: {method} (removed in {VERSION})"),
        ));
    }
    let result = match method {
        "server/discover" => Ok(json!({
            "supportedVersions": [VERSION],
            "capabilities": capabilities(),
            "instructions": "Toolgate sample MCP server (for demos and tests)."
        })),
        "resources/read" => {
            mcp::handle_with(server_name, method, params, hooks).map_err(|mut e| {
                // 2026-07-28 changed "resource not found" from -32002 to -32602.
                if e.code == mcp::RESOURCE_NOT_FOUND {
                    e.code = mcp::INVALID_PARAMS;
                }
                e
            })
        }
        other => mcp::handle_with(server_name, other, params, hooks),
    }?;
    let mut obj = match result {
        Value::Object(o) => o,
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    obj.insert("resultType".into(), json!("complete"));
    obj.insert("_meta".into(), server_meta(server_name));
    if cacheable(method) {
        obj.insert("ttlMs".into(), json!(TTL_MS));
        obj.insert("cacheScope".into(), json!("public"));
    }
    Ok(Value::Object(obj))
}

/// What a `subscriptions/listen` asked for, and the subset this server honours.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub uris: Vec<String>,
}

impl Filter {
    /// Reads `params.notifications`; Err for a filter that is not an object or whose
    /// `resourceSubscriptions` is not a list of strings.
    pub fn from_params(params: Option<&Value>) -> Result<Filter, RpcError> {
        let bad = |why: &str| RpcError::new(mcp::INVALID_PARAMS, format!("Invalid params: {why}"));
        let n = match params.and_then(|p| p.get("notifications")) {
            Some(Value::Object(n)) => n,
            None => return Ok(Filter::default()),
            Some(_) => return Err(bad("notifications must be an object")),
        };
        let flag = |k: &str| n.get(k).and_then(Value::as_bool).unwrap_or(false);
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|u| u.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("resourceSubscriptions must be a list of strings"))?,
            Some(_) => return Err(bad("resourceSubscriptions must be a list of strings")),
        };
        Ok(Filter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        })
    }

    /// The acknowledged filter: the requested types (all supported) and the requested URIs
    /// this server has.
    pub fn honoured(&self, known_uri: impl Fn(&str) -> bool) -> Filter {
        Filter {
            uris: self.uris.iter().filter(|u| known_uri(u)).cloned().collect(),
            ..self.clone()
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(k.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(m)
    }
}

/// A notification on a listen stream (tagged with the subscription id).
pub fn stream_notification(sub_id: &Value, method: &str, mut params: Map<String, Value>) -> Value {
    params.insert("_meta".into(), json!({META_SUBSCRIPTION_ID: sub_id}));
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The first message of a listen stream.
pub fn acknowledged(sub_id: &Value, honoured: &Filter) -> Value {
    let mut p = Map::new();
    p.insert("notifications".into(), honoured.to_value());
    stream_notification(sub_id, "notifications/subscriptions/acknowledged", p)
}

/// One SSE event carrying a JSON-RPC message.
pub fn sse_event(msg: &Value) -> String {
    format!("event: message\ndata: {msg}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdrs<'a>(h: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Vec<&'a str> + 'a {
        move |name: &str| {
            h.iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .collect()
        }
    }

    #[test]
    fn base64_round_trip_and_canonical_only() {
        for s in ["", "f", "fo", "foo", "foob", "Hello, 世界", "ünïcødé-tool"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).unwrap(), s.as_bytes(), "{s}");
        }
        assert_eq!(
            base64_encode("Hello, 世界".as_bytes()),
            "SGVsbG8sIOS4lueVjA=="
        );
        assert_eq!(base64_decode("SGVsbG8sIOS4lueVjB=="), None); // non-zero trailing bits
        assert_eq!(base64_decode("SGVsbG8"), None); // unpadded
        assert_eq!(base64_decode("SG=sbG8s"), None);
        assert_eq!(base64_decode("SGVs!G8s"), None);
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_header_value("get-sum").as_deref(), Some("get-sum"));
        assert_eq!(decode_header_value("=?base64?//8=?="), None); // not UTF-8
    }

    #[test]
    fn header_checks() {
        let p = json!({"name": "get-sum"});
        let ok = [
            ("mcp-protocol-version", VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get-sum"),
        ];
        assert_eq!(
            check_headers(hdrs(&ok), "tools/call", Some(&p), Some(VERSION)),
            Ok(())
        );
        let err = |h: &[(&str, &str)], method: &str, p: &Value, bv: Option<&str>| {
            check_headers(hdrs(h), method, Some(p), bv).unwrap_err()
        };
        assert!(err(&ok, "tools/call", &p, Some("2025-11-25")).contains("MCP-Protocol-Version"));
        assert!(err(&ok[1..], "tools/call", &p, None).contains("missing"));
        assert!(err(&ok, "prompts/get", &p, None).contains("Mcp-Method"));
        assert!(err(&ok[..2], "tools/call", &p, None).contains("Mcp-Name header is missing"));
        let twice = [ok[0], ok[1], ok[2], ("mcp-name", "get-env")];
        assert!(err(&twice, "tools/call", &p, None).contains("2 times"));
        // Base64 form of a non-ASCII name.
        let uni = json!({"name": "ünïcødé"});
        let enc = format!("=?base64?{}?=", base64_encode("ünïcødé".as_bytes()));
        let h = [ok[0], ok[1], ("mcp-name", enc.as_str())];
        assert_eq!(
            check_headers(hdrs(&h), "tools/call", Some(&uni), None),
            Ok(())
        );
        assert!(err(&h, "tools/call", &p, None).contains("does not match body value 'get-sum'"));
        // Mcp-Name on a message with neither name nor uri.
        let h = [ok[0], ("mcp-method", "tools/list"), ("mcp-name", "x")];
        assert!(err(&h, "tools/list", &json!({}), None).contains("without params.name"));
        // resources/read mirrors the uri.
        let h = [
            ok[0],
            ("mcp-method", "resources/read"),
            ("mcp-name", "memo://insights"),
        ];
        let r = json!({"uri": "memo://insights"});
        assert_eq!(
            check_headers(hdrs(&h), "resources/read", Some(&r), None),
            Ok(())
        );
    }

    #[test]
    fn results_are_decorated() {
        let r = handle("s", "tools/list", None).unwrap();
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], TTL_MS);
        assert_eq!(r["cacheScope"], "public");
        assert_eq!(r["_meta"][META_SERVER_INFO]["name"], "s");
        let r = handle(
            "s",
            "tools/call",
            Some(&json!({"name": "echo", "arguments": {"message": "hi"}})),
        )
        .unwrap();
        assert_eq!(r["resultType"], "complete");
        assert!(r.get("ttlMs").is_none());
        assert_eq!(
            handle("s", "ping", None).unwrap_err().code,
            mcp::METHOD_NOT_FOUND
        );
        let e = handle("s", "resources/read", Some(&json!({"uri": "memo://nope"}))).unwrap_err();
        assert_eq!(e.code, mcp::INVALID_PARAMS);
    }

    #[test]
    fn listen_filter() {
        let f = Filter::from_params(Some(&json!({"notifications": {
            "toolsListChanged": true, "resourceSubscriptions": ["memo://insights", "memo://nope"]}})))
        .unwrap();
        let h = f.honoured(|u| u == "memo://insights");
        assert_eq!(
            h.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["memo://insights"]})
        );
        assert!(Filter::from_params(Some(
            &json!({"notifications": {"resourceSubscriptions": [1]}})
        ))
        .is_err());
    }
}
