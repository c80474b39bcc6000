//! The plan's content hash: from the plan ([`CompiledPlan::content_hash`]), or from the JSON text the
//! filter loads ([`json_content_hash`]).

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{CompiledPlan, LevelPlan, PlanSettings};

impl CompiledPlan {
    /// The hash of the plan's content (everything but `hash` itself): hex SHA-256 of the plan's
    /// compact serde_json serialisation with `hash` empty.
    pub fn content_hash(&self) -> String {
        // The same fields, in the same order, as the derived `Serialize`, with `hash` empty: cloning
        // the plan to clear it would copy every policy. Destructuring keeps the two in step when a
        // field is added (`content_hash_ignores_only_the_hash` pins the result).
        #[derive(Serialize)]
        struct Unhashed<'p> {
            version: u32,
            hash: &'static str,
            listener: &'p str,
            settings: &'p PlanSettings,
            gateway: &'p LevelPlan,
            backends: &'p BTreeMap<String, LevelPlan>,
        }
        let CompiledPlan {
            version,
            hash: _,
            listener,
            settings,
            gateway,
            backends,
        } = self;
        let unhashed = Unhashed {
            version: *version,
            hash: "",
            listener,
            settings,
            gateway,
            backends,
        };
        // Serialising plain data cannot fail; an empty string would only make the hash weaker.
        let bytes = serde_json::to_vec(&unhashed).unwrap_or_default();
        hex(&Sha256::digest(&bytes))
    }

    /// Sets `hash` to the content hash.
    pub fn seal(mut self) -> Self {
        self.hash = self.content_hash();
        self
    }
}

/// [`CompiledPlan::content_hash`] of the plan `json` holds, computed from the text instead of a
/// re-serialisation: SHA-256 of `json` without whitespace between tokens and with the top-level
/// `hash` value emptied. serde_json's pretty output is its compact output plus such whitespace, so
/// for a plan serde_json wrote (the controller writes plans compact or pretty) this is the content
/// hash. Any other rendering of the same plan (keys reordered, other escapes, `null` for an absent
/// field) gives another value: callers fall back to `content_hash` when it does not match.
///
/// `json` must have parsed as a plan: for other input the result is meaningless (never a panic).
pub(crate) fn json_content_hash(json: &[u8]) -> String {
    let mut sha = Sha256::new();
    // json[hashed..i] is still to be fed to `sha`.
    let mut hashed = 0;
    let mut depth = 0u32;
    // The last token was the top-level key `"hash"` / the `:` after it.
    let (mut after_hash_key, mut before_hash_value) = (false, false);
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                if hashed < i {
                    sha.update(json.get(hashed..i).unwrap_or_default());
                }
                hashed = i + 1;
            }
            b'"' => {
                let end = string_end(json, i + 1);
                if before_hash_value {
                    // Hash the opening quote, skip the value up to the closing one.
                    sha.update(json.get(hashed..=i).unwrap_or_default());
                    hashed = end;
                    before_hash_value = false;
                } else {
                    after_hash_key = depth == 1 && json.get(i + 1..end) == Some(&b"hash"[..]);
                }
                i = end;
            }
            _ => {
                match b {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                before_hash_value = after_hash_key && b == b':';
                after_hash_key = false;
            }
        }
        i += 1;
    }
    sha.update(json.get(hashed..).unwrap_or_default());
    hex(&sha.finalize())
}

/// Index of the quote closing the JSON string whose content starts at `start` (`json.len()` if none).
fn string_end(json: &[u8], start: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    /// The high bit of each zero byte of `word`, and maybe of bytes after the first zero one: the
    /// lowest set bit is exact.
    fn zero_bytes(word: u64) -> u64 {
        word.wrapping_sub(ONES) & !word & (ONES << 7)
    }
    let mut i = start;
    loop {
        // Skip eight bytes at a time to the next quote or backslash.
        while let Some(Ok(chunk)) = json.get(i..i + 8).map(<[u8; 8]>::try_from) {
            let word = u64::from_le_bytes(chunk);
            let special = zero_bytes(word ^ (ONES * u64::from(b'"')))
                | zero_bytes(word ^ (ONES * u64::from(b'\\')));
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match json.get(i) {
            None => return json.len(),
            Some(b'"') => return i,
            Some(b'\\') => i += 2,
            Some(_) => i += 1,
        }
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}
