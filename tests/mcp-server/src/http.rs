//! HTTP/1.1 for the sample server, on hyper: a request is read into [`Request`] (the body whole,
//! at most [`MAX_BODY`]) and a [`Response`] is turned into a hyper response (with
//! `content-length`, or chunked when it has `chunks` or streams from a [`channel`]).
//!
//! The server breaks no protocol rule on purpose: the odd wire behaviour the tests need (an event
//! stream split mid-event over chunks, a JSON body cut short, gzip) is in the bodies, which hyper
//! frames as it frames any other. Malformed requests are hyper's to refuse (400, 431, ...).
//!
//! Nothing in here may panic on peer input: the release profile uses `panic = "abort"`, so a
//! panic would take the whole server down.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH};
use hyper::{StatusCode, Version};
use tokio::sync::mpsc;

/// Maximum decoded request body.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

/// A response body.
pub type Body = BoxBody<Bytes, Infallible>;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The request target as received (path plus query).
    pub target: String,
    /// Header fields in received order, names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the connection may be reused after the response.
    pub keep_alive: bool,
}

impl Request {
    /// First value of a header (name must be lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// All values of a header joined with ", " (name must be lower-case).
    fn header_joined(&self, name: &str) -> Option<String> {
        let vals: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        if vals.is_empty() {
            None
        } else {
            Some(vals.join(", "))
        }
    }
}

fn has_token(list: &str, token: &str) -> bool {
    list.split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Reads a request and its whole body; the response to send instead when that fails (a body
/// over [`MAX_BODY`]: 413; a body hyper cannot decode, e.g. a bad chunk size: 400).
pub async fn read(req: hyper::Request<Incoming>) -> Result<Request, Response> {
    let (parts, body) = req.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(n, v)| {
            let v = String::from_utf8_lossy(v.as_bytes());
            (
                n.as_str().to_string(),
                v.trim_matches(|c| c == ' ' || c == '\t').to_string(),
            )
        })
        .collect();
    let mut req = Request {
        method: parts.method.as_str().to_string(),
        target: parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| parts.uri.to_string()),
        headers,
        body: Vec::new(),
        keep_alive: false,
    };
    let connection = req.header_joined("connection").unwrap_or_default();
    req.keep_alive = match parts.version {
        Version::HTTP_11 => !has_token(&connection, "close"),
        _ => has_token(&connection, "keep-alive"),
    };
    let too_large = || Response::text(413, "request body too large");
    // hyper has checked the framing headers (a bad or conflicting content-length is its 400).
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => req.body = collected.to_bytes().to_vec(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        // Broken framing (e.g. an invalid chunk size) or the peer went away mid-body.
        Err(_) => return Err(Response::text(400, "invalid request body")),
    }
    Ok(req)
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When not empty: the body, sent with `transfer-encoding: chunked`, one chunk each, flushed
    /// and [`CHUNK_PAUSE`] apart (`body` is then not sent).
    pub chunks: Vec<Vec<u8>>,
}

/// The pause between the chunks of a chunked response, so that a proxy gets them one by one.
pub const CHUNK_PAUSE: std::time::Duration = std::time::Duration::from_millis(30);

impl Response {
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            chunks: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The first value of a header (name in lower case).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Replaces every field of a header (name in lower case) with one.
    pub fn set_header(&mut self, name: &str, value: &str) {
        self.headers.retain(|(n, _)| n != name);
        self.headers.push((name.to_string(), value.to_string()));
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Response::new(status)
            .header("content-type", "application/json")
            .body(value.to_string())
    }

    pub fn text(status: u16, text: &str) -> Self {
        Response::new(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(format!("{text}\n"))
    }

    /// The hyper response: `content-length` (hyper's, from the body), or chunked when it has
    /// `chunks` (sent by a task, [`CHUNK_PAUSE`] apart); `connection: keep-alive` or `close`
    /// (hyper closes after a `close`). Must be called inside the Tokio runtime.
    pub fn into_hyper(self, keep_alive: bool) -> hyper::Response<Body> {
        let body = if self.chunks.is_empty() {
            Full::new(Bytes::from(self.body)).boxed()
        } else {
            let (tx, body) = channel(1);
            let chunks = self.chunks;
            tokio::spawn(async move {
                for chunk in chunks.into_iter().filter(|c| !c.is_empty()) {
                    if tx.send(Bytes::from(chunk)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(CHUNK_PAUSE).await;
                }
            });
            body
        };
        let mut resp = hyper::Response::new(body);
        *resp.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = resp.headers_mut();
        for (n, v) in &self.headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::try_from(n.as_str()),
                HeaderValue::try_from(v.as_str()),
            ) {
                headers.append(n, v);
            }
        }
        headers.insert(
            CONNECTION,
            HeaderValue::from_static(if keep_alive { "keep-alive" } else { "close" }),
        );
        resp
    }
}

/// A streamed response body and its sender: each `Bytes` sent is one chunk; the body ends when
/// the sender is dropped, and sending fails once hyper has dropped the body (the peer is gone).
pub fn channel(capacity: usize) -> (mpsc::Sender<Bytes>, Body) {
    let (tx, rx) = mpsc::channel(capacity);
    (tx, ChannelBody(rx).boxed())
}

struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// CRC-32 (IEEE 802.3, as gzip uses it).
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `data` as a gzip member (RFC 1952) of stored (uncompressed) deflate blocks (RFC 1951 3.2.4):
/// what `content-encoding: gzip` means, decoded by any gzip reader, without a compressor.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32 + data.len() / 65535 * 5);
    // ID1 ID2, CM=deflate, FLG=0, MTIME=0, XFL=0, OS=255 (unknown).
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
    let mut blocks = data.chunks(65535).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]); // one final empty stored block
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        let len = block.len() as u16;
        out.push(u8::from(last)); // BFINAL, BTYPE=00 (stored)
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_tokens() {
        assert!(has_token("foo, Close ", "close"));
        assert!(!has_token("keep-alive", "close"));
    }

    #[test]
    fn gzip_member_of_stored_blocks() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let g = gzip(b"hello");
        assert_eq!(&g[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(&g[10..15], &[1, 5, 0, 0xfa, 0xff]);
        assert_eq!(&g[15..20], b"hello");
        assert_eq!(&g[20..24], &0x3610_a686u32.to_le_bytes());
        assert_eq!(&g[24..], &5u32.to_le_bytes());
        // Two blocks past 65535 bytes; an empty body is one empty final block.
        let big = vec![b'x'; 70_000];
        let g = gzip(&big);
        assert_eq!(g[10], 0);
        assert_eq!(g[10 + 5 + 65535], 1);
        assert_eq!(g.len(), 10 + 5 + 65535 + 5 + (70_000 - 65535) + 8);
        assert_eq!(gzip(b"").len(), 10 + 5 + 8);
    }
}
