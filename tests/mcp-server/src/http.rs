//! A deliberately small, defensive HTTP/1.1 server-side implementation on
//! top of `std::io`: request parsing (Content-Length and chunked bodies,
//! `Expect: 100-continue`, keep-alive) and response serialization.
//!
//! Nothing in here may panic on peer input: the release profile uses
//! `panic = "abort"`, so a panic would take the whole server down.

use std::io::{self, BufRead, Read, Write};

/// Longest accepted request line / header line / chunk-size line.
const MAX_LINE: usize = 16 * 1024;
/// Maximum number of header fields (and trailer fields).
const MAX_HEADERS: usize = 200;
/// Maximum total size of the request head.
const MAX_HEAD: usize = 128 * 1024;
/// Maximum decoded request body.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The request target exactly as received (path plus query).
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

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection cleanly before sending a request.
    Closed,
    /// I/O failure (including timeouts and EOF mid-request); nothing can
    /// be answered.
    Io,
    /// The peer sent something that is not valid HTTP/1.x; answer with
    /// this status and close.
    Bad(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// Reads one line terminated by LF (CRLF or bare LF), without the line
/// terminator. Returns `Ok(None)` on EOF before any byte was read.
fn read_line<R: BufRead>(r: &mut R, limit: usize) -> Result<Option<Vec<u8>>, ReadError> {
    let mut line = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Io),
        };
        if buf.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            return Err(ReadError::Io);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&buf[..i]);
                r.consume(i + 1);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > limit {
                    return Err(ReadError::Bad(431, "line too long"));
                }
                return Ok(Some(line));
            }
            None => {
                let n = buf.len();
                line.extend_from_slice(buf);
                r.consume(n);
                if line.len() > limit {
                    return Err(ReadError::Bad(431, "line too long"));
                }
            }
        }
    }
}

fn read_line_required<R: BufRead>(r: &mut R, limit: usize) -> Result<Vec<u8>, ReadError> {
    match read_line(r, limit)? {
        Some(l) => Ok(l),
        None => Err(ReadError::Io),
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses header (or trailer) field lines until the empty line.
fn read_fields<R: BufRead>(
    r: &mut R,
    head_budget: &mut usize,
) -> Result<Vec<(String, String)>, ReadError> {
    let mut fields = Vec::new();
    loop {
        let line = read_line_required(r, MAX_LINE)?;
        if line.is_empty() {
            return Ok(fields);
        }
        *head_budget = head_budget.saturating_sub(line.len() + 2);
        if *head_budget == 0 {
            return Err(ReadError::Bad(431, "request head too large"));
        }
        if fields.len() >= MAX_HEADERS {
            return Err(ReadError::Bad(431, "too many header fields"));
        }
        if line[0] == b' ' || line[0] == b'\t' {
            return Err(ReadError::Bad(400, "obsolete header line folding"));
        }
        let line = String::from_utf8_lossy(&line);
        let (name, value) = match line.split_once(':') {
            Some(nv) => nv,
            None => return Err(ReadError::Bad(400, "header line without colon")),
        };
        if !is_token(name) {
            return Err(ReadError::Bad(400, "invalid header name"));
        }
        fields.push((
            name.to_ascii_lowercase(),
            value.trim_matches(|c| c == ' ' || c == '\t').to_string(),
        ));
    }
}

/// Reads `n` bytes of body into `body`, enforcing [`MAX_BODY`].
fn read_exact_into<R: Read>(r: &mut R, body: &mut Vec<u8>, n: u64) -> Result<(), ReadError> {
    if n > (MAX_BODY - body.len()) as u64 {
        return Err(ReadError::Bad(413, "request body too large"));
    }
    let start = body.len();
    let n = n as usize;
    body.resize(start + n, 0);
    r.read_exact(&mut body[start..]).map_err(ReadError::from)
}

fn read_chunked<R: BufRead>(r: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let line = read_line_required(r, MAX_LINE)?;
        let line = String::from_utf8_lossy(&line);
        let size_str = line.split(';').next().unwrap_or("").trim();
        if size_str.is_empty() || !size_str.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ReadError::Bad(400, "invalid chunk size"));
        }
        let size = match u64::from_str_radix(size_str, 16) {
            Ok(s) => s,
            Err(_) => return Err(ReadError::Bad(413, "chunk too large")),
        };
        if size == 0 {
            // Trailer section (ignored) up to the final empty line.
            let mut budget = MAX_HEAD;
            read_fields(r, &mut budget)?;
            return Ok(body);
        }
        read_exact_into(r, &mut body, size)?;
        let crlf = read_line_required(r, MAX_LINE)?;
        if !crlf.is_empty() {
            return Err(ReadError::Bad(400, "missing CRLF after chunk data"));
        }
    }
}

fn has_token(list: &str, token: &str) -> bool {
    list.split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Reads one request from `r`. `w` is used only to send
/// `100 Continue` interim responses.
pub fn read_request<R: BufRead, W: Write>(r: &mut R, w: &mut W) -> Result<Request, ReadError> {
    // Request line; tolerate a few empty lines before it (RFC 9112 2.2).
    let mut line = None;
    for _ in 0..8 {
        match read_line(r, MAX_LINE)? {
            None => return Err(ReadError::Closed),
            Some(l) if l.is_empty() => continue,
            Some(l) => {
                line = Some(l);
                break;
            }
        }
    }
    let line = match line {
        Some(l) => l,
        None => return Err(ReadError::Bad(400, "no request line")),
    };
    let line = match String::from_utf8(line) {
        Ok(s) => s,
        Err(_) => return Err(ReadError::Bad(400, "request line is not UTF-8")),
    };
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) => (m, t, v),
        _ => return Err(ReadError::Bad(400, "malformed request line")),
    };
    if !is_token(method) || target.is_empty() {
        return Err(ReadError::Bad(400, "malformed request line"));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") => return Err(ReadError::Bad(505, "unsupported HTTP version")),
        _ => return Err(ReadError::Bad(400, "malformed request line")),
    };

    let mut budget = MAX_HEAD;
    let headers = read_fields(r, &mut budget)?;
    let mut req = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        body: Vec::new(),
        keep_alive: false,
    };

    let connection = req.header_joined("connection").unwrap_or_default();
    req.keep_alive = if http11 {
        !has_token(&connection, "close")
    } else {
        has_token(&connection, "keep-alive")
    };

    let te = req.header_joined("transfer-encoding");
    let cl = req.header_joined("content-length");
    let chunked = match &te {
        Some(te) => {
            let last = te.rsplit(',').next().unwrap_or("").trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err(ReadError::Bad(400, "unsupported transfer-encoding"));
            }
            if cl.is_some() {
                // Ambiguous framing (RFC 9112 6.1): use chunked, then close.
                req.keep_alive = false;
            }
            true
        }
        None => false,
    };
    let length = if chunked {
        None
    } else {
        match &cl {
            None => Some(0),
            Some(v) => {
                let mut value: Option<u64> = None;
                for part in v.split(',') {
                    let part = part.trim();
                    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(ReadError::Bad(400, "invalid content-length"));
                    }
                    let n: u64 = match part.parse() {
                        Ok(n) => n,
                        Err(_) => return Err(ReadError::Bad(413, "request body too large")),
                    };
                    if value.is_some_and(|prev| prev != n) {
                        return Err(ReadError::Bad(400, "conflicting content-length"));
                    }
                    value = Some(n);
                }
                value
            }
        }
    };
    if let Some(n) = length {
        if n > MAX_BODY as u64 {
            return Err(ReadError::Bad(413, "request body too large"));
        }
    }

    let has_body = chunked || length.unwrap_or(0) > 0;
    if http11 && has_body {
        if let Some(expect) = req.header("expect") {
            if expect.eq_ignore_ascii_case("100-continue") {
                w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
                w.flush()?;
            }
        }
    }

    req.body = if chunked {
        read_chunked(r)?
    } else {
        let mut body = Vec::new();
        read_exact_into(r, &mut body, length.unwrap_or(0))?;
        body
    };
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

    /// Serializes the response (with `content-length`, or chunked when it has `chunks`).
    pub fn write_to<W: Write>(&self, w: &mut W, keep_alive: bool) -> io::Result<()> {
        let mut out = Vec::with_capacity(256 + self.body.len());
        let _ = write!(out, "HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (n, v) in &self.headers {
            let _ = write!(out, "{n}: {v}\r\n");
        }
        // 1xx, 204 and 304 responses carry no content-length / body.
        let bodyless = self.status < 200 || self.status == 204 || self.status == 304;
        if !bodyless && !self.chunks.is_empty() {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            out.extend_from_slice(if keep_alive {
                b"connection: keep-alive\r\n\r\n"
            } else {
                b"connection: close\r\n\r\n"
            });
            w.write_all(&out)?;
            w.flush()?;
            for chunk in self.chunks.iter().filter(|c| !c.is_empty()) {
                write!(w, "{:x}\r\n", chunk.len())?;
                w.write_all(chunk)?;
                w.write_all(b"\r\n")?;
                w.flush()?;
                std::thread::sleep(CHUNK_PAUSE);
            }
            w.write_all(b"0\r\n\r\n")?;
            return w.flush();
        }
        if !bodyless {
            let _ = write!(out, "content-length: {}\r\n", self.body.len());
        }
        out.extend_from_slice(if keep_alive {
            b"connection: keep-alive\r\n\r\n"
        } else {
            b"connection: close\r\n\r\n"
        });
        if !bodyless {
            out.extend_from_slice(&self.body);
        }
        w.write_all(&out)?;
        w.flush()
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

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> (Result<Request, ReadError>, Vec<u8>) {
        let mut out = Vec::new();
        let mut r = raw;
        (read_request(&mut r, &mut out), out)
    }

    fn bad(raw: &[u8]) -> u16 {
        match parse(raw).0 {
            Err(ReadError::Bad(s, _)) => s,
            other => panic!("expected Bad, got {other:?}"),
        }
    }

    #[test]
    fn parses_content_length_body_and_headers() {
        let (req, out) = parse(b"POST /p?q=1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a:  2 \r\nContent-Length: 2\r\n\r\n{}rest");
        let req = req.unwrap();
        assert!(out.is_empty());
        assert_eq!(req.method, "POST");
        assert_eq!(req.target, "/p?q=1");
        assert_eq!(req.body, b"{}");
        assert_eq!(req.header_joined("x-a").as_deref(), Some("1, 2"));
        assert!(req.keep_alive);
    }

    #[test]
    fn parses_chunked_and_sends_continue() {
        let (req, out) = parse(
            b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n1;x=y\r\nd\r\n0\r\nT: v\r\n\r\n",
        );
        assert_eq!(req.unwrap().body, b"abcd");
        assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn keep_alive_rules() {
        let r = |raw: &[u8]| parse(raw).0.unwrap().keep_alive;
        assert!(!r(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"));
        assert!(!r(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(r(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
        // CL + TE: chunked wins, connection is closed afterwards.
        assert!(!r(
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ));
    }

    #[test]
    fn rejects_malformed_requests() {
        assert_eq!(bad(b"GET /\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nBad Name: b\r\n\r\n"), 400);
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\nab"),
            400
        );
        assert_eq!(bad(b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            413
        );
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n"),
            413
        );
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            400
        );
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n"),
            400
        );
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n"),
            413
        );
        let long = [b"GET /".as_slice(), &[b'a'; 20_000], b" HTTP/1.1\r\n\r\n"].concat();
        assert_eq!(bad(&long), 431);
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

    #[test]
    fn chunked_response() {
        let mut r = Response::new(200).header("content-type", "text/event-stream");
        r.chunks = vec![b"ab".to_vec(), Vec::new(), b"cde".to_vec()];
        let mut out = Vec::new();
        r.write_to(&mut out, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        ));
        assert!(!text.contains("content-length"));
        assert!(
            text.ends_with("\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"),
            "{text}"
        );
    }

    #[test]
    fn eof_handling() {
        assert!(matches!(parse(b"").0, Err(ReadError::Closed)));
        assert!(matches!(parse(b"\r\n").0, Err(ReadError::Closed)));
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost").0,
            Err(ReadError::Io)
        ));
        assert!(matches!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab").0,
            Err(ReadError::Io)
        ));
    }
}
