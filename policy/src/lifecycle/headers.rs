//! The request headers and attributes the lifecycle reads, and how a request is classified
//! (docs/semantics.md §4): what the plan needs of the host, the headers it hands over
//! ([`HeaderSink`]), JSON POST or not.

use std::ops::Range;

use crate::cel_rule::Uses;
use crate::eval::HEADERS_READ;
use crate::plan::{AuthorizerPlan, CompiledPlan, LevelPlan, RulePlan};
use crate::str_map::StrMap;

/// Request headers the lifecycle reads itself, in this order (indexes: [`METHOD`] ...).
/// `accept-encoding` is only read for list filtering, `:scheme` and `x-request-id` only for authorizer
/// calls: a plan without them does not collect them ([`WantedHeaders::of`]).
pub(crate) const LIFECYCLE_HEADERS: [&str; 8] = [
    ":method",
    ":path",
    ":authority",
    "content-type",
    "content-encoding",
    "accept-encoding",
    ":scheme",
    "x-request-id",
];
pub(crate) const METHOD: usize = 0;
pub(crate) const PATH: usize = 1;
pub(crate) const AUTHORITY: usize = 2;
pub(crate) const CONTENT_TYPE: usize = 3;
pub(crate) const CONTENT_ENCODING: usize = 4;
pub(crate) const ACCEPT_ENCODING: usize = 5;
pub(crate) const SCHEME: usize = 6;
pub(crate) const REQUEST_ID: usize = 7;
/// The first of [`HEADERS_READ`], numbered after [`LIFECYCLE_HEADERS`].
pub(crate) const MCP_METHOD: usize = LIFECYCLE_HEADERS.len();

/// The request attributes the loaded plan can look at. Every attribute no rule looks at is a host
/// call (plus a call back into the VM to allocate its copy) saved on every request: the largest part
/// of the filter's per-request cost (docs/design/host-calls.md; measured by `make bench`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    /// Some XBackend-level policy exists: the routed cluster selects it.
    pub cluster: bool,
    /// Some rule names a source (SPIFFE ID), or an authorizer is told the caller.
    pub principal: bool,
    /// Some rule matches listener ports.
    pub port: bool,
    /// Some rule, or the default deny's exceptions, match the TLS server name.
    pub server_name: bool,
    /// An authorizer is called: it is told the protocol, and gRPC ones the whole `params`.
    pub external_auth: bool,
    /// Some CEL rule reads `request.mcp.params`.
    pub cel_params: bool,
    /// Some CEL rule reads `request.time`.
    pub time: bool,
    /// Some CEL rule reads `request.auth`, or an authorizer is told the verified token (§6b).
    pub auth: bool,
}

impl Needs {
    /// `cel`: what the plan's CEL rules read ([`crate::eval::Evaluator::cel_uses`]).
    pub fn of(plan: &CompiledPlan, cel: Uses) -> Self {
        let ea = authorizers(plan).next().is_some();
        Needs {
            cluster: plan.backends.values().any(|l| !l.is_empty()),
            // A listener that accepts unverified certificates has no identities to read.
            principal: !plan.settings.unverified_client_certificates
                && (ea || cel.principal || rules(plan).any(|r| r.principal.is_some())),
            port: rules(plan).any(|r| !r.http.ports.is_empty()),
            server_name: !plan.settings.default_deny_except_server_names.is_empty()
                || rules(plan).any(|r| !r.http.server_names.is_empty()),
            external_auth: ea,
            cel_params: cel.params,
            time: cel.time,
            auth: ea || cel.auth,
        }
    }

    /// Whether `params` must be captured when the body is read.
    pub fn params(&self) -> bool {
        self.external_auth || self.cel_params
    }
}

fn levels(plan: &CompiledPlan) -> impl Iterator<Item = &LevelPlan> {
    std::iter::once(&plan.gateway).chain(plan.backends.values())
}

/// Every rule of the plan, ExternalAuth policies' included.
pub(crate) fn rules(plan: &CompiledPlan) -> impl Iterator<Item = &RulePlan> {
    levels(plan).flat_map(|l| {
        l.allow
            .iter()
            .flat_map(|p| &p.rules)
            .chain(l.external_auth.iter().flat_map(|e| &e.rules))
    })
}

pub(crate) fn authorizers(plan: &CompiledPlan) -> impl Iterator<Item = &AuthorizerPlan> {
    levels(plan)
        .filter_map(|l| l.external_auth.as_ref())
        .map(|e| &e.authorizer)
}

/// The request headers that can matter: the lifecycle's, the evaluator's ([`HEADERS_READ`]), those
/// the plan's header matchers name and those sent to authorizers; all of them when a gRPC
/// authorizer takes every header. Only these are kept of the host's header map (less work per
/// request); the decisions are the same. The lifecycle's own are numbered first, by their indexes
/// in [`LIFECYCLE_HEADERS`], then [`HEADERS_READ`] ([`fixed_position`]); the plan's names after them,
/// looked up by hash: the work per request header does not grow with the number of names the plan
/// uses.
#[derive(Debug, Default)]
pub(crate) struct WantedHeaders {
    /// The plan's names (numbered from [`FIXED_HEADERS`]).
    names: StrMap<usize>,
    all: bool,
    /// The [`FIXED_HEADERS`] (bit `i`: number `i`) that keep their numbers but are not collected.
    unneeded: u32,
}

impl WantedHeaders {
    /// `cel`: what the plan's CEL rules read (`request.headers`: every header).
    pub fn of(plan: &CompiledPlan, cel: Uses) -> Self {
        let matchers = rules(plan)
            .flat_map(|r| &r.http.headers)
            .map(|h| h.name.as_str());
        let sent = authorizers(plan)
            .flat_map(|a| &a.allowed_headers)
            .map(String::as_str);
        // HTTP authorizers are always sent `authorization` (as Envoy's ext_authz does).
        // Rules over a verified token read it too (one credential only, docs/semantics.md §6b).
        let always = (authorizers(plan).next().is_some() || cel.auth).then_some("authorization");
        let named: Vec<&str> = matchers.chain(sent).chain(always).collect();
        let mut wanted = Self::with(named.iter().copied());
        // Lifecycle headers the plan has no use for keep their numbers (the lifecycle indexes by them)
        // but are not collected: `:scheme` and `x-request-id` only go to authorizers, and list
        // filtering removes `accept-encoding` from list requests (when they have it). One that a
        // matcher names or an authorizer is sent is collected all the same.
        let mut unneeded = 0;
        if authorizers(plan).next().is_none() {
            unneeded |= 1 << SCHEME | 1 << REQUEST_ID;
        }
        if !plan.settings.list_filtering {
            unneeded |= 1 << ACCEPT_ENCODING;
        }
        for i in named.iter().filter_map(|n| fixed_position(n.as_bytes())) {
            unneeded &= !(1u32 << i);
        }
        wanted.unneeded = unneeded;
        wanted.all = cel.headers
            || authorizers(plan).any(|a| {
                a.allowed_headers.is_empty() && a.protocol == crate::plan::AuthorizerProtocol::Grpc
            });
        wanted
    }

    /// The lifecycle's and the evaluator's headers, then `names`.
    pub fn with<'n>(names: impl Iterator<Item = &'n str>) -> Self {
        let mut map = StrMap::default();
        for name in names.filter(|n| fixed_position(n.as_bytes()).is_none()) {
            let next = FIXED_HEADERS + map.len();
            map.get_or_insert_with(name, || next);
        }
        WantedHeaders {
            names: map,
            all: false,
            unneeded: 0,
        }
    }

    /// Index of a wanted header; `usize::MAX` for one kept only because every header is.
    fn position(&self, name: &[u8]) -> Option<usize> {
        let found = fixed_position(name).or_else(|| self.names.get_bytes(name).copied());
        match found {
            Some(i) if i < FIXED_HEADERS && self.unneeded & (1 << i) != 0 => self.all.then_some(i),
            Some(i) => Some(i),
            None => self.all.then_some(usize::MAX),
        }
    }
}

/// [`RequestHeaders`]'s mark of a fixed header that was not sent.
const ABSENT: u32 = u32::MAX;

/// How many wanted headers every plan has: [`LIFECYCLE_HEADERS`], then [`HEADERS_READ`].
const FIXED_HEADERS: usize = LIFECYCLE_HEADERS.len() + HEADERS_READ.len();

/// The index of one of the [`FIXED_HEADERS`] (in [`LIFECYCLE_HEADERS`] then [`HEADERS_READ`] order).
/// A `match` rather than the hash map: every request header is looked up, and comparing a name with
/// these constants (by length first) costs less in the VM than hashing it (and checking it is
/// UTF-8 first); `fixed_headers_are_numbered_in_order` keeps it in step with the two lists.
fn fixed_position(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":method" => 0,
        b":path" => 1,
        b":authority" => 2,
        b"content-type" => 3,
        b"content-encoding" => 4,
        b"accept-encoding" => 5,
        b":scheme" => 6,
        b"x-request-id" => 7,
        b"mcp-method" => 8,
        b"mcp-name" => 9,
        b"mcp-session-id" => 10,
        b"mcp-protocol-version" => 11,
        _ => return None,
    })
}

/// The request headers that can matter to a decision ([`WantedHeaders`]), from one host call
/// ([`HeaderSink`]). A buffer the host hands over whole is kept as it is and the wanted headers are
/// byte ranges into it; headers handed over pair by pair are copied into one buffer as they come: no
/// allocation per header either way. Never panics: a malformed buffer yields the headers that could
/// be read.
#[derive(Debug, Default)]
pub(crate) struct RequestHeaders {
    /// The names and values as text (a host's buffer without what came before its text; the ranges
    /// of a buffer filled pair by pair start and end next to NULs, so on character boundaries); if
    /// some header in it is not UTF-8, the wanted headers, converted lossily.
    text: String,
    /// Name and value of each wanted header present, in order (repeated names kept).
    wanted: Vec<(Range<usize>, Range<usize>)>,
    /// Where in `wanted` the first of each of the [`FIXED_HEADERS`] is ([`ABSENT`]: not sent). u32
    /// rather than `Option<usize>`: half the size, which keeps the request's held state in dlmalloc's
    /// small bins (the larger size took its slower path on every request: `make vm-profile`).
    own: [u32; FIXED_HEADERS],
}

impl RequestHeaders {
    /// `spans` are the wanted headers' names and values in `bytes`; if something in `bytes` is not
    /// UTF-8, those are converted lossily.
    fn from_text(
        bytes: Vec<u8>,
        spans: Vec<(Range<usize>, Range<usize>)>,
        own: [u32; FIXED_HEADERS],
    ) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => RequestHeaders {
                text,
                wanted: spans,
                own,
            },
            Err(e) => {
                let bytes = e.into_bytes();
                let mut text = String::new();
                let mut copy = |range: Range<usize>| {
                    let start = text.len();
                    text.push_str(&String::from_utf8_lossy(
                        bytes.get(range).unwrap_or_default(),
                    ));
                    start..text.len()
                };
                let wanted = spans.into_iter().map(|(k, v)| (copy(k), copy(v))).collect();
                RequestHeaders { text, wanted, own }
            }
        }
    }

    /// Where a host puts the request headers ([`crate::lifecycle::Host::request_headers`]), for
    /// the headers `wanted` names.
    #[inline]
    pub fn sink(wanted: &WantedHeaders) -> HeaderSink<'_> {
        HeaderSink {
            wanted,
            // Allocated by the first header pushed; a buffer adopted takes its place.
            text: Vec::new(),
            text_start: 0,
            // Sized for the common case; it grows only with what the request sends, never with
            // the plan. 11, not FIXED_HEADERS (12): the larger size took dlmalloc's slower path, in
            // allocating and freeing it, on every request (`make vm-profile`).
            spans: Vec::with_capacity(11),
            own: [ABSENT; FIXED_HEADERS],
        }
    }

    fn text(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or_default()
    }

    /// The first value of one of the [`FIXED_HEADERS`] (by its number), if sent.
    pub fn first(&self, own: usize) -> Option<&str> {
        let (_, v) = self.wanted.get(*self.own.get(own)? as usize)?;
        Some(self.text(v))
    }

    /// The first value of one of the [`FIXED_HEADERS`] (by its number), or "". Not written over
    /// [`Self::first`]: through it, every request paid more in the VM (`make vm-profile`).
    pub fn get(&self, own: usize) -> &str {
        match self.own.get(own).and_then(|&i| self.wanted.get(i as usize)) {
            Some((_, v)) => self.text(v),
            None => "",
        }
    }

    pub fn pairs(&self) -> Vec<(&str, &str)> {
        self.wanted
            .iter()
            .map(|(k, v)| (self.text(k), self.text(v)))
            .collect()
    }

    /// How many headers are kept.
    pub fn len(&self) -> usize {
        self.wanted.len()
    }

    /// Writes the kept headers' pairs into `out` (as many as fit); returns how many. A loop of its
    /// own rather than an iterator shared with [`Self::pairs`]: through one, the (c) path cost more
    /// in the VM on every request (`make vm-profile`).
    pub fn fill<'s>(&'s self, out: &mut [(&'s str, &'s str)]) -> usize {
        let mut n = 0;
        for (slot, (k, v)) in out.iter_mut().zip(&self.wanted) {
            *slot = (self.text(k), self.text(v));
            n += 1;
        }
        n
    }
}

/// Where a host puts the request headers ([`crate::lifecycle::Host::request_headers`]): every header,
/// in order, either pair by pair ([`HeaderSink::push`]: the bytes of the ones the plan can look at
/// are copied as they come), or all at once as a buffer the host owns already
/// ([`HeaderSink::adopt`]: the buffer is kept, nothing is copied). The engine keeps only the headers
/// the plan can look at. Names and values need not be UTF-8: if one is not, the kept headers are
/// read lossily. A host uses one way or the other; both together give the same headers, copied.
pub struct HeaderSink<'w> {
    wanted: &'w WantedHeaders,
    /// The headers' bytes: pushed ones (each name and value followed by a NUL), or an adopted buffer.
    text: Vec<u8>,
    /// Where the names and values start in `text` (what an adopted buffer holds before them is
    /// dropped at the end); `spans` are relative to it.
    text_start: usize,
    spans: Vec<(Range<usize>, Range<usize>)>,
    own: [u32; FIXED_HEADERS],
}

impl HeaderSink<'_> {
    /// The request's next header (name and value as the proxy has them): kept if the plan can look
    /// at it.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let Some(at) = self.wanted.position(name) else {
            return;
        };
        if self.text.capacity() == 0 {
            // Sized for the usual wanted headers' text (methods, path, authority, the MCP headers).
            self.text.reserve_exact(512);
        }
        if let Some(slot @ &mut ABSENT) = self.own.get_mut(at) {
            *slot = u32::try_from(self.spans.len()).unwrap_or(ABSENT);
        }
        // NUL after each: a name or value that is not UTF-8 cannot join its neighbour into a valid
        // character, so the ranges stay on character boundaries.
        let base = self.text_start;
        let start = self.text.len();
        self.text.extend_from_slice(name);
        let name_end = self.text.len();
        self.text.push(0);
        self.text.extend_from_slice(value);
        self.spans.push((
            start - base..name_end - base,
            name_end + 1 - base..self.text.len() - base,
        ));
        self.text.push(0);
    }

    /// Every header at once, in `buffer`, which the host owns already and hands over: kept as the
    /// headers' text, without a copy. `next_pair` is called with the buffer until it returns None:
    /// each time, where the next header's name and value are in `buffer[text_start..]` (what comes
    /// before `text_start`, such as a table of lengths, is dropped). Reading stops at the first name
    /// or value that is not within the buffer: a malformed buffer gives the headers before it. For
    /// the headers to read as text, every name and value must begin and end on a character boundary
    /// (a range that does not reads as empty): next to a NUL or another ASCII byte does.
    pub fn adopt(
        &mut self,
        buffer: Vec<u8>,
        text_start: usize,
        mut next_pair: impl FnMut(&[u8]) -> Option<(Range<usize>, Range<usize>)>,
    ) {
        let text_start = text_start.min(buffer.len());
        let text = buffer.get(text_start..).unwrap_or_default();
        if !self.text.is_empty() {
            // Headers were pushed already: these are copied after them.
            while let Some((name, value)) = next_pair(&buffer) {
                let (Some(name), Some(value)) = (text.get(name), text.get(value)) else {
                    break;
                };
                self.push(name, value);
            }
            return;
        }
        while let Some((name, value)) = next_pair(&buffer) {
            let Some(name_bytes) = text.get(name.clone()) else {
                break;
            };
            if text.get(value.clone()).is_none() {
                break;
            }
            if let Some(at) = self.wanted.position(name_bytes) {
                if let Some(slot @ &mut ABSENT) = self.own.get_mut(at) {
                    *slot = u32::try_from(self.spans.len()).unwrap_or(ABSENT);
                }
                self.spans.push((name, value));
            }
        }
        self.text = buffer;
        self.text_start = text_start;
    }

    #[inline]
    pub(crate) fn into_headers(mut self) -> RequestHeaders {
        // Only the text needs to be UTF-8 (a table of lengths before it need not be).
        if self.text_start > 0 {
            self.text.drain(..self.text_start);
        }
        RequestHeaders::from_text(self.text, self.spans, self.own)
    }
}

/// How the lifecycle treats a request (docs/semantics.md §4), decided on its headers: the one classification
/// the filter and `toolgate explain` share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classified {
    /// A POST with an `application/json` body: held until the whole body is here, then read as MCP
    /// (`encoded`: a `content-encoding` other than identity, which makes it not MCP).
    JsonBody { encoded: Option<String> },
    /// A JSON POST without a body: not MCP.
    EmptyJsonPost,
    /// A GET or DELETE with a body (`GET` or `DELETE`): decided on HTTP attributes alone, but not as
    /// the base protocol's GET or DELETE ([`crate::mcp::NotMcp::BodyNotRead`]).
    BodyNotRead(&'static str),
    /// Anything else: decided on HTTP attributes alone.
    Http,
}

/// Classifies a request by its method, `content-type`, `content-encoding` and whether the headers
/// end the stream.
pub fn classify(
    method: &str,
    content_type: &str,
    content_encoding: &str,
    end_of_stream: bool,
) -> Classified {
    // The common forms are compared as they are; only others are split and trimmed (str's
    // pattern search and Unicode trim cost more in the VM than the rest of this function).
    let json = content_type.eq_ignore_ascii_case("application/json")
        || content_type
            .split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    match (method == "POST" && json, end_of_stream) {
        // The base protocol's GET and DELETE have no body: one that does is not read, and not them.
        (false, false) if method == "GET" => Classified::BodyNotRead("GET"),
        (false, false) if method == "DELETE" => Classified::BodyNotRead("DELETE"),
        (false, _) => Classified::Http,
        (true, true) => Classified::EmptyJsonPost,
        (true, false) => {
            let encoding = if content_encoding.is_empty() {
                ""
            } else {
                content_encoding.trim()
            };
            let encoded = (!encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity"))
                .then(|| encoding.to_string());
            Classified::JsonBody { encoded }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes a host's buffer may hold before its headers' text (here: not UTF-8).
    const PREFIX: &[u8] = b"\xff\x80len";

    /// A buffer as a host may hand it over whole: a prefix, then each name and value followed by a
    /// NUL; and where each name and value is after the prefix.
    #[allow(clippy::type_complexity)]
    fn buffer(pairs: &[(&[u8], &[u8])]) -> (Vec<u8>, Vec<(Range<usize>, Range<usize>)>) {
        let mut out = PREFIX.to_vec();
        let mut ranges = Vec::new();
        for (k, v) in pairs {
            let k_start = out.len() - PREFIX.len();
            out.extend(*k);
            let k_end = out.len() - PREFIX.len();
            out.push(0);
            out.extend(*v);
            ranges.push((k_start..k_end, k_end + 1..out.len() - PREFIX.len()));
            out.push(0);
        }
        (out, ranges)
    }

    /// The headers of a buffer cut to `len` bytes, adopted ([`HeaderSink::adopt`]).
    fn adopted_cut(pairs: &[(&[u8], &[u8])], len: usize, wanted: &WantedHeaders) -> RequestHeaders {
        let (mut bytes, ranges) = buffer(pairs);
        bytes.truncate(len);
        let mut sink = RequestHeaders::sink(wanted);
        let mut ranges = ranges.into_iter();
        sink.adopt(bytes, PREFIX.len(), |_| ranges.next());
        sink.into_headers()
    }

    fn adopted(pairs: &[(&[u8], &[u8])], wanted: &WantedHeaders) -> RequestHeaders {
        adopted_cut(pairs, usize::MAX, wanted)
    }

    fn wanted(extra: &[&str]) -> WantedHeaders {
        WantedHeaders::with(extra.iter().copied())
    }

    #[test]
    fn request_headers_keep_only_wanted_ones_in_order() {
        let pairs: &[(&[u8], &[u8])] = &[
            (b":method", b"POST"),
            (b"x-other", b"abc"),
            (b"mcp-name", b"echo"),
            (b"x-team", b"blue"),
            (b"content-type", b"application/json"),
            (b"x-team", b"red"),
        ];
        let h = adopted(pairs, &wanted(&["x-team"]));
        assert_eq!(
            h.pairs(),
            vec![
                (":method", "POST"),
                ("mcp-name", "echo"),
                ("x-team", "blue"),
                ("content-type", "application/json"),
                ("x-team", "red")
            ]
        );
        assert_eq!(h.get(METHOD), "POST");
        assert_eq!(h.get(CONTENT_TYPE), "application/json");
        assert_eq!(h.get(PATH), "");
        let mut all = wanted(&[]);
        all.all = true;
        assert_eq!(adopted(pairs, &all).pairs().len(), 6);
    }

    /// The headers pushed pair by pair ([`HeaderSink::push`]).
    fn kept(pairs: &[(&[u8], &[u8])], wanted: &WantedHeaders) -> RequestHeaders {
        let mut k = RequestHeaders::sink(wanted);
        for (name, value) in pairs {
            k.push(name, value);
        }
        k.into_headers()
    }

    #[test]
    fn pushed_and_adopted_headers_are_the_same() {
        let cases: &[&[(&[u8], &[u8])]] = &[
            &[
                (b":method", b"POST"),
                (b"x-other", b"abc"),
                (b"mcp-name", b"echo"),
                (b"x-team", b"blue"),
                (b"x-team", b"red"),
            ],
            // Not UTF-8: a header that is not wanted, then one that is (read lossily either way).
            &[
                (b":path", b"/mcp"),
                (b"x-bin", b"\xff\xfe"),
                (b"x-team", b"b\xc3lue"),
                (b"mcp-method", b"tools/call"),
            ],
            &[
                (b"\xff", b"v"),
                (b"mcp-method", b"tools/list"),
                (b"mcp-method", b"tools/call"),
                (b":method", b"GET"),
            ],
            // A value ending in a lead byte, then continuation bytes: each alone is not UTF-8.
            &[
                (b"x-team", b"a\xc3"),
                (b"x-team", b"\xa9b"),
                (b":method", b"POST"),
            ],
            &[],
        ];
        let all = || {
            let mut w = wanted(&["x-team"]);
            w.all = true;
            w
        };
        for pairs in cases {
            for w in [wanted(&["x-team"]), wanted(&[]), all()] {
                let (a, b) = (kept(pairs, &w), adopted(pairs, &w));
                assert_eq!(a.pairs(), b.pairs(), "{pairs:?}");
                for own in 0..FIXED_HEADERS {
                    assert_eq!(
                        (a.get(own), a.first(own)),
                        (b.get(own), b.first(own)),
                        "{pairs:?} {own}"
                    );
                }
            }
        }
        assert_eq!(
            kept(
                &[(b"mcp-method", b"tools/list"), (b"mcp-method", b"x")],
                &wanted(&[])
            )
            .get(MCP_METHOD),
            "tools/list"
        );
    }

    #[test]
    fn fixed_headers_are_numbered_in_order() {
        let fixed: Vec<&str> = LIFECYCLE_HEADERS
            .iter()
            .chain(HEADERS_READ.iter())
            .copied()
            .collect();
        assert_eq!(fixed.len(), FIXED_HEADERS);
        for (i, name) in fixed.iter().enumerate() {
            assert_eq!(fixed_position(name.as_bytes()), Some(i), "{name}");
        }
        assert_eq!(fixed_position(b":METHOD"), None);
        assert_eq!(fixed_position(b"mcp-names"), None);
        // A plan naming one of them again does not number it twice.
        let w = wanted(&["mcp-name", "x-team"]);
        assert_eq!(w.position(b"mcp-name"), Some(9));
        assert_eq!(HEADERS_READ[0], "mcp-method");
        assert_eq!(fixed_position(b"mcp-method"), Some(MCP_METHOD));
        assert_eq!(w.position(b"x-team"), Some(FIXED_HEADERS));
    }

    #[test]
    fn wanted_headers_are_found_by_hash_whatever_their_number() {
        // A plan whose matchers name 5,000 headers: the lifecycle's own keep their indexes, and the
        // last name is found like the first (one hash lookup per request header).
        let names: Vec<String> = (0..5000).map(|i| format!("x-h{i}")).collect();
        let w = wanted(&names.iter().map(String::as_str).collect::<Vec<_>>());
        for (i, name) in LIFECYCLE_HEADERS.iter().enumerate() {
            assert_eq!(w.position(name.as_bytes()), Some(i));
        }
        assert!(w.position(b"x-h4999").is_some());
        assert_eq!(w.position(b"x-h5000"), None);
        assert_eq!(w.position(b"\xff"), None);
        let pairs: &[(&[u8], &[u8])] = &[
            (b"x-h4999", b"v"),
            (b":method", b"POST"),
            (b"x-other", b"o"),
        ];
        let h = adopted(pairs, &w);
        assert_eq!(h.pairs(), vec![("x-h4999", "v"), (":method", "POST")]);
        assert_eq!(h.get(METHOD), "POST");
    }

    #[test]
    fn long_values_and_many_headers() {
        // Lengths of 128 and more are not UTF-8 in the length table; the text still is.
        let long = "v".repeat(300);
        let accents = "é".repeat(100);
        let names: Vec<String> = (0..40).map(|i| format!("x-h{i}")).collect();
        let mut pairs: Vec<(&[u8], &[u8])> = names
            .iter()
            .map(|n| (n.as_bytes(), long.as_bytes()))
            .collect();
        pairs.push((b"mcp-name", accents.as_bytes()));
        let h = adopted(&pairs, &wanted(&["x-h7"]));
        assert_eq!(
            h.pairs(),
            vec![("x-h7", long.as_str()), ("mcp-name", accents.as_str())]
        );
    }

    #[test]
    fn first_of_a_repeated_header_wins() {
        let pairs: &[(&[u8], &[u8])] = &[
            (b"content-type", b"text/plain"),
            (b"content-type", b"application/json"),
        ];
        let h = adopted(pairs, &wanted(&[]));
        assert_eq!(h.get(CONTENT_TYPE), "text/plain");
        assert_eq!(h.pairs().len(), 2);
    }

    #[test]
    fn a_value_that_is_not_utf8_is_converted_lossily() {
        let pairs: &[(&[u8], &[u8])] = &[
            (b":path", b"/mcp"),
            (b"x-team", b"bl\xffue"),
            (b"x-other", b"\xfe"),
        ];
        let h = adopted(pairs, &wanted(&["x-team"]));
        assert_eq!(
            h.pairs(),
            vec![(":path", "/mcp"), ("x-team", "bl\u{FFFD}ue")]
        );
        assert_eq!(h.get(PATH), "/mcp");
    }

    #[test]
    fn a_malformed_buffer_yields_what_could_be_read() {
        let pairs: &[(&[u8], &[u8])] = &[(b":method", b"GET"), (b":path", b"/mcp")];
        let whole = buffer(pairs).0.len();
        let all = [(":method", "GET"), (":path", "/mcp")];
        for cut in 0..whole {
            let h = adopted_cut(pairs, cut, &wanted(&[]));
            let read = h.pairs();
            assert!(all.starts_with(&read), "cut at {cut}: {read:?}");
            // The last header is complete once its value is (its closing NUL may be cut).
            assert_eq!(read.len() == 2, cut >= whole - 1, "cut at {cut}: {read:?}");
        }
        // Ranges past the end, reversed, or overflowing; a text start past the end.
        let far = |ranges: Vec<(Range<usize>, Range<usize>)>, start: usize| {
            let (bytes, _) = buffer(pairs);
            let w = wanted(&[]);
            let mut sink = RequestHeaders::sink(&w);
            let mut ranges = ranges.into_iter();
            sink.adopt(bytes, start, |_| ranges.next());
            sink.into_headers().pairs().len()
        };
        assert_eq!(far(vec![(0..7, 8..usize::MAX)], PREFIX.len()), 0);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = vec![(7..0, 8..11)];
        assert_eq!(far(reversed, PREFIX.len()), 0);
        assert_eq!(far(vec![(0..7, 8..11), (0..1, 0..1)], usize::MAX), 0);
        assert_eq!(far(vec![(0..7, 8..11), (100..101, 0..1)], PREFIX.len()), 1);
    }

    #[test]
    fn a_buffer_adopted_after_pushed_headers_is_copied_after_them() {
        let w = wanted(&["x-team"]);
        let mut sink = RequestHeaders::sink(&w);
        sink.push(b"x-team", b"blue");
        sink.push(b"x-other", b"o");
        let (bytes, ranges) = buffer(&[(b":method", b"POST"), (b"x-team", b"red")]);
        let mut ranges = ranges.into_iter();
        sink.adopt(bytes, PREFIX.len(), |_| ranges.next());
        sink.push(b":path", b"/mcp");
        let h = sink.into_headers();
        assert_eq!(
            h.pairs(),
            vec![
                ("x-team", "blue"),
                (":method", "POST"),
                ("x-team", "red"),
                (":path", "/mcp")
            ]
        );
        assert_eq!(h.get(METHOD), "POST");
        // And headers pushed after a buffer adopted come after its own.
        let mut sink = RequestHeaders::sink(&w);
        let (bytes, ranges) = buffer(&[(b":method", b"POST"), (b"x-team", b"red")]);
        let mut ranges = ranges.into_iter();
        sink.adopt(bytes, PREFIX.len(), |_| ranges.next());
        sink.push(b":path", b"/mcp");
        let h = sink.into_headers();
        assert_eq!(
            h.pairs(),
            vec![(":method", "POST"), ("x-team", "red"), (":path", "/mcp")]
        );
        assert_eq!(h.get(PATH), "/mcp");
    }

    #[test]
    fn classification() {
        use Classified::*;
        assert_eq!(
            classify("POST", "application/json", "", false),
            JsonBody { encoded: None }
        );
        assert_eq!(
            classify("POST", "Application/JSON; charset=utf-8", "identity", false),
            JsonBody { encoded: None }
        );
        assert_eq!(
            classify("POST", "application/json", " gzip ", false),
            JsonBody {
                encoded: Some("gzip".into())
            }
        );
        assert_eq!(
            classify("POST", "application/json", "", true),
            EmptyJsonPost
        );
        assert_eq!(classify("POST", "text/plain", "", false), Http);
        assert_eq!(classify("GET", "application/json", "", true), Http);
        assert_eq!(classify("GET", "", "", false), BodyNotRead("GET"));
        assert_eq!(
            classify("DELETE", "application/json", "", false),
            BodyNotRead("DELETE")
        );
        assert_eq!(classify("PUT", "", "", false), Http);
        assert_eq!(classify("PUT", "application/json", "", false), Http);
    }
}
