//! The request lifecycle end to end over the fake host (`toolgate_policy::testing`), natively: what
//! Toolgate's code does inside the Wasm VM for one request of `make bench`, without the VM.
//!
//! - `c`: (c)'s request under (c)'s plan (bench/workload.py `policies_c`: one gateway-level Allow policy, two rules
//!   for agent-a with 10 tools each): headers, the 300 B tools/call body, allowed, response headers.
//! - `ea`: the same request under (g1)'s plan ((c)'s plus a gateway-level `action: ExternalAuth`
//!   policy without rules, gRPC authorizer): headers, body, the Check call dispatched, its OK answer
//!   (what toolgate-test-authz answers: status OK, an empty `ok_response`) delivered, resumed,
//!   allowed, response headers.
//!
//! Runs:
//!   cargo bench -p toolgate-policy --features test-host --bench lifecycle
//!       times both kinds (ns per request).
//!   target/release/deps/lifecycle-* count N [c|ea]
//!       runs N requests of one kind (both if none) and nothing else: instructions per request under
//!       callgrind are (Ir at N) − (Ir at 0), divided by N, e.g.
//!       valgrind --tool=callgrind --toggle-collect='lifecycle::run_*' BIN count 1000 ea
//!   (`--toggle-collect` counts only the requests, host fake included; the fake's share is the
//!   inclusive cost of `<toolgate_policy::testing::FakeHost as ...>` in callgrind_annotate).

use std::hint::black_box;
use std::time::Instant;

use prost::Message;
use toolgate_ext_authz_proto::envoy::service::auth::v3::{
    check_response::HttpResponse, CheckResponse, OkHttpResponse,
};
use toolgate_ext_authz_proto::google::rpc::Status;
use toolgate_policy::lifecycle::{Action, CallAnswer, Plugin};
use toolgate_policy::testing::{pairs, FakeHost, Made};

/// (c)'s plan as `toolgate render` writes it (bench/workload.py `policies_c`).
const PLAN_C: &str = r#"{"version":1,"hash":"d9a103cf807f89ae5943f2f3e496fa8b931760465839271b5187c31167587b5f","listener":"default/bench-gateway/https","settings":{"maxBodyBytes":1048576,"debugReasons":false,"authzTimeoutMs":5000,"pauseHeaders":true},"gateway":{"allow":[{"name":"default/agents","rules":[{"name":"r0","principal":"spiffe://cluster.local/ns/default/sa/a","mcp":{"baseProtocol":false,"methods":[{"method":{"exact":"tools/call"},"params":["tool-00000","tool-00001","tool-00002","tool-00003","tool-00004","tool-00005","tool-00006","tool-00007","tool-00008","tool-00009"]}]}},{"name":"r1","principal":"spiffe://cluster.local/ns/default/sa/a","mcp":{"baseProtocol":false,"methods":[{"method":{"exact":"tools/call"},"params":["tool-00010","tool-00011","tool-00012","tool-00013","tool-00014","tool-00015","tool-00016","tool-00017","tool-00018","tool-00019"]}]}}]}]},"backends":{}}"#;

/// (g1)'s plan as `toolgate render` writes it (bench/workload.py `policies_g1`).
const PLAN_G1: &str = r#"{"version":1,"hash":"e8aa6caf30093ba87a32f84b558d99a03bf185cf280c2c96dad1487a677f2155","listener":"default/bench-gateway/https","settings":{"maxBodyBytes":1048576,"debugReasons":false,"authzTimeoutMs":5000,"pauseHeaders":true},"gateway":{"externalAuth":{"policy":"default/tools-authz","rules":[{"name":"(all requests)"}],"authorizer":{"cluster":"authz/default/authz/9000","authority":"authz.default.svc.cluster.local","protocol":"grpc"}},"allow":[{"name":"default/agents","rules":[{"name":"r0","principal":"spiffe://cluster.local/ns/default/sa/a","mcp":{"baseProtocol":false,"methods":[{"method":{"exact":"tools/call"},"params":["tool-00000","tool-00001","tool-00002","tool-00003","tool-00004","tool-00005","tool-00006","tool-00007","tool-00008","tool-00009"]}]}},{"name":"r1","principal":"spiffe://cluster.local/ns/default/sa/a","mcp":{"baseProtocol":false,"methods":[{"method":{"exact":"tools/call"},"params":["tool-00010","tool-00011","tool-00012","tool-00013","tool-00014","tool-00015","tool-00016","tool-00017","tool-00018","tool-00019"]}]}}]}]},"backends":{}}"#;

/// bench/workload.py `make_body(300, "tool-00017")`.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool-00017","arguments":{"path":"/srv/data/report.txt","mode":"summary","text":"The quick brown fox jumps over the lazy dog; \"quoted\" text, a tab\t and \u00e9t\u00e9.\n xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}"#;

const PRINCIPAL: &str = "spiffe://cluster.local/ns/default/sa/a";

/// The request headers as the filter sees wrk's POST (bench/wrk/post.lua) behind Envoy's HCM.
fn host() -> FakeHost {
    let headers = [
        (":authority", "127.0.0.1:18443"),
        (":path", "/mcp"),
        (":method", "POST"),
        (":scheme", "https"),
        ("content-length", "300"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "tool-00017"),
        ("x-forwarded-proto", "https"),
        ("x-request-id", "6f1c2a4e-8d3b-4f5a-9c7e-2b1d0e9f8a7c"),
    ];
    FakeHost {
        headers: pairs(&headers),
        principal: Some(PRINCIPAL.into()),
        cluster: Some("bench-upstream".into()),
        protocol: "HTTP/1.1".into(),
        now: 1_790_000_000_000,
        ..FakeHost::post(BODY.as_bytes(), None)
    }
}

fn plugin(plan: &str) -> Plugin {
    let mut p = Plugin::default();
    assert!(p.configure(&mut FakeHost::default(), plan.as_bytes()));
    p
}

/// toolgate-test-authz's allow: status OK, an empty ok_response.
fn ok_answer() -> Vec<u8> {
    CheckResponse {
        status: Some(Status {
            code: 0,
            ..Default::default()
        }),
        http_response: Some(HttpResponse::OkResponse(OkHttpResponse::default())),
        dynamic_metadata: None,
    }
    .encode_to_vec()
}

/// (c): headers (continue; the body is held), the body (decided: allowed), response headers.
#[inline(never)]
fn run_c(p: &Plugin, host: &mut FakeHost) {
    let mut r = p.request();
    let len = host.body.len();
    assert_eq!(r.on_request_headers(host, false), Action::Continue);
    assert_eq!(r.on_request_body(host, len, true), Action::Continue);
    assert_eq!(r.on_response_headers(host, false), Action::Continue);
    black_box(&r);
}

/// (g1): headers (held), the body (Check called: paused), its OK answer (resumed), response headers.
#[inline(never)]
fn run_ea(p: &Plugin, host: &mut FakeHost, answer: &[u8]) {
    let mut r = p.request();
    let len = host.body.len();
    assert_eq!(r.on_request_headers(host, false), Action::Pause);
    assert_eq!(r.on_request_body(host, len, true), Action::Pause);
    let token = host.calls.last().map(Made::token).expect("a call");
    r.on_call_answer(
        host,
        token,
        CallAnswer::Grpc {
            status: 0,
            message: answer.to_vec(),
        },
    );
    assert_eq!(r.on_response_headers(host, false), Action::Continue);
    black_box(&r);
}

fn check(host: &FakeHost, calls: usize) {
    assert_eq!(
        (
            host.allows(),
            host.denies(),
            host.resumed as usize,
            host.calls.len()
        ),
        (1, 0, calls, calls),
        "{:?}",
        host.records
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (c, g1) = (plugin(PLAN_C), plugin(PLAN_G1));
    let answer = ok_answer();
    let mut host_c = host();
    let mut host_ea = host();
    // One of each, checked: what is measured is an allowed request (and, for ea, one call).
    run_c(&c, &mut host_c);
    check(&host_c, 0);
    run_ea(&g1, &mut host_ea, &answer);
    check(&host_ea, 1);

    if args.first().map(String::as_str) == Some("count") {
        let n: usize = args
            .get(1)
            .and_then(|n| n.parse().ok())
            .expect("count N [c|ea]");
        let which = args.get(2).map(String::as_str);
        for _ in 0..n {
            if which != Some("ea") {
                host_c.clear();
                run_c(&c, &mut host_c);
            }
            if which != Some("c") {
                host_ea.clear();
                run_ea(&g1, &mut host_ea, &answer);
            }
        }
        return;
    }
    let time = |name: &str, f: &mut dyn FnMut()| {
        let mut n = 0u64;
        let start = Instant::now();
        while start.elapsed().as_millis() < 1000 {
            for _ in 0..100 {
                f();
            }
            n += 100;
        }
        println!(
            "lifecycle/{name}: {:.0} ns/request",
            start.elapsed().as_nanos() as f64 / n as f64
        );
    };
    time("c (Allow)", &mut || {
        host_c.clear();
        run_c(&c, &mut host_c);
    });
    time("g1 (ExternalAuth gRPC)", &mut || {
        host_ea.clear();
        run_ea(&g1, &mut host_ea, &answer);
    });
}
