//! A read body kept across the lifecycle's steps without borrowing it.
//!
//! A request held for an authorizer is decided in steps (the first read, then once per answer).
//! Each step used to read the whole body again ([`super::read_body`] without the params check):
//! natively, with (g1)'s plan and 300 B tools/call (`benches/lifecycle.rs` under callgrind), that
//! read was a large part of what the answer's step cost (docs/design/external-auth.md). What the
//! first read extracted is kept instead as offsets into the body (and the few values an escape made
//! owned), and the next step rebuilds the same [`McpBody`] from them: a UTF-8 check of the body and
//! a few slices.

use std::borrow::Cow;

use super::{McpBody, McpMessage, NotMcp};

/// What [`super::read_body`] found in a body, as offsets into it.
#[derive(Clone, Debug)]
pub struct KeptBody {
    batch: bool,
    messages: Vec<KeptMessage>,
}

#[derive(Clone, Debug)]
struct KeptMessage {
    method: Option<Kept>,
    id: Option<Kept>,
    name: Option<Kept>,
    uri: Option<Kept>,
    subscriptions: Vec<Kept>,
    protocol_version: Option<Kept>,
    params: Option<Kept>,
}

/// A text of the body: its span, or (decoded from escapes) its own copy.
#[derive(Clone, Debug)]
enum Kept {
    Span(usize, usize),
    Owned(String),
}

impl Kept {
    /// `s`, borrowed from `body` (the reader's slices are) or owned.
    fn of(s: Cow<'_, str>, body: &[u8]) -> Kept {
        match s {
            Cow::Borrowed(b) => Kept::span(b, body),
            Cow::Owned(o) => Kept::Owned(o),
        }
    }

    fn span(s: &str, body: &[u8]) -> Kept {
        let start = (s.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        match body.get(start..start.wrapping_add(s.len())) {
            Some(within) if within.as_ptr() == s.as_ptr() => Kept::Span(start, start + s.len()),
            // Not a slice of the body (never the case: the reader borrows only from it).
            _ => Kept::Owned(s.to_string()),
        }
    }

    fn get<'a>(&'a self, text: &'a str) -> &'a str {
        match self {
            Kept::Span(start, end) => text.get(*start..*end).unwrap_or_default(),
            Kept::Owned(s) => s,
        }
    }
}

impl KeptBody {
    /// The messages of `read` (read from `body`), kept as offsets into it.
    pub fn keep(read: McpBody<'_>, body: &[u8]) -> KeptBody {
        let batch = read.is_batch();
        let messages = match read {
            McpBody::Single(m) => vec![KeptMessage::keep(m, body)],
            McpBody::Batch(v) => v.into_iter().map(|m| KeptMessage::keep(m, body)).collect(),
        };
        KeptBody { batch, messages }
    }

    /// The body [`super::read_body`] read from `body` (the same bytes as when it was kept).
    pub fn body<'a>(&'a self, body: &'a [u8]) -> Result<McpBody<'a>, NotMcp> {
        let text = std::str::from_utf8(body).map_err(|e| NotMcp::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        let mut messages = self.messages.iter().map(|m| m.message(text));
        Ok(match (self.batch, messages.next()) {
            (false, Some(m)) => McpBody::Single(m),
            (_, first) => McpBody::Batch(first.into_iter().chain(messages).collect()),
        })
    }
}

impl KeptMessage {
    fn keep(m: McpMessage<'_>, body: &[u8]) -> KeptMessage {
        KeptMessage {
            method: m.method.map(|s| Kept::of(s, body)),
            id: m.id.map(|s| Kept::span(s, body)),
            name: m.name.map(|s| Kept::of(s, body)),
            uri: m.uri.map(|s| Kept::of(s, body)),
            subscriptions: m
                .subscriptions
                .into_iter()
                .map(|s| Kept::of(s, body))
                .collect(),
            protocol_version: m.protocol_version.map(|s| Kept::of(s, body)),
            params: m.params.map(|s| Kept::span(s, body)),
        }
    }

    fn message<'a>(&'a self, text: &'a str) -> McpMessage<'a> {
        let cow = |k: &'a Kept| Cow::Borrowed(k.get(text));
        McpMessage {
            method: self.method.as_ref().map(cow),
            id: self.id.as_ref().map(|k| k.get(text)),
            name: self.name.as_ref().map(cow),
            uri: self.uri.as_ref().map(cow),
            subscriptions: self.subscriptions.iter().map(cow).collect(),
            protocol_version: self.protocol_version.as_ref().map(cow),
            params: self.params.as_ref().map(|k| k.get(text)),
        }
    }
}
