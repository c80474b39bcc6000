//! The MCP headers (Mcp-Method, Mcp-Name, MCP-Protocol-Version) must agree with the body: a
//! mismatch is denied before any policy (docs/semantics.md §4).

use std::borrow::Cow;

use toolgate_policy::eval::{BodyInput, DenyReason, Verdict};
use toolgate_policy::mcp::McpBody;
use toolgate_policy::response;

use super::{allowed, call, decide, msg, plan, policy, Req};

#[test]
fn mcp_headers_must_agree_with_the_body() {
    let empty = r#"{"targetRefs":[],"action":"Allow"}"#;
    let ev = plan(vec![policy("open", empty)], vec![]);
    let mut req = Req::post(None);
    req.headers.push(("mcp-method", "tools/call"));
    assert!(allowed(&ev, &req, call("echo")));
    assert!(!allowed(
        &ev,
        &req,
        msg("tools/list", Some("1"), None, None)
    ));
    req.headers.push(("mcp-name", "echo"));
    assert!(allowed(&ev, &req, call("echo")));
    assert_eq!(
        decide(&ev, None, &req, call("get-sum")),
        Verdict::Deny(DenyReason::McpHeaderMismatch { header: "Mcp-Name" })
    );
    let mut req = Req::post(None);
    req.headers.push(("mcp-name", "x"));
    assert!(
        !allowed(&ev, &req, msg("ping", Some("1"), None, None)),
        "Mcp-Name on a message without a name"
    );
    // MCP 2026-07-28: values that are not plain ASCII come base64-encoded; compared decoded.
    let mut req = Req::post(None);
    req.headers
        .push(("mcp-name", "=?base64?d2V0dGVyLWfDpHN0?=")); // "wetter-gäst"
    assert!(allowed(&ev, &req, call("wetter-gäst")));
    assert!(!allowed(&ev, &req, call("wetter-gast")));
    let mut req = Req::post(None);
    req.headers.push(("mcp-name", "=?base64?not base64!?="));
    assert!(!allowed(&ev, &req, call("echo")), "undecodable: a mismatch");
    // The encoded form is for Mcp-Name and Mcp-Param-* only: an encoded Mcp-Method is compared as sent.
    let mut req = Req::post(None);
    req.headers
        .push(("mcp-method", "=?base64?dG9vbHMvY2FsbA==?=")); // "tools/call"
    assert_eq!(
        decide(&ev, None, &req, call("echo")),
        Verdict::Deny(DenyReason::McpHeaderMismatch {
            header: "Mcp-Method"
        })
    );
    assert_eq!(
        toolgate_policy::eval::mcp_header_value("mcp-param-region", "=?base64?w6k=?=").as_deref(),
        Some("é")
    );
    // A mismatch is answered 400 with -32020 and the request id.
    let body = McpBody::Single(msg("tools/call", Some("5"), Some("echo"), None));
    let mut req = Req::post(None);
    req.headers.push(("mcp-method", "tools/list"));
    let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
    let reply = response::denial(BodyInput::Mcp(&body), &d, false);
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32020,"message":"Header mismatch: the Mcp-Method header does not match the body"}}"#
    );
}

#[test]
fn header_matchers_see_decoded_mcp_values() {
    let rule = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"r","authorization":{"type":"Inline","headers":[{"name":"mcp-name","value":"wetter-gäst"}]}}]}"#;
    let ev = plan(vec![policy("p", rule)], vec![]);
    let mut req = Req::post(None);
    req.headers
        .push(("mcp-name", "=?base64?d2V0dGVyLWfDpHN0?="));
    assert!(allowed(&ev, &req, call("wetter-gäst")));
}

#[test]
fn protocol_version_header_and_meta_must_agree() {
    let empty = r#"{"targetRefs":[],"action":"Allow"}"#;
    let ev = plan(vec![policy("open", empty)], vec![]);
    let mut m = call("echo");
    m.protocol_version = Some(Cow::Borrowed("2026-07-28"));
    let mut req = Req::post(None);
    req.headers.push(("mcp-protocol-version", "2026-07-28"));
    assert!(allowed(&ev, &req, m.clone()));
    let mut req = Req::post(None);
    req.headers.push(("mcp-protocol-version", "2025-11-25"));
    assert_eq!(
        decide(&ev, None, &req, m.clone()),
        Verdict::Deny(DenyReason::McpHeaderMismatch {
            header: "MCP-Protocol-Version"
        })
    );
    // Only one of them: nothing to compare.
    assert!(allowed(&ev, &req, call("echo")));
}

#[test]
fn repeated_mcp_headers_are_a_mismatch() {
    // A server reading the last (or the joined) value would see another tool than the check did.
    let empty = r#"{"targetRefs":[],"action":"Allow"}"#;
    let ev = plan(vec![policy("open", empty)], vec![]);
    for (name, first, second, header) in [
        ("mcp-name", "echo", "get-env", "Mcp-Name"),
        ("mcp-method", "tools/call", "tools/list", "Mcp-Method"),
        ("mcp-name", "echo", "echo", "Mcp-Name"),
        (
            "mcp-protocol-version",
            "2025-11-25",
            "2025-11-25",
            "MCP-Protocol-Version",
        ),
    ] {
        let mut req = Req::post(None);
        req.headers.push((name, first));
        req.headers.push(("x-other", "1"));
        req.headers.push((name, second));
        assert_eq!(
            decide(&ev, None, &req, call("echo")),
            Verdict::Deny(DenyReason::McpHeaderMismatch { header }),
            "{name}"
        );
    }
    // With several repeated, the denial names the first of Mcp-Method, Mcp-Name, MCP-Protocol-Version,
    // whatever order the headers came in.
    let mut req = Req::post(None);
    for (name, value) in [
        ("mcp-name", "echo"),
        ("mcp-name", "echo"),
        ("mcp-method", "tools/call"),
        ("mcp-method", "tools/call"),
    ] {
        req.headers.push((name, value));
    }
    assert_eq!(
        decide(&ev, None, &req, call("echo")),
        Verdict::Deny(DenyReason::McpHeaderMismatch {
            header: "Mcp-Method"
        })
    );
}
