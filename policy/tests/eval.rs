//! Evaluator and per-policy compiler: docs/semantics.md §3 decisions on hand-built messages.
//! The policy model's decisions are here; the MCP headers' agreement with the body (§4) is in
//! eval/headers.rs, the denial replies (§5) and `explain`'s record in eval/replies.rs.

use std::borrow::Cow;

use toolgate_policy::api::AccessPolicySpec;
use toolgate_policy::compile::{compile_policy, CompileError, CompileOptions};
use toolgate_policy::eval::{BodyInput, DenyReason, Evaluator, HttpRequest, Level, Verdict};
use toolgate_policy::mcp::{McpBody, McpMessage, NotMcp};
use toolgate_policy::plan::{CompiledPlan, LevelPlan, PolicyPlan};
use toolgate_policy::response;

const A: &str = "spiffe://cluster.local/ns/default/sa/a";
const B: &str = "spiffe://cluster.local/ns/default/sa/b";

fn policy(name: &str, yaml: &str) -> PolicyPlan {
    let spec: AccessPolicySpec = serde_yaml_like(yaml);
    compile_policy("default", name, &spec, &CompileOptions::default()).expect("policy compiles")
}

/// The tests write specs as JSON to avoid a YAML dev-dependency.
fn serde_yaml_like(json: &str) -> AccessPolicySpec {
    serde_json::from_str(json).expect("spec parses")
}

fn plan(gateway: Vec<PolicyPlan>, backends: Vec<(&str, Vec<PolicyPlan>)>) -> Evaluator {
    let mut p = CompiledPlan::empty("default/gw/http");
    p.gateway = LevelPlan {
        allow: gateway,
        ..Default::default()
    };
    for (cluster, allow) in backends {
        p.backends.insert(
            cluster.to_string(),
            LevelPlan {
                allow,
                ..Default::default()
            },
        );
    }
    // Round-trip through JSON with a hash, as the filter receives it.
    let json = serde_json::to_vec(&p.seal()).unwrap();
    Evaluator::load(&json).expect("plan loads")
}

fn msg<'a>(
    method: &'a str,
    id: Option<&'a str>,
    name: Option<&'a str>,
    uri: Option<&'a str>,
) -> McpMessage<'a> {
    McpMessage {
        method: Some(Cow::Borrowed(method)),
        id,
        name: name.map(Cow::Borrowed),
        uri: uri.map(Cow::Borrowed),
        subscriptions: vec![],
        protocol_version: None,
        params: None,
    }
}

fn call(tool: &str) -> McpMessage<'_> {
    msg("tools/call", Some("1"), Some(tool), None)
}

struct Req {
    method: &'static str,
    path: &'static str,
    authority: &'static str,
    port: u16,
    headers: Vec<(&'static str, &'static str)>,
    principal: Option<&'static str>,
}

impl Req {
    fn post(principal: Option<&'static str>) -> Self {
        Req {
            method: "POST",
            path: "/mcp",
            authority: "gw.example.com",
            port: 8443,
            headers: vec![],
            principal,
        }
    }
    fn http(&self) -> HttpRequest<'_> {
        HttpRequest {
            method: self.method,
            path: self.path,
            authority: self.authority,
            port: self.port,
            headers: &self.headers,
            principal: self.principal,
            server_name: None,
            auth: None,
            time_ms: 0,
        }
    }
}

fn decide(ev: &Evaluator, cluster: Option<&str>, req: &Req, m: McpMessage<'_>) -> Verdict {
    let body = McpBody::Single(m);
    ev.route(cluster)
        .decide(&req.http(), BodyInput::Mcp(&body))
        .verdict
}

fn allowed(ev: &Evaluator, req: &Req, m: McpMessage<'_>) -> bool {
    decide(ev, Some("backend"), req, m) == Verdict::Allow
}

const SA_A_GET_SUM: &str = r#"{"targetRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"gw"}],
  "action":"Allow","rules":[{"name":"r","source":{"type":"ServiceAccount","serviceAccount":{"name":"a"}},
  "authorization":{"type":"Inline","mcp":{"methods":[{"name":"tools/call","params":["get-sum"]}]}}}]}"#;

#[test]
fn no_policy_allows_everything_without_being_under_policy() {
    let ev = plan(vec![], vec![]);
    let route = ev.route(Some("backend"));
    assert!(!route.under_policy());
    assert!(allowed(&ev, &Req::post(None), call("anything")));
}

#[test]
fn service_account_source_and_tool_params() {
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    assert!(allowed(&ev, &Req::post(Some(A)), call("get-sum")));
    assert!(!allowed(&ev, &Req::post(Some(A)), call("echo")));
    assert!(!allowed(&ev, &Req::post(Some(B)), call("get-sum")));
    assert!(!allowed(&ev, &Req::post(None), call("get-sum")));
    // The same principal spelled in another case is another principal.
    assert!(!allowed(
        &ev,
        &Req::post(Some("spiffe://cluster.local/ns/default/sa/A")),
        call("get-sum")
    ));
    let d = ev.route(None).decide(
        &Req::post(Some(A)).http(),
        BodyInput::Mcp(&McpBody::Single(call("echo"))),
    );
    assert!(
        matches!(
            &d.verdict,
            Verdict::Deny(DenyReason::NoRuleMatched {
                level: Level::Gateway,
                policies: 1,
                ..
            })
        ),
        "{:?}",
        d.verdict
    );
    // The denial names what was asked and the policies (with their rules) that were considered.
    assert_eq!(
        d.summary(),
        "deny gateway: tools/call 'echo' matched no rule of default/p (r)",
    );
}

/// What a client chose (the tool's name, the method) is shown in a denial only escaped: it cannot
/// leave the access log's quoted field.
#[test]
fn a_denial_shows_the_clients_words_escaped() {
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    for (method, tool) in [
        ("tools/call", "x\" forged=\"1\nnext"),
        ("tools/call\u{1b}[31m", "get-sum"),
        ("tools/call", "ends\\"),
        ("tools/call", &"\\\"\u{2028}".repeat(100)),
    ] {
        let m = msg(method, Some("1"), Some(tool), None);
        let d = ev.route(None).decide(
            &Req::post(Some(A)).http(),
            BodyInput::Mcp(&McpBody::Single(m)),
        );
        let summary = d.summary();
        assert!(!d.allowed());
        assert!(
            toolgate_policy::log_safe::is_log_safe(&summary),
            "{method:?} {tool:?} -> {summary}"
        );
        assert!(summary.len() < 400, "bounded: {summary}");
    }
}

#[test]
fn spiffe_source_and_trust_domain() {
    let spiffe = SA_A_GET_SUM.replace(
        r#"{"type":"ServiceAccount","serviceAccount":{"name":"a"}}"#,
        r#"{"type":"SPIFFE","spiffe":"spiffe://example.org/agent"}"#,
    );
    let ev = plan(vec![policy("p", &spiffe)], vec![]);
    assert!(allowed(
        &ev,
        &Req::post(Some("spiffe://example.org/agent")),
        call("get-sum")
    ));
    assert!(!allowed(&ev, &Req::post(Some(A)), call("get-sum")));

    let spec = serde_yaml_like(SA_A_GET_SUM);
    let opts = CompileOptions {
        trust_domain: "corp.example".into(),
        ..CompileOptions::default()
    };
    let p = compile_policy("team", "p", &spec, &opts).unwrap();
    assert_eq!(
        p.rules[0].principal.as_deref(),
        Some("spiffe://corp.example/ns/team/sa/a")
    );
}

#[test]
fn source_whose_type_and_field_disagree_is_rejected_not_any_caller() {
    let cases = [
        (
            r#"{"type":"SPIFFE"}"#,
            "spiffe must be specified when type is set to 'SPIFFE'",
        ),
        (
            r#"{"type":"ServiceAccount"}"#,
            "serviceAccount must be specified when type is set to 'ServiceAccount'",
        ),
        (
            r#"{"spiffe":"spiffe://x/y"}"#,
            "type must be set when spiffe or serviceAccount is specified",
        ),
        (
            r#"{"type":"SPIFFE","serviceAccount":{"name":"a"}}"#,
            "spiffe must be specified when type is set to 'SPIFFE'",
        ),
        (
            r#"{"type":"SPIFFE","spiffe":"spiffe://x/y","serviceAccount":{"name":"a"}}"#,
            "only one of spiffe or serviceAccount may be specified",
        ),
    ];
    for (source, message) in cases {
        let json = format!(
            r#"{{"targetRefs":[],"action":"Allow","rules":[{{"name":"r","source":{source}}}]}}"#
        );
        let err = compile_policy(
            "default",
            "p",
            &serde_yaml_like(&json),
            &CompileOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            CompileError::Invalid {
                field: "spec.rules[0].source".into(),
                message: message.into()
            },
            "source {source}"
        );
    }
}

#[test]
fn base_protocol_match_and_skip() {
    let matching = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"base","source":{"type":"SPIFFE","spiffe":"spiffe://cluster.local/ns/default/sa/a"},
        "authorization":{"type":"Inline","mcp":{"mcpBaseProtocolMethodsOption":"MATCH_BASE_PROTOCOL_METHODS"}}}]}"#;
    let ev = plan(vec![policy("p", matching)], vec![]);
    for m in [
        "initialize",
        "ping",
        "tools/list",
        "notifications/initialized",
        "completion/complete",
        "logging/setLevel",
    ] {
        assert!(
            allowed(&ev, &Req::post(Some(A)), msg(m, Some("1"), None, None)),
            "{m}"
        );
        assert!(
            !allowed(&ev, &Req::post(Some(B)), msg(m, Some("1"), None, None)),
            "{m} for b"
        );
    }
    assert!(
        !allowed(&ev, &Req::post(Some(A)), call("get-sum")),
        "base only: no tools/call"
    );
    assert!(!allowed(
        &ev,
        &Req::post(Some(A)),
        msg("prompts/list", Some("1"), None, None)
    ));
    // A client-sent JSON-RPC response is a base-protocol message.
    let response = McpMessage {
        method: None,
        id: Some("4"),
        name: None,
        uri: None,
        subscriptions: vec![],
        protocol_version: None,
        params: None,
    };
    assert!(allowed(&ev, &Req::post(Some(A)), response.clone()));
    assert!(!allowed(&ev, &Req::post(Some(B)), response));

    // GET (SSE) and DELETE with a session are base protocol; DELETE without one is not.
    let route = ev.route(None);
    let mut get = Req::post(Some(A));
    get.method = "GET";
    assert!(route.decide(&get.http(), BodyInput::None).allowed());
    get.principal = Some(B);
    assert!(!route.decide(&get.http(), BodyInput::None).allowed());
    let mut delete = Req::post(Some(A));
    delete.method = "DELETE";
    assert!(!route.decide(&delete.http(), BodyInput::None).allowed());
    delete.headers.push(("mcp-session-id", "abc"));
    assert!(route.decide(&delete.http(), BodyInput::None).allowed());

    // SKIP with a methods list: initialize is not allowed.
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    assert!(!allowed(
        &ev,
        &Req::post(Some(A)),
        msg("initialize", Some("1"), None, None)
    ));
}

#[test]
fn levels_gateway_then_backend() {
    let allow = |tool: &str| {
        format!(
            r#"{{"targetRefs":[],"action":"Allow","rules":[{{"name":"r","authorization":{{"type":"Inline","mcp":{{"methods":[{{"name":"tools/call","params":["{tool}"]}}]}}}}}}]}}"#
        )
    };
    // Backend level only: applies to its cluster only.
    let ev = plan(
        vec![],
        vec![("backend", vec![policy("b", &allow("get-sum"))])],
    );
    assert!(allowed(&ev, &Req::post(None), call("get-sum")));
    assert!(!allowed(&ev, &Req::post(None), call("echo")));
    assert_eq!(
        decide(&ev, Some("other"), &Req::post(None), call("echo")),
        Verdict::Allow
    );
    assert_eq!(
        decide(&ev, None, &Req::post(None), call("echo")),
        Verdict::Allow
    );

    // Both: gateway allows echo, backend allows get-sum: both denied, at different levels.
    let ev = plan(
        vec![policy("g", &allow("echo"))],
        vec![("backend", vec![policy("b", &allow("get-sum"))])],
    );
    assert!(matches!(
        decide(&ev, Some("backend"), &Req::post(None), call("echo")),
        Verdict::Deny(DenyReason::NoRuleMatched {
            level: Level::Backend,
            policies: 1,
            ..
        })
    ));
    assert!(matches!(
        decide(&ev, Some("backend"), &Req::post(None), call("get-sum")),
        Verdict::Deny(DenyReason::NoRuleMatched {
            level: Level::Gateway,
            policies: 1,
            ..
        })
    ));
}

#[test]
fn allow_policies_are_ored_even_with_colliding_rule_names() {
    let allow = |tool: &str| {
        format!(
            r#"{{"targetRefs":[],"action":"Allow","rules":[{{"name":"same","authorization":{{"type":"Inline","mcp":{{"methods":[{{"name":"tools/call","params":["{tool}"]}}]}}}}}}]}}"#
        )
    };
    let ev = plan(
        vec![
            policy("one", &allow("get-sum")),
            policy("two", &allow("echo")),
        ],
        vec![],
    );
    let req = Req::post(None);
    assert!(allowed(&ev, &req, call("get-sum")));
    assert!(allowed(&ev, &req, call("echo")));
    assert!(!allowed(&ev, &req, call("get-env")));
    let body = McpBody::Single(call("echo"));
    let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&body));
    assert_eq!(d.gateway_rule.map(|r| r.policy), Some("default/two"));
}

#[test]
fn policy_without_rules_allows_everything_beside_others() {
    let empty = r#"{"targetRefs":[],"action":"Allow"}"#;
    let ev = plan(
        vec![policy("strict", SA_A_GET_SUM), policy("open", empty)],
        vec![],
    );
    assert!(allowed(&ev, &Req::post(None), call("anything")));
    let mut get = Req::post(None);
    get.method = "GET";
    assert!(ev
        .route(None)
        .decide(&get.http(), BodyInput::None)
        .allowed());
}

#[test]
fn categories_prompts_and_resources_params() {
    let spec = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"r","authorization":{"type":"Inline","mcp":{"methods":[
        {"name":"tools"},{"name":"prompts/get","params":["greeting"]},{"name":"resources/read","params":["memo://insights"]}]}}}]}"#;
    let ev = plan(vec![policy("p", spec)], vec![]);
    let req = Req::post(None);
    assert!(allowed(&ev, &req, call("anything")));
    assert!(allowed(&ev, &req, msg("tools/list", Some("1"), None, None)));
    assert!(allowed(
        &ev,
        &req,
        msg("prompts/get", Some("1"), Some("greeting"), None)
    ));
    assert!(!allowed(
        &ev,
        &req,
        msg("prompts/get", Some("1"), Some("other"), None)
    ));
    assert!(!allowed(
        &ev,
        &req,
        msg("prompts/list", Some("1"), None, None)
    ));
    assert!(allowed(
        &ev,
        &req,
        msg("resources/read", Some("1"), None, Some("memo://insights"))
    ));
    // resources compare params.uri, never params.name.
    assert!(!allowed(
        &ev,
        &req,
        msg("resources/read", Some("1"), Some("memo://insights"), None)
    ));
    assert!(!allowed(
        &ev,
        &req,
        msg(
            "resources/read",
            Some("1"),
            None,
            Some("file:///etc/passwd")
        )
    ));
    // "tools" is a category of the form tools/..., not a prefix of other names.
    assert!(!allowed(
        &ev,
        &req,
        msg("toolsx/call", Some("1"), None, None)
    ));
}

#[test]
fn http_matchers_are_enforced() {
    let spec = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"r","authorization":{"type":"Inline",
        "methods":["POST"],
        "paths":[{"type":"PathPrefix","value":"/mcp/"},{"type":"RegularExpression","value":"/v[0-9]+/mcp"}],
        "headers":[{"name":"X-Team","value":"blue"},{"type":"RegularExpression","name":"x-env","value":"prod|stage"}],
        "hosts":["*.example.com","exact.test"],
        "ports":[8443]}}]}"#;
    let ev = plan(vec![policy("p", spec)], vec![]);
    let ok = || {
        let mut r = Req::post(None);
        r.headers = vec![("x-team", "blue"), ("x-env", "prod")];
        r
    };
    let yes = |r: &Req| allowed(&ev, r, call("x"));
    assert!(yes(&ok()));
    let mut r = ok();
    r.path = "/mcp/sub?query=1";
    assert!(yes(&r));
    r.path = "/mcpx";
    assert!(!yes(&r), "prefix is element-wise");
    r.path = "/v2/mcp";
    assert!(yes(&r));
    r.path = "/v2/mcp/extra";
    assert!(!yes(&r), "regex must match the whole path");
    let mut r = ok();
    r.method = "PUT";
    assert!(!yes(&r));
    let mut r = ok();
    r.port = 8080;
    assert!(!yes(&r));
    let mut r = ok();
    r.headers.remove(0);
    assert!(!yes(&r), "all headers must match");
    let mut r = ok();
    r.headers[1].1 = "production";
    assert!(!yes(&r));
    let mut r = ok();
    r.authority = "a.b.EXAMPLE.com:8443";
    assert!(yes(&r));
    r.authority = "example.com";
    assert!(!yes(&r), "wildcard does not match the bare domain");
    r.authority = "exact.test";
    assert!(yes(&r));
    r.authority = "[::1]:8443";
    assert!(!yes(&r));
}

#[test]
fn not_mcp_bodies_only_pass_rules_without_mcp_constraints() {
    let open = r#"{"targetRefs":[],"action":"Allow","rules":[{"name":"r","authorization":{"type":"Inline","methods":["POST"]}}]}"#;
    let err = NotMcp::EmptyBody;
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    assert!(!ev
        .route(None)
        .decide(&Req::post(Some(A)).http(), BodyInput::NotMcp(&err))
        .allowed());
    let ev = plan(vec![policy("p", open)], vec![]);
    assert!(ev
        .route(None)
        .decide(&Req::post(Some(A)).http(), BodyInput::NotMcp(&err))
        .allowed());
}

#[test]
fn batch_is_allowed_only_when_every_element_is() {
    let ev = plan(vec![policy("p", SA_A_GET_SUM)], vec![]);
    let req = Req::post(Some(A));
    let ok = McpBody::Batch(vec![call("get-sum"), call("get-sum")]);
    assert!(ev
        .route(None)
        .decide(&req.http(), BodyInput::Mcp(&ok))
        .allowed());
    let mixed = McpBody::Batch(vec![call("get-sum"), call("echo")]);
    let d = ev.route(None).decide(&req.http(), BodyInput::Mcp(&mixed));
    assert!(!d.allowed());
    assert_eq!(d.message, Some(1));
    let reply = response::denial(BodyInput::Mcp(&mixed), &d, false);
    assert_eq!(reply.status, 403);
    assert!(reply.body.contains(r#""id":null"#));
}

#[test]
fn invalid_plans_are_refused_with_a_reason() {
    let mut p = CompiledPlan::empty("l");
    p.version = 99;
    assert!(Evaluator::load(&serde_json::to_vec(&p).unwrap())
        .unwrap_err()
        .to_string()
        .contains("version 99"));
    let p = CompiledPlan::empty("l").seal();
    let mut tampered = p.clone();
    tampered.listener = "other".into();
    assert!(matches!(
        Evaluator::load(&serde_json::to_vec(&tampered).unwrap()),
        Err(toolgate_policy::eval::PlanError::Hash { .. })
    ));
    assert!(Evaluator::load(b"{not json").is_err());
    assert!(Evaluator::load(br#"{"version":1,"listener":"l","gateway":{},"surprise":1}"#).is_err());
    let bad_regex = r#"{"version":1,"listener":"l","gateway":{"allow":[{"name":"ns/p","rules":[{"name":"r",
        "http":{"paths":[{"regex":"("}]}}]}]}}"#;
    let err = Evaluator::load(bad_regex.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ns/p") && err.contains("invalid regular expression"),
        "{err}"
    );
    let no_rules =
        r#"{"version":1,"listener":"l","gateway":{"allow":[{"name":"ns/p","rules":[]}]}}"#;
    assert!(Evaluator::load(no_rules.as_bytes()).is_err());
}

#[test]
fn cost_does_not_scan_unrelated_policies() {
    // 1,000 policies x 10 tools, each for its own caller: the right rule is found by lookup.
    let mut policies = Vec::new();
    for p in 0..1000 {
        let tools: Vec<String> = (0..10).map(|t| format!("\"tool-{p}-{t}\"")).collect();
        let spec = format!(
            r#"{{"targetRefs":[],"action":"Allow","rules":[{{"name":"r","source":{{"type":"ServiceAccount","serviceAccount":{{"name":"sa-{p}"}}}},
            "authorization":{{"type":"Inline","mcp":{{"methods":[{{"name":"tools/call","params":[{}]}}]}}}}}}]}}"#,
            tools.join(",")
        );
        policies.push(policy(&format!("p{p:04}"), &spec));
    }
    let ev = plan(policies, vec![]);
    let caller = "spiffe://cluster.local/ns/default/sa/sa-777";
    assert!(allowed(&ev, &Req::post(Some(caller)), call("tool-777-3")));
    assert!(!allowed(&ev, &Req::post(Some(caller)), call("tool-778-3")));
    let body = McpBody::Single(call("tool-777-9"));
    let d = ev
        .route(None)
        .decide(&Req::post(Some(caller)).http(), BodyInput::Mcp(&body));
    assert_eq!(d.gateway_rule.map(|r| r.policy), Some("default/p0777"));
}

#[test]
fn subscriptions_listen_is_judged_as_a_set() {
    // MATCH base protocol, and resources/subscribe of one URI.
    let rules = r#"{"targetRefs":[],"action":"Allow","rules":[
        {"name":"base","authorization":{"type":"Inline","mcp":{"mcpBaseProtocolMethodsOption":"MATCH_BASE_PROTOCOL_METHODS"}}},
        {"name":"memo","authorization":{"type":"Inline","mcp":{"methods":[{"name":"resources/subscribe","params":["memo://a"]}]}}}]}"#;
    let ev = plan(vec![policy("p", rules)], vec![]);
    let req = Req::post(None);
    let listen = |uris: &[&'static str]| {
        let mut m = msg("subscriptions/listen", Some("1"), None, None);
        m.subscriptions = uris.iter().map(|u| Cow::Borrowed(*u)).collect();
        m
    };
    assert!(allowed(
        &ev,
        &req,
        msg("server/discover", Some("1"), None, None)
    ));
    assert!(allowed(&ev, &req, listen(&[])), "list changes only: base");
    assert!(allowed(&ev, &req, listen(&["memo://a"])));
    assert!(!allowed(&ev, &req, listen(&["memo://b"])));
    assert!(
        !allowed(&ev, &req, listen(&["memo://a", "memo://b"])),
        "one forbidden URI denies the whole listen"
    );
}

#[path = "eval/headers.rs"]
mod headers;
#[path = "eval/replies.rs"]
mod replies;

/// MCP's tasks (docs/semantics.md §3): base protocol, and nameable one by one or as the `tasks`
/// category by a rule without MATCH_BASE_PROTOCOL_METHODS.
#[test]
fn task_methods_are_base_protocol_and_nameable() {
    let with = |methods: &str| {
        format!(
            r#"{{"targetRefs":[],"action":"Allow","rules":[{{"name":"r",
            "authorization":{{"type":"Inline","mcp":{{{methods}}}}}}}]}}"#
        )
    };
    let task = |method| msg(method, Some("1"), None, None);
    let tasks = ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];
    let calls_only = plan(
        vec![policy(
            "p",
            &with(r#""methods":[{"name":"tools/call","params":["get-sum"]}]"#),
        )],
        vec![],
    );
    let base = plan(
        vec![policy(
            "p",
            &with(r#""mcpBaseProtocolMethodsOption":"MATCH_BASE_PROTOCOL_METHODS""#),
        )],
        vec![],
    );
    let category = plan(
        vec![policy("p", &with(r#""methods":[{"name":"tasks"}]"#))],
        vec![],
    );
    let result_only = plan(
        vec![policy("p", &with(r#""methods":[{"name":"tasks/result"}]"#))],
        vec![],
    );
    for method in tasks {
        let req = Req::post(None);
        assert!(
            !allowed(&calls_only, &req, task(method)),
            "{method}: not named"
        );
        assert!(
            allowed(&base, &req, task(method)),
            "{method}: base protocol"
        );
        assert!(
            allowed(&category, &req, task(method)),
            "{method}: the category"
        );
        assert_eq!(
            allowed(&result_only, &req, task(method)),
            method == "tasks/result",
            "{method}: named alone"
        );
    }
    assert!(!allowed(&category, &Req::post(None), call("get-sum")));
}
