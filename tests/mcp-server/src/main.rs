//! Toolgate sample MCP server (Streamable HTTP transport, plain HTTP).
//!
//! Used by the demo and the end-to-end tests. Every request it executes is
//! appended as one JSON line to the execution log (`--log FILE`) and echoed
//! to stderr, so tests can prove that a denied call never reached it.

mod http;
mod mcp;

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use http::{ReadError, Request, Response};
use mcp::Message;

const USAGE: &str = "\
usage: toolgate-sample-mcp-server --listen ADDR [--log FILE] [--name NAME]

  --listen ADDR   address to listen on, e.g. 127.0.0.1:8080 (port 0 picks a
                  free port); the first stdout line is `listening on ADDR`
  --log FILE      append one JSON line per executed request to FILE
  --name NAME     server name (serverInfo.name and the log's `server` field)
";

/// How long a connection may sit idle (or stall mid-request).
const IO_TIMEOUT: Duration = Duration::from_secs(600);

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

    fn handle(&self, req: &Request) -> Response {
        match req.method.as_str() {
            "POST" => self.handle_post(req),
            "GET" => {
                self.log_exec(req, None, None, None);
                Response::new(200)
                    .header("content-type", "text/event-stream")
                    .header("cache-control", "no-cache")
                    .body(": stream open\n\n")
            }
            "DELETE" => match req.header("mcp-session-id") {
                Some(sid) if !sid.is_empty() => {
                    self.log_exec(req, None, None, None);
                    Response::text(200, "session closed")
                }
                _ => Response::text(400, "missing mcp-session-id header"),
            },
            _ => Response::text(405, "method not allowed").header("allow", "GET, POST, DELETE"),
        }
    }

    fn handle_post(&self, req: &Request) -> Response {
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                let err = mcp::RpcError::new(mcp::PARSE_ERROR, format!("Parse error: {e}"));
                return Response::json(400, &mcp::error_response(Value::Null, &err));
            }
        };
        let mut session = None;
        match &body {
            Value::Array(items) => {
                if items.is_empty() {
                    let err =
                        mcp::RpcError::new(mcp::INVALID_REQUEST, "Invalid Request: empty batch");
                    return Response::json(400, &mcp::error_response(Value::Null, &err));
                }
                let responses: Vec<Value> = items
                    .iter()
                    .filter_map(|m| self.handle_message(req, m, &mut session))
                    .collect();
                if responses.is_empty() {
                    return Response::new(202);
                }
                with_session(Response::json(200, &Value::Array(responses)), session)
            }
            single => {
                if let Message::Invalid(err) = mcp::classify(single) {
                    return Response::json(400, &mcp::error_response(mcp::id_of(single), &err));
                }
                match self.handle_message(req, single, &mut session) {
                    Some(resp) => with_session(Response::json(200, &resp), session),
                    None => Response::new(202),
                }
            }
        }
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
                Some(match mcp::handle(&self.name, method, params) {
                    Ok(result) => {
                        if method == "initialize" {
                            *session = Some(new_session_id());
                        }
                        mcp::result_response(id.clone(), result)
                    }
                    Err(err) => mcp::error_response(id.clone(), &err),
                })
            }
        }
    }
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

fn serve_connection(server: &Server, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        match http::read_request(&mut reader, &mut writer) {
            Ok(req) => {
                let resp = server.handle(&req);
                if resp.write_to(&mut writer, req.keep_alive).is_err() || !req.keep_alive {
                    break;
                }
            }
            Err(ReadError::Closed) | Err(ReadError::Io) => break,
            Err(ReadError::Bad(status, why)) => {
                let _ = Response::text(status, why).write_to(&mut writer, false);
                lingering_close(reader, &writer);
                return;
            }
        }
    }
    let _ = writer.shutdown(std::net::Shutdown::Both);
}

/// Closes after an error response without discarding it: closing a socket
/// with unread input makes the kernel send RST, which can destroy the
/// response before the peer reads it. So half-close, then drain briefly.
fn lingering_close(mut reader: BufReader<TcpStream>, writer: &TcpStream) {
    let _ = writer.shutdown(std::net::Shutdown::Write);
    let _ = writer.set_read_timeout(Some(Duration::from_millis(500)));
    let mut sink = [0u8; 8192];
    let mut budget = 1024 * 1024;
    while budget > 0 {
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => budget -= n.min(budget),
        }
    }
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
    });
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(_) => {
                // e.g. EMFILE: back off briefly instead of spinning.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let server = Arc::clone(&server);
        let spawned = std::thread::Builder::new()
            .name("conn".into())
            .spawn(move || serve_connection(&server, stream));
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    ExitCode::SUCCESS
}
