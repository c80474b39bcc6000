//! The CheckRequest written straight to protobuf bytes.
//!
//! prost stays the home of the message types (and decodes every answer); this writes the one
//! message a gRPC call sends without building it first. Why by hand: building the prost
//! `CheckRequest` (a BTreeMap of owned header Strings, the params as a Struct tree of owned Strings
//! and BTreeMaps), encoding it (prost computes a nested message's length at each level it is nested
//! in, so the headers and the params Struct were measured several times over) and dropping it was
//! a large part of an ExternalAuth request's work (docs/design/external-auth.md; measured
//! natively by `benches/lifecycle.rs` `count N ea` under callgrind). `authz/tests.rs` checks that
//! what it writes decodes to the message prost would have built, field for field.
//!
//! The `id` and `params` JSON texts become `google.protobuf.Value`s on the MCP reader's scanning
//! primitives (`mcp/scan.rs`) rather than through serde_json's visitor (most of the cost is
//! decoding escaped arguments and patching nested lengths either way): what the gain is lies less
//! in this pass than in sharing the scanner with the reader (numbers are still
//! converted by serde_json unless they are short integers, so every double is the one serde_json
//! gives; `json_values_are_written_as_serde_json_reads_them` compares the two on numbers of every
//! form, nesting at serde_json's limit and text it refuses).
//!
//! Lengths: every message whose size is known before it is written (the headers, the request's
//! attributes, and the messages around the `mcp_proxy` Struct once that is written: `head` and the
//! `*_size` functions) gets its length up front. Within a Struct written from JSON text, a nested
//! message gets a one-byte length placeholder, patched when it ends (and widened, moving its
//! bytes, only when it is 128 bytes or longer), so nothing is measured twice. Fields are written
//! in field-number order, proto3 defaults (empty strings, zero integers) left out, oneof members
//! always written; map entries (headers, Struct fields) in the order they come, which decodes to
//! the same maps as prost's sorted BTreeMaps (a repeated Struct key is written twice and the last
//! one wins when decoded, as in the BTreeMap).

use crate::mcp::scan::{
    colon, decode_into, expected_at, scan_literal, scan_number, scan_string, skip_ws,
};
use crate::mcp::NotMcp;

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
        Writer {
            buf: Vec::with_capacity(n),
        }
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

    /// The key and length of a nested message of `len` bytes, written next (see [`message_size`]).
    pub fn head(&mut self, field: u32, len: usize) {
        self.key(field, LEN);
        self.varint(len as u64);
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
        let at = self.open(field);
        let r = f(self);
        self.close(at);
        r
    }

    /// Starts a nested message: its key and a one-byte length placeholder, at the returned offset.
    fn open(&mut self, field: u32) -> usize {
        self.key(field, LEN);
        self.buf.push(0);
        self.buf.len() - 1
    }

    /// Ends the message whose placeholder is at `at`: its length written there, the message's
    /// bytes moved once (one memmove, not `Vec::splice`'s generic move, which costs measurably more
    /// with (g1)'s params in `benches/lifecycle.rs`) when the length needs more than one byte.
    fn close(&mut self, at: usize) {
        let len = self.buf.len().saturating_sub(at + 1);
        if len < 0x80 {
            if let Some(b) = self.buf.get_mut(at) {
                *b = len as u8;
            }
            return;
        }
        let mut prefix = [0u8; 10];
        let mut n = 0;
        let mut v = len as u64;
        while v >= 0x80 {
            prefix[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        prefix[n] = v as u8;
        let end = self.buf.len();
        self.buf.resize(end + n, 0);
        self.buf.copy_within(at + 1..end, at + 1 + n);
        if let Some(dst) = self.buf.get_mut(at..=at + n) {
            dst.copy_from_slice(&prefix[..=n]);
        }
    }

    /// One entry of a `map<string, V>` field: key 1, value (a message) 2, written by `value`.
    pub fn map_entry<R>(&mut self, field: u32, key: &str, value: impl FnOnce(&mut Self) -> R) -> R {
        self.message(field, |w| {
            w.bytes(1, key.as_bytes());
            w.message(2, value)
        })
    }

    /// One entry of a `map<string, string>` field. Its length is known before it is written: no
    /// placeholder to patch (the request's headers are most of the entries written).
    pub fn string_entry(&mut self, field: u32, key: &str, value: &str) {
        self.head(field, bytes_size(1, key.len()) + bytes_size(2, value.len()));
        self.bytes(1, key.as_bytes());
        self.bytes(2, value.as_bytes());
    }

    /// A `map<string, google.protobuf.Value>` entry (a Struct field) whose value is the JSON text
    /// `json`, following the protobuf JSON mapping as `toolgate_ext_authz_proto::json::parse_value`
    /// does. Text that is not one JSON value (e.g. a number out of range) writes nothing and is an
    /// error.
    pub fn json_entry(&mut self, field: u32, key: &str, json: &str) -> Result<(), NotAValue> {
        let mark = self.buf.len();
        let written = self.map_entry(field, key, |w| w.json_value(json));
        if written.is_err() {
            self.buf.truncate(mark);
        }
        written
    }

    /// The fields of a `google.protobuf.Value` of the string `s`.
    pub fn string_value(&mut self, s: &str) {
        self.bytes_always(3, s.as_bytes());
    }

    /// The fields of a `google.protobuf.Value` (`oneof kind`: null 1, number 2, string 3, bool 4,
    /// struct 5, list 6) of the JSON text `json`, read with the MCP reader's scanning primitives:
    /// objects become Structs (keys in the text's order), arrays ListValues, numbers doubles as
    /// serde_json gives them, strings decoded.
    fn json_value(&mut self, json: &str) -> Result<(), NotAValue> {
        let b = json.as_bytes();
        // The open messages, innermost last: each container's Struct or ListValue, and within it
        // a member's map entry and its Value, or an element's Value.
        let mut open = Stack::<usize>::new();
        // The open containers, innermost last: true for an object.
        let mut containers = Stack::<bool>::new();
        let mut scratch = String::new();
        let mut pos = skip_ws(b, 0);
        'value: loop {
            match b.get(pos) {
                Some(&c @ (b'{' | b'[')) => {
                    if containers.len + 1 >= MAX_NESTING {
                        return Err(NotAValue::TooDeep);
                    }
                    let object = c == b'{';
                    open.push(self.open(if object { 5 } else { 6 }));
                    pos = skip_ws(b, pos + 1);
                    if b.get(pos) == Some(if object { &b'}' } else { &b']' }) {
                        pos += 1;
                        self.close_last(&mut open);
                    } else {
                        containers.push(object);
                        if object {
                            pos = self.member(json, pos, &mut open, &mut scratch)?;
                        } else {
                            open.push(self.open(1));
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let (close, escaped) = scan_string(b, pos)?;
                    let raw = json.get(pos + 1..close).unwrap_or("");
                    if escaped {
                        scratch.clear();
                        decode_into(raw, &mut scratch);
                        self.string_value(&scratch);
                    } else {
                        self.string_value(raw);
                    }
                    pos = close + 1;
                }
                Some(b'-' | b'0'..=b'9') => {
                    let end = scan_number(b, pos)?;
                    self.double_always(2, number(json.get(pos..end).unwrap_or(""))?);
                    pos = end;
                }
                Some(b't') => {
                    pos = scan_literal(b, pos, b"true", "'true'")?;
                    self.varint_always(4, 1);
                }
                Some(b'f') => {
                    pos = scan_literal(b, pos, b"false", "'false'")?;
                    self.varint_always(4, 0);
                }
                Some(b'n') => {
                    pos = scan_literal(b, pos, b"null", "'null'")?;
                    self.varint_always(1, 0);
                }
                _ => return Err(expected_at(b, pos, "a value").into()),
            }
            // A value ended at `pos`: end its member or element, climb while containers close.
            loop {
                let Some(object) = containers.last() else {
                    break 'value;
                };
                self.close_last(&mut open);
                if object {
                    self.close_last(&mut open);
                }
                pos = skip_ws(b, pos);
                match (object, b.get(pos)) {
                    (true, Some(b',')) => {
                        pos = self.member(json, skip_ws(b, pos + 1), &mut open, &mut scratch)?;
                        continue 'value;
                    }
                    (false, Some(b',')) => {
                        pos = skip_ws(b, pos + 1);
                        open.push(self.open(1));
                        continue 'value;
                    }
                    (true, Some(b'}')) | (false, Some(b']')) => {
                        pos += 1;
                        containers.pop();
                        self.close_last(&mut open);
                    }
                    (true, _) => return Err(expected_at(b, pos, "',' or '}'").into()),
                    (false, _) => return Err(expected_at(b, pos, "',' or ']'").into()),
                }
            }
        }
        let end = skip_ws(b, pos);
        if end < b.len() {
            return Err(NotMcp::TrailingData { offset: end }.into());
        }
        Ok(())
    }

    /// The member whose key is at `pos`: its map entry opened, the key written, its Value opened;
    /// returns the offset of its value.
    fn member(
        &mut self,
        json: &str,
        pos: usize,
        open: &mut Stack<usize>,
        scratch: &mut String,
    ) -> Result<usize, NotAValue> {
        let b = json.as_bytes();
        if b.get(pos) != Some(&b'"') {
            return Err(expected_at(b, pos, "a string key").into());
        }
        let (close, escaped) = scan_string(b, pos)?;
        let raw = json.get(pos + 1..close).unwrap_or("");
        open.push(self.open(1));
        if escaped {
            scratch.clear();
            decode_into(raw, scratch);
            self.bytes(1, scratch.as_bytes());
        } else {
            self.bytes(1, raw.as_bytes());
        }
        open.push(self.open(2));
        Ok(skip_ws(b, colon(b, close + 1)?))
    }

    fn close_last(&mut self, open: &mut Stack<usize>) {
        if let Some(at) = open.pop() {
            self.close(at);
        }
    }
}

/// A stack whose first 16 values live inline (a member and its entry take two, a container one:
/// params five levels deep push nothing to the heap), the rest in a `Vec`.
struct Stack<T> {
    inline: [T; 16],
    spill: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> Stack<T> {
    fn new() -> Self {
        Stack {
            inline: [T::default(); 16],
            spill: Vec::new(),
            len: 0,
        }
    }

    fn push(&mut self, v: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = v,
            None => self.spill.push(v),
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<T> {
        let v = self.last()?;
        self.len -= 1;
        if self.len >= self.inline.len() {
            self.spill.pop();
        }
        Some(v)
    }

    fn last(&self) -> Option<T> {
        let i = self.len.checked_sub(1)?;
        match self.inline.get(i) {
            Some(v) => Some(*v),
            None => self.spill.last().copied(),
        }
    }
}

/// serde_json's nesting limit (its recursion limit: a 128th nested container is refused).
const MAX_NESTING: usize = 128;

/// Why a JSON text was not written as a `google.protobuf.Value` (what serde_json refuses too).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotAValue {
    #[error("not one JSON value: {0}")]
    Syntax(#[from] NotMcp),
    #[error("{0}")]
    Number(serde_json::Error),
    #[error("nesting deeper than {MAX_NESTING}")]
    TooDeep,
}

/// A JSON number as the double serde_json gives (a 64-bit integer converted, else its float
/// parser), or its error (beyond a double's range).
fn number(text: &str) -> Result<f64, NotAValue> {
    // Up to 15 digits: exactly representable, as serde_json's integer converted.
    let digits = text.strip_prefix('-').unwrap_or(text);
    if (1..=15).contains(&digits.len()) && digits.bytes().all(|c| c.is_ascii_digit()) {
        let n = digits
            .bytes()
            .fold(0u64, |n, c| n * 10 + u64::from(c - b'0')) as f64;
        return Ok(if digits.len() < text.len() { -n } else { n });
    }
    serde_json::from_str::<f64>(text).map_err(NotAValue::Number)
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// What [`Writer::bytes`] writes of `len` bytes (nothing when empty).
pub(crate) fn bytes_size(field: u32, len: usize) -> usize {
    if len == 0 {
        0
    } else {
        message_size(field, len)
    }
}

/// A nested message of `inner` bytes, key and length included (always written).
pub(crate) fn message_size(field: u32, inner: usize) -> usize {
    varint_len(u64::from(field << 3)) + varint_len(inner as u64) + inner
}

/// What [`Writer::string_entry`] writes.
pub(crate) fn string_entry_size(field: u32, key: &str, value: &str) -> usize {
    message_size(field, bytes_size(1, key.len()) + bytes_size(2, value.len()))
}

/// What [`Writer::int64`] writes (nothing for 0).
pub(crate) fn int64_size(field: u32, v: i64) -> usize {
    if v == 0 {
        0
    } else {
        varint_len(u64::from(field << 3)) + varint_len(v as u64)
    }
}
