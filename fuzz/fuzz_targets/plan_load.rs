//! The plan loader on arbitrary bytes: a plan is refused with an error or loads; a plan that loads
//! decides requests without panicking, and what `explain` shows of each decision is that decision.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{assert_explain_agrees, CLUSTER, SA_A};
use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};
use toolgate_policy::mcp::{read_body, ReadOptions};

const BODIES: [&[u8]; 3] = [
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1}}}"#,
    br#"[{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///x"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    b"not json",
];

fuzz_target!(|data: &[u8]| {
    let Ok(ev) = Evaluator::load(data) else {
        return;
    };
    let headers = [
        ("content-type", "application/json"),
        ("x-team", "blue"),
        ("mcp-method", "tools/call"),
    ];
    let req = HttpRequest {
        method: "POST",
        path: "/mcp/t1?q",
        authority: "api.example.com:8443",
        port: 8443,
        headers: &headers,
        principal: Some(SA_A),
        server_name: None,
        auth: None,
        time_ms: 1_790_000_000_000,
    };
    for cluster in [None, Some(CLUSTER), Some("other")] {
        let route = ev.route(cluster);
        let _ = route.under_policy();
        for body in BODIES {
            let read = read_body(
                body,
                ReadOptions {
                    capture_params: true,
                },
            );
            let input = match &read {
                Ok(b) => BodyInput::Mcp(b),
                Err(e) => BodyInput::NotMcp(e),
            };
            // Policy names come from the (trusted) plan: the summary is not checked for quotes here.
            let _ = route.decide(&req, input).summary();
            assert_explain_agrees(&route, &req, input);
        }
        assert_explain_agrees(
            &route,
            &HttpRequest {
                method: "GET",
                ..req
            },
            BodyInput::None,
        );
    }
});
