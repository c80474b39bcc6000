//! Structured plans: an arbitrary plan built from the plan's own shape (every level, rule, matcher
//! and authorizer kind, names and patterns from small vocabularies mixed with arbitrary text), as
//! the filter receives it (JSON), then arbitrary requests against it. Loading either refuses with
//! an error or gives an evaluator; deciding never panics; the decision is the same after a round
//! trip of the plan through its serialisation; the walk `explain` records (`Route::decide_recorded`)
//! decides the same as the filter's, on the enforced route and on the shadow route, and its record
//! shows that decision rule by rule (`assert_explain_agrees`).
#![no_main]

use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{assert_explain_agrees, Request, CLUSTER, SA_A, SA_B};
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};
use toolgate_policy::mcp::{read_body, ReadOptions};
use toolgate_policy::plan::{
    AuthorizerPlan, AuthorizerProtocol, CompiledPlan, ExternalAuthPlan, HeaderMatch, HostMatch,
    HttpMatch, LevelPlan, McpMatch, McpMethodMatch, MethodPattern, PathMatch, PlanSettings,
    PolicyPlan, RulePlan, ValueMatch, PLAN_VERSION,
};

fn pick(u: &mut Unstructured<'_>, vocab: &[&str]) -> arbitrary::Result<String> {
    Ok(if u.ratio(6, 8)? {
        (*u.choose(vocab)?).to_string()
    } else {
        String::arbitrary(u)?
    })
}

fn list<T>(
    u: &mut Unstructured<'_>,
    max: usize,
    f: impl Fn(&mut Unstructured<'_>) -> arbitrary::Result<T>,
) -> arbitrary::Result<Vec<T>> {
    (0..u.int_in_range(0..=max)?).map(|_| f(u)).collect()
}

const TEXT: [&str; 8] = [
    "get-sum",
    "echo",
    "file:///public/readme",
    "blue",
    "",
    "/mcp",
    "tools",
    "a.b",
];
const REGEX: [&str; 8] = [
    "/mcp/t[0-9]+",
    "prod-\\d+",
    "a)|(b",
    "(a|b)*c",
    "x{2,1001}",
    ".*",
    "[[:alpha:]]+",
    "\\pL",
];
const METHODS: [&str; 8] = [
    "tools/call",
    "tools/list",
    "resources/read",
    "prompts/get",
    "subscriptions/listen",
    "initialize",
    "tools",
    "resources",
];
const CEL: [&str; 8] = [
    "request.mcp.tool_name == 'get-sum'",
    "request.mcp.params.arguments.a < 10",
    "request.headers['x-team'] == 'blue'",
    "request.time.getFullYear() >= 2025",
    "request.mcp.tool_name.matches('^get-(sum|env)$')",
    "[1,2,3].all(x, x > 0)",
    "source.principal.startsWith('spiffe://')",
    "request.url_path.size() > 1 ? true : false",
];

fn value(u: &mut Unstructured<'_>) -> arbitrary::Result<ValueMatch> {
    Ok(if u.arbitrary()? {
        ValueMatch::Exact(pick(u, &TEXT)?)
    } else {
        ValueMatch::Regex(pick(u, &REGEX)?)
    })
}

fn http(u: &mut Unstructured<'_>) -> arbitrary::Result<HttpMatch> {
    Ok(HttpMatch {
        methods: list(u, 2, |u| pick(u, &["POST", "GET", "DELETE"]))?,
        paths: list(u, 2, |u| {
            Ok(match u.int_in_range(0..=2)? {
                0 => PathMatch::Exact(pick(u, &["/mcp", "/mcp/public"])?),
                1 => PathMatch::Prefix(pick(u, &["/mcp", "/mcp/public", "/"])?),
                _ => PathMatch::Regex(pick(u, &REGEX)?),
            })
        })?,
        headers: list(u, 2, |u| {
            Ok(HeaderMatch {
                name: pick(u, &["x-team", "x-env", "mcp-name", "X-Team"])?,
                value: value(u)?,
            })
        })?,
        hosts: list(u, 2, |u| {
            Ok(if u.arbitrary()? {
                HostMatch::Exact(pick(u, &["api.example.com", "gw"])?)
            } else {
                HostMatch::Suffix(pick(u, &[".example.org", ".com"])?)
            })
        })?,
        server_names: list(u, 1, |u| {
            Ok(if u.arbitrary()? {
                HostMatch::Exact(pick(u, &["gw", "a.example.com"])?)
            } else {
                HostMatch::Suffix(".com".into())
            })
        })?,
        ports: list(u, 2, |u| u.arbitrary())?,
    })
}

fn rule(u: &mut Unstructured<'_>) -> arbitrary::Result<RulePlan> {
    let mcp = if u.arbitrary()? {
        Some(McpMatch {
            base_protocol: u.arbitrary()?,
            methods: list(u, 3, |u| {
                let m = pick(u, &METHODS)?;
                Ok(McpMethodMatch {
                    method: if u.arbitrary()? {
                        MethodPattern::Exact(m)
                    } else {
                        MethodPattern::Category(m)
                    },
                    params: list(u, 2, |u| pick(u, &TEXT))?,
                })
            })?,
        })
    } else {
        None
    };
    Ok(RulePlan {
        name: pick(u, &["r", "s", ""])?,
        principal: if u.arbitrary()? {
            Some(pick(u, &[SA_A, SA_B])?)
        } else {
            None
        },
        http: if u.arbitrary()? {
            http(u)?
        } else {
            HttpMatch::default()
        },
        cel: if u.ratio(1, 6)? {
            Some(pick(u, &CEL)?)
        } else {
            None
        },
        mcp,
    })
}

fn level(u: &mut Unstructured<'_>) -> arbitrary::Result<LevelPlan> {
    let external_auth = if u.ratio(1, 4)? {
        Some(ExternalAuthPlan {
            policy: pick(u, &["default/ea"])?,
            rules: list(u, 2, rule)?,
            authorizer: AuthorizerPlan {
                cluster: pick(u, &["authz/default/a/9000"])?,
                authority: pick(u, &["a.default.svc"])?,
                protocol: if u.arbitrary()? {
                    AuthorizerProtocol::Grpc
                } else {
                    AuthorizerProtocol::Http {
                        path_prefix: pick(u, &["", "/check"])?,
                        allowed_response_headers: list(u, 2, |u| pick(u, &["x-user"]))?,
                    }
                },
                allowed_headers: list(u, 2, |u| pick(u, &["x-team", "authorization"]))?,
                forward_body_bytes: u.int_in_range(0..=8192)?,
            },
            dry_run: u.ratio(1, 4)?,
        })
    } else {
        None
    };
    Ok(LevelPlan {
        external_auth,
        allow: list(u, 3, |u| {
            Ok(PolicyPlan {
                name: pick(u, &["default/p", "default/q"])?,
                rules: list(u, 3, rule)?,
                dry_run: u.ratio(1, 4)?,
            })
        })?,
    })
}

fn plan(u: &mut Unstructured<'_>) -> arbitrary::Result<CompiledPlan> {
    let mut backends = BTreeMap::new();
    for _ in 0..u.int_in_range(0..=2)? {
        backends.insert(pick(u, &[CLUSTER, "other"])?, level(u)?);
    }
    Ok(CompiledPlan {
        version: if u.ratio(1, 16)? {
            u.arbitrary()?
        } else {
            PLAN_VERSION
        },
        hash: String::new(),
        listener: pick(u, &["default/gw/http"])?,
        settings: PlanSettings {
            max_body_bytes: if u.ratio(1, 8)? { u.arbitrary()? } else { 4096 },
            debug_reasons: u.arbitrary()?,
            authz_timeout_ms: u.arbitrary()?,
            pause_headers: u.arbitrary()?,
            list_filtering: u.arbitrary()?,
            default_deny: u.ratio(1, 4)?,
            default_deny_except_hosts: Vec::new(),
            default_deny_except_server_names: Vec::new(),
            unverified_client_certificates: u.ratio(1, 8)?,
        },
        gateway: level(u)?,
        backends,
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(p) = plan(&mut u) else { return };
    let sealed = p.seal();
    let json = serde_json::to_vec(&sealed).expect("a plan serialises");
    let Ok(ev) = Evaluator::load(&json) else {
        return;
    };
    let pretty = serde_json::to_vec_pretty(&sealed).unwrap();
    let again = Evaluator::load(&pretty).expect("the same plan, pretty-printed, loads");
    let Ok(r) = Request::from_bytes(u.take_rest()) else {
        return;
    };
    let read = read_body(
        r.body,
        ReadOptions {
            capture_params: true,
        },
    );
    let body = match &read {
        Ok(b) => BodyInput::Mcp(b),
        Err(e) => BodyInput::NotMcp(e),
    };
    let req = HttpRequest {
        method: r.method,
        path: r.path,
        authority: r.authority,
        port: r.port,
        headers: &r.headers,
        principal: r.principal,
        server_name: None,
        auth: None,
        time_ms: 1_790_000_000_000,
    };
    let cluster = r.backend.then_some(CLUSTER);
    let d = ev.route(cluster).decide(&req, body);
    let d2 = again.route(cluster).decide(&req, body);
    assert_eq!(d.verdict, d2.verdict);
    assert_eq!(
        assert_explain_agrees(&ev.route(cluster), &req, body),
        d.allowed()
    );
    if let Some(shadow) = ev.shadow_route(cluster) {
        assert_explain_agrees(&shadow, &req, body);
    }
});
