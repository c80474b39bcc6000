//! ExternalAuth in the lifecycle, driven by the fake host: gRPC and HTTP authorizer calls, their
//! answers and failures, levels, batches, and the limit on calls per request.

use super::*;

// ---- gRPC authorizers ---------------------------------------------------------------------------

fn gateway_ea_only() -> Plugin {
    plugin(
        LevelPlan {
            external_auth: ea(vec![any_rule()], grpc_authorizer()),
            allow: vec![],
        },
        None,
    )
}

#[test]
fn grpc_allow_resumes_once_with_the_authorizers_headers() {
    let p = gateway_ea_only();
    let mut host = post(&call(5, "get-sum")).caller(A).header("x-any", "1");
    let (mut r, action) = send(&p, &mut host);
    assert_eq!(action, Action::Pause);
    assert_eq!(host.calls.len(), 1);
    let Made::Grpc {
        cluster,
        authority,
        timeout_ms,
        ..
    } = &host.calls[0]
    else {
        panic!()
    };
    assert_eq!(authority, "authz.default.svc.cluster.local");
    assert_eq!(
        (cluster.as_str(), *timeout_ms),
        ("authz/default/authz/9000", 500)
    );
    let check = host.check_request(0);
    let attributes = check.attributes.unwrap();
    assert_eq!(attributes.source.unwrap().principal, A);
    let http = attributes.request.unwrap().http.unwrap();
    assert_eq!(
        (
            http.method.as_str(),
            http.path.as_str(),
            http.host.as_str(),
            http.protocol.as_str()
        ),
        ("POST", "/mcp", "gw", "HTTP/1.1")
    );
    assert_eq!(
        http.headers.get("x-any").map(String::as_str),
        Some("1"),
        "no allowedHeaders: all headers"
    );
    assert!(http.body.is_empty(), "no forwardBody");
    let mcp = &attributes.metadata_context.unwrap().filter_metadata["mcp_proxy"];
    assert_eq!(
        serde_json::Value::Object(json::from_struct(mcp)),
        serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get-sum", "arguments": {"a": 1}}})
    );
    // Callbacks while the call is out keep the request paused.
    assert_eq!(r.on_request_trailers(&mut host), Action::Pause);
    // An answer to another call is ignored.
    r.on_call_answer(&mut host, 999, grpc_ok(&[]));
    assert_eq!(host.resumed, 0);
    r.on_call_answer(
        &mut host,
        101,
        grpc_ok(&[("x-user", "alice"), ("Host", "evil"), ("x-bad", "a\r\nb")]),
    );
    assert_eq!(host.edits, vec!["add x-user: alice", "remove x-drop"]);
    assert_eq!(host.resumed, 1);
    assert_eq!(
        host.records,
        vec!["allow gateway=- backend=- authorized-by=default/ea"]
    );
    assert_eq!(host.counts, vec![Counter::AuthzAllow, Counter::Allow]);
    // The same answer again (the VM asked to continue twice): nothing happens.
    r.on_call_answer(&mut host, 101, grpc_ok(&[]));
    assert_eq!(
        (host.resumed, host.records.len(), host.replies.len()),
        (1, 1, 0)
    );
}

#[test]
fn grpc_denials_answer_as_spec_5_unless_the_authorizer_gives_another_status() {
    let p = gateway_ea_only();
    // No status, and 403 with a custom body: Toolgate's denial, nothing of the authorizer's.
    for denial in [
        grpc_denied(None, &[], ""),
        grpc_denied(Some(403), &[("x-leak", "1")], "SECRET"),
    ] {
        let mut host = post(&call(9, "echo"));
        let (mut r, _) = send(&p, &mut host);
        r.on_call_answer(&mut host, 101, denial);
        assert_eq!(
            host.reply(),
            (200, format!(r#"{{"jsonrpc":"2.0","id":9,{FORBIDDEN}}}"#))
        );
        assert_eq!(
            host.replies[0].1,
            pairs(&[("content-type", "application/json")])
        );
        assert_eq!(host.resumed, 0);
        assert_eq!(host.counts, vec![Counter::AuthzDeny, Counter::DenyGateway]);
        assert_eq!(
            host.records,
            vec!["deny gateway: the authorizer of default/ea denied (HTTP 403)"]
        );
    }
    // 401 with a challenge: passed through as the authorizer gave it.
    let mut host = post(&call(9, "echo"));
    let (mut r, _) = send(&p, &mut host);
    r.on_call_answer(
        &mut host,
        101,
        grpc_denied(
            Some(401),
            &[("www-authenticate", "Bearer realm=\"mcp\"")],
            "log in",
        ),
    );
    assert_eq!(
        host.replies,
        vec![(
            401,
            pairs(&[("www-authenticate", "Bearer realm=\"mcp\"")]),
            b"log in".to_vec()
        )]
    );
    assert_eq!(
        host.records,
        vec!["deny gateway: the authorizer of default/ea denied (HTTP 401)"]
    );
}

#[test]
fn grpc_failures_deny_and_are_counted_each_in_its_own_stat() {
    let p = gateway_ea_only();
    let cases = [
        (
            CallAnswer::Grpc {
                status: 4,
                message: vec![],
            },
            0,
            Counter::AuthzTimeout,
            "did not answer in time",
        ),
        (
            CallAnswer::Failed,
            600,
            Counter::AuthzTimeout,
            "did not answer in time",
        ),
        (
            CallAnswer::Failed,
            10,
            Counter::AuthzUnavailable,
            "could not be reached",
        ),
        (
            CallAnswer::Grpc {
                status: 14,
                message: vec![],
            },
            0,
            Counter::AuthzUnavailable,
            "could not be reached",
        ),
        (
            CallAnswer::Grpc {
                status: 0,
                message: b"\xff\xff garbage".to_vec(),
            },
            0,
            Counter::AuthzMalformed,
            "answered something unreadable",
        ),
        (
            CallAnswer::Http {
                headers: vec![],
                body: vec![],
            },
            0,
            Counter::AuthzMalformed,
            "answered something unreadable",
        ),
    ];
    for (answer, elapsed, counter, said) in cases {
        let mut host = post(&call(2, "get-sum"));
        let (mut r, _) = send(&p, &mut host);
        host.now += elapsed;
        r.on_call_answer(&mut host, 101, answer.clone());
        assert_eq!(
            host.reply(),
            (200, format!(r#"{{"jsonrpc":"2.0","id":2,{FORBIDDEN}}}"#)),
            "{answer:?}"
        );
        assert_eq!(
            host.counts,
            vec![counter, Counter::DenyGateway],
            "{answer:?}"
        );
        assert!(host.records[0].ends_with(said), "{:?}", host.records);
        assert_eq!(host.resumed, 0);
    }
}

#[test]
fn a_call_the_host_refuses_to_start_denies_at_once() {
    let p = gateway_ea_only();
    let mut host = post(&call(4, "get-sum"));
    host.refuse_calls = true;
    let mut r = p.request();
    r.on_request_headers(&mut host, false);
    let size = host.body.len();
    assert_eq!(r.on_request_body(&mut host, size, true), Action::Pause);
    assert_eq!(host.reply().0, 200);
    assert_eq!(
        host.counts,
        vec![Counter::AuthzUnavailable, Counter::DenyGateway]
    );
    // On a GET, from the headers callback.
    let mut host = get();
    host.refuse_calls = true;
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Pause
    );
    assert_eq!(host.reply().0, 403);
}

#[test]
fn a_request_without_a_body_pauses_its_headers_for_the_call() {
    let p = gateway_ea_only();
    let mut host = get().caller(B);
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, true), Action::Pause);
    let check = host.check_request(0);
    let attributes = check.attributes.unwrap();
    assert!(
        attributes.metadata_context.is_none(),
        "no JSON-RPC message, no mcp_proxy"
    );
    r.on_call_answer(&mut host, 101, grpc_ok(&[]));
    assert_eq!(host.resumed, 1);
}

#[test]
fn levels_run_in_order_and_only_matching_rules_call() {
    // Backend: Allow {a: echo, get-sum; b: echo, get-sum, get-env} + ExternalAuth for b only.
    let backend = LevelPlan {
        external_auth: ea(
            vec![RulePlan {
                name: "b".into(),
                principal: Some(B.into()),
                ..RulePlan::default()
            }],
            grpc_authorizer(),
        ),
        allow: vec![PolicyPlan {
            name: "default/tools".into(),
            rules: vec![
                tools_rule("a", Some(A), &["echo", "get-sum"]),
                tools_rule("b", Some(B), &["echo", "get-sum", "get-env"]),
            ],
            dry_run: false,
        }],
    };
    let gateway = allow_level(vec![tools_rule(
        "no-delete",
        None,
        &["echo", "get-sum", "get-env"],
    )]);
    let p = plugin(gateway, Some(backend));
    // a -> echo: allowed without a call.
    let mut host = post(&call(1, "echo")).caller(A);
    let (_, action) = send(&p, &mut host);
    assert_eq!((action, host.calls.len()), (Action::Continue, 0));
    assert_eq!(
        host.records,
        vec!["allow gateway=default/allow:no-delete backend=default/tools:a"]
    );
    // a -> get-env: denied by Allow, no call.
    let mut host = post(&call(2, "get-env")).caller(A);
    send(&p, &mut host);
    assert_eq!(
        (host.calls.len(), host.counts.clone()),
        (0, vec![Counter::DenyBackend])
    );
    // b -> get-env: the authorizer, then Allow.
    let mut host = post(&call(3, "get-env")).caller(B);
    let (mut r, _) = send(&p, &mut host);
    assert_eq!(host.calls.len(), 1);
    r.on_call_answer(&mut host, 101, grpc_ok(&[]));
    assert_eq!(host.records, vec!["allow gateway=default/allow:no-delete backend=default/tools:b authorized-by=default/ea"]);
    // The gateway level denies delete-all: the backend authorizer is never called.
    let mut host = post(&call(4, "delete-all")).caller(B);
    send(&p, &mut host);
    assert_eq!(
        (host.calls.len(), host.counts.clone()),
        (0, vec![Counter::DenyGateway])
    );
    // The authorizer allows, Allow denies: denied.
    let mut host = post(&call(5, "delete-all")).caller(B);
    let gateway = LevelPlan {
        external_auth: ea(vec![any_rule()], grpc_authorizer()),
        ..allow_level(vec![tools_rule("x", None, &["echo"])])
    };
    let p2 = plugin(gateway, None);
    let (mut r, _) = send(&p2, &mut host);
    r.on_call_answer(&mut host, 101, grpc_ok(&[]));
    assert_eq!(host.counts, vec![Counter::AuthzAllow, Counter::DenyGateway]);
    assert_eq!(host.resumed, 0);
}

#[test]
fn a_batch_calls_once_per_element_and_resumes_once() {
    let p = gateway_ea_only();
    let body = format!("[{},{},{}]", call(1, "a"), call(2, "b"), call(3, "c"));
    let mut host = post(&body);
    let (mut r, _) = send(&p, &mut host);
    for (i, token) in [101, 102, 103].into_iter().enumerate() {
        assert_eq!(host.calls.len(), i + 1);
        let mcp = host
            .check_request(i)
            .attributes
            .unwrap()
            .metadata_context
            .unwrap();
        assert_eq!(
            json::from_struct(&mcp.filter_metadata["mcp_proxy"])["id"],
            serde_json::json!(i + 1)
        );
        r.on_call_answer(&mut host, token, grpc_ok(&[]));
    }
    assert_eq!((host.calls.len(), host.resumed), (3, 1));
    // One element denied: the whole batch, 403 with id null.
    let mut host = post(&body);
    let (mut r, _) = send(&p, &mut host);
    r.on_call_answer(&mut host, 101, grpc_ok(&[]));
    r.on_call_answer(&mut host, 102, grpc_denied(None, &[], ""));
    assert_eq!(
        host.reply(),
        (403, format!(r#"{{"jsonrpc":"2.0","id":null,{FORBIDDEN}}}"#))
    );
    assert_eq!(host.calls.len(), 2);
    assert!(
        host.records[0].contains("(batch element 1)"),
        "{:?}",
        host.records
    );
}

#[test]
fn a_request_that_needs_too_many_calls_is_denied() {
    let p = gateway_ea_only();
    let body = format!(
        "[{}]",
        (0..40).map(|i| call(i, "t")).collect::<Vec<_>>().join(",")
    );
    let mut host = post(&body);
    let (mut r, _) = send(&p, &mut host);
    for token in 101..101 + crate::eval::MAX_AUTHZ_CALLS {
        r.on_call_answer(&mut host, token, grpc_ok(&[]));
    }
    assert_eq!(host.calls.len(), crate::eval::MAX_AUTHZ_CALLS as usize);
    assert_eq!(host.reply().0, 403);
    assert!(
        host.records[0].contains("more than 32 authorizer calls"),
        "{:?}",
        host.records
    );
    assert_eq!(host.resumed, 0);
}

// ---- HTTP authorizers ---------------------------------------------------------------------------

#[test]
fn http_calls_carry_the_request_and_a_2xx_allows() {
    let p = plugin(
        LevelPlan {
            external_auth: ea(vec![any_rule()], http_authorizer()),
            allow: vec![],
        },
        None,
    );
    let body = call(6, "get-sum");
    let mut host = post(&body)
        .caller(A)
        .header("x-a", "1")
        .header("x-secret", "s")
        .header("authorization", "Bearer t")
        .header("x-toolgate-principal", "spiffe://forged");
    let (mut r, _) = send(&p, &mut host);
    let Made::Http {
        cluster,
        headers,
        body: sent,
        ..
    } = &host.calls[0]
    else {
        panic!()
    };
    assert_eq!(cluster, "authz/default/authz/8080");
    assert_eq!(
        headers,
        &pairs(&[
            (":method", "POST"),
            (":path", "/check/mcp"),
            (":authority", "gw"),
            ("content-length", "10"),
            ("x-a", "1"),
            ("authorization", "Bearer t"),
            ("x-toolgate-principal", A),
            ("x-envoy-auth-partial-body", "true"),
        ])
    );
    assert_eq!(sent, &body.as_bytes()[..10]);
    let ok = CallAnswer::Http {
        headers: pairs(&[(":status", "200"), ("x-user", "alice"), ("x-other", "o")]),
        body: vec![],
    };
    r.on_call_answer(&mut host, 101, ok);
    assert_eq!(host.edits, vec!["set x-user: alice"]);
    assert_eq!(host.resumed, 1);
    // Any other status denies: 403 as Toolgate's denial, others passed through; a 5xx is the
    // authorizer (or Envoy's call) failing, answered as Toolgate's denial.
    for (status, expected) in [
        ("403", 200),
        ("401", 401),
        ("302", 302),
        ("500", 200),
        ("503", 200),
    ] {
        let mut host = post(&body);
        let (mut r, _) = send(&p, &mut host);
        let answer = CallAnswer::Http {
            headers: pairs(&[
                (":status", status),
                ("www-authenticate", "Basic"),
                ("content-length", "2"),
            ]),
            body: b"no".to_vec(),
        };
        r.on_call_answer(&mut host, 101, answer);
        assert_eq!(host.reply().0, expected);
        if expected != 200 {
            assert_eq!(host.replies[0].1, pairs(&[("www-authenticate", "Basic")]));
            assert_eq!(host.replies[0].2, b"no");
        } else {
            assert!(!host.reply().1.contains("no"));
        }
    }
}

#[test]
fn with_pause_headers_a_json_post_under_an_authorizer_is_held_from_its_headers() {
    let level = LevelPlan {
        external_auth: ea(vec![any_rule()], grpc_authorizer()),
        allow: vec![],
    };
    let mut plan = CompiledPlan::empty("l");
    plan.settings.pause_headers = true;
    plan.gateway = level;
    let mut p = Plugin::default();
    p.configure(
        &mut FakeRoot::default(),
        &serde_json::to_vec(&plan.seal()).unwrap(),
    );
    let mut host = post(&call(1, "get-sum"));
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, false), Action::Pause);
    let size = host.body.len();
    assert_eq!(r.on_request_body(&mut host, size, true), Action::Pause);
    r.on_call_answer(&mut host, 101, grpc_ok(&[("x-user", "alice")]));
    assert_eq!(
        (host.resumed, host.edits.clone()),
        (
            1,
            vec!["add x-user: alice".to_string(), "remove x-drop".to_string()]
        )
    );
    // Without an authorizer the headers continue as always.
    let mut plan = CompiledPlan::empty("l");
    plan.settings.pause_headers = true;
    plan.gateway = allow_level(vec![any_rule()]);
    let mut p = Plugin::default();
    p.configure(
        &mut FakeRoot::default(),
        &serde_json::to_vec(&plan.seal()).unwrap(),
    );
    assert_eq!(
        p.request()
            .on_request_headers(&mut post(&call(1, "x")), false),
        Action::Continue
    );
}
