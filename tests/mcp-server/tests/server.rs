//! End-to-end tests: start the real binary on port 0 and talk raw HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

struct Server {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Server {
    fn start(name: &str) -> Server {
        static N: AtomicU32 = AtomicU32::new(0);
        let log = std::env::temp_dir().join(format!(
            "toolgate-sample-mcp-{}-{}-{}.log",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            name
        ));
        let _ = std::fs::remove_file(&log);
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate-sample-mcp-server"))
            .args(["--listen", "127.0.0.1:0", "--log"])
            .arg(&log)
            .args(["--name", name])
            .env("TOOLGATE_TEST_SECRET", "s3cr3t")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server { child, addr, log }
    }

    fn connect(&self) -> Conn {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    /// One request on a fresh connection.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        self.connect().send(method, path, headers, body)
    }

    fn rpc(&self, body: &Value) -> Resp {
        self.request(
            "POST",
            "/mcp",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    }

    fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

impl Conn {
    fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        let mut req = format!("{method} {path} HTTP/1.1\r\nhost: test\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        {
            req.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.send_raw(req.as_bytes())
    }

    fn send_raw(&mut self, raw: &[u8]) -> Resp {
        self.w.write_all(raw).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> Resp {
        let mut resp = self.read_head();
        resp.body = if resp.header("transfer-encoding") == Some("chunked") {
            self.read_chunks().concat()
        } else {
            let len = resp
                .header("content-length")
                .map(|v| v.parse::<usize>().unwrap())
                .unwrap_or(0);
            let mut body = vec![0; len];
            self.r.read_exact(&mut body).unwrap();
            body
        };
        resp
    }

    /// The status line and headers of a response (names lower-case), its body left to read.
    fn read_head(&mut self) -> Resp {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let status: u16 = line
            .split(' ')
            .nth(1)
            .unwrap_or_else(|| panic!("bad status line {line:?}"))
            .parse()
            .unwrap();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
        }
        Resp {
            status,
            headers,
            body: Vec::new(),
        }
    }

    /// The chunks of a chunked body, as sent.
    fn read_chunks(&mut self) -> Vec<Vec<u8>> {
        let mut chunks = Vec::new();
        loop {
            let mut size = String::new();
            self.r.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim_end(), 16).unwrap();
            let mut data = vec![0; size + 2];
            self.r.read_exact(&mut data).unwrap();
            assert_eq!(&data[size..], b"\r\n");
            if size == 0 {
                return chunks;
            }
            data.truncate(size);
            chunks.push(data);
        }
    }

    /// True if the server closed the connection.
    fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0) | Err(_))
    }
}

impl Server {
    fn post(&self, headers: &[(&str, &str)], body: &Value) -> Resp {
        let mut h = vec![("content-type", "application/json")];
        h.extend_from_slice(headers);
        self.request("POST", "/mcp", &h, &body.to_string())
    }
}

/// Every tool tools/list gives, in its order.
const ALL_TOOLS: [&str; 12] = [
    "get-sum",
    "echo",
    "get-env",
    "get-product",
    "get-difference",
    "get-quotient",
    "uppercase",
    "lowercase",
    "reverse",
    "word-count",
    "char-count",
    "get-time",
];

fn call(id: Value, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

fn text_of(result: &Value) -> &str {
    result["result"]["content"][0]["text"].as_str().unwrap()
}

#[test]
fn initialize_returns_session_id_and_server_info() {
    let s = Server::start("init-srv");
    let r = s.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let sid = r.header("mcp-session-id").expect("session id header");
    assert!(
        sid.len() >= 16 && sid.bytes().all(|b| b.is_ascii_hexdigit()),
        "{sid}"
    );
    let v = r.json();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], 1);
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(v["result"]["serverInfo"]["name"], "init-srv");
    for cap in ["tools", "prompts", "resources"] {
        assert!(v["result"]["capabilities"][cap].is_object(), "{cap}");
    }
    // A second initialize gets a different session id.
    let r2 = s.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}));
    assert_ne!(r2.header("mcp-session-id"), Some(sid));
    // Other methods do not mint sessions.
    let p = s.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(p.header("mcp-session-id"), None);
    assert_eq!(p.json()["result"], json!({}));
}

#[test]
fn tools_list_and_calls() {
    let s = Server::start("tools");
    let v = s
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .json();
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["inputSchema"]["type"], "object");
            t["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(names, ALL_TOOLS);

    let r = s.rpc(&call(json!(2), "get-sum", json!({"a": 2, "b": 3})));
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], 2);
    assert_eq!(v["result"]["content"][0]["type"], "text");
    assert_eq!(text_of(&v), "5");
    assert_eq!(
        text_of(
            &s.rpc(&call(json!(3), "get-sum", json!({"a": 1.5, "b": 2})))
                .json()
        ),
        "3.5"
    );

    let v = s
        .rpc(&call(json!(4), "echo", json!({"message": "hello, wörld"})))
        .json();
    assert_eq!(text_of(&v), "hello, wörld");

    let v = s
        .rpc(&call(
            json!(5),
            "get-env",
            json!({"name": "TOOLGATE_TEST_SECRET"}),
        ))
        .json();
    assert_eq!(text_of(&v), "s3cr3t");
    let v = s
        .rpc(&call(
            json!(6),
            "get-env",
            json!({"name": "TOOLGATE_DEFINITELY_UNSET"}),
        ))
        .json();
    assert_eq!(text_of(&v), "");

    for (tool, args, want) in [
        ("get-product", json!({"a": 6, "b": 7}), "42"),
        ("get-difference", json!({"a": 2, "b": 5}), "-3"),
        ("get-quotient", json!({"a": 7, "b": 2}), "3.5"),
        ("uppercase", json!({"text": "ab"}), "AB"),
        ("lowercase", json!({"text": "AB"}), "ab"),
        ("reverse", json!({"text": "wörd"}), "dröw"),
        ("word-count", json!({"text": " a b  c "}), "3"),
        ("char-count", json!({"text": "wörd"}), "4"),
    ] {
        let v = s.rpc(&call(json!(9), tool, args)).json();
        assert_eq!(text_of(&v), want, "{tool}");
    }
    let now: u64 = text_of(&s.rpc(&call(json!(9), "get-time", json!({}))).json())
        .parse()
        .unwrap();
    assert!(now > 1_600_000_000, "{now}");
    let v = s
        .rpc(&call(json!(9), "get-quotient", json!({"a": 1, "b": 0})))
        .json();
    assert_eq!(v["error"]["code"], -32602);

    let v = s.rpc(&call(json!(7), "rm-rf", json!({}))).json();
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(v["id"], 7);
    let v = s
        .rpc(&call(json!(8), "get-sum", json!({"a": "x", "b": 1})))
        .json();
    assert_eq!(v["error"]["code"], -32602);
}

#[test]
fn id_type_is_preserved() {
    let s = Server::start("ids");
    let v = s
        .rpc(&call(json!("abc-1"), "echo", json!({"message": "m"})))
        .json();
    assert_eq!(v["id"], json!("abc-1"));
    let v = s
        .rpc(&call(json!("42"), "echo", json!({"message": "m"})))
        .json();
    assert_eq!(v["id"], json!("42"), "string id must stay a string");
    let v = s
        .rpc(&call(json!(42), "echo", json!({"message": "m"})))
        .json();
    assert_eq!(v["id"], json!(42), "numeric id must stay a number");
    let v = s
        .rpc(&json!({"jsonrpc": "2.0", "id": "u", "method": "no/such"}))
        .json();
    assert_eq!(v["id"], json!("u"));
    assert_eq!(v["error"]["code"], -32601);
}

#[test]
fn batch_and_notifications() {
    let s = Server::start("batch");
    let r = s.rpc(&json!([
        call(json!(1), "get-sum", json!({"a": 2, "b": 3})),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(json!("two"), "echo", json!({"message": "hi"})),
        {"jsonrpc": "2.0", "id": 3, "method": "bogus"}
    ]));
    assert_eq!(r.status, 200);
    let v = r.json();
    let arr = v.as_array().expect("batch response is an array");
    assert_eq!(arr.len(), 3, "notification must be omitted: {v}");
    assert_eq!(arr[0]["id"], 1);
    assert_eq!(text_of(&arr[0]), "5");
    assert_eq!(arr[1]["id"], "two");
    assert_eq!(text_of(&arr[1]), "hi");
    assert_eq!(arr[2]["error"]["code"], -32601);

    // A single notification -> 202 with an empty body.
    let r = s.rpc(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    // A batch of notifications only -> 202.
    let r = s.rpc(
        &json!([{"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 1}}]),
    );
    assert_eq!(r.status, 202);
    // Client-sent JSON-RPC response -> 202.
    let r = s.rpc(&json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
}

#[test]
fn prompts_resources_and_misc_methods() {
    let s = Server::start("misc");
    let rpc = |id: i64, method: &str, params: Value| {
        s.rpc(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .json()
    };
    let v = rpc(1, "prompts/list", json!({}));
    let names: Vec<&str> = v["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greeting", "summarize", "code-review"]);
    for (name, args, has) in [
        ("summarize", json!({"text": "a long text"}), "a long text"),
        (
            "code-review",
            json!({"code": "fn x() {}", "language": "Rust"}),
            "Rust code",
        ),
    ] {
        let v = rpc(2, "prompts/get", json!({"name": name, "arguments": args}));
        let text = v["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap();
        assert!(text.contains(has), "{name}: {text}");
    }
    let v = rpc(
        2,
        "prompts/get",
        json!({"name": "greeting", "arguments": {"name": "Ada"}}),
    );
    let text = v["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("Ada"), "{text}");
    assert!(rpc(3, "prompts/get", json!({"name": "nope"}))["error"]["code"].is_i64());

    let v = rpc(4, "resources/list", json!({}));
    let uris: Vec<&str> = v["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "memo://insights",
            "file:///data/report.txt",
            "memo://roadmap"
        ]
    );
    for uri in uris {
        let v = rpc(5, "resources/read", json!({"uri": uri}));
        assert_eq!(v["result"]["contents"][0]["uri"], uri);
        assert!(!v["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .is_empty());
    }
    assert_eq!(
        rpc(6, "resources/read", json!({"uri": "file:///etc/passwd"}))["error"]["code"],
        -32002
    );
    for m in [
        "resources/subscribe",
        "resources/unsubscribe",
        "logging/setLevel",
        "ping",
    ] {
        assert_eq!(
            rpc(7, m, json!({"uri": "memo://insights", "level": "info"}))["result"],
            json!({}),
            "{m}"
        );
    }
    let v = rpc(8, "completion/complete", json!({}));
    assert_eq!(v["result"]["completion"]["values"], json!([]));
}

#[test]
fn get_opens_sse_stream() {
    let s = Server::start("sse");
    let r = s.request("GET", "/mcp", &[("accept", "text/event-stream")], "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(String::from_utf8_lossy(&r.body).ends_with("\n\n"));
    let log = s.log_lines();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["http_method"], "GET");
    assert_eq!(log[0]["jsonrpc_method"], Value::Null);
}

#[test]
fn delete_requires_session_id() {
    let s = Server::start("delete");
    let r = s.request("DELETE", "/mcp", &[("mcp-session-id", "abc123")], "");
    assert_eq!(r.status, 200);
    let r = s.request("DELETE", "/mcp", &[], "");
    assert_eq!(r.status, 400);
    let r = s.request("PUT", "/mcp", &[], "");
    assert_eq!(r.status, 405);
    let log = s.log_lines();
    assert_eq!(
        log.len(),
        1,
        "only the successful DELETE is executed: {log:?}"
    );
    assert_eq!(log[0]["http_method"], "DELETE");
    assert_eq!(log[0]["headers"]["mcp-session-id"], "abc123");
}

#[test]
fn execution_log_has_one_line_per_executed_call() {
    let s = Server::start("logsrv");
    s.request(
        "POST",
        "/rewritten/path?tenant=a&x=1",
        &[
            ("content-type", "application/json"),
            ("X-Forwarded-User", "alice"),
            ("mcp-session-id", "s1"),
        ],
        &call(json!("c1"), "get-sum", json!({"a": 2, "b": 3})).to_string(),
    );
    s.rpc(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "resources/read",
                  "params": {"uri": "memo://insights"}}),
    );
    s.rpc(&json!([
        {"jsonrpc": "2.0", "id": 8, "method": "prompts/get", "params": {"name": "greeting"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ]));
    // Not executed: parse error.
    s.request("POST", "/mcp", &[], "{not json");

    let log = s.log_lines();
    assert_eq!(log.len(), 4, "{log:#?}");
    let keys: Vec<&String> = log[0].as_object().unwrap().keys().collect();
    for k in [
        "ts",
        "server",
        "http_method",
        "path",
        "jsonrpc_method",
        "id",
        "tool",
        "name",
        "uri",
        "headers",
    ] {
        assert!(log[0].get(k).is_some(), "missing {k}: {keys:?}");
    }
    let l = &log[0];
    assert!(l["ts"].as_u64().unwrap() > 1_600_000_000_000);
    assert_eq!(l["server"], "logsrv");
    assert_eq!(l["http_method"], "POST");
    assert_eq!(l["path"], "/rewritten/path?tenant=a&x=1");
    assert_eq!(l["jsonrpc_method"], "tools/call");
    assert_eq!(l["id"], json!("c1"));
    assert_eq!(l["tool"], "get-sum");
    assert_eq!(l["name"], "get-sum");
    assert_eq!(l["uri"], Value::Null);
    assert_eq!(l["headers"]["x-forwarded-user"], "alice");
    assert_eq!(l["headers"]["mcp-session-id"], "s1");
    assert_eq!(l["headers"]["host"], "test");

    assert_eq!(log[1]["jsonrpc_method"], "resources/read");
    assert_eq!(log[1]["id"], json!(7));
    assert_eq!(log[1]["uri"], "memo://insights");
    assert_eq!(log[1]["tool"], Value::Null);

    assert_eq!(log[2]["jsonrpc_method"], "prompts/get");
    assert_eq!(log[2]["name"], "greeting");
    assert_eq!(log[2]["tool"], Value::Null);
    assert_eq!(log[3]["jsonrpc_method"], "notifications/initialized");
    assert_eq!(log[3]["id"], Value::Null);
}

#[test]
fn malformed_json_is_400_and_server_keeps_serving() {
    let s = Server::start("malformed");
    let mut c = s.connect();
    let r = c.send(
        "POST",
        "/mcp",
        &[("content-type", "application/json")],
        "{\"jsonrpc\": ",
    );
    assert_eq!(r.status, 400);
    let v = r.json();
    assert_eq!(v["error"]["code"], -32700);
    assert_eq!(v["id"], Value::Null);
    // Same keep-alive connection still works.
    let r = c.send(
        "POST",
        "/mcp",
        &[],
        &call(json!(1), "get-sum", json!({"a": 2, "b": 3})).to_string(),
    );
    assert_eq!(text_of(&r.json()), "5");
    // Structurally invalid JSON-RPC -> 400 invalid request.
    let r = s.request("POST", "/mcp", &[], "42");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32600);
    let r = s.request("POST", "/mcp", &[], "[]");
    assert_eq!(r.status, 400);
    // Broken HTTP -> 400 + close; server survives.
    let mut c = s.connect();
    let r = c.send_raw(b"THIS IS NOT HTTP AT ALL\r\n\r\n");
    assert_eq!(r.status, 400);
    assert!(c.is_closed());
    let mut c = s.connect();
    let r = c.send_raw(b"POST /mcp HTTP/1.1\r\ncontent-length: nope\r\n\r\n");
    assert_eq!(r.status, 400);
    let mut c = s.connect();
    let r = c.send_raw(b"POST /mcp HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n");
    assert_eq!(r.status, 400);
    // Truncated request then hang-up.
    let mut c = s.connect();
    c.w.write_all(b"POST /mcp HTTP/1.1\r\ncontent-length: 100\r\n\r\n{")
        .unwrap();
    drop(c);
    let r = s.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(r.status, 200);
    assert_eq!(
        s.log_lines().len(),
        2,
        "only the two valid calls were executed"
    );
}

#[test]
fn chunked_body_expect_continue_and_keep_alive() {
    let s = Server::start("framing");
    let body = call(json!(1), "echo", json!({"message": "chunky"})).to_string();
    let (a, b) = body.split_at(10);
    let mut c = s.connect();
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n{:x};ext=1\r\n{a}\r\n{:X}\r\n{b}\r\n0\r\ntrailer: x\r\n\r\n",
        a.len(),
        b.len()
    );
    let r = c.send_raw(raw.as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(text_of(&r.json()), "chunky");
    assert_eq!(r.header("connection"), Some("keep-alive"));

    // Expect: 100-continue on the same connection.
    let body = call(json!(2), "get-sum", json!({"a": 40, "b": 2})).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: t\r\nexpect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    c.w.write_all(head.as_bytes()).unwrap();
    let interim = c.read_response();
    assert_eq!(interim.status, 100);
    c.w.write_all(body.as_bytes()).unwrap();
    let r = c.read_response();
    assert_eq!(text_of(&r.json()), "42");

    // Pipelined requests on one write.
    let p1 = call(json!(3), "echo", json!({"message": "p1"})).to_string();
    let p2 = call(json!(4), "echo", json!({"message": "p2"})).to_string();
    let raw = format!(
        "POST /a HTTP/1.1\r\ncontent-length: {}\r\n\r\n{p1}POST /b HTTP/1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{p2}",
        p1.len(),
        p2.len()
    );
    c.w.write_all(raw.as_bytes()).unwrap();
    assert_eq!(text_of(&c.read_response().json()), "p1");
    let r = c.read_response();
    assert_eq!(text_of(&r.json()), "p2");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.is_closed());
}

#[test]
fn concurrent_clients() {
    let s = Server::start("concurrent");
    // An idle open connection must not block others.
    let _idle = s.connect();
    std::thread::scope(|scope| {
        for t in 0..8i64 {
            let s = &s;
            scope.spawn(move || {
                let mut c = s.connect();
                for i in 0..10i64 {
                    let r = c.send(
                        "POST",
                        "/mcp",
                        &[],
                        &call(json!(i), "get-sum", json!({"a": t, "b": i})).to_string(),
                    );
                    assert_eq!(text_of(&r.json()), (t + i).to_string());
                }
            });
        }
    });
    assert_eq!(s.log_lines().len(), 80);
}

#[test]
fn cli_rejects_bad_arguments() {
    let bin = env!("CARGO_BIN_EXE_toolgate-sample-mcp-server");
    let out = Command::new(bin).arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(bin).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--listen is required");
    let out = Command::new(bin).arg("--help").output().unwrap();
    assert!(out.status.success());
}

#[path = "server/modern.rs"]
mod modern;

#[path = "server/lists.rs"]
mod lists;
