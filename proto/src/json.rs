//! `serde_json::Value` <-> `google.protobuf.{Struct, Value, ListValue}`, following the protobuf JSON
//! mapping (google/protobuf/struct.proto): null <-> `null_value`, bool <-> `bool_value`, number <->
//! `number_value` (a double: integers beyond 2^53 lose precision, as in every protobuf runtime),
//! string <-> `string_value`, array <-> `list_value`, object <-> `struct_value`.
//!
//! Back to JSON, a `number_value` that is integral and within ±2^53 becomes a JSON integer (`1.0` ->
//! `1`, so a JSON-RPC `"id": 1` round-trips as written); NaN and ±infinity, which JSON cannot hold,
//! become the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (the protobuf JSON mapping's spelling); a
//! `Value` with no kind set becomes `null`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{Map, Number, Value as Json};

use crate::google::protobuf::{value::Kind, ListValue, NullValue, Struct, Value};

/// The `filter_metadata` namespace that carries the parsed JSON-RPC message in a `CheckRequest`
/// (`attributes.metadata_context.filter_metadata["mcp_proxy"]`, fields `jsonrpc`, `id`, `method`,
/// `params`), as Kuadrant's MCP gateway sets it, so Authorino rules on `mcp_proxy.method` /
/// `mcp_proxy.params.name` apply unchanged.
pub const MCP_PROXY_NAMESPACE: &str = "mcp_proxy";

/// A JSON value as a `google.protobuf.Value`.
pub fn to_value(json: &Json) -> Value {
    let kind = match json {
        Json::Null => Kind::NullValue(NullValue::NullValue as i32),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(items) => Kind::ListValue(to_list(items)),
        Json::Object(map) => Kind::StructValue(to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// JSON text straight to a `google.protobuf.Value` (the mapping of [`to_value`]), without a
/// `serde_json::Value` in between: half the allocations (measured natively: the largest part of
/// preparing a gRPC authorizer call was building `params` twice).
pub fn parse_value(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde::de::DeserializeSeed::deserialize(ValueSeed, &mut de)?;
    de.end()?;
    Ok(value)
}

struct ValueSeed;

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ValueSeed {
    type Value = Value;
    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::NullValue(NullValue::NullValue as i32)),
        })
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::BoolValue(b)),
        })
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::NumberValue(n as f64)),
        })
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::NumberValue(n as f64)),
        })
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::NumberValue(n)),
        })
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::StringValue(s.to_string())),
        })
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value {
            kind: Some(Kind::StringValue(s)),
        })
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(v) = seq.next_element_seed(ValueSeed)? {
            values.push(v);
        }
        Ok(Value {
            kind: Some(Kind::ListValue(ListValue { values })),
        })
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = alloc::collections::BTreeMap::new();
        // A repeated key keeps its last value, as serde_json::Value does.
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(ValueSeed)?;
            fields.insert(key, value);
        }
        Ok(Value {
            kind: Some(Kind::StructValue(Struct { fields })),
        })
    }
}

/// A JSON object as a `google.protobuf.Struct`.
pub fn to_struct(map: &Map<String, Json>) -> Struct {
    Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
    }
}

/// A JSON array as a `google.protobuf.ListValue`.
pub fn to_list(items: &[Json]) -> ListValue {
    ListValue {
        values: items.iter().map(to_value).collect(),
    }
}

/// A JSON value as a `Struct` if it is an object, `None` otherwise.
pub fn object_to_struct(json: &Json) -> Option<Struct> {
    json.as_object().map(to_struct)
}

/// A `google.protobuf.Value` as JSON.
pub fn from_value(value: &Value) -> Json {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::ListValue(list)) => Json::Array(from_list(list)),
        Some(Kind::StructValue(s)) => Json::Object(from_struct(s)),
    }
}

/// A `google.protobuf.Struct` as a JSON object.
pub fn from_struct(s: &Struct) -> Map<String, Json> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), from_value(v)))
        .collect()
}

/// A `google.protobuf.ListValue` as JSON array items.
pub fn from_list(list: &ListValue) -> Vec<Json> {
    list.values.iter().map(from_value).collect()
}

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0; // 2^53

fn number(n: f64) -> Json {
    if n.is_nan() {
        return Json::String("NaN".to_string());
    }
    if n.is_infinite() {
        return Json::String(if n > 0.0 { "Infinity" } else { "-Infinity" }.to_string());
    }
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER {
        return Json::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map(Json::Number).unwrap_or(Json::Null)
}

impl From<&Json> for Value {
    fn from(json: &Json) -> Self {
        to_value(json)
    }
}

impl From<&Value> for Json {
    fn from(value: &Value) -> Self {
        from_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parsed_text_is_the_value_of_its_json() {
        for text in [
            r#"{"name":"get-sum","arguments":{"a":1,"b":-2.5,"c":[true,null,"x",{"d":18446744073709551615}],"e":{}},"name":"twice"}"#,
            "[]",
            "\"\\u00e9\"",
            "0",
        ] {
            let json: Json = serde_json::from_str(text).unwrap();
            assert_eq!(parse_value(text).unwrap(), to_value(&json), "{text}");
        }
        assert!(parse_value("{\"a\":1} x").is_err());
        assert!(parse_value("1e400").is_err());
    }

    #[test]
    fn round_trip() {
        let j = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"x": [1, 2.5, null, true, "s", {}], "n": -3}}});
        let s = object_to_struct(&j).unwrap();
        assert_eq!(Json::Object(from_struct(&s)), j);
        let Some(Kind::StructValue(params)) = &s.fields["params"].kind else {
            panic!()
        };
        assert_eq!(
            params.fields["name"].kind,
            Some(Kind::StringValue("echo".into()))
        );
        assert_eq!(s.fields["id"].kind, Some(Kind::NumberValue(7.0)));
    }

    #[test]
    fn numbers() {
        assert_eq!(
            from_value(&Value {
                kind: Some(Kind::NumberValue(1.0))
            }),
            json!(1)
        );
        assert_eq!(
            from_value(&Value {
                kind: Some(Kind::NumberValue(0.5))
            }),
            json!(0.5)
        );
        assert_eq!(
            from_value(&Value {
                kind: Some(Kind::NumberValue(1e300))
            }),
            json!(1e300)
        );
        assert_eq!(
            from_value(&Value {
                kind: Some(Kind::NumberValue(f64::NAN))
            }),
            json!("NaN")
        );
        assert_eq!(
            from_value(&Value {
                kind: Some(Kind::NumberValue(f64::NEG_INFINITY))
            }),
            json!("-Infinity")
        );
        assert_eq!(from_value(&Value { kind: None }), Json::Null);
        assert_eq!(
            to_value(&json!(u64::MAX)).kind,
            Some(Kind::NumberValue(u64::MAX as f64))
        );
        assert!(object_to_struct(&json!([1])).is_none());
    }
}
