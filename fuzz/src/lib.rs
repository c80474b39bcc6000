//! Shared pieces of the fuzz targets: a counting allocator (the allocation bound), the fixed plans,
//! arbitrary HTTP requests, and the fake proxy host for the lifecycle (the policy crate's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use arbitrary::{Arbitrary, Unstructured};


// ------------------------------------------------------------------------------------------------
// Allocation bound. libFuzzer's -malloc_limit_mb needs a sanitizer's malloc hooks, which a stable
// build without sanitizers does not have (-rss_limit_mb still works: it polls the RSS). So the
// targets count their own heap: `measure` runs a closure and returns the peak of bytes live during
// it, over what was live before; each target asserts a bound in the input's size.

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f`; returns its result and the peak heap bytes it had live at once (libFuzzer runs one
/// input at a time on one thread; its own allocations between inputs are not inside `f`).
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let out = f();
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    (out, peak)
}

/// The reader's documented bound (docs/security.md): peak heap while reading a body of `len`
/// bytes, results included.
pub fn reader_bound(len: usize) -> usize {
    32 * len + 64 * 1024
}

// ------------------------------------------------------------------------------------------------
// Plans.

/// A realistic plan: the demo's two levels, HTTP matchers of every kind, a CEL rule.
pub const REALISTIC_PLAN: &[u8] = include_bytes!("../plans/realistic.json");
/// ExternalAuth at both levels (gRPC and HTTP authorizers), with body forwarding.
pub const EXTERNAL_AUTH_PLAN: &[u8] = include_bytes!("../plans/external-auth.json");

pub const SA_A: &str = "spiffe://cluster.local/ns/default/sa/a";
pub const SA_B: &str = "spiffe://cluster.local/ns/default/sa/b";
pub const CLUSTER: &str = "xbackend/default/tools";

// ------------------------------------------------------------------------------------------------
// Arbitrary requests: the HTTP attributes the engine reads, drawn from small vocabularies mixed
// with arbitrary text, and an arbitrary body.

const METHODS: [&str; 5] = ["POST", "GET", "DELETE", "PUT", "post"];
const PATHS: [&str; 6] = ["/mcp", "/mcp/public/x", "/mcp/t12?x=1", "/mcp/../admin", "/MCP", "//mcp"];
const AUTHORITIES: [&str; 6] = ["gw", "api.example.com", "API.example.com.:443", "a.example.org", "[::1]:8443", ""];
const HEADER_NAMES: [&str; 10] = [
    "content-type",
    "content-encoding",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "x-team",
    "x-env",
    "mcp-session-id",
    "accept",
    "host",
];
const HEADER_VALUES: [&str; 10] = [
    "application/json",
    "application/json; charset=utf-8",
    "tools/call",
    "get-sum",
    "2026-07-28",
    "blue",
    "prod-12",
    "=?base64?Z2V0LXN1bQ==?=",
    "identity",
    "gzip",
];
const PRINCIPALS: [&str; 3] = [SA_A, SA_B, "spiffe://example.org/other"];

/// One word from a vocabulary or arbitrary text.
fn word<'a>(u: &mut Unstructured<'a>, vocab: &[&'static str]) -> arbitrary::Result<&'a str> {
    if u.ratio(7, 8)? {
        Ok(*u.choose(vocab)?)
    } else {
        <&str>::arbitrary(u)
    }
}

#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authority: &'a str,
    pub port: u16,
    pub principal: Option<&'a str>,
    pub headers: Vec<(&'a str, &'a str)>,
    pub backend: bool,
    pub body: &'a [u8],
}

/// The first [`ATTRIBUTE_BYTES`] bytes of an input choose the HTTP attributes, the rest is the body,
/// so that a seed is that many zero bytes (POST /mcp, host gw, JSON, no caller, no other header,
/// gateway level only) followed by a body from the tests.
pub const ATTRIBUTE_BYTES: usize = 32;

impl<'a> Request<'a> {
    pub fn from_bytes(data: &'a [u8]) -> arbitrary::Result<Self> {
        let (attributes, body) = data.split_at(data.len().min(ATTRIBUTE_BYTES));
        let u = &mut Unstructured::new(attributes);
        let method = word(u, &METHODS)?;
        let path = word(u, &PATHS)?;
        let authority = word(u, &AUTHORITIES)?;
        let port = *u.choose(&[8443u16, 18443, 80, 0])?;
        let principal = if u.arbitrary()? { Some(word(u, &PRINCIPALS)?) } else { None };
        let mut headers = vec![("content-type", "application/json")];
        for _ in 0..u.int_in_range(0..=6)? {
            headers.push((word(u, &HEADER_NAMES)?, word(u, &HEADER_VALUES)?));
        }
        let backend = u.arbitrary()?;
        Ok(Request { method, path, authority, port, principal, headers, backend, body })
    }
}

// ------------------------------------------------------------------------------------------------
// The fake proxy host for the lifecycle: the policy crate's (feature `test-host`), shared with its
// lifecycle tests and benchmark.

pub use toolgate_policy::testing::FakeHost;

// ------------------------------------------------------------------------------------------------
// Oracles for the reader, independent of it (as in policy/tests/mcp_reader.rs).

pub mod oracle {
    use serde_json::{Map, Value};

    /// The JSON has a duplicate key in some object (serde_json's `Value` keeps only the last).
    pub fn has_duplicate_key(json: &[u8]) -> bool {
        struct Strict;
        struct V;
        impl<'de> serde::Deserialize<'de> for Strict {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(V)
            }
        }
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Strict;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_unit<E>(self) -> Result<Strict, E> {
                Ok(Strict)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
                while seq.next_element::<Strict>()?.is_some() {}
                Ok(Strict)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(k) = map.next_key::<String>()? {
                    if !seen.insert(k) {
                        return Err(serde::de::Error::custom("duplicate key"));
                    }
                    map.next_value::<Strict>()?;
                }
                Ok(Strict)
            }
        }
        // (serde_json's recursion limit, 128, is over the reader's 64.)
        let mut de = serde_json::Deserializer::from_slice(json);
        matches!(serde::Deserialize::deserialize(&mut de), Err::<Strict, serde_json::Error>(e) if e.to_string().contains("duplicate key"))
    }

    pub fn depth(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// Go's `encoding/json` / .NET case-insensitive matching: equal character by character after
    /// simple upper- then lower-casing.
    fn folds_to(key: &str, field: &str) -> bool {
        let fold = |c: char| {
            let mut up = c.to_uppercase();
            let (Some(u), None) = (up.next(), up.next()) else { return None };
            let mut low = u.to_lowercase();
            let (Some(l), None) = (low.next(), low.next()) else { return None };
            Some(l)
        };
        key.chars().count() == field.chars().count()
            && key.chars().zip(field.chars()).all(|(a, b)| fold(a).is_some() && fold(a) == fold(b))
    }

    /// A key of a message or its `params` that a case-insensitive decoder reads as a field the
    /// reader extracts, without being it.
    pub fn folded_key(v: &Value) -> Option<String> {
        const MESSAGE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
        const PARAMS: [&str; 2] = ["name", "uri"];
        let variant = |o: &Map<String, Value>, fields: &[&str]| {
            o.keys().find(|k| fields.iter().any(|f| k.as_str() != *f && folds_to(k, f))).cloned()
        };
        let message = |m: &Value| {
            let o = m.as_object()?;
            variant(o, &MESSAGE).or_else(|| o.get("params").and_then(Value::as_object).and_then(|p| variant(p, &PARAMS)))
        };
        match v {
            Value::Array(a) => a.iter().find_map(message),
            m => message(m),
        }
    }
}
