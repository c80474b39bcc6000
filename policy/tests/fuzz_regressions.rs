//! Regression tests for what the fuzz targets (fuzz/, docs/security.md "Fuzzing") found.

use toolgate_policy::eval::{BodyInput, Evaluator, HttpRequest};
use toolgate_policy::mcp::{read_body, ReadOptions};

const BODIES: [&str; 4] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":"x\"y"}}}"#,
    r#"[{"jsonrpc":"2.0","id":"a\u00e9","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-sum","Name":"x"}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
];

/// Found by `request_eval` and `lifecycle` (first minute): a body cut inside a string was "JSON ends
/// early: expected '"' closing the string", and that text goes into the decision summary, which the
/// rendered access log prints inside double quotes: the quote ended the field early. No reader
/// error may contain a double quote or a line break, whatever the body.
#[test]
fn reader_errors_never_contain_quotes_or_line_breaks() {
    let mut errors = 0;
    for body in BODIES {
        for end in 0..=body.len() {
            let Some(prefix) = body.as_bytes().get(..end) else {
                continue;
            };
            if let Err(e) = read_body(prefix, ReadOptions::default()) {
                errors += 1;
                let text = e.to_string();
                assert!(!text.contains(['"', '\n', '\r']), "{prefix:?}: {text}");
            }
        }
    }
    assert!(errors > 300, "only {errors} errors");
    let cut = read_body(br#"{"jsonrpc":"2.0","method":"to"#, ReadOptions::default()).unwrap_err();
    assert_eq!(
        cut.to_string(),
        "JSON ends early: expected the quote that closes the string"
    );
}

#[test]
fn summaries_of_unreadable_bodies_never_contain_quotes() {
    let plan = br#"{"version":1,"listener":"l","gateway":{"allow":[{"name":"default/p","rules":[
        {"name":"r","mcp":{"methods":[{"method":{"exact":"tools/call"},"params":["get-sum"]}]}}]}]}}"#;
    let ev = Evaluator::load(plan).expect("plan loads");
    let headers = [("content-type", "application/json")];
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        authority: "gw",
        port: 80,
        headers: &headers,
        principal: None,
        server_name: None,
        auth: None,
        time_ms: 0,
    };
    for body in BODIES {
        for end in (0..body.len()).step_by(3) {
            let prefix = &body.as_bytes()[..end];
            let read = read_body(prefix, ReadOptions::default());
            let input = match &read {
                Ok(b) => BodyInput::Mcp(b),
                Err(e) => BodyInput::NotMcp(e),
            };
            let d = ev.route(None).decide(&req, input);
            assert!(!d.allowed());
            let summary = d.summary();
            assert!(summary.starts_with("deny gateway"), "{summary}");
            assert!(!summary.contains(['"', '\n', '\r']), "{summary}");
        }
    }
}
