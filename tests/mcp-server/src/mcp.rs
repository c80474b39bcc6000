//! MCP (JSON-RPC 2.0) method handling. Pure functions: no I/O.

use serde_json::{json, Map, Value};

/// The handshake-era version answered when the client asks for one this server does not know.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error object.
#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn to_value(&self) -> Value {
        let mut e = Map::new();
        e.insert("code".into(), json!(self.code));
        e.insert("message".into(), json!(self.message));
        if let Some(d) = &self.data {
            e.insert("data".into(), d.clone());
        }
        Value::Object(e)
    }
}

pub fn error_response(id: Value, err: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": err.to_value()})
}

pub fn result_response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// What one element of a POST body is.
pub enum Message<'a> {
    /// Has `method` and `id`: needs a response.
    Request {
        method: &'a str,
        id: &'a Value,
        params: Option<&'a Value>,
    },
    /// Has `method` but no `id`.
    Notification { method: &'a str },
    /// Client-sent response (`result` or `error`, no `method`).
    Response,
    /// Not a valid JSON-RPC message.
    Invalid(RpcError),
}

pub fn classify(v: &Value) -> Message<'_> {
    let obj = match v.as_object() {
        Some(o) => o,
        None => {
            return Message::Invalid(RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: not an object",
            ))
        }
    };
    match obj.get("method") {
        Some(Value::String(method)) => {
            let params = obj.get("params");
            if let Some(p) = params {
                if !p.is_object() && !p.is_array() {
                    return Message::Invalid(RpcError::new(
                        INVALID_REQUEST,
                        "Invalid Request: params must be an object or array",
                    ));
                }
            }
            match obj.get("id") {
                None => Message::Notification { method },
                Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => {
                    Message::Request { method, id, params }
                }
                Some(_) => Message::Invalid(RpcError::new(
                    INVALID_REQUEST,
                    "Invalid Request: id must be a string, number or null",
                )),
            }
        }
        Some(_) => Message::Invalid(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
        )),
        None if obj.contains_key("result") || obj.contains_key("error") => Message::Response,
        None => Message::Invalid(RpcError::new(INVALID_REQUEST, "Invalid Request: no method")),
    }
}

/// The id of a message if it is a well-formed id, else null.
pub fn id_of(v: &Value) -> Value {
    match v.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    }
}

fn param<'a>(params: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    params.and_then(|p| p.get(key))
}

fn text_content(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": false})
}

/// A tool taking two numbers `a` and `b`.
fn binary_tool(name: &str, title: &str, description: &str) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "First operand"},
                "b": {"type": "number", "description": "Second operand"}
            },
            "required": ["a", "b"]
        }
    })
}

/// A tool taking one string `text`.
fn text_tool(name: &str, title: &str, description: &str) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The text"}
            },
            "required": ["text"]
        }
    })
}

/// The tools, in the order tools/list gives them (12).
fn tools() -> Vec<Value> {
    vec![
        json!({
            "name": "get-sum",
            "title": "Sum",
            "description": "Returns the sum of two numbers.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First addend"},
                    "b": {"type": "number", "description": "Second addend"}
                },
                "required": ["a", "b"]
            }
        }),
        json!({
            "name": "echo",
            "title": "Echo",
            "description": "Returns the given message unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "Text to echo back"}
                },
                "required": ["message"]
            }
        }),
        json!({
            "name": "get-env",
            "title": "Get environment variable",
            "description": "Returns the value of an environment variable of the server process (empty if unset).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Environment variable name"}
                },
                "required": ["name"]
            }
        }),
        binary_tool(
            "get-product",
            "Product",
            "Returns the product of two numbers.",
        ),
        binary_tool("get-difference", "Difference", "Returns a minus b."),
        binary_tool(
            "get-quotient",
            "Quotient",
            "Returns a divided by b (b must not be 0).",
        ),
        text_tool("uppercase", "Upper case", "Returns the text in upper case."),
        text_tool("lowercase", "Lower case", "Returns the text in lower case."),
        text_tool(
            "reverse",
            "Reverse",
            "Returns the text's characters in reverse order.",
        ),
        text_tool(
            "word-count",
            "Word count",
            "Returns the number of whitespace-separated words.",
        ),
        text_tool(
            "char-count",
            "Character count",
            "Returns the number of characters (Unicode scalar values).",
        ),
        json!({
            "name": "get-time",
            "title": "Current time",
            "description": "Returns the server's clock as seconds since the Unix epoch.",
            "inputSchema": {"type": "object", "properties": {}}
        }),
    ]
}

/// The prompts, in the order prompts/list gives them (3).
fn prompts() -> Vec<Value> {
    vec![
        json!({
            "name": "greeting",
            "title": "Greeting",
            "description": "A friendly greeting for someone.",
            "arguments": [
                {"name": "name", "description": "Who to greet", "required": true}
            ]
        }),
        json!({
            "name": "summarize",
            "title": "Summarize",
            "description": "Asks for a summary of a text.",
            "arguments": [
                {"name": "text", "description": "The text to summarize", "required": true}
            ]
        }),
        json!({
            "name": "code-review",
            "title": "Code review",
            "description": "Asks for a review of a piece of code.",
            "arguments": [
                {"name": "code", "description": "The code", "required": true},
                {"name": "language", "description": "Its programming language", "required": false}
            ]
        }),
    ]
}

const RESOURCES: &[(&str, &str, &str, &str)] = &[
    (
        "memo://insights",
        "insights",
        "Business insights memo",
        "Insights memo: revenue is up 12% quarter over quarter; churn is flat.",
    ),
    (
        "file:///data/report.txt",
        "report.txt",
        "Quarterly report",
        "Quarterly report: all systems nominal.",
    ),
    (
        "memo://roadmap",
        "roadmap",
        "Product roadmap memo",
        "Roadmap memo: list filtering ships next quarter.",
    ),
];

/// Whether this server has a resource with this URI.
pub fn resource_exists(uri: &str) -> bool {
    RESOURCES.iter().any(|r| r.0 == uri)
}

fn format_number(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9.0e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn number_arg(args: Option<&Value>, key: &str) -> Result<Value, RpcError> {
    match args.and_then(|a| a.get(key)) {
        Some(v @ Value::Number(_)) => Ok(v.clone()),
        _ => Err(RpcError::new(
            INVALID_PARAMS,
            format!("Invalid params: argument '{key}' must be a number"),
        )),
    }
}

fn string_arg<'a>(args: Option<&'a Value>, key: &str) -> Result<&'a str, RpcError> {
    match args.and_then(|a| a.get(key)) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(RpcError::new(
            INVALID_PARAMS,
            format!("Invalid params: argument '{key}' must be a string"),
        )),
    }
}

fn call_tool(params: Option<&Value>) -> Result<Value, RpcError> {
    let name = match param(params, "name") {
        Some(Value::String(n)) => n.as_str(),
        _ => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "Invalid params: missing tool name",
            ))
        }
    };
    let args = param(params, "arguments");
    match name {
        "get-sum" => {
            let a = number_arg(args, "a")?;
            let b = number_arg(args, "b")?;
            let sum = match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => match x.checked_add(y) {
                    Some(s) => s.to_string(),
                    None => format_number(x as f64 + y as f64),
                },
                _ => format_number(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
            };
            Ok(text_content(sum))
        }
        "echo" => Ok(text_content(string_arg(args, "message")?)),
        "get-product" | "get-difference" | "get-quotient" => {
            let a = number_arg(args, "a")?.as_f64().unwrap_or(0.0);
            let b = number_arg(args, "b")?.as_f64().unwrap_or(0.0);
            let value = match name {
                "get-product" => a * b,
                "get-difference" => a - b,
                _ if b == 0.0 => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "Invalid params: division by zero",
                    ))
                }
                _ => a / b,
            };
            Ok(text_content(format_number(value)))
        }
        "uppercase" => Ok(text_content(string_arg(args, "text")?.to_uppercase())),
        "lowercase" => Ok(text_content(string_arg(args, "text")?.to_lowercase())),
        "reverse" => Ok(text_content(
            string_arg(args, "text")?.chars().rev().collect::<String>(),
        )),
        "word-count" => Ok(text_content(
            string_arg(args, "text")?
                .split_whitespace()
                .count()
                .to_string(),
        )),
        "char-count" => Ok(text_content(
            string_arg(args, "text")?.chars().count().to_string(),
        )),
        "get-time" => {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Ok(text_content(secs.to_string()))
        }
        "get-env" => {
            let var = string_arg(args, "name")?;
            let value = if var.is_empty() || var.contains('=') || var.contains('\0') {
                String::new()
            } else {
                std::env::var(var).unwrap_or_default()
            };
            Ok(text_content(value))
        }
        other => Err(
            RpcError::new(INVALID_PARAMS, format!("Unknown tool: {other}"))
                .with_data(json!({"tool": other})),
        ),
    }
}

fn get_prompt(params: Option<&Value>) -> Result<Value, RpcError> {
    let name = match param(params, "name") {
        Some(Value::String(n)) => n.as_str(),
        _ => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "Invalid params: missing prompt name",
            ))
        }
    };
    let arg = |key: &str, default: &str| match param(params, "arguments").and_then(|a| a.get(key)) {
        Some(Value::String(s)) => s.clone(),
        _ => default.to_string(),
    };
    let user = |description: &str, text: String| {
        json!({
            "description": description,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
        })
    };
    match name {
        "greeting" => Ok(user(
            "A friendly greeting",
            format!("Hello, {}!", arg("name", "world")),
        )),
        "summarize" => Ok(user(
            "A summary request",
            format!("Summarize this text:\n\n{}", arg("text", "")),
        )),
        "code-review" => Ok(user(
            "A code review request",
            format!(
                "Review this {} code:\n\n{}",
                arg("language", "unspecified"),
                arg("code", "")
            ),
        )),
        other => Err(
            RpcError::new(INVALID_PARAMS, format!("Unknown prompt: {other}"))
                .with_data(json!({"prompt": other})),
        ),
    }
}

fn read_resource(params: Option<&Value>) -> Result<Value, RpcError> {
    let uri = match param(params, "uri") {
        Some(Value::String(u)) => u.as_str(),
        _ => return Err(RpcError::new(INVALID_PARAMS, "Invalid params: missing uri")),
    };
    match RESOURCES.iter().find(|r| r.0 == uri) {
        Some((uri, _, _, text)) => Ok(json!({
            "contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]
        })),
        None => {
            Err(RpcError::new(RESOURCE_NOT_FOUND, "Resource not found")
                .with_data(json!({"uri": uri})))
        }
    }
}

/// What a request's test headers ask of the list methods (see the USAGE text in main.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    /// `x-test-page-size: N`: lists come in pages of N entries with a `nextCursor`.
    pub page_size: Option<usize>,
}

/// The cursor of the page starting at `offset` of pages of `size` entries.
fn cursor(offset: usize, size: usize) -> String {
    format!("page:{offset}:{size}")
}

/// One page of a list and the cursor of the next one. Without a cursor and a page size, the whole
/// list; a cursor carries its page size, which `x-test-page-size` overrides.
fn paginate(
    items: Vec<Value>,
    params: Option<&Value>,
    hooks: Hooks,
) -> Result<(Vec<Value>, Option<String>), RpcError> {
    let bad = || RpcError::new(INVALID_PARAMS, "Invalid params: invalid cursor");
    let (offset, size) = match param(params, "cursor") {
        None | Some(Value::Null) => (0, hooks.page_size),
        Some(Value::String(c)) => {
            let mut parts = c.strip_prefix("page:").ok_or_else(bad)?.split(':');
            let offset = parts
                .next()
                .and_then(|o| o.parse::<usize>().ok())
                .ok_or_else(bad)?;
            let size = parts
                .next()
                .and_then(|o| o.parse::<usize>().ok())
                .ok_or_else(bad)?;
            if parts.next().is_some() || size == 0 || offset > items.len() {
                return Err(bad());
            }
            (offset, hooks.page_size.or(Some(size)))
        }
        Some(_) => return Err(bad()),
    };
    let size = size.unwrap_or(items.len()).max(1);
    let end = offset.saturating_add(size).min(items.len());
    let next = (end < items.len()).then(|| cursor(end, size));
    Ok((items[offset..end].to_vec(), next))
}

/// A list result: `{key: page}` with `nextCursor` when there is a next page.
fn list_result(
    key: &str,
    items: Vec<Value>,
    params: Option<&Value>,
    hooks: Hooks,
) -> Result<Value, RpcError> {
    let (page, next) = paginate(items, params, hooks)?;
    let mut m = Map::new();
    m.insert(key.into(), Value::Array(page));
    if let Some(c) = next {
        m.insert("nextCursor".into(), json!(c));
    }
    Ok(Value::Object(m))
}

/// The resources, as resources/list gives them.
fn resources() -> Vec<Value> {
    RESOURCES
        .iter()
        .map(|(uri, name, desc, _)| json!({"uri": uri, "name": name, "description": desc, "mimeType": "text/plain"}))
        .collect()
}

/// Whether a method is one of the lists Toolgate filters (the test hooks act on these).
pub fn is_list(method: &str) -> bool {
    matches!(method, "tools/list" | "prompts/list" | "resources/list")
}

/// Executes a request and returns its `result` or error; `hooks` from the request's test headers.
pub fn handle_with(
    server_name: &str,
    method: &str,
    params: Option<&Value>,
    hooks: Hooks,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(json!({
            // The client's version when this server speaks it (2024-11-05 .. 2025-11-25).
            "protocolVersion": match param(params, "protocolVersion").and_then(Value::as_str) {
                Some(v) if crate::modern::LEGACY_VERSIONS.contains(&v) => v,
                _ => PROTOCOL_VERSION,
            },
            "capabilities": {
                "tools": {"listChanged": false},
                "prompts": {"listChanged": false},
                "resources": {"subscribe": true, "listChanged": false},
                "logging": {},
                "completions": {}
            },
            "serverInfo": {"name": server_name, "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Toolgate sample MCP server (for demos and tests)."
        })),
        "ping" => Ok(json!({})),
        "tools/list" => list_result("tools", tools(), params, hooks),
        "tools/call" => call_tool(params),
        "prompts/list" => list_result("prompts", prompts(), params, hooks),
        "prompts/get" => get_prompt(params),
        "resources/list" => list_result("resources", resources(), params, hooks),
        "resources/templates/list" => Ok(json!({"resourceTemplates": [{
            "uriTemplate": "file:///data/{name}",
            "name": "data-file",
            "description": "A file of the data folder",
            "mimeType": "text/plain"
        }]})),
        "resources/read" => read_resource(params),
        "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => Ok(json!({})),
        "completion/complete" => Ok(json!({
            "completion": {"values": [], "total": 0, "hasMore": false}
        })),
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {other}"),
        )),
    }
}
