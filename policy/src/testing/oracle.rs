//! Oracles for the MCP body reader, independent of it: what a strict JSON reader, nesting depth and a
//! case-insensitive decoder say about a body. The reader's tests (tests/mcp_reader.rs) and the
//! `mcp_reader` fuzz target (fuzz/) check the reader against these; keep them independent of
//! `crate::mcp` (they must not share its tables or its parser).

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

/// Deserializes any JSON and fails on a duplicate key in any object.
struct Strict;

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if !seen.insert(k) {
                return Err(serde::de::Error::custom("duplicate key"));
            }
            map.next_value::<Strict>()?;
        }
        Ok(Strict)
    }
}

/// serde_json's verdict on `json` with duplicate keys refused at any depth: Ok for valid JSON
/// without duplicates; otherwise serde_json's error (its text contains "duplicate key" for a
/// duplicate). serde_json's recursion limit, 128, is over the reader's 64.
pub fn strict(json: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Strict>(json).map(|_| ())
}

/// The JSON has a duplicate key in some object (serde_json's `Value` keeps only the last), found
/// before any syntax error.
pub fn has_duplicate_key(json: &[u8]) -> bool {
    matches!(strict(json), Err(e) if e.to_string().contains("duplicate key"))
}

/// Nesting depth: a scalar is 0, an array or object one more than its deepest element.
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A decoder that matches keys to fields case-insensitively (Go's `encoding/json`, .NET with
/// `PropertyNameCaseInsensitive`) reads a key as a field when they are equal character by character
/// after simple upper- then lower-casing (`ſ`, `ı`, Kelvin sign included). Independent of the
/// reader's own table.
pub fn folds_to(key: &str, field: &str) -> bool {
    let fold = |c: char| {
        let mut up = c.to_uppercase();
        let (Some(u), None) = (up.next(), up.next()) else {
            return None;
        };
        let mut low = u.to_lowercase();
        let (Some(l), None) = (low.next(), low.next()) else {
            return None;
        };
        Some(l)
    };
    key.chars().count() == field.chars().count()
        && key
            .chars()
            .zip(field.chars())
            .all(|(a, b)| fold(a).is_some() && fold(a) == fold(b))
}

/// A key of some message or `params` object of `v` that a case-insensitive decoder reads as a field
/// the reader extracts, without being it exactly.
pub fn folded_key(v: &Value) -> Option<String> {
    const MESSAGE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
    const PARAMS: [&str; 2] = ["name", "uri"];
    let variant = |o: &Map<String, Value>, fields: &[&str]| {
        o.keys()
            .find(|k| fields.iter().any(|f| k.as_str() != *f && folds_to(k, f)))
            .cloned()
    };
    let message = |m: &Value| {
        let o = m.as_object()?;
        variant(o, &MESSAGE).or_else(|| {
            o.get("params")
                .and_then(Value::as_object)
                .and_then(|p| variant(p, &PARAMS))
        })
    };
    match v {
        Value::Array(a) => a.iter().find_map(message),
        m => message(m),
    }
}

/// A key of some object of `v`, at any depth, that holds U+0000: a decoder that ends strings at NUL
/// (C libraries) reads it as the key before the NUL.
pub fn nul_key(v: &Value) -> Option<String> {
    match v {
        Value::Array(a) => a.iter().find_map(nul_key),
        Value::Object(o) => o.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(k.clone())
            } else {
                nul_key(v)
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracles_see_what_they_say() {
        assert!(strict(br#"{"a":{"b":1,"c":[1,{"b":2}]}}"#).is_ok());
        assert!(has_duplicate_key(br#"{"a":{"b":1,"b":2}}"#));
        assert!(!has_duplicate_key(br#"{"a":{"b":1,"b":2"#[..10].as_ref()));
        assert_eq!(depth(&serde_json::json!([[1], {"a": [[]]}])), 4);
        assert!(
            folds_to("NAME", "name")
                && folds_to("\u{17f}ame", "same")
                && !folds_to("names", "name")
        );
        let v = serde_json::json!({"jsonrpc": "2.0", "method": "m", "params": {"Name": "x"}});
        assert_eq!(folded_key(&v), Some("Name".into()));
        assert_eq!(
            folded_key(&serde_json::json!({"jsonrpc": "2.0", "method": "m"})),
            None
        );
        assert_eq!(
            nul_key(&serde_json::json!([{"a": [{"b\u{0}": 1}]}])),
            Some("b\u{0}".into())
        );
        assert_eq!(nul_key(&serde_json::json!({"a": "b\u{0}"})), None);
    }
}
