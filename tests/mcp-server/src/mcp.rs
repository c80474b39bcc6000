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

fn tools() -> Value {
    json!([
        {
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
        },
        {
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
        },
        {
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
        }
    ])
}

fn prompts() -> Value {
    json!([
        {
            "name": "greeting",
            "title": "Greeting",
            "description": "A friendly greeting for someone.",
            "arguments": [
                {"name": "name", "description": "Who to greet", "required": true}
            ]
        }
    ])
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
    match name {
        "greeting" => {
            let who = match param(params, "arguments").and_then(|a| a.get("name")) {
                Some(Value::String(s)) => s.clone(),
                _ => "world".to_string(),
            };
            Ok(json!({
                "description": "A friendly greeting",
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": format!("Hello, {who}!")}}
                ]
            }))
        }
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

/// Executes a request and returns its `result` or error.
pub fn handle(server_name: &str, method: &str, params: Option<&Value>) -> Result<Value, RpcError> {
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
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => call_tool(params),
        "prompts/list" => Ok(json!({"prompts": prompts()})),
        "prompts/get" => get_prompt(params),
        "resources/list" => Ok(json!({
            "resources": RESOURCES.iter().map(|(uri, name, desc, _)| json!({
                "uri": uri, "name": name, "description": desc, "mimeType": "text/plain"
            })).collect::<Vec<_>>()
        })),
        "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
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
