//! Truncation at every prefix, and a deterministic fuzz loop checked against serde_json and the
//! strict oracle.

use super::*;

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
            assert!(
                r.is_err(),
                "prefix of length {len} accepted: {:?}",
                String::from_utf8_lossy(&full[..len])
            );
        }
    }
}

/// What the reader extracts from one message, in serde_json terms: method, id, name, uri, params.
type Extracted = (
    Option<String>,
    Option<serde_json::Value>,
    Option<String>,
    Option<String>,
    Option<serde_json::Value>,
);

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
        Some(
            i @ (serde_json::Value::String(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::Null),
        ) => Some(i.clone()),
        Some(_) => return None,
    };
    if method.is_none() && !o.contains_key("result") && !o.contains_key("error") {
        return None;
    }
    let params = o.get("params");
    let field = |k: &str| {
        params
            .and_then(|p| p.get(k))
            .and_then(|x| x.as_str())
            .map(str::to_string)
    };
    Some((
        method,
        id,
        field("name"),
        field("uri"),
        if capture { params.cloned() } else { None },
    ))
}

/// Check one input against the oracles; returns which outcome it had (for coverage counting).
fn check(input: &[u8], capture: bool) -> &'static str {
    let ours = read_body(
        input,
        ReadOptions {
            capture_params: capture,
        },
    );
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
                panic!(
                    "we accepted JSON that serde_json rejects ({e}): {:?}",
                    String::from_utf8_lossy(input)
                )
            });
            assert!(
                strict.is_ok(),
                "we missed a duplicate key: {:?}",
                String::from_utf8_lossy(input)
            );
            assert!(depth(&v) <= MAX_DEPTH, "we missed the depth limit");
            if let Some(k) = folded_key(&v) {
                // (A JSON-RPC-level problem earlier in the body may be reported instead.)
                assert!(
                    ours.is_err(),
                    "we accepted a key a case-insensitive decoder reads differently ({k:?}): {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            if let Some(k) = nul_key(&v) {
                assert!(
                    ours.is_err(),
                    "we accepted a key with U+0000 ({k:?}): {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            let expected: Option<Vec<_>> = match &v {
                serde_json::Value::Array(a) if !a.is_empty() => {
                    a.iter().map(|m| reference_message(m, capture)).collect()
                }
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
                                m.params
                                    .map(|p| serde_json::from_str::<serde_json::Value>(p).unwrap()),
                            )
                        })
                        .collect();
                    assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(input));
                    "ok"
                }
                (Err(_), None) => "not-mcp",
                (o, e) => panic!(
                    "disagreement on {:?}: ours {o:?}, reference {e:?}",
                    String::from_utf8_lossy(input)
                ),
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
                assert!(
                    folded_key(v).is_some(),
                    "false FoldedKey {key:?}: {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            "folded"
        }
        Err(NotMcp::KeyWithNul { key, .. }) => {
            // serde_json reads the key (it holds U+0000) unless the JSON is invalid further on.
            assert!(key.contains('\0'), "{key:?}");
            if let (Ok(v), Ok(_)) = (&value, &strict) {
                assert!(
                    nul_key(v).is_some(),
                    "false KeyWithNul {key:?}: {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            "nul-key"
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
            assert!(
                value.is_err(),
                "we rejected valid JSON with {e}: {:?}",
                String::from_utf8_lossy(input)
            );
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
        "name\\u0000",
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
            let n = if big {
                14 + rng.below(40)
            } else {
                rng.below(4)
            };
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
    for (k, p) in [
        ("id", 3),
        ("method", 2),
        ("params", 2),
        ("result", 5),
        ("x", 3),
    ] {
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
            0 => (0..rng.below(64))
                .map(|_| *rng.pick(b"{}[]\",:\\ 0123-.eEtruefalsn\xff\x00a"))
                .collect(),
            1 => gen_message(&mut rng).into_bytes(),
            2 => {
                let n = 1 + rng.below(3);
                format!(
                    "[{}]",
                    (0..n)
                        .map(|_| gen_message(&mut rng))
                        .collect::<Vec<_>>()
                        .join(",")
                )
                .into_bytes()
            }
            _ => rng.pick(&seeds).clone().into_bytes(),
        };
        if iter % 4 != 1 || rng.below(2) == 0 {
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input);
            }
        }
        *outcomes
            .entry(check(&input, iter % 3 == 0))
            .or_insert(0usize) += 1;
    }
    // The loop must exercise every outcome, not just syntax errors.
    for k in [
        "ok", "not-mcp", "dup", "deep", "syntax", "folded", "nul-key",
    ] {
        assert!(
            outcomes.get(k).copied().unwrap_or(0) > 100,
            "too few {k}: {outcomes:?}"
        );
    }
}
