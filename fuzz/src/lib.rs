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
                let now =
                    LIVE.fetch_add(new_size - layout.size(), Relaxed) + new_size - layout.size();
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
const PATHS: [&str; 6] = [
    "/mcp",
    "/mcp/public/x",
    "/mcp/t12?x=1",
    "/mcp/../admin",
    "/MCP",
    "//mcp",
];
const AUTHORITIES: [&str; 6] = [
    "gw",
    "api.example.com",
    "API.example.com.:443",
    "a.example.org",
    "[::1]:8443",
    "",
];
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
        let principal = if u.arbitrary()? {
            Some(word(u, &PRINCIPALS)?)
        } else {
            None
        };
        let mut headers = vec![("content-type", "application/json")];
        for _ in 0..u.int_in_range(0..=6)? {
            headers.push((word(u, &HEADER_NAMES)?, word(u, &HEADER_VALUES)?));
        }
        let backend = u.arbitrary()?;
        Ok(Request {
            method,
            path,
            authority,
            port,
            principal,
            headers,
            backend,
            body,
        })
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
// `explain` against the decision. `toolgate explain` prints the engine's record of the walk that
// decided ([`Record`], made by the same walk as the filter's, with a trace that records): the
// record must show the decision the walk reached, and recording must not change it.

use toolgate_policy::eval::{
    BodyInput, Decision, DenyReason, HttpRequest, Level, Record, Route, Verdict, WalkEnd,
    WalkRecord,
};

/// Decides `req` on `route` as [`Route::decide`] does (authorizers taken to allow) and as
/// [`Route::decide_recorded`] does, asserts that both decide the same and that the record shows
/// that decision ([`assert_walk_shows`]), and returns whether the request is allowed.
pub fn assert_explain_agrees(
    route: &Route<'_>,
    req: &HttpRequest<'_>,
    body: BodyInput<'_, '_>,
) -> bool {
    let decision = route.decide(req, body);
    let mut record = Record::default();
    let recorded = route.decide_recorded(req, body, &mut record);
    assert_eq!(
        recorded, decision,
        "recording the walk changed the decision"
    );
    let walk = record.last().expect("every walk is recorded");
    assert_eq!(
        walk.end,
        Some(WalkEnd::Decided {
            allowed: decision.allowed(),
            summary: decision.summary()
        })
    );
    assert_walk_shows(walk, Some(&decision));
    decision.allowed()
}

/// What a walk's record shows agrees with how it ended: an allowed request passed every level it
/// met (at each level of the last message, the first rule shown matching is the one `decision`
/// names, when given); a denied one passed every level but the last it met, which denies, unless
/// its headers disagree with the body (then no rule is consulted) or it needs too many authorizer
/// calls; a walk that ends at an authorizer call ends at a level whose ExternalAuth policy applies.
pub fn assert_walk_shows(walk: &WalkRecord, decision: Option<&Decision<'_>>) {
    let levels: Vec<_> = walk.messages.iter().flat_map(|m| &m.levels).collect();
    let mismatched: Vec<_> = walk
        .headers
        .iter()
        .filter(|h| !h.agrees)
        .map(|h| h.header)
        .collect();
    match (&walk.end, decision.map(|d| &d.verdict)) {
        (None, _) => panic!("a walk without an end: {walk:?}"),
        (Some(WalkEnd::Authorize { level, .. }), _) => {
            let last = levels.last().expect("a level asked an authorizer");
            assert!(
                last.level == *level
                    && last
                        .external_auth
                        .as_ref()
                        .is_some_and(|(_, applies)| *applies),
                "{walk:?}"
            );
        }
        (Some(WalkEnd::Decided { allowed: true, .. }), verdict) => {
            assert!(verdict.is_none_or(|v| *v == Verdict::Allow));
            assert!(
                mismatched.is_empty() && levels.iter().all(|l| l.allows()),
                "allowed, yet the record denies: {walk:?}"
            );
            let (Some(d), Some(last)) = (decision, walk.messages.last()) else {
                return;
            };
            for level in last.levels.iter().filter(|l| !l.rules.is_empty()) {
                let shown = level
                    .rules
                    .iter()
                    .find(|r| r.outcome.is_ok())
                    .map(|r| (r.policy.as_str(), r.rule.as_str()));
                let decided = match level.level {
                    Level::Gateway => d.gateway_rule,
                    Level::Backend => d.backend_rule,
                }
                .map(|r| (r.policy, r.rule));
                assert_eq!(
                    shown, decided,
                    "the record and the decision name different rules: {walk:?} {d:?}"
                );
            }
        }
        (
            Some(WalkEnd::Decided {
                allowed: false,
                summary,
            }),
            verdict,
        ) => {
            if !mismatched.is_empty() {
                assert!(
                    mismatched.len() == 1 && walk.messages.is_empty(),
                    "{walk:?}"
                );
                if let Some(v) = verdict {
                    assert_eq!(
                        *v,
                        Verdict::Deny(DenyReason::McpHeaderMismatch {
                            header: mismatched[0]
                        })
                    );
                }
                return;
            }
            let (last, before) = levels.split_last().expect("a denial names a level");
            assert!(
                before.iter().all(|l| l.allows()),
                "a level before the one that denied denies: {walk:?}"
            );
            match verdict {
                Some(Verdict::Deny(DenyReason::TooManyAuthorizerCalls { level })) => {
                    assert!(
                        last.level == *level && last.external_auth.is_some(),
                        "{walk:?}"
                    )
                }
                Some(Verdict::Deny(DenyReason::NoRuleMatched { level, .. })) => {
                    assert!(last.level == *level && !last.allows(), "{walk:?}")
                }
                // docs/semantics.md §6a: the default-deny level is the gateway level.
                Some(Verdict::Deny(DenyReason::DefaultDeny)) => {
                    assert!(last.level == Level::Gateway && !last.allows())
                }
                Some(v) => panic!("the walk cannot decide {v:?}: {walk:?}"),
                None if summary.contains("more than") => {
                    assert!(last.external_auth.is_some(), "{walk:?}")
                }
                None => assert!(
                    !last.allows(),
                    "denied, yet the last level shown allows: {walk:?}"
                ),
            }
        }
    }
}
