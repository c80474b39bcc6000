//! Tests of the MCP body reader (docs/semantics.md §4): extraction, strict JSON validation, fail-closed cases,
//! truncation at every prefix, and a deterministic fuzz loop checked against serde_json.

use std::borrow::Cow;

use toolgate_policy::mcp::{read_body, McpBody, McpMessage, MessageKind, NotMcp, ReadOptions, MAX_DEPTH};
use toolgate_policy::testing::oracle::{self, depth, folded_key};

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
    let body = format!(r#"[{CALL}, {{"jsonrpc":"2.0","method":"notifications/x"}} ,{{"jsonrpc":"2.0","id":1,"result":1}}]"#);
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
    let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"get\u002dsum"}}"#);
    assert_eq!(m.method.as_deref(), Some("tools/call"));
    assert_eq!(m.name.as_deref(), Some("get-sum"));
    assert!(matches!(m.name, Some(Cow::Owned(_))));
    let m = single(r#"{"jsonrpc":"2.0","method":"x","params":{"name":"\ud83d\ude00 \u00e9\"\\\b\f\n\r\t\u0000"}}"#);
    assert_eq!(m.name.as_deref(), Some("\u{1F600} é\"\\\u{8}\u{c}\n\r\t\u{0}"));
    // Raw multi-byte UTF-8 borrows.
    let m = single(r#"{"jsonrpc":"2.0","method":"x","params":{"name":"héllo 😀"}}"#);
    assert!(matches!(m.name, Some(Cow::Borrowed("héllo 😀"))));
    // The jsonrpc value is compared after decoding.
    single(r#"{"jsonrpc":"2\u002e0","method":"x"}"#);
}

#[test]
fn escaped_keys_are_decoded() {
    let m = single(r#"{"json\u0072pc":"2.0","met\u0068od":"tools/call","\u0070arams":{"n\u0061me":"t","\u0075ri":"file:///a"}}"#);
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
    let b = read_body(body.as_bytes(), ReadOptions { capture_params: true }).unwrap();
    assert_eq!(b.messages()[0].params, Some(r#"{"uri":"file:///x.txt","n":[1,{"a":2}]}"#));
    // Non-object params are captured too, but have no name/uri.
    let body = r#"{"jsonrpc":"2.0","method":"m","params":[{"name":"x"}]}"#;
    let b = read_body(body.as_bytes(), ReadOptions { capture_params: true }).unwrap();
    assert_eq!(b.messages()[0].params, Some(r#"[{"name":"x"}]"#));
    assert_eq!(b.messages()[0].name, None);
    let b = read_body(br#"{"jsonrpc":"2.0","method":"m","params":null}"#, ReadOptions { capture_params: true }).unwrap();
    assert_eq!(b.messages()[0].params, Some("null"));
}

#[test]
fn non_string_name_or_uri_is_absent() {
    for v in ["1", "null", "true", "{}", r#"["x"]"#, r#"{"name":"x"}"#] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{v},"uri":{v}}}}}"#);
        let m = single(&body);
        assert_eq!((m.name, m.uri), (None, None), "{body}");
    }
    // name/uri only count directly inside params.
    let m = single(r#"{"jsonrpc":"2.0","method":"m","name":"top","params":{"arguments":{"name":"deep","uri":"u"}}}"#);
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
    let base = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"#;
    let ok = format!("{base}{args}\"last\":0}}}}}}");
    assert_eq!(single(&ok).name.as_deref(), Some("t"));
    let dup = format!("{base}{args}\"key1234\":0}}}}}}");
    let offset = dup.rfind("\"key1234\"").unwrap();
    assert_eq!(read(&dup).unwrap_err(), NotMcp::DuplicateKey { key: "key1234".into(), offset });
    let dup = format!("{base}{args}\"ke\\u00797\":0}}}}}}");
    assert!(matches!(read(&dup), Err(NotMcp::DuplicateKey { key, .. }) if key == "key7"));
}

// ---------------------------------------------------------------------------------------------
// Not MCP: duplicates, depth
// ---------------------------------------------------------------------------------------------

#[test]
fn duplicate_keys() {
    let e = err(r#"{"jsonrpc":"2.0","method":"tools/list","method":"tools/call"}"#);
    assert_eq!(e, NotMcp::DuplicateKey { key: "method".into(), offset: 39 });
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
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"m","params":{"\u0061":1,"a":2}}"#), NotMcp::DuplicateKey { .. }));
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"m","params":{"\/":1,"/":2}}"#), NotMcp::DuplicateKey { .. }));
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"m","params":{"😀":1,"\ud83d\ude00":2}}"#), NotMcp::DuplicateKey { .. }));
    // In a batch element, and in the top-level message of a batch.
    assert!(matches!(
        err(r#"[{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}]"#),
        NotMcp::DuplicateKey { .. }
    ));
    // Empty key twice.
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"m","params":{"":1,"":2}}"#), NotMcp::DuplicateKey { .. }));
    // Not duplicates: prefixes, case.
    single(r#"{"jsonrpc":"2.0","method":"m","params":{"a":1,"ab":2,"A":3,"":4}}"#);
}

fn nested_params(arrays: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#, "[".repeat(arrays), "]".repeat(arrays))
}

#[test]
fn depth_limit() {
    assert_eq!(MAX_DEPTH, 64);
    // The message object is depth 1, so 63 nested arrays reach depth 64.
    single(&nested_params(63));
    assert!(matches!(err(&nested_params(64)), NotMcp::TooDeep { .. }));
    // Same with objects.
    let objs = |n: usize| format!(r#"{{"jsonrpc":"2.0","method":"m","params":{}1{}}}"#, r#"{"a":"#.repeat(n), "}".repeat(n));
    single(&objs(63));
    assert!(matches!(err(&objs(64)), NotMcp::TooDeep { .. }));
    // A bare array of depth 64 is valid JSON (but not a message); 65 is too deep.
    assert_eq!(err(&format!("{}{}", "[".repeat(64), "]".repeat(64))), NotMcp::NotAnObject);
    assert_eq!(err(&format!("{}{}", "[".repeat(65), "]".repeat(65))), NotMcp::TooDeep { offset: 64 });
    // Hostile inputs do not overflow anything.
    assert_eq!(err(&"[".repeat(100_000)), NotMcp::TooDeep { offset: 64 });
    assert!(matches!(err(&r#"{"a":"#.repeat(100_000)), NotMcp::TooDeep { .. }));
    assert!(matches!(err(&format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))), NotMcp::TooDeep { .. }));
}

// ---------------------------------------------------------------------------------------------
// Not MCP: invalid JSON
// ---------------------------------------------------------------------------------------------

fn with_arg(raw: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"x":{raw}}}}}}}"#)
}

#[test]
fn invalid_utf8() {
    let prefix = r#"{"jsonrpc":"2.0","method":"m","params":{"arguments":{"x":""#;
    for bad in [&[0xff][..], &[0xc0, 0x80], &[0xe0, 0x80, 0x80], &[0xed, 0xa0, 0x80], &[0xf4, 0x90, 0x80, 0x80], &[0xc3], &[0x80]]
    {
        let mut body = prefix.as_bytes().to_vec();
        body.extend_from_slice(bad);
        body.extend_from_slice(br#""}}}"#);
        assert_eq!(read_bytes(&body).unwrap_err(), NotMcp::InvalidUtf8 { offset: prefix.len() }, "{bad:?}");
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
        assert!(matches!(err(&with_arg(s)), NotMcp::LoneSurrogate { .. }), "{s}");
    }
    // In keys and extracted values too.
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"\udfff"}"#), NotMcp::LoneSurrogate { offset: 27 }));
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"m","params":{"\ud800":1}}"#), NotMcp::LoneSurrogate { .. }));
    single(&with_arg(r#""\uD83D\uDE00\uFFFF\uE000\u007f""#));
}

#[test]
fn bad_strings() {
    for s in ["\"a\nb\"", "\"\u{0}\"", "\"\u{1f}\"", "\"\t\""] {
        assert!(matches!(err(&with_arg(s)), NotMcp::ControlCharacter { .. }), "{s:?}");
    }
    for s in [r#""\x""#, r#""\u12G4""#, r#""\U0041""#, r#""\'""#, r#""\ ""#] {
        assert!(matches!(err(&with_arg(s)), NotMcp::InvalidEscape { .. }), "{s}");
    }
    assert!(matches!(err(r#"{"jsonrpc":"2.0","method":"a	b"}"#), NotMcp::ControlCharacter { offset: 28 }));
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
    for n in ["0", "-0", "0.0e-0", "1E5", "1e+5", "123456789012345678901234567890", "-0.000001", "1e400", "2.5E-3"] {
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
    for v in ["true", "false", "null", "[]", "{}", "[[],{},[{}]]", r#"{"":""}"#] {
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
    assert_eq!(err(&format!("{CALL} x")), NotMcp::TrailingData { offset: CALL.len() + 1 });
    assert!(matches!(err(&format!("{CALL}{CALL}")), NotMcp::TrailingData { .. }));
    assert!(matches!(err(&format!("{CALL}]")), NotMcp::TrailingData { .. }));
    assert!(matches!(err(&format!("{CALL},")), NotMcp::TrailingData { .. }));
    assert!(matches!(read_bytes(&[CALL.as_bytes(), b"\0"].concat()), Err(NotMcp::TrailingData { .. })));
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
    assert_eq!(err(r#"{"jsonrpc":"1.0","method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(r#"{"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(r#"{"jsonrpc":2.0,"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(r#"{"jsonrpc":"2.0 ","method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(r#"{"jsonrpc":null,"method":"m"}"#), NotMcp::NotJsonRpc2);
    assert_eq!(err(&format!(r#"[{CALL},{{"method":"m"}}]"#)), NotMcp::NotJsonRpc2);
    assert_eq!(err("{}"), NotMcp::NotJsonRpc2);
}

#[test]
fn method_and_id_shape() {
    for m in ["1", "null", "true", "{}", r#"["tools/call"]"#] {
        assert_eq!(err(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":{m}}}"#)), NotMcp::MethodNotString, "{m}");
    }
    for id in ["{}", "[]", "true", "false", r#"{"a":1}"#] {
        assert_eq!(err(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#)), NotMcp::BadId, "{id}");
    }
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1}"#), NotMcp::NeitherMethodNorResult);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"params":{"name":"x"}}"#), NotMcp::NeitherMethodNorResult);
    // A JSON error later in the body wins over a shape error earlier.
    assert!(matches!(err(r#"{"jsonrpc":"1.0","method":"m","x":tru}"#), NotMcp::InvalidJson { .. }));
}

#[test]
fn error_messages() {
    let cases: Vec<(NotMcp, &str)> = vec![
        (NotMcp::InvalidJson { offset: 3, expected: "':'" }, "invalid JSON at byte 3: expected ':'"),
        (NotMcp::UnexpectedEnd { expected: "a value" }, "JSON ends early: expected a value"),
        (NotMcp::InvalidUtf8 { offset: 9 }, "invalid UTF-8 at byte 9"),
        (NotMcp::ControlCharacter { offset: 9 }, "unescaped control character in string at byte 9"),
        (NotMcp::InvalidEscape { offset: 9 }, "invalid escape in string at byte 9"),
        (NotMcp::LoneSurrogate { offset: 9 }, "lone surrogate escape at byte 9"),
        (NotMcp::DuplicateKey { key: "a\"b".into(), offset: 9 }, r#"duplicate key 'a\x22b' at byte 9"#),
        (
            NotMcp::FoldedKey { key: "Name".into(), field: "name", offset: 9 },
            "key 'Name' at byte 9 reads as 'name' to case-insensitive JSON decoders",
        ),
        (NotMcp::TooDeep { offset: 9 }, "nesting deeper than 64 at byte 9"),
        (NotMcp::TrailingData { offset: 9 }, "trailing data after the JSON value at byte 9"),
        (NotMcp::EmptyBatch, "empty batch"),
        (NotMcp::NotAnObject, "JSON-RPC message is not an object"),
        (NotMcp::NotJsonRpc2, "jsonrpc is missing or not '2.0'"),
        (NotMcp::MethodNotString, "method is not a string"),
        (NotMcp::BadId, "id is not a string, number or null"),
        (NotMcp::NeitherMethodNorResult, "message has neither method nor result/error"),
        (NotMcp::EmptyBody, "empty body"),
        (NotMcp::Encoded { encoding: "gzip".into() }, "body is encoded ('gzip'); only identity is read"),
    ];
    for (e, msg) in cases {
        assert_eq!(e.to_string(), msg);
    }
    assert_eq!(err(r#"{"jsonrpc" "2.0"}"#).to_string(), "invalid JSON at byte 11: expected ':'");
    assert_eq!(err(r#"{"jsonrpc":"2.0""#).to_string(), "JSON ends early: expected ',' or '}'");
}

// ---------------------------------------------------------------------------------------------
// Truncation and fuzzing
// ---------------------------------------------------------------------------------------------

fn seeds() -> Vec<String> {
    vec![
        CALL.to_string(),
        r#"{"jsonrpc":"2.0","id":"a\"b\\c\u00e9","method":"tools\/call","params":{"name":"get\u002dsum","arguments":{"s":"\ud83d\ude00 héllo 😀","n":-0.5e-7,"t":true,"f":false,"z":null,"e":[],"o":{}}}}"#.to_string(),
        r#"[{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a b"}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},{"jsonrpc":"2.0","id":9,"result":{"ok":[1,2,{"a":"b"}]}}]"#.to_string(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"x","data":{"a":1,"\u0062":2}}}"#.to_string(),
        r#"{ "jsonrpc" : "2.0" , "id" : 1e3 , "method" : "ping" , "params" : { "a" : [ [ [ { } ] ] ] } }"#.to_string(),
        format!(r#"{{"jsonrpc":"2.0","method":"m","params":{{"x":{}1{}}}}}"#, "[".repeat(62), "]".repeat(62)),
    ]
}

#[test]
fn every_truncated_prefix_is_rejected() {
    for seed in seeds() {
        let full = seed.as_bytes();
        assert!(read_bytes(full).is_ok(), "seed must be valid: {seed}");
        for len in 0..full.len() {
            let r = read_bytes(&full[..len]);
            assert!(r.is_err(), "prefix of length {len} accepted: {:?}", String::from_utf8_lossy(&full[..len]));
        }
    }
}

/// What the reader extracts from one message, in serde_json terms: method, id, name, uri, params.
type Extracted = (Option<String>, Option<serde_json::Value>, Option<String>, Option<String>, Option<serde_json::Value>);

/// Reference reading of one message from a serde_json value; None = not MCP.
fn reference_message(v: &serde_json::Value, capture: bool) -> Option<Extracted> {
    let o = v.as_object()?;
    if o.get("jsonrpc")? != "2.0" {
        return None;
    }
    let method = match o.get("method") {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(_) => return None,
    };
    let id = match o.get("id") {
        None => None,
        Some(i @ (serde_json::Value::String(_) | serde_json::Value::Number(_) | serde_json::Value::Null)) => Some(i.clone()),
        Some(_) => return None,
    };
    if method.is_none() && !o.contains_key("result") && !o.contains_key("error") {
        return None;
    }
    let params = o.get("params");
    let field = |k: &str| params.and_then(|p| p.get(k)).and_then(|x| x.as_str()).map(str::to_string);
    Some((method, id, field("name"), field("uri"), if capture { params.cloned() } else { None }))
}

/// Check one input against the oracles; returns which outcome it had (for coverage counting).
fn check(input: &[u8], capture: bool) -> &'static str {
    let ours = read_body(input, ReadOptions { capture_params: capture });
    let value = serde_json::from_slice::<serde_json::Value>(input);
    let strict = oracle::strict(input);
    let out_of_range = matches!(&value, Err(e) if e.to_string().contains("number out of range"));
    match &ours {
        Ok(_)
        | Err(
            NotMcp::EmptyBatch
            | NotMcp::NotAnObject
            | NotMcp::NotJsonRpc2
            | NotMcp::MethodNotString
            | NotMcp::BadId
            | NotMcp::NeitherMethodNorResult,
        ) => {
            // We judged the JSON valid: serde_json must agree (it cannot represent huge exponents).
            if out_of_range {
                return "out-of-range";
            }
            let v = value.unwrap_or_else(|e| {
                panic!("we accepted JSON that serde_json rejects ({e}): {:?}", String::from_utf8_lossy(input))
            });
            assert!(strict.is_ok(), "we missed a duplicate key: {:?}", String::from_utf8_lossy(input));
            assert!(depth(&v) <= MAX_DEPTH, "we missed the depth limit");
            if let Some(k) = folded_key(&v) {
                // (A JSON-RPC-level problem earlier in the body may be reported instead.)
                assert!(
                    ours.is_err(),
                    "we accepted a key a case-insensitive decoder reads differently ({k:?}): {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            let expected: Option<Vec<_>> = match &v {
                serde_json::Value::Array(a) if !a.is_empty() => a.iter().map(|m| reference_message(m, capture)).collect(),
                serde_json::Value::Array(_) => None,
                m => reference_message(m, capture).map(|x| vec![x]),
            };
            match (&ours, expected) {
                (Ok(body), Some(expected)) => {
                    assert_eq!(body.is_batch(), v.is_array());
                    let got: Vec<_> = body
                        .messages()
                        .iter()
                        .map(|m| {
                            (
                                m.method.as_deref().map(str::to_string),
                                m.id.map(|i| serde_json::from_str::<serde_json::Value>(i).unwrap()),
                                m.name.as_deref().map(str::to_string),
                                m.uri.as_deref().map(str::to_string),
                                m.params.map(|p| serde_json::from_str::<serde_json::Value>(p).unwrap()),
                            )
                        })
                        .collect();
                    assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(input));
                    "ok"
                }
                (Err(_), None) => "not-mcp",
                (o, e) => panic!("disagreement on {:?}: ours {o:?}, reference {e:?}", String::from_utf8_lossy(input)),
            }
        }
        Err(NotMcp::DuplicateKey { .. }) => {
            // Both parsers read left to right, so the oracle must stop at the same duplicate (or
            // earlier, at a huge exponent serde_json cannot represent). A later syntax error is not
            // reached by either.
            let why = match &strict {
                Ok(_) => panic!("false duplicate: {:?}", String::from_utf8_lossy(input)),
                Err(e) => e.to_string(),
            };
            assert!(
                why.contains("duplicate key") || why.contains("number out of range"),
                "we saw a duplicate, serde_json saw {why}: {:?}",
                String::from_utf8_lossy(input)
            );
            "dup"
        }
        Err(NotMcp::FoldedKey { key, .. }) => {
            // The oracle finds a case-folded field name in a message or params (unless the JSON
            // is invalid further on: the reader stops at the first problem).
            if let (Ok(v), Ok(_)) = (&value, &strict) {
                assert!(folded_key(v).is_some(), "false FoldedKey {key:?}: {:?}", String::from_utf8_lossy(input));
            }
            "folded"
        }
        Err(NotMcp::TooDeep { .. }) => {
            // (With a duplicate key, serde_json's Value may have dropped the deep subtree.)
            if let (Ok(v), Ok(_)) = (&value, &strict) {
                assert!(depth(v) > MAX_DEPTH, "false TooDeep");
            }
            "deep"
        }
        Err(e) => {
            // A syntax error: serde_json must reject the input too.
            assert!(value.is_err(), "we rejected valid JSON with {e}: {:?}", String::from_utf8_lossy(input));
            "syntax"
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'x, T>(&mut self, xs: &'x [T]) -> &'x T {
        &xs[self.below(xs.len())]
    }
}

const INTERESTING: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"\\",
    b" ",
    b"\n",
    b"0",
    b"1",
    b"-",
    b".",
    b"e",
    b"E",
    b"+",
    b"true",
    b"null",
    b"false",
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"\\u0061",
    b"\"a\"",
    b"\"a\":1,",
    b"\xff",
    b"\xc3",
    b"\xa9",
    b"\x00",
    b"\x1f",
    b"\x7f",
    b"\"method\":",
    b"\"name\":",
    b"\"jsonrpc\":\"2.0\",",
    b"e999",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let pos = rng.below(input.len() + 1);
    match rng.below(7) {
        0 if pos < input.len() => input[pos] = rng.next() as u8,
        1 if pos < input.len() => {
            input.remove(pos);
        }
        2 => input.insert(pos, rng.next() as u8),
        3 | 4 => {
            let s = rng.pick(INTERESTING);
            input.splice(pos..pos, s.iter().copied());
        }
        5 if pos < input.len() => {
            let end = (pos + 1 + rng.below(24)).min(input.len());
            let chunk = input[pos..end].to_vec();
            let at = rng.below(input.len() + 1);
            input.splice(at..at, chunk);
        }
        _ => input.truncate(pos),
    }
}

/// Random JSON text (valid unless `mutate` breaks it), with a small key alphabet so duplicates and
/// extracted fields come up often, and depths around the limit.
fn gen_value(rng: &mut Rng, out: &mut String, depth: usize, max_depth: usize) {
    const KEYS: &[&str] = &[
        "a",
        "b",
        "\\u0061",
        "name",
        "uri",
        "n\\u0061me",
        "method",
        "params",
        "id",
        "jsonrpc",
        "result",
        "error",
        "",
        "\\ud83d\\ude00",
        "😀",
    ];
    const SCALARS: &[&str] = &[
        "1",
        "-0.5e3",
        "0",
        "true",
        "false",
        "null",
        "\"x\"",
        "\"get\\u002dsum\"",
        "\"2.0\"",
        "\"tools/call\"",
        "\"\\n\\/é\"",
        "1E+2",
        "12345678901234567890",
    ];
    let kind = if depth >= max_depth { 2 } else { rng.below(3) };
    match kind {
        0 => {
            out.push('{');
            // Now and then a big object (hashed duplicate detection), keys drawn from 0..120 so
            // that duplicates are likely, some with an escaped spelling.
            let big = rng.below(12) == 0;
            let n = if big { 14 + rng.below(40) } else { rng.below(4) };
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                if big {
                    let k = rng.below(120);
                    if rng.below(4) == 0 {
                        out.push_str(&format!("\\u006b{k}"));
                    } else {
                        out.push_str(&format!("k{k}"));
                    }
                } else {
                    let k: &&str = rng.pick(KEYS);
                    out.push_str(k);
                }
                out.push_str("\":");
                gen_value(rng, out, depth + 1, max_depth);
            }
            out.push('}');
        }
        1 => {
            out.push('[');
            let n = rng.below(4);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                gen_value(rng, out, depth + 1, max_depth);
            }
            out.push(']');
        }
        _ => {
            let v: &&str = rng.pick(SCALARS);
            out.push_str(v)
        }
    }
}

/// Usually `k`; sometimes a spelling a case-insensitive decoder reads as `k`: ASCII case flips,
/// `ſ` for s, the Kelvin sign for k, `ı` for i, raw or as `\u` escapes.
fn key_variant(rng: &mut Rng, k: &str) -> String {
    if rng.below(6) != 0 {
        return k.to_string();
    }
    k.chars()
        .map(|c| match (c, rng.below(4)) {
            ('s', 0) => "\\u017f".to_string(),
            ('s', 1) => "\u{17f}".to_string(),
            ('k', 0) => "\\u212A".to_string(),
            ('k', 1) => "\u{212a}".to_string(),
            ('i', 0) => "\u{131}".to_string(),
            ('i', 1) => "\\u0131".to_string(),
            (c, 2) => c.to_ascii_uppercase().to_string(),
            (c, 3) => format!("\\u{:04X}", c.to_ascii_uppercase() as u32),
            (c, _) => c.to_string(),
        })
        .collect()
}

fn gen_message(rng: &mut Rng) -> String {
    let mut s = String::from("{");
    let mut fields: Vec<String> = vec![];
    if rng.below(10) > 0 {
        fields.push(r#""jsonrpc":"2.0""#.into());
    }
    for (k, p) in [("id", 3), ("method", 2), ("params", 2), ("result", 5), ("x", 3)] {
        if rng.below(p) == 0 {
            continue;
        }
        let mut v = String::new();
        match (k, rng.below(3)) {
            ("id", 0) => v.push_str("\"i\\u0064\""),
            ("method", 0) => v.push_str("\"tools/call\""),
            ("params", 0) => v.push_str(&format!(
                r#"{{"{}":"get\u002dsum","{}":"u","arguments":{{"a":[1,{{"b":null}}]}}}}"#,
                key_variant(rng, "name"),
                key_variant(rng, "uri")
            )),
            _ if rng.below(6) == 0 => {
                // A chain of containers around the depth limit (the message object is depth 1).
                let n = 58 + rng.below(10);
                let mut close = Vec::with_capacity(n);
                for _ in 0..n {
                    if rng.below(2) == 0 {
                        v.push('[');
                        close.push(']');
                    } else {
                        v.push_str(r#"{"a":1,"b":"#);
                        close.push('}');
                    }
                }
                gen_value(rng, &mut v, 0, 0);
                v.extend(close.iter().rev());
            }
            _ => gen_value(rng, &mut v, 1, 4),
        }
        fields.push(format!("\"{}\":{v}", key_variant(rng, k)));
    }
    for i in 0..fields.len() {
        let j = rng.below(fields.len());
        fields.swap(i, j);
    }
    s.push_str(&fields.join(","));
    s.push('}');
    s
}

#[test]
fn fuzz_mutations_against_serde_json() {
    let seeds = seeds();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut outcomes = std::collections::BTreeMap::new();
    for iter in 0..100_000 {
        let mut input = match iter % 4 {
            0 => (0..rng.below(64)).map(|_| *rng.pick(b"{}[]\",:\\ 0123-.eEtruefalsn\xff\x00a")).collect(),
            1 => gen_message(&mut rng).into_bytes(),
            2 => {
                let n = 1 + rng.below(3);
                format!("[{}]", (0..n).map(|_| gen_message(&mut rng)).collect::<Vec<_>>().join(",")).into_bytes()
            }
            _ => rng.pick(&seeds).clone().into_bytes(),
        };
        if iter % 4 != 1 || rng.below(2) == 0 {
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input);
            }
        }
        *outcomes.entry(check(&input, iter % 3 == 0)).or_insert(0usize) += 1;
    }
    // The loop must exercise every outcome, not just syntax errors.
    for k in ["ok", "not-mcp", "dup", "deep", "syntax", "folded"] {
        assert!(outcomes.get(k).copied().unwrap_or(0) > 100, "too few {k}: {outcomes:?}");
    }
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
    let response = r#"{"jsonrpc":"2.0","id":1,"Method":"tools/call","result":{},"params":{"name":"get-env"}}"#;
    assert_eq!(folded(response), ("Method".into(), "method"));
    for (body, key, field) in [
        (r#"{"jsonrpc":"2.0","ID":1,"method":"ping"}"#, "ID", "id"),
        (r#"{"JSONRPC":"2.0","id":1,"method":"ping"}"#, "JSONRPC", "jsonrpc"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping","PARAMS":{}}"#, "PARAMS", "params"),
        (r#"{"jsonrpc":"2.0","id":1,"Result":{}}"#, "Result", "result"),
        (r#"{"jsonrpc":"2.0","id":1,"erroR":{}}"#, "erroR", "error"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"URI":"file:///etc"}}"#, "URI", "uri"),
        // Unicode simple folding: long s, Kelvin sign; .NET upper-casing: dotless i.
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"param\u{17f}\":{}}", "param\u{17f}", "params"),
        ("{\"j\u{17f}onrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}", "j\u{17f}onrpc", "jsonrpc"),
        ("{\"jsonrpc\":\"2.0\",\"\u{131}d\":1,\"method\":\"x\"}", "\u{131}d", "id"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"N\u0061me":"a","n\u0041me":"b"}}"#, "Name", "name"),
        // Escaped spellings are decoded first.
        (r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"\u004eame":"a"}}"#, "Name", "name"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"x","param\u017f":{}}"#, "param\u{17f}", "params"),
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
        assert!(matches!(err(bad), NotMcp::FoldedKey { key: k, .. } if k == key), "{bad}");
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
    assert!(matches!(err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_META":{}}}"#), NotMcp::FoldedKey { .. }));
}
