//! One JSON text (a JSON-RPC response or a batch of them) read in a single pass over its bytes
//! ([`crate::mcp::scan`]'s primitives): the whole text is checked as serde_json checks a raw value,
//! and on the way the splice points are noted (each response's `id` and `result`, the result's
//! lists and `cacheScope`, every list entry's span and its `name` or `uri`). Then each response is
//! judged, in order, exactly as it was when serde_json read it level by level (members as raw
//! values, a repeated or case-folded key ambiguous, keys and names decoded as `String`s).
//!
//! Hand-written because serde_json's passes cost too much: with a raw-value parse per level and per
//! entry, filtering a `tools/list` answer cost several times this single pass, natively and in
//! Envoy's Wasm VM (docs/design/list-filtering.md); this pass is measured by
//! policy/benches/engine.rs (`list_filter`, `-- count list_json`).
//!
//! Error precedence, as before: the text must be JSON (any syntax error anywhere is
//! [`Unreadable::Syntax`], before anything else); then responses are judged in order and the first
//! problem wins. A response's `id` and `result` come in either order, so what a result holds is
//! noted for all three list kinds, and judged once the response is complete.

use std::borrow::Cow;
use std::ops::Range;

use super::{ListKind, ListRequests, Rewrite, Unreadable};
use crate::mcp::scan::{
    colon, decode_strict, expected_at, folded_field, scan_raw_string, skip_value, skip_ws,
};
use crate::mcp::NotMcp;

/// The keys of a response that are judged.
const RESPONSE_KEYS: [&str; 2] = ["id", "result"];
/// The keys of a result that are judged: the three lists (in [`list_index`] order) and `cacheScope`
/// (lower-cased, as [`folded_field`] compares).
const RESULT_KEYS: [&str; 4] = ["tools", "prompts", "resources", "cachescope"];
const CACHE_SCOPE: usize = 3;

fn list_index(kind: ListKind) -> usize {
    match kind {
        ListKind::Tools => 0,
        ListKind::Prompts => 1,
        ListKind::Resources => 2,
    }
}

/// The kind whose entries the list under `RESULT_KEYS[index]` names by which key.
fn entry_key(index: usize) -> &'static str {
    if index == 2 {
        "uri"
    } else {
        "name"
    }
}

/// One judged key of an object, as serde_json's reading of the object as a list of members saw it:
/// the value of its one exact occurrence, or the first key that makes it ambiguous (a repeat, or a
/// case-folded variant).
#[derive(Debug, Default)]
struct Slot {
    value: Option<Range<usize>>,
    ambiguous: Option<String>,
}

impl Slot {
    /// Whether this member is the first exact one (whose value is worth a closer look).
    fn is_first(&self, exact: bool) -> bool {
        exact && self.value.is_none() && self.ambiguous.is_none()
    }

    fn add(&mut self, key: &str, exact: bool, value: Range<usize>) {
        if self.ambiguous.is_some() {
            return;
        }
        if !exact || self.value.is_some() {
            self.ambiguous = Some(key.to_string());
        } else {
            self.value = Some(value);
        }
    }

    fn clear(&mut self) {
        self.value = None;
        self.ambiguous = None;
    }

    fn unique(&self, key: &str) -> Result<Option<Range<usize>>, Unreadable> {
        match &self.ambiguous {
            Some(k) => Err(Unreadable::Ambiguous(format!(
                "{k:?} beside or instead of {key:?}"
            ))),
            None => Ok(self.value.clone()),
        }
    }
}

/// One list of a result, when its key's first exact value is an array: the array's span and its
/// entries (a range of [`Reader::entries`]).
#[derive(Debug, Default)]
struct List {
    array: Option<Range<usize>>,
    entries: Range<usize>,
}

/// What a response holds, noted while it is read.
#[derive(Debug, Default)]
struct Response {
    /// Not an object, or a key serde_json cannot decode into a `String`: [`Unreadable::Syntax`].
    bad: Option<&'static str>,
    keys: [Slot; 2],
    /// Of the first exact `result`: not an object, or a key that cannot be decoded.
    result_bad: Option<&'static str>,
    result: [Slot; 4],
    lists: [List; 3],
}

impl Response {
    fn clear(&mut self) {
        self.bad = None;
        self.keys.iter_mut().for_each(Slot::clear);
        self.result_bad = None;
        self.result.iter_mut().for_each(Slot::clear);
        for list in &mut self.lists {
            list.array = None;
            list.entries = 0..0;
        }
    }
}

/// A list entry: its span, and the name (or uri) it is called by, if it has one clearly.
#[derive(Debug)]
struct Entry<'t> {
    span: Range<usize>,
    name: Option<Cow<'t, str>>,
}

struct Reader<'t, 'k> {
    s: &'t str,
    b: &'t [u8],
    requests: &'k ListRequests,
    keep: &'k mut dyn FnMut(ListKind, &str) -> bool,
    /// `skip_value`'s stack of open containers.
    stack: Vec<u8>,
    /// A decoded escaped key.
    scratch: String,
    response: Response,
    entries: Vec<Entry<'t>>,
    /// The first problem of a response (reported only if the whole text is JSON).
    failed: Option<Unreadable>,
    edits: Vec<(Range<usize>, String)>,
    done: Rewrite,
}

/// See [`super::rewrite_json`].
pub(super) fn rewrite(
    text: &str,
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
) -> Result<Rewrite, Unreadable> {
    let mut r = Reader {
        s: text,
        b: text.as_bytes(),
        requests,
        keep,
        stack: Vec::new(),
        scratch: String::new(),
        response: Response::default(),
        entries: Vec::new(),
        failed: None,
        edits: Vec::new(),
        done: Rewrite::default(),
    };
    r.text().map_err(|e| Unreadable::Syntax(e.to_string()))?;
    if let Some(e) = r.failed {
        return Err(e);
    }
    let mut done = r.done;
    if !r.edits.is_empty() {
        done.text = Some(super::splice(text, r.edits));
    }
    Ok(done)
}

/// A judged key: which of the fields it is (index, exact), the key as decoded when it is a folded
/// variant (for the message), whether it cannot be decoded, and the offset of its value.
struct Judged {
    which: Option<(usize, bool)>,
    shown: Option<String>,
    bad: bool,
    value: usize,
}

/// What a key is: its decoded text (None when serde_json could not decode it), and where it ends.
struct Key<'a> {
    text: Option<&'a str>,
    end: usize,
}

impl<'t, 'k> Reader<'t, 'k> {
    /// The whole text: a response or a batch of them, and nothing after it but whitespace.
    fn text(&mut self) -> Result<(), NotMcp> {
        let b = self.b;
        let mut i = skip_ws(b, 0);
        if b.get(i) == Some(&b'[') {
            i = skip_ws(b, i + 1);
            if b.get(i) == Some(&b']') {
                i += 1;
            } else {
                loop {
                    i = skip_ws(b, self.response(i)?);
                    match b.get(i) {
                        Some(b',') => i = skip_ws(b, i + 1),
                        Some(b']') => {
                            i += 1;
                            break;
                        }
                        _ => return Err(expected_at(b, i, "',' or ']'")),
                    }
                }
            }
        } else {
            i = self.response(i)?;
        }
        let i = skip_ws(b, i);
        if i < b.len() {
            return Err(NotMcp::TrailingData { offset: i });
        }
        Ok(())
    }

    /// The key whose opening quote is at `i` (checked: the caller saw the quote), decoded.
    fn key(&mut self, i: usize) -> Result<Key<'_>, NotMcp> {
        let (close, escaped) = scan_raw_string(self.b, i)?;
        let raw = self.s.get(i + 1..close).unwrap_or_default();
        let text = if escaped {
            self.scratch.clear();
            decode_strict(raw, &mut self.scratch).then_some(self.scratch.as_str())
        } else {
            Some(raw)
        };
        Ok(Key {
            text,
            end: close + 1,
        })
    }

    /// The members of the object whose `{` is at `i`: `member(self, offset of the key)` reads each
    /// member and returns the offset after its value. Returns the offset after the `}`.
    fn object(
        &mut self,
        i: usize,
        mut member: impl FnMut(&mut Self, usize) -> Result<usize, NotMcp>,
    ) -> Result<usize, NotMcp> {
        let b = self.b;
        let mut i = skip_ws(b, i + 1);
        if b.get(i) == Some(&b'}') {
            return Ok(i + 1);
        }
        loop {
            if b.get(i) != Some(&b'"') {
                return Err(expected_at(b, i, "a key"));
            }
            i = skip_ws(b, member(self, i)?);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => return Ok(i + 1),
                _ => return Err(expected_at(b, i, "',' or '}'")),
            }
        }
    }

    /// A key at `i` (its quote) and its colon, judged against `fields` (lower case, as
    /// [`folded_field`] compares) spelled `exact_fields`. Always inlined: it runs for every key of
    /// a response, its result and each list entry (hundreds for a 100-tool list), and the call
    /// showed in the pass's count (policy/benches/engine.rs `-- count list_json`).
    #[inline(always)]
    fn judged_key(
        &mut self,
        i: usize,
        fields: &[&str],
        exact_fields: &[&str],
    ) -> Result<Judged, NotMcp> {
        let b = self.b;
        let key = self.key(i)?;
        let end = key.end;
        let (which, shown, bad) = match key.text {
            None => (None, None, true),
            Some(k) => match exact_fields.iter().position(|f| *f == k) {
                Some(at) => (Some((at, true)), None, false),
                None if may_fold(k, fields) => match folded_field(k.as_bytes(), fields) {
                    Some(f) => (
                        fields.iter().position(|x| *x == f).map(|at| (at, false)),
                        Some(k.to_string()),
                        false,
                    ),
                    None => (None, None, false),
                },
                None => (None, None, false),
            },
        };
        let value = skip_ws(b, colon(b, end)?);
        Ok(Judged {
            which,
            shown,
            bad,
            value,
        })
    }

    /// A response (a batch's element, or the whole text) whose value starts at `i`; judged when
    /// complete unless an earlier one failed. Returns the offset after it.
    fn response(&mut self, i: usize) -> Result<usize, NotMcp> {
        self.response.clear();
        self.entries.clear();
        let end = if self.b.get(i) == Some(&b'{') {
            self.object(i, |r, at| {
                let Judged {
                    which,
                    shown,
                    bad,
                    value,
                } = r.judged_key(at, &RESPONSE_KEYS, &RESPONSE_KEYS)?;
                if bad {
                    r.response.bad = Some("a key of a response cannot be decoded");
                }
                let Some((index, exact)) = which else {
                    return skip_value(r.b, value, &mut r.stack);
                };
                let end = if index == 1 && r.response.keys[1].is_first(exact) {
                    r.result(value)?
                } else {
                    skip_value(r.b, value, &mut r.stack)?
                };
                let key = shown.as_deref().unwrap_or(RESPONSE_KEYS[index]);
                r.response.keys[index].add(key, exact, value..end);
                Ok(end)
            })?
        } else {
            self.response.bad = Some("a response is not an object");
            skip_value(self.b, i, &mut self.stack)?
        };
        if self.failed.is_none() {
            if let Err(e) = self.judge() {
                self.failed = Some(e);
            }
        }
        Ok(end)
    }

    /// The (first exact) `result` of a response, at `i`.
    fn result(&mut self, i: usize) -> Result<usize, NotMcp> {
        if self.b.get(i) != Some(&b'{') {
            self.response.result_bad = Some("the result is not an object");
            return skip_value(self.b, i, &mut self.stack);
        }
        self.object(i, |r, at| {
            let Judged {
                which,
                shown,
                bad,
                value,
            } = r.judged_key(at, &RESULT_KEYS, &EXACT_RESULT_KEYS)?;
            if bad {
                r.response.result_bad = Some("a key of the result cannot be decoded");
            }
            let Some((index, exact)) = which else {
                return skip_value(r.b, value, &mut r.stack);
            };
            let end = if index < CACHE_SCOPE
                && r.response.result[index].is_first(exact)
                && r.b.get(value) == Some(&b'[')
            {
                r.list(index, value)?
            } else {
                skip_value(r.b, value, &mut r.stack)?
            };
            let key = shown.as_deref().unwrap_or(EXACT_RESULT_KEYS[index]);
            r.response.result[index].add(key, exact, value..end);
            Ok(end)
        })
    }

    /// The array at `i` (its `[`) of the list `RESULT_KEYS[index]`: its entries noted.
    fn list(&mut self, index: usize, i: usize) -> Result<usize, NotMcp> {
        let b = self.b;
        let first = self.entries.len();
        let name_key = entry_key(index);
        let mut at = skip_ws(b, i + 1);
        let end = if b.get(at) == Some(&b']') {
            at + 1
        } else {
            loop {
                let end = self.entry(at, name_key)?;
                at = skip_ws(b, end);
                match b.get(at) {
                    Some(b',') => at = skip_ws(b, at + 1),
                    Some(b']') => break at + 1,
                    _ => return Err(expected_at(b, at, "',' or ']'")),
                }
            }
        };
        if let Some(list) = self.response.lists.get_mut(index) {
            list.array = Some(i..end);
            list.entries = first..self.entries.len();
        }
        Ok(end)
    }

    /// The list entry at `i`, noted with its name (`name_key`'s string value) when it has one
    /// clearly: an object whose keys all decode, with `name_key` once and no variant of it, its
    /// value a string that decodes.
    fn entry(&mut self, i: usize, name_key: &'static str) -> Result<usize, NotMcp> {
        let mut name: Option<Cow<'t, str>> = None;
        let mut slot = Slot::default();
        let mut clear = true;
        let end = if self.b.get(i) == Some(&b'{') {
            self.object(i, |r, at| {
                let Judged {
                    which, bad, value, ..
                } = r.judged_key(at, &[name_key], &[name_key])?;
                clear &= !bad;
                let Some((_, exact)) = which else {
                    return skip_value(r.b, value, &mut r.stack);
                };
                let end = if slot.is_first(exact) && r.b.get(value) == Some(&b'"') {
                    let (close, escaped) = scan_raw_string(r.b, value)?;
                    let raw = r.s.get(value + 1..close).unwrap_or_default();
                    name = if escaped {
                        let mut decoded = String::new();
                        decode_strict(raw, &mut decoded).then_some(Cow::Owned(decoded))
                    } else {
                        Some(Cow::Borrowed(raw))
                    };
                    close + 1
                } else {
                    skip_value(r.b, value, &mut r.stack)?
                };
                // The name is only read from the first exact key (a later one makes it ambiguous).
                slot.add(name_key, exact, value..end);
                Ok(end)
            })?
        } else {
            clear = false;
            skip_value(self.b, i, &mut self.stack)?
        };
        let name = if clear && slot.ambiguous.is_none() && slot.value.is_some() {
            name
        } else {
            None
        };
        self.entries.push(Entry { span: i..end, name });
        Ok(end)
    }

    /// Judge the response just read (see the module's comment for the order).
    fn judge(&mut self) -> Result<(), Unreadable> {
        let r = &self.response;
        if let Some(why) = r.bad {
            return Err(Unreadable::Syntax(why.into()));
        }
        let id = r.keys[0].unique("id")?;
        let result = r.keys[1].unique("result")?;
        let (Some(id), Some(_)) = (id, result) else {
            return Ok(());
        };
        let Some(kind) = self.requests.kind_of(self.s.get(id).unwrap_or_default()) else {
            return Ok(());
        };
        self.done.lists += 1;
        if let Some(why) = r.result_bad {
            return Err(Unreadable::Syntax(why.into()));
        }
        let index = list_index(kind);
        let list = &r.lists[index];
        if r.result[index].unique(kind.result_key())?.is_some() {
            let Some(array) = list.array.clone() else {
                return Err(Unreadable::Ambiguous(format!(
                    "result.{} is not an array",
                    kind.result_key()
                )));
            };
            let entries = self.entries.get(list.entries.clone()).unwrap_or_default();
            let mut kept = Vec::with_capacity(entries.len());
            for entry in entries {
                kept.push(
                    entry
                        .name
                        .as_deref()
                        .is_some_and(|name| (self.keep)(kind, name)),
                );
            }
            let removed = kept.iter().filter(|k| !**k).count();
            self.done.entries += entries.len();
            if removed > 0 {
                self.done.removed += removed;
                let rebuilt = rebuilt_array(self.s, array.clone(), entries, &kept);
                self.edits.push((array, rebuilt));
            }
        }
        if let Some(scope) = r.result[CACHE_SCOPE].unique("cacheScope")? {
            if self.s.get(scope.clone()) == Some("\"public\"") {
                self.edits.push((scope, "\"private\"".to_string()));
            }
        }
        Ok(())
    }
}

/// `RESULT_KEYS` as they are spelled.
const EXACT_RESULT_KEYS: [&str; 4] = ["tools", "prompts", "resources", "cacheScope"];

/// Whether `key` may fold to one of `fields` (lower-case ASCII letters): a cheap test before
/// [`folded_field`]. A key whose first byte is ASCII must have it equal, in lower case, to some
/// field's first letter.
#[inline]
fn may_fold(key: &str, fields: &[&str]) -> bool {
    match key.as_bytes().first() {
        Some(&c) if c < 0x80 => {
            let lower = c | 0x20;
            fields.iter().any(|f| f.as_bytes().first() == Some(&lower))
        }
        Some(_) => true,
        None => false,
    }
}

/// The array at `array` in `text` (whose elements are `entries`) with only the `kept` ones, keeping
/// the original's spacing: what comes before the first element, between the first two (for every
/// separator), and after the last. No element kept: `[]`.
fn rebuilt_array(text: &str, array: Range<usize>, entries: &[Entry<'_>], kept: &[bool]) -> String {
    let whole = || text.get(array.clone()).unwrap_or_default().to_string();
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return whole();
    };
    let lead = text.get(array.start + 1..first.span.start).unwrap_or("");
    let trail = text
        .get(last.span.end..array.end.saturating_sub(1))
        .unwrap_or("");
    let sep = entries.get(1).map_or(",", |second| {
        text.get(first.span.end..second.span.start).unwrap_or(",")
    });
    let mut out = String::with_capacity(array.len());
    out.push('[');
    out.push_str(lead);
    let mut any = false;
    for (entry, _) in entries.iter().zip(kept).filter(|(_, k)| **k) {
        if any {
            out.push_str(sep);
        }
        out.push_str(text.get(entry.span.clone()).unwrap_or_default());
        any = true;
    }
    if !any {
        return "[]".to_string();
    }
    out.push_str(trail);
    out.push(']');
    out
}
