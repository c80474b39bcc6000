use super::*;
use crate::mcp::{read_body, ReadOptions};

fn requests(body: &str) -> ListRequests {
    ListRequests::of(&read_body(body.as_bytes(), ReadOptions::default()).unwrap())
}

/// Keeps tools and prompts whose name starts with "get-", resources under file:///pub/.
fn keep(kind: ListKind, name: &str) -> bool {
    match kind {
        ListKind::Resources => name.starts_with("file:///pub/"),
        _ => name.starts_with("get-"),
    }
}

fn rewrite(text: &str, req: &str) -> Result<Rewrite, Unreadable> {
    rewrite_json(text, &requests(req), &mut keep)
}

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;

#[test]
fn list_requests_are_found_with_their_ids() {
    let r = requests(
        r#"[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}},{"jsonrpc":"2.0","id":3.0,"method":"resources/list"},{"jsonrpc":"2.0","method":"prompts/list"},{"jsonrpc":"2.0","id":4,"method":"resources/templates/list"}]"#,
    );
    assert_eq!(
        r.0,
        vec![
            ("\"a\"".to_string(), ListKind::Tools),
            ("3.0".to_string(), ListKind::Resources)
        ]
    );
    assert_eq!(r.kind_of("\"\\u0061\""), Some(ListKind::Tools));
    assert_eq!(r.kind_of("2"), None);
    assert!(
        requests(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#)
            .is_empty()
    );
}

#[test]
fn a_json_list_keeps_only_allowed_entries_and_its_formatting() {
    let text = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-sum","inputSchema":{}},{"name":"echo"},{"name":"get-env","description":"[x]"}],"nextCursor":"c2"}}"#;
    let r = rewrite(text, TOOLS_LIST).unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-sum","inputSchema":{}},{"name":"get-env","description":"[x]"}],"nextCursor":"c2"}}"#
        )
    );
    assert_eq!((r.lists, r.removed, r.entries), (1, 1, 3));
    // Pretty-printed: the spacing between and around entries is the original's.
    let pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"result\": {\n    \"tools\": [\n      {\"name\": \"echo\"},\n      {\"name\": \"get-sum\"},\n      {\"name\": \"rm\"}\n    ]\n  }\n}";
    let r = rewrite(pretty, TOOLS_LIST).unwrap();
    assert_eq!(
        r.text.unwrap(),
        pretty
            .replace("      {\"name\": \"echo\"},\n", "")
            .replace(",\n      {\"name\": \"rm\"}", "")
    );
    // Nothing allowed: an empty array. Nothing removed: no new text.
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"echo"}]}}"#,
        TOOLS_LIST,
    )
    .unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#)
    );
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}]}}"#,
        TOOLS_LIST,
    )
    .unwrap();
    assert_eq!((r.text, r.lists, r.removed), (None, 1, 0));
}

#[test]
fn prompts_and_resources_are_filtered_by_name_and_uri() {
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"get-x"},{"name":"summarise"}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#,
    )
    .unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(r#"{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"get-x"}]}}"#)
    );
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///secret/a","name":"get-a"},{"uri":"file:///pub/b","name":"b"}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#,
    )
    .unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(
            r#"{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///pub/b","name":"b"}]}}"#
        )
    );
}

#[test]
fn entries_without_a_clear_name_are_removed() {
    let text = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a","name":"echo"},{"Name":"get-b"},{"name":7},{},"x",{"name":"get-\u0063"}]}}"#;
    let r = rewrite(text, TOOLS_LIST).unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-\u0063"}]}}"#)
    );
    assert_eq!((r.removed, r.entries), (5, 6));
}

#[test]
fn cache_scope_public_becomes_private_even_when_nothing_is_removed() {
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}],"ttlMs":6000,"cacheScope":"public"}}"#,
        TOOLS_LIST,
    )
    .unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}],"ttlMs":6000,"cacheScope":"private"}}"#
        )
    );
    let r = rewrite(
        r#"{"jsonrpc":"2.0","id":7,"result":{"cacheScope":"public","tools":[{"name":"x"}]}}"#,
        TOOLS_LIST,
    )
    .unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(r#"{"jsonrpc":"2.0","id":7,"result":{"cacheScope":"private","tools":[]}}"#)
    );
    let private = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"cacheScope":"private"}}"#;
    assert_eq!(rewrite(private, TOOLS_LIST).unwrap().text, None);
}

#[test]
fn other_responses_pass_and_batches_are_filtered_by_id() {
    for text in [
        r#"{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
    ] {
        let r = rewrite(text, TOOLS_LIST).unwrap();
        assert_eq!((r.text, r.lists), (None, 0), "{text}");
    }
    let req = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}]"#;
    let text = r#"[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}},{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"},{"name":"get-a"}]}}]"#;
    let r = rewrite(text, req).unwrap();
    assert_eq!(
        r.text.as_deref(),
        Some(
            r#"[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}},{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get-a"}]}}]"#
        )
    );
}

#[test]
fn what_cannot_be_read_as_a_client_reads_it_is_refused() {
    for text in [
        "not json",
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}]}} trailing"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"Tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tool\u017f":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":{"name":"echo"}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"id":8,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]},"result":{"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":[1]}"#,
    ] {
        assert!(rewrite(text, TOOLS_LIST).is_err(), "{text}");
    }
    let e = rewrite("not json", TOOLS_LIST).unwrap_err();
    let reply: serde_json::Value = serde_json::from_str(&error_reply("7", &e)).unwrap();
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], -32603);
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON-RPC"),
        "{reply}"
    );
}

fn sse(chunks: &[&str], limit: usize) -> (Result<String, Unreadable>, Rewrite) {
    let reqs = requests(TOOLS_LIST);
    let mut f = SseFilter::default();
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        match f.feed(c.as_bytes(), i + 1 == chunks.len(), limit, &reqs, &mut keep) {
            Ok(bytes) => out.extend(bytes),
            Err(e) => return (Err(e), f.done),
        }
    }
    (Ok(String::from_utf8(out).unwrap()), f.done)
}

#[test]
fn an_event_stream_is_filtered_event_by_event_with_its_framing_kept() {
    let note = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n";
    let list = "event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"get-a\"}]}}\n\n";
    let filtered =
        "event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"get-a\"}]}}\n\n";
    let whole = format!(": keep-alive\n\n{note}{list}");
    // Whatever the chunking, the same output; events before the list pass untouched.
    for cut in [1, 7, 20, 60, 100, whole.len() - 1] {
        let (a, b) = whole.split_at(cut);
        let (out, done) = sse(&[a, b], 1 << 20);
        assert_eq!(
            out.unwrap(),
            format!(": keep-alive\n\n{note}{filtered}"),
            "cut at {cut}"
        );
        assert_eq!((done.lists, done.removed), (1, 1));
    }
    // CRLF line endings and JSON split over several data lines.
    let crlf =
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"tools\":[{\"name\":\"echo\"}]}}\r\n\r\n";
    let (out, _) = sse(&[crlf], 1 << 20);
    assert_eq!(
        out.unwrap(),
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"tools\":[]}}\r\n\r\n"
    );
    // The last event without its blank line is still filtered.
    let (out, _) = sse(
        &["data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"echo\"}]}}"],
        1 << 20,
    );
    assert_eq!(
        out.unwrap(),
        "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}\n"
    );
}

#[test]
fn an_event_stream_that_cannot_be_read_is_refused() {
    let (out, _) = sse(
        &["data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[],\"tools\":[]}}\n\n"],
        1 << 20,
    );
    assert!(matches!(out, Err(Unreadable::Ambiguous(_))), "{out:?}");
    let (out, _) = sse(
        &[
            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[",
            "{\"name\":\"echo\"}",
        ],
        30,
    );
    assert_eq!(out, Err(Unreadable::TooLarge(30)));
    let (out, _) = sse(&["data: {\"jsonrpc\":\"2.0\",\"id\":7,\"resu"], 1 << 20);
    assert!(matches!(out, Err(Unreadable::Syntax(_))), "{out:?}");
}

// The single pass (list_filter/json.rs) against the serde_json reading it replaced
// (list_filter/serde_reference.rs): the same text or the same kind of refusal, always.

const ALL_LISTS: &str = r#"[{"jsonrpc":"2.0","id":7,"method":"tools/list"},{"jsonrpc":"2.0","id":"p","method":"prompts/list"},{"jsonrpc":"2.0","id":3,"method":"resources/list"}]"#;

/// Both readings of `text`; panics when they differ. Returns the single pass's.
fn same(text: &str, req: &str) -> Result<Rewrite, Unreadable> {
    let reqs = requests(req);
    let mut calls = Vec::new();
    let mut keep_new = |kind: ListKind, name: &str| {
        calls.push((kind, name.to_string()));
        keep(kind, name)
    };
    let new = rewrite_json(text, &reqs, &mut keep_new);
    let mut reference_calls = Vec::new();
    let mut keep_old = |kind: ListKind, name: &str| {
        reference_calls.push((kind, name.to_string()));
        keep(kind, name)
    };
    let old = serde_reference::rewrite_json(text, &reqs, &mut keep_old);
    match (&new, &old) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{text:?}");
            assert_eq!(calls, reference_calls, "{text:?}");
        }
        (Err(Unreadable::Syntax(_)), Err(Unreadable::Syntax(_))) => {}
        (Err(Unreadable::Ambiguous(a)), Err(Unreadable::Ambiguous(b))) => {
            assert_eq!(a, b, "{text:?}")
        }
        _ => panic!("{text:?}: single pass {new:?}, serde_json {old:?}"),
    }
    new
}

/// Texts that exercise every level: each test's inputs and more.
fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-sum","inputSchema":{}},{"name":"echo"},{"name":"get-env","description":"[x]"}],"nextCursor":"c2"}}"#,
        "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"result\": {\n    \"tools\": [\n      {\"name\": \"echo\"},\n      {\"name\": \"get-sum\"},\n      {\"name\": \"rm\"}\n    ]\n  }\n}",
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a","name":"echo"},{"Name":"get-b"},{"name":7},{},"x",{"name":"get-\u0063"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}],"ttlMs":6000,"cacheScope":"public"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"cacheScope":"public","tools":[{"name":"x"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        r#"[{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}},{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"echo"},{"name":"get-a"}]}}]"#,
        r#"{"result":{"prompts":[{"name":"get-x"},{"name":"summarise"}]},"id":"p","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"resources":[{"uri":"file:///secret/a","name":"get-a"},{"uri":"file:///pub/b","name":"b"}],"cacheScope":"public"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":{"name":"echo"}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"id":8,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":[1]}"#,
        r#"[1,{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"echo"}]}}]"#,
        r#"[{"jsonrpc":"2.0","id":7,"ID":7,"result":{}},"x"]"#,
        r#"[]"#,
        r#"{}"#,
        // Escaped keys and names.
        r#"{"jsonrpc":"2.0","\u0069d":7,"r\u0065sult":{"t\u006fols":[{"n\u0061me":"echo"},{"name":"get-\u0061"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-\ud83d\ude00"},{"name":"get-\ud83d"},{"\ud800":1,"name":"get-b"},{"name":"get-c","x":"\udc00"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"\udc00":1,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":8,"result":{"\ud800":1}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"\ud800":1,"tools":[]}}"#,
        // Keys that fold to a judged one.
        r#"{"jsonrpc":"2.0","id":7,"result":{"TOOLS":[],"tools":[{"name":"get-a"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"echo"}],"toolſ":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a","NAME":"echo"},{"nAme":"get-b"}],"CacheScope":"public"}}"#,
        r#"{"jsonrpc":"2.0","ıd":7,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":8,"Result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"resources":[{"uri":"file:///pub/a","URI":"x"},{"uri":"file:///pub/b"}],"Prompts":1}}"#,
        // Nested `tools`, `name`, `result` and `id` that are not the judged ones.
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a","inputSchema":{"tools":[{"name":"echo"}],"name":"x","id":1}},{"meta":{"name":"get-b"}}],"x":{"tools":1,"cacheScope":"public"}},"error":{"result":{"tools":[]}}}"#,
        // Strings with brackets, braces, quotes and escapes.
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-[{\"]}","d":"]},{\"name\":\"get-x\"}"},{"name":"e]}"}]}}"#,
        // Numbers at the edges of the grammar.
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a","n":[0,-0,1E4444,-1e-4444,0.0e+0,123456789012345678901234567890,1.5E3]}]}}"#,
        r#"{"jsonrpc":"2.0","id":1E4444,"result":{"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":7.0,"result":{"tools":[{"name":"echo"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"\u0070","result":{"prompts":[{"name":"echo"}]}}"#,
        // Strings longer than a few eight-byte words (a tool's description), with escaped quotes,
        // backslashes and \u escapes at and across word edges.
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a-tool-with-a-long-name","description":"Reads a file under /srv/data, \"quoted\", a \\ and \u00e9 \ud83d\ude00: long enough"},{"name":"echo-0123456789\"ab","d":"0123456789abcdef0123456789abcdef\n"}]}}"#,
        // Literals and empty containers everywhere.
        r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[null,true,false,[],{},{"name":null},{"name":"get-a","x":[[],{},[{}]]}]}}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Whitespace around every token.
    texts.push(
        " \t\r\n{ \"jsonrpc\" :\t\"2.0\" ,\r\n\"id\"\n:\n7 , \"result\" : { \"tools\" : [ { \"name\" : \"echo\" } ,\n { \"name\" : \"get-a\" , \"x\" : [ 1 , { } ] } ] , \"cacheScope\" : \"public\" } } \n"
            .to_string(),
    );
    texts
}

#[test]
fn the_single_pass_reads_as_serde_json_did() {
    for text in corpus() {
        for req in [TOOLS_LIST, ALL_LISTS] {
            let _ = same(&text, req);
        }
    }
    // Spot checks of what the comparison covers.
    let pick = |needle: &str| corpus().into_iter().find(|t| t.contains(needle)).unwrap();
    let r = same(&pick(r#""\u0069d":7"#), TOOLS_LIST).unwrap();
    assert_eq!(
        (r.lists, r.removed, r.entries),
        (1, 1, 2),
        "escaped keys are the keys they decode to"
    );
    assert!(matches!(
        same(&pick(r#""TOOLS":[]"#), TOOLS_LIST),
        Err(Unreadable::Ambiguous(_))
    ));
    assert!(matches!(
        same(&pick(r#""toolſ""#), TOOLS_LIST),
        Err(Unreadable::Ambiguous(_))
    ));
    assert!(matches!(
        same(&pick(r#""ıd""#), TOOLS_LIST),
        Err(Unreadable::Ambiguous(_))
    ));
    assert!(matches!(
        same(&pick(r#""\udc00":1"#), TOOLS_LIST),
        Err(Unreadable::Syntax(_))
    ));
    assert_eq!(
        same(&pick(r#""id":8,"result":{"\ud800""#), TOOLS_LIST)
            .unwrap()
            .lists,
        0
    );
    let r = same(&pick(r#""get-\ud83d\ude00""#), TOOLS_LIST).unwrap();
    assert_eq!(
        (r.removed, r.entries),
        (2, 4),
        "a lone surrogate in a name or an entry's key removes the entry"
    );
    let r = same(&pick(r#""inputSchema":{"tools""#), TOOLS_LIST).unwrap();
    assert_eq!(
        (r.removed, r.entries),
        (1, 2),
        "nested keys are not the list's"
    );
    let r = same(&pick(r#""get-[{\"]}""#), TOOLS_LIST).unwrap();
    assert_eq!((r.removed, r.entries), (1, 2));
    let r = same(&pick("1E4444,-1e-4444"), TOOLS_LIST).unwrap();
    assert_eq!((r.text, r.removed), (None, 0), "1E4444 is JSON");
}

#[test]
fn every_cut_of_a_list_is_refused_as_syntax_never_passed_on() {
    for text in corpus() {
        for cut in 0..text.len() {
            let Some(prefix) = text.get(..cut) else {
                continue;
            };
            if serde_json::from_str::<serde_json::value::Value>(prefix).is_ok() {
                continue;
            }
            match same(prefix, ALL_LISTS) {
                Err(Unreadable::Syntax(_)) => {}
                other => panic!("{prefix:?}: {other:?}"),
            }
        }
    }
}

#[test]
fn every_byte_changed_reads_as_serde_json_did() {
    let replacements: &[&str] = &[
        "", " ", "\n", "\"", "\\", ",", ":", "[", "]", "{", "}", "0", "-", "e", ".", "n", "x",
        "\u{1}", "\\u00", "é",
    ];
    for text in corpus() {
        for at in 0..=text.len() {
            if !text.is_char_boundary(at) {
                continue;
            }
            let next = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
            for rep in replacements {
                // Replaced, and inserted.
                let _ = same(&format!("{}{rep}{}", &text[..at], &text[next..]), ALL_LISTS);
                let _ = same(&format!("{}{rep}{}", &text[..at], &text[at..]), ALL_LISTS);
            }
        }
    }
}

#[test]
fn numbers_at_the_edges_of_the_grammar() {
    for n in [
        "0",
        "-0",
        "1E4444",
        "-1e-4444",
        "0.0e+0",
        "1.5E3",
        "9".repeat(400).as_str(),
        "01",
        "1.",
        "-",
        ".5",
        "+1",
        "1e",
        "1e+",
        "0x1",
        "1.e3",
        "--1",
        "1E4444.5",
        "Infinity",
        "NaN",
    ] {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"echo","n":{n}}}]}}}}"#
        );
        let valid = serde_json::from_str::<&serde_json::value::RawValue>(&text).is_ok();
        match same(&text, TOOLS_LIST) {
            Ok(r) => assert!(valid && r.removed == 1, "{n}"),
            Err(Unreadable::Syntax(_)) => assert!(!valid, "{n}"),
            Err(e) => panic!("{n}: {e:?}"),
        }
    }
}

#[test]
fn deep_nesting_is_json_at_any_depth() {
    // serde_json's raw values have no depth limit; neither has the single pass (and no recursion).
    for depth in [1, 64, 65, 128, 129, 100_000] {
        let nested = format!("{}1{}", "[{\"a\":".repeat(depth), "}]".repeat(depth));
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"echo","x":{nested}}},{{"name":"get-a"}}],"deep":{nested}}},"more":{nested}}}"#
        );
        let r = rewrite(&text, TOOLS_LIST).unwrap();
        assert_eq!((r.removed, r.entries), (1, 2), "{depth}");
        // Unclosed, or closed by the wrong bracket: refused.
        let open = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"echo","x":{}1"#,
            "[".repeat(depth)
        );
        assert!(matches!(
            rewrite(&open, TOOLS_LIST),
            Err(Unreadable::Syntax(_))
        ));
        let wrong = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"echo","x":{}1{}}}]}}}}"#,
            "[".repeat(depth),
            "}".repeat(depth)
        );
        assert!(matches!(
            rewrite(&wrong, TOOLS_LIST),
            Err(Unreadable::Syntax(_))
        ));
    }
}

#[test]
fn whitespace_everywhere_is_kept() {
    let spaced = corpus().pop().unwrap();
    let r = same(&spaced, TOOLS_LIST).unwrap();
    assert_eq!(
        r.text.unwrap(),
        " \t\r\n{ \"jsonrpc\" :\t\"2.0\" ,\r\n\"id\"\n:\n7 , \"result\" : { \"tools\" : [ { \"name\" : \"get-a\" , \"x\" : [ 1 , { } ] } ] , \"cacheScope\" : \"private\" } } \n"
    );
    // Not JSON whitespace: refused.
    for ws in ["\u{a0}", "\u{b}", "\u{c}", "\u{2028}", "\u{feff}"] {
        let text = format!("{ws}{}", corpus()[0]);
        assert!(
            matches!(same(&text, TOOLS_LIST), Err(Unreadable::Syntax(_))),
            "{ws:?}"
        );
        let text = corpus()[0].replace(",\"id\"", &format!(",{ws}\"id\""));
        assert!(
            matches!(same(&text, TOOLS_LIST), Err(Unreadable::Syntax(_))),
            "{ws:?}"
        );
    }
}

#[test]
fn an_event_stream_gives_the_same_output_however_it_is_cut() {
    let list = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"get-a\"}]}}";
    let stream = format!(
        ": keep-alive\r\n\r\nevent: message\rdata: {list}\r\rid: 1\ndata: {{\"jsonrpc\":\"2.0\",\ndata: \"method\":\"x\"}}\n\nevent: message\r\ndata: {list}\r\n\r\ndata: {list}"
    );
    let (whole, done) = sse(&[&stream], 1 << 20);
    let whole = whole.unwrap();
    assert_eq!(whole.matches("get-a").count(), 3);
    assert_eq!(whole.matches("echo").count(), 0);
    assert_eq!((done.lists, done.removed), (3, 3));
    for cut in 0..=stream.len() {
        let (a, b) = stream.split_at(cut);
        assert_eq!(
            sse(&[a, b], 1 << 20).0.as_deref(),
            Ok(whole.as_str()),
            "cut at {cut}"
        );
    }
    let bytes: Vec<String> = stream.chars().map(String::from).collect();
    let bytes: Vec<&str> = bytes.iter().map(String::as_str).collect();
    assert_eq!(
        sse(&bytes, 1 << 20).0.as_deref(),
        Ok(whole.as_str()),
        "byte by byte"
    );
}
