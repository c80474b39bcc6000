//! The CheckRequest written straight to protobuf bytes.
//!
//! prost stays the home of the message types (and decodes every answer); this writes the one
//! message a gRPC call sends without building it first. Why by hand, measured natively with
//! `benches/lifecycle.rs` under callgrind ((g1)'s request: 300 B tools/call, 11 headers, no
//! forwardBody): building the prost `CheckRequest` (a BTreeMap of owned header Strings, the params
//! as a Struct tree of owned Strings and BTreeMaps), encoding it (prost computes a nested message's
//! length at each level it is nested in, so the headers and the params Struct were measured 4–5
//! times) and dropping it cost 44.0 k instructions per request, 48% of the whole ExternalAuth
//! request; with this writer, from the same inputs, preparing the call costs 13.7 k (6.6 k of it
//! serde_json reading the params text). `authz/tests.rs` checks that what it
//! writes decodes to the message prost would have built, field for field.
//!
//! A nested message gets a one-byte length placeholder, patched when it ends (and widened, moving
//! its bytes, only when it is 128 bytes or longer), so nothing is measured twice. Fields are written
//! as prost writes them: in field-number order, proto3 defaults (empty strings, zero integers)
//! left out, oneof members always written. The `params` Struct keeps its keys in the body's order
//! (prost's BTreeMap sorts them): the same map once decoded; a repeated key is written twice and
//! the last one wins when decoded, as it did in the BTreeMap.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

/// A protobuf message being written.
#[derive(Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Writer { buf: Vec::with_capacity(n) }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field << 3 | u32::from(wire_type)));
    }

    /// A `string` or `bytes` field (left out when empty, as proto3 does).
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.bytes_always(field, b);
        }
    }

    /// A `string` or `bytes` member of a oneof (written even when empty).
    pub fn bytes_always(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// An `int64` field (left out when 0).
    pub fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, VARINT);
            self.varint(v as u64);
        }
    }

    /// A `double` member of a oneof.
    fn double_always(&mut self, field: u32, v: f64) {
        self.key(field, I64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A `bool` or enum member of a oneof.
    fn varint_always(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    /// A nested message (written even when empty: a set message field), its fields written by `f`.
    pub fn message<R>(&mut self, field: u32, f: impl FnOnce(&mut Self) -> R) -> R {
        self.key(field, LEN);
        let at = self.buf.len();
        self.buf.push(0);
        let r = f(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
        } else {
            let mut prefix = [0u8; 10];
            let mut n = 0;
            let mut v = len as u64;
            while v >= 0x80 {
                prefix[n] = (v as u8) | 0x80;
                v >>= 7;
                n += 1;
            }
            prefix[n] = v as u8;
            self.buf[at] = prefix[0];
            self.buf.splice(at + 1..at + 1, prefix[1..=n].iter().copied());
        }
        r
    }

    /// One entry of a `map<string, V>` field: key 1, value (a message) 2, written by `value`.
    pub fn map_entry<R>(&mut self, field: u32, key: &str, value: impl FnOnce(&mut Self) -> R) -> R {
        self.message(field, |w| {
            w.bytes(1, key.as_bytes());
            w.message(2, value)
        })
    }

    /// One entry of a `map<string, string>` field.
    pub fn string_entry(&mut self, field: u32, key: &str, value: &str) {
        self.message(field, |w| {
            w.bytes(1, key.as_bytes());
            w.bytes(2, value.as_bytes());
        });
    }

    /// A `map<string, google.protobuf.Value>` entry (a Struct field) whose value is the JSON text
    /// `json`, following the protobuf JSON mapping as `toolgate_ext_authz_proto::json::parse_value`
    /// does. Text that is not one JSON value (e.g. a number out of range) writes nothing and is an
    /// error.
    pub fn json_entry(&mut self, field: u32, key: &str, json: &str) -> Result<(), serde_json::Error> {
        let mark = self.buf.len();
        let written = self.map_entry(field, key, |w| {
            let mut de = serde_json::Deserializer::from_str(json);
            ValueSeed(w).deserialize(&mut de)?;
            de.end()
        });
        if written.is_err() {
            self.buf.truncate(mark);
        }
        written
    }

    /// The fields of a `google.protobuf.Value` of the string `s`.
    pub fn string_value(&mut self, s: &str) {
        self.bytes_always(3, s.as_bytes());
    }
}

/// Writes the fields of a `google.protobuf.Value` (`oneof kind`: null 1, number 2, string 3, bool
/// 4, struct 5, list 6) from one JSON value.
struct ValueSeed<'w>(&'w mut Writer);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.varint_always(1, 0);
        Ok(())
    }
    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.0.varint_always(4, u64::from(b));
        Ok(())
    }
    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.0.double_always(2, n as f64);
        Ok(())
    }
    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.0.double_always(2, n as f64);
        Ok(())
    }
    fn visit_f64<E>(self, n: f64) -> Result<(), E> {
        self.0.double_always(2, n);
        Ok(())
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.string_value(s);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // ListValue { repeated Value values = 1 }
        self.0.message(6, |w| {
            loop {
                // A Value with a kind is never the default: prost writes every element.
                let mut more = false;
                w.message(1, |w| -> Result<(), A::Error> {
                    more = seq.next_element_seed(ValueSeed(w))?.is_some();
                    Ok(())
                })?;
                if !more {
                    // The element opened for a value that was not there: drop its key and length.
                    w.buf.truncate(w.buf.len() - 2);
                    return Ok(());
                }
            }
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Struct { map<string, Value> fields = 1 }
        self.0.message(5, |w| {
            while let Some(key) = map.next_key_seed(KeySeed)? {
                w.map_entry(1, &key, |w| map.next_value_seed(ValueSeed(w)))?;
            }
            Ok(())
        })
    }
}

/// A Struct key, borrowed from the JSON text when it has no escape.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = std::borrow::Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = std::borrow::Cow<'de, str>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(s))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(s.to_string()))
    }
}
