//! Rollout (docs/semantics.md §6a), driven by the fake host: dry-run policies decide a shadow
//! decision that the access log and counters report and that never changes what happens to a
//! request; deny-by-default denies what is not the base protocol on routes without policy.

use super::*;
use crate::testing::FIRST_TOKEN;

const DRY: &str = "default/dry";

fn dry(mut level: LevelPlan) -> LevelPlan {
    for p in &mut level.allow {
        p.dry_run = true;
        p.name = DRY.into();
    }
    if let Some(ea) = &mut level.external_auth {
        ea.dry_run = true;
    }
    level
}

fn plan_plugin(plan: CompiledPlan) -> Plugin {
    let mut p = Plugin::default();
    assert!(p.configure(
        &mut FakeRoot::default(),
        &serde_json::to_vec(&plan.seal()).unwrap()
    ));
    p
}

fn with_levels(gateway: LevelPlan, backend: Option<LevelPlan>, default_deny: bool) -> CompiledPlan {
    let mut plan = CompiledPlan::empty("default/gw/http");
    plan.settings.default_deny = default_deny;
    plan.gateway = gateway;
    if let Some(b) = backend {
        plan.backends.insert(CLUSTER.into(), b);
    }
    plan
}

#[test]
fn a_dry_run_policy_that_would_deny_only_reports_it() {
    // Dry run: only get-sum. Nothing enforced.
    let p = plan_plugin(with_levels(
        dry(allow_level(vec![tools_rule("sum", None, &["get-sum"])])),
        None,
        false,
    ));
    let mut host = post(&call(1, "echo"));
    let (_, action) = send(&p, &mut host);
    assert_eq!(action, Action::Continue);
    assert!(host.replies.is_empty());
    assert_eq!(
        host.counts,
        vec![Counter::ShadowDeny, Counter::AllowNoPolicy]
    );
    assert_eq!(
        host.records,
        vec!["allow (no policy) shadow=deny gateway: tools/call 'echo' matched no rule of default/dry (sum) dry-run=default/dry"]
    );
    // What the dry-run policy allows: nothing to report.
    let mut host = post(&call(2, "get-sum"));
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::AllowNoPolicy]);
    assert_eq!(host.records, vec!["allow (no policy)"]);
    // Requests that are not read for an enforced policy are read for the shadow: a GET (base
    // protocol) is denied by a rule without MATCH_BASE_PROTOCOL_METHODS, and passes.
    let mut host = get();
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Continue
    );
    assert_eq!(
        host.counts,
        vec![Counter::ShadowDeny, Counter::AllowNoPolicy]
    );
}

#[test]
fn removing_dry_run_enforces_the_same_policy() {
    let mut plan = with_levels(
        dry(allow_level(vec![tools_rule("sum", None, &["get-sum"])])),
        None,
        false,
    );
    plan.gateway.allow[0].dry_run = false;
    let p = plan_plugin(plan);
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(
        host.reply(),
        (200, format!(r#"{{"jsonrpc":"2.0","id":1,{FORBIDDEN}}}"#))
    );
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
    assert_eq!(
        host.records,
        vec!["deny gateway: tools/call 'echo' matched no rule of default/dry (sum)"]
    );
}

#[test]
fn a_dry_run_policy_beside_an_enforced_one() {
    // Gateway: enforced echo; dry run get-sum. Backend: dry run, nothing but get-env.
    let mut gateway = allow_level(vec![tools_rule("echo", None, &["echo"])]);
    gateway
        .allow
        .extend(dry(allow_level(vec![tools_rule("sum", None, &["get-sum"])])).allow);
    let p = plan_plugin(with_levels(
        gateway,
        Some(dry(allow_level(vec![tools_rule(
            "env",
            None,
            &["get-env"],
        )]))),
        false,
    ));
    // Enforced: denied; shadow: the dry-run rule allows at the gateway, and the backend's denies.
    let mut host = post(&call(1, "get-sum"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(host.counts, vec![Counter::DenyGateway]);
    assert_eq!(
        host.records,
        vec!["deny gateway: tools/call 'get-sum' matched no rule of default/allow (echo)"]
    );
    // Off the backend route, the shadow allows what the enforced level denies.
    let mut host = Fake::post(call(2, "get-sum").as_bytes(), None);
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(
        host.counts,
        vec![Counter::ShadowAllow, Counter::DenyGateway]
    );
    assert_eq!(
        host.records,
        vec![
            "deny gateway: tools/call 'get-sum' matched no rule of default/allow (echo) shadow=allow gateway=default/dry:sum backend=- dry-run=default/dry"
        ]
    );
    assert_eq!(host.reply().0, 200);
    // Enforced allows echo; the backend's dry run would deny it.
    let mut host = post(&call(3, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::ShadowDeny, Counter::Allow]);
    assert_eq!(
        host.records,
        vec!["allow gateway=default/allow:echo backend=- shadow=deny backend: tools/call 'echo' matched no rule of default/dry (env) dry-run=default/dry"]
    );
}

#[test]
fn a_dry_run_authorizer_is_asked_and_only_its_answer_is_shadowed() {
    let backend = LevelPlan {
        external_auth: ea(vec![any_rule()], grpc_authorizer()),
        allow: vec![],
    };
    let p = plan_plugin(with_levels(LevelPlan::default(), Some(dry(backend)), false));
    let mut host = post(&call(1, "echo"));
    let (mut r, action) = send(&p, &mut host);
    assert_eq!((action, host.calls.len()), (Action::Pause, 1));
    r.on_call_answer(&mut host, FIRST_TOKEN, grpc_denied(Some(403), &[], "no"));
    assert_eq!(host.resumed, 1);
    assert!(host.replies.is_empty());
    assert_eq!(
        host.counts,
        vec![
            Counter::AuthzDeny,
            Counter::ShadowDeny,
            Counter::AllowNoPolicy
        ]
    );
    assert_eq!(
        host.records,
        vec!["allow (no policy) shadow=deny backend: the authorizer of default/ea denied (HTTP 403) dry-run=default/ea"]
    );
    // It allows: its header changes are not made, and nothing is reported.
    let mut host = post(&call(2, "echo"));
    let (mut r, _) = send(&p, &mut host);
    r.on_call_answer(&mut host, FIRST_TOKEN, grpc_ok(&[("x-user", "alice")]));
    assert_eq!((host.resumed, host.edits.len()), (1, 0));
    assert_eq!(
        host.counts,
        vec![Counter::AuthzAllow, Counter::AllowNoPolicy]
    );
}

#[test]
fn the_shadow_walk_reuses_the_enforced_authorizers_answers() {
    // Gateway: enforced ExternalAuth. Backend: dry-run ExternalAuth.
    let gateway = LevelPlan {
        external_auth: ea(vec![any_rule()], grpc_authorizer()),
        allow: vec![],
    };
    let mut backend = dry(LevelPlan {
        external_auth: ea(vec![any_rule()], http_authorizer()),
        allow: vec![],
    });
    if let Some(ea) = &mut backend.external_auth {
        ea.policy = "default/ea2".into();
    }
    let p = plan_plugin(with_levels(gateway, Some(backend), false));
    let mut host = post(&call(1, "echo"));
    let (mut r, _) = send(&p, &mut host);
    r.on_call_answer(&mut host, FIRST_TOKEN, grpc_ok(&[("x-user", "alice")]));
    // The enforced decision is allow; the shadow asks the dry-run authorizer (the gateway's answer is reused).
    assert_eq!(host.calls.len(), 2);
    assert!(matches!(host.calls[1], Made::Http { .. }));
    assert_eq!(
        host.edits.len(),
        2,
        "the enforced authorizer's changes: {:?}",
        host.edits
    );
    r.on_call_answer(&mut host, FIRST_TOKEN + 1, CallAnswer::Failed);
    assert_eq!(host.resumed, 1);
    assert_eq!(host.calls.len(), 2);
    assert!(host.records[0].starts_with("allow gateway=- backend=- authorized-by=default/ea shadow=deny backend: the authorizer of default/ea2 could not be reached"),
        "{:?}", host.records);
    // The enforced authorizer denies: the shadow denies too (no second call), nothing reported.
    let mut host = post(&call(2, "echo"));
    let (mut r, _) = send(&p, &mut host);
    r.on_call_answer(&mut host, FIRST_TOKEN, grpc_denied(Some(403), &[], "no"));
    assert_eq!(host.calls.len(), 1);
    assert_eq!(host.counts, vec![Counter::AuthzDeny, Counter::DenyGateway]);
    assert_eq!(host.reply().0, 200);
}

#[test]
fn lists_are_filtered_by_enforced_policies_only() {
    let mut rule = tools_rule("sum", None, &["get-sum"]);
    rule.mcp.as_mut().unwrap().base_protocol = true;
    let p = plan_plugin(with_levels(dry(allow_level(vec![rule])), None, false));
    let mut host = post(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let (r, action) = send(&p, &mut host);
    assert_eq!(action, Action::Continue);
    assert!(
        matches!(r.state, State::Done),
        "the list response is not looked at"
    );
}

// ---- deny by default ---------------------------------------------------------------------------

#[test]
fn deny_by_default_passes_only_the_base_protocol_where_no_policy_applies() {
    // A policy on the backend CLUSTER; none on the gateway.
    let p = plan_plugin(with_levels(
        LevelPlan::default(),
        Some(allow_level(vec![tools_rule("echo", None, &["echo"])])),
        true,
    ));
    // Off CLUSTER: no policy applies.
    let off = |body: &str| Fake::post(body.as_bytes(), Some("service/default/other/80"));
    for tool in [
        call(1, "echo"),
        r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}"#.into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}"#.into(),
        r#"{"jsonrpc":"2.0","id":1,"method":"x/custom"}"#.into(),
    ] {
        let mut host = off(&tool);
        assert_eq!(send(&p, &mut host).1, Action::Pause, "{tool}");
        // A method MCP does not define is "not found" (docs/semantics.md §5), the others forbidden.
        let error = if tool.contains("x/custom") {
            r#""error":{"code":-32601,"message":"Method not found"}"#.to_string()
        } else {
            FORBIDDEN.to_string()
        };
        assert_eq!(
            host.reply(),
            (200, format!(r#"{{"jsonrpc":"2.0","id":1,{error}}}"#))
        );
        assert_eq!(host.counts, vec![Counter::DenyDefault]);
        assert_eq!(host.records, vec!["deny: no policy (default deny)"]);
    }
    for base in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    ] {
        let mut host = off(base);
        assert_eq!(send(&p, &mut host).1, Action::Continue, "{base}");
        assert_eq!(host.counts, vec![Counter::Allow]);
        assert_eq!(
            host.records,
            vec![format!(
                "allow gateway={}:(base protocol) backend=-",
                crate::eval::DEFAULT_DENY_POLICY
            )]
        );
    }
    let mut host = Fake::get(None);
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Continue
    );
    // Not MCP: a plain 403.
    let mut host = off("not json");
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(
        host.reply(),
        (403, format!(r#"{{"jsonrpc":"2.0","id":null,{FORBIDDEN}}}"#))
    );
    let mut host = Fake::get(None);
    host.headers[0].1 = "PUT".into();
    assert_eq!(
        p.request().on_request_headers(&mut host, true),
        Action::Pause
    );
    assert_eq!(host.reply().0, 403);
    assert_eq!(host.records, vec!["deny: no policy (default deny)"]);
    // On CLUSTER, the policy decides as without the setting.
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(
        host.records,
        vec!["allow gateway=- backend=default/allow:echo"]
    );
    let mut host = post(&call(1, "get-sum"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(
        host.records,
        vec!["deny backend: tools/call 'get-sum' matched no rule of default/allow (echo)"]
    );
}

#[test]
fn deny_by_default_filters_lists_to_empty() {
    let p = plan_plugin(with_levels(LevelPlan::default(), None, true));
    let mut host = post(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let (mut r, action) = send(&p, &mut host);
    assert_eq!(action, Action::Continue);
    host.response_headers = pairs(&[(":status", "200"), ("content-type", "application/json")]);
    assert_eq!(r.on_response_headers(&mut host, false), Action::Continue);
    host.response_body =
        br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"echo","inputSchema":{}}]}}"#
            .to_vec();
    let size = host.response_body.len();
    r.on_response_body(&mut host, size, true);
    assert_eq!(
        String::from_utf8(host.response_body.clone()).unwrap(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#
    );
}

#[test]
fn dry_run_policies_on_a_default_deny_route_do_not_lift_the_default() {
    let p = plan_plugin(with_levels(
        dry(allow_level(vec![tools_rule("echo", None, &["echo"])])),
        None,
        true,
    ));
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    assert_eq!(
        host.counts,
        vec![Counter::ShadowAllow, Counter::DenyDefault]
    );
    assert_eq!(
        host.records,
        vec!["deny: no policy (default deny) shadow=allow gateway=default/dry:echo backend=- dry-run=default/dry"]
    );
}

#[test]
fn plans_without_the_new_fields_keep_their_shape() {
    let plan = with_levels(allow_level(vec![any_rule()]), None, false).seal();
    let json = serde_json::to_string(&plan).unwrap();
    assert!(
        !json.contains("dryRun") && !json.contains("defaultDeny"),
        "{json}"
    );
    let mut both = plan.clone();
    both.settings.default_deny = true;
    both.gateway.allow[0].dry_run = true;
    let json = serde_json::to_string(&both.seal()).unwrap();
    assert!(
        json.contains(r#""defaultDeny":true"#) && json.contains(r#""dryRun":true"#),
        "{json}"
    );
}

// ---- the evaluator ------------------------------------------------------------------------------

#[test]
fn the_shadow_route_exists_only_where_a_dry_run_policy_applies() {
    use crate::eval::{Evaluator, HttpRequest};
    let enforced = with_levels(
        allow_level(vec![tools_rule("echo", None, &["echo"])]),
        None,
        false,
    );
    let ev = Evaluator::from_plan(enforced.clone()).unwrap();
    assert!(
        !ev.has_dry_run()
            && ev.shadow_route(Some(CLUSTER)).is_none()
            && ev.shadow_route(None).is_none()
    );
    // A dry-run policy on the backend: a shadow route for CLUSTER only.
    let mut plan = enforced;
    plan.backends.insert(
        CLUSTER.into(),
        dry(allow_level(vec![tools_rule("sum", None, &["get-sum"])])),
    );
    let ev = Evaluator::from_plan(plan).unwrap();
    assert!(ev.has_dry_run() && ev.shadow_route(None).is_none());
    let shadow = ev.shadow_route(Some(CLUSTER)).unwrap();
    assert!(shadow.is_shadow() && !ev.route(Some(CLUSTER)).is_shadow());
    assert_eq!(shadow.dry_run_policies(), vec![DRY]);
    let body = call(1, "echo");
    let mcp = crate::mcp::read_body(body.as_bytes(), crate::mcp::ReadOptions::default()).unwrap();
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        authority: "gw",
        port: 80,
        headers: &[],
        principal: None,
        server_name: None,
        auth: None,
        time_ms: 0,
    };
    // The enforced route does not see the dry-run policy; the shadow route does (explain too).
    assert!(ev
        .route(Some(CLUSTER))
        .decide(&req, BodyInput::Mcp(&mcp))
        .allowed());
    assert_eq!(
        explain(&ev.route(Some(CLUSTER)), &req, BodyInput::Mcp(&mcp))[0]
            .levels
            .len(),
        1
    );
    assert!(!shadow.decide(&req, BodyInput::Mcp(&mcp)).allowed());
    let explained = explain(&shadow, &req, BodyInput::Mcp(&mcp));
    assert_eq!(explained[0].levels.len(), 2);
    assert_eq!(explained[0].levels[1].rules[0].policy, DRY);
}

/// What `toolgate explain` shows of a request: the record of the walk that decided it.
fn explain(
    route: &crate::eval::Route<'_>,
    req: &crate::eval::HttpRequest<'_>,
    body: BodyInput<'_, '_>,
) -> Vec<crate::eval::MessageRecord> {
    let mut record = crate::eval::Record::default();
    route.decide_recorded(req, body, &mut record);
    record
        .last()
        .map(|w| w.messages.clone())
        .unwrap_or_default()
}

#[test]
fn explain_shows_the_default_deny_level() {
    use crate::eval::{Evaluator, HttpRequest, DEFAULT_DENY_POLICY};
    let ev = Evaluator::from_plan(with_levels(LevelPlan::default(), None, true)).unwrap();
    let route = ev.route(None);
    assert!(route.under_policy() && route.is_default_deny());
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        authority: "gw",
        port: 80,
        headers: &[],
        principal: None,
        server_name: None,
        auth: None,
        time_ms: 0,
    };
    let body = call(1, "echo");
    let mcp = crate::mcp::read_body(body.as_bytes(), crate::mcp::ReadOptions::default()).unwrap();
    let d = route.decide(&req, BodyInput::Mcp(&mcp));
    assert_eq!(d.summary(), "deny: no policy (default deny)");
    let explained = explain(&route, &req, BodyInput::Mcp(&mcp));
    let rule = &explained[0].levels[0].rules[0];
    assert_eq!(
        (rule.policy.as_str(), rule.rule.as_str()),
        (DEFAULT_DENY_POLICY, "(base protocol)")
    );
    assert!(rule.outcome.is_err());
    // Plans without the setting: no policy, no default deny.
    let ev = Evaluator::from_plan(with_levels(LevelPlan::default(), None, false)).unwrap();
    assert!(!ev.route(None).under_policy() && !ev.route(None).is_default_deny());
}

#[test]
fn another_listeners_host_passes_a_default_deny_route() {
    let mut plan = with_levels(LevelPlan::default(), None, true);
    plan.settings.default_deny_except_hosts =
        vec![crate::plan::HostMatch::Exact("other.example.com".into())];
    let p = plan_plugin(plan);
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    let mut host = post(&call(1, "echo"));
    host.headers
        .iter_mut()
        .find(|(k, _)| k == ":authority")
        .unwrap()
        .1 = "Other.Example.com:443".into();
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::AllowNoPolicy]);
}

#[test]
fn another_listeners_server_name_passes_a_default_deny_route_whatever_the_host() {
    let mut plan = with_levels(LevelPlan::default(), None, true);
    plan.settings.default_deny_except_server_names =
        vec![crate::plan::HostMatch::Suffix(".other.example.com".into())];
    let p = plan_plugin(plan);
    // The Host names the other listener, the TLS server name does not: this listener's request.
    let mut host = post(&call(1, "echo"));
    host.headers
        .iter_mut()
        .find(|(k, _)| k == ":authority")
        .unwrap()
        .1 = "a.other.example.com".into();
    host.server_name = Some("gw.example.com".into());
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    // No server name (no TLS): denied by default too.
    let mut host = post(&call(1, "echo"));
    assert_eq!(send(&p, &mut host).1, Action::Pause);
    let mut host = post(&call(1, "echo"));
    host.server_name = Some("A.Other.Example.com".into());
    assert_eq!(send(&p, &mut host).1, Action::Continue);
    assert_eq!(host.counts, vec![Counter::AllowNoPolicy]);
}
