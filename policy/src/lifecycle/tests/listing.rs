//! List filtering on the response side (docs/semantics.md §5), driven by the fake host: what goes on of a list
//! response, what is counted and recorded, and what is never looked at.

use super::*;

const LIST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;

fn tools(names: &[&str]) -> String {
    let entries: Vec<String> = names
        .iter()
        .map(|n| format!(r#"{{"name":"{n}","inputSchema":{{}}}}"#))
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{}]}}}}"#,
        entries.join(",")
    )
}

/// Base methods (tools/list) for everyone, and `tools/call` of `calls` for `who`.
fn lister(name: &str, who: Option<&str>, calls: &[&str]) -> RulePlan {
    let mut rule = tools_rule(name, who, calls);
    if let Some(mcp) = rule.mcp.as_mut() {
        mcp.base_protocol = true;
    }
    rule
}

fn plugin_with(
    settings: impl FnOnce(&mut crate::plan::PlanSettings),
    gateway: LevelPlan,
    backend: Option<LevelPlan>,
) -> Plugin {
    let mut plan = CompiledPlan::empty("l");
    settings(&mut plan.settings);
    plan.gateway = gateway;
    if let Some(b) = backend {
        plan.backends.insert(CLUSTER.into(), b);
    }
    let mut p = Plugin::default();
    assert!(p.configure(
        &mut FakeRoot::default(),
        &serde_json::to_vec(&plan.seal()).unwrap()
    ));
    p
}

/// Agent B may call get-sum only; A anything.
fn two_agents() -> Plugin {
    plugin(
        allow_level(vec![
            lister("b", Some(B), &["get-sum"]),
            lister("a", Some(A), &[]),
        ]),
        None,
    )
}

/// Plays the response through the lifecycle as Envoy does: headers, then each chunk added to the
/// host's buffer; a callback that continues sends the buffer on. Returns what reached the client.
fn respond(r: &mut Request, host: &mut Fake, headers: &[(&str, &str)], chunks: &[&str]) -> String {
    host.response_headers = pairs(headers);
    assert_eq!(
        r.on_response_headers(host, chunks.is_empty()),
        Action::Continue
    );
    let mut out = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        host.response_body.extend_from_slice(chunk.as_bytes());
        let size = host.response_body.len();
        if r.on_response_body(host, size, i + 1 == chunks.len()) == Action::Continue {
            out.append(&mut host.response_body);
        }
    }
    String::from_utf8(out).unwrap()
}

const JSON: [(&str, &str); 3] = [
    (":status", "200"),
    ("content-type", "application/json"),
    ("content-length", "99"),
];

#[test]
fn a_json_list_keeps_what_the_caller_may_call() {
    let p = two_agents();
    let mut host = post(LIST).caller(B);
    let (mut r, action) = send(&p, &mut host);
    assert_eq!(action, Action::Continue);
    let all = tools(&["echo", "get-sum", "get-env"]);
    let (head, tail) = all.split_at(30);
    assert_eq!(
        respond(&mut r, &mut host, &JSON, &[head, tail]),
        tools(&["get-sum"])
    );
    // The length changed: content-length is gone; the rest of the headers are as they were.
    assert_eq!(
        host.response_headers,
        pairs(&[(":status", "200"), ("content-type", "application/json")])
    );
    assert_eq!(
        host.counts,
        vec![
            Counter::Allow,
            Counter::ListFiltered,
            Counter::ListEntriesRemoved,
            Counter::ListEntriesRemoved
        ]
    );
    assert_eq!(
        host.records.last().unwrap(),
        "allow gateway=default/allow:b backend=- list=filtered removed=2/3"
    );
    // Agent A keeps every tool: nothing rewritten, still counted as filtered.
    let mut host = post(LIST).caller(A);
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(respond(&mut r, &mut host, &JSON, &[&all]), all);
    assert!(
        host.records
            .last()
            .unwrap()
            .ends_with("list=filtered removed=0/3"),
        "{:?}",
        host.records
    );
}

#[test]
fn both_levels_narrow_the_list() {
    let backend = allow_level(vec![lister("backend", None, &["echo", "get-env"])]);
    let p = plugin(
        allow_level(vec![lister("b", Some(B), &["get-sum", "get-env"])]),
        Some(backend),
    );
    let mut host = post(LIST).caller(B);
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(
        respond(
            &mut r,
            &mut host,
            &JSON,
            &[&tools(&["echo", "get-sum", "get-env"])]
        ),
        tools(&["get-env"])
    );
}

#[test]
fn a_cel_rule_on_arguments_keeps_its_tool_listed() {
    // B: a rule on an argument, which an entry cannot tell (possibly allowing: every tool stays).
    // A: a rule on the tool name only, evaluated for each entry.
    let cel = |name: &str, who: &str, expression: &str| RulePlan {
        name: name.into(),
        principal: Some(who.into()),
        cel: Some(expression.into()),
        ..RulePlan::default()
    };
    let p = plugin(
        allow_level(vec![
            RulePlan {
                name: "base".into(),
                mcp: Some(McpMatch {
                    base_protocol: true,
                    methods: vec![],
                }),
                ..RulePlan::default()
            },
            cel(
                "b-argument",
                B,
                "request.mcp.tool_name == 'echo' && request.mcp.params.arguments.a == 1",
            ),
            cel("a-name", A, "request.mcp.tool_name == 'get-env'"),
        ]),
        None,
    );
    let all = tools(&["echo", "get-sum", "get-env"]);
    for (who, expected) in [(B, all.clone()), (A, tools(&["get-env"]))] {
        let mut host = post(LIST).caller(who);
        let (mut r, _) = send(&p, &mut host);
        assert_eq!(
            respond(&mut r, &mut host, &JSON, &[&all]),
            expected,
            "{who}"
        );
    }
}

#[test]
fn an_event_stream_is_filtered_as_it_streams() {
    let p = two_agents();
    let mut host = post(LIST).caller(B);
    let (mut r, _) = send(&p, &mut host);
    let note = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n";
    let list = format!("event: message\ndata: {}\n\n", tools(&["echo", "get-sum"]));
    let sse = [(":status", "200"), ("content-type", "text/event-stream")];
    let out = respond(&mut r, &mut host, &sse, &[note, &list[..20], &list[20..]]);
    assert_eq!(
        out,
        format!("{note}event: message\ndata: {}\n\n", tools(&["get-sum"]))
    );
    assert!(host
        .records
        .last()
        .unwrap()
        .ends_with("list=filtered removed=1/2"));
}

#[test]
fn a_list_response_that_cannot_be_read_is_replaced_by_an_error() {
    let p = two_agents();
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: [Case<'_>; 4] = [
        (
            &[
                (":status", "200"),
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            "\u{1f}binary",
            "encoded (gzip)",
        ),
        (&JSON, "{not json", "not JSON-RPC"),
        (
            &[(":status", "200"), ("content-type", "text/plain")],
            "tools",
            "content type",
        ),
        (
            &JSON,
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"tools":[{"name":"echo"}]}}"#,
            "ambiguous",
        ),
    ];
    for (headers, body, says) in cases {
        let mut host = post(LIST).caller(B);
        let (mut r, _) = send(&p, &mut host);
        let out = respond(&mut r, &mut host, headers, &[&body[..3], &body[3..]]);
        let reply: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
        assert_eq!(
            (reply["id"].as_i64(), reply["error"]["code"].as_i64()),
            (Some(7), Some(-32603)),
            "{out}"
        );
        assert!(
            reply["error"]["message"].as_str().unwrap().contains(says),
            "{out}"
        );
        assert!(!out.contains("echo"), "{out}");
        assert!(
            host.response_header("content-encoding").is_none()
                && host.response_header("content-length").is_none()
        );
        assert_eq!(host.counts.last(), Some(&Counter::ListUnreadable));
        assert!(
            host.records.last().unwrap().ends_with("list=refused"),
            "{:?}",
            host.records
        );
        assert!(host
            .logs
            .iter()
            .any(|(l, m)| *l == LogLevel::Warn && m.contains("list response refused")));
    }
    // Over the body limit (the plan's), as one JSON body or as one event.
    let p = plugin_with(
        |s| s.max_body_bytes = 64,
        allow_level(vec![lister("b", Some(B), &["get-sum"])]),
        None,
    );
    for headers in [
        &JSON[..],
        &[(":status", "200"), ("content-type", "text/event-stream")][..],
    ] {
        let mut host = post(LIST).caller(B);
        let (mut r, _) = send(&p, &mut host);
        let body = format!("data: {}", tools(&["echo", "get-sum", "get-env", "a", "b"]));
        let out = respond(&mut r, &mut host, headers, &[&body[..40], &body[40..]]);
        assert!(
            out.contains("over the limit of 64 bytes") && !out.contains("echo"),
            "{out}"
        );
    }
}

#[test]
fn other_responses_are_not_looked_at() {
    let p = two_agents();
    let all = tools(&["echo", "get-sum"]);
    // An error status, a call rather than a list, a plan with list filtering off.
    let mut host = post(LIST).caller(B);
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(
        respond(
            &mut r,
            &mut host,
            &[(":status", "500"), ("content-type", "application/json")],
            &[&all]
        ),
        all
    );
    let mut host = post(&call(7, "get-sum")).caller(B);
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(respond(&mut r, &mut host, &JSON, &[&all]), all);
    assert_eq!(host.response_headers.len(), 3, "headers untouched");
    let off = plugin_with(
        |s| s.list_filtering = false,
        allow_level(vec![lister("b", Some(B), &["get-sum"])]),
        None,
    );
    let mut host = post(LIST).caller(B);
    let (mut r, _) = send(&off, &mut host);
    assert_eq!(respond(&mut r, &mut host, &JSON, &[&all]), all);
    assert_eq!(host.counts, vec![Counter::Allow]);
    // A denied list request is answered by the filter: its "response" is not filtered again.
    let mut host = post(LIST).caller("spiffe://cluster.local/ns/default/sa/c");
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(r.on_response_headers(&mut host, false), Action::Continue);
    assert_eq!(r.on_response_body(&mut host, 0, true), Action::Continue);
    assert!(!host.counts.contains(&Counter::ListFiltered));
}

#[test]
fn accept_encoding_is_removed_from_list_requests() {
    // Without header pausing: from every JSON POST that may be a list (no Mcp-Method naming another
    // method), at its headers.
    let p = two_agents();
    for (mcp_method, removed) in [
        (None, true),
        (Some("tools/list"), true),
        (Some("tools/call"), false),
    ] {
        let mut host = post(LIST).caller(B).header("accept-encoding", "gzip");
        if let Some(m) = mcp_method {
            host = host.header("mcp-method", m);
        }
        let mut r = p.request();
        assert_eq!(r.on_request_headers(&mut host, false), Action::Continue);
        assert_eq!(
            host.edits.contains(&"remove accept-encoding".to_string()),
            removed,
            "{mcp_method:?}"
        );
    }
    // Without the header, nothing to remove.
    let mut host = post(LIST).caller(B);
    send(&p, &mut host);
    assert!(host.edits.is_empty());
    // With header pausing: the headers are held and the header removed once the body shows a list.
    let p = plugin_with(
        |s| s.pause_headers = true,
        allow_level(vec![lister("b", Some(B), &["get-sum"])]),
        None,
    );
    for (body, removed) in [(LIST.to_string(), true), (call(1, "get-sum"), false)] {
        let mut host = post(&body).caller(B).header("accept-encoding", "gzip");
        let mut r = p.request();
        assert_eq!(r.on_request_headers(&mut host, false), Action::Pause);
        assert!(host.edits.is_empty());
        let size = host.body.len();
        assert_eq!(r.on_request_body(&mut host, size, true), Action::Continue);
        assert_eq!(
            host.edits.contains(&"remove accept-encoding".to_string()),
            removed,
            "{body}"
        );
    }
}

#[test]
fn response_trailers_end_a_buffered_list() {
    let p = two_agents();
    let mut host = post(LIST).caller(B);
    let (mut r, _) = send(&p, &mut host);
    host.response_headers = pairs(&JSON);
    r.on_response_headers(&mut host, false);
    host.response_body = tools(&["echo", "get-sum"]).into_bytes();
    let size = host.response_body.len();
    assert_eq!(r.on_response_body(&mut host, size, false), Action::Pause);
    assert_eq!(r.on_response_trailers(&mut host), Action::Continue);
    assert_eq!(
        String::from_utf8(host.response_body.clone()).unwrap(),
        tools(&["get-sum"])
    );
}

/// docs/semantics.md §6b: rules over a verified token's claims decide calls and lists per token; no
/// token, or a second Authorization credential, gives no claims.
#[test]
fn claims_decide_calls_and_lists_per_token() {
    let cel = |name: &str, expression: &str| RulePlan {
        name: name.into(),
        cel: Some(expression.into()),
        ..RulePlan::default()
    };
    let p = plugin(
        allow_level(vec![
            RulePlan { name: "base".into(), mcp: Some(McpMatch { base_protocol: true, methods: vec![] }), ..RulePlan::default() },
            cel("agent-7", "request.auth.claims.sub == 'agent-7' && request.mcp.tool_name == 'get-sum'"),
            cel("writers", "'tools:write' in request.auth.claims.scope && request.mcp.tool_name == 'echo'"), // a list (§6b)
            cel("principal", "request.auth.principal == 'https://i.test/agent-p' && request.mcp.tool_name == 'get-env'"),
        ]),
        None,
    );
    let token = |sub: &str, scope: &str| serde_json::json!({"iss": "https://i.test", "sub": sub, "scope": scope});
    let all = tools(&["echo", "get-sum", "get-env"]);
    for (claims, expected) in [
        (Some(token("agent-7", "tools:read")), tools(&["get-sum"])),
        (
            Some(token("agent-w", "tools:read tools:write")),
            tools(&["echo"]),
        ),
        (Some(token("agent-p", "")), tools(&["get-env"])),
        (None, tools(&[])),
    ] {
        let host = post(LIST);
        let mut host = match &claims {
            Some(c) => host.token(c.clone()),
            None => host,
        };
        let (mut r, _) = send(&p, &mut host);
        assert_eq!(
            respond(&mut r, &mut host, &JSON, &[&all]),
            expected,
            "{claims:?}"
        );
    }
    let decide = |host: &mut Fake| {
        send(&p, host);
        host.records.last().cloned().unwrap_or_default()
    };
    assert!(
        decide(&mut post(&call(1, "get-sum")).token(token("agent-7", ""))).starts_with("allow")
    );
    assert!(decide(&mut post(&call(1, "get-sum"))).starts_with("deny"));
    // Two Authorization fields, or two credentials in one: no claims.
    let mut two = post(&call(1, "get-sum")).token(token("agent-7", ""));
    two.headers.extend(pairs(&[
        ("authorization", "Basic eA=="),
        ("authorization", "Bearer x.y.z"),
    ]));
    assert!(decide(&mut two).starts_with("deny"));
    let mut joined = post(&call(1, "get-sum")).token(token("agent-7", ""));
    joined
        .headers
        .extend(pairs(&[("authorization", "Basic eA==,Bearer x.y.z")]));
    assert!(decide(&mut joined).starts_with("deny"));
    let mut one = post(&call(1, "get-sum")).token(token("agent-7", ""));
    one.headers
        .extend(pairs(&[("authorization", "Bearer x.y.z")]));
    assert!(decide(&mut one).starts_with("allow"));
}
