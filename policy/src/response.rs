//! Denial responses (docs/semantics.md §5). Nothing about the policies goes into them unless the plan's
//! `debug_reasons` asks for it.

use crate::eval::{BodyInput, Decision, DenyReason, Verdict};
use crate::mcp::MessageKind;

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
    let request_id = match body {
        BodyInput::Mcp(mcp) if !mcp.is_batch() => mcp
            .messages()
            .first()
            .filter(|m| m.kind() == MessageKind::Request)
            .and_then(|m| m.id),
        _ => None,
    };
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
