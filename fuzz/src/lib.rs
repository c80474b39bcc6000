//! Shared pieces of the fuzz targets: a counting allocator (the allocation bound), the fixed plans,
//! arbitrary HTTP requests, the fake proxy host for the lifecycle (the policy crate's), and the fake of
//! Envoy's dynamic-module callbacks (`envoy`, for module_hooks).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use arbitrary::{Arbitrary, Unstructured};

pub mod envoy;

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
// Oracles for the reader, independent of it: the policy crate's (feature `test-host`), shared with
// its reader tests (policy/tests/mcp_reader.rs).

pub use toolgate_policy::testing::oracle;

// ------------------------------------------------------------------------------------------------
// `explain` against the decision. `Route::explain` (what `toolgate explain` prints, rule by rule)
// is a slow path of its own beside the indexed `Route::decide`/`Route::step` the filter runs: the
// decision it shows must be the one the filter reaches.

use toolgate_policy::eval::{BodyInput, DenyReason, HttpRequest, Level, Route, Verdict};

/// Checks that the decision `explain` shows for `req` agrees with [`Route::decide`] (authorizers
/// taken to allow, as `explain` takes them) and returns whether the request is allowed. Per
/// message (a listen followed by the `resources/subscribe` of each URI), a level with rules allows
/// when one of them matches; the request is allowed when every level of every message allows, and
/// otherwise denied by the first level that does not. When it is allowed, the rule `explain` shows
/// first as matching at each level of the last message is the one the decision names. What
/// `explain` does not show rule by rule (the `Mcp-*` header check, which comes before any policy,
/// and the limit on authorizer calls) decides alone: the explanation is not compared then.
pub fn assert_explain_agrees(route: &Route<'_>, req: &HttpRequest<'_>, body: BodyInput<'_, '_>) -> bool {
    let decision = route.decide(req, body);
    let explained = route.explain(req, body);
    match &decision.verdict {
        Verdict::Deny(DenyReason::McpHeaderMismatch { .. } | DenyReason::TooManyAuthorizerCalls { .. }) => return false,
        Verdict::Deny(DenyReason::ExternalAuth { .. }) => panic!("decide asks no authorizer, yet one denied: {decision:?}"),
        _ => {}
    }
    if !route.under_policy() {
        assert!(decision.allowed() && explained.iter().all(|m| m.levels.is_empty()), "no policy: {decision:?} {explained:?}");
        return true;
    }
    let denied_at: Option<Level> = explained.iter().find_map(|m| {
        m.levels.iter().find(|l| !l.rules.is_empty() && l.rules.iter().all(|r| r.outcome.is_err())).map(|l| l.level)
    });
    match (&decision.verdict, denied_at) {
        (Verdict::Allow, None) => {
            if let Some(last) = explained.last() {
                for level in &last.levels {
                    let shown = level.rules.iter().find(|r| r.outcome.is_ok()).map(|r| (r.policy.as_str(), r.rule.as_str()));
                    let decided = match level.level {
                        Level::Gateway => decision.gateway_rule,
                        Level::Backend => decision.backend_rule,
                    }
                    .map(|r| (r.policy, r.rule));
                    assert_eq!(shown, decided, "explain and the decision name different rules: {explained:?} {decision:?}");
                }
            }
            true
        }
        // docs/semantics.md §6a: the default-deny level is shown as the gateway level.
        (Verdict::Deny(DenyReason::DefaultDeny), Some(Level::Gateway)) => false,
        (Verdict::Deny(DenyReason::NoRuleMatched { level, .. }), Some(at)) => {
            assert_eq!(*level, at, "explain and the decision deny at different levels: {explained:?} {decision:?}");
            false
        }
        (verdict, at) => panic!("explain shows {at:?} denying, the decision is {verdict:?}: {explained:?}"),
    }
}
