//! The MCP (JSON-RPC 2.0) body reader (SPEC §4).
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

pub(crate) mod scan;

pub(crate) use scan::folded_field;
use scan::{decode_into, expected_at, invalid, scan_literal, scan_number, scan_string, skip_ws};

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
    /// SPEC §3: what a `subscriptions/listen` stands for besides its list-change parts (base
    /// methods): one `resources/subscribe` of each URI of `resourceSubscriptions`, each judged as
    /// such. None for other methods.
    pub fn listen_subscribes(&self) -> impl Iterator<Item = McpMessage<'_>> + '_ {
        let listen = self.method.as_deref() == Some("subscriptions/listen");
        self.subscriptions.iter().filter(move |_| listen).map(move |uri| McpMessage {
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
    #[error("key {} at byte {offset} reads as '{field}' to case-insensitive JSON decoders", crate::log_safe::Quoted(key))]
    FoldedKey { key: String, field: &'static str, offset: usize },
    /// Two keys of one object inside a captured `params` (tool arguments, at any depth) that are
    /// equal under case folding: a server decoding `arguments` into a struct with Go's
    /// `encoding/json` reads the last of them, CEL rules and authorizers would judge the first.
    #[error("keys {} and {} in params at byte {offset} read as one to case-insensitive JSON decoders", crate::log_safe::Quoted(key), crate::log_safe::Quoted(twin))]
    FoldedTwins { key: String, twin: String, offset: usize },
    /// A captured `params` a JSON library cannot decode although it is valid JSON (a number beyond a
    /// double's range, `1e400`): what CEL rules and authorizers would see of it is not what was sent.
    #[error("params at byte {offset} cannot be decoded: {}", crate::log_safe::Quoted(reason))]
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
    #[error("body is encoded ({}); only identity is read", crate::log_safe::Quoted(encoding))]
    Encoded { encoding: String },
}

/// Read a whole buffered POST body as MCP (JSON-RPC 2.0).
pub fn read_body(body: &[u8], opts: ReadOptions) -> Result<McpBody<'_>, NotMcp> {
    // JSON text is UTF-8 everywhere (outside strings every byte must be ASCII anyway), so validating
    // the whole body once up front is equivalent to validating string spans, and lets every later
    // slice be a `&str`.
    let text = std::str::from_utf8(body).map_err(|e| NotMcp::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    Parser::new(text, opts, true).run()
}

/// [`read_body`] again, on a body it accepted with the same options (the lifecycle reads a held
/// body once per step of its decision): the same result, without checking the captured `params`
/// again, the costliest part of a read with `capture_params` (natively, with an ExternalAuth
/// policy, about a third of the engine's work per request was reading the body three times).
pub fn reread_body(body: &[u8], opts: ReadOptions) -> Result<McpBody<'_>, NotMcp> {
    let text = std::str::from_utf8(body).map_err(|e| NotMcp::InvalidUtf8 { offset: e.valid_up_to() })?;
    Parser::new(text, opts, false).run()
}

// ------------------------------------------------------------------------------------------------
// Parser internals
// ------------------------------------------------------------------------------------------------

/// Objects with more keys than this switch from linear duplicate search to a hash table.
const HASH_THRESHOLD: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Other,
    /// The top-level array: elements must be message objects.
    Batch,
    /// A JSON-RPC message object.
    Message,
    /// The `params` object of a message.
    Params,
    /// `params.notifications` (MCP 2026-07-28 `subscriptions/listen`).
    Notifications,
    /// `params.notifications.resourceSubscriptions`: a list of resource URIs.
    Subscriptions,
    /// `params._meta`.
    Meta,
}

/// Which extracted field the value after the current key belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    None,
    Jsonrpc,
    Id,
    Method,
    Params,
    ResultOrError,
    Name,
    Uri,
    Notifications,
    ResourceSubscriptions,
    Meta,
    ProtocolVersion,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum DupMode {
    /// Compare each new key against the object's keys.
    Linear,
    /// Keys are indexed in the per-depth hash table.
    Hashed,
    /// Too many collisions (adversarial keys): sort and compare when the object closes.
    Deferred,
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    is_obj: bool,
    role: Role,
    /// Field of the value that follows the last key (objects of role Message/Params only).
    field: Field,
    /// Offset of the opening bracket.
    start: usize,
    /// Arrays: whether an element was seen (the empty-batch check). Objects: number of keys.
    count: usize,
    keys_start: usize,
    arena_start: usize,
    mode: DupMode,
    probes: usize,
}

/// A key of an open object: its decoded bytes live in the body (no escapes) or in the arena.
#[derive(Clone, Copy, Debug)]
struct Key {
    start: usize,
    end: usize,
    /// Offset of the key's opening quote in the body.
    offset: usize,
    /// The first (up to) eight decoded bytes, little-endian, zero-padded: with the length, this
    /// decides equality of short keys without touching their bytes, and rejects most others.
    fp: u64,
    /// Word-sized on purpose: a byte-sized flag makes copies of a freshly built `Key` stall on
    /// store forwarding.
    src: KeySrc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
enum KeySrc {
    Body,
    Arena,
}

impl Key {
    #[inline]
    fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }
}

/// `src[start..end]`'s first eight bytes (fewer if shorter) as a zero-padded little-endian u64.
#[inline]
fn prefix8(src: &[u8], start: usize, end: usize) -> u64 {
    let n = end.saturating_sub(start).min(8);
    let mask = if n == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    };
    if let Some(chunk) = src.get(start..start.wrapping_add(8)) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        u64::from_le_bytes(w) & mask
    } else {
        let mut v = 0u64;
        for (i, &c) in src.get(start..start + n).unwrap_or(&[]).iter().enumerate() {
            v |= u64::from(c) << (8 * i);
        }
        v
    }
}

/// Whether two keys (of the same object) are equal, fingerprint first.
#[inline]
fn same_key(body: &[u8], arena: &[u8], a: &Key, b: &Key) -> bool {
    a.fp == b.fp
        && a.len() == b.len()
        && (a.len() <= 8 || key_bytes(body, arena, a) == key_bytes(body, arena, b))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    Obj,
    Arr,
    /// `content` is the span between the quotes; `escaped` whether it contains a backslash.
    Str {
        content: usize,
        close: usize,
        escaped: bool,
    },
    Num,
    True,
    False,
    Null,
}

#[derive(Default)]
struct MsgBuilder<'a> {
    jsonrpc_seen: bool,
    method: Option<Cow<'a, str>>,
    method_seen: bool,
    id: Option<&'a str>,
    name: Option<Cow<'a, str>>,
    uri: Option<Cow<'a, str>>,
    params: Option<&'a str>,
    has_result: bool,
    subscriptions: Vec<Cow<'a, str>>,
    bad_subscriptions: bool,
    protocol_version: Option<Cow<'a, str>>,
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    opts: ReadOptions,
    /// Check captured `params` ([`folded_twins`]); off only for [`reread_body`].
    check_params: bool,
    frames: Vec<Frame>,
    keys: Vec<Key>,
    /// Decoded text of escaped keys of the open objects.
    arena: String,
    /// Decoded text of a key re-read from the body (hashed objects).
    scratch: String,
    /// One reusable open-addressing table per depth (entries: key index - keys_start + 1; 0 = empty).
    tables: Vec<Vec<u64>>,
    cur: MsgBuilder<'a>,
    single: Option<McpMessage<'a>>,
    batch: Vec<McpMessage<'a>>,
    /// First JSON-RPC-level problem; reported only if the JSON itself is valid.
    semantic: Option<NotMcp>,
}

#[cold]
fn dup_error(body: &[u8], arena: &[u8], k: &Key) -> NotMcp {
    let text = String::from_utf8_lossy(key_bytes(body, arena, k));
    // One character more than is shown, so that the message marks the cut.
    let key = match text.char_indices().nth(crate::log_safe::MAX_SHOWN + 1) {
        Some((i, _)) => text.get(..i).unwrap_or("").to_string(),
        None => text.into_owned(),
    };
    NotMcp::DuplicateKey {
        key,
        offset: k.offset,
    }
}

/// Folded 64x64->128 multiply: a fast mixer with good avalanche in the low 32 bits.
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// 32-bit hash of a key's decoded bytes. Not keyed: adversarial collisions are handled by the
/// probe budget in `add_key`, which falls back to sorting.
#[inline]
fn key_hash(body: &[u8], arena: &[u8], k: &Key) -> u32 {
    const K1: u64 = 0x9E37_79B9_7F4A_7C15;
    const K2: u64 = 0xD6E8_FEB8_6659_FD93;
    let mut h = fold_mul(k.fp ^ K2, K1 ^ k.len() as u64);
    if k.len() > 8 {
        let bytes = key_bytes(body, arena, k);
        let mut chunks = bytes.get(8..).unwrap_or(&[]).chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = fold_mul(h ^ u64::from_le_bytes(w), K1);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            if let Some(dst) = w.get_mut(..rest.len()) {
                dst.copy_from_slice(rest);
            }
            h = fold_mul(h ^ u64::from_le_bytes(w), K2);
        }
    }
    h as u32
}

#[inline]
fn key_bytes<'x>(body: &'x [u8], arena: &'x [u8], k: &Key) -> &'x [u8] {
    let src = if k.src == KeySrc::Arena { arena } else { body };
    src.get(k.start..k.end).unwrap_or(&[])
}

/// The keys of a message object the reader extracts (SPEC §4).
const MESSAGE_FIELDS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
/// The keys of `params` the reader extracts.
const PARAMS_FIELDS: [&str; 4] = ["name", "uri", "notifications", "_meta"];
/// The keys of `params.notifications` the reader extracts (folded: compared in lower case).
const NOTIFICATIONS_FIELDS: [&str; 1] = ["resourcesubscriptions"];

/// Whether some object in `json` (valid JSON: the reader has read it; at byte `offset` of the body)
/// has two keys that are equal under case folding without being equal ([`NotMcp::FoldedTwins`]),
/// or holds what serde_json cannot decode ([`NotMcp::ParamsUndecodable`]). Run only on a captured
/// `params`, whose contents reach CEL rules and authorizers. The folding (upper- then lower-casing
/// every character) covers what Go's `encoding/json` (Unicode simple folding) and .NET's
/// `OrdinalIgnoreCase` equate, and a little more (`ß` and `SS`), which only refuses what no client
/// sends.
fn folded_twins(json: &str, offset: usize) -> Result<(), NotMcp> {
    use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::fmt;

    /// A key as serde_json gives it: borrowed from the text when it has no escapes.
    struct Key;
    impl<'de> DeserializeSeed<'de> for Key {
        type Value = Cow<'de, str>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl<'de> Visitor<'de> for Key {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a key")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
    }

    /// The key with every character upper- then lower-cased; borrowed when that changes nothing
    /// (ASCII without capitals: almost every key).
    fn fold(key: &str) -> Cow<'_, str> {
        if key.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
            Cow::Borrowed(key)
        } else {
            Cow::Owned(key.chars().flat_map(char::to_uppercase).flat_map(char::to_lowercase).collect())
        }
    }

    /// Walks every value; the first pair of twins found is left in the cell.
    #[derive(Clone, Copy)]
    struct Check<'c>(&'c RefCell<Option<(String, String)>>);
    impl<'de> DeserializeSeed<'de> for Check<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Check<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            // Folded key -> the key. A hash map (SipHash, random keys): an object may have a hundred
            // thousand keys, and their names are the client's.
            let mut seen: HashMap<Cow<'de, str>, Cow<'de, str>> = HashMap::new();
            while let Some(key) = map.next_key_seed(Key)? {
                let folded = match &key {
                    Cow::Borrowed(k) => fold(k),
                    Cow::Owned(k) => Cow::Owned(fold(k).into_owned()),
                };
                match seen.get(&folded) {
                    Some(first) if *first != key => {
                        *self.0.borrow_mut() = Some((first.to_string(), key.into_owned()));
                        return Err(A::Error::custom("folded twins"));
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(folded, key);
                    }
                }
                map.next_value_seed(self)?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(self)?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let twins = RefCell::new(None);
    let checked = Check(&twins).deserialize(&mut serde_json::Deserializer::from_str(json));
    match (checked, twins.into_inner()) {
        (_, Some((key, twin))) => Err(NotMcp::FoldedTwins { key, twin, offset }),
        (Err(e), None) => {
            let reason = e.to_string();
            let reason = reason.rsplit_once(" at line ").map_or(reason.as_str(), |(r, _)| r).to_string();
            Err(NotMcp::ParamsUndecodable { reason, offset })
        }
        (Ok(()), None) => Ok(()),
    }
}

impl<'a> Parser<'a> {
    fn new(s: &'a str, opts: ReadOptions, check_params: bool) -> Self {
        Parser {
            s,
            b: s.as_bytes(),
            opts,
            check_params,
            frames: Vec::with_capacity(8),
            keys: Vec::with_capacity(16),
            arena: String::new(),
            scratch: String::new(),
            tables: Vec::new(),
            cur: MsgBuilder::default(),
            single: None,
            batch: Vec::new(),
            semantic: None,
        }
    }

    #[inline]
    fn semantic(&mut self, e: NotMcp) {
        if self.semantic.is_none() {
            self.semantic = Some(e);
        }
    }

    fn run(mut self) -> Result<McpBody<'a>, NotMcp> {
        let b = self.b;
        let mut pos = skip_ws(b, 0);
        'value: loop {
            // ---- a value starts at `pos` ----
            let start = pos;
            let mut val = match b.get(pos) {
                Some(b'{') => {
                    self.open(true, pos)?;
                    pos = skip_ws(b, pos + 1);
                    match b.get(pos) {
                        Some(b'}') => {
                            pos += 1;
                            self.close()?;
                            Val::Obj
                        }
                        Some(b'"') => {
                            pos = self.key_and_colon(pos)?;
                            continue 'value;
                        }
                        _ => return Err(expected_at(b, pos, "a string key or '}'")),
                    }
                }
                Some(b'[') => {
                    self.open(false, pos)?;
                    pos = skip_ws(b, pos + 1);
                    if b.get(pos) == Some(&b']') {
                        pos += 1;
                        self.close()?;
                        Val::Arr
                    } else {
                        if let Some(f) = self.frames.last_mut() {
                            f.count = 1;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let (close, escaped) = scan_string(b, pos)?;
                    pos = close + 1;
                    Val::Str {
                        content: start + 1,
                        close,
                        escaped,
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    pos = scan_number(b, pos)?;
                    Val::Num
                }
                Some(b't') => {
                    pos = scan_literal(b, pos, b"true", "'true'")?;
                    Val::True
                }
                Some(b'f') => {
                    pos = scan_literal(b, pos, b"false", "'false'")?;
                    Val::False
                }
                Some(b'n') => {
                    pos = scan_literal(b, pos, b"null", "'null'")?;
                    Val::Null
                }
                _ => return Err(expected_at(b, pos, "a value")),
            };
            let mut vstart = start;
            // ---- a value ended at `pos`; climb while containers close ----
            loop {
                self.complete(val, vstart, pos);
                pos = skip_ws(b, pos);
                let Some(top) = self.frames.last_mut() else {
                    break 'value;
                };
                match (top.is_obj, b.get(pos)) {
                    (true, Some(b',')) => {
                        pos = skip_ws(b, pos + 1);
                        if b.get(pos) != Some(&b'"') {
                            return Err(expected_at(b, pos, "a string key"));
                        }
                        pos = self.key_and_colon(pos)?;
                        continue 'value;
                    }
                    (false, Some(b',')) => {
                        top.count += 1;
                        pos = skip_ws(b, pos + 1);
                        continue 'value;
                    }
                    (true, Some(b'}')) => {
                        pos += 1;
                        vstart = self.close()?;
                        val = Val::Obj;
                    }
                    (false, Some(b']')) => {
                        pos += 1;
                        vstart = self.close()?;
                        val = Val::Arr;
                    }
                    (true, _) => return Err(expected_at(b, pos, "',' or '}'")),
                    (false, _) => return Err(expected_at(b, pos, "',' or ']'")),
                }
            }
        }
        if pos < b.len() {
            return Err(NotMcp::TrailingData { offset: pos });
        }
        if let Some(e) = self.semantic {
            return Err(e);
        }
        match self.single {
            Some(m) => Ok(McpBody::Single(m)),
            None if !self.batch.is_empty() => Ok(McpBody::Batch(self.batch)),
            // Unreachable: every accepted body produced a message or recorded a semantic error.
            None => Err(NotMcp::NotAnObject),
        }
    }

    /// Push a container opened at `pos`.
    #[inline]
    fn open(&mut self, is_obj: bool, pos: usize) -> Result<(), NotMcp> {
        if self.frames.len() >= MAX_DEPTH {
            return Err(NotMcp::TooDeep { offset: pos });
        }
        let role = match self.frames.last() {
            None if is_obj => Role::Message,
            None => Role::Batch,
            Some(p) => match (p.role, p.field, is_obj) {
                (Role::Batch, _, true) => Role::Message,
                (Role::Message, Field::Params, true) => Role::Params,
                (Role::Params, Field::Notifications, true) => Role::Notifications,
                (Role::Notifications, Field::ResourceSubscriptions, false) => Role::Subscriptions,
                (Role::Params, Field::Meta, true) => Role::Meta,
                _ => Role::Other,
            },
        };
        if role == Role::Message {
            self.cur = MsgBuilder::default();
        }
        self.frames.push(Frame {
            is_obj,
            role,
            field: Field::None,
            start: pos,
            count: 0,
            keys_start: self.keys.len(),
            arena_start: self.arena.len(),
            mode: DupMode::Linear,
            probes: 0,
        });
        Ok(())
    }

    /// Pop the top container; returns its start offset.
    fn close(&mut self) -> Result<usize, NotMcp> {
        let Some(f) = self.frames.pop() else {
            return Err(invalid(0, "a container")); // unreachable
        };
        if f.is_obj {
            if f.mode == DupMode::Deferred {
                self.deferred_dup_check(f.keys_start)?;
            }
            self.keys.truncate(f.keys_start);
            self.arena.truncate(f.arena_start);
            if f.role == Role::Message {
                self.finish_message();
            }
        } else if f.role == Role::Batch && f.count == 0 {
            self.semantic(NotMcp::EmptyBatch);
        }
        Ok(f.start)
    }

    /// A value `[start, end)` completed; let its parent container extract what it needs.
    #[inline]
    fn complete(&mut self, val: Val, start: usize, end: usize) {
        // Bulk content (anything inside `arguments`, etc.) needs nothing: one predictable branch.
        match self.frames.last() {
            Some(top) if top.role == Role::Other => {}
            _ => self.complete_slow(val, start, end),
        }
    }

    fn complete_slow(&mut self, val: Val, start: usize, end: usize) {
        let Some(top) = self.frames.last() else {
            // Top level: objects were handled when they closed, arrays are batches.
            if !matches!(val, Val::Obj | Val::Arr) {
                self.semantic(NotMcp::NotAnObject);
            }
            return;
        };
        match top.role {
            Role::Other => {}
            Role::Batch => {
                if val != Val::Obj {
                    self.semantic(NotMcp::NotAnObject);
                }
            }
            Role::Message => match top.field {
                Field::Jsonrpc => {
                    self.cur.jsonrpc_seen = true;
                    let ok = match val {
                        Val::Str {
                            content,
                            close,
                            escaped,
                        } => self.string_value(content, close, escaped) == "2.0",
                        _ => false,
                    };
                    if !ok {
                        self.semantic(NotMcp::NotJsonRpc2);
                    }
                }
                Field::Id => match val {
                    Val::Str { .. } | Val::Num | Val::Null => self.cur.id = self.s.get(start..end),
                    _ => self.semantic(NotMcp::BadId),
                },
                Field::Method => {
                    self.cur.method_seen = true;
                    match val {
                        Val::Str {
                            content,
                            close,
                            escaped,
                        } => {
                            self.cur.method = Some(self.string_value(content, close, escaped));
                        }
                        _ => self.semantic(NotMcp::MethodNotString),
                    }
                }
                Field::Params if self.opts.capture_params => {
                    self.cur.params = self.s.get(start..end);
                    if let Some(Err(e)) = self.cur.params.filter(|_| self.check_params).map(|p| folded_twins(p, start)) {
                        self.semantic(e);
                    }
                }
                Field::ResultOrError => self.cur.has_result = true,
                _ => {}
            },
            Role::Params => match (top.field, val) {
                (
                    Field::Name,
                    Val::Str {
                        content,
                        close,
                        escaped,
                    },
                ) => {
                    self.cur.name = Some(self.string_value(content, close, escaped));
                }
                (
                    Field::Uri,
                    Val::Str {
                        content,
                        close,
                        escaped,
                    },
                ) => {
                    self.cur.uri = Some(self.string_value(content, close, escaped));
                }
                (Field::Notifications, Val::Obj) => {}
                // A `notifications` that is not an object cannot say what it subscribes to.
                (Field::Notifications, _) => self.cur.bad_subscriptions = true,
                _ => {}
            },
            Role::Notifications => match (top.field, val) {
                (Field::ResourceSubscriptions, Val::Arr) => {}
                (Field::ResourceSubscriptions, _) => self.cur.bad_subscriptions = true,
                _ => {}
            },
            Role::Meta => {
                if let (Field::ProtocolVersion, Val::Str { content, close, escaped }) = (top.field, val) {
                    self.cur.protocol_version = Some(self.string_value(content, close, escaped));
                }
            }
            Role::Subscriptions => match val {
                Val::Str { content, close, escaped } => {
                    let uri = self.string_value(content, close, escaped);
                    self.cur.subscriptions.push(uri);
                }
                _ => self.cur.bad_subscriptions = true,
            },
        }
    }

    fn string_value(&self, content: usize, close: usize, escaped: bool) -> Cow<'a, str> {
        let span = self.s.get(content..close).unwrap_or("");
        if escaped {
            let mut out = String::with_capacity(span.len());
            decode_into(span, &mut out);
            Cow::Owned(out)
        } else {
            Cow::Borrowed(span)
        }
    }

    fn finish_message(&mut self) {
        let m = std::mem::take(&mut self.cur);
        if !m.jsonrpc_seen {
            self.semantic(NotMcp::NotJsonRpc2);
        }
        if !m.method_seen && !m.has_result {
            self.semantic(NotMcp::NeitherMethodNorResult);
        }
        if m.bad_subscriptions {
            self.semantic(NotMcp::BadSubscriptions);
        }
        if self.semantic.is_some() {
            return; // the body will be rejected; don't bother building messages
        }
        let msg = McpMessage {
            method: m.method,
            id: m.id,
            name: m.name,
            uri: m.uri,
            subscriptions: m.subscriptions,
            protocol_version: m.protocol_version,
            params: m.params,
        };
        if self.frames.is_empty() {
            self.single = Some(msg);
        } else {
            self.batch.push(msg);
        }
    }

    /// Parse the key whose opening quote is at `pos`, check it for duplicates, note which field it
    /// names, and consume the `:`. Returns the offset of the value.
    fn key_and_colon(&mut self, pos: usize) -> Result<usize, NotMcp> {
        let b = self.b;
        let (close, escaped) = scan_string(b, pos)?;
        let (start, end, src) = if escaped {
            let a0 = self.arena.len();
            decode_into(self.s.get(pos + 1..close).unwrap_or(""), &mut self.arena);
            (a0, self.arena.len(), KeySrc::Arena)
        } else {
            (pos + 1, close, KeySrc::Body)
        };
        let text = if escaped { self.arena.as_bytes() } else { b };
        match self.frames.last_mut() {
            Some(top) if top.role != Role::Other => {
                let kb = text.get(start..end).unwrap_or(&[]);
                let (field, names) = match top.role {
                    Role::Message => (
                        match kb {
                            b"jsonrpc" => Field::Jsonrpc,
                            b"id" => Field::Id,
                            b"method" => Field::Method,
                            b"params" => Field::Params,
                            b"result" | b"error" => Field::ResultOrError,
                            _ => Field::None,
                        },
                        MESSAGE_FIELDS.as_slice(),
                    ),
                    Role::Params => (
                        match kb {
                            b"name" => Field::Name,
                            b"uri" => Field::Uri,
                            b"notifications" => Field::Notifications,
                            b"_meta" => Field::Meta,
                            _ => Field::None,
                        },
                        PARAMS_FIELDS.as_slice(),
                    ),
                    // Keys with a namespace: no decoder folds them to another (they hold `.` and `/`).
                    Role::Meta => (
                        match kb {
                            b"io.modelcontextprotocol/protocolVersion" => Field::ProtocolVersion,
                            _ => Field::None,
                        },
                        [].as_slice(),
                    ),
                    Role::Notifications => (
                        match kb {
                            b"resourceSubscriptions" => Field::ResourceSubscriptions,
                            _ => Field::None,
                        },
                        NOTIFICATIONS_FIELDS.as_slice(),
                    ),
                    _ => (Field::None, [].as_slice()),
                };
                top.field = field;
                if field == Field::None {
                    if let Some(field) = folded_field(kb, names) {
                        return Err(NotMcp::FoldedKey {
                            key: String::from_utf8_lossy(kb).into_owned(),
                            field,
                            offset: pos,
                        });
                    }
                }
            }
            _ => {}
        }
        // Pushed first and checked in place: building a `Key` on the stack and copying it costs a
        // store-forwarding stall per key.
        self.keys.push(Key {
            start,
            end,
            offset: pos,
            fp: prefix8(text, start, end),
            src,
        });
        self.check_new_key()?;
        let p = skip_ws(b, close + 1);
        if b.get(p) != Some(&b':') {
            return Err(expected_at(b, p, "':'"));
        }
        Ok(skip_ws(b, p + 1))
    }

    /// Check the key just pushed (the last of `keys`) against the other keys of the top object.
    ///
    /// Small objects keep their keys on the `keys` stack and compare linearly. From
    /// `HASH_THRESHOLD` keys on, an object keeps only a hash table (per depth, reused) whose entries
    /// are a 32-bit hash and the body offset of the key; a stored key is re-read from the body only
    /// when its hash matches. Past a probe budget (adversarial collisions) the object falls back to
    /// collecting all keys and sorting them when it closes.
    #[inline]
    fn check_new_key(&mut self) -> Result<(), NotMcp> {
        let depth = self.frames.len();
        let Some(frame) = self.frames.last_mut() else {
            return Ok(());
        };
        let body = self.b;
        let arena = self.arena.as_bytes();
        let Some((key, existing)) = self
            .keys
            .get(frame.keys_start..)
            .unwrap_or(&[])
            .split_last()
        else {
            return Ok(());
        };
        let n = frame.count;
        frame.count += 1;
        match frame.mode {
            DupMode::Linear => {
                for k in existing {
                    if same_key(body, arena, k, key) {
                        return Err(dup_error(body, arena, key));
                    }
                }
                if n + 1 < HASH_THRESHOLD {
                    return Ok(());
                }
                // Bodies over 4 GiB cannot use 32-bit offsets: sort at close instead.
                #[cfg(test)]
                let force = tests::DUP_TEST_MODE.with(|c| c.get()) == tests::SORT_AT_SWITCH;
                #[cfg(not(test))]
                let force = false;
                if force || body.len() >= u32::MAX as usize {
                    frame.mode = DupMode::Deferred;
                    return Ok(());
                }
                // Switch to hashing: index the keys seen so far, then forget them.
                frame.mode = DupMode::Hashed;
                if self.tables.len() < depth {
                    self.tables.resize_with(depth, Vec::new);
                }
                let Some(table) = self.tables.get_mut(depth - 1) else {
                    return Ok(());
                };
                table.clear();
                table.resize(4 * HASH_THRESHOLD, 0);
                let mask = table.len() - 1;
                for k in self.keys.get(frame.keys_start..).unwrap_or(&[]) {
                    table_insert(table, mask, table_entry(key_hash(body, arena, k), k.offset));
                }
                self.keys.truncate(frame.keys_start);
                self.arena.truncate(frame.arena_start);
                Ok(())
            }
            DupMode::Hashed => {
                let h = key_hash(body, arena, key);
                let Some(table) = self.tables.get_mut(depth - 1) else {
                    return Ok(());
                };
                let mask = table.len().wrapping_sub(1);
                let mut slot = (h as usize) & mask;
                loop {
                    frame.probes += 1;
                    let e = table.get(slot).copied().unwrap_or(0);
                    if e == 0 {
                        break;
                    }
                    if (e >> 32) as u32 == h {
                        let stored = stored_key_bytes(self.s, entry_offset(e), &mut self.scratch);
                        if stored == key_bytes(body, arena, key) {
                            return Err(dup_error(body, arena, key));
                        }
                    }
                    slot = (slot + 1) & mask;
                }
                if let Some(e) = table.get_mut(slot) {
                    *e = table_entry(h, key.offset);
                }
                if (n + 1) * 2 > table.len() {
                    grow_table(table);
                }
                self.keys.truncate(frame.keys_start);
                self.arena.truncate(frame.arena_start);
                #[cfg(test)]
                let budget = if tests::DUP_TEST_MODE.with(|c| c.get()) == tests::SORT_AFTER_HASHING
                {
                    0
                } else {
                    64 + 8 * (n + 1)
                };
                #[cfg(not(test))]
                let budget = 64 + 8 * (n + 1);
                if frame.probes > budget {
                    // Adversarial collisions: collect every key of the object again and check
                    // them once, by sorting, when it closes.
                    frame.mode = DupMode::Deferred;
                    for &e in table.iter() {
                        if e != 0 {
                            let off = entry_offset(e);
                            let (close, escaped) = scan_string(body, off).unwrap_or((off, false));
                            let k = if escaped {
                                let a0 = self.arena.len();
                                decode_into(
                                    self.s.get(off + 1..close).unwrap_or(""),
                                    &mut self.arena,
                                );
                                let end = self.arena.len();
                                Key {
                                    start: a0,
                                    end,
                                    offset: off,
                                    fp: prefix8(self.arena.as_bytes(), a0, end),
                                    src: KeySrc::Arena,
                                }
                            } else {
                                Key {
                                    start: off + 1,
                                    end: close,
                                    offset: off,
                                    fp: prefix8(body, off + 1, close),
                                    src: KeySrc::Body,
                                }
                            };
                            self.keys.push(k);
                        }
                    }
                }
                Ok(())
            }
            DupMode::Deferred => Ok(()),
        }
    }

    /// Duplicate check for an object whose keys were only collected: sort, then compare neighbours.
    /// Reports the duplicate that comes first in the body.
    fn deferred_dup_check(&mut self, keys_start: usize) -> Result<(), NotMcp> {
        let body = self.b;
        let arena = self.arena.as_bytes();
        let Some(keys) = self.keys.get_mut(keys_start..) else {
            return Ok(());
        };
        keys.sort_unstable_by(|x, y| {
            key_bytes(body, arena, x)
                .cmp(key_bytes(body, arena, y))
                .then(x.offset.cmp(&y.offset))
        });
        let mut first: Option<Key> = None;
        for w in keys.windows(2) {
            if let [x, y] = w {
                let earlier = match first {
                    Some(f) => y.offset < f.offset,
                    None => true,
                };
                if earlier && key_bytes(body, arena, x) == key_bytes(body, arena, y) {
                    first = Some(*y);
                }
            }
        }
        match first {
            Some(k) => Err(dup_error(body, arena, &k)),
            None => Ok(()),
        }
    }
}

/// A hash-table entry: the key's 32-bit hash in the high half, the body offset of its opening
/// quote + 1 in the low half (0 = empty slot). Only used for bodies under 4 GiB.
#[inline]
fn table_entry(h: u32, offset: usize) -> u64 {
    (u64::from(h) << 32) | (offset as u64 + 1)
}

#[inline]
fn entry_offset(e: u64) -> usize {
    (e as u32 as usize).wrapping_sub(1)
}

/// Insert an entry into an open-addressing table (at most half full).
#[inline]
fn table_insert(table: &mut [u64], mask: usize, entry: u64) {
    let mut slot = ((entry >> 32) as usize) & mask;
    while let Some(e) = table.get_mut(slot) {
        if *e == 0 {
            *e = entry;
            return;
        }
        slot = (slot + 1) & mask;
    }
}

/// The decoded bytes of the (already validated) key whose opening quote is at `offset`.
fn stored_key_bytes<'x>(s: &'x str, offset: usize, scratch: &'x mut String) -> &'x [u8] {
    let b = s.as_bytes();
    let (close, escaped) = scan_string(b, offset).unwrap_or((offset, false));
    let raw = s.get(offset + 1..close).unwrap_or("");
    if escaped {
        scratch.clear();
        decode_into(raw, scratch);
        scratch.as_bytes()
    } else {
        raw.as_bytes()
    }
}

/// Grow the table fourfold (fewer rehashes of big objects), re-inserting entries by their stored
/// hash. `vec![0; n]` lets the allocator hand out already-zeroed memory.
fn grow_table(table: &mut Vec<u64>) {
    let old = std::mem::replace(table, vec![0u64; (table.len() * 4).max(64)]);
    let mask = table.len() - 1;
    for e in old {
        if e != 0 {
            table_insert(table, mask, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan::find_string_special;
    use super::*;
    use std::cell::Cell;

    /// Big objects hash their keys (the normal mode).
    pub(super) const NORMAL: u8 = 0;
    /// Big objects sort their keys at close instead of hashing (as for bodies over 4 GiB).
    pub(super) const SORT_AT_SWITCH: u8 = 1;
    /// Big objects exceed the probe budget at their first hashed key, as adversarial collisions
    /// would make them, and fall back to sorting.
    pub(super) const SORT_AFTER_HASHING: u8 = 2;

    thread_local! {
        pub(super) static DUP_TEST_MODE: Cell<u8> = const { Cell::new(NORMAL) };
    }

    fn naive_special(b: &[u8], i: usize) -> usize {
        (i..b.len())
            .find(|&j| matches!(b[j], b'"' | b'\\' | 0..=0x1f))
            .unwrap_or(b.len())
    }

    #[test]
    fn swar_scanner_matches_naive() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let alphabet = [
            b'a',
            b'"',
            b'\\',
            0x00,
            0x1f,
            0x20,
            0x21,
            0x7f,
            0x80,
            0xff,
            0x5b,
            0x5d,
            0x22 ^ 0x80,
        ];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 40) as usize;
            let mut buf = Vec::with_capacity(len);
            let mut y = x;
            for _ in 0..len {
                y ^= y << 13;
                y ^= y >> 7;
                y ^= y << 17;
                // mostly plain bytes so the special one lands anywhere in a word
                let c = if y >> 61 == 0 {
                    alphabet[(y >> 8) as usize % alphabet.len()]
                } else {
                    b'a' + (y >> 16) as u8 % 26
                };
                buf.push(c);
            }
            for i in 0..=len + 1 {
                assert_eq!(
                    find_string_special(&buf, i),
                    naive_special(&buf, i).max(i.min(buf.len())),
                    "{buf:?} from {i}"
                );
            }
        }
    }

    fn big_object(n: usize, dup_at: Option<(usize, usize)>) -> String {
        let mut s = String::from(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"#,
        );
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            let k = match dup_at {
                Some((from, to)) if i == to => from,
                _ => i,
            };
            s.push_str(&format!(r#""k{k}":{{"a":1,"b":[{{"a":2}}]}}"#));
        }
        s.push_str("}}}");
        s
    }

    fn read_in_mode(mode: u8, body: &str) -> Result<(), NotMcp> {
        DUP_TEST_MODE.with(|c| c.set(mode));
        let r = read_body(body.as_bytes(), ReadOptions::default()).map(|_| ());
        DUP_TEST_MODE.with(|c| c.set(NORMAL));
        r
    }

    /// Offset of the `nth` (0-based) occurrence of `"name":` in `body`.
    fn key_offset(body: &str, name: &str, nth: usize) -> usize {
        let pat = format!("\"{name}\":");
        body.match_indices(&pat).nth(nth).map(|(i, _)| i).unwrap()
    }

    /// `"k<digits>"` spelled with its first digit escaped as `\u003N`.
    fn escaped_key(i: usize) -> String {
        let d = i.to_string();
        format!("\"k\\u003{}{}\":", &d[..1], &d[1..])
    }

    #[test]
    fn every_duplicate_strategy_finds_the_first_duplicate() {
        for mode in [NORMAL, SORT_AT_SWITCH, SORT_AFTER_HASHING] {
            let run = |body: &str| read_in_mode(mode, body);
            assert_eq!(run(&big_object(500, None)), Ok(()), "mode {mode}");
            // Escaped spellings (decoded into the arena) among the keys, no duplicate.
            let escaped = big_object(500, None)
                .replacen(r#""k5":"#, &escaped_key(5), 1)
                .replacen(r#""k450":"#, &escaped_key(450), 1);
            assert_eq!(run(&escaped), Ok(()), "mode {mode}");
            // A duplicate found by each phase: linear (both < 16), at the switch (17th key),
            // while hashing / after the fallback (both late), and against an escaped spelling.
            for (from, to) in [(3, 10), (3, 16), (3, 400), (200, 400), (5, 17), (5, 450)] {
                let body = big_object(500, Some((from, to)));
                let k = format!("k{from}");
                let want = NotMcp::DuplicateKey {
                    key: k.clone(),
                    offset: key_offset(&body, &k, 1),
                };
                assert_eq!(
                    run(&body),
                    Err(want.clone()),
                    "mode {mode} dup {from}->{to}"
                );
                // The first occurrence escaped.
                let body = body.replacen(&format!("\"{k}\":"), &escaped_key(from), 1);
                let want = NotMcp::DuplicateKey {
                    key: k.clone(),
                    offset: key_offset(&body, &k, 0),
                };
                assert_eq!(
                    run(&body),
                    Err(want),
                    "mode {mode} escaped first {from}->{to}"
                );
                // The second occurrence escaped.
                let body = big_object(500, Some((from, to)));
                let second = key_offset(&body, &k, 1);
                let body = format!(
                    "{}{}{}",
                    &body[..second],
                    escaped_key(from),
                    &body[second + k.len() + 3..]
                );
                let want = NotMcp::DuplicateKey {
                    key: k.clone(),
                    offset: second,
                };
                assert_eq!(
                    run(&body),
                    Err(want),
                    "mode {mode} escaped second {from}->{to}"
                );
            }
            // Two duplicates: the one that comes first in the body is reported.
            let body = big_object(300, Some((10, 200))).replacen(r#""k100":"#, r#""k50":"#, 1);
            assert_eq!(
                run(&body),
                Err(NotMcp::DuplicateKey {
                    key: "k50".into(),
                    offset: key_offset(&body, "k50", 1)
                }),
                "mode {mode}"
            );
        }
    }

    #[test]
    fn key_stack_is_restored_after_nested_objects() {
        // Inner objects reuse the same key names and the same per-depth hash tables.
        let body = big_object(200, None);
        assert!(read_body(body.as_bytes(), ReadOptions::default()).is_ok());
        let escaped = big_object(40, None)
            .replacen(r#""k39":"#, r#""k\u0033\u0039":"#, 1)
            .replacen(r#""k38":"#, r#""k\u0033\u0039":"#, 1);
        assert!(
            matches!(read_body(escaped.as_bytes(), ReadOptions::default()), Err(NotMcp::DuplicateKey { ref key, .. }) if key == "k39")
        );
    }

    #[test]
    fn long_duplicate_keys_are_shortened_in_the_message() {
        let k = "x".repeat(200);
        let body = format!(r#"{{"{k}":1,"{k}":2}}"#);
        let e = read_body(body.as_bytes(), ReadOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.len() < 100, "{msg}");
        assert!(
            msg.starts_with("duplicate key 'xxxx") && msg.ends_with("at byte 206"),
            "{msg}"
        );
    }

    #[test]
    fn a_body_read_again_reads_the_same_without_the_params_check() {
        let capture = ReadOptions { capture_params: true };
        let ok = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1,{"y":"z"}]}}},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#;
        assert_eq!(reread_body(ok.as_bytes(), capture), read_body(ok.as_bytes(), capture));
        // The check is what reread_body skips (the lifecycle only rereads a body read_body accepted).
        let twins = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":1,"K":2}}}"#;
        assert!(matches!(read_body(twins.as_bytes(), capture), Err(NotMcp::FoldedTwins { .. })));
        assert!(reread_body(twins.as_bytes(), capture).is_ok());
        // Everything else is checked as before.
        assert_eq!(reread_body(b"{\"id\":1}", capture), read_body(b"{\"id\":1}", capture));
    }

    #[test]
    fn captured_params_with_keys_that_fold_together_are_refused() {
        let body = |arguments: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get-weather","arguments":{arguments}}}}}"#)
        };
        let capture = ReadOptions { capture_params: true };
        for (arguments, key, twin) in [
            (r#"{"city":"Paris","City":"Berlin"}"#, "city", "City"),
            (r#"{"geo":{"lat":1,"LAT":2}}"#, "lat", "LAT"),
            // The Kelvin sign, raw and escaped; the long s.
            ("{\"list\":[{\"k\":1,\"\u{212a}\":2}]}", "k", "\u{212a}"),
            (r#"{"list":[{"k":1,"\u212a":2}]}"#, "k", "\u{212a}"),
            ("{\"is\":1,\"i\u{17f}\":2}", "is", "i\u{17f}"),
            // An escaped key is compared as decoded.
            (r#"{"\u0063ity":"Paris","CITY":"Berlin"}"#, "city", "CITY"),
        ] {
            let b = body(arguments);
            match read_body(b.as_bytes(), capture) {
                Err(NotMcp::FoldedTwins { key: k, twin: t, .. }) => assert_eq!((k.as_str(), t.as_str()), (key, twin), "{arguments}"),
                other => panic!("{arguments}: {other:?}"),
            }
            // Without capture, arguments reach no decision and are not read.
            assert!(read_body(b.as_bytes(), ReadOptions::default()).is_ok(), "{arguments}");
        }
        // Distinct keys, and the same key in different objects, are fine.
        let ok = body(r#"{"city":"Paris","cities":["a"],"nested":{"city":"Lyon"},"list":[{"a":1},{"A":2}]}"#);
        assert!(read_body(ok.as_bytes(), capture).is_ok());
        // What serde_json cannot decode is refused rather than left unchecked after it.
        let big = body(r#"{"n":1e400,"city":"Paris","City":"Berlin"}"#);
        assert!(matches!(read_body(big.as_bytes(), capture), Err(NotMcp::ParamsUndecodable { .. })));
    }
}
