//! The reader and the evaluator against a fixed realistic plan (plans/realistic.json) with arbitrary
//! requests: no panic; a denial reply is valid JSON-RPC; the summary cannot break out of the access
//! log's quotes; and what the plan allows of tools/call is what its rules say.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{measure, reader_bound, Request, CLUSTER, REALISTIC_PLAN, SA_A};
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};
use toolgate_policy::mcp::{read_body, ReadOptions};
use toolgate_policy::response;

fn evaluator() -> &'static Evaluator {
    static EV: OnceLock<Evaluator> = OnceLock::new();
    EV.get_or_init(|| Evaluator::load(REALISTIC_PLAN).expect("plans/realistic.json loads"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(r) = Request::from_bytes(data) else {
        return;
    };
    let ev = evaluator();
    let (read, peak) = measure(|| {
        read_body(
            r.body,
            ReadOptions {
                capture_params: true,
            },
        )
    });
    assert!(peak <= reader_bound(r.body.len()));
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
    let route = ev.route(r.backend.then_some(CLUSTER));
    let d = route.decide(&req, body);
    let summary = d.summary();
    assert!(!summary.contains(['"', '\n', '\r']), "{summary}");
    if !d.allowed() {
        let reply = response::denial(body, &d, true);
        // The id is echoed as sent: RFC 8259 JSON, though serde_json refuses numbers past f64 (1e400).
        let v: serde_json::Value = match serde_json::from_str(&reply.body) {
            Ok(v) => v,
            Err(e) if e.to_string().contains("number out of range") => return,
            Err(e) => panic!("a denial is not JSON ({e}): {}", reply.body),
        };
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(v["error"]["code"].is_i64());
        return;
    }
    // Allowed: every tools/call in the body is one the plan's rules allow.
    if let Ok(mcp) = &read {
        for m in mcp.messages() {
            if m.method.as_deref() != Some("tools/call") {
                continue;
            }
            let name = m.name.as_deref();
            if r.backend {
                assert!(
                    matches!(name, Some("get-sum" | "echo")),
                    "backend allowed tools/call {name:?}"
                );
            }
            if name != Some("get-sum") {
                assert_eq!(r.principal, Some(SA_A), "only agent a may call {name:?}");
            }
        }
    }
});
