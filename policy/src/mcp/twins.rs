//! The check of a captured `params` for keys that fold together ([`NotMcp::FoldedTwins`]) and for
//! numbers serde_json cannot decode ([`NotMcp::ParamsUndecodable`]).
//!
//! Hand-written on the reader's scanning primitives (scan.rs) rather than a serde_json walk with a
//! `HashMap` per object: natively (`benches/lifecycle.rs` under callgrind, (g1)'s 300 B
//! tools/call), the serde_json walk was a large part of the first body read, for a `params` of two
//! small objects (docs/design/reading-the-request.md). Small objects compare their folded keys
//! linearly (no hashing, nothing allocated for keys that are ASCII without capitals); an object
//! with more than [`LINEAR_KEYS`] keys moves them to a `HashMap` (SipHash with random keys, as
//! before: an object may have a hundred thousand keys, and their names are the client's). Numbers
//! are checked with serde_json itself unless they cannot be out of range. Same verdicts, same first
//! twin reported, in the same body order as the serde_json walk (`mcp/tests.rs`, the `mcp_reader`
//! fuzz target).

use std::borrow::Cow;
use std::collections::HashMap;

use super::scan::{
    colon, decode_into, expected_at, scan_literal, scan_number, skip_validated_string, skip_ws,
};
use super::NotMcp;

/// Objects with more keys than this index their folded keys in a hash map.
const LINEAR_KEYS: usize = 16;

/// A key of an open object and its folding, both borrowed from the text when possible.
struct Folded<'a> {
    fold: Cow<'a, str>,
    key: Cow<'a, str>,
}

enum Frame<'a> {
    Array,
    /// `keys_start`: where the object's keys begin in the key stack; `map`: its keys once it has
    /// more than [`LINEAR_KEYS`] (folded key -> the key).
    Object {
        keys_start: usize,
        map: Option<HashMap<Cow<'a, str>, Cow<'a, str>>>,
    },
}

/// Whether some object in `json` (valid JSON: the reader has read it; at byte `offset` of the body)
/// has two keys that are equal under case folding without being equal ([`NotMcp::FoldedTwins`]),
/// or holds what serde_json cannot decode ([`NotMcp::ParamsUndecodable`]). Run only on a captured
/// `params`, whose contents reach CEL rules and authorizers. The folding (upper- then lower-casing
/// every character) covers what Go's `encoding/json` (Unicode simple folding) and .NET's
/// `OrdinalIgnoreCase` equate (with `ẞ` read as `ß`: [`sharp_s`]), and a little more (`ß` and
/// `SS`), which only refuses what no client sends. The first problem in text order is reported.
/// Strings are not validated again; on other text that is not JSON (never the case: the reader has
/// read it) the scanner's error is returned.
pub(super) fn folded_twins(json: &str, offset: usize) -> Result<(), NotMcp> {
    let b = json.as_bytes();
    let mut frames: Vec<Frame<'_>> = Vec::with_capacity(8);
    let mut keys: Vec<Folded<'_>> = Vec::with_capacity(8);
    let mut pos = skip_ws(b, 0);
    'value: loop {
        match b.get(pos) {
            Some(b'{') => {
                pos = skip_ws(b, pos + 1);
                if b.get(pos) == Some(&b'}') {
                    pos += 1;
                } else {
                    frames.push(Frame::Object {
                        keys_start: keys.len(),
                        map: None,
                    });
                    pos = key(json, pos, offset, &mut frames, &mut keys)?;
                    continue 'value;
                }
            }
            Some(b'[') => {
                pos = skip_ws(b, pos + 1);
                if b.get(pos) == Some(&b']') {
                    pos += 1;
                } else {
                    frames.push(Frame::Array);
                    continue 'value;
                }
            }
            Some(b'"') => pos = skip_validated_string(b, pos).0 + 1,
            Some(b'-' | b'0'..=b'9') => {
                let end = scan_number(b, pos)?;
                number(json.get(pos..end).unwrap_or(""), offset)?;
                pos = end;
            }
            Some(b't') => pos = scan_literal(b, pos, b"true", "'true'")?,
            Some(b'f') => pos = scan_literal(b, pos, b"false", "'false'")?,
            Some(b'n') => pos = scan_literal(b, pos, b"null", "'null'")?,
            _ => return Err(expected_at(b, pos, "a value")),
        }
        // A value ended at `pos`: climb while containers close.
        loop {
            pos = skip_ws(b, pos);
            let Some(top) = frames.last() else {
                break 'value;
            };
            match (top, b.get(pos)) {
                (Frame::Object { .. }, Some(b',')) => {
                    pos = key(json, skip_ws(b, pos + 1), offset, &mut frames, &mut keys)?;
                    continue 'value;
                }
                (Frame::Array, Some(b',')) => {
                    pos = skip_ws(b, pos + 1);
                    continue 'value;
                }
                (Frame::Object { keys_start, .. }, Some(b'}')) => {
                    keys.truncate(*keys_start);
                    frames.pop();
                    pos += 1;
                }
                (Frame::Array, Some(b']')) => {
                    frames.pop();
                    pos += 1;
                }
                (Frame::Object { .. }, _) => return Err(expected_at(b, pos, "',' or '}'")),
                (Frame::Array, _) => return Err(expected_at(b, pos, "',' or ']'")),
            }
        }
    }
    Ok(())
}

/// The key at `pos` of the top object: checked against the object's other keys; returns the
/// offset of its value.
fn key<'a>(
    json: &'a str,
    pos: usize,
    offset: usize,
    frames: &mut [Frame<'a>],
    keys: &mut Vec<Folded<'a>>,
) -> Result<usize, NotMcp> {
    let b = json.as_bytes();
    if b.get(pos) != Some(&b'"') {
        return Err(expected_at(b, pos, "a string key"));
    }
    let (close, escaped) = skip_validated_string(b, pos);
    let raw = json.get(pos + 1..close).unwrap_or("");
    let key = if escaped {
        let mut decoded = String::with_capacity(raw.len());
        decode_into(raw, &mut decoded);
        Cow::Owned(decoded)
    } else {
        Cow::Borrowed(raw)
    };
    let fold = fold(&key);
    let twins = |first: &str, key: Cow<'_, str>| NotMcp::FoldedTwins {
        key: first.to_string(),
        twin: key.into_owned(),
        offset,
    };
    let Some(Frame::Object { keys_start, map }) = frames.last_mut() else {
        return Err(expected_at(b, pos, "a value")); // unreachable: keys are read in objects
    };
    match map {
        None => {
            let object = keys.get(*keys_start..).unwrap_or(&[]);
            match object.iter().find(|k| k.fold == fold) {
                Some(first) if first.key != key => return Err(twins(&first.key, key)),
                Some(_) => {}
                None if object.len() < LINEAR_KEYS => keys.push(Folded { fold, key }),
                None => {
                    let mut indexed: HashMap<Cow<'a, str>, Cow<'a, str>> =
                        keys.drain(*keys_start..).map(|k| (k.fold, k.key)).collect();
                    indexed.insert(fold, key);
                    *map = Some(indexed);
                }
            }
        }
        Some(map) => match map.get(&fold) {
            Some(first) if *first != key => return Err(twins(first, key)),
            Some(_) => {}
            None => {
                map.insert(fold, key);
            }
        },
    }
    colon(b, close + 1).map(|p| skip_ws(b, p))
}

/// The key with every character upper- then lower-cased ([`sharp_s`] first); borrowed when that
/// changes nothing (ASCII without capitals: almost every key).
fn fold<'a>(key: &Cow<'a, str>) -> Cow<'a, str> {
    if key.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
        key.clone()
    } else if key.is_ascii() {
        Cow::Owned(key.to_ascii_lowercase())
    } else {
        Cow::Owned(
            key.chars()
                .map(sharp_s)
                .flat_map(char::to_uppercase)
                .flat_map(char::to_lowercase)
                .collect(),
        )
    }
}

/// `ẞ` (U+1E9E) read as `ß`. Go's simple folding puts the two together, while upper- then
/// lower-casing takes `ß` to `ss` and `ẞ` to `ß`: of Go 1.24's 1,424 folding orbits, the one pair
/// the rest of [`fold`] leaves apart (a Go tool reads `"straẞe"` into a field tagged `straße`;
/// tests/bypass/test_go_decoder.py).
pub(super) fn sharp_s(c: char) -> char {
    if c == '\u{1E9E}' {
        'ß'
    } else {
        c
    }
}

/// A number serde_json decodes (to a double when it is not a 64-bit integer) unless it is out of
/// a double's range: refused as it would have refused it.
fn number(text: &str, offset: usize) -> Result<(), NotMcp> {
    // Without an exponent, fewer than 300 digits are below 1e300: in range.
    if text.len() < 300 && !text.bytes().any(|c| matches!(c, b'e' | b'E')) {
        return Ok(());
    }
    match serde_json::from_str::<f64>(text) {
        Ok(_) => Ok(()),
        Err(e) => {
            let reason = e.to_string();
            let reason = reason
                .rsplit_once(" at line ")
                .map_or(reason.as_str(), |(r, _)| r)
                .to_string();
            Err(NotMcp::ParamsUndecodable { reason, offset })
        }
    }
}
