//! The lifecycle driven natively by a fake host: every state, every way a request ends, and every
//! failure of an authorizer call.

use prost::Message;
use toolgate_ext_authz_proto::envoy::config::core::v3::HeaderValueOption;
use toolgate_ext_authz_proto::envoy::r#type::v3::HttpStatus;
use toolgate_ext_authz_proto::envoy::service::auth::v3::{
    check_response::HttpResponse, CheckResponse, DeniedHttpResponse, OkHttpResponse,
};
use toolgate_ext_authz_proto::google::rpc::Status;
use toolgate_ext_authz_proto::json;

use super::*;
use crate::plan::{
    AuthorizerPlan, AuthorizerProtocol, CompiledPlan, ExternalAuthPlan, HeaderMatch, HttpMatch,
    LevelPlan, McpMatch, McpMethodMatch, MethodPattern, PolicyPlan, RulePlan, ValueMatch,
    IMPLICIT_RULE,
};

const A: &str = "spiffe://cluster.local/ns/default/sa/a";
const B: &str = "spiffe://cluster.local/ns/default/sa/b";
const CLUSTER: &str = "xbackend/default/tools";

type Fake = crate::testing::FakeHost;
type FakeRoot = crate::testing::FakeHost;
use crate::testing::{pairs, Made};

/// A JSON POST to /mcp routed to CLUSTER.
fn post(body: &str) -> Fake {
    Fake::post(body.as_bytes(), Some(CLUSTER))
}

/// A GET of /mcp routed to CLUSTER.
fn get() -> Fake {
    Fake::get(Some(CLUSTER))
}

fn tools_rule(name: &str, principal: Option<&str>, tools: &[&str]) -> RulePlan {
    RulePlan {
        name: name.into(),
        principal: principal.map(str::to_string),
        http: HttpMatch::default(),
        mcp: Some(McpMatch {
            base_protocol: false,
            methods: vec![McpMethodMatch {
                method: MethodPattern::Exact("tools/call".into()),
                params: tools.iter().map(|t| t.to_string()).collect(),
            }],
        }),
        cel: None,
    }
}

fn any_rule() -> RulePlan {
    RulePlan {
        name: IMPLICIT_RULE.into(),
        ..RulePlan::default()
    }
}

fn grpc_authorizer() -> AuthorizerPlan {
    AuthorizerPlan {
        cluster: "authz/default/authz/9000".into(),
        authority: "authz.default.svc.cluster.local".into(),
        protocol: AuthorizerProtocol::Grpc,
        allowed_headers: vec![],
        forward_body_bytes: 0,
    }
}

fn http_authorizer() -> AuthorizerPlan {
    AuthorizerPlan {
        cluster: "authz/default/authz/8080".into(),
        authority: "authz.default.svc.cluster.local".into(),
        protocol: AuthorizerProtocol::Http {
            path_prefix: "/check".into(),
            allowed_response_headers: vec!["x-user".into()],
        },
        allowed_headers: vec!["x-a".into()],
        forward_body_bytes: 10,
    }
}

fn ea(rules: Vec<RulePlan>, authorizer: AuthorizerPlan) -> Option<ExternalAuthPlan> {
    Some(ExternalAuthPlan {
        policy: "default/ea".into(),
        rules,
        authorizer,
        dry_run: false,
    })
}

/// A plugin with `gateway` and (for [`CLUSTER`]) `backend` levels loaded through `configure`.
fn plugin(gateway: LevelPlan, backend: Option<LevelPlan>) -> Plugin {
    let mut plan = CompiledPlan::empty("default/gw/https");
    plan.settings.authz_timeout_ms = 500;
    plan.gateway = gateway;
    if let Some(b) = backend {
        plan.backends.insert(CLUSTER.into(), b);
    }
    let json = serde_json::to_vec(&plan.seal()).unwrap();
    let mut p = Plugin::default();
    let mut root = FakeRoot::default();
    assert!(p.configure(&mut root, &json));
    assert!(root.logs[0].1.contains("loaded plan"), "{:?}", root.logs);
    p
}

fn allow_level(rules: Vec<RulePlan>) -> LevelPlan {
    LevelPlan {
        external_auth: None,
        allow: vec![PolicyPlan {
            name: "default/allow".into(),
            rules,
            dry_run: false,
        }],
    }
}

fn call(id: u32, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"a":1}}}}}}"#
    )
}

/// Sends a JSON POST through headers and one body callback: what the last callback returned.
fn send(p: &Plugin, host: &mut Fake) -> (Request, Action) {
    let mut r = p.request();
    assert_eq!(r.on_request_headers(host, false), Action::Continue);
    let size = host.body.len();
    let action = r.on_request_body(host, size, true);
    (r, action)
}

fn grpc_ok(headers: &[(&str, &str)]) -> CallAnswer {
    let response = CheckResponse {
        status: Some(Status {
            code: 0,
            ..Default::default()
        }),
        http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
            headers: headers
                .iter()
                .map(|(k, v)| HeaderValueOption::new(*k, *v))
                .collect(),
            headers_to_remove: vec!["x-drop".into()],
            ..Default::default()
        })),
        dynamic_metadata: None,
    };
    CallAnswer::Grpc {
        status: 0,
        message: response.encode_to_vec(),
    }
}

fn grpc_denied(status: Option<i32>, headers: &[(&str, &str)], body: &str) -> CallAnswer {
    let response = CheckResponse {
        status: Some(Status {
            code: 7,
            ..Default::default()
        }),
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: status.map(|code| HttpStatus { code }),
            headers: headers
                .iter()
                .map(|(k, v)| HeaderValueOption::new(*k, *v))
                .collect(),
            body: body.into(),
        })),
        dynamic_metadata: None,
    };
    CallAnswer::Grpc {
        status: 0,
        message: response.encode_to_vec(),
    }
}

const FORBIDDEN: &str = r#""error":{"code":403,"message":"Access to this tool is forbidden."}"#;

// ---- without authorizers ------------------------------------------------------------------------

#[test]
fn no_plan_denies_every_request() {
    let p = Plugin::default();
    let mut host = post(&call(1, "echo"));
    assert_eq!(
        p.request().on_request_headers(&mut host, false),
        Action::Pause
    );
    assert_eq!(
        host.reply(),
        (403, format!(r#"{{"jsonrpc":"2.0","id":null,{FORBIDDEN}}}"#))
    );
    assert_eq!(host.counts, vec![Counter::DenyNoPlan]);
    assert_eq!(host.records, vec!["deny: no valid plan loaded"]);
}

#[test]
fn a_refused_first_plan_denies_and_a_refused_update_is_rejected() {
    let mut root = FakeRoot::default();
    let mut p = Plugin::default();
    assert!(p.configure(&mut root, b"{not a plan"));
    assert!(
        root.logs[0].1.contains("REFUSED plan") && root.logs[0].1.contains("denying every request"),
        "{:?}",
        root.logs
    );
    let mut host = post(&call(1, "echo"));
    assert_eq!(
        p.request().on_request_headers(&mut host, false),
        Action::Pause
    );
    assert_eq!(host.counts, vec![Counter::DenyNoPlan]);

    let mut plan = CompiledPlan::empty("l");
    plan.gateway = allow_level(vec![tools_rule("echo", None, &["echo"])]);
    assert!(p.configure(&mut root, &serde_json::to_vec(&plan.seal()).unwrap()));
    // An update with a refused plan: false (Envoy rejects the update and keeps the configuration in
    // force), never a stored plan, in this root context or a new one.
    assert!(!p.configure(&mut root, b"[]"));
    assert!(
        root.logs.last().unwrap().1.contains("REFUSED new plan")
            && root.logs.last().unwrap().1.contains("update rejected"),
        "{:?}",
        root.logs
    );
    assert!(!Plugin::default().configure(&mut root, b"[]"));
    assert_eq!(
        root.counts,
        vec![
            Counter::PlanRejected,
            Counter::PlanRejected,
            Counter::PlanRejected
        ]
    );
    let mut host = post(&call(1, "echo"));
    let (_, action) = send(&p, &mut host);
    assert_eq!(action, Action::Continue);
    assert_eq!(host.counts, vec![Counter::Allow]);
}

#[test]
fn a_listener_that_accepts_unverified_certificates_has_no_caller_identity() {
    // The client certificate's URI SAN says A; a listener that did not verify it (the plan setting)
    // reads no identity: A's rule matches no one there, and a rule without a source still does.
    for unverified in [false, true] {
        let mut plan = CompiledPlan::empty("default/gw/https");
        plan.settings.unverified_client_certificates = unverified;
        plan.gateway = allow_level(vec![
            tools_rule("a", Some(A), &["echo"]),
            tools_rule("anyone", None, &["get-sum"]),
        ]);
        let mut p = Plugin::default();
        assert!(p.configure(
            &mut FakeRoot::default(),
            &serde_json::to_vec(&plan.seal()).unwrap()
        ));
        for (tool, allowed) in [("echo", !unverified), ("get-sum", true)] {
            let mut host = post(&call(1, tool));
            host.principal = Some(A.into());
            let (_, action) = send(&p, &mut host);
            assert_eq!(
                action == Action::Continue,
                allowed,
                "unverified {unverified}, {tool}: {:?}",
                host.records
            );
            assert_eq!(
                host.counts,
                vec![if allowed {
                    Counter::Allow
                } else {
                    Counter::DenyGateway
                }],
                "{tool}"
            );
        }
    }
}

#[test]
fn a_module_without_response_callbacks_refuses_plans_that_filter_lists() {
    let mut root = FakeRoot {
        no_response_callbacks: true,
        ..FakeRoot::default()
    };
    let mut p = Plugin::default();
    let mut plan = CompiledPlan::empty("l");
    plan.gateway = allow_level(vec![tools_rule("echo", None, &["echo"])]);
    assert!(plan.settings.list_filtering);
    assert!(p.configure(
        &mut root,
        &serde_json::to_vec(&plan.clone().seal()).unwrap()
    ));
    assert!(
        root.logs[0]
            .1
            .contains("REFUSED plan (settings.listFiltering is on, but this module was built without the response callbacks"),
        "{:?}",
        root.logs
    );
    let mut host = post(&call(1, "echo"));
    assert_eq!(
        p.request().on_request_headers(&mut host, false),
        Action::Pause
    );
    assert_eq!(host.counts, vec![Counter::DenyNoPlan]);
    // The same plan with list filtering off loads and decides.
    plan.settings.list_filtering = false;
    assert!(p.configure(&mut root, &serde_json::to_vec(&plan.seal()).unwrap()));
    assert!(
        root.logs.last().unwrap().1.contains("loaded plan"),
        "{:?}",
        root.logs
    );
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::Allow]);
}

#[test]
fn a_route_without_policy_is_not_read() {
    let p = plugin(LevelPlan::default(), None);
    let mut host = post("not even json");
    host.debug = true;
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, false), Action::Continue);
    assert_eq!(r.on_request_body(&mut host, 13, true), Action::Continue);
    assert_eq!(host.counts, vec![Counter::AllowNoPolicy]);
    assert!(host.records.is_empty());
    assert_eq!(
        host.logs,
        vec![(
            LogLevel::Debug,
            "toolgate: 'POST' '/mcp': allow (no policy)".to_string()
        )]
    );
}

#[test]
fn a_json_post_is_held_until_its_whole_body_is_here() {
    let p = plugin(
        allow_level(vec![tools_rule("sum", None, &["get-sum"])]),
        None,
    );
    let body = call(7, "get-sum");
    let mut host = post(&body);
    host.debug = true;
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, false), Action::Continue);
    assert_eq!(r.on_request_body(&mut host, 10, false), Action::Pause);
    assert_eq!(r.on_request_body(&mut host, 20, false), Action::Pause);
    assert!(host.records.is_empty());
    assert_eq!(
        r.on_request_body(&mut host, body.len(), true),
        Action::Continue
    );
    assert_eq!(
        host.records,
        vec!["allow gateway=default/allow:sum backend=-"]
    );
    assert_eq!(host.counts, vec![Counter::Allow]);
    assert_eq!(
        host.logs.len(),
        1,
        "one debug line per decision: {:?}",
        host.logs
    );
    // Later callbacks let it go on and do nothing else.
    assert_eq!(r.on_request_trailers(&mut host), Action::Continue);
    assert_eq!(
        r.on_request_body(&mut host, body.len(), true),
        Action::Continue
    );
    assert_eq!(
        (host.records.len(), host.resumed, host.replies.len()),
        (1, 0, 0)
    );

    let mut host = post(&call(8, "echo"));
    let mut r = p.request();
    r.on_request_headers(&mut host, false);
    let size = host.body.len();
    assert_eq!(r.on_request_body(&mut host, size, true), Action::Pause);
    assert_eq!(
        host.reply(),
        (200, format!(r#"{{"jsonrpc":"2.0","id":8,{FORBIDDEN}}}"#))
    );
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
}

/// A host that holds requests itself (the dynamic module, with no buffer filter after it): a
/// JSON POST's headers pause until the decision, which lets them go on (allowed) or replies.
#[test]
fn a_host_that_holds_requests_pauses_their_headers_until_the_decision() {
    let p = plugin(
        allow_level(vec![tools_rule("sum", None, &["get-sum"])]),
        None,
    );
    let body = call(7, "get-sum");
    let mut host = post(&body);
    host.holds_request = true;
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, false), Action::Pause);
    assert_eq!(r.on_request_body(&mut host, 10, false), Action::Pause);
    assert_eq!(
        r.on_request_body(&mut host, body.len(), true),
        Action::Continue
    );
    assert_eq!(host.counts, vec![Counter::Allow]);
    // Decided in a callback: the host continues by the returned action, not by a resume.
    assert_eq!((host.resumed, host.replies.len()), (0, 0));

    let mut host = post(&call(8, "echo"));
    host.holds_request = true;
    let mut r = p.request();
    assert_eq!(r.on_request_headers(&mut host, false), Action::Pause);
    let size = host.body.len();
    assert_eq!(r.on_request_body(&mut host, size, true), Action::Pause);
    assert_eq!(host.reply().0, 200);
    assert_eq!(host.counts, vec![Counter::DenyGateway]);

    // A request decided on its headers is answered there (a GET under this policy is denied), and
    // one on a route without policy goes on at once.
    let mut host = get();
    host.holds_request = true;
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Pause
    );
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
    let mut host = post(&body);
    host.holds_request = true;
    let unrouted = plugin(LevelPlan::default(), Some(allow_level(vec![any_rule()])));
    host.cluster = Some("other".into());
    assert_eq!(
        unrouted.request().on_request_headers(&mut host, false),
        Action::Continue
    );
}

#[test]
fn a_body_over_the_limit_gets_413_and_nothing_else() {
    let p = plugin(allow_level(vec![any_rule()]), None);
    let mut host = post("x");
    let mut r = p.request();
    r.on_request_headers(&mut host, false);
    assert_eq!(
        r.on_request_body(&mut host, 1024 * 1024, false),
        Action::Pause
    );
    assert_eq!(
        r.on_request_body(&mut host, 1024 * 1024 + 1, false),
        Action::Pause
    );
    assert_eq!(host.reply().0, 413);
    assert_eq!(host.counts, vec![Counter::TooLarge]);
    assert_eq!(host.records, vec!["deny: body over the limit"]);
    assert_eq!(
        r.on_request_body(&mut host, 2 * 1024 * 1024, true),
        Action::Continue
    );
    assert_eq!(host.replies.len(), 1);
}

#[test]
fn a_body_that_ends_with_trailers_is_decided_at_the_trailers() {
    let p = plugin(
        allow_level(vec![tools_rule("sum", None, &["get-sum"])]),
        None,
    );
    let body = call(3, "echo");
    let mut host = post(&body);
    let mut r = p.request();
    r.on_request_headers(&mut host, false);
    assert_eq!(
        r.on_request_body(&mut host, body.len(), false),
        Action::Pause
    );
    assert_eq!(r.on_request_trailers(&mut host), Action::Pause);
    assert_eq!(host.reply().0, 200);
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
}

#[test]
fn requests_without_a_json_body_are_decided_on_their_headers() {
    let p = plugin(
        allow_level(vec![RulePlan {
            name: "gets".into(),
            http: HttpMatch {
                methods: vec!["GET".into()],
                ..HttpMatch::default()
            },
            ..RulePlan::default()
        }]),
        None,
    );
    let mut host = get();
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Continue
    );
    assert_eq!(host.counts, vec![Counter::Allow]);
    // A JSON POST without a body is not MCP; an encoded one neither.
    let mut host = post("");
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Pause
    );
    assert_eq!(host.reply().0, 403);
    assert!(
        host.records[0].contains("body is not MCP: empty body"),
        "{:?}",
        host.records
    );
    let mut host = post(&call(1, "x")).header("content-encoding", "gzip");
    let (_, action) = send(&p, &mut host);
    assert_eq!(action, Action::Pause);
    assert!(
        host.records[0].contains("body is encoded ('gzip')"),
        "{:?}",
        host.records
    );
}

#[test]
fn a_get_or_delete_with_a_body_is_not_the_base_protocols() {
    // The rule allows the base protocol only: a GET (stream) and a DELETE with a session id pass
    // without a body; with one (the headers do not end the stream), it is not read and they do not.
    let base = RulePlan {
        name: "base".into(),
        mcp: Some(McpMatch {
            base_protocol: true,
            methods: vec![],
        }),
        ..RulePlan::default()
    };
    let p = plugin(allow_level(vec![base]), None);
    for (method, session) in [("GET", None), ("DELETE", Some("s1"))] {
        let with = |stream_open: bool, body_size: usize| {
            let mut host = get();
            host.headers.retain(|(k, _)| k != ":method");
            host.headers.push((":method".into(), method.into()));
            if let Some(s) = session {
                host.headers.push(("mcp-session-id".into(), s.into()));
            }
            host.body = vec![b'x'; body_size];
            let mut r = p.request();
            let action = r.on_request_headers(&mut host, !stream_open);
            let body_action = if stream_open {
                r.on_request_body(&mut host, body_size, true)
            } else {
                action
            };
            (action, host, body_action)
        };
        let (action, host, _) = with(false, 0);
        assert_eq!(
            (action, host.counts.clone()),
            (Action::Continue, vec![Counter::Allow]),
            "{method}"
        );
        // Held to the body's end: a body of 5 bytes is denied there, an empty one (an HTTP/2 stream
        // ended by an empty DATA frame) allowed.
        let (action, host, body_action) = with(true, 5);
        assert_eq!(
            (action, body_action, host.counts.clone()),
            (Action::Continue, Action::Pause, vec![Counter::DenyGateway]),
            "{method}"
        );
        let (status, _, body) = host.replies.last().cloned().unwrap();
        assert_eq!(status, 403, "{method}: {body:?}");
        assert!(
            host.records
                .last()
                .unwrap()
                .contains(&format!("{method} with a body, which is not read")),
            "{:?}",
            host.records
        );
        let (_, host, body_action) = with(true, 0);
        assert_eq!(
            (body_action, host.counts.clone()),
            (Action::Continue, vec![Counter::Allow]),
            "{method}"
        );
    }
}

#[test]
fn header_rules_see_every_kept_header_however_many() {
    // 20 header matchers in one rule: more headers are kept than the evaluator's pairs hold on the
    // stack (16), so they are collected in a Vec; the decision must not change with that.
    let names: Vec<String> = (0..20).map(|i| format!("x-h{i}")).collect();
    let matchers = names
        .iter()
        .map(|n| HeaderMatch {
            name: n.clone(),
            value: ValueMatch::Exact("v".into()),
        })
        .collect();
    let rule = RulePlan {
        name: "twenty".into(),
        http: HttpMatch {
            headers: matchers,
            ..HttpMatch::default()
        },
        ..RulePlan::default()
    };
    let p = plugin(allow_level(vec![rule]), None);
    let with = |n: usize| {
        names
            .iter()
            .take(n)
            .fold(post(&call(1, "x")), |host, name| host.header(name, "v"))
    };
    let mut host = with(20);
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::Allow]);
    // Without the last one (the 24th kept header), the rule does not match.
    let mut host = with(19);
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
    // A few headers (the pairs on the stack): the same rule, the same answer.
    let few = RulePlan {
        name: "one".into(),
        http: HttpMatch {
            headers: vec![HeaderMatch {
                name: "x-h0".into(),
                value: ValueMatch::Exact("v".into()),
            }],
            ..HttpMatch::default()
        },
        ..RulePlan::default()
    };
    let p = plugin(allow_level(vec![few]), None);
    assert_eq!(send(&p, &mut with(1)).1, Action::Continue);
    assert_eq!(send(&p, &mut with(0)).1, Action::Pause);
}

#[test]
fn header_rules_on_headers_the_lifecycle_reads_only_for_itself() {
    // `x-request-id` is read for authorizers, `accept-encoding` for list filtering: a plan without
    // them does not collect these, unless a rule names them.
    let on = |name: &str| RulePlan {
        name: name.into(),
        http: HttpMatch {
            headers: vec![HeaderMatch {
                name: name.into(),
                value: ValueMatch::Exact("v".into()),
            }],
            ..HttpMatch::default()
        },
        ..RulePlan::default()
    };
    for (name, list_filtering) in [
        ("x-request-id", true),
        ("accept-encoding", false),
        ("accept-encoding", true),
    ] {
        let mut plan = CompiledPlan::empty("default/gw/https");
        plan.settings.list_filtering = list_filtering;
        plan.gateway = allow_level(vec![on(name)]);
        let mut p = Plugin::default();
        assert!(p.configure(
            &mut FakeRoot::default(),
            &serde_json::to_vec(&plan.seal()).unwrap()
        ));
        let mut host = post(&call(1, "x")).header(name, "v");
        assert_eq!(send(&p, &mut host).1, Action::Continue, "{name}");
        assert_eq!(host.counts, vec![Counter::Allow], "{name}");
        let mut host = post(&call(1, "x")).header(name, "w");
        assert_eq!(send(&p, &mut host).1, Action::Pause, "{name}");
    }
}

mod authorizers;
mod listing;
mod rollout;
