//! `toolgate-test-authz`: real external authorizers for Toolgate's end-to-end tests.
//!
//! ```text
//! toolgate-test-authz [--grpc ADDR] [--http ADDR] [--rule FILE] [--log FILE]
//! ```
//!
//! * `--grpc ADDR`: Envoy ext_authz v3 gRPC service (`/envoy.service.auth.v3.Authorization/Check`,
//!   HTTP/2 cleartext with prior knowledge).
//! * `--http ADDR`: Envoy ext_authz HTTP-service style authorizer (HTTP/1.1; any method and path).
//! * `--rule FILE`: JSON rule, re-read on every request (see `rule::Rule`); none = allow everything. A
//!   missing or invalid file answers every request with an error (gRPC INTERNAL, HTTP 500).
//! * `--log FILE`: appends one JSON object per request received (`"kind": "grpc"` or `"http"`), with
//!   the decision (`"decision"`, `"reason"`) and the failure mode applied (`"mode"`).
//!
//! At least one of `--grpc` / `--http`. Once listening, the first stdout line is one JSON object with
//! the bound addresses of the servers started, e.g. `{"grpc":"127.0.0.1:40001","http":"127.0.0.1:40002"}`
//! (use port 0 and read it). Runs until killed.

#![forbid(unsafe_code)]
mod grpc;
mod http;
mod log;
mod rule;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;

const USAGE: &str =
    "usage: toolgate-test-authz [--grpc ADDR] [--http ADDR] [--rule FILE] [--log FILE]";

pub struct State {
    pub rule: Option<PathBuf>,
    pub log: log::Log,
}

/// The failure mode a rule applies, for the log.
pub fn mode(rule: &rule::Rule) -> serde_json::Value {
    let mut modes = Vec::new();
    if rule.delay_ms > 0 {
        modes.push(format!("delay_ms={}", rule.delay_ms));
    }
    if rule.garbage {
        modes.push("garbage".into());
    }
    if rule.close_mid_reply {
        modes.push("close_mid_reply".into());
    }
    if modes.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::json!(modes.join(","))
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}\n{USAGE}");
    std::process::exit(2);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut grpc_addr, mut http_addr, mut rule, mut log_path) = (None, None, None, None);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--grpc" => grpc_addr = Some(value()),
            "--http" => http_addr = Some(value()),
            "--rule" => rule = Some(PathBuf::from(value())),
            "--log" => log_path = Some(value()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown argument {other}")),
        }
    }
    if grpc_addr.is_none() && http_addr.is_none() {
        fail("give --grpc ADDR and/or --http ADDR");
    }
    let log = log::Log::open(log_path.as_deref())
        .unwrap_or_else(|e| fail(&format!("cannot open log file: {e}")));
    let state = Arc::new(State { rule, log });
    let bind = |addr: String| async move {
        TcpListener::bind(&addr)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")))
    };
    let mut bound = serde_json::Map::new();
    let mut tasks = Vec::new();
    if let Some(addr) = grpc_addr {
        let l = bind(addr).await;
        bound.insert("grpc".into(), l.local_addr().unwrap().to_string().into());
        tasks.push(tokio::spawn(grpc::serve(l, state.clone())));
    }
    if let Some(addr) = http_addr {
        let l = bind(addr).await;
        bound.insert("http".into(), l.local_addr().unwrap().to_string().into());
        tasks.push(tokio::spawn(http::serve(l, state.clone())));
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", serde_json::Value::Object(bound));
        let _ = out.flush();
    }
    for t in tasks {
        let _ = t.await;
    }
}
