use toolgate_ext_authz_proto::envoy::r#type::v3::HttpStatus;
use toolgate_ext_authz_proto::envoy::service::auth::v3::{DeniedHttpResponse, OkHttpResponse};
use toolgate_ext_authz_proto::google::protobuf::BoolValue;
use toolgate_ext_authz_proto::google::rpc::Status;

use toolgate_ext_authz_proto::envoy::config::core::v3::{grpc_service::EnvoyGrpc, GrpcService};

use super::*;
use crate::plan::{AuthorizerPlan, AuthorizerProtocol};

fn response(code: i32, http: Option<HttpResponse>) -> CheckResponse {
    CheckResponse {
        status: Some(Status {
            code,
            ..Default::default()
        }),
        http_response: http,
        dynamic_metadata: None,
    }
}

#[test]
fn check_responses() {
    // OK without an http_response allows with no change.
    assert_eq!(
        read_check_response(response(0, None)),
        Answer::Allow(vec![])
    );
    assert_eq!(
        read_check_response(CheckResponse::default()),
        Answer::Allow(vec![])
    );
    // An error_response is the authorizer failing, not denying.
    let error = HttpResponse::ErrorResponse(DeniedHttpResponse::default());
    assert_eq!(
        read_check_response(response(13, Some(error))),
        Answer::Fail(AuthzFailure::Unavailable)
    );
    // A denial without a usable status: 0 (Toolgate's own denial).
    for status in [None, Some(0), Some(99), Some(700)] {
        let denied = HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: status.map(|code| HttpStatus { code }),
            ..Default::default()
        });
        assert!(
            matches!(
                read_check_response(response(7, Some(denied))),
                Answer::Deny(Denied { status: 0, .. })
            ),
            "{status:?}"
        );
    }
    // A non-OK status without a body is a denial too.
    assert!(matches!(
        read_check_response(response(7, None)),
        Answer::Deny(Denied { status: 0, .. })
    ));
    // `append` (deprecated) wins over `append_action`; OVERWRITE replaces.
    let mut set = HeaderValueOption::new("X-Team", "blue");
    set.append = Some(BoolValue { value: false });
    let mut overwrite = HeaderValueOption::new("x-a", "1");
    overwrite.append_action = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
    let ok = HttpResponse::OkResponse(OkHttpResponse {
        headers: vec![
            set,
            overwrite,
            HeaderValueOption::new(":path", "/admin"),
            HeaderValueOption::new("content-length", "0"),
        ],
        headers_to_remove: vec!["x-b".into(), ":authority".into(), "host".into()],
        ..Default::default()
    });
    assert_eq!(
        read_check_response(response(0, Some(ok))),
        Answer::Allow(vec![
            HeaderEdit::Set("x-team".into(), "blue".into()),
            HeaderEdit::Set("x-a".into(), "1".into()),
            HeaderEdit::Remove("x-b".into()),
        ])
    );
}

#[test]
fn http_responses() {
    let h = |status: &str| {
        vec![
            (":status".to_string(), status.to_string()),
            ("x-user".into(), "u".into()),
            ("date".into(), "d".into()),
        ]
    };
    assert_eq!(
        read_http_response(&[], h("204"), vec![]),
        Answer::Allow(vec![HeaderEdit::Set("x-user".into(), "u".into())])
    );
    assert_eq!(
        read_http_response(&["date".into()], h("200"), vec![]),
        Answer::Allow(vec![HeaderEdit::Set("date".into(), "d".into())])
    );
    assert!(matches!(
        read_http_response(&[], h("302"), vec![]),
        Answer::Deny(Denied { status: 302, .. })
    ));
    // 1xx: not a final status, never the status of a denial (lifecycle fuzz target).
    for bad in ["", "abc", "99", "100", "101", "135", "199", "600"] {
        assert_eq!(
            read_http_response(&[], h(bad), vec![]),
            Answer::Fail(AuthzFailure::Malformed),
            "{bad:?}"
        );
    }
    assert_eq!(
        read_http_response(&[], vec![], vec![]),
        Answer::Fail(AuthzFailure::Malformed)
    );
}

fn authorizer(allowed_headers: &[&str], forward_body_bytes: u32) -> AuthorizerPlan {
    AuthorizerPlan {
        cluster: "authz/default/authz/9000".into(),
        authority: "authz.default.svc.cluster.local".into(),
        protocol: AuthorizerProtocol::Grpc,
        allowed_headers: allowed_headers.iter().map(|h| h.to_string()).collect(),
        forward_body_bytes,
    }
}

/// The CheckRequest written by hand (wire.rs) decodes to the message prost builds, for every shape
/// of input: repeated and filtered headers, partial, non-UTF-8 and absent bodies, no caller, JSON-RPC
/// messages with every kind of `id` and `params` (long enough for multi-byte lengths), and text the
/// protobuf JSON mapping refuses (left out, as before).
#[test]
fn hand_written_check_requests_decode_as_prost_ones() {
    let long = format!(
        r#"{{"name":"t","arguments":{{"text":"{}","n":[1,2.5,-3e2,true,false,null,{{}},[]]}}}}"#,
        "x\\u00e9\\n".repeat(3000)
    );
    let bodies: Vec<String> = vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":[true,null,"x"]}}}"#
            .into(),
        r#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"a\"b\u00e9","z":{},"a":[],"m":{"k\n":-0.0}}}"#
            .into(),
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(),
        r#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/list","params":{}}"#.into(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{long}}}"#),
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}]"#
            .into(),
    ];
    let headers: Vec<(&str, &str)> = vec![
        (":method", "POST"),
        ("x-b", "2"),
        ("x-a", "1"),
        ("x-b", "1"),
        ("x-toolgate-principal", "spiffe://forged"),
        ("x-envoy-auth-partial-body", "client"),
        ("x-empty", ""),
        ("x-b", "3"),
    ];
    // A verified token (docs/semantics.md §6b): its namespace's Struct goes to metadata_context.
    let payload = Struct {
        fields: [(
            "sub".to_string(),
            Value {
                kind: Some(Kind::StringValue("agent-7".into())),
            },
        )]
        .into_iter()
        .collect(),
    };
    let namespace = Struct {
        fields: [(
            "https://issuer.test".to_string(),
            Value {
                kind: Some(Kind::StructValue(payload)),
            },
        )]
        .into_iter()
        .collect(),
    };
    let token = crate::jwt::Auth::of_claims(
        serde_json::json!({"sub": "agent-7"}),
        namespace.encode_to_vec(),
    );
    let mut cases = 0;
    for body in &bodies {
        let read = crate::mcp::read_body(
            body.as_bytes(),
            crate::mcp::ReadOptions {
                capture_params: true,
            },
        )
        .expect("MCP");
        let mut messages: Vec<Option<&McpMessage<'_>>> = read.messages().iter().map(Some).collect();
        messages.push(None);
        for message in messages {
            for (authorizer, principal, body) in [
                (
                    authorizer(&[], 0),
                    Some("spiffe://cluster.local/ns/default/sa/a"),
                    body.as_bytes(),
                ),
                (authorizer(&[], 16), None, body.as_bytes()),
                (
                    authorizer(&["x-b", "x-envoy-auth-partial-body"], 1 << 20),
                    None,
                    body.as_bytes(),
                ),
                (
                    authorizer(&["x-b"], 8),
                    Some(""),
                    b"\xff\xfe not UTF-8".as_slice(),
                ),
                (authorizer(&[], 1024), None, b"".as_slice()),
            ] {
                for auth in [None, Some(&token)] {
                    let req = HttpRequest {
                        method: "POST",
                        path: "/mcp?x=1",
                        authority: "gw",
                        port: 8443,
                        headers: &headers,
                        principal,
                        server_name: None,
                        auth,
                        time_ms: 0,
                    };
                    let input = CallInput {
                        req: &req,
                        scheme: "https",
                        request_id: "rid",
                        protocol: "HTTP/2",
                        message,
                        body,
                    };
                    let written = check_request_bytes(&authorizer, &input);
                    let decoded = CheckRequest::decode(written.as_slice()).expect("a CheckRequest");
                    assert_eq!(
                        decoded,
                        check_request(&authorizer, &input),
                        "{body:?} {message:?}"
                    );
                    // As many bytes as prost writes (map entries, in another order, and nothing else):
                    // the same message, encoded as compactly.
                    assert_eq!(
                        written.len(),
                        check_request(&authorizer, &input).encode_to_vec().len()
                    );
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 80);
    // JSON text the mapping refuses (a number out of range, not JSON): the field is left out.
    let odd = McpMessage {
        id: Some("1E4444"),
        params: Some(r#"{"a":[1,{"b":1E4444}]}"#),
        ..read_one()
    };
    let req = HttpRequest {
        method: "POST",
        path: "/",
        authority: "gw",
        port: 0,
        headers: &[],
        principal: None,
        server_name: None,
        auth: None,
        time_ms: 0,
    };
    let input = CallInput {
        req: &req,
        scheme: "",
        request_id: "",
        protocol: "",
        message: Some(&odd),
        body: b"",
    };
    let decoded =
        CheckRequest::decode(check_request_bytes(&authorizer(&[], 0), &input).as_slice()).unwrap();
    assert_eq!(decoded, check_request(&authorizer(&[], 0), &input));
    let fields = &decoded
        .attributes
        .unwrap()
        .metadata_context
        .unwrap()
        .filter_metadata[MCP_METADATA_KEY]
        .fields;
    assert_eq!(fields.keys().collect::<Vec<_>>(), ["jsonrpc", "method"]);
    // The upstream: prost's bytes.
    let a = authorizer(&[], 0);
    let prost_upstream = GrpcService {
        envoy_grpc: Some(EnvoyGrpc {
            cluster_name: a.cluster.clone(),
            authority: a.authority.clone(),
        }),
    };
    assert_eq!(grpc_service(&a), prost_upstream.encode_to_vec());
}

fn read_one() -> McpMessage<'static> {
    let body: &'static str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;
    crate::mcp::read_body(
        body.as_bytes(),
        crate::mcp::ReadOptions {
            capture_params: true,
        },
    )
    .unwrap()
    .messages()[0]
        .clone()
}

/// `json_entry` (the scanner-based writer) writes what `json::parse_value` (serde_json, the
/// protobuf JSON mapping) reads, and nothing when it refuses the text: numbers of every form and
/// range, nesting at serde_json's limit, escaped and empty keys, whitespace, and text that is not
/// one JSON value.
#[test]
fn json_values_are_written_as_serde_json_reads_them() {
    let mut texts: Vec<String> = [
        "0",
        "-0",
        "1",
        "-1",
        "7",
        "123456789012345",
        "-123456789012345",
        "1234567890123456",
        "9007199254740993",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e400",
        "-1e400",
        "1E4444",
        "0e99999",
        "1e-400",
        "2.5",
        "-3e2",
        "0.1",
        "-0.0",
        "123.456e-5",
        "1.7976931348623157e308",
        "1.7976931348623158e308",
        "1.8e308",
        "4.9e-324",
        "2e-324",
        "true",
        "false",
        "null",
        r#""""#,
        r#""a\"b\u00e9\ud83d\ude00\n""#,
        r#"{}"#,
        r#"[]"#,
        r#" { "a" : [ 1 , 2.5 , { } , [ ] ] , "" : null , "\u0041" : "x" , "a\"b" : true } "#,
        r#"{"k":1,"k":2}"#,
        r#"{"a":[1,{"b":1E4444}]}"#,
        // Not one JSON value.
        "",
        " ",
        "[1,]",
        r#"{"a"}"#,
        "1 2",
        r#""\ud800""#,
        "01",
        "[",
        "{\"a\":1",
        "tru",
        "\"\u{1}\"",
        "-",
        "1.",
        "+1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push(format!("1{}", "0".repeat(310)));
    texts.push(format!("1{}.5", "0".repeat(299)));
    for depth in [126, 127, 128, 129] {
        texts.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
        texts.push(format!(
            "{}1{}",
            r#"{"a":"#.repeat(depth),
            "}".repeat(depth)
        ));
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mantissa = x >> (x % 64);
        let exp = (x >> 40) as i32 % 700 - 350;
        texts.push(match x % 4 {
            0 => mantissa.to_string(),
            1 => format!("-{mantissa}"),
            2 => format!("{mantissa}e{exp}"),
            _ => format!("-{}.{}E{exp}", mantissa % 1000, mantissa),
        });
    }
    for text in &texts {
        let mut w = Writer::default();
        let written = w.json_entry(1, "k", text);
        let want = json::parse_value(text);
        assert_eq!(
            written.is_ok(),
            want.is_ok(),
            "{text:?}: {written:?} vs {want:?}"
        );
        match want {
            Ok(value) => {
                let want = Struct {
                    fields: [("k".to_string(), value)].into_iter().collect(),
                };
                match Struct::decode(w.buf.as_slice()) {
                    Ok(decoded) => assert_eq!(decoded, want, "{text:?}"),
                    // Deeper than prost decodes (its recursion limit, 100 messages): objects of one
                    // key, the very bytes prost writes.
                    Err(_) => assert_eq!(w.buf, want.encode_to_vec(), "{text:?}"),
                }
            }
            Err(_) => assert!(w.buf.is_empty(), "{text:?}"),
        }
    }
}

#[test]
fn numbers_reach_authorizers_as_the_nearest_double() {
    // What Go, Python and JavaScript servers read (serde_json's `float_roundtrip`): without it,
    // 9.99999999999999915 was written as 9.999999999999998 while the server ran with 10.
    use toolgate_ext_authz_proto::google::protobuf::value::Kind;
    for (text, want) in [
        ("9.99999999999999915", 10.0),
        ("0.999999999999999915e1", 10.0),
        ("9.9999999999999991", 9.999999999999998),
    ] {
        let mut w = Writer::default();
        w.json_entry(1, "k", text).unwrap();
        let decoded = Struct::decode(w.buf.as_slice()).unwrap();
        assert_eq!(
            decoded.fields["k"].kind,
            Some(Kind::NumberValue(want)),
            "{text}"
        );
    }
}
