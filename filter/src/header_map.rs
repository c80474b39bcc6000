//! proxy-wasm's serialised header map, the ABI's one form of a header map: the number of headers,
//! each name's and value's length (u32, little-endian), then each name and value followed by a NUL.
//! Written for local replies and HTTP calls; read from the request (handed to the engine as it is:
//! [`HeaderSink::adopt`]) and from HTTP calls' answers. Never panics: a malformed map gives the
//! headers before the first one that does not fit in it.

use std::ops::Range;

use toolgate_policy::lifecycle::HeaderSink;

/// The serialised map of `pairs`.
pub(crate) fn serialize(pairs: &[(&str, &str)]) -> Vec<u8> {
    let text: usize = pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut out = Vec::with_capacity(4 + 8 * pairs.len() + text);
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    out.extend(len(pairs.len()));
    for (k, v) in pairs {
        out.extend(len(k.len()));
        out.extend(len(v.len()));
    }
    for (k, v) in pairs {
        out.extend(k.as_bytes());
        out.push(0);
        out.extend(v.as_bytes());
        out.push(0);
    }
    out
}

/// Hands a serialised map to the engine whole: the map is kept as the headers' text, its table of
/// lengths dropped (no copy of any header, no allocation per header).
pub(crate) fn hand_over(map: Vec<u8>, headers: &mut HeaderSink<'_>) {
    let (text_start, mut cursor) = Cursor::of(&map);
    headers.adopt(map, text_start, |map| cursor.next(map));
}

/// The headers of a serialised map as text (lossily, if some of it is not UTF-8).
pub(crate) fn pairs(map: &[u8]) -> Vec<(String, String)> {
    let (text_start, mut cursor) = Cursor::of(map);
    let text = map.get(text_start.min(map.len())..).unwrap_or_default();
    let mut ranges = Vec::new();
    while let Some((name, value)) = cursor.next(map) {
        if text.get(name.clone()).is_none() || text.get(value.clone()).is_none() {
            break;
        }
        ranges.push((name, value));
    }
    // As the engine reads a request's headers: UTF-8 text is sliced, else each header converted.
    match std::str::from_utf8(text) {
        Ok(text) => {
            let part = |r: Range<usize>| text.get(r).unwrap_or_default().to_string();
            ranges
                .into_iter()
                .map(|(k, v)| (part(k), part(v)))
                .collect()
        }
        Err(_) => {
            let part = |r: Range<usize>| {
                String::from_utf8_lossy(text.get(r).unwrap_or_default()).into_owned()
            };
            ranges
                .into_iter()
                .map(|(k, v)| (part(k), part(v)))
                .collect()
        }
    }
}

/// The map's u32 at `at`.
fn word(map: &[u8], at: usize) -> Option<usize> {
    map.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Walks a map's table of lengths: where each header's name and value are in the text after it.
struct Cursor {
    count: usize,
    /// The next header's number, and where its name starts in the text.
    n: usize,
    at: usize,
}

impl Cursor {
    /// Where the map's text starts (after its table), and a cursor at its first header.
    fn of(map: &[u8]) -> (usize, Cursor) {
        let (text_start, count) = match word(map, 0) {
            Some(count) => (count.saturating_mul(8).saturating_add(4), count),
            None => (0, 0),
        };
        (text_start, Cursor { count, n: 0, at: 0 })
    }

    /// The next header's name and value, relative to the text's start; None after the last one, or
    /// where the table ends early. Whether they lie within the map is the caller's to check.
    fn next(&mut self, map: &[u8]) -> Option<(Range<usize>, Range<usize>)> {
        if self.n >= self.count {
            return None;
        }
        let (name_len, value_len) = (word(map, 4 + self.n * 8)?, word(map, 8 + self.n * 8)?);
        self.n += 1;
        let name = self.at..self.at.saturating_add(name_len);
        let value_start = name.end.saturating_add(1);
        let value = value_start..value_start.saturating_add(value_len);
        self.at = value.end.saturating_add(1);
        Some((name, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
        for (k, v) in pairs {
            out.extend((k.len() as u32).to_le_bytes());
            out.extend((v.len() as u32).to_le_bytes());
        }
        for (k, v) in pairs {
            out.extend(*k);
            out.push(0);
            out.extend(*v);
            out.push(0);
        }
        out
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn serialised_maps_round_trip() {
        let pairs = [("content-type", "application/json"), ("a", ""), ("é", "ü")];
        let serialised = serialize(&pairs);
        assert_eq!(
            serialised,
            map(&[
                (b"content-type", b"application/json"),
                (b"a", b""),
                ("é".as_bytes(), "ü".as_bytes())
            ])
        );
        assert_eq!(super::pairs(&serialised), owned(&pairs));
        assert!(super::pairs(&serialize(&[])).is_empty());
    }

    #[test]
    fn the_cursor_finds_every_name_and_value_after_the_table() {
        let long = "v".repeat(300);
        let m = map(&[(b":method", b"POST"), (b"x", long.as_bytes()), (b"", b"")]);
        let (text_start, mut cursor) = Cursor::of(&m);
        assert_eq!(text_start, 4 + 3 * 8);
        let text = &m[text_start..];
        let mut found = Vec::new();
        while let Some((k, v)) = cursor.next(&m) {
            found.push((text[k].to_vec(), text[v].to_vec()));
        }
        assert_eq!(
            found,
            vec![
                (b":method".to_vec(), b"POST".to_vec()),
                (b"x".to_vec(), long.into_bytes()),
                (Vec::new(), Vec::new())
            ]
        );
    }

    #[test]
    fn a_malformed_map_gives_the_headers_before_the_first_that_does_not_fit() {
        let whole = map(&[(b":method", b"GET"), (b":path", b"/mcp")]);
        let all = owned(&[(":method", "GET"), (":path", "/mcp")]);
        for cut in 0..whole.len() {
            let read = pairs(&whole[..cut]);
            assert!(all.starts_with(&read), "cut at {cut}: {read:?}");
            // The last header is complete once its value is (its closing NUL may be cut).
            assert_eq!(
                read.len() == 2,
                cut >= whole.len() - 1,
                "cut at {cut}: {read:?}"
            );
        }
        // A count far larger than the map, and lengths that overflow.
        let mut bad = u32::MAX.to_le_bytes().to_vec();
        bad.extend(u32::MAX.to_le_bytes());
        bad.extend(u32::MAX.to_le_bytes());
        assert!(pairs(&bad).is_empty());
        assert!(pairs(&[]).is_empty());
    }

    #[test]
    fn text_that_is_not_utf8_is_converted_lossily() {
        let m = map(&[(b":path", b"/mcp"), (b"x-team", b"bl\xffue")]);
        assert_eq!(
            pairs(&m),
            owned(&[(":path", "/mcp"), ("x-team", "bl\u{FFFD}ue")])
        );
    }
}
