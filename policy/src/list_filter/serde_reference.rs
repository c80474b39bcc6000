//! The list rewrite as it was before the single pass ([`super::json`]): serde_json raw values at
//! each level. Kept as the reference the single pass must agree with, byte for byte and error kind
//! for error kind (the unit tests and the `list_filter` fuzz target compare them); not used
//! otherwise.

use std::ops::Range;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{ListKind, ListRequests, Rewrite, Unreadable};

pub fn rewrite_json(
    text: &str,
    requests: &ListRequests,
    keep: &mut dyn FnMut(ListKind, &str) -> bool,
) -> Result<Rewrite, Unreadable> {
    let syntax = |e: serde_json::Error| Unreadable::Syntax(e.to_string());
    // A batch is split into its responses; a single response is read once, as fields.
    let responses: Vec<&str> = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text)
            .map_err(syntax)?
            .into_iter()
            .map(RawValue::get)
            .collect()
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
        done.text = Some(super::splice(text, edits));
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
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
