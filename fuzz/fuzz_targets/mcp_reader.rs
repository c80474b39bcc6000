//! The MCP body reader on arbitrary bytes: never panics, stays within its allocation bound, gives
//! the same answer with and without `capture_params` (but for a captured params' folded twins and
//! undecodable values, checked on their own), and accepts only what serde_json also reads,
//! with the same method, id, params.name, params.uri, protocol version and params text; what it
//! accepts has no duplicate key, no nesting over 64, no key holding U+0000 and no key that a
//! case-insensitive decoder (Go, .NET) reads as an extracted field (independent oracles in
//! fuzz/src/lib.rs). A read with
//! memory kept from the previous inputs' reads (as the lifecycle keeps it) answers as a fresh one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_fuzz::{measure, oracle, reader_bound};
use toolgate_policy::mcp::{read_body, read_body_with, NotMcp, ReadOptions, ReadScratch};

thread_local! {
    /// The reader's memory across inputs, whatever state the last one (an error mid-body) left.
    static MEMORY: std::cell::RefCell<ReadScratch> = std::cell::RefCell::default();
}

fuzz_target!(|data: &[u8]| {
    let (captured, peak) = measure(|| {
        read_body(
            data,
            ReadOptions {
                capture_params: true,
            },
        )
    });
    assert!(
        peak <= reader_bound(data.len()),
        "reader used {peak} bytes of heap for a {}-byte body",
        data.len()
    );
    let plain = read_body(data, ReadOptions::default());
    let warm = MEMORY.with(|m| read_body_with(data, ReadOptions::default(), &mut m.borrow_mut()));
    assert_eq!(
        warm, plain,
        "a read with kept memory differs from a fresh one"
    );
    // Error text reaches logs and summaries: it must not break out of quotes.
    for e in [captured.as_ref().err(), plain.as_ref().err()]
        .into_iter()
        .flatten()
    {
        assert!(!e.to_string().contains(['"', '\n', '\r']), "{e}");
    }
    let body = match (&captured, &plain) {
        (Ok(c), Ok(p)) => {
            assert_eq!(c.is_batch(), p.is_batch());
            for (a, b) in c.messages().iter().zip(p.messages()) {
                assert_eq!(
                    (&a.method, a.id, &a.name, &a.uri),
                    (&b.method, b.id, &b.name, &b.uri)
                );
                assert!(b.params.is_none());
            }
            c
        }
        // Only a captured params is checked for keys that fold together and for what serde_json
        // cannot decode (docs/semantics.md §4: its contents reach CEL rules and authorizers); found while reading
        // params, it comes before what the plain read finds at the message's end.
        (Err(NotMcp::FoldedTwins { key, twin, .. }), _) => {
            let fold = |k: &str| {
                k.chars()
                    .flat_map(char::to_uppercase)
                    .flat_map(char::to_lowercase)
                    .collect::<String>()
            };
            assert!(
                key != twin && fold(key) == fold(twin),
                "{key:?} and {twin:?} are not twins"
            );
            return;
        }
        (Err(NotMcp::ParamsUndecodable { .. }), _) => {
            assert!(
                serde_json::from_slice::<Value>(data).is_err(),
                "serde_json decodes what was called undecodable"
            );
            return;
        }
        (Err(c), Err(p)) => {
            assert_eq!(c, p);
            return;
        }
        _ => panic!("capture_params changed the verdict: {captured:?} vs {plain:?}"),
    };
    let value: Value = match serde_json::from_slice(data) {
        Ok(v) => v,
        // serde_json refuses numbers beyond f64 (1e400), which RFC 8259 allows.
        Err(e) if e.to_string().contains("number out of range") => return,
        Err(e) => panic!("the reader accepted a body serde_json refuses ({e}): {body:?}"),
    };
    assert!(
        !oracle::has_duplicate_key(data),
        "the reader accepted a duplicate key: {body:?}"
    );
    assert!(
        oracle::depth(&value) <= 64,
        "the reader accepted nesting over 64"
    );
    if let Some(k) = oracle::nul_key(&value) {
        panic!("the reader accepted {k:?}, which a decoder that ends strings at NUL reads as another key");
    }
    if let Some(k) = oracle::folded_key(&value) {
        panic!(
            "the reader accepted {k:?}, which a case-insensitive decoder reads as another field"
        );
    }
    let values: Vec<&Value> = match &value {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    assert_eq!(body.is_batch(), value.is_array());
    assert_eq!(body.messages().len(), values.len());
    for (m, v) in body.messages().iter().zip(values) {
        assert_eq!(v.get("jsonrpc").and_then(Value::as_str), Some("2.0"));
        assert_eq!(m.method.as_deref(), v.get("method").and_then(Value::as_str));
        match m.id {
            Some(raw) => assert_eq!(
                serde_json::from_str::<Value>(raw).ok().as_ref(),
                v.get("id"),
                "id {raw}"
            ),
            None => assert!(v.get("id").is_none()),
        }
        let params = v.get("params");
        let field = |k: &str| params.and_then(|p| p.get(k)).and_then(Value::as_str);
        assert_eq!(m.name.as_deref(), field("name"));
        assert_eq!(m.uri.as_deref(), field("uri"));
        let meta = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str);
        assert_eq!(m.protocol_version.as_deref(), meta);
        match m.params {
            Some(raw) => assert_eq!(serde_json::from_str::<Value>(raw).ok().as_ref(), params),
            None => assert!(params.is_none()),
        }
    }
});
