use super::scan::find_string_special;
use super::*;
use std::cell::Cell;

/// Big objects hash their keys (the normal mode).
pub(super) const NORMAL: u8 = 0;
/// Big objects sort their keys at close instead of hashing (as for bodies over 4 GiB).
pub(super) const SORT_AT_SWITCH: u8 = 1;
/// Big objects exceed the probe budget at their first hashed key, as adversarial collisions
/// would make them, and fall back to sorting.
pub(super) const SORT_AFTER_HASHING: u8 = 2;

thread_local! {
    pub(super) static DUP_TEST_MODE: Cell<u8> = const { Cell::new(NORMAL) };
}

fn naive_special(b: &[u8], i: usize) -> usize {
    (i..b.len())
        .find(|&j| matches!(b[j], b'"' | b'\\' | 0..=0x1f))
        .unwrap_or(b.len())
}

#[test]
fn swar_scanner_matches_naive() {
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let alphabet = [
        b'a',
        b'"',
        b'\\',
        0x00,
        0x1f,
        0x20,
        0x21,
        0x7f,
        0x80,
        0xff,
        0x5b,
        0x5d,
        0x22 ^ 0x80,
    ];
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let mut buf = Vec::with_capacity(len);
        let mut y = x;
        for _ in 0..len {
            y ^= y << 13;
            y ^= y >> 7;
            y ^= y << 17;
            // mostly plain bytes so the special one lands anywhere in a word
            let c = if y >> 61 == 0 {
                alphabet[(y >> 8) as usize % alphabet.len()]
            } else {
                b'a' + (y >> 16) as u8 % 26
            };
            buf.push(c);
        }
        for i in 0..=len + 1 {
            assert_eq!(
                find_string_special(&buf, i),
                naive_special(&buf, i).max(i.min(buf.len())),
                "{buf:?} from {i}"
            );
        }
    }
}

fn big_object(n: usize, dup_at: Option<(usize, usize)>) -> String {
    let mut s = String::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"#,
    );
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        let k = match dup_at {
            Some((from, to)) if i == to => from,
            _ => i,
        };
        s.push_str(&format!(r#""k{k}":{{"a":1,"b":[{{"a":2}}]}}"#));
    }
    s.push_str("}}}");
    s
}

fn read_in_mode(mode: u8, body: &str) -> Result<(), NotMcp> {
    DUP_TEST_MODE.with(|c| c.set(mode));
    let r = read_body(body.as_bytes(), ReadOptions::default()).map(|_| ());
    DUP_TEST_MODE.with(|c| c.set(NORMAL));
    r
}

/// Offset of the `nth` (0-based) occurrence of `"name":` in `body`.
fn key_offset(body: &str, name: &str, nth: usize) -> usize {
    let pat = format!("\"{name}\":");
    body.match_indices(&pat).nth(nth).map(|(i, _)| i).unwrap()
}

/// `"k<digits>"` spelled with its first digit escaped as `\u003N`.
fn escaped_key(i: usize) -> String {
    let d = i.to_string();
    format!("\"k\\u003{}{}\":", &d[..1], &d[1..])
}

#[test]
fn every_duplicate_strategy_finds_the_first_duplicate() {
    for mode in [NORMAL, SORT_AT_SWITCH, SORT_AFTER_HASHING] {
        let run = |body: &str| read_in_mode(mode, body);
        assert_eq!(run(&big_object(500, None)), Ok(()), "mode {mode}");
        // Escaped spellings (decoded into the arena) among the keys, no duplicate.
        let escaped = big_object(500, None)
            .replacen(r#""k5":"#, &escaped_key(5), 1)
            .replacen(r#""k450":"#, &escaped_key(450), 1);
        assert_eq!(run(&escaped), Ok(()), "mode {mode}");
        // A duplicate found by each phase: linear (both < 16), at the switch (17th key),
        // while hashing / after the fallback (both late), and against an escaped spelling.
        for (from, to) in [(3, 10), (3, 16), (3, 400), (200, 400), (5, 17), (5, 450)] {
            let body = big_object(500, Some((from, to)));
            let k = format!("k{from}");
            let want = NotMcp::DuplicateKey {
                key: k.clone(),
                offset: key_offset(&body, &k, 1),
            };
            assert_eq!(
                run(&body),
                Err(want.clone()),
                "mode {mode} dup {from}->{to}"
            );
            // The first occurrence escaped.
            let body = body.replacen(&format!("\"{k}\":"), &escaped_key(from), 1);
            let want = NotMcp::DuplicateKey {
                key: k.clone(),
                offset: key_offset(&body, &k, 0),
            };
            assert_eq!(
                run(&body),
                Err(want),
                "mode {mode} escaped first {from}->{to}"
            );
            // The second occurrence escaped.
            let body = big_object(500, Some((from, to)));
            let second = key_offset(&body, &k, 1);
            let body = format!(
                "{}{}{}",
                &body[..second],
                escaped_key(from),
                &body[second + k.len() + 3..]
            );
            let want = NotMcp::DuplicateKey {
                key: k.clone(),
                offset: second,
            };
            assert_eq!(
                run(&body),
                Err(want),
                "mode {mode} escaped second {from}->{to}"
            );
        }
        // Two duplicates: the one that comes first in the body is reported.
        let body = big_object(300, Some((10, 200))).replacen(r#""k100":"#, r#""k50":"#, 1);
        assert_eq!(
            run(&body),
            Err(NotMcp::DuplicateKey {
                key: "k50".into(),
                offset: key_offset(&body, "k50", 1)
            }),
            "mode {mode}"
        );
    }
}

#[test]
fn key_stack_is_restored_after_nested_objects() {
    // Inner objects reuse the same key names and the same per-depth hash tables.
    let body = big_object(200, None);
    assert!(read_body(body.as_bytes(), ReadOptions::default()).is_ok());
    let escaped = big_object(40, None)
        .replacen(r#""k39":"#, r#""k\u0033\u0039":"#, 1)
        .replacen(r#""k38":"#, r#""k\u0033\u0039":"#, 1);
    assert!(
        matches!(read_body(escaped.as_bytes(), ReadOptions::default()), Err(NotMcp::DuplicateKey { ref key, .. }) if key == "k39")
    );
}

#[test]
fn long_duplicate_keys_are_shortened_in_the_message() {
    let k = "x".repeat(200);
    let body = format!(r#"{{"{k}":1,"{k}":2}}"#);
    let e = read_body(body.as_bytes(), ReadOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.len() < 100, "{msg}");
    assert!(
        msg.starts_with("duplicate key 'xxxx") && msg.ends_with("at byte 206"),
        "{msg}"
    );
}

/// `"name":"get-sum","name\u0000":"get-env"`: two keys here, one repeated `name` to a decoder that ends
/// strings at NUL (which then runs get-env). Refused wherever the key is (message, params, arguments,
/// batches, big hashed objects), whatever the NUL's place in it; NUL in a value is a value.
#[test]
fn keys_with_nul_are_refused() {
    let call = |params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
    };
    let big: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    let bodies = [
        call(r#"{"name":"get-sum","name\u0000":"get-env"}"#),
        call(r#"{"name\u0000":"get-env","name":"get-sum"}"#),
        call(r#"{"name\u0000x":"get-env","name":"get-sum"}"#),
        call(r#"{"name":"get-sum","\u0000":"get-env"}"#),
        call(r#"{"name":"get-sum","arguments":{"path":"/safe","path\u0000":"/etc"}}"#),
        call(&format!(r#"{{"name":"get-sum","arguments":{{{},"k1\u0000":1}}}}"#, big.join(","))),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method\u0000":"tools/list","params":{"name":"get-sum"}}"#.into(),
        format!("[{},{}]", call(r#"{"name":"get-sum"}"#), call(r#"{"name":"get-sum","name\u0000":"get-env"}"#)),
    ];
    for body in &bodies {
        for opts in [
            ReadOptions::default(),
            ReadOptions {
                capture_params: true,
            },
        ] {
            let e = read_body(body.as_bytes(), opts).unwrap_err();
            assert!(matches!(e, NotMcp::KeyWithNul { .. }), "{body}: {e:?}");
            let msg = e.to_string();
            assert!(
                msg.contains("holds U+0000") && !msg.contains(['"', '\0', '\n']),
                "{msg}"
            );
        }
    }
    let e = read_body(bodies[0].as_bytes(), ReadOptions::default()).unwrap_err();
    assert_eq!(
        e,
        NotMcp::KeyWithNul {
            key: "name\0".into(),
            offset: bodies[0].find("\"name\\u0000").unwrap()
        }
    );
    // A long key is cut in the error as a duplicate is.
    let long = call(&format!(r#"{{"{}\u0000":1}}"#, "x".repeat(200)));
    let msg = read_body(long.as_bytes(), ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.len() < 100 && msg.starts_with("key 'xxxx"), "{msg}");
    // NUL in values (a tool name no rule names) and other escaped keys are read as before.
    let body = call(r#"{"name":"get-sum\u0000","n\u0061me\u0001":"x"}"#);
    let read = read_body(body.as_bytes(), ReadOptions::default()).unwrap();
    assert_eq!(read.messages()[0].name.as_deref(), Some("get-sum\0"));
}

#[test]
fn a_kept_body_is_the_body_read() {
    let capture = ReadOptions {
        capture_params: true,
    };
    for body in [
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1,{"y":"z"}]}}},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
        r#"[{"jsonrpc":"2.0","id":"x","method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"t\u006fols/call","params":{"name":"\u0061b","uri":"u\n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["a","b\/c"]}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
    ] {
        for opts in [capture, ReadOptions::default()] {
            let read = read_body(body.as_bytes(), opts).unwrap();
            let kept = KeptBody::keep(read.clone(), body.as_bytes());
            assert_eq!(kept.body(body.as_bytes()), Ok(read), "{body}");
        }
    }
}

#[test]
fn captured_params_with_keys_that_fold_together_are_refused() {
    let body = |arguments: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get-weather","arguments":{arguments}}}}}"#
        )
    };
    let capture = ReadOptions {
        capture_params: true,
    };
    for (arguments, key, twin) in [
        (r#"{"city":"Paris","City":"Berlin"}"#, "city", "City"),
        (r#"{"geo":{"lat":1,"LAT":2}}"#, "lat", "LAT"),
        // The Kelvin sign, raw and escaped; the long s.
        ("{\"list\":[{\"k\":1,\"\u{212a}\":2}]}", "k", "\u{212a}"),
        (r#"{"list":[{"k":1,"\u212a":2}]}"#, "k", "\u{212a}"),
        ("{\"is\":1,\"i\u{17f}\":2}", "is", "i\u{17f}"),
        // The sharp s and its capital (Go folds them together).
        (
            "{\"stra\u{df}e\":1,\"stra\u{1e9e}e\":2}",
            "stra\u{df}e",
            "stra\u{1e9e}e",
        ),
        // An escaped key is compared as decoded.
        (r#"{"\u0063ity":"Paris","CITY":"Berlin"}"#, "city", "CITY"),
    ] {
        let b = body(arguments);
        match read_body(b.as_bytes(), capture) {
            Err(NotMcp::FoldedTwins {
                key: k, twin: t, ..
            }) => assert_eq!((k.as_str(), t.as_str()), (key, twin), "{arguments}"),
            other => panic!("{arguments}: {other:?}"),
        }
        // Without capture, arguments reach no decision and are not read.
        assert!(
            read_body(b.as_bytes(), ReadOptions::default()).is_ok(),
            "{arguments}"
        );
    }
    // Distinct keys, and the same key in different objects, are fine.
    let ok = body(
        r#"{"city":"Paris","cities":["a"],"nested":{"city":"Lyon"},"list":[{"a":1},{"A":2}]}"#,
    );
    assert!(read_body(ok.as_bytes(), capture).is_ok());
    // What serde_json cannot decode is refused rather than left unchecked after it.
    let big = body(r#"{"n":1e400,"city":"Paris","City":"Berlin"}"#);
    assert!(matches!(
        read_body(big.as_bytes(), capture),
        Err(NotMcp::ParamsUndecodable { .. })
    ));
}

/// The serde_json walk that `twins::folded_twins` replaced (a HashMap per object), kept as its
/// reference: kept whole (it is long: a serde visitor and its seeds), as it was.
#[allow(clippy::items_after_statements)]
fn reference_folded_twins(json: &str, offset: usize) -> Result<(), NotMcp> {
    use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::fmt;

    /// A key as serde_json gives it: borrowed from the text when it has no escapes.
    struct Key;
    impl<'de> DeserializeSeed<'de> for Key {
        type Value = Cow<'de, str>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl<'de> Visitor<'de> for Key {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a key")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
    }

    /// The key with every character upper- then lower-cased; borrowed when that changes nothing
    /// (ASCII without capitals: almost every key).
    fn fold(key: &str) -> Cow<'_, str> {
        if key.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
            Cow::Borrowed(key)
        } else {
            Cow::Owned(
                key.chars()
                    .map(twins::sharp_s)
                    .flat_map(char::to_uppercase)
                    .flat_map(char::to_lowercase)
                    .collect(),
            )
        }
    }

    /// Walks every value; the first pair of twins found is left in the cell.
    #[derive(Clone, Copy)]
    struct Check<'c>(&'c RefCell<Option<(String, String)>>);
    impl<'de> DeserializeSeed<'de> for Check<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Check<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            // Folded key -> the key. A hash map (SipHash, random keys): an object may have a hundred
            // thousand keys, and their names are the client's.
            let mut seen: HashMap<Cow<'de, str>, Cow<'de, str>> = HashMap::new();
            while let Some(key) = map.next_key_seed(Key)? {
                let folded = match &key {
                    Cow::Borrowed(k) => fold(k),
                    Cow::Owned(k) => Cow::Owned(fold(k).into_owned()),
                };
                match seen.get(&folded) {
                    Some(first) if *first != key => {
                        *self.0.borrow_mut() = Some((first.to_string(), key.into_owned()));
                        return Err(A::Error::custom("folded twins"));
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(folded, key);
                    }
                }
                map.next_value_seed(self)?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(self)?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let twins = RefCell::new(None);
    let checked = Check(&twins).deserialize(&mut serde_json::Deserializer::from_str(json));
    match (checked, twins.into_inner()) {
        (_, Some((key, twin))) => Err(NotMcp::FoldedTwins { key, twin, offset }),
        (Err(e), None) => {
            let reason = e.to_string();
            let reason = reason
                .rsplit_once(" at line ")
                .map_or(reason.as_str(), |(r, _)| r)
                .to_string();
            Err(NotMcp::ParamsUndecodable { reason, offset })
        }
        (Ok(()), None) => Ok(()),
    }
}

/// The scanner-based check gives the serde_json walk's verdicts (same first twin, same
/// undecodable number, in the same order) on params of every shape: twins at every depth, in
/// small and big objects (the switch to a hash map), escaped and non-ASCII spellings, numbers in and
/// out of range, twins before and after an undecodable number. Long: the table of cases is the test.
#[test]
fn folded_twins_match_the_serde_json_walk() {
    use super::twins::folded_twins;
    const KEYS: [&str; 16] = [
        "a",
        "A",
        "k",
        "K",
        "\\u212a",
        "\u{212a}",
        "\\u004b",
        "s",
        "\\u017f",
        "\u{17f}",
        "S",
        "city",
        "City",
        "\\u0063ity",
        "\\u00df",
        "SS",
    ];
    const NUMBERS: [&str; 6] = [
        "1",
        "-0",
        "2.5e3",
        "1e400",
        "1E4444",
        "123456789012345678901234567890",
    ];
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut texts: Vec<String> = vec![
        r#"{"city":"Paris","City":"Berlin"}"#.into(),
        r#"{"n":1e400,"city":"Paris","City":"Berlin"}"#.into(),
        r#"{"city":"Paris","City":"Berlin","n":1e400}"#.into(),
        r#"{"list":[{"a":1},{"A":2}],"x":[[{"k":{"K":1}}]]}"#.into(),
    ];
    for big in [10, 16, 17, 40] {
        // Distinct keys, then a twin of the first / the last one.
        let keys: Vec<String> = (0..big).map(|i| format!("\"k{i}\":{i}")).collect();
        texts.push(format!("{{{}}}", keys.join(",")));
        texts.push(format!("{{{},\"K0\":1}}", keys.join(",")));
        texts.push(format!("{{{},\"K{}\":1}}", keys.join(","), big - 1));
        texts.push(format!("{{\"o\":{{{},\"\\u004b3\":1}}}}", keys.join(",")));
    }
    for _ in 0..3000 {
        // A random nest of objects and arrays over a small alphabet of keys that fold together
        // (each key at most once per object: exact duplicates are the reader's to refuse).
        let mut s = String::from("{");
        let mut used: Vec<Vec<&str>> = vec![Vec::new()];
        for _ in 0..next() % 12 + 1 {
            let r = next();
            let key = KEYS[(r % KEYS.len() as u64) as usize];
            let Some(level) = used.last_mut() else { break };
            if level.contains(&key) {
                continue;
            }
            if !level.is_empty() {
                s.push(',');
            }
            level.push(key);
            s.push_str(&format!("\"{key}\":"));
            let number = NUMBERS[((r >> 16) % NUMBERS.len() as u64) as usize];
            match (r >> 8) % 5 {
                0 if used.len() < 6 => {
                    s.push('{');
                    used.push(Vec::new());
                    continue;
                }
                1 => s.push_str(&format!("[{number},{{\"a\":1,\"A\":2}}]")),
                2 => s.push_str(number),
                _ => s.push_str("\"v\""),
            }
            if (r >> 24) % 3 == 0 && used.len() > 1 {
                s.push('}');
                used.pop();
            }
        }
        for _ in 0..used.len() {
            s.push('}');
        }
        texts.push(s);
    }
    let (mut checked, mut twins, mut undecodable) = (0, 0, 0);
    for text in &texts {
        // Only what the reader accepts reaches the check.
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{text}}}"#);
        if read_body(body.as_bytes(), ReadOptions::default()).is_err() {
            continue;
        }
        let verdict = folded_twins(text, 7);
        assert_eq!(verdict, reference_folded_twins(text, 7), "{text}");
        checked += 1;
        twins += usize::from(matches!(verdict, Err(NotMcp::FoldedTwins { .. })));
        undecodable += usize::from(matches!(verdict, Err(NotMcp::ParamsUndecodable { .. })));
    }
    assert!(
        checked > 2000 && twins > 300 && undecodable > 300 && checked - twins - undecodable > 300,
        "{checked} {twins} {undecodable}"
    );
}

#[test]
fn keys_go_folds_together_are_twins() {
    // Every folding orbit of Go's unicode.SimpleFold, with which encoding/json matches keys
    // (go_fold_orbits.txt, printed by tests/go-mcp-server/cmd/fold-orbits; test_go_decoder.py
    // checks it is what that Go prints): two keys differing by members of one orbit are one key to
    // a Go server, so in a captured `params` they must be twins.
    use super::twins::folded_twins;
    let mut orbits = 0;
    for line in include_str!("go_fold_orbits.txt").lines() {
        let runes: Vec<char> = line
            .split(' ')
            .map(|h| {
                u32::from_str_radix(h, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap()
            })
            .collect();
        for other in &runes[1..] {
            let json = format!(r#"{{"k{}":1,"k{other}":2}}"#, runes[0]);
            assert!(
                matches!(folded_twins(&json, 0), Err(NotMcp::FoldedTwins { .. })),
                "{line}: {json}"
            );
        }
        orbits += 1;
    }
    assert!(orbits > 1000, "{orbits}");
}

/// The reader's memory kept between reads (the lifecycle's, per plugin) carries nothing from one body
/// to the next: after bodies that fail deep inside objects (open frames and keys left behind), a
/// duplicate-key object, one of thousands of keys (hashed, not kept on the stack), every read
/// answers as a fresh one.
#[test]
fn reads_with_kept_memory_answer_as_fresh_ones() {
    let many: Vec<String> = (0..3000).map(|i| format!("\"k{i}\":{i}")).collect();
    let many = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{{}}}}}"#,
        many.join(",")
    );
    let bodies = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":{"y":[1,{"z":"#.to_string(),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"c","name":"d"}}"#.to_string(),
        many,
        r#"[{"jsonrpc":"2.0","id":4,"method":"tools/list"},{"jsonrpc":"2.0","id":5,"method":"ping"}]"#.to_string(),
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"e","arguments":{"a":1,"a":2}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"f"}}"#.to_string(),
    ];
    let mut memory = ReadScratch::default();
    for _ in 0..2 {
        for body in &bodies {
            for opts in [
                ReadOptions::default(),
                ReadOptions {
                    capture_params: true,
                },
            ] {
                let fresh = read_body(body.as_bytes(), opts);
                assert_eq!(
                    read_body_with(body.as_bytes(), opts, &mut memory),
                    fresh,
                    "{}",
                    &body[..body.len().min(80)]
                );
            }
        }
        assert!(memory.frames.is_empty() && memory.keys.is_empty());
        assert!(memory.keys.capacity() <= SCRATCH_KEYS);
    }
}
