//! List filtering (docs/semantics.md §5): the result of an allowed `tools/list`, `prompts/list` or
//! `resources/list` keeps only the entries the caller may use, in JSON and SSE responses alike.
//!
//! Here: which requests are filtered ([`ListRequests`]), rewriting one JSON-RPC response text
//! ([`rewrite_json`]) and a `text/event-stream` response event by event as it streams
//! ([`SseFilter`]). Whether an entry is kept is the caller's question (`keep`), answered by the
//! evaluator (`Route::may_use`). A rewritten text differs from the original only by the removed
//! entries (their bytes and a separator) and `cacheScope: "public"` made `"private"`; everything
//! else, whitespace included, is copied. The text is read in one pass ([`json`]), which notes the
//! splice points on the way.

use std::borrow::Cow;

use crate::mcp::{scan, McpBody};

mod json;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod serde_reference;

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
    json::rewrite(text, requests, keep)
}

/// A `text/event-stream` response filtered event by event as it arrives: complete events go on
/// at once (rewritten when one is a filtered list response), an incomplete one waits for the
/// rest. Event boundaries, field order and line endings are kept; a rewritten event's `data`
/// lines are the rewritten JSON split at its line breaks.
#[derive(Debug, Default)]
pub struct SseFilter {
    /// The start of an event not complete yet.
    pending: Vec<u8>,
    /// Where the search for the end of that event stopped (offset, start of its line): it goes on
    /// from there when more arrives, rather than from the start (a large event comes in many chunks).
    searched: (usize, usize),
    /// The lines of that event found so far: where each ends, and the length of its line break
    /// (so that the event is not searched for line breaks twice).
    lines: Vec<(usize, usize)>,
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
            let rest = self.pending.get(at..).unwrap_or_default();
            let len = match event_len(rest, self.searched, &mut self.lines) {
                Ok(len) => len,
                // The last event without its blank line: still an event to a client.
                Err(_) if end && !rest.is_empty() => rest.len(),
                Err(searched) => {
                    self.searched = searched;
                    break;
                }
            };
            self.searched = (0, 0);
            if len > limit {
                return Err(Unreadable::TooLarge(limit));
            }
            let event = rest.get(..len).unwrap_or_default();
            match rewrite_event(event, &self.lines, requests, keep, &mut self.done)? {
                Some(new) => out.extend_from_slice(&new),
                None => out.extend_from_slice(event),
            }
            self.lines.clear();
            at += len;
        }
        self.pending.drain(..at);
        if self.pending.len() > limit {
            return Err(Unreadable::TooLarge(limit));
        }
        Ok(out)
    }
}

/// One complete event, rewritten when it is a filtered list response (None: it goes on as it is).
/// `found`: its first lines, as [`event_len`] found them.
fn rewrite_event(
    event: &[u8],
    found: &[(usize, usize)],
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
    done: &mut Rewrite,
) -> Result<Option<Vec<u8>>, Unreadable> {
    let Ok(text) = std::str::from_utf8(event) else {
        return Err(Unreadable::Syntax("an event is not UTF-8".into()));
    };
    let mut lines: Vec<(&str, &str)> = Vec::with_capacity(found.len() + 1);
    let mut start = 0;
    for &(end, ending) in found {
        let (Some(line), Some(ending)) = (text.get(start..end), text.get(end..end + ending)) else {
            break;
        };
        lines.push((line, ending));
        start = end + ending.len();
    }
    // The rest (the last event of a stream, without its blank line).
    lines.extend(split_lines(text.get(start..).unwrap_or_default()));
    let mut data = lines.iter().filter_map(|(l, _)| data_value(l));
    // One data line (as servers send JSON) is the JSON itself; more are joined by line breaks.
    let json: Cow<'_, str> = match (data.next(), data.next()) {
        (None, _) => return Ok(None),
        (Some(only), None) => Cow::Borrowed(only),
        (Some(first), Some(second)) => {
            let mut joined = format!("{first}\n{second}");
            for more in data {
                joined.push('\n');
                joined.push_str(more);
            }
            Cow::Owned(joined)
        }
    };
    // Other messages of the stream (requests and notifications from the server) pass as they are.
    // Data that is not JSON (a comment-like keep-alive) cannot be a response: it passes.
    let trimmed = json.trim_start();
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return Ok(None);
    }
    let rewrite = rewrite_json(&json, requests, keep)?;
    done.add(&rewrite);
    let Some(new) = rewrite.text else {
        return Ok(None);
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
    Ok(Some(out.into_bytes()))
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
    let mut start = 0;
    while start < bytes.len() {
        let i = scan::find_line_break(bytes, start);
        let len = match bytes.get(i) {
            Some(b'\r') if bytes.get(i + 1) == Some(&b'\n') => 2,
            Some(_) => 1,
            None => 0,
        };
        lines.push((
            text.get(start..i).unwrap_or_default(),
            text.get(i..i + len).unwrap_or_default(),
        ));
        start = i + len;
    }
    lines
}

/// The length of the first complete event of `bytes` (up to and including the empty line that ends
/// it), if there is one; if not, where the search stopped, to go on from (`from`: where an earlier
/// search of the same bytes stopped, or (0, 0)). The lines found are added to `lines`.
fn event_len(
    bytes: &[u8],
    from: (usize, usize),
    lines: &mut Vec<(usize, usize)>,
) -> Result<usize, (usize, usize)> {
    let (mut i, mut line_start) = from;
    loop {
        i = scan::find_line_break(bytes, i);
        let ending = match bytes.get(i) {
            None => return Err((i, line_start)),
            Some(b'\r') if bytes.get(i + 1) == Some(&b'\n') => 2,
            // A `\r` at the end of what has arrived may be the first half of `\r\n`: wait.
            Some(b'\r') if i + 1 == bytes.len() => return Err((i, line_start)),
            Some(_) => 1,
        };
        lines.push((i, ending));
        if i == line_start {
            return Ok(i + ending);
        }
        i += ending;
        line_start = i;
    }
}

/// `text` with each range of `edits` replaced (ranges do not overlap; any order).
fn splice(text: &str, mut edits: Vec<(std::ops::Range<usize>, String)>) -> String {
    edits.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, replacement) in edits {
        out.push_str(text.get(at..range.start).unwrap_or_default());
        out.push_str(&replacement);
        at = range.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
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
