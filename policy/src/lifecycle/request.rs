//! The request as the evaluator sees it: its HTTP attributes and its body from what the lifecycle
//! holds, the host attributes it reads, and one step of a route's walk.

use super::headers::{self, Classified, RequestHeaders, WantedHeaders};
use super::{Held, Host, Loaded, Property};
use crate::authz::{self, CallInput};
use crate::eval::{BodyInput, HttpRequest, Step};
use crate::mcp::{self, KeptBody, NotMcp, ReadOptions};

/// A step of `route`'s walk, recorded when the host keeps a record (`toolgate explain`). Decided at
/// compile time ([`Host::RECORDS`]): the proxies' code has no recording walk in it.
pub(super) fn step<'e, H: Host>(
    host: &mut H,
    route: &crate::eval::Route<'e>,
    req: &HttpRequest<'_>,
    body: BodyInput<'_, '_>,
    authorized: u32,
) -> Step<'e> {
    if H::RECORDS {
        if let Some(record) = host.recorder() {
            return route.step_recorded(req, body, authorized, record);
        }
    }
    route.step(req, body, authorized)
}

/// The authorizer call a walk asks for, about the JSON-RPC message it names (the enforced and the
/// shadow walk alike).
pub(super) fn prepare_call<'p>(
    authorizer: &'p crate::plan::AuthorizerPlan,
    held: &Held,
    req: &HttpRequest<'_>,
    body: BodyInput<'_, '_>,
    message: Option<usize>,
) -> authz::Prepared<'p> {
    let message = match (body, message) {
        (BodyInput::Mcp(mcp), Some(i)) => mcp.messages().get(i),
        _ => None,
    };
    let input = CallInput {
        req,
        scheme: held.headers.get(headers::SCHEME),
        request_id: held.headers.get(headers::REQUEST_ID),
        protocol: held.protocol.as_deref().unwrap_or(""),
        message,
        body: &held.body,
    };
    authz::prepare(authorizer, &input)
}

/// Runs `f` on the request as the evaluator sees it: its HTTP attributes and its body. The body is
/// read from the held bytes the first time, and rebuilt from what that read found afterwards (it
/// keeps nothing borrowed across callbacks). Returns what `f` gave and, when the body was read now
/// and `keep` says a later step needs it, the read to keep in `held`.
pub(super) fn with_request<T>(
    held: &Held,
    loaded: &Loaded,
    f: impl FnOnce(&HttpRequest<'_>, BodyInput<'_, '_>) -> T,
    keep: impl FnOnce(&T) -> bool,
) -> (T, Option<Result<KeptBody, NotMcp>>) {
    let opts = ReadOptions {
        capture_params: loaded.needs.params(),
    };
    http_request(held, |req| match &held.classified {
        Classified::Http => (f(req, BodyInput::None), None),
        Classified::EmptyJsonPost => (f(req, BodyInput::NotMcp(&NotMcp::EmptyBody)), None),
        &Classified::BodyNotRead(method) => (
            f(req, BodyInput::NotMcp(&NotMcp::BodyNotRead { method })),
            None,
        ),
        Classified::JsonBody {
            encoded: Some(encoding),
        } => (
            f(
                req,
                BodyInput::NotMcp(&NotMcp::Encoded {
                    encoding: encoding.clone(),
                }),
            ),
            None,
        ),
        Classified::JsonBody { encoded: None } => match &held.read {
            Some(Ok(kept)) => match kept.body(&held.body) {
                Ok(body) => (f(req, BodyInput::Mcp(&body)), None),
                Err(e) => (f(req, BodyInput::NotMcp(&e)), None), // unreachable: the same bytes were read
            },
            Some(Err(e)) => (f(req, BodyInput::NotMcp(e)), None),
            None => match read(&held.body, opts, loaded) {
                Ok(body) => {
                    let t = f(req, BodyInput::Mcp(&body));
                    let kept = keep(&t).then(|| Ok(KeptBody::keep(body, &held.body)));
                    (t, kept)
                }
                Err(e) => {
                    let t = f(req, BodyInput::NotMcp(&e));
                    let kept = keep(&t).then_some(Err(e));
                    (t, kept)
                }
            },
        },
    })
}

/// Reads a body with the plugin's reader memory.
fn read<'b>(
    body: &'b [u8],
    opts: ReadOptions,
    loaded: &Loaded,
) -> Result<mcp::McpBody<'b>, NotMcp> {
    match loaded.reader.try_borrow_mut() {
        Ok(mut scratch) => mcp::read_body_with(body, opts, &mut scratch),
        Err(_) => mcp::read_body(body, opts), // unreachable: no read runs inside another
    }
}

/// Runs `f` on the HTTP attributes of a held request.
pub(super) fn http_request<T>(held: &Held, f: impl FnOnce(&HttpRequest<'_>) -> T) -> T {
    let run = |pairs: &[(&str, &str)]| {
        f(&HttpRequest {
            method: held.headers.get(headers::METHOD),
            path: held.headers.get(headers::PATH),
            authority: held.headers.get(headers::AUTHORITY),
            port: held.port,
            headers: pairs,
            principal: held.principal.as_deref(),
            server_name: held.server_name.as_deref(),
            auth: held.auth.as_ref(),
            time_ms: held.time_ms,
        })
    };
    // The kept headers as pairs: on the stack for the usual few (an allocation and its free cost
    // more in the VM than filling them), else in a Vec.
    const ON_STACK: usize = 16;
    if held.headers.len() <= ON_STACK {
        let mut pairs = [("", ""); ON_STACK];
        let n = held.headers.fill(&mut pairs);
        run(pairs.get(..n).unwrap_or_default())
    } else {
        run(&held.headers.pairs())
    }
}

/// docs/semantics.md §6b: a request with more than one `authorization` field, or one whose value holds
/// several (`,`: Envoy joins repeated fields so), has no claims: Envoy's jwt_authn finds its token
/// anywhere in the joined value, so the upstream could read another credential than the one verified.
/// A header count, not a token read.
pub(super) fn one_credential(headers: &RequestHeaders) -> bool {
    let mut values = headers
        .pairs()
        .into_iter()
        .filter(|(n, _)| *n == "authorization")
        .map(|(_, v)| v);
    match (values.next(), values.next()) {
        (Some(v), None) => !v.contains(','),
        (None, _) => true,
        _ => false,
    }
}

pub(super) fn read_headers(host: &mut impl Host, wanted: &WantedHeaders) -> RequestHeaders {
    let mut sink = RequestHeaders::sink(wanted);
    if host.request_headers(&mut sink) {
        sink.into_headers()
    } else {
        RequestHeaders::default()
    }
}

pub(super) fn property_string(host: &mut impl Host, property: Property) -> Option<String> {
    host.property(property)
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|s| !s.is_empty())
}

/// The listener port (`destination.port` is the local address of the downstream connection).
pub(super) fn listener_port(host: &mut impl Host) -> u16 {
    host.property(Property::DestinationPort)
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(i64::from_le_bytes)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0)
}
