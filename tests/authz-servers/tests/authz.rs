//! Start the real binary (as the e2e harness does: read the first stdout line for the addresses) and
//! talk to it: gRPC with tonic's client and the hand-written prost messages, HTTP over a raw socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use tonic::codegen::http::uri::PathAndQuery;
use toolgate_ext_authz_proto::envoy::service::auth::v3::attribute_context::{
    HttpRequest, Peer, Request,
};
use toolgate_ext_authz_proto::json::{object_to_struct, MCP_PROXY_NAMESPACE};
use toolgate_ext_authz_proto::{
    check_response::HttpResponse, AttributeContext, CheckRequest, CheckResponse, Metadata,
    CHECK_PATH,
};

struct Authz {
    child: Child,
    dir: PathBuf,
    grpc: String,
    http: String,
}

impl Drop for Authz {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Authz {
    fn start(rule: Json) -> Authz {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolgate-test-authz-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rule.json"), rule.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate-test-authz"))
            .args(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--rule"])
            .arg(dir.join("rule.json"))
            .arg("--log")
            .arg(dir.join("log.jsonl"))
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let bound: Json =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("first line {line:?}: {e}"));
        let grpc = bound["grpc"].as_str().unwrap().to_string();
        let http = bound["http"].as_str().unwrap().to_string();
        assert!(
            grpc.starts_with("127.0.0.1:") && !grpc.ends_with(":0"),
            "{line}"
        );
        Authz {
            child,
            dir,
            grpc,
            http,
        }
    }

    fn set_rule(&self, rule: Json) {
        std::fs::write(self.dir.join("rule.json"), rule.to_string()).unwrap();
    }

    fn log(&self) -> Vec<Json> {
        std::fs::read_to_string(self.dir.join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn check(&self, req: CheckRequest) -> Result<CheckResponse, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<CheckRequest, CheckResponse>::default();
        grpc.unary(
            tonic::Request::new(req),
            PathAndQuery::from_static(CHECK_PATH),
            codec,
        )
        .await
        .map(|r| r.into_inner())
    }

    /// Raw HTTP/1.1 exchange; everything the server wrote until it closed the connection.
    fn http(&self, principal: Option<&str>, body: &Json) -> Vec<u8> {
        let mut s = TcpStream::connect(&self.http).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let body = body.to_string();
        let mut req = format!("POST /authz/mcp HTTP/1.1\r\nhost: mcp.example.com\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
        if let Some(p) = principal {
            req.push_str(&format!("x-toolgate-principal: {p}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    }
}

fn call(tool: &str) -> Json {
    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": {"x": 1}}})
}

fn check_request(principal: &str, mcp: &Json) -> CheckRequest {
    CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(Peer {
                principal: principal.into(),
                ..Default::default()
            }),
            request: Some(Request {
                time: None,
                http: Some(HttpRequest {
                    method: "POST".into(),
                    path: "/mcp".into(),
                    host: "mcp.example.com".into(),
                    scheme: "https".into(),
                    protocol: "HTTP/1.1".into(),
                    headers: [("content-type".to_string(), "application/json".to_string())].into(),
                    ..Default::default()
                }),
            }),
            metadata_context: Some(Metadata {
                filter_metadata: [(
                    MCP_PROXY_NAMESPACE.to_string(),
                    object_to_struct(mcp).unwrap(),
                )]
                .into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

fn rule() -> Json {
    json!({
        "allow_tools": ["echo"], "deny_tools": ["rm"], "default": "deny",
        "deny_status": 401, "deny_headers": {"www-authenticate": "Bearer realm=\"mcp\""}, "deny_body": "secret denial text",
        "ok_headers": {"x-authz": "checked"}
    })
}

#[tokio::test]
async fn grpc_check_by_tool_principal_and_log() {
    let a = Authz::start(rule());
    let ok = a
        .check(check_request(
            "spiffe://cluster.local/ns/default/sa/a",
            &call("echo"),
        ))
        .await
        .unwrap();
    assert_eq!(ok.status.unwrap().code, 0);
    let Some(HttpResponse::OkResponse(okr)) = ok.http_response else {
        panic!("{:?}", ok.http_response)
    };
    let h = okr.headers[0].header.as_ref().unwrap();
    assert_eq!((h.key.as_str(), h.value.as_str()), ("x-authz", "checked"));

    for tool in ["rm", "other"] {
        let denied = a
            .check(check_request(
                "spiffe://cluster.local/ns/default/sa/a",
                &call(tool),
            ))
            .await
            .unwrap();
        assert_eq!(denied.status.unwrap().code, 7);
        let Some(HttpResponse::DeniedResponse(d)) = denied.http_response else {
            panic!()
        };
        assert_eq!(d.status.unwrap().code, 401);
        assert_eq!(d.body, "secret denial text");
        let h = d.headers[0].header.as_ref().unwrap();
        assert_eq!(
            (h.key.as_str(), h.value.as_str()),
            ("www-authenticate", "Bearer realm=\"mcp\"")
        );
    }

    // The rule file is re-read: now only caller a passes.
    let mut r = rule();
    r["principals"] = json!(["spiffe://cluster.local/ns/default/sa/a"]);
    a.set_rule(r);
    let b = a
        .check(check_request(
            "spiffe://cluster.local/ns/default/sa/b",
            &call("echo"),
        ))
        .await
        .unwrap();
    assert_eq!(b.status.unwrap().code, 7);
    let aa = a
        .check(check_request(
            "spiffe://cluster.local/ns/default/sa/a",
            &call("echo"),
        ))
        .await
        .unwrap();
    assert_eq!(aa.status.unwrap().code, 0);

    let log = a.log();
    assert_eq!(log.len(), 5, "{log:#?}");
    let e = &log[0];
    assert_eq!(e["kind"], "grpc");
    assert_eq!(e["principal"], "spiffe://cluster.local/ns/default/sa/a");
    assert_eq!(
        (e["method"].as_str(), e["path"].as_str(), e["host"].as_str()),
        (Some("POST"), Some("/mcp"), Some("mcp.example.com"))
    );
    assert_eq!(e["headers"]["content-type"], "application/json");
    assert_eq!(e["mcp_proxy"], call("echo"));
    assert_eq!(e["mcp_proxy"]["params"]["name"], "echo");
    assert_eq!(
        (e["tool"].as_str(), e["decision"].as_str()),
        (Some("echo"), Some("allow"))
    );
    assert_eq!(
        (log[1]["tool"].as_str(), log[1]["decision"].as_str()),
        (Some("rm"), Some("deny"))
    );
    assert_eq!(
        log[3]["reason"],
        "principal spiffe://cluster.local/ns/default/sa/b not listed"
    );
}

#[tokio::test]
async fn grpc_falls_back_to_the_body_without_mcp_proxy_metadata() {
    let a = Authz::start(rule());
    let mut req = check_request("", &call("x"));
    let attrs = req.attributes.as_mut().unwrap();
    attrs.metadata_context = None;
    attrs.request.as_mut().unwrap().http.as_mut().unwrap().body = call("echo").to_string();
    assert_eq!(a.check(req).await.unwrap().status.unwrap().code, 0);
    assert_eq!(a.log()[0]["mcp_proxy"], Json::Null);
    assert_eq!(a.log()[0]["tool"], "echo");
}

#[tokio::test]
async fn grpc_failure_modes() {
    let a = Authz::start(json!({"delay_ms": 400}));
    let t = Instant::now();
    assert_eq!(
        a.check(check_request("p", &call("echo")))
            .await
            .unwrap()
            .status
            .unwrap()
            .code,
        0
    );
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );

    a.set_rule(json!({"garbage": true}));
    let err = a
        .check(check_request("p", &call("echo")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal, "{err:?}"); // tonic: the message does not decode

    a.set_rule(json!({"close_mid_reply": true}));
    let t = Instant::now();
    let err = a
        .check(check_request("p", &call("echo")))
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(
            err.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal
        ),
        "{err:?}"
    );

    a.set_rule(json!({"default": "sometimes"}));
    let err = a
        .check(check_request("p", &call("echo")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal);
    assert!(err.message().contains("rule file"), "{err:?}");

    let log = a.log();
    let modes: Vec<_> = log.iter().map(|e| e["mode"].clone()).collect();
    assert_eq!(
        modes,
        [
            json!("delay_ms=400"),
            json!("garbage"),
            json!("close_mid_reply"),
            Json::Null
        ]
    );
    assert!(log[3]["error"]
        .as_str()
        .unwrap()
        .contains("unknown variant"));
}

#[tokio::test]
async fn grpc_unknown_method_is_unimplemented() {
    let a = Authz::start(json!({}));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", a.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<CheckRequest, CheckResponse>::default();
    let err = grpc
        .unary(
            tonic::Request::new(CheckRequest::default()),
            PathAndQuery::from_static("/envoy.service.auth.v2.Authorization/Check"),
            codec,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
}

fn split(resp: &[u8]) -> (String, Vec<u8>) {
    let i = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{:?}", String::from_utf8_lossy(resp)));
    (
        String::from_utf8_lossy(&resp[..i]).to_string(),
        resp[i + 4..].to_vec(),
    )
}

#[test]
fn http_allow_deny_principal_and_log() {
    let a = Authz::start(rule());
    let (head, body) = split(&a.http(Some("spiffe://a"), &call("echo")));
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\nx-authz: checked"), "{head}");
    assert!(body.is_empty());

    let (head, body) = split(&a.http(Some("spiffe://a"), &call("rm")));
    assert!(head.starts_with("HTTP/1.1 401 "), "{head}");
    assert!(
        head.contains("\r\nwww-authenticate: Bearer realm=\"mcp\""),
        "{head}"
    );
    assert_eq!(body, b"secret denial text");

    let (head, _) = split(&a.http(
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ));
    assert!(head.starts_with("HTTP/1.1 401 "), "{head}");

    let mut r = rule();
    r["principals"] = json!(["spiffe://a"]);
    r["deny_status"] = json!(403);
    a.set_rule(r);
    assert!(split(&a.http(Some("spiffe://b"), &call("echo")))
        .0
        .starts_with("HTTP/1.1 403 "));
    assert!(split(&a.http(Some("spiffe://a"), &call("echo")))
        .0
        .starts_with("HTTP/1.1 200 "));

    let log = a.log();
    assert_eq!(log.len(), 5);
    let e = &log[0];
    assert_eq!(
        (e["kind"].as_str(), e["method"].as_str(), e["path"].as_str()),
        (Some("http"), Some("POST"), Some("/authz/mcp"))
    );
    assert_eq!(e["headers"]["x-toolgate-principal"], "spiffe://a");
    assert_eq!(e["headers"]["host"], "mcp.example.com");
    assert_eq!(
        serde_json::from_str::<Json>(e["body"].as_str().unwrap()).unwrap(),
        call("echo")
    );
    assert_eq!(
        (
            e["principal"].as_str(),
            e["tool"].as_str(),
            e["decision"].as_str()
        ),
        (Some("spiffe://a"), Some("echo"), Some("allow"))
    );
    assert_eq!(log[3]["decision"], "deny");
}

#[test]
fn http_keep_alive_chunked_and_xfcc() {
    let a = Authz::start(json!({"principals": ["spiffe://x"], "default": "allow"}));
    let mut s = TcpStream::connect(&a.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = call("echo").to_string();
    // Two requests on one connection: chunked with the XFCC identity, then content-length without one.
    let req = format!(
        "POST /a HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\nx-forwarded-client-cert: By=spiffe://gw;URI=spiffe://x\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\nGET /b HTTP/1.1\r\nhost: h\r\nconnection: close\r\n\r\n",
        body.len(),
        body
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("HTTP/1.1 403 Forbidden\r\n"), "{out}");
    let log = a.log();
    assert_eq!(
        (log[0]["principal"].as_str(), log[0]["tool"].as_str()),
        (Some("spiffe://x"), Some("echo"))
    );
    assert_eq!(
        (
            log[1]["method"].as_str(),
            log[1]["path"].as_str(),
            log[1]["principal"].as_str()
        ),
        (Some("GET"), Some("/b"), None)
    );
}

#[test]
fn http_failure_modes() {
    let a = Authz::start(json!({"delay_ms": 400, "deny_body": "x"}));
    let t = Instant::now();
    assert!(split(&a.http(None, &call("echo")))
        .0
        .starts_with("HTTP/1.1 200 "));
    assert!(t.elapsed() >= Duration::from_millis(400));

    a.set_rule(json!({"garbage": true}));
    let resp = a.http(None, &call("echo"));
    let mut headers = [httparse::EMPTY_HEADER; 16];
    assert!(
        httparse::Response::new(&mut headers).parse(&resp).is_err(),
        "{:?}",
        String::from_utf8_lossy(&resp)
    );

    for rule in [
        json!({"close_mid_reply": true}),
        json!({"close_mid_reply": true, "default": "deny", "deny_body": "0123456789"}),
    ] {
        a.set_rule(rule);
        let (head, body) = split(&a.http(None, &call("echo")));
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(body.len() < len, "{head} / {body:?}");
    }
    let modes: Vec<_> = a.log().iter().map(|e| e["mode"].clone()).collect();
    assert_eq!(
        modes,
        [
            json!("delay_ms=400"),
            json!("garbage"),
            json!("close_mid_reply"),
            json!("close_mid_reply")
        ]
    );
}
