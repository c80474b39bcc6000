//! The HTTP authorizer, Envoy ext_authz HTTP-service style: any method and path; 2xx allows (with
//! `ok_headers` on the 200, for the caller to copy upstream), anything else denies (`deny_status`,
//! `deny_headers`, `deny_body`). HTTP/1.1 written by hand on a TCP socket (httparse for the head),
//! so the failure modes can break the protocol on purpose.
//!
//! The caller's identity is read from the `x-toolgate-principal` header (the HTTP ext_authz API has no
//! principal field: the caller sets the header), else from the `URI=` of the last element of
//! `x-forwarded-client-cert`, as Envoy writes it from a verified client certificate.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value as Json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::rule::{tool_name, Rule};
use crate::State;

pub const PRINCIPAL_HEADER: &str = "x-toolgate-principal";
/// What `garbage` writes: not an HTTP response.
pub const GARBAGE: &[u8] = b"HTTP/1.1 2OO Bogus\r\n\x00\x01not: http\r\n\r\n";
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;

pub async fn serve(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = connection(stream, state).await;
        });
    }
}

struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    close: bool,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

async fn connection(mut stream: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        let close = req.close;
        match respond(&req, &state).await {
            Reply::Bytes(bytes) => stream.write_all(&bytes).await?,
            Reply::Drop(bytes) => {
                stream.write_all(&bytes).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Ok(()); // dropped: the connection closes mid-reply
            }
        }
        if close {
            return Ok(());
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

fn bad(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

/// One request off the connection (`buf` keeps what was read past it); None at a clean EOF.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<Req>> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(bad("head too large"));
        }
        if !fill(stream, buf).await? {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(bad("eof in head"))
            };
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut headers);
    parsed
        .parse(&buf[..head_end])
        .map_err(|e| bad(&e.to_string()))?;
    let mut req = Req {
        method: parsed.method.unwrap_or("").to_string(),
        path: parsed.path.unwrap_or("").to_string(),
        headers: parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
        body: Vec::new(),
        close: parsed.version == Some(0),
    };
    buf.drain(..head_end);
    if let Some(c) = req.header("connection") {
        req.close = c.eq_ignore_ascii_case("close");
    }
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let line_end = loop {
                if let Some(i) = find(buf, b"\r\n") {
                    break i;
                }
                if !fill(stream, buf).await? {
                    return Err(bad("eof in chunk size"));
                }
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).to_string();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| bad("bad chunk size"))?;
            buf.drain(..line_end + 2);
            if size == 0 {
                // Trailers (ignored) up to the empty line.
                loop {
                    if let Some(i) = find(buf, b"\r\n") {
                        buf.drain(..i + 2);
                        if i == 0 {
                            break;
                        }
                        continue;
                    }
                    if !fill(stream, buf).await? {
                        return Err(bad("eof in trailers"));
                    }
                }
                break;
            }
            if req.body.len() + size > MAX_BODY {
                return Err(bad("body too large"));
            }
            while buf.len() < size + 2 {
                if !fill(stream, buf).await? {
                    return Err(bad("eof in chunk"));
                }
            }
            req.body.extend_from_slice(&buf[..size]);
            buf.drain(..size + 2);
        }
    } else {
        let len: usize = req
            .header("content-length")
            .map(|v| v.trim().parse().map_err(|_| bad("bad content-length")))
            .transpose()?
            .unwrap_or(0);
        if len > MAX_BODY {
            return Err(bad("body too large"));
        }
        while buf.len() < len {
            if !fill(stream, buf).await? {
                return Err(bad("eof in body"));
            }
        }
        req.body = buf.drain(..len).collect();
    }
    Ok(Some(req))
}

enum Reply {
    Bytes(Vec<u8>),
    /// Write these, then drop the connection.
    Drop(Vec<u8>),
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn response(status: u16, headers: &[(String, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        && !body.is_empty()
    {
        out.push_str("content-type: text/plain\r\n");
    }
    out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// `URI=` of the last element of an `x-forwarded-client-cert` value.
fn xfcc_uri(xfcc: &str) -> Option<&str> {
    let last = xfcc.rsplit(',').next()?;
    last.split(';')
        .find_map(|kv| kv.strip_prefix("URI="))
        .map(|v| v.trim_matches('"'))
}

async fn respond(req: &Req, state: &State) -> Reply {
    let principal = req
        .header(PRINCIPAL_HEADER)
        .map(str::to_string)
        .or_else(|| {
            req.header("x-forwarded-client-cert")
                .and_then(xfcc_uri)
                .map(str::to_string)
        });
    let mcp: Option<Json> = serde_json::from_slice(&req.body).ok();
    let mut headers = Map::new();
    for (k, v) in &req.headers {
        match headers.get_mut(k) {
            Some(Json::String(prev)) => {
                prev.push(',');
                prev.push_str(v);
            }
            _ => {
                headers.insert(k.clone(), json!(v));
            }
        }
    }
    let mut entry = json!({
        "kind": "http",
        "method": req.method,
        "path": req.path,
        "headers": headers,
        "body": String::from_utf8_lossy(&req.body),
        "principal": principal,
        "tool": tool_name(mcp.as_ref()),
    });
    let rule = match Rule::load(state.rule.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            entry["error"] = json!(e);
            state.log.write(&entry);
            return Reply::Bytes(response(500, &[], e.as_bytes()));
        }
    };
    let decision = rule.decide(principal.as_deref(), mcp.as_ref());
    entry["decision"] = json!(if decision.allow { "allow" } else { "deny" });
    entry["reason"] = json!(decision.reason);
    entry["mode"] = json!(crate::mode(&rule));
    state.log.write(&entry);

    if rule.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(rule.delay_ms)).await;
    }
    if rule.garbage {
        return Reply::Drop(GARBAGE.to_vec());
    }
    let bytes = if decision.allow {
        let headers: Vec<_> = rule
            .ok_headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        response(200, &headers, b"")
    } else {
        let headers: Vec<_> = rule
            .deny_headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        response(rule.deny_status, &headers, rule.deny_body.as_bytes())
    };
    if rule.close_mid_reply {
        // The head announces a body (content-length at least 1 more than sent), then the connection drops.
        let head_end = find(&bytes, b"\r\n\r\n").unwrap() + 4;
        let mut partial = bytes[..head_end].to_vec();
        let body = &bytes[head_end..];
        if body.is_empty() {
            partial = response_with_length(&partial, 64);
            partial.extend_from_slice(b"partial");
        } else {
            partial.extend_from_slice(&body[..body.len() / 2]);
        }
        return Reply::Drop(partial);
    }
    Reply::Bytes(bytes)
}

/// `head` with its `content-length: 0` replaced by `len`.
fn response_with_length(head: &[u8], len: usize) -> Vec<u8> {
    String::from_utf8_lossy(head)
        .replace(
            "content-length: 0\r\n",
            &format!("content-length: {len}\r\n"),
        )
        .into_bytes()
}
