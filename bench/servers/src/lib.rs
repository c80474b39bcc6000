//! A deliberately small HTTP/1.1 server for `make bench`: one thread per connection, keep-alive,
//! `content-length` and chunked request bodies, one fixed response per request. It runs pinned to
//! the load generator's core and must never be the bottleneck of a run (Envoy is).

#![forbid(unsafe_code)]
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// One parsed request: the raw header block (request line included) and the whole body.
pub struct Request<'a> {
    pub head: &'a [u8],
    pub body: &'a [u8],
}

impl Request<'_> {
    /// The first header with this (lower-case) name.
    pub fn header(&self, lower_name: &str) -> Option<&[u8]> {
        header_in(self.head, lower_name)
    }
}

fn header_in<'h>(head: &'h [u8], lower_name: &str) -> Option<&'h [u8]> {
    head.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = line.split_at(colon);
        name.eq_ignore_ascii_case(lower_name.as_bytes())
            .then(|| trim(&value[1..]))
    })
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// A complete response (status line, headers, body) built once.
pub fn response(status: u16, reason: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// `--listen ADDR` from the command line (default 127.0.0.1:0) and the remaining arguments.
pub fn listen_arg() -> (String, Vec<String>) {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut listen = "127.0.0.1:0".to_string();
    if let Some(i) = args.iter().position(|a| a == "--listen") {
        if i + 1 < args.len() {
            listen = args.remove(i + 1);
        }
        args.remove(i);
    }
    (listen, args)
}

/// Binds, prints `listening on ADDR` on stdout, serves forever.
pub fn serve<H>(listen: &str, handler: H) -> io::Result<()>
where
    H: Fn(&Request<'_>) -> &'static [u8] + Send + Sync + 'static,
{
    let listener = TcpListener::bind(listen)?;
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    let handler = Arc::new(handler);
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let handler = Arc::clone(&handler);
        std::thread::spawn(move || {
            let _ = connection(stream, &*handler);
        });
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn connection<H>(mut stream: TcpStream, handler: &H) -> io::Result<()>
where
    H: Fn(&Request<'_>) -> &'static [u8],
{
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut filled = 0usize;
    let mut chunked_body = Vec::new();
    loop {
        // Header block.
        let mut scanned = 0usize;
        let head_end = loop {
            if let Some(p) = find(&buf[scanned..filled], b"\r\n\r\n") {
                break scanned + p + 4;
            }
            scanned = filled.saturating_sub(3);
            if filled == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = stream.read(&mut buf[filled..])?;
            if n == 0 {
                return Ok(());
            }
            filled += n;
        };
        let head = &buf[..head_end];
        let chunked = header_in(head, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"));
        let length: usize = header_in(head, "content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .unwrap_or(0);
        let close = header_in(head, "connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
        let consumed;
        let reply;
        if chunked {
            chunked_body.clear();
            let mut pos = head_end;
            loop {
                // Chunk size line.
                let line_end = loop {
                    if let Some(p) = find(&buf[pos..filled], b"\r\n") {
                        break pos + p;
                    }
                    read_more(&mut stream, &mut buf, &mut filled)?;
                };
                let size_text = std::str::from_utf8(&buf[pos..line_end])
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap_or("");
                let size = usize::from_str_radix(size_text.trim(), 16)
                    .map_err(|_| io::ErrorKind::InvalidData)?;
                pos = line_end + 2;
                if size == 0 {
                    // Trailers (none expected) end with an empty line.
                    while find(&buf[pos..filled], b"\r\n").is_none() {
                        read_more(&mut stream, &mut buf, &mut filled)?;
                    }
                    pos += find(&buf[pos..filled], b"\r\n").unwrap_or(0) + 2;
                    break;
                }
                while filled < pos + size + 2 {
                    read_more(&mut stream, &mut buf, &mut filled)?;
                }
                chunked_body.extend_from_slice(&buf[pos..pos + size]);
                pos += size + 2;
            }
            consumed = pos;
            reply = handler(&Request {
                head: &buf[..head_end],
                body: &chunked_body,
            });
        } else {
            let end = head_end + length;
            if buf.len() < end {
                buf.resize(end.next_power_of_two(), 0);
            }
            while filled < end {
                let n = stream.read(&mut buf[filled..])?;
                if n == 0 {
                    return Ok(());
                }
                filled += n;
            }
            consumed = end;
            reply = handler(&Request {
                head: &buf[..head_end],
                body: &buf[head_end..end],
            });
        }
        stream.write_all(reply)?;
        if close {
            return Ok(());
        }
        buf.copy_within(consumed..filled, 0);
        filled -= consumed;
    }
}

fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>, filled: &mut usize) -> io::Result<()> {
    if *filled == buf.len() {
        buf.resize(buf.len() * 2, 0);
    }
    let n = stream.read(&mut buf[*filled..])?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    *filled += n;
    Ok(())
}
