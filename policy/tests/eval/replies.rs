//! What a denied caller gets back (docs/semantics.md §5) and what `toolgate explain` shows: the
//! record of the walk that decided.

use toolgate_policy::eval::{BodyInput, HttpRequest};
use toolgate_policy::mcp::{McpBody, McpMessage};
use toolgate_policy::response;

use super::{call, msg, plan, policy, Req, A, B, SA_A_GET_SUM};

#[test]
fn denial_replies_echo_the_id_with_its_type() {
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    let req = Req::post(None);
    for (id, expected) in [("7", r#""id":7"#), (r#""abc""#, r#""id":"abc""#)] {
        let body = McpBody::Single(msg("tools/call", Some(id), Some("echo"), None));
        let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
        let reply = response::denial(BodyInput::Mcp(&body), &d, false);
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.body,
            format!(
                r#"{{"jsonrpc":"2.0",{expected},"error":{{"code":403,"message":"Access to this tool is forbidden."}}}}"#
            )
        );
    }
    // A notification (no id) and a null id get HTTP 403.
    for id in [None, Some("null")] {
        let body = McpBody::Single(msg("notifications/x", id, None, None));
        let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
        assert_eq!(
            response::denial(BodyInput::Mcp(&body), &d, false).status,
            403
        );
    }
    // Debug reasons are opt-in.
    let body = McpBody::Single(call("echo"));
    let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
    assert!(!response::denial(BodyInput::Mcp(&body), &d, false)
        .body
        .contains("gateway"));
    let debug = response::denial(BodyInput::Mcp(&body), &d, true).body;
    assert!(
        debug.contains("tools/call 'echo' matched no rule of"),
        "{debug}"
    );
}

/// A method MCP does not define, denied, is answered as a server answers a method it does not have
/// (-32601; HTTP 404 in MCP 2026-07-28's form, 200 before); a method MCP defines keeps the 403
/// error, so a client can tell "not found" from "not allowed".
#[test]
fn unknown_methods_are_not_found_known_ones_forbidden() {
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    let req = Req::post(Some(A));
    let reply = |m: McpMessage<'_>| {
        let body = McpBody::Single(m);
        let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
        assert!(!d.allowed());
        response::denial(BodyInput::Mcp(&body), &d, false)
    };
    let not_found =
        r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}"#;
    for method in ["tools/frobnicate", "foo", "resources/peek"] {
        let r = reply(msg(method, Some("4"), None, None));
        assert_eq!((r.status, r.body.as_str()), (200, not_found), "{method}");
        let mut current = msg(method, Some("4"), None, None);
        current.protocol_version = Some("2026-07-28".into());
        let r = reply(current);
        assert_eq!(
            (r.status, r.body.as_str()),
            (404, not_found),
            "{method}, 2026-07-28"
        );
    }
    for known in [
        call("echo"),
        msg("prompts/get", Some("4"), Some("x"), None),
        msg("tasks/result", Some("4"), None, None),
    ] {
        let r = reply(known);
        assert_eq!(r.status, 200);
        assert!(r.body.contains(r#""code":403"#), "{}", r.body);
    }
}

/// What `toolgate explain` shows of a request: the record of the walk that decided it.
fn explain(
    route: &toolgate_policy::eval::Route<'_>,
    req: &HttpRequest<'_>,
    body: BodyInput<'_, '_>,
) -> Vec<toolgate_policy::eval::MessageRecord> {
    let mut record = toolgate_policy::eval::Record::default();
    let decided = route.decide_recorded(req, body, &mut record);
    assert_eq!(
        decided,
        route.decide(req, body),
        "the recorded walk decides as the filter's"
    );
    record
        .last()
        .map(|w| w.messages.clone())
        .unwrap_or_default()
}

#[test]
fn explain_agrees_with_decide_and_names_the_failing_matcher() {
    let gateway = r#"{"targetRefs":[],"action":"Allow","rules":[
        {"name":"a-tools","source":{"type":"ServiceAccount","serviceAccount":{"name":"a"}},
         "authorization":{"type":"Inline","methods":["POST","GET"],"mcp":{"mcpBaseProtocolMethodsOption":"MATCH_BASE_PROTOCOL_METHODS","methods":[{"name":"tools"}]}}},
        {"name":"b-sum","source":{"type":"SPIFFE","spiffe":"spiffe://cluster.local/ns/default/sa/b"},
         "authorization":{"type":"Inline","paths":[{"type":"Exact","value":"/mcp"}],"mcp":{"methods":[{"name":"tools/call","params":["get-sum"]}]}}}]}"#;
    let backend = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"no-env","authorization":{"type":"Inline",
        "mcp":{"mcpBaseProtocolMethodsOption":"MATCH_BASE_PROTOCOL_METHODS","methods":[{"name":"tools/call","params":["get-sum","echo"]},{"name":"prompts/get"}]}}}]}"#;
    let ev = plan(
        vec![policy("g", gateway)],
        vec![("backend", vec![policy("b", backend)])],
    );
    let route = ev.route(Some("backend"));
    let messages = [
        call("get-sum"),
        call("echo"),
        call("get-env"),
        msg("initialize", Some("1"), None, None),
        msg("prompts/get", Some("1"), Some("greeting"), None),
        McpMessage {
            method: None,
            id: Some("1"),
            name: None,
            uri: None,
            subscriptions: vec![],
            protocol_version: None,
            params: None,
        },
    ];
    let mut denied_with_reason = 0;
    for principal in [Some(A), Some(B), None] {
        for path in ["/mcp", "/other"] {
            for m in &messages {
                let mut req = Req::post(principal);
                req.path = path;
                let body = McpBody::Single(m.clone());
                let allowed = route.decide(&req.http(), BodyInput::Mcp(&body)).allowed();
                let explained = explain(&route, &req.http(), BodyInput::Mcp(&body));
                assert_eq!(explained.len(), 1);
                let every_level_has_a_match = explained[0]
                    .levels
                    .iter()
                    .all(|l| l.rules.iter().any(|r| r.outcome.is_ok()));
                assert_eq!(
                    allowed, every_level_has_a_match,
                    "{principal:?} {path} {:?}",
                    m.method
                );
                if !allowed {
                    denied_with_reason += 1;
                    assert!(explained[0]
                        .levels
                        .iter()
                        .flat_map(|l| &l.rules)
                        .any(|r| r.outcome.is_err()));
                }
            }
            for method in ["GET", "PUT"] {
                let mut req = Req::post(principal);
                req.method = method;
                req.path = path;
                let allowed = route.decide(&req.http(), BodyInput::None).allowed();
                let explained = explain(&route, &req.http(), BodyInput::None);
                let ok = explained[0]
                    .levels
                    .iter()
                    .all(|l| l.rules.iter().any(|r| r.outcome.is_ok()));
                assert_eq!(allowed, ok, "{principal:?} {method} {path}");
            }
        }
    }
    assert!(denied_with_reason > 5);
    // The reason names the matcher.
    let mut req = Req::post(Some(B));
    req.path = "/other";
    let body = McpBody::Single(call("get-sum"));
    let e = explain(&route, &req.http(), BodyInput::Mcp(&body));
    let gw = &e[0].levels[0].rules;
    assert_eq!(gw[0].outcome, Err(format!("source: caller {B} is not {A}")));
    assert_eq!(
        gw[1].outcome,
        Err("paths: the request does not match".to_string())
    );
}
