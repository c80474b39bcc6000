//! The reader's parser: one iterative pass over the body (an explicit stack of frames), the role of
//! each object (message, params, `_meta`, notifications) and the fields it extracts from it.

use std::borrow::Cow;

use super::keys::{
    dup_error, entry_offset, grow_table, key_bytes, key_hash, prefix8, same_key, stored_key_bytes,
    table_entry, table_insert, DupMode, Key, KeySrc, HASH_THRESHOLD,
};
use super::scan::{
    decode_into, expected_at, invalid, scan_literal, scan_number, scan_string, skip_ws,
};
use super::twins::folded_twins;
use super::{
    folded_field, McpBody, McpMessage, NotMcp, ReadOptions, ReadScratch, MAX_DEPTH, SCRATCH_KEYS,
};

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

#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    is_obj: bool,
    role: Role,
    /// Field of the value that follows the last key (objects of role Message/Params only).
    field: Field,
    /// Offset of the opening bracket.
    start: usize,
    /// Arrays: whether an element was seen (the empty-batch check). Objects: number of keys.
    pub(super) count: usize,
    pub(super) keys_start: usize,
    pub(super) arena_start: usize,
    pub(super) mode: DupMode,
    pub(super) probes: usize,
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

pub(super) struct Parser<'a, 's> {
    pub(super) s: &'a str,
    pub(super) b: &'a [u8],
    opts: ReadOptions,
    pub(super) frames: Vec<Frame>,
    pub(super) keys: Vec<Key>,
    /// Where `frames` and `keys` go back to (emptied) when the parser is dropped.
    memory: &'s mut ReadScratch,
    /// Decoded text of escaped keys of the open objects.
    pub(super) arena: String,
    /// Decoded text of a key re-read from the body (hashed objects).
    pub(super) scratch: String,
    /// One reusable open-addressing table per depth (entries: key index - keys_start + 1; 0 = empty).
    pub(super) tables: Vec<Vec<u64>>,
    cur: MsgBuilder<'a>,
    single: Option<McpMessage<'a>>,
    batch: Vec<McpMessage<'a>>,
    /// First JSON-RPC-level problem; reported only if the JSON itself is valid.
    semantic: Option<NotMcp>,
}

/// The keys of a message object the reader extracts (docs/semantics.md §4).
const MESSAGE_FIELDS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
/// The keys of `params` the reader extracts.
const PARAMS_FIELDS: [&str; 4] = ["name", "uri", "notifications", "_meta"];
/// The keys of `params.notifications` the reader extracts (folded: compared in lower case).
const NOTIFICATIONS_FIELDS: [&str; 1] = ["resourcesubscriptions"];

impl Drop for Parser<'_, '_> {
    /// Gives the vectors back for the next read; a key vector grown past [`SCRATCH_KEYS`] is left to
    /// the allocator.
    fn drop(&mut self) {
        let (mut frames, mut keys) = (
            std::mem::take(&mut self.frames),
            std::mem::take(&mut self.keys),
        );
        frames.clear();
        keys.clear();
        self.memory.frames = frames;
        if keys.capacity() <= SCRATCH_KEYS {
            self.memory.keys = keys;
        }
    }
}

impl<'a, 's> Parser<'a, 's> {
    /// Takes `memory`'s vectors, given back when the parser is dropped.
    pub(super) fn new(s: &'a str, opts: ReadOptions, memory: &'s mut ReadScratch) -> Self {
        Parser {
            s,
            b: s.as_bytes(),
            opts,
            frames: std::mem::take(&mut memory.frames),
            keys: std::mem::take(&mut memory.keys),
            memory,
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

    /// Reads the whole body. One function on purpose (it is long): the parser's loop over values and
    /// closing containers, whose `'value` label every branch continues; split, the hot loop would
    /// return through calls and state for every value of the body.
    pub(super) fn run(mut self) -> Result<McpBody<'a>, NotMcp> {
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
        if let Some(e) = self.semantic.take() {
            return Err(e);
        }
        match self.single.take() {
            Some(m) => Ok(McpBody::Single(m)),
            None if !self.batch.is_empty() => Ok(McpBody::Batch(std::mem::take(&mut self.batch))),
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

    /// What a completed value means in its container, by the container's role and the field: one flat
    /// match (long, but each arm is a line or two of the MCP shape it reads).
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
                    if let Some(Err(e)) = self.cur.params.map(|p| folded_twins(p, start)) {
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
                if let (
                    Field::ProtocolVersion,
                    Val::Str {
                        content,
                        close,
                        escaped,
                    },
                ) = (top.field, val)
                {
                    self.cur.protocol_version = Some(self.string_value(content, close, escaped));
                }
            }
            Role::Subscriptions => match val {
                Val::Str {
                    content,
                    close,
                    escaped,
                } => {
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
        // A raw NUL is a control character, refused by the scan: only an escape can put one here.
        if escaped && text.get(start..end).is_some_and(|k| k.contains(&0)) {
            // As much as the message shows, and one character more to mark the cut.
            let key = String::from_utf8_lossy(text.get(start..end).unwrap_or(&[]))
                .chars()
                .take(crate::log_safe::MAX_SHOWN + 1)
                .collect();
            return Err(NotMcp::KeyWithNul { key, offset: pos });
        }
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
}

/// The duplicate-key check of the open objects (keys.rs holds the keys, their hashes and tables).
impl Parser<'_, '_> {
    /// Check the key just pushed (the last of `keys`) against the other keys of the top object.
    ///
    /// Small objects keep their keys on the `keys` stack and compare linearly. From
    /// `HASH_THRESHOLD` keys on, an object keeps only a hash table (per depth, reused) whose entries
    /// are a 32-bit hash and the body offset of the key; a stored key is re-read from the body only
    /// when its hash matches. Past a probe budget (adversarial collisions) the object falls back to
    /// collecting all keys and sorting them when it closes.
    ///
    /// Long on purpose: one match over the three modes, run for every key of the body; each arm
    /// works on borrows of the parser's fields (the frame, the keys, the tables, the arena) that
    /// methods of their own could not hold together.
    #[inline]
    pub(super) fn check_new_key(&mut self) -> Result<(), NotMcp> {
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
                let force =
                    super::tests::DUP_TEST_MODE.with(|c| c.get()) == super::tests::SORT_AT_SWITCH;
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
                let budget = if super::tests::DUP_TEST_MODE.with(|c| c.get())
                    == super::tests::SORT_AFTER_HASHING
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
    pub(super) fn deferred_dup_check(&mut self, keys_start: usize) -> Result<(), NotMcp> {
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
