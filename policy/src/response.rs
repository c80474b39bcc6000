//! Denial responses (docs/semantics.md §5). Nothing about the policies goes into them unless the plan's
//! `debug_reasons` asks for it.

use crate::eval::{is_base_method, BodyInput, Decision, DenyReason, Verdict};
use crate::mcp::{McpMessage, MessageKind};

pub const FORBIDDEN_MESSAGE: &str = "Access to this tool is forbidden.";
pub const TOO_LARGE_MESSAGE: &str = "Request body too large.";

/// An HTTP response the filter sends instead of forwarding the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u32,
    /// `application/json` body.
    pub body: String,
}

/// The reply for a denied request: a JSON-RPC error with HTTP 200 for a single JSON-RPC request
/// (string `method`, non-null `id`, echoed with its type), HTTP 403 with `"id":null` otherwise.
pub fn denial(body: BodyInput<'_, '_>, decision: &Decision<'_>, debug_reasons: bool) -> Reply {
    if let Verdict::Deny(DenyReason::McpHeaderMismatch { header }) = &decision.verdict {
        return header_mismatch(body, decision, header);
    }
    let request = match body {
        BodyInput::Mcp(mcp) if !mcp.is_batch() => mcp
            .messages()
            .first()
            .filter(|m| m.kind() == MessageKind::Request),
        _ => None,
    };
    if let Some(reply) = request.and_then(|m| method_not_found(m, decision)) {
        return reply;
    }
    let request_id = request.and_then(|m| m.id);
    let data = if debug_reasons {
        format!(
            ",\"data\":{}",
            serde_json::Value::String(decision.summary())
        )
    } else {
        String::new()
    };
    let error = format!("{{\"code\":403,\"message\":\"{FORBIDDEN_MESSAGE}\"{data}}}");
    match request_id {
        // The id is raw JSON text the reader validated: a string or a number.
        Some(id) => Reply {
            status: 200,
            body: format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}"),
        },
        None => Reply {
            status: 403,
            body: format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{error}}}"),
        },
    }
}

/// JSON-RPC's code for a method the receiver does not have.
pub const METHOD_NOT_FOUND_CODE: i32 = -32601;

/// docs/semantics.md §5: a request for a method MCP does not define that no rule allowed is
/// answered as a server answers a method it does not have: JSON-RPC -32601 "Method not found",
/// with HTTP 404 in MCP 2026-07-28's form (the message carries its protocol version) and HTTP 200
/// before it. A method MCP defines keeps the 403 error: the client can tell "not allowed" from
/// "not found". (A rule without an `mcp` restriction lets any method through, to the server.)
fn method_not_found(m: &McpMessage<'_>, decision: &Decision<'_>) -> Option<Reply> {
    let method = m.method.as_deref()?;
    let by_no_rule = matches!(
        decision.verdict,
        Verdict::Deny(DenyReason::NoRuleMatched { .. } | DenyReason::DefaultDeny)
    );
    if !by_no_rule || is_mcp_method(method) {
        return None;
    }
    Some(Reply {
        status: if m.protocol_version.is_some() { 404 } else { 200 },
        body: format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{METHOD_NOT_FOUND_CODE},\"message\":\"Method not found\"}}}}",
            m.id.unwrap_or("null")
        ),
    })
}

/// The methods MCP defines for a client to send (2025-11-25 and 2026-07-28, tasks included).
fn is_mcp_method(method: &str) -> bool {
    is_base_method(method)
        || matches!(
            method,
            "tools/call"
                | "prompts/list"
                | "prompts/get"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
                | "resources/subscribe"
                | "resources/unsubscribe"
        )
}

/// MCP 2026-07-28's HeaderMismatch (docs/semantics.md §5): HTTP 400 (an intermediary must answer a 4xx), code
/// -32020, the id of the message that disagreed with the headers (or null).
fn header_mismatch(body: BodyInput<'_, '_>, decision: &Decision<'_>, header: &str) -> Reply {
    let id = match body {
        BodyInput::Mcp(mcp) => mcp
            .messages()
            .get(decision.message.unwrap_or(0))
            .and_then(|m| m.id)
            .unwrap_or("null"),
        _ => "null",
    };
    Reply {
        status: 400,
        body: format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{HEADER_MISMATCH_CODE},\"message\":\"Header mismatch: the {header} header does not match the body\"}}}}"
        ),
    }
}

/// JSON-RPC error code of MCP 2026-07-28's HeaderMismatch.
pub const HEADER_MISMATCH_CODE: i32 = -32020;

/// The reply for a body over the plan's limit.
pub fn too_large() -> Reply {
    Reply {
        status: 413,
        body: format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":413,\"message\":\"{TOO_LARGE_MESSAGE}\"}}}}"),
    }
}
