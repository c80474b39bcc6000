//! Toolgate sample MCP server (Streamable HTTP transport, plain HTTP).
//!
//! Used by the demo and the end-to-end tests. Every request it executes is
//! appended as one JSON line to the execution log (`--log FILE`) and echoed
//! to stderr, so tests can prove that a denied call never reached it.
//!
//! HTTP/1.1 is hyper's (`http.rs`), on a Tokio runtime; the MCP handling is synchronous (no
//! handler blocks), and streamed answers (`subscriptions/listen`, chunked SSE) are fed by tasks.

#![forbid(unsafe_code)]
mod http;
mod mcp;
mod modern;

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use http::{Request, Response};
use mcp::Message;

const USAGE: &str = "\
usage: toolgate-sample-mcp-server --listen ADDR [--log FILE] [--name NAME]

  --listen ADDR   address to listen on, e.g. 127.0.0.1:8080 (port 0 picks a
                  free port); the first stdout line is `listening on ADDR`
  --log FILE      append one JSON line per executed request to FILE
  --name NAME     server name (serverInfo.name and the log's `server` field)

Speaks MCP 2025-11-25 (initialize, sessions, GET stream) and 2026-07-28
(server/discover, per-request _meta, Mcp-Method/Mcp-Name header checks,
subscriptions/listen as an SSE stream) on the same endpoint. Test hook:
POST /notify {\"tools\": true, \"uri\": \"memo://insights\"} sends
notifications/tools/list_changed and notifications/resources/updated to the
open subscriptions/listen streams that asked for them (answer: {\"delivered\": n}).

Response shaping, by request header (for the list-filtering tests):
  accept-encoding: gzip  JSON responses are gzip-encoded (content-encoding: gzip)
  x-test-page-size: N    tools/list, prompts/list and resources/list answer pages of
                         N entries with a nextCursor (a cursor keeps its page size, so
                         a client following cursors sees every entry)
  x-test-sse: 1          responses to requests come as text/event-stream, chunked: a
                         notifications/message event, then each response in an event
                         of its own (split over two chunks)
  x-test-gzip: 1         the response is gzip-encoded whatever accept-encoding says
  x-test-broken-list: 1  a response to a list request is not valid JSON (its last
                         byte is cut off)
The execution log records every request header, so a test can see what reached the
server (e.g. whether accept-encoding did).
";

/// How often an open SSE stream (listen or GET) gets a keep-alive comment.
const KEEPALIVE: Duration = Duration::from_secs(5);

/// Most header fields in a request (hyper's default is 100).
const MAX_HEADERS: usize = 200;

struct Config {
    listen: String,
    log: Option<String>,
    name: String,
}

fn parse_args() -> Result<Config, String> {
    let mut listen = None;
    let mut log = None;
    let mut name = "toolgate-sample-mcp-server".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |flag: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) => Ok(v),
                None => Err(format!("{flag} requires a value")),
            }
        };
        match flag.as_str() {
            "--listen" => listen = Some(value("--listen")?),
            "--log" => log = Some(value("--log")?),
            "--name" => name = value("--name")?,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(Config {
        listen: listen.ok_or("--listen is required")?,
        log,
        name,
    })
}

struct Server {
    name: String,
    log: Option<Mutex<File>>,
    /// Open `subscriptions/listen` streams.
    listeners: Mutex<Vec<Listener>>,
}

struct Listener {
    key: u64,
    sub_id: Value,
    filter: modern::Filter,
    tx: UnboundedSender<Value>,
}

/// What to answer a request with.
enum Reply {
    Once(Response),
    /// A `subscriptions/listen` SSE stream: the head, then events until the client goes away.
    Listen {
        key: u64,
        first: Value,
        events: UnboundedReceiver<Value>,
    },
}

impl From<Response> for Reply {
    fn from(r: Response) -> Self {
        Reply::Once(r)
    }
}

impl Server {
    /// Appends one execution-log line to the log file (flushed) and stderr.
    fn log_exec(
        &self,
        req: &Request,
        jsonrpc_method: Option<&str>,
        id: Option<&Value>,
        params: Option<&Value>,
    ) {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let str_param = |key: &str| -> Value {
            match params.and_then(|p| p.get(key)) {
                Some(v @ Value::String(_)) => v.clone(),
                _ => Value::Null,
            }
        };
        let name = str_param("name");
        let tool = if jsonrpc_method == Some("tools/call") {
            name.clone()
        } else {
            Value::Null
        };
        let mut headers: BTreeMap<&str, String> = BTreeMap::new();
        for (n, v) in &req.headers {
            headers
                .entry(n.as_str())
                .and_modify(|e| {
                    e.push_str(", ");
                    e.push_str(v);
                })
                .or_insert_with(|| v.clone());
        }
        // Built by hand to keep a stable, documented field order.
        let line = format!(
            "{{\"ts\":{ts},\"server\":{},\"http_method\":{},\"path\":{},\"jsonrpc_method\":{},\"id\":{},\"tool\":{},\"name\":{},\"uri\":{},\"headers\":{}}}",
            j(self.name.as_str()),
            j(req.method.as_str()),
            j(req.target.as_str()),
            j(&jsonrpc_method),
            j(&id.cloned().unwrap_or(Value::Null)),
            j(&tool),
            j(&name),
            j(&str_param("uri")),
            j(&headers),
        );
        if let Some(log) = &self.log {
            let mut f = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
        let _ = writeln!(io::stderr(), "{line}");
    }

    fn handle(&self, req: &Request) -> Reply {
        let version = req.header("mcp-protocol-version");
        if req.target == "/notify" || req.target.starts_with("/notify?") {
            return self.notify(req).into();
        }
        match req.method.as_str() {
            "GET" | "DELETE" if modern::header_is_modern(version) => Response::text(
                405,
                "no GET stream or session in MCP 2026-07-28 (use subscriptions/listen)",
            )
            .header("allow", "POST")
            .into(),
            "POST" => self.handle_post(req),
            "GET" => {
                self.log_exec(req, None, None, None);
                Response::new(200)
                    .header("content-type", "text/event-stream")
                    .header("cache-control", "no-cache")
                    .body(": stream open\n\n")
                    .into()
            }
            "DELETE" => match req.header("mcp-session-id") {
                Some(sid) if !sid.is_empty() => {
                    self.log_exec(req, None, None, None);
                    Response::text(200, "session closed").into()
                }
                _ => Response::text(400, "missing mcp-session-id header").into(),
            },
            _ => Response::text(405, "method not allowed")
                .header("allow", "GET, POST, DELETE")
                .into(),
        }
    }

    /// The test hook: deliver list-change / resource-update notifications to open listen streams.
    fn notify(&self, req: &Request) -> Response {
        if req.method != "POST" {
            return Response::text(405, "POST only").header("allow", "POST");
        }
        let what: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let flag = |k: &str| what.get(k).and_then(Value::as_bool).unwrap_or(false);
        let uri = what.get("uri").and_then(Value::as_str);
        let mut delivered = 0;
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for l in listeners.iter() {
            let mut send = |method: &str, params: Map<String, Value>| {
                if l.tx
                    .send(modern::stream_notification(&l.sub_id, method, params))
                    .is_ok()
                {
                    delivered += 1;
                }
            };
            for (on, mine, method) in [
                (
                    flag("tools"),
                    l.filter.tools,
                    "notifications/tools/list_changed",
                ),
                (
                    flag("prompts"),
                    l.filter.prompts,
                    "notifications/prompts/list_changed",
                ),
                (
                    flag("resources"),
                    l.filter.resources,
                    "notifications/resources/list_changed",
                ),
            ] {
                if on && mine {
                    send(method, Map::new());
                }
            }
            if let Some(u) = uri {
                if l.filter.uris.iter().any(|x| x == u) {
                    let mut p = Map::new();
                    p.insert("uri".into(), json!(u));
                    send("notifications/resources/updated", p);
                }
            }
        }
        Response::json(200, &json!({"delivered": delivered}))
    }

    fn handle_post(&self, req: &Request) -> Reply {
        match self.handle_post_inner(req) {
            Reply::Once(resp) => shape(req, resp).into(),
            listen => listen,
        }
    }

    fn handle_post_inner(&self, req: &Request) -> Reply {
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                let err = mcp::RpcError::new(mcp::PARSE_ERROR, format!("Parse error: {e}"));
                return Response::json(400, &mcp::error_response(Value::Null, &err)).into();
            }
        };
        if modern::is_modern(req.header("mcp-protocol-version"), &body) {
            return self.handle_modern(req, &body);
        }
        let mut session = None;
        match &body {
            Value::Array(items) => {
                if items.is_empty() {
                    let err =
                        mcp::RpcError::new(mcp::INVALID_REQUEST, "Invalid Request: empty batch");
                    return Response::json(400, &mcp::error_response(Value::Null, &err)).into();
                }
                let responses: Vec<Value> = items
                    .iter()
                    .filter_map(|m| self.handle_message(req, m, &mut session))
                    .collect();
                if responses.is_empty() {
                    return Response::new(202).into();
                }
                with_session(Response::json(200, &Value::Array(responses)), session).into()
            }
            single => {
                if let Message::Invalid(err) = mcp::classify(single) {
                    return Response::json(400, &mcp::error_response(mcp::id_of(single), &err))
                        .into();
                }
                match self.handle_message(req, single, &mut session) {
                    Some(resp) => with_session(Response::json(200, &resp), session).into(),
                    None => Response::new(202).into(),
                }
            }
        }
    }

    /// A 2026-07-28 POST: one message, headers checked against it before anything runs.
    fn handle_modern(&self, req: &Request, body: &Value) -> Reply {
        let err = |status: u16, id: Value, e: &mcp::RpcError| -> Reply {
            Response::json(status, &mcp::error_response(id, e)).into()
        };
        let (method, id, params) = match mcp::classify(body) {
            Message::Request { method, id, params } => (method, Some(id), params),
            Message::Notification { method } => (method, None, body.get("params")),
            Message::Invalid(e) => return err(400, mcp::id_of(body), &e),
            Message::Response => {
                let e = mcp::RpcError::new(
                    mcp::INVALID_REQUEST,
                    "Invalid Request: clients send no JSON-RPC responses in 2026-07-28",
                );
                return err(400, Value::Null, &e);
            }
        };
        let rid = id.cloned().unwrap_or(Value::Null);
        let values = |name: &str| -> Vec<&str> {
            req.headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        if let Err(why) = modern::check_headers(values, method, params, modern::meta_version(body))
        {
            return err(400, rid, &modern::mismatch(&why));
        }
        let version = modern::meta_version(body)
            .or(req.header("mcp-protocol-version"))
            .unwrap_or_default();
        if version != modern::VERSION {
            return err(400, rid, &modern::unsupported(version));
        }
        self.log_exec(req, Some(method), id, params);
        let Some(id) = id else {
            return Response::new(202).into();
        };
        if method == "subscriptions/listen" {
            return match modern::Filter::from_params(params) {
                Ok(filter) => self.open_listen(id.clone(), filter),
                Err(e) => err(200, rid, &e),
            };
        }
        match modern::handle_with(&self.name, method, params, hooks(req)) {
            Ok(result) => Response::json(200, &mcp::result_response(rid, result)).into(),
            Err(e) if e.code == mcp::METHOD_NOT_FOUND => err(404, rid, &e),
            Err(e) => err(200, rid, &e),
        }
    }

    fn open_listen(&self, sub_id: Value, filter: modern::Filter) -> Reply {
        static KEYS: AtomicU64 = AtomicU64::new(1);
        let key = KEYS.fetch_add(1, Ordering::Relaxed);
        let honoured = filter.honoured(mcp::resource_exists);
        let first = modern::acknowledged(&sub_id, &honoured);
        let (tx, events) = mpsc::unbounded_channel();
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Listener {
                key,
                sub_id,
                filter: honoured,
                tx,
            });
        Reply::Listen { key, first, events }
    }

    fn close_listen(&self, key: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| l.key != key);
    }

    /// Handles one JSON-RPC message; returns the response to send, if any.
    fn handle_message(
        &self,
        req: &Request,
        msg: &Value,
        session: &mut Option<String>,
    ) -> Option<Value> {
        match mcp::classify(msg) {
            Message::Invalid(err) => Some(mcp::error_response(mcp::id_of(msg), &err)),
            Message::Response => {
                self.log_exec(req, None, msg.get("id"), None);
                None
            }
            Message::Notification { method } => {
                self.log_exec(req, Some(method), None, msg.get("params"));
                None
            }
            Message::Request { method, id, params } => {
                self.log_exec(req, Some(method), Some(id), params);
                Some(
                    match mcp::handle_with(&self.name, method, params, hooks(req)) {
                        Ok(result) => {
                            if method == "initialize" {
                                *session = Some(new_session_id());
                            }
                            mcp::result_response(id.clone(), result)
                        }
                        Err(err) => mcp::error_response(id.clone(), &err),
                    },
                )
            }
        }
    }
}

/// The list hooks a request's headers ask for.
fn hooks(req: &Request) -> mcp::Hooks {
    mcp::Hooks {
        page_size: req
            .header("x-test-page-size")
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0),
    }
}

fn flag(req: &Request, name: &str) -> bool {
    matches!(req.header(name), Some(v) if v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Whether `accept-encoding` accepts gzip (a `gzip` or `x-gzip` coding whose q is not 0).
fn accepts_gzip(req: &Request) -> bool {
    req.headers
        .iter()
        .filter(|(n, _)| n == "accept-encoding")
        .flat_map(|(_, v)| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let q_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip")) && !q_zero
        })
}

/// Whether a POST body (one message or a batch) holds a list request (with an id).
fn has_list_request(body: &Value) -> bool {
    let is_list_request = |m: &Value| {
        m.get("id").is_some()
            && m.get("method")
                .and_then(Value::as_str)
                .is_some_and(mcp::is_list)
    };
    match body {
        Value::Array(items) => items.iter().any(is_list_request),
        one => is_list_request(one),
    }
}

/// Applies the response-shaping test headers (USAGE) to the answer of a POST.
fn shape(req: &Request, mut resp: Response) -> Response {
    let is_json = resp.header_value("content-type") == Some("application/json");
    if resp.status != 200 || !is_json || resp.body.is_empty() {
        return resp;
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let broken = flag(req, "x-test-broken-list") && has_list_request(&body);
    if flag(req, "x-test-sse") {
        // Each response in its own event (a batch's one by one), after a notification.
        let answer: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        let messages = match answer {
            Value::Array(items) => items,
            one => vec![one],
        };
        let method = body
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a batch");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "sample", "data": format!("answering {method}")}});
        let mut chunks = vec![modern::sse_event(&note).into_bytes()];
        let last = messages.len().saturating_sub(1);
        for (i, m) in messages.iter().enumerate() {
            let mut text = m.to_string();
            if broken && i == last {
                text.pop();
            }
            let event = format!("event: message\ndata: {text}\n\n").into_bytes();
            // Split mid-event, so that a reader gets the event in two pieces.
            let (a, b) = event.split_at(event.len() / 2);
            chunks.push(a.to_vec());
            chunks.push(b.to_vec());
        }
        resp.set_header("content-type", "text/event-stream");
        resp.set_header("cache-control", "no-cache");
        resp.body = Vec::new();
        resp.chunks = chunks;
    } else if broken {
        resp.body.pop();
    }
    let forced = flag(req, "x-test-gzip");
    if forced || (accepts_gzip(req) && resp.chunks.is_empty()) {
        let plain = if resp.chunks.is_empty() {
            std::mem::take(&mut resp.body)
        } else {
            std::mem::take(&mut resp.chunks).concat()
        };
        resp.body = http::gzip(&plain);
        resp.set_header("content-encoding", "gzip");
        resp.set_header("vary", "accept-encoding");
    }
    resp
}

fn with_session(resp: Response, session: Option<String>) -> Response {
    match session {
        Some(sid) => resp.header("mcp-session-id", &sid),
        None => resp,
    }
}

/// 128 random bits as 32 hex digits (std's randomly keyed SipHash).
fn new_session_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut out = String::with_capacity(32);
    for salt in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_u64(salt);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// JSON text of a value, for the hand-built log line.
fn j<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

/// Answers one request (hyper calls this for each request of a connection).
async fn serve(
    server: Arc<Server>,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<http::Body>, Infallible> {
    let req = match http::read(req).await {
        Ok(req) => req,
        Err(refusal) => return Ok(refusal.into_hyper(false)),
    };
    Ok(match server.handle(&req) {
        Reply::Once(resp) => resp.into_hyper(req.keep_alive),
        Reply::Listen { key, first, events } => listen(server, key, first, events),
    })
}

/// A `subscriptions/listen` SSE response (chunked): the acknowledgment, then each event, with a
/// keep-alive comment when idle, until the client closes the stream (hyper then drops the body,
/// and the subscription ends).
fn listen(
    server: Arc<Server>,
    key: u64,
    first: Value,
    mut events: UnboundedReceiver<Value>,
) -> hyper::Response<http::Body> {
    let (tx, body) = http::channel(1);
    tokio::spawn(async move {
        let mut next = Some(modern::sse_event(&first));
        while let Some(data) = next.take() {
            if tx.send(Bytes::from(data)).await.is_err() {
                break;
            }
            next = match tokio::time::timeout(KEEPALIVE, events.recv()).await {
                Ok(Some(msg)) => Some(modern::sse_event(&msg)),
                Ok(None) => None,
                Err(_) => Some(": keep-alive\n\n".to_string()),
            };
        }
        server.close_listen(key);
    });
    let mut resp = hyper::Response::new(body);
    for (n, v) in [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("x-accel-buffering", "no"),
    ] {
        resp.headers_mut()
            .insert(n, hyper::header::HeaderValue::from_static(v));
    }
    resp
}

fn main() -> ExitCode {
    let config = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let log = match &config.log {
        Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                eprintln!("error: cannot open log file {path}: {e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let listener = match TcpListener::bind(&config.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.listen);
            return ExitCode::from(1);
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a.to_string(),
        Err(_) => config.listen.clone(),
    };
    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "listening on {addr}");
        let _ = out.flush();
    }
    let server = Arc::new(Server {
        name: config.name,
        log,
        listeners: Mutex::new(Vec::new()),
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(accept(listener, server))
}

/// Accepts connections until the process is killed; each is served by hyper in a task of its own.
async fn accept(listener: TcpListener, server: Arc<Server>) -> ExitCode {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen: {e}");
            return ExitCode::from(1);
        }
    };
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // No `date` header: answers are what they were before hyper (and the same on every run).
    http1.max_headers(MAX_HEADERS).auto_date_header(false);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // e.g. EMFILE: back off briefly instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let server = Arc::clone(&server);
        let conn = http1.serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn(move |req| serve(server.clone(), req)),
        );
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
