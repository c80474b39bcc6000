//! Tests of the MCP body reader (docs/semantics.md §4): extraction, strict JSON validation, fail-closed cases,
//! truncation at every prefix, and a deterministic fuzz loop checked against serde_json.

use std::borrow::Cow;

use toolgate_policy::mcp::{
    read_body, McpBody, McpMessage, MessageKind, NotMcp, ReadOptions, MAX_DEPTH,
};
use toolgate_policy::testing::oracle::{self, depth, folded_key, nul_key};

/// Truncation at every prefix, and the deterministic fuzz loop checked against serde_json.
#[path = "mcp_reader/fuzz.rs"]
mod fuzz;

fn read(body: &str) -> Result<McpBody<'_>, NotMcp> {
    read_body(body.as_bytes(), ReadOptions::default())
}

fn read_bytes(body: &[u8]) -> Result<McpBody<'_>, NotMcp> {
    read_body(body, ReadOptions::default())
}

fn single(body: &str) -> McpMessage<'_> {
    match read(body) {
        Ok(McpBody::Single(m)) => m,
        other => panic!("expected a single message from {body}, got {other:?}"),
    }
}

fn err(body: &str) -> NotMcp {
    match read(body) {
        Err(e) => e,
        Ok(b) => panic!("expected an error from {body:?}, got {b:?}"),
    }
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_sum","arguments":{"a":1,"b":[true,false,null,-1.5e3],"c":{"d":"x\ny"}}}}"#;

// ---------------------------------------------------------------------------------------------
// Valid messages
// ---------------------------------------------------------------------------------------------

#[test]
fn single_request() {
    let m = single(CALL);
    assert_eq!(m.method.as_deref(), Some("tools/call"));
    assert_eq!(m.id, Some("7"));
    assert_eq!(m.name.as_deref(), Some("get_sum"));
    assert_eq!(m.uri, None);
    assert_eq!(m.params, None);
    assert_eq!(m.kind(), MessageKind::Request);
    assert!(matches!(m.method, Some(Cow::Borrowed(_))));
    assert!(matches!(m.name, Some(Cow::Borrowed(_))));
    let body = read(CALL).unwrap();
    assert!(!body.is_batch());
    assert_eq!(body.messages().len(), 1);
}

#[test]
fn ids_are_raw_text() {
    let m = single(r#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#);
    assert_eq!(m.id, Some(r#""abc""#));
    assert_eq!(m.kind(), MessageKind::Request);
    let m = single(r#"{"jsonrpc":"2.0","id":"a\u0062c","method":"ping"}"#);
    assert_eq!(m.id, Some(r#""a\u0062c""#));
    let m = single(r#"{"jsonrpc":"2.0","id": -12.5e+3 ,"method":"ping"}"#);
    assert_eq!(m.id, Some("-12.5e+3"));
    let m = single(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(m.id, Some("null"));
    assert_eq!(m.kind(), MessageKind::Notification);
    let m = single(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#);
    assert_eq!(m.kind(), MessageKind::Request);
}

#[test]
fn notification() {
    let m = single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(m.id, None);
    assert_eq!(m.kind(), MessageKind::Notification);
    assert_eq!(m.method.as_deref(), Some("notifications/initialized"));
}

#[test]
fn client_sent_responses() {
    let m = single(r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#);
    assert_eq!(m.method, None);
    assert_eq!(m.id, Some("3"));
    assert_eq!(m.kind(), MessageKind::Response);
    let m = single(r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}"#);
    assert_eq!(m.kind(), MessageKind::Response);
    let m = single(r#"{"jsonrpc":"2.0","id":4,"result":null}"#);
    assert_eq!(m.kind(), MessageKind::Response);
}

#[test]
fn batches() {
    let body = format!(
        r#"[{CALL}, {{"jsonrpc":"2.0","method":"notifications/x"}} ,{{"jsonrpc":"2.0","id":1,"result":1}}]"#
    );
    let b = read(&body).unwrap();
    assert!(b.is_batch());
    let ms = b.messages();
    assert_eq!(ms.len(), 3);
    assert_eq!(ms[0].name.as_deref(), Some("get_sum"));
    assert_eq!(ms[1].kind(), MessageKind::Notification);
    assert_eq!(ms[2].kind(), MessageKind::Response);
    let one = format!("[{CALL}]");
    let b = read(&one).unwrap();
    assert!(b.is_batch());
    assert_eq!(b.messages().len(), 1);
}

#[test]
fn whitespace_everywhere() {
    let body = " \t\r\n{ \"jsonrpc\" : \"2.0\" ,\n\t\"method\"\r: \"ping\" , \"params\" : { \"name\" : \"n\" } } \n\t\r ";
    let m = single(body);
    assert_eq!(m.method.as_deref(), Some("ping"));
    assert_eq!(m.name.as_deref(), Some("n"));
}

#[test]
fn escapes_are_decoded() {
    let m = single(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"get\u002dsum"}}"#,
    );
    assert_eq!(m.method.as_deref(), Some("tools/call"));
    assert_eq!(m.name.as_deref(), Some("get-sum"));
    assert!(matches!(m.name, Some(Cow::Owned(_))));
    let m = single(
        r#"{"jsonrpc":"2.0","method":"x","params":{"name":"\ud83d\ude00 \u00e9\"\\\b\f\n\r\t\u0000"}}"#,
    );
    assert_eq!(
        m.name.as_deref(),
        Some("\u{1F600} é\"\\\u{8}\u{c}\n\r\t\u{0}")
    );
    // Raw multi-byte UTF-8 borrows.
    let m = single(r#"{"jsonrpc":"2.0","method":"x","params":{"name":"héllo 😀"}}"#);
    assert!(matches!(m.name, Some(Cow::Borrowed("héllo 😀"))));
    // The jsonrpc value is compared after decoding.
    single(r#"{"jsonrpc":"2\u002e0","method":"x"}"#);
}

#[test]
fn escaped_keys_are_decoded() {
    let m = single(
        r#"{"json\u0072pc":"2.0","met\u0068od":"tools/call","\u0070arams":{"n\u0061me":"t","\u0075ri":"file:///a"}}"#,
    );
    assert_eq!(m.method.as_deref(), Some("tools/call"));
    assert_eq!(m.name.as_deref(), Some("t"));
    assert_eq!(m.uri.as_deref(), Some("file:///a"));
}

#[test]
fn uri_and_params_capture() {
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params": {"uri":"file:///x.txt","n":[1,{"a":2}]} }"#;
    let m = single(body);
    assert_eq!(m.uri.as_deref(), Some("file:///x.txt"));
    assert_eq!(m.name, None);
    assert_eq!(m.params, None);
    let b = read_body(
        body.as_bytes(),
        ReadOptions {
            capture_params: true,
        },
    )
    .unwrap();
    assert_eq!(
        b.messages()[0].params,
        Some(r#"{"uri":"file:///x.txt","n":[1,{"a":2}]}"#)
    );
    // Non-object params are captured too, but have no name/uri.
    let body = r#"{"jsonrpc":"2.0","method":"m","params":[{"name":"x"}]}"#;
    let b = read_body(
        body.as_bytes(),
        ReadOptions {
            capture_params: true,
        },
    )
    .unwrap();
    assert_eq!(b.messages()[0].params, Some(r#"[{"name":"x"}]"#));
    assert_eq!(b.messages()[0].name, None);
    let b = read_body(
        br#"{"jsonrpc":"2.0","method":"m","params":null}"#,
        ReadOptions {
            capture_params: true,
        },
    )
    .unwrap();
    assert_eq!(b.messages()[0].params, Some("null"));
}

#[test]
fn non_string_name_or_uri_is_absent() {
    for v in ["1", "null", "true", "{}", r#"["x"]"#, r#"{"name":"x"}"#] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{v},"uri":{v}}}}}"#
        );
        let m = single(&body);
        assert_eq!((m.name, m.uri), (None, None), "{body}");
    }
    // name/uri only count directly inside params.
    let m = single(
        r#"{"jsonrpc":"2.0","method":"m","name":"top","params":{"arguments":{"name":"deep","uri":"u"}}}"#,
    );
    assert_eq!((m.name, m.uri), (None, None));
}

#[test]
fn same_key_in_different_objects_is_not_a_duplicate() {
    single(
        r#"{"jsonrpc":"2.0","method":"m","params":{"name":"n","arguments":{"name":1,"method":2,"a":{"a":{"a":1}},"b":{"a":1}}}}"#,
    );
    single(r#"{"jsonrpc":"2.0","method":"m","params":{"x":[{"a":1},{"a":1}],"y":{"a":1}}}"#);
}

#[test]
fn big_objects() {
    let mut args = String::new();
    for i in 0..2000 {
        args.push_str(&format!(r#""key{i}":{{"key{i}":[{i},"v{i}"],"x":1}},"#));
    }
    let base =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"#;
    let ok = format!("{base}{args}\"last\":0}}}}}}");
    assert_eq!(single(&ok).name.as_deref(), Some("t"));
    let dup = format!("{base}{args}\"key1234\":0}}}}}}");
    let offset = dup.rfind("\"key1234\"").unwrap();
    assert_eq!(
        read(&dup).unwrap_err(),
        NotMcp::DuplicateKey {
            key: "key1234".into(),
            offset
        }
    );
    let dup = format!("{base}{args}\"ke\\u00797\":0}}}}}}");
    assert!(matches!(read(&dup), Err(NotMcp::DuplicateKey { key, .. }) if key == "key7"));
}

// ---------------------------------------------------------------------------------------------
// Not MCP: duplicates, depth
// ---------------------------------------------------------------------------------------------

#[test]
fn duplicate_keys() {
    let e = err(r#"{"jsonrpc":"2.0","method":"tools/list","method":"tools/call"}"#);
    assert_eq!(
        e,
        NotMcp::DuplicateKey {
            key: "method".into(),
            offset: 39
        }
    );
    assert_eq!(e.to_string(), "duplicate key 'method' at byte 39");
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a","arguments":{},"name":"b"}}"#),
        NotMcp::DuplicateKey { key, .. } if key == "name"
    ));
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a","arguments":{"x":[{"y":{"z":1,"z":1}}]}}}"#),
        NotMcp::DuplicateKey { key, .. } if key == "z"
    ));
    // Escaped spellings are the same key.
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"tools/list","m\u0065thod":"tools/call"}"#),
        NotMcp::DuplicateKey { key, .. } if key == "method"
    ));
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"m","params":{"\u0061":1,"a":2}}"#),
        NotMcp::DuplicateKey { .. }
    ));
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"m","params":{"\/":1,"/":2}}"#),
        NotMcp::DuplicateKey { .. }
    ));
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"m","params":{"😀":1,"\ud83d\ude00":2}}"#),
        NotMcp::DuplicateKey { .. }
    ));
    // In a batch element, and in the top-level message of a batch.
    assert!(matches!(
        err(r#"[{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}]"#),
        NotMcp::DuplicateKey { .. }
    ));
    // Empty key twice.
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"m","params":{"":1,"":2}}"#),
        NotMcp::DuplicateKey { .. }
    ));
    // Not duplicates: prefixes, case.
    single(r#"{"jsonrpc":"2.0","method":"m","params":{"a":1,"ab":2,"A":3,"":4}}"#);
}

fn nested_params(arrays: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
}

#[test]
fn depth_limit() {
    assert_eq!(MAX_DEPTH, 64);
    // The message object is depth 1, so 63 nested arrays reach depth 64.
    single(&nested_params(63));
    assert!(matches!(err(&nested_params(64)), NotMcp::TooDeep { .. }));
    // Same with objects.
    let objs = |n: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{}1{}}}"#,
            r#"{"a":"#.repeat(n),
            "}".repeat(n)
        )
    };
    single(&objs(63));
    assert!(matches!(err(&objs(64)), NotMcp::TooDeep { .. }));
    // A bare array of depth 64 is valid JSON (but not a message); 65 is too deep.
    assert_eq!(
        err(&format!("{}{}", "[".repeat(64), "]".repeat(64))),
        NotMcp::NotAnObject
    );
    assert_eq!(
        err(&format!("{}{}", "[".repeat(65), "]".repeat(65))),
        NotMcp::TooDeep { offset: 64 }
    );
    // Hostile inputs do not overflow anything.
    assert_eq!(err(&"[".repeat(100_000)), NotMcp::TooDeep { offset: 64 });
    assert!(matches!(
        err(&r#"{"a":"#.repeat(100_000)),
        NotMcp::TooDeep { .. }
    ));
    assert!(matches!(
        err(&format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))),
        NotMcp::TooDeep { .. }
    ));
}

// ---------------------------------------------------------------------------------------------
// Not MCP: invalid JSON
// ---------------------------------------------------------------------------------------------

fn with_arg(raw: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"x":{raw}}}}}}}"#
    )
}

#[test]
fn invalid_utf8() {
    let prefix = r#"{"jsonrpc":"2.0","method":"m","params":{"arguments":{"x":""#;
    for bad in [
        &[0xff][..],
        &[0xc0, 0x80],
        &[0xe0, 0x80, 0x80],
        &[0xed, 0xa0, 0x80],
        &[0xf4, 0x90, 0x80, 0x80],
        &[0xc3],
        &[0x80],
    ] {
        let mut body = prefix.as_bytes().to_vec();
        body.extend_from_slice(bad);
        body.extend_from_slice(br#""}}}"#);
        assert_eq!(
            read_bytes(&body).unwrap_err(),
            NotMcp::InvalidUtf8 {
                offset: prefix.len()
            },
            "{bad:?}"
        );
    }
    // Outside strings.
    let mut body = br#"{"jsonrpc":"2.0","method":"m"} "#.to_vec();
    body.push(0xff);
    assert!(matches!(read_bytes(&body), Err(NotMcp::InvalidUtf8 { .. })));
    // A UTF-8 BOM is not JSON whitespace.
    assert!(read_bytes(&[b"\xef\xbb\xbf".as_slice(), CALL.as_bytes()].concat()).is_err());
}

#[test]
fn lone_surrogates() {
    for s in [
        r#""\ud800""#,
        r#""\udc00""#,
        r#""\uDBFF x""#,
        r#""\ud800\u0041""#,
        r#""\ud800\ud800""#,
        r#""\ude00\ud83d""#,
        r#""\ud800\n""#,
    ] {
        assert!(
            matches!(err(&with_arg(s)), NotMcp::LoneSurrogate { .. }),
            "{s}"
        );
    }
    // In keys and extracted values too.
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"\udfff"}"#),
        NotMcp::LoneSurrogate { offset: 27 }
    ));
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"m","params":{"\ud800":1}}"#),
        NotMcp::LoneSurrogate { .. }
    ));
    single(&with_arg(r#""\uD83D\uDE00\uFFFF\uE000\u007f""#));
}

#[test]
fn bad_strings() {
    for s in ["\"a\nb\"", "\"\u{0}\"", "\"\u{1f}\"", "\"\t\""] {
        assert!(
            matches!(err(&with_arg(s)), NotMcp::ControlCharacter { .. }),
            "{s:?}"
        );
    }
    for s in [
        r#""\x""#,
        r#""\u12G4""#,
        r#""\U0041""#,
        r#""\'""#,
        r#""\ ""#,
    ] {
        assert!(
            matches!(err(&with_arg(s)), NotMcp::InvalidEscape { .. }),
            "{s}"
        );
    }
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","method":"a	b"}"#),
        NotMcp::ControlCharacter { offset: 28 }
    ));
    // DEL and non-ASCII are fine unescaped.
    single(&with_arg("\"\u{7f}\u{80}\u{ffff}\""));
    // Single quotes are not strings.
    assert!(matches!(err(&with_arg("'x'")), NotMcp::InvalidJson { .. }));
}

#[test]
fn bad_numbers() {
    for n in [
        "01",
        "1.",
        "-",
        "1e",
        "+1",
        ".5",
        "1e+",
        "-01",
        "0x10",
        "1.e5",
        "--1",
        "1ee2",
        "Infinity",
        "NaN",
        "-Infinity",
        "1_0",
        "0.",
        "00",
    ] {
        assert!(read(&with_arg(n)).is_err(), "{n} should be rejected");
    }
    for n in [
        "0",
        "-0",
        "0.0e-0",
        "1E5",
        "1e+5",
        "123456789012345678901234567890",
        "-0.000001",
        "1e400",
        "2.5E-3",
    ] {
        single(&with_arg(n));
    }
}

#[test]
fn bad_literals_and_structure() {
    for v in [
        "tru",
        "True",
        "nul",
        "nulll",
        "falsey",
        "undefined",
        "[1,]",
        "[,1]",
        "{,}",
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{"a":}"#,
        "{1:2}",
        "[1 2]",
        r#"{"a":1 "b":2}"#,
        "[1}",
        r#"{"a":1]"#,
    ] {
        assert!(read(&with_arg(v)).is_err(), "{v} should be rejected");
    }
    for v in [
        "true",
        "false",
        "null",
        "[]",
        "{}",
        "[[],{},[{}]]",
        r#"{"":""}"#,
    ] {
        single(&with_arg(v));
    }
}

#[test]
fn whitespace_is_strict() {
    for ws in ["\u{c}", "\u{b}", "\u{a0}", "\u{2028}", "\u{feff}", "\u{0}"] {
        let body = format!(r#"{{"jsonrpc":"2.0",{ws}"method":"m"}}"#);
        assert!(read(&body).is_err(), "{ws:?} is not JSON whitespace");
    }
}

#[test]
fn trailing_data() {
    assert_eq!(
        err(&format!("{CALL} x")),
        NotMcp::TrailingData {
            offset: CALL.len() + 1
        }
    );
    assert!(matches!(
        err(&format!("{CALL}{CALL}")),
        NotMcp::TrailingData { .. }
    ));
    assert!(matches!(
        err(&format!("{CALL}]")),
        NotMcp::TrailingData { .. }
    ));
    assert!(matches!(
        err(&format!("{CALL},")),
        NotMcp::TrailingData { .. }
    ));
    assert!(matches!(
        read_bytes(&[CALL.as_bytes(), b"\0"].concat()),
        Err(NotMcp::TrailingData { .. })
    ));
    single(&format!("{CALL} \n\t\r"));
}

#[test]
fn empty_and_scalar_bodies() {
    assert!(matches!(err(""), NotMcp::UnexpectedEnd { .. }));
    assert!(matches!(err(" \n "), NotMcp::UnexpectedEnd { .. }));
    for b in ["1", r#""x""#, "null", "true"] {
        assert_eq!(err(b), NotMcp::NotAnObject);
    }
}

// ---------------------------------------------------------------------------------------------
// Not MCP: JSON-RPC shape
// ---------------------------------------------------------------------------------------------

#[test]
fn batch_shape() {
    assert_eq!(err("[]"), NotMcp::EmptyBatch);
    assert_eq!(err(" [ \n ] "), NotMcp::EmptyBatch);
    assert_eq!(err("[1]"), NotMcp::NotAnObject);
    assert_eq!(err(&format!("[{CALL},\"x\"]")), NotMcp::NotAnObject);
    assert_eq!(err(&format!("[{CALL},[{CALL}]]")), NotMcp::NotAnObject);
    assert_eq!(err("[null]"), NotMcp::NotAnObject);
    // JSON errors win over shape errors.
    assert!(matches!(err("[1,]"), NotMcp::InvalidJson { .. }));
    assert!(matches!(err("[]x"), NotMcp::TrailingData { .. }));
}

#[test]
fn jsonrpc_version() {
    assert_eq!(
        err(r#"{"jsonrpc":"1.0","method":"m"}"#),
        NotMcp::NotJsonRpc2
    );
    assert_eq!(err(r#"{"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(r#"{"jsonrpc":2.0,"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(
        err(r#"{"jsonrpc":"2.0 ","method":"m"}"#),
        NotMcp::NotJsonRpc2
    );
    assert_eq!(err(r#"{"jsonrpc":null,"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(
        err(&format!(r#"[{CALL},{{"method":"m"}}]"#)),
        NotMcp::NotJsonRpc2
    );
    assert_eq!(err("{}"), NotMcp::NotJsonRpc2);
}

#[test]
fn method_and_id_shape() {
    for m in ["1", "null", "true", "{}", r#"["tools/call"]"#] {
        assert_eq!(
            err(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":{m}}}"#)),
            NotMcp::MethodNotString,
            "{m}"
        );
    }
    for id in ["{}", "[]", "true", "false", r#"{"a":1}"#] {
        assert_eq!(
            err(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#)),
            NotMcp::BadId,
            "{id}"
        );
    }
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":1}"#),
        NotMcp::NeitherMethodNorResult
    );
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":1,"params":{"name":"x"}}"#),
        NotMcp::NeitherMethodNorResult
    );
    // A JSON error later in the body wins over a shape error earlier.
    assert!(matches!(
        err(r#"{"jsonrpc":"1.0","method":"m","x":tru}"#),
        NotMcp::InvalidJson { .. }
    ));
}

#[test]
fn error_messages() {
    let cases: Vec<(NotMcp, &str)> = vec![
        (
            NotMcp::InvalidJson {
                offset: 3,
                expected: "':'",
            },
            "invalid JSON at byte 3: expected ':'",
        ),
        (
            NotMcp::UnexpectedEnd {
                expected: "a value",
            },
            "JSON ends early: expected a value",
        ),
        (NotMcp::InvalidUtf8 { offset: 9 }, "invalid UTF-8 at byte 9"),
        (
            NotMcp::ControlCharacter { offset: 9 },
            "unescaped control character in string at byte 9",
        ),
        (
            NotMcp::InvalidEscape { offset: 9 },
            "invalid escape in string at byte 9",
        ),
        (
            NotMcp::LoneSurrogate { offset: 9 },
            "lone surrogate escape at byte 9",
        ),
        (
            NotMcp::DuplicateKey {
                key: "a\"b".into(),
                offset: 9,
            },
            r#"duplicate key 'a\x22b' at byte 9"#,
        ),
        (
            NotMcp::FoldedKey {
                key: "Name".into(),
                field: "name",
                offset: 9,
            },
            "key 'Name' at byte 9 reads as 'name' to case-insensitive JSON decoders",
        ),
        (
            NotMcp::TooDeep { offset: 9 },
            "nesting deeper than 64 at byte 9",
        ),
        (
            NotMcp::TrailingData { offset: 9 },
            "trailing data after the JSON value at byte 9",
        ),
        (NotMcp::EmptyBatch, "empty batch"),
        (NotMcp::NotAnObject, "JSON-RPC message is not an object"),
        (NotMcp::NotJsonRpc2, "jsonrpc is missing or not '2.0'"),
        (NotMcp::MethodNotString, "method is not a string"),
        (NotMcp::BadId, "id is not a string, number or null"),
        (
            NotMcp::NeitherMethodNorResult,
            "message has neither method nor result/error",
        ),
        (NotMcp::EmptyBody, "empty body"),
        (
            NotMcp::Encoded {
                encoding: "gzip".into(),
            },
            "body is encoded ('gzip'); only identity is read",
        ),
    ];
    for (e, msg) in cases {
        assert_eq!(e.to_string(), msg);
    }
    assert_eq!(
        err(r#"{"jsonrpc" "2.0"}"#).to_string(),
        "invalid JSON at byte 11: expected ':'"
    );
    assert_eq!(
        err(r#"{"jsonrpc":"2.0""#).to_string(),
        "JSON ends early: expected ',' or '}'"
    );
}

#[test]
fn case_folded_field_names_are_not_mcp() {
    // Go's encoding/json reads each of these keys as the field in the comment (last match wins);
    // the reader refuses the body instead of reading it differently.
    let folded = |body: &str| match read(body) {
        Err(NotMcp::FoldedKey { key, field, .. }) => (key, field),
        other => panic!("{body}: {other:?}"),
    };
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","Name":"get-env"}}"#;
    assert_eq!(folded(call), ("Name".into(), "name"));
    // A "response" that such a server runs as a tool call.
    let response =
        r#"{"jsonrpc":"2.0","id":1,"Method":"tools/call","result":{},"params":{"name":"get-env"}}"#;
    assert_eq!(folded(response), ("Method".into(), "method"));
    for (body, key, field) in [
        (r#"{"jsonrpc":"2.0","ID":1,"method":"ping"}"#, "ID", "id"),
        (
            r#"{"JSONRPC":"2.0","id":1,"method":"ping"}"#,
            "JSONRPC",
            "jsonrpc",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","PARAMS":{}}"#,
            "PARAMS",
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"Result":{}}"#,
            "Result",
            "result",
        ),
        (r#"{"jsonrpc":"2.0","id":1,"erroR":{}}"#, "erroR", "error"),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"URI":"file:///etc"}}"#,
            "URI",
            "uri",
        ),
        // Unicode simple folding: long s, Kelvin sign; .NET upper-casing: dotless i.
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"param\u{17f}\":{}}",
            "param\u{17f}",
            "params",
        ),
        (
            "{\"j\u{17f}onrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}",
            "j\u{17f}onrpc",
            "jsonrpc",
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"\u{131}d\":1,\"method\":\"x\"}",
            "\u{131}d",
            "id",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"N\u0061me":"a","n\u0041me":"b"}}"#,
            "Name",
            "name",
        ),
        // Escaped spellings are decoded first.
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"\u004eame":"a"}}"#,
            "Name",
            "name",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","param\u017f":{}}"#,
            "param\u{17f}",
            "params",
        ),
    ] {
        assert_eq!(folded(body), (key.to_string(), field), "{body}");
    }
    // In a batch element too.
    let batch = format!(r#"[{{"jsonrpc":"2.0","id":1,"method":"ping"}},{call}]"#);
    assert_eq!(folded(&batch), ("Name".into(), "name"));
    // Keys elsewhere are not fields: `arguments` and deeper objects may use any case, and keys that
    // fold to nothing the reader extracts are fine.
    let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"Name":"x","METHOD":1},"Names":1,"_meta":{"ID":2}},"Ids":1}"#;
    let m = single(ok);
    assert_eq!(m.name.as_deref(), Some("echo"));
    // Kelvin sign folds to k: no field has a k, so it is an ordinary key.
    assert!(read("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"\u{212a}\":1}").is_ok());
}

#[test]
fn subscription_uris_are_read() {
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["memo://a","memo:\/\/b"]}}}"#;
    let m = single(body);
    assert_eq!(m.subscriptions, vec!["memo://a", "memo://b"]);
    // Anything but a list of strings cannot be judged: not MCP.
    for bad in [
        r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a",1]}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":"a"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[{"uri":"a"}]}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":["a"]}}"#,
    ] {
        assert_eq!(err(bad), NotMcp::BadSubscriptions, "{bad}");
    }
    // Case variants of the keys a case-insensitive decoder would read.
    for (bad, key) in [
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a"],"ResourceSubscriptions":["b"]}}}"#,
            "ResourceSubscriptions",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"Notifications":{"resourceSubscriptions":["b"]}}}"#,
            "Notifications",
        ),
    ] {
        assert!(
            matches!(err(bad), NotMcp::FoldedKey { key: k, .. } if k == key),
            "{bad}"
        );
    }
    // Elsewhere the keys mean nothing.
    let m = single(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"notifications":{"resourceSubscriptions":[1]}}}}"#,
    );
    assert!(m.subscriptions.is_empty());
}

#[test]
fn the_protocol_version_in_meta_is_read() {
    let m = single(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","other":{"x":1}}}}"#,
    );
    assert_eq!(m.protocol_version.as_deref(), Some("2026-07-28"));
    let m = single(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":7}}}"#,
    );
    assert_eq!(m.protocol_version, None);
    assert!(matches!(
        err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_META":{}}}"#),
        NotMcp::FoldedKey { .. }
    ));
}
