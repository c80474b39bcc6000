//! Response shaping for the list-filtering tests.

use super::modern::{modern, V26};
use super::*;

/// `data` decoded from a gzip member of stored deflate blocks (what the server writes).
fn gunzip_stored(data: &[u8]) -> Vec<u8> {
    assert_eq!(
        &data[..4],
        &[0x1f, 0x8b, 8, 0],
        "a gzip member without optional fields"
    );
    let mut i = 10;
    let mut out = Vec::new();
    loop {
        let last = data[i] & 1 == 1;
        assert_eq!(data[i] >> 1, 0, "a stored block");
        let len = u16::from_le_bytes([data[i + 1], data[i + 2]]) as usize;
        let nlen = u16::from_le_bytes([data[i + 3], data[i + 4]]) as usize;
        assert_eq!(len, !nlen & 0xffff);
        out.extend_from_slice(&data[i + 5..i + 5 + len]);
        i += 5 + len;
        if last {
            break;
        }
    }
    let isize = u32::from_le_bytes(data[i + 4..i + 8].try_into().unwrap());
    assert_eq!(isize as usize, out.len());
    assert_eq!(i + 8, data.len());
    out
}

fn list(s: &Server, id: i64, method: &str, params: Value, headers: &[(&str, &str)]) -> Resp {
    s.post(
        headers,
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
}

fn names(v: &Value, key: &str, field: &str) -> Vec<String> {
    v["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {v}"))
        .iter()
        .map(|e| e[field].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn pages_follow_cursors_to_every_entry() {
    let s = Server::start("pages");
    // Without a page size: everything, no cursor.
    let v = list(&s, 1, "tools/list", json!({}), &[]).json();
    assert_eq!(names(&v, "tools", "name"), ALL_TOOLS);
    assert!(v["result"].get("nextCursor").is_none());
    // Pages of 5: the cursor keeps the size, so following it needs no header.
    let mut seen = Vec::new();
    let mut params = json!({});
    let mut headers: &[(&str, &str)] = &[("x-test-page-size", "5")];
    let mut pages = 0;
    loop {
        let v = list(&s, 2, "tools/list", params.clone(), headers).json();
        let page = names(&v, "tools", "name");
        assert!(page.len() <= 5, "{page:?}");
        seen.extend(page);
        pages += 1;
        match v["result"].get("nextCursor") {
            Some(Value::String(c)) => params = json!({"cursor": c}),
            None => break,
            other => panic!("nextCursor {other:?}"),
        }
        headers = &[];
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ALL_TOOLS);
    // Prompts and resources page the same way, in both revisions.
    let v = list(
        &s,
        3,
        "prompts/list",
        json!({}),
        &[("x-test-page-size", "2")],
    )
    .json();
    assert_eq!(names(&v, "prompts", "name"), ["greeting", "summarize"]);
    let c = v["result"]["nextCursor"].as_str().unwrap().to_string();
    let v = list(&s, 4, "prompts/list", json!({"cursor": c}), &[]).json();
    assert_eq!(names(&v, "prompts", "name"), ["code-review"]);
    assert!(v["result"].get("nextCursor").is_none());
    let pv = ("mcp-protocol-version", V26);
    let v = s
        .post(
            &[
                pv,
                ("mcp-method", "resources/list"),
                ("x-test-page-size", "1"),
            ],
            &modern(json!(5), "resources/list", json!({})),
        )
        .json();
    assert_eq!(names(&v, "resources", "uri"), ["memo://insights"]);
    assert_eq!(v["result"]["cacheScope"], "public");
    assert!(v["result"]["nextCursor"].is_string(), "{v}");
    // A cursor this server did not make: invalid params.
    for bad in [
        json!("nope"),
        json!("page:x:1"),
        json!("page:99:1"),
        json!(3),
    ] {
        let v = list(&s, 6, "tools/list", json!({"cursor": bad}), &[]).json();
        assert_eq!(v["error"]["code"], -32602, "{bad}");
    }
}

#[test]
fn sse_answers_come_chunked_after_a_notification() {
    let s = Server::start("sse-lists");
    let mut c = s.connect();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: t\r\nx-test-sse: 1\r\nx-test-page-size: 4\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    c.w.write_all(head.as_bytes()).unwrap();
    // Read the head, then the chunks one by one.
    let head = c.read_head();
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(
        head.header("content-type"),
        Some("text/event-stream"),
        "{head:?}"
    );
    assert_eq!(
        head.header("transfer-encoding"),
        Some("chunked"),
        "{head:?}"
    );
    let chunks = c.read_chunks();
    assert_eq!(
        chunks.len(),
        3,
        "a notification, the response in two pieces"
    );
    let text = String::from_utf8(chunks.concat()).unwrap();
    let events: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(events.len(), 2, "{text}");
    let data = |e: &str| -> Value {
        let d = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(d).unwrap()
    };
    assert_eq!(data(events[0])["method"], "notifications/message");
    let v = data(events[1]);
    assert_eq!(v["id"], 7);
    assert_eq!(names(&v, "tools", "name"), ALL_TOOLS[..4]);
    assert!(v["result"]["nextCursor"].is_string());
    // The connection stays usable.
    let r = c.send(
        "POST",
        "/mcp",
        &[],
        &call(json!(8), "echo", json!({"message": "m"})).to_string(),
    );
    assert_eq!(text_of(&r.json()), "m");
    // A batch: one event per response.
    let r = s.request(
        "POST",
        "/mcp",
        &[("x-test-sse", "1")],
        &json!([call(json!(1), "echo", json!({"message": "x"})),
                {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}])
        .to_string(),
    );
    let text = String::from_utf8(r.body).unwrap();
    assert_eq!(text.matches("data: ").count(), 3, "{text}");
}

#[test]
fn gzip_when_accepted_or_forced_and_broken_lists() {
    let s = Server::start("gzip");
    let plain = list(&s, 1, "tools/list", json!({}), &[]);
    assert_eq!(plain.header("content-encoding"), None);
    for accept in ["gzip", "deflate, gzip;q=0.5", "br, x-gzip"] {
        let r = list(
            &s,
            1,
            "tools/list",
            json!({}),
            &[("accept-encoding", accept)],
        );
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{accept}");
        assert_eq!(gunzip_stored(&r.body), plain.body, "{accept}");
    }
    for refuse in ["identity", "gzip;q=0", "br"] {
        let r = list(
            &s,
            1,
            "tools/list",
            json!({}),
            &[("accept-encoding", refuse)],
        );
        assert_eq!(r.header("content-encoding"), None, "{refuse}");
    }
    // Forced: whatever accept-encoding says; any response.
    let r = list(&s, 1, "prompts/list", json!({}), &[("x-test-gzip", "1")]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let v: Value = serde_json::from_slice(&gunzip_stored(&r.body)).unwrap();
    assert_eq!(names(&v, "prompts", "name").len(), 3);
    let r = list(
        &s,
        1,
        "tools/list",
        json!({}),
        &[("x-test-gzip", "1"), ("x-test-sse", "1")],
    );
    let text = String::from_utf8(gunzip_stored(&r.body)).unwrap();
    assert!(text.starts_with("event: message\ndata: {"), "{text}");
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    // Broken: the list response loses its last byte; other methods are untouched.
    let r = list(
        &s,
        1,
        "resources/list",
        json!({}),
        &[("x-test-broken-list", "1")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
    let whole = list(&s, 1, "resources/list", json!({}), &[]);
    assert_eq!(r.body, whole.body[..whole.body.len() - 1]);
    let r = s.request(
        "POST",
        "/mcp",
        &[("x-test-broken-list", "1")],
        &call(json!(2), "echo", json!({"message": "ok"})).to_string(),
    );
    assert_eq!(text_of(&r.json()), "ok");
    // The execution log has every header the server got.
    let log = s.log_lines();
    assert_eq!(log[1]["headers"]["accept-encoding"], "gzip");
    assert!(log[0]["headers"].get("accept-encoding").is_none());
}

#[test]
fn templates_are_listed() {
    let s = Server::start("templates");
    let v = list(&s, 1, "resources/templates/list", json!({}), &[]).json();
    assert_eq!(
        v["result"]["resourceTemplates"][0]["uriTemplate"],
        "file:///data/{name}"
    );
}
