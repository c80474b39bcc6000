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
    let r = rewrite(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get-a"}],"ttlMs":6000,"cacheScope":"public"}}"#, TOOLS_LIST).unwrap();
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
    let filtered = "event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"get-a\"}]}}\n\n";
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
    let crlf = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"tools\":[{\"name\":\"echo\"}]}}\r\n\r\n";
    let (out, _) = sse(&[crlf], 1 << 20);
    assert_eq!(out.unwrap(), "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"tools\":[]}}\r\n\r\n");
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
