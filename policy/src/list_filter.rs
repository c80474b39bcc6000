//! List filtering (SPEC §5): the result of an allowed `tools/list`, `prompts/list` or
//! `resources/list` keeps only the entries the caller may use, in JSON and SSE responses alike.
//!
//! Here: which requests are filtered ([`ListRequests`]), rewriting one JSON-RPC response text
//! ([`rewrite_json`]) and a `text/event-stream` response event by event as it streams
//! ([`SseFilter`]). Whether an entry is kept is the caller's question (`keep`), answered by the
//! evaluator (`Route::may_use`). A rewritten text differs from the original only by the removed
//! entries (their bytes and a separator) and `cacheScope: "public"` made `"private"`; everything
//! else, whitespace included, is copied. Parsing uses serde_json with borrowed raw values, whose
//! positions in the text are the splice points.

use std::ops::Range;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::mcp::McpBody;

/// The lists Toolgate filters, and the call each entry stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

impl ListKind {
    pub fn of_method(method: &str) -> Option<Self> {
        match method {
            "tools/list" => Some(ListKind::Tools),
            "prompts/list" => Some(ListKind::Prompts),
            "resources/list" => Some(ListKind::Resources),
            _ => None,
        }
    }

    /// The key of the result's array.
    pub fn result_key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
        }
    }

    /// The key of an entry that names it in a call.
    pub fn entry_key(self) -> &'static str {
        match self {
            ListKind::Resources => "uri",
            ListKind::Tools | ListKind::Prompts => "name",
        }
    }

    /// The method of a call to an entry.
    pub fn call_method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/call",
            ListKind::Prompts => "prompts/get",
            ListKind::Resources => "resources/read",
        }
    }
}

/// The list requests of a body whose responses are filtered: each one's JSON-RPC id (as
/// serde_json writes it, so that `1` and `1.0` or escaped strings compare as JSON values do) and
/// kind. `resources/templates/list` is not among them: a template names no resource a
/// `resources/read` rule could be matched against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequests(Vec<(String, ListKind)>);

impl ListRequests {
    pub fn of(body: &McpBody<'_>) -> Self {
        let mut found = Vec::new();
        for m in body.messages() {
            let (Some(kind), Some(id)) = (m.method.as_deref().and_then(ListKind::of_method), m.id)
            else {
                continue;
            };
            if let Some(id) = canonical_id(id) {
                found.push((id, kind));
            }
        }
        ListRequests(found)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn kind_of(&self, id: &str) -> Option<ListKind> {
        let id = canonical_id(id)?;
        self.0.iter().find(|(i, _)| *i == id).map(|(_, k)| *k)
    }

    /// The id of the first list request, for an error reply that cannot tell which one failed.
    pub fn first_id(&self) -> &str {
        self.0.first().map_or("null", |(id, _)| id.as_str())
    }
}

fn canonical_id(raw: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(raw).ok()?;
    (!value.is_null()).then(|| value.to_string())
}

/// Why a list response could not be filtered (it is then replaced by an error, never passed on).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("the response is encoded ({0})")]
    Encoded(String),
    #[error("the response's content type {0:?} is neither JSON nor an event stream")]
    ContentType(String),
    #[error("the response is over the limit of {0} bytes")]
    TooLarge(usize),
    #[error("the response is not JSON-RPC: {0}")]
    Syntax(String),
    #[error("the list result is ambiguous: {0}")]
    Ambiguous(String),
}

/// A rewritten text and what was done.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// The new text; None when nothing changed.
    pub text: Option<String>,
    /// List results met (responses to the filtered requests).
    pub lists: usize,
    /// Entries removed, of `entries` seen.
    pub removed: usize,
    pub entries: usize,
}

impl Rewrite {
    fn add(&mut self, other: &Rewrite) {
        self.lists += other.lists;
        self.removed += other.removed;
        self.entries += other.entries;
    }
}

/// Rewrites one JSON text: a JSON-RPC response or a batch of them. A response to one of
/// `requests` with a `result` has its list filtered by `keep(kind, name or uri)`; other responses,
/// errors and messages are copied. Anything that is not JSON, or a list result Toolgate cannot be
/// sure to read as a client does (a repeated key, a key that differs from `tools` only in case, an
/// array that is not one), is [`Unreadable`].
pub fn rewrite_json(
    text: &str,
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
) -> Result<Rewrite, Unreadable> {
    let syntax = |e: serde_json::Error| Unreadable::Syntax(e.to_string());
    // A batch is split into its responses; a single response is read once, as fields.
    let responses: Vec<&str> = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text).map_err(syntax)?.into_iter().map(RawValue::get).collect()
    } else {
        vec![text]
    };
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut done = Rewrite::default();
    for response in responses {
        let fields = Fields::parse(response).map_err(syntax)?;
        let (Some(id), Some(result)) = (fields.unique("id")?, fields.unique("result")?) else {
            continue;
        };
        let Some(kind) = requests.kind_of(id.get()) else {
            continue;
        };
        done.lists += 1;
        let result_fields = Fields::parse(result.get()).map_err(syntax)?;
        if let Some(list) = result_fields.unique(kind.result_key())? {
            let entries: Vec<&RawValue> = serde_json::from_str(list.get()).map_err(|_| {
                Unreadable::Ambiguous(format!("result.{} is not an array", kind.result_key()))
            })?;
            let kept: Vec<bool> = entries
                .iter()
                .map(|e| entry_name(e, kind).is_some_and(|name| keep(kind, &name)))
                .collect();
            done.entries += entries.len();
            let removed = kept.iter().filter(|k| !**k).count();
            if removed > 0 {
                done.removed += removed;
                edits.push((span(text, list), rebuilt_array(list.get(), &entries, &kept)));
            }
        }
        if let Some(scope) = result_fields.unique("cacheScope")? {
            if scope.get() == "\"public\"" {
                edits.push((span(text, scope), "\"private\"".to_string()));
            }
        }
    }
    if !edits.is_empty() {
        edits.sort_by_key(|(r, _)| r.start);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (range, replacement) in edits {
            out.push_str(text.get(at..range.start).unwrap_or_default());
            out.push_str(&replacement);
            at = range.end;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        done.text = Some(out);
    }
    Ok(done)
}

/// The name (or uri) an entry is called by; None (the entry is removed) when it has none, or has
/// it twice or in another case (clients could disagree on which it is).
fn entry_name(entry: &RawValue, kind: ListKind) -> Option<String> {
    let fields = Fields::parse(entry.get()).ok()?;
    let raw = fields.unique(kind.entry_key()).ok()??;
    serde_json::from_str::<String>(raw.get()).ok()
}

/// Where `raw` (borrowed from `text` by serde_json) is in `text`.
fn span(text: &str, raw: &RawValue) -> Range<usize> {
    let start = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    start..start + raw.get().len()
}

/// The array `array` (whose elements are `entries`) with only the `kept` ones, keeping the
/// original's spacing: what comes before the first element, between two, and after the last.
fn rebuilt_array(array: &str, entries: &[&RawValue], kept: &[bool]) -> String {
    let local = |raw: &RawValue| span(array, raw);
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return array.to_string();
    };
    let lead = array.get(1..local(first).start).unwrap_or("");
    let trail = array
        .get(local(last).end..array.len().saturating_sub(1))
        .unwrap_or("");
    let sep = entries.get(1).map_or(",", |second| {
        array
            .get(local(first).end..local(second).start)
            .unwrap_or(",")
    });
    let kept: Vec<&str> = entries
        .iter()
        .zip(kept)
        .filter(|(_, k)| **k)
        .map(|(e, _)| e.get())
        .collect();
    if kept.is_empty() {
        return "[]".to_string();
    }
    format!("[{lead}{}{trail}]", kept.join(sep))
}

/// An object's members in order, values raw. Deserialised with a visitor rather than into a map
/// so that a repeated key is seen (a map keeps one of them silently).
struct Fields<'a>(Vec<(String, &'a RawValue)>);

impl<'a> Fields<'a> {
    fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Fields(members))
            }
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let fields = (&mut de).deserialize_map(V)?;
        de.end()?;
        Ok(fields)
    }

    /// The member `key`, if present once; a repeated key or a variant of it that a case-insensitive
    /// decoder reads as the same (`Tools`: [`crate::mcp::folded_field`]) is ambiguous.
    fn unique(&self, key: &str) -> Result<Option<&'a RawValue>, Unreadable> {
        let lower = key.to_ascii_lowercase();
        let mut found = None;
        for (k, v) in &self.0 {
            let exact = k == key;
            if exact || crate::mcp::folded_field(k.as_bytes(), &[lower.as_str()]).is_some() {
                if found.is_some() || !exact {
                    return Err(Unreadable::Ambiguous(format!(
                        "{k:?} beside or instead of {key:?}"
                    )));
                }
                found = Some(*v);
            }
        }
        Ok(found)
    }
}

/// A `text/event-stream` response filtered event by event as it arrives: complete events go on
/// at once (rewritten when one is a filtered list response), an incomplete one waits for the
/// rest. Event boundaries, field order and line endings are kept; a rewritten event's `data`
/// lines are the rewritten JSON split at its line breaks.
#[derive(Debug, Default)]
pub struct SseFilter {
    /// The start of an event not complete yet.
    pending: Vec<u8>,
    /// What was done so far.
    pub done: Rewrite,
}

impl SseFilter {
    /// Takes the next bytes of the stream (`end`: the last ones); returns what to send on now.
    /// `limit`: the most bytes one event may have.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        end: bool,
        limit: usize,
        requests: &ListRequests,
        keep: &mut dyn FnMut(ListKind, &str) -> bool,
    ) -> Result<Vec<u8>, Unreadable> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.pending.len());
        let mut at = 0;
        loop {
            let rest = &self.pending[at..];
            let len = match event_len(rest) {
                Some(len) => len,
                // The last event without its blank line: still an event to a client.
                None if end && !rest.is_empty() => rest.len(),
                None => break,
            };
            if len > limit {
                return Err(Unreadable::TooLarge(limit));
            }
            out.extend_from_slice(&rewrite_event(&rest[..len], requests, keep, &mut self.done)?);
            at += len;
        }
        self.pending.drain(..at);
        if self.pending.len() > limit {
            return Err(Unreadable::TooLarge(limit));
        }
        Ok(out)
    }
}

/// One complete event, rewritten when it is a filtered list response.
fn rewrite_event(
    event: &[u8],
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
    done: &mut Rewrite,
) -> Result<Vec<u8>, Unreadable> {
    let Ok(text) = std::str::from_utf8(event) else {
        return Err(Unreadable::Syntax("an event is not UTF-8".into()));
    };
    let lines: Vec<(&str, &str)> = split_lines(text);
    let data: Vec<&str> = lines.iter().filter_map(|(l, _)| data_value(l)).collect();
    if data.is_empty() {
        return Ok(event.to_vec());
    }
    let json = data.join("\n");
    // Other messages of the stream (requests and notifications from the server) pass as they are.
    // Data that is not JSON (a comment-like keep-alive) cannot be a response: it passes.
    let trimmed = json.trim_start();
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return Ok(event.to_vec());
    }
    let rewrite = rewrite_json(&json, requests, keep)?;
    done.add(&rewrite);
    let Some(new) = rewrite.text else {
        return Ok(event.to_vec());
    };
    let mut out = String::with_capacity(event.len());
    let mut data_written = false;
    for (line, ending) in &lines {
        if data_value(line).is_some() {
            if !data_written {
                for part in new.split('\n') {
                    out.push_str("data: ");
                    out.push_str(part);
                    out.push_str(if ending.is_empty() { "\n" } else { ending });
                }
                data_written = true;
            }
        } else {
            out.push_str(line);
            out.push_str(ending);
        }
    }
    Ok(out.into_bytes())
}

/// The value of an SSE `data` line (`data: x` → `x`), or None for another line.
fn data_value(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("data")?;
    if rest.is_empty() {
        return Some("");
    }
    let rest = rest.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// The lines of an event with their endings (`\r\n`, `\n` or `\r`; "" for a last line without one).
fn split_lines(text: &str) -> Vec<(&str, &str)> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                lines.push((&text[start..i], &text[i..i + 2]));
                i += 2;
                start = i;
            }
            b'\r' | b'\n' => {
                lines.push((&text[start..i], &text[i..i + 1]));
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        lines.push((&text[start..], ""));
    }
    lines
}

/// The length of the first complete event of `bytes` (up to and including the empty line that ends
/// it), if there is one.
fn event_len(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut line_start = 0;
    while i < bytes.len() {
        let ending = match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
            // A `\r` at the end of what has arrived may be the first half of `\r\n`: wait.
            b'\r' if i + 1 == bytes.len() => return None,
            b'\r' | b'\n' => 1,
            _ => {
                i += 1;
                continue;
            }
        };
        if i == line_start {
            return Some(i + ending);
        }
        i += ending;
        line_start = i;
    }
    None
}

/// The body that replaces a list response Toolgate could not filter: a JSON-RPC error for the
/// list request `id`.
pub fn error_reply(id: &str, why: &Unreadable) -> String {
    let message = format!("Toolgate could not filter the list response: {why}");
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":{}}}}}"#,
        serde_json::Value::String(message)
    )
}

#[cfg(test)]
mod tests;
