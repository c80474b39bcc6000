//! MCP 2026-07-28 beside 2025-11-25.

use super::*;

pub(super) const V26: &str = "2026-07-28";

pub(super) fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": V26,
                             "io.modelcontextprotocol/clientCapabilities": {}});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn modern_discover_lists_and_calls_with_headers() {
    let s = Server::start("modern");
    let pv = ("mcp-protocol-version", V26);
    let r = s.post(
        &[pv, ("mcp-method", "server/discover")],
        &modern(json!("d"), "server/discover", json!({})),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("mcp-session-id"),
        None,
        "no sessions in 2026-07-28"
    );
    let v = r.json()["result"].clone();
    assert_eq!(v["supportedVersions"], json!([V26]));
    assert_eq!(v["resultType"], "complete");
    assert_eq!(v["cacheScope"], "public");
    assert!(v["ttlMs"].as_u64().unwrap() > 0);
    assert_eq!(
        v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "modern"
    );
    assert!(v["capabilities"]["tools"].is_object());

    for (method, key) in [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
    ] {
        let v = s
            .post(
                &[pv, ("mcp-method", method)],
                &modern(json!(1), method, json!({})),
            )
            .json();
        assert!(v["result"][key].is_array(), "{method}: {v}");
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["cacheScope"], "public");
        assert!(v["result"]["ttlMs"].is_u64(), "{method}");
    }
    let call = modern(
        json!(2),
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 2, "b": 5}}),
    );
    let r = s.post(
        &[pv, ("mcp-method", "tools/call"), ("mcp-name", "get-sum")],
        &call,
    );
    assert_eq!(r.status, 200);
    assert_eq!(text_of(&r.json()), "7");
    assert_eq!(r.json()["result"]["resultType"], "complete");
    assert!(
        r.json()["result"].get("ttlMs").is_none(),
        "tool results are not cacheable"
    );
    let read = modern(
        json!(3),
        "resources/read",
        json!({"uri": "memo://insights"}),
    );
    let v = s
        .post(
            &[
                pv,
                ("mcp-method", "resources/read"),
                ("mcp-name", "memo://insights"),
            ],
            &read,
        )
        .json();
    assert_eq!(v["result"]["contents"][0]["uri"], "memo://insights");
    assert_eq!(v["result"]["cacheScope"], "public");
    // The same endpoint still speaks 2025-11-25.
    let v = s
        .rpc(&json!({"jsonrpc": "2.0", "id": 4, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        .json();
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
    assert!(v["result"].get("resultType").is_none());
    let logged: Vec<Value> = s
        .log_lines()
        .iter()
        .map(|l| l["jsonrpc_method"].clone())
        .collect();
    assert_eq!(logged.len(), 7, "{logged:?}");
}

#[test]
fn modern_header_mismatches_are_400_and_not_executed() {
    let s = Server::start("mismatch");
    let pv = ("mcp-protocol-version", V26);
    let call = |name: &str| {
        modern(
            json!(7),
            "tools/call",
            json!({"name": name, "arguments": {"message": "x"}}),
        )
    };
    let mismatch = |r: Resp, what: &str| {
        assert_eq!(r.status, 400, "{what}");
        let v = r.json();
        assert_eq!(v["error"]["code"], -32020, "{what}: {v}");
        assert_eq!(v["id"], 7, "{what}");
        let msg = v["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.starts_with("Header mismatch: "), "{msg}");
        msg
    };
    let m = mismatch(
        s.post(
            &[pv, ("mcp-method", "tools/call"), ("mcp-name", "get-env")],
            &call("echo"),
        ),
        "name",
    );
    assert!(m.contains("'get-env'") && m.contains("'echo'"), "{m}");
    mismatch(
        s.post(
            &[pv, ("mcp-method", "tools/list"), ("mcp-name", "echo")],
            &call("echo"),
        ),
        "method",
    );
    mismatch(
        s.post(&[pv, ("mcp-method", "tools/call")], &call("echo")),
        "no Mcp-Name",
    );
    mismatch(
        s.post(
            &[("mcp-method", "tools/call"), ("mcp-name", "echo")],
            &call("echo"),
        ),
        "no version header",
    );
    mismatch(
        s.post(
            &[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
            &call("echo"),
        ),
        "version header and _meta disagree",
    );
    mismatch(
        s.post(
            &[
                pv,
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
                ("mcp-name", "get-env"),
            ],
            &call("echo"),
        ),
        "repeated Mcp-Name",
    );
    let list = modern(json!(7), "tools/list", json!({}));
    mismatch(
        s.post(
            &[pv, ("mcp-method", "tools/list"), ("mcp-name", "echo")],
            &list,
        ),
        "Mcp-Name without name",
    );
    mismatch(
        s.post(
            &[
                pv,
                ("mcp-method", "tools/call"),
                ("mcp-name", "=?base64?ZWNobw?="),
            ],
            &call("echo"),
        ),
        "malformed base64",
    );
    assert!(
        s.log_lines().is_empty(),
        "nothing executed: {:?}",
        s.log_lines()
    );

    // The base64 form of a name matching the body is accepted (decoded before comparison).
    let r = s.post(
        &[
            pv,
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZWNobw==?="),
            ("mcp-param-region", "us-west1"),
        ],
        &call("echo"),
    );
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let logged = s.log_lines();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["headers"]["mcp-param-region"], "us-west1");
    // A non-ASCII prompt name that the server does not have: the header check passes, the
    // method answers "unknown prompt".
    let enc = "=?base64?w7xuw69jw7hkw6k=?="; // "ünïcødé"
    let get = modern(json!(8), "prompts/get", json!({"name": "ünïcødé"}));
    let v = s
        .post(
            &[pv, ("mcp-method", "prompts/get"), ("mcp-name", enc)],
            &get,
        )
        .json();
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[test]
fn modern_versions_and_removed_methods() {
    let s = Server::start("versions");
    let mut body = modern(json!(1), "tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s.post(
        &[
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/list"),
        ],
        &body,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32022);
    assert_eq!(r.json()["error"]["data"]["supported"], json!([V26]));
    let pv = ("mcp-protocol-version", V26);
    let r = s.post(
        &[pv, ("mcp-method", "ping")],
        &modern(json!(2), "ping", json!({})),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32601);
    let r = s.request("GET", "/mcp", &[pv], "");
    assert_eq!(r.status, 405);
    assert_eq!(
        s.request("GET", "/mcp", &[], "").status,
        200,
        "2025-11-25 GET stream"
    );
}

/// Reads SSE events (`data:` lines, JSON) from a chunked stream until `n` arrived.
fn read_events(c: &mut Conn, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        let mut line = String::new();
        assert!(c.r.read_line(&mut line).unwrap() > 0, "stream ended");
        if let Some(d) = line.trim_end().strip_prefix("data: ") {
            out.push(serde_json::from_str(d).unwrap());
        }
    }
    out
}

#[test]
fn modern_listen_is_an_sse_stream() {
    let s = Server::start("listen");
    let body = modern(
        json!(9),
        "subscriptions/listen",
        json!({"notifications": {
        "toolsListChanged": true, "resourceSubscriptions": ["memo://insights", "memo://nope"]}}),
    );
    let mut c = s.connect();
    let text = body.to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\nmcp-protocol-version: {V26}\r\n\
                       mcp-method: subscriptions/listen\r\ncontent-length: {}\r\n\r\n{text}",
        text.len()
    );
    c.w.write_all(req.as_bytes()).unwrap();
    let head = c.read_head();
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(
        head.header("content-type"),
        Some("text/event-stream"),
        "{head:?}"
    );
    let ack = &read_events(&mut c, 1)[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["memo://insights"]})
    );
    let notify = |what: Value| {
        s.request("POST", "/notify", &[], &what.to_string()).json()["delivered"].clone()
    };
    assert_eq!(notify(json!({"tools": true, "uri": "memo://insights"})), 2);
    assert_eq!(
        notify(json!({"prompts": true, "uri": "file:///data/report.txt"})),
        0,
        "not asked for"
    );
    let ev = read_events(&mut c, 2);
    assert_eq!(ev[0]["method"], "notifications/tools/list_changed");
    assert_eq!(ev[1]["method"], "notifications/resources/updated");
    assert_eq!(ev[1]["params"]["uri"], "memo://insights");
    assert_eq!(
        ev[1]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    // Closing the stream ends the subscription.
    drop(c);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while notify(json!({"tools": true})) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "listener not removed after close"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Without headers, a listen is a header mismatch.
    let r = s.post(&[], &body);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
}
