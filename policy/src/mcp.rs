//! The MCP (JSON-RPC 2.0) body reader (docs/semantics.md §4).
//!
//! [`read_body`] validates the whole buffered POST body as strict RFC 8259 JSON (UTF-8, escapes, lone
//! surrogates, control characters, number grammar, literals, whitespace, trailing data), rejects
//! duplicate keys in every object at every depth and nesting deeper than [`MAX_DEPTH`], and extracts
//! only what the policy needs: `jsonrpc`, `id`, `method`, `params.name`, `params.uri`, the presence of
//! `result`/`error` and, on request, the raw text of `params`. Everything else is skipped without
//! building values.
//!
//! The parser is iterative (an explicit stack bounded by [`MAX_DEPTH`]), never panics on any input, and
//! allocates a constant number of scratch buffers per call (plus `Cow::Owned` strings for extracted
//! values that contain escapes, and one hash table per nesting level for objects with many keys).
//!
//! Depth counts containers: the top-level object or array is depth 1, an object or array inside it is
//! depth 2, and so on; scalars do not add depth. A container that would be at depth 65 is
//! [`NotMcp::TooDeep`].
//!
//! Error precedence: JSON-level problems (syntax, UTF-8, duplicate keys, depth) are reported in
//! preference to JSON-RPC-level problems (not an object, `jsonrpc`, `method`, `id`, empty batch); among
//! JSON-RPC problems the first one in body order wins.

use std::borrow::Cow;

mod kept;
mod keys;
mod parser;
pub(crate) mod scan;
mod twins;

use parser::Parser;
pub(crate) use scan::folded_field;

pub use kept::KeptBody;

/// Maximum container nesting. The top-level value is depth 1; a deeper container is [`NotMcp::TooDeep`].
pub const MAX_DEPTH: usize = 64;

/// Options for [`read_body`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    /// Record the raw JSON text of `params` in [`McpMessage::params`] (for CEL rules on
    /// `request.mcp.params` and for authorizers), and refuse it when its objects hold keys that fold
    /// together ([`NotMcp::FoldedTwins`]) or values serde_json cannot decode.
    pub capture_params: bool,
}

/// A body that is MCP: one JSON-RPC message or a non-empty batch of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpBody<'a> {
    Single(McpMessage<'a>),
    Batch(Vec<McpMessage<'a>>),
}

impl<'a> McpBody<'a> {
    /// The messages of the body, in order (one for a single message).
    pub fn messages(&self) -> &[McpMessage<'a>] {
        match self {
            McpBody::Single(m) => std::slice::from_ref(m),
            McpBody::Batch(v) => v,
        }
    }

    /// Whether the body was a JSON array (even of one element).
    pub fn is_batch(&self) -> bool {
        matches!(self, McpBody::Batch(_))
    }
}

/// What the policy needs from one JSON-RPC message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpMessage<'a> {
    /// `method` (escapes decoded). `None` only for a client-sent JSON-RPC response (`result` or `error`,
    /// no `method`).
    pub method: Option<Cow<'a, str>>,
    /// Raw JSON text of `id` exactly as in the body (`7`, `"abc"`, `null`); `None` when absent.
    pub id: Option<&'a str>,
    /// `params.name` when it is a string (escapes decoded), else `None`.
    pub name: Option<Cow<'a, str>>,
    /// `params.uri` when it is a string (escapes decoded), else `None`.
    pub uri: Option<Cow<'a, str>>,
    /// The URIs of `params.notifications.resourceSubscriptions` (MCP 2026-07-28
    /// `subscriptions/listen`; escapes decoded). Empty when absent.
    pub subscriptions: Vec<Cow<'a, str>>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]` when it is a string (MCP 2026-07-28).
    pub protocol_version: Option<Cow<'a, str>>,
    /// Raw JSON text of `params`, only with [`ReadOptions::capture_params`].
    pub params: Option<&'a str>,
}

/// The JSON-RPC kind of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// A string `method` and a non-null `id`.
    Request,
    /// A `method` with `id` absent or `null`.
    Notification,
    /// No `method` (has `result` or `error`).
    Response,
}

impl<'a> McpMessage<'a> {
    /// docs/semantics.md §3: what a `subscriptions/listen` stands for besides its list-change parts (base
    /// methods): one `resources/subscribe` of each URI of `resourceSubscriptions`, each judged as
    /// such. None for other methods.
    pub fn listen_subscribes(&self) -> impl Iterator<Item = McpMessage<'_>> + '_ {
        let listen = self.method.as_deref() == Some("subscriptions/listen");
        self.subscriptions
            .iter()
            .filter(move |_| listen)
            .map(move |uri| McpMessage {
                method: Some(Cow::Borrowed("resources/subscribe")),
                id: self.id,
                name: None,
                uri: Some(Cow::Borrowed(uri.as_ref())),
                subscriptions: Vec::new(),
                protocol_version: None,
                params: None,
            })
    }

    pub fn kind(&self) -> MessageKind {
        match (&self.method, self.id) {
            (None, _) => MessageKind::Response,
            (Some(_), None) | (Some(_), Some("null")) => MessageKind::Notification,
            (Some(_), Some(_)) => MessageKind::Request,
        }
    }
}

/// Why a body is not MCP. Offsets are byte offsets into the body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotMcp {
    #[error("invalid JSON at byte {offset}: expected {expected}")]
    InvalidJson {
        offset: usize,
        expected: &'static str,
    },
    #[error("JSON ends early: expected {expected}")]
    UnexpectedEnd { expected: &'static str },
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("unescaped control character in string at byte {offset}")]
    ControlCharacter { offset: usize },
    #[error("invalid escape in string at byte {offset}")]
    InvalidEscape { offset: usize },
    #[error("lone surrogate escape at byte {offset}")]
    LoneSurrogate { offset: usize },
    #[error("duplicate key {} at byte {offset}", crate::log_safe::Quoted(key))]
    DuplicateKey { key: String, offset: usize },
    /// A message or `params` key that is one of the fields the reader extracts under the case
    /// folding of Go's `encoding/json` (and other case-insensitive decoders), without being it
    /// exactly: such a server would read it as that field, this reader would not.
    #[error(
        "key {} at byte {offset} reads as '{field}' to case-insensitive JSON decoders",
        crate::log_safe::Quoted(key)
    )]
    FoldedKey {
        key: String,
        field: &'static str,
        offset: usize,
    },
    /// A key holding U+0000 (only possible escaped: `"name\u0000"`). A decoder that ends strings at
    /// NUL (C libraries, and what a server hands them) reads it as the key before the NUL, so it is
    /// a second `name` to such a server and another key to this reader.
    #[error("key {} at byte {offset} holds U+0000", crate::log_safe::Quoted(key))]
    KeyWithNul { key: String, offset: usize },
    /// Two keys of one object inside a captured `params` (tool arguments, at any depth) that are
    /// equal under case folding: a server decoding `arguments` into a struct with Go's
    /// `encoding/json` reads the last of them, CEL rules and authorizers would judge the first.
    #[error(
        "keys {} and {} in params at byte {offset} read as one to case-insensitive JSON decoders",
        crate::log_safe::Quoted(key),
        crate::log_safe::Quoted(twin)
    )]
    FoldedTwins {
        key: String,
        twin: String,
        offset: usize,
    },
    /// A captured `params` a JSON library cannot decode although it is valid JSON (a number beyond a
    /// double's range, `1e400`): what CEL rules and authorizers would see of it is not what was sent.
    #[error(
        "params at byte {offset} cannot be decoded: {}",
        crate::log_safe::Quoted(reason)
    )]
    ParamsUndecodable { reason: String, offset: usize },
    #[error("nesting deeper than 64 at byte {offset}")]
    TooDeep { offset: usize },
    #[error("trailing data after the JSON value at byte {offset}")]
    TrailingData { offset: usize },
    #[error("empty batch")]
    EmptyBatch,
    #[error("JSON-RPC message is not an object")]
    NotAnObject,
    #[error("jsonrpc is missing or not '2.0'")]
    NotJsonRpc2,
    #[error("method is not a string")]
    MethodNotString,
    #[error("id is not a string, number or null")]
    BadId,
    #[error("message has neither method nor result/error")]
    NeitherMethodNorResult,
    #[error("params.notifications.resourceSubscriptions is not a list of strings")]
    BadSubscriptions,
    /// Classified by the filter before reading: a JSON POST without a body.
    #[error("empty body")]
    EmptyBody,
    /// Classified by the filter before reading: the body is compressed or otherwise encoded.
    #[error(
        "body is encoded ({}); only identity is read",
        crate::log_safe::Quoted(encoding)
    )]
    Encoded { encoding: String },
    /// Classified by the filter before reading: a GET or DELETE that carries a body (its headers do
    /// not end the stream). The body is not read, so this is not the base protocol's stream (GET)
    /// or session end (DELETE), whatever a server behind does with the body.
    #[error("{method} with a body, which is not read")]
    BodyNotRead { method: &'static str },
}

/// Read a whole buffered POST body as MCP (JSON-RPC 2.0).
pub fn read_body(body: &[u8], opts: ReadOptions) -> Result<McpBody<'_>, NotMcp> {
    read_body_with(body, opts, &mut ReadScratch::default())
}

/// The reader's working memory between reads: its stack of open containers and the keys of the
/// open objects. A host that reads many bodies keeps one, so that a read allocates none of it once
/// warm: two allocations and two frees fewer per body, which show in Envoy's per-request counts
/// (docs/design/reading-the-request.md; measured by `make bench`).
pub struct ReadScratch {
    frames: Vec<parser::Frame>,
    keys: Vec<keys::Key>,
}

impl Default for ReadScratch {
    /// Room for the usual body: 8 levels, 16 keys.
    fn default() -> Self {
        ReadScratch {
            frames: Vec::with_capacity(8),
            keys: Vec::with_capacity(16),
        }
    }
}

/// Keys a scratch keeps room for at most: a body with more open keys (an object of colliding keys,
/// collected to be sorted) leaves its memory to the allocator.
const SCRATCH_KEYS: usize = 1024;

/// [`read_body`] with `scratch`'s vectors, given back for the next read.
pub fn read_body_with<'b>(
    body: &'b [u8],
    opts: ReadOptions,
    scratch: &mut ReadScratch,
) -> Result<McpBody<'b>, NotMcp> {
    // JSON text is UTF-8 everywhere (outside strings every byte must be ASCII anyway), so validating
    // the whole body once up front is equivalent to validating string spans, and lets every later
    // slice be a `&str`.
    let text = std::str::from_utf8(body).map_err(|e| NotMcp::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    Parser::new(text, opts, scratch).run()
}

#[cfg(test)]
mod tests;
