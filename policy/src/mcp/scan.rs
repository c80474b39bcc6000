//! The JSON scanning primitives: whitespace, strings (SWAR search for the bytes that end plain
//! string content), escapes, numbers, literals, a whole value skipped, and the case folding of keys
//! that case-insensitive decoders apply. Byte offsets in, byte offsets out; no values are built.
//!
//! Hand-written rather than serde_json because both users measure it: the MCP body reader
//! (`crate::mcp`) needs every key of every object (duplicates) without building values, and list
//! filtering (`crate::list_filter`) needs the offsets of a response's list entries. With serde_json
//! raw values at each level, filtering a `tools/list` answer cost several times what one pass over
//! these primitives costs, natively and in Envoy's Wasm VM (docs/design/list-filtering.md;
//! policy/benches/engine.rs `list_filter`).
//!
//! Nothing here panics on any input: every index is checked (`get`).

use super::NotMcp;

#[inline]
pub(crate) fn invalid(offset: usize, expected: &'static str) -> NotMcp {
    NotMcp::InvalidJson { offset, expected }
}

#[inline]
pub(crate) fn eof(expected: &'static str) -> NotMcp {
    NotMcp::UnexpectedEnd { expected }
}

/// Error for "expected X at `pos`": end of body or a wrong byte.
#[inline]
pub(crate) fn expected_at(b: &[u8], pos: usize, expected: &'static str) -> NotMcp {
    if pos >= b.len() {
        eof(expected)
    } else {
        invalid(pos, expected)
    }
}

#[inline]
pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
            i += 1;
        } else {
            break;
        }
    }
    i
}

pub(crate) const LO: u64 = 0x0101_0101_0101_0101;
pub(crate) const HI: u64 = 0x8080_8080_8080_8080;

/// Index of the first byte at or after `i` that is `"`, `\` or a control character (< 0x20), or
/// `b.len()` if there is none. Eight bytes at a time (SWAR); portable, so it also runs on wasm32.
#[inline(always)]
pub(crate) fn find_string_special(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i.wrapping_add(8)) {
        let mut w8 = [0u8; 8];
        w8.copy_from_slice(chunk);
        let w = u64::from_le_bytes(w8);
        let q = w ^ (LO * u64::from(b'"'));
        let bs = w ^ (LO * u64::from(b'\\'));
        // For each of the three tests the lowest flagged byte is exact (false positives only appear
        // above a true one, through borrows), so the lowest bit of the union is the first match.
        let m = (q.wrapping_sub(LO) & !q)
            | (bs.wrapping_sub(LO) & !bs)
            | (w.wrapping_sub(LO * 0x20) & !w);
        let m = m & HI;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    b.len()
}

#[inline]
fn hex_val(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u32::from(c - b'A' + 10)),
        _ => None,
    }
}

/// Four hex digits at `i`; `esc` is the offset of the backslash (for errors).
pub(crate) fn hex4(b: &[u8], i: usize, esc: usize) -> Result<u32, NotMcp> {
    let mut v = 0u32;
    for k in 0..4 {
        match b.get(i + k) {
            None => return Err(eof("four hex digits")),
            Some(&c) => match hex_val(c) {
                Some(d) => v = (v << 4) | d,
                None => return Err(NotMcp::InvalidEscape { offset: esc }),
            },
        }
    }
    Ok(v)
}

/// Validate the escape whose backslash is at `i`; returns the offset after it. Always inlined: the
/// MCP reader's string loop (`scan_string_slow`) had it inlined while it was its only caller.
#[inline(always)]
pub(crate) fn validate_escape(b: &[u8], i: usize) -> Result<usize, NotMcp> {
    match b.get(i + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
        Some(b'u') => {
            let cp = hex4(b, i + 2, i)?;
            if (0xD800..0xDC00).contains(&cp) {
                match (b.get(i + 6), b.get(i + 7)) {
                    (Some(b'\\'), Some(b'u')) => {
                        let lo = hex4(b, i + 8, i + 6)?;
                        if (0xDC00..0xE000).contains(&lo) {
                            Ok(i + 12)
                        } else {
                            Err(NotMcp::LoneSurrogate { offset: i })
                        }
                    }
                    (None, _) | (Some(b'\\'), None) => Err(eof("a low surrogate escape")),
                    _ => Err(NotMcp::LoneSurrogate { offset: i }),
                }
            } else if (0xDC00..0xE000).contains(&cp) {
                Err(NotMcp::LoneSurrogate { offset: i })
            } else {
                Ok(i + 6)
            }
        }
        Some(_) => Err(NotMcp::InvalidEscape { offset: i }),
        None => Err(eof("an escape character")),
    }
}

/// Scan a string whose opening quote is at `open`. Returns (offset of the closing quote, has escapes).
/// Strict: a lone surrogate escape (`\ud800` without its low half) is an error.
#[inline(always)]
pub(crate) fn scan_string(b: &[u8], open: usize) -> Result<(usize, bool), NotMcp> {
    scan_string_as::<true>(b, open)
}

/// [`scan_string`] as serde_json checks a string it skips (a `RawValue`'s): a lone surrogate escape
/// is four hex digits like any other.
#[inline(always)]
pub(crate) fn scan_raw_string(b: &[u8], open: usize) -> Result<(usize, bool), NotMcp> {
    scan_string_as::<false>(b, open)
}

#[inline(always)]
fn scan_string_as<const STRICT: bool>(b: &[u8], open: usize) -> Result<(usize, bool), NotMcp> {
    let i = find_string_special(b, open + 1);
    if b.get(i) == Some(&b'"') {
        return Ok((i, false));
    }
    scan_string_slow::<STRICT>(b, i)
}

/// The rest of [`scan_string`] from the first byte that is not plain string content.
#[inline(never)]
fn scan_string_slow<const STRICT: bool>(b: &[u8], mut i: usize) -> Result<(usize, bool), NotMcp> {
    let mut escaped = false;
    loop {
        match b.get(i) {
            Some(b'"') => return Ok((i, escaped)),
            Some(b'\\') => {
                escaped = true;
                i = if STRICT {
                    validate_escape(b, i)?
                } else {
                    validate_raw_escape(b, i)?
                };
            }
            Some(_) => return Err(NotMcp::ControlCharacter { offset: i }),
            None => return Err(eof("the quote that closes the string")),
        }
        i = find_string_special(b, i);
    }
}

/// [`validate_escape`] without the surrogate pairing (serde_json's check of a skipped string).
fn validate_raw_escape(b: &[u8], i: usize) -> Result<usize, NotMcp> {
    match b.get(i + 1) {
        Some(b'u') => hex4(b, i + 2, i).map(|_| i + 6),
        _ => validate_escape(b, i),
    }
}

/// The closing quote of a string already validated (by [`scan_string`]) whose opening quote is at
/// `open`, and whether it has escapes: [`scan_string`] without checking escapes again. On text that
/// was not validated it still ends (at the end of `b` if no quote closes the string).
pub(crate) fn skip_validated_string(b: &[u8], open: usize) -> (usize, bool) {
    let mut i = open + 1;
    let mut escaped = false;
    loop {
        i = find_string_special(b, i);
        match b.get(i) {
            Some(b'"') | None => return (i, escaped),
            Some(b'\\') => {
                escaped = true;
                i += 2;
            }
            Some(_) => i += 1,
        }
    }
}

/// Decode a string body checked by [`scan_raw_string`] into `out` as serde_json decodes a `String`:
/// false (and `out` left unspecified) when it holds a lone surrogate escape, which serde_json refuses.
pub(crate) fn decode_strict(span: &str, out: &mut String) -> bool {
    let b = span.as_bytes();
    let mut i = 0;
    while let Some(at) = b
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'\\'))
    {
        match validate_escape(b, i + at) {
            Ok(next) => i = next,
            Err(_) => return false,
        }
    }
    decode_into(span, out);
    true
}

/// Decode the escapes of an already validated string body into `out`. Infallible on validated
/// input; on anything unexpected it writes U+FFFD instead of panicking.
pub(crate) fn decode_into(span: &str, out: &mut String) {
    let b = span.as_bytes();
    // The decoded text is never longer: one allocation at most.
    out.reserve(span.len());
    let mut run = 0;
    let mut i = 0;
    while i < b.len() {
        // Eight bytes at a time to the next backslash (a validated string body holds no `"` or
        // control character): byte by byte, decoding (g1)'s long argument for the CheckRequest
        // cost measurably more natively (`benches/lifecycle.rs`).
        i = find_string_special(b, i);
        if b.get(i) != Some(&b'\\') {
            i += 1;
            continue;
        }
        out.push_str(span.get(run..i).unwrap_or("\u{FFFD}"));
        let (c, len) = match b.get(i + 1) {
            Some(b'"') => ('"', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'/') => ('/', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'n') => ('\n', 2),
            Some(b'r') => ('\r', 2),
            Some(b't') => ('\t', 2),
            Some(b'u') => {
                let hi = hex4(b, i + 2, i).unwrap_or(0xFFFD);
                if (0xD800..0xDC00).contains(&hi) {
                    let lo = hex4(b, i + 8, i).unwrap_or(0);
                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF);
                    (char::from_u32(cp).unwrap_or('\u{FFFD}'), 12)
                } else {
                    (char::from_u32(hi).unwrap_or('\u{FFFD}'), 6)
                }
            }
            _ => ('\u{FFFD}', 2),
        };
        out.push(c);
        i += len;
        run = i;
    }
    out.push_str(span.get(run..).unwrap_or(""));
}

/// Scan a number starting at `i`; returns the offset after it.
#[inline]
pub(crate) fn scan_number(b: &[u8], mut i: usize) -> Result<usize, NotMcp> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            i += 1;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        _ => return Err(expected_at(b, i, "a digit")),
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return Err(expected_at(b, i, "a digit after '.'"));
        }
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return Err(expected_at(b, i, "a digit in the exponent"));
        }
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    Ok(i)
}

#[inline]
pub(crate) fn scan_literal(
    b: &[u8],
    i: usize,
    lit: &'static [u8],
    expected: &'static str,
) -> Result<usize, NotMcp> {
    let end = i + lit.len();
    match b.get(i..end) {
        Some(s) if s == lit => Ok(end),
        _ => {
            // Truncated literal (a prefix of it up to the end of the body) vs a wrong byte.
            let have = b.get(i..).unwrap_or(&[]);
            if have.len() < lit.len() && lit.starts_with(have) {
                Err(eof(expected))
            } else {
                Err(invalid(i, expected))
            }
        }
    }
}

/// The field of `fields` (lower-case ASCII names) that `key` equals under case folding, if any
/// (`key` is not one of them exactly: the caller checked). The folding is the union of what the
/// decoders of MCP servers do when they match keys to fields case-insensitively:
/// - Go's `encoding/json` (`foldName`): ASCII case, and Unicode simple folding to the smallest rune
///   of the fold orbit. The only non-ASCII runes whose orbit holds an ASCII letter are U+017F `ſ`
///   (orbit S s ſ) and U+212A Kelvin sign (K k K) (Unicode CaseFolding.txt, statuses C and S).
/// - .NET `System.Text.Json` with `PropertyNameCaseInsensitive` (the ASP.NET Core web defaults):
///   `OrdinalIgnoreCase`, i.e. simple upper-casing, which also maps U+0131 `ı` to `I` and `ſ` to `S`.
///
/// Refusing a key one decoder would not fold costs nothing: no client sends such keys.
pub(crate) fn folded_field<'f>(key: &[u8], fields: &[&'f str]) -> Option<&'f str> {
    // The longest field is 21 letters; each folds from at most 3 UTF-8 bytes (the Kelvin sign).
    if fields.is_empty() || key.len() > 63 {
        return None;
    }
    // An ASCII key folds to its own length: most keys (`arguments`, ...) are settled here, without
    // decoding them.
    if key.is_ascii() && fields.iter().all(|f| f.len() != key.len()) {
        return None;
    }
    let mut folded = [0u8; 21];
    let mut n = 0;
    for c in std::str::from_utf8(key).ok()?.chars() {
        let ascii = match c {
            'a'..='z' | '_' => c as u8,
            'A'..='Z' => c.to_ascii_lowercase() as u8,
            '\u{17F}' => b's',
            '\u{212A}' => b'k',
            '\u{131}' => b'i',
            _ => return None,
        };
        *folded.get_mut(n)? = ascii;
        n += 1;
    }
    let folded = folded.get(..n)?;
    fields.iter().copied().find(|f| f.as_bytes() == folded)
}

/// Skip the JSON value at `i` (after any whitespace) as serde_json checks a `RawValue`: the strict
/// grammar (numbers of any size, `1E4444` included), raw strings ([`scan_raw_string`]), no limit
/// on nesting (`stack` holds the open containers, an allocation reused between calls); returns the
/// offset after it.
pub(crate) fn skip_value(b: &[u8], i: usize, stack: &mut Vec<u8>) -> Result<usize, NotMcp> {
    stack.clear();
    let mut i = skip_ws(b, i);
    loop {
        // A value at `i`.
        match b.get(i) {
            Some(b'"') => i = scan_raw_string(b, i)?.0 + 1,
            Some(b'{') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    stack.push(b'}');
                    i = skip_ws(b, skip_key(b, i)?);
                    continue;
                }
            }
            Some(b'[') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    stack.push(b']');
                    continue;
                }
            }
            Some(b't') => i = scan_literal(b, i, b"true", "true")?,
            Some(b'f') => i = scan_literal(b, i, b"false", "false")?,
            Some(b'n') => i = scan_literal(b, i, b"null", "null")?,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            _ => return Err(expected_at(b, i, "a value")),
        }
        // After a value: close what it ends, or go on to the next element or member.
        loop {
            let Some(&close) = stack.last() else {
                return Ok(i);
            };
            i = skip_ws(b, i);
            match b.get(i) {
                Some(b',') => {
                    i = skip_ws(b, i + 1);
                    if close == b'}' {
                        i = skip_ws(b, skip_key(b, i)?);
                    }
                    break;
                }
                Some(&c) if c == close => {
                    stack.pop();
                    i += 1;
                }
                _ if close == b'}' => return Err(expected_at(b, i, "',' or '}'")),
                _ => return Err(expected_at(b, i, "',' or ']'")),
            }
        }
    }
}

/// A key at `i` and its colon; returns the offset after the colon.
#[inline]
pub(crate) fn skip_key(b: &[u8], i: usize) -> Result<usize, NotMcp> {
    if b.get(i) != Some(&b'"') {
        return Err(expected_at(b, i, "a key"));
    }
    let (close, _) = scan_raw_string(b, i)?;
    colon(b, close + 1)
}

/// The colon after a key (whitespace around it skipped up to it); returns the offset after it.
#[inline]
pub(crate) fn colon(b: &[u8], i: usize) -> Result<usize, NotMcp> {
    let i = skip_ws(b, i);
    if b.get(i) != Some(&b':') {
        return Err(expected_at(b, i, "':'"));
    }
    Ok(i + 1)
}

/// The offset of the first `\r` or `\n` at or after `i`, or `b.len()`, eight bytes at a time like
/// [`find_string_special`]: list filtering splits event streams into lines, and an event holding a
/// large list is one long line.
pub(crate) fn find_line_break(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i.wrapping_add(8)) {
        let mut w8 = [0u8; 8];
        w8.copy_from_slice(chunk);
        let w = u64::from_le_bytes(w8);
        let cr = w ^ (LO * u64::from(b'\r'));
        let lf = w ^ (LO * u64::from(b'\n'));
        // The lowest flagged byte of each test is exact, so the lowest of the union is the first.
        let m = ((cr.wrapping_sub(LO) & !cr) | (lf.wrapping_sub(LO) & !lf)) & HI;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'\r' || c == b'\n' {
            return i;
        }
        i += 1;
    }
    b.len()
}
