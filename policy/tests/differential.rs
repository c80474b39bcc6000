//! Differential property test of the MCP reader against a reference that is the generator itself:
//! JSON-RPC messages are generated as values (method, id of every JSON type, params.name,
//! params.uri, nested arguments, extra keys), written out with random key order, whitespace and
//! escapes (`\uXXXX` for any character, surrogate pairs, short escapes, in keys and values), and
//! the reader must extract exactly what was generated. Bodies that some server's decoder reads
//! differently (a case variant of a read key: `Name`, `METHOD`, `ıd`, `paramſ`, a Kelvin sign; an
//! exact duplicate; a key holding U+0000) must be refused, never guessed. Deterministic (seeded), no dependency, so it
//! also runs compiled to wasm32 (`make test-wasm`).

use std::fmt::Write;

use toolgate_policy::mcp::{read_body, McpBody, NotMcp, ReadOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    fn pick<'x, T>(&mut self, xs: &'x [T]) -> &'x T {
        &xs[self.below(xs.len())]
    }
    fn word(&mut self, xs: &[&'static str]) -> &'static str {
        xs[self.below(xs.len())]
    }
}

/// A JSON value as generated (objects keep their key order and may hold duplicates on purpose).
#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Num(&'static str),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

const NUMBERS: [&str; 9] = [
    "0",
    "1",
    "-1",
    "7",
    "1.5e3",
    "-0.0",
    "12345678901234567890",
    "1E-2",
    "3.25",
];
const TEXT: [&str; 12] = [
    "get-sum",
    "echo",
    "tools/call",
    "file:///public/readme",
    "",
    "é",
    "😀",
    "\u{2028}",
    "a\"b",
    "back\\slash",
    "tab\there",
    "\u{0}",
];

fn text(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..1 + rng.below(3) {
        s.push_str(rng.word(&TEXT));
    }
    s
}

fn value(rng: &mut Rng, depth: usize) -> J {
    match if depth > 4 {
        rng.below(4)
    } else {
        rng.below(6)
    } {
        0 => J::Null,
        1 => J::Bool(rng.one_in(2)),
        2 => J::Num(rng.word(&NUMBERS)),
        3 => J::Str(text(rng)),
        4 => J::Arr((0..rng.below(4)).map(|_| value(rng, depth + 1)).collect()),
        _ => {
            let mut keys: Vec<String> = (0..rng.below(4))
                .map(|i| format!("{}{i}", text(rng)))
                .collect();
            keys.dedup();
            J::Obj(
                keys.into_iter()
                    .map(|k| (k, value(rng, depth + 1)))
                    .collect(),
            )
        }
    }
}

fn ws(rng: &mut Rng, out: &mut String) {
    if rng.one_in(3) {
        for _ in 0..1 + rng.below(3) {
            out.push(*rng.pick(&[' ', '\t', '\n', '\r']));
        }
    }
}

/// A JSON string for `s`, each character written plainly or escaped at random.
fn string(rng: &mut Rng, s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '/' => Some("\\/"),
            _ => None,
        };
        let must = matches!(c, '"' | '\\') || (c as u32) < 0x20;
        if must || rng.one_in(5) {
            match short {
                Some(e) if rng.one_in(2) || !must => out.push_str(e),
                _ => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(
                            out,
                            "{}",
                            if rng.one_in(2) {
                                format!("\\u{:04x}", u)
                            } else {
                                format!("\\u{:04X}", u)
                            }
                        );
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn write_json(rng: &mut Rng, j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => string(rng, s, out),
        J::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                write_json(rng, v, out);
                ws(rng, out);
            }
            out.push(']');
        }
        J::Obj(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                string(rng, k, out);
                ws(rng, out);
                out.push(':');
                ws(rng, out);
                write_json(rng, v, out);
                ws(rng, out);
            }
            out.push('}');
        }
    }
}

/// What the reader must extract from one message.
#[derive(Debug, PartialEq)]
struct Expected {
    method: Option<String>,
    /// The id as a value (the reader gives its raw text, compared after parsing it back).
    id: Option<J>,
    name: Option<String>,
    uri: Option<String>,
}

/// Spellings that case-insensitive decoders (Go's encoding/json, .NET's PropertyNameCaseInsensitive)
/// read as the field, and that are not it.
fn variant(rng: &mut Rng, field: &str) -> String {
    loop {
        let v: String = field
            .chars()
            .map(|c| match (c, rng.below(4)) {
                ('s', 0) => 'ſ',
                ('k', 0) => '\u{212a}',
                ('i', 0) => 'ı',
                (c, 1) => c.to_ascii_uppercase(),
                (c, _) => c,
            })
            .collect();
        if v != field {
            return v;
        }
    }
}

/// One message; `Err` when the generator made it something the reader must refuse.
fn message(rng: &mut Rng) -> (J, Result<Expected, Vec<&'static str>>) {
    let mut fields: Vec<(String, J)> = vec![("jsonrpc".into(), J::Str("2.0".into()))];
    let mut why: Vec<&'static str> = vec![];
    let id = match rng.below(9) {
        0 => None,
        1 => Some(J::Null),
        2 | 3 => Some(J::Num(rng.word(&NUMBERS))),
        4 | 5 => Some(J::Str(text(rng))),
        6 => {
            why.push("id of a wrong type");
            Some(
                rng.pick(&[J::Bool(true), J::Arr(vec![]), J::Obj(vec![])])
                    .clone(),
            )
        }
        _ => Some(J::Num("1")),
    };
    if let Some(id) = &id {
        fields.push(("id".into(), id.clone()));
    }
    let method = if rng.one_in(8) {
        fields.push(("result".into(), value(rng, 1)));
        None
    } else {
        let m = if rng.one_in(3) {
            text(rng)
        } else {
            rng.pick(&["tools/call", "resources/read", "prompts/get", "ping"])
                .to_string()
        };
        fields.push(("method".into(), J::Str(m.clone())));
        Some(m)
    };
    let (mut name, mut uri) = (None, None);
    if rng.below(5) > 0 {
        if rng.one_in(10) {
            fields.push(("params".into(), J::Arr(vec![J::Str("get-sum".into())])));
        } else {
            let mut p: Vec<(String, J)> = vec![];
            if rng.below(3) > 0 {
                if rng.one_in(6) {
                    p.push(("name".into(), J::Num("7")));
                } else {
                    let n = text(rng);
                    p.push(("name".into(), J::Str(n.clone())));
                    name = Some(n);
                }
            }
            if rng.one_in(2) {
                let u = text(rng);
                p.push(("uri".into(), J::Str(u.clone())));
                uri = Some(u);
            }
            p.push(("arguments".into(), value(rng, 1)));
            if rng.one_in(3) {
                p.push(("cursor".into(), value(rng, 2)));
            }
            // A case variant of a read key in params, or an exact duplicate.
            if rng.one_in(6) {
                let f = *rng.pick(&["name", "uri"]);
                p.push((variant(rng, f), J::Str("get-env".into())));
                why.push("case variant in params");
            } else if rng.one_in(12) && !p.is_empty() {
                let (k, _) = p[rng.below(p.len())].clone();
                p.push((k, J::Str("get-env".into())));
                why.push("duplicate key in params");
            }
            shuffle(rng, &mut p);
            fields.push(("params".into(), J::Obj(p)));
        }
    }
    // A case variant of a read message key.
    if rng.one_in(8) {
        let f = *rng.pick(&["jsonrpc", "id", "method", "params", "result", "error"]);
        fields.push((variant(rng, f), J::Str("tools/call".into())));
        why.push("case variant in the message");
    }
    // A key holding U+0000 anywhere (generated text includes it): a second key to the reader, the
    // key before the NUL to a decoder that ends strings there.
    if fields
        .iter()
        .any(|(k, v)| k.contains('\0') || has_nul_key(v))
    {
        why.push("key with U+0000");
    }
    shuffle(rng, &mut fields);
    let expected = if why.is_empty() {
        Ok(Expected {
            method,
            id,
            name,
            uri,
        })
    } else {
        Err(why)
    };
    (J::Obj(fields), expected)
}

fn has_nul_key(j: &J) -> bool {
    match j {
        J::Arr(items) => items.iter().any(has_nul_key),
        J::Obj(fields) => fields
            .iter()
            .any(|(k, v)| k.contains('\0') || has_nul_key(v)),
        _ => false,
    }
}

fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
}

/// The reader's raw id text read back as a generated value, for comparison.
fn parse_id(raw: &str) -> J {
    match serde_json::from_str::<serde_json::Value>(raw).expect("the raw id is JSON") {
        serde_json::Value::Null => J::Null,
        serde_json::Value::String(s) => J::Str(s),
        // The raw text is the literal as written.
        serde_json::Value::Number(_) => {
            J::Num(NUMBERS.iter().find(|n| **n == raw).copied().unwrap_or("?"))
        }
        other => panic!("id {other}"),
    }
}

impl PartialEq for J {
    fn eq(&self, other: &J) -> bool {
        match (self, other) {
            (J::Null, J::Null) => true,
            (J::Bool(a), J::Bool(b)) => a == b,
            (J::Num(a), J::Num(b)) => a == b,
            (J::Str(a), J::Str(b)) => a == b,
            _ => false,
        }
    }
}

#[test]
fn reader_agrees_with_the_generator_and_refuses_what_decoders_read_differently() {
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    let (mut agreed, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let batch = rng.one_in(4);
        let n = if batch { 1 + rng.below(3) } else { 1 };
        let (values, expected): (Vec<J>, Vec<_>) = (0..n).map(|_| message(&mut rng)).unzip();
        let mut body = String::new();
        ws(&mut rng, &mut body);
        if batch {
            write_json(&mut rng, &J::Arr(values), &mut body);
        } else {
            write_json(&mut rng, &values[0], &mut body);
        }
        ws(&mut rng, &mut body);
        let got = read_body(body.as_bytes(), ReadOptions::default());
        let mut why: Vec<&str> = vec![];
        let expected: Vec<Expected> = expected
            .into_iter()
            .filter_map(|e| e.map_err(|w| why.extend(w)).ok())
            .collect();
        let expected = if why.is_empty() {
            Ok(expected)
        } else {
            Err(why)
        };
        match (got, expected) {
            (Ok(b), Ok(expected)) => {
                assert_eq!(b.is_batch(), batch, "{body}");
                let got: Vec<Expected> = b
                    .messages()
                    .iter()
                    .map(|m| Expected {
                        method: m.method.as_deref().map(str::to_string),
                        id: m.id.map(parse_id),
                        name: m.name.as_deref().map(str::to_string),
                        uri: m.uri.as_deref().map(str::to_string),
                    })
                    .collect();
                assert_eq!(got, expected, "{body}");
                agreed += 1;
            }
            (Err(e), Err(why)) => {
                // Refused; when case variants are all that is wrong, as what they are.
                if why.iter().all(|w| w.starts_with("case variant")) {
                    assert!(
                        matches!(e, NotMcp::FoldedKey { .. }),
                        "{why:?}: {e:?} for {body}"
                    );
                }
                refused += 1;
            }
            (Ok(b), Err(why)) => panic!("{why:?}, yet read as {:?}: {body}", messages(&b)),
            (Err(e), Ok(expected)) => {
                panic!("refused ({e}) a valid body read as {expected:?}: {body}")
            }
        }
    }
    // Both sides exercised.
    assert!(
        agreed > 5_000 && refused > 2_000,
        "agreed {agreed}, refused {refused}"
    );
}

fn messages<'a>(b: &'a McpBody<'a>) -> Vec<(Option<&'a str>, Option<&'a str>)> {
    b.messages()
        .iter()
        .map(|m| (m.method.as_deref(), m.name.as_deref()))
        .collect()
}
