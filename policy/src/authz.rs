//! External authorizers (docs/semantics.md §3, ExternalAuth): what is sent to them and how their answers are
//! read. Envoy's ext_authz API is the contract, so existing authorizers work unchanged:
//! - gRPC: `envoy.service.auth.v3.Authorization/Check` with the caller principal, the HTTP
//!   attributes (only `allowedHeaders` when set), the body prefix with `forwardBody`, and the parsed
//!   JSON-RPC message as `metadata_context.filter_metadata["mcp_proxy"]` (`jsonrpc`, `id`,
//!   `method`, `params`), which Authorino rules read as `metadata.filter_metadata.mcp_proxy`;
//! - HTTP: the original method, the path prefix + the original path, `host`, `authorization`,
//!   `content-length` and `allowedHeaders`, the body prefix with `forwardBody`, and the caller's
//!   SPIFFE ID in `x-toolgate-principal`; a 2xx allows.
//!
//! Messages are the prost structs of `toolgate-ext-authz-proto` (no protoc at build time); the one
//! message sent, the CheckRequest, is written straight to bytes (authz/wire.rs).

use prost::Message;
use toolgate_ext_authz_proto::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderValueOption,
};
use toolgate_ext_authz_proto::envoy::service::auth::v3::{
    check_response::HttpResponse, CheckResponse,
};
#[cfg(test)]
use toolgate_ext_authz_proto::{
    envoy::config::core::v3::Metadata,
    envoy::service::auth::v3::{attribute_context, AttributeContext, CheckRequest},
    google::protobuf::{value::Kind, Struct, Value},
    json,
};

use crate::call::{CallAnswer, Callout};
use crate::eval::{AuthzFailure, HttpRequest};
use crate::jwt::JWT_METADATA_NAMESPACE;
use crate::mcp::McpMessage;
use crate::plan::{AuthorizerPlan, AuthorizerProtocol};
use wire::Writer;

pub const GRPC_SERVICE: &str = "envoy.service.auth.v3.Authorization";
pub const GRPC_METHOD: &str = "Check";
/// The header carrying the caller's SPIFFE ID to HTTP authorizers (a client's own copy is never
/// forwarded).
pub const PRINCIPAL_HEADER: &str = "x-toolgate-principal";
/// Set (as Envoy's ext_authz does) when the body sent is a prefix of the request's.
pub const PARTIAL_BODY_HEADER: &str = "x-envoy-auth-partial-body";
/// The `filter_metadata` key of the JSON-RPC message in a CheckRequest.
pub const MCP_METADATA_KEY: &str = "mcp_proxy";

const GRPC_DEADLINE_EXCEEDED: u32 = 4;

/// What a call is built from.
pub(crate) struct CallInput<'a> {
    pub req: &'a HttpRequest<'a>,
    pub scheme: &'a str,
    pub request_id: &'a str,
    pub protocol: &'a str,
    /// The JSON-RPC message the call is about (its `params` captured).
    pub message: Option<&'a McpMessage<'a>>,
    /// The whole buffered body (empty when the request was not held).
    pub body: &'a [u8],
}

pub(crate) struct Prepared<'p> {
    pub cluster: &'p str,
    pub call: PreparedCall,
}

pub(crate) enum PreparedCall {
    /// A serialised GrpcService (the upstream) and CheckRequest.
    Grpc { upstream: Vec<u8>, message: Vec<u8> },
    Http {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

/// An authorizer's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Allowed, with these changes to the upstream request.
    Allow(Vec<HeaderEdit>),
    Deny(Denied),
    Fail(AuthzFailure),
}

/// A denial as the authorizer gave it (`status` 0: it gave none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Denied {
    pub status: u32,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A change of the upstream request an authorizer asks for when it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HeaderEdit {
    Set(String, String),
    Append(String, String),
    Remove(String),
}

pub(crate) fn prepare<'p>(authorizer: &'p AuthorizerPlan, input: &CallInput<'_>) -> Prepared<'p> {
    let call = match &authorizer.protocol {
        AuthorizerProtocol::Grpc => PreparedCall::Grpc {
            upstream: grpc_service(authorizer),
            message: check_request_bytes(authorizer, input),
        },
        AuthorizerProtocol::Http { path_prefix, .. } => http_call(authorizer, path_prefix, input),
    };
    Prepared {
        cluster: &authorizer.cluster,
        call,
    }
}

/// The body prefix sent with `forwardBody`, and whether it is partial.
fn forwarded_body<'b>(authorizer: &AuthorizerPlan, body: &'b [u8]) -> (&'b [u8], bool) {
    let max = authorizer.forward_body_bytes as usize;
    let sent = body.get(..max.min(body.len())).unwrap_or_default();
    // Without forwardBody no body is sent at all, and the header would only mislead (Envoy's ext_authz
    // sets it only when it sends a body).
    (sent, max > 0 && sent.len() < body.len())
}

fn sent_headers<'r>(
    authorizer: &'r AuthorizerPlan,
    req: &'r HttpRequest<'_>,
) -> impl Iterator<Item = (&'r str, &'r str)> {
    req.headers.iter().copied().filter(move |(name, _)| {
        *name != PRINCIPAL_HEADER
            && (authorizer.allowed_headers.is_empty()
                || authorizer.allowed_headers.iter().any(|a| a == name))
    })
}

/// The serialised `GrpcService` naming the authorizer's cluster and authority (prost's encoding of
/// `GrpcService { envoy_grpc: Some(EnvoyGrpc { cluster_name, authority }) }`).
fn grpc_service(authorizer: &AuthorizerPlan) -> Vec<u8> {
    let mut w = Writer::with_capacity(8 + authorizer.cluster.len() + authorizer.authority.len());
    w.message(1, |w| {
        w.bytes(1, authorizer.cluster.as_bytes());
        w.bytes(2, authorizer.authority.as_bytes());
    });
    w.buf
}

/// The serialised CheckRequest of a call: the message [`check_request`] builds with prost, written
/// straight to bytes (wire.rs says why; authz/tests.rs checks they decode the same). Long: the
/// message's fields in wire order, one write each, as `check_request` builds them.
fn check_request_bytes(authorizer: &AuthorizerPlan, input: &CallInput<'_>) -> Vec<u8> {
    let req = input.req;
    // `headers` is a map: repeated headers are brought together by a stable sort (which keeps their
    // values in order) and joined with "," as Envoy's ext_authz does. Map entries have no order:
    // without repeated names (the usual request, found by comparing lengths first) the headers are
    // written as they came, else sorted by length, then name.
    // Sized up front: collected from a filter, the Vec would grow (reallocate) twice for 11 headers.
    let mut sent: Vec<(&str, &str)> = Vec::with_capacity(req.headers.len() + 1);
    sent.extend(sent_headers(authorizer, req));
    let (body, partial) = forwarded_body(authorizer, input.body);
    if partial {
        sent.retain(|(name, _)| *name != PARTIAL_BODY_HEADER);
        sent.push((PARTIAL_BODY_HEADER, "true"));
    }
    let grouped: Vec<(&str, String)>;
    let entries: Vec<(&str, &str)> = if all_distinct(&sent) {
        sent
    } else {
        sent.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(b.0)));
        grouped = sent
            .chunk_by(|a, b| a.0 == b.0)
            .map(|same| {
                (
                    same.first().map_or("", |h| h.0),
                    same.iter().map(|(_, v)| *v).collect::<Vec<_>>().join(","),
                )
            })
            .collect();
        grouped
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect()
    };
    let principal = req.principal.unwrap_or_default().as_bytes();
    let size = if input.body.is_empty() {
        -1
    } else {
        i64::try_from(input.body.len()).unwrap_or(i64::MAX)
    };
    let body_field = if std::str::from_utf8(body).is_ok() {
        11
    } else {
        12
    };
    // The mcp_proxy Struct is written first, into its own buffer: its length is then known, like
    // every other length, and the messages around it are written once with their lengths (no
    // placeholder patched and moved for them; wire.rs).
    let meta = input.message.map(|m| {
        let params = m.params.map_or(0, str::len);
        let mut w = Writer::with_capacity(64 + 2 * params);
        mcp_fields(&mut w, m);
        w.buf
    });
    // Sizes, innermost first: HttpRequest, Request, the filter_metadata entry, AttributeContext.
    let http = wire::bytes_size(1, input.request_id.len())
        + wire::bytes_size(2, req.method.len())
        + entries
            .iter()
            .map(|(name, value)| wire::string_entry_size(3, name, value))
            .sum::<usize>()
        + wire::bytes_size(4, req.path.len())
        + wire::bytes_size(5, req.authority.len())
        + wire::bytes_size(6, input.scheme.len())
        + wire::int64_size(9, size)
        + wire::bytes_size(10, input.protocol.len())
        + wire::bytes_size(body_field, body.len());
    let request = wire::message_size(2, http);
    let entry = meta
        .as_ref()
        .map(|m| wire::bytes_size(1, MCP_METADATA_KEY.len()) + wire::message_size(2, m.len()));
    // The verified token's namespace (docs/semantics.md §6b), as Envoy's ext_authz sends it with
    // `metadata_context_namespaces: [envoy.filters.http.jwt_authn]`.
    let jwt = req.auth.map(|a| a.raw.as_slice());
    let jwt_entry = jwt.map(|raw| {
        wire::bytes_size(1, JWT_METADATA_NAMESPACE.len()) + wire::message_size(2, raw.len())
    });
    let metadata = match (entry, jwt_entry) {
        (None, None) => None,
        (e, j) => Some(
            e.map_or(0, |e| wire::message_size(1, e)) + j.map_or(0, |j| wire::message_size(1, j)),
        ),
    };
    let attributes = wire::message_size(1, wire::bytes_size(4, principal.len()))
        + wire::message_size(2, 0)
        + wire::message_size(4, request)
        + metadata.map_or(0, |m| wire::message_size(11, m));
    let mut w = Writer::with_capacity(wire::message_size(1, attributes));
    // CheckRequest.attributes (1): AttributeContext.
    w.head(1, attributes);
    // source (1): Peer.principal (4); destination (2): an empty Peer.
    w.head(1, wire::bytes_size(4, principal.len()));
    w.bytes(4, principal);
    w.head(2, 0);
    // request (4): Request.http (2): HttpRequest.
    w.head(4, request);
    w.head(2, http);
    w.bytes(1, input.request_id.as_bytes());
    w.bytes(2, req.method.as_bytes());
    for (name, value) in &entries {
        w.string_entry(3, name, value);
    }
    w.bytes(4, req.path.as_bytes());
    w.bytes(5, req.authority.as_bytes());
    w.bytes(6, input.scheme.as_bytes());
    w.int64(9, size);
    w.bytes(10, input.protocol.as_bytes());
    w.bytes(body_field, body);
    // metadata_context (11): Metadata.filter_metadata (1)["mcp_proxy"] and
    // ["envoy.filters.http.jwt_authn"], Structs.
    if let Some(metadata) = metadata {
        w.head(11, metadata);
        if let (Some(meta), Some(entry)) = (meta, entry) {
            w.head(1, entry);
            w.bytes(1, MCP_METADATA_KEY.as_bytes());
            w.head(2, meta.len());
            w.buf.extend_from_slice(&meta);
        }
        if let (Some(raw), Some(entry)) = (jwt, jwt_entry) {
            w.head(1, entry);
            w.bytes(1, JWT_METADATA_NAMESPACE.as_bytes());
            w.head(2, raw.len());
            w.buf.extend_from_slice(raw);
        }
    }
    debug_assert_eq!(w.buf.len(), wire::message_size(1, attributes));
    w.buf
}

/// Whether no name comes twice. Pairwise, lengths first (most names differ in length): cheaper in the
/// VM than sorting by name for a request's dozen headers; past 32 headers the sort's n·log n is
/// the bound, so those are reported as possibly repeated.
fn all_distinct(headers: &[(&str, &str)]) -> bool {
    headers.len() <= 32
        && headers.iter().enumerate().all(|(i, (name, _))| {
            headers
                .get(..i)
                .unwrap_or_default()
                .iter()
                .all(|(other, _)| other.len() != name.len() || other != name)
        })
}

/// The fields of the JSON-RPC message's Struct (see [`mcp_struct`]), in prost's (sorted) order.
fn mcp_fields(w: &mut Writer, m: &McpMessage<'_>) {
    if let Some(id) = m.id {
        let _ = w.json_entry(1, "id", id);
    }
    w.map_entry(1, "jsonrpc", |w| w.string_value("2.0"));
    if let Some(method) = m.method.as_deref() {
        w.map_entry(1, "method", |w| w.string_value(method));
    }
    if let Some(params) = m.params {
        let _ = w.json_entry(1, "params", params);
    }
}

/// The CheckRequest of a call as prost messages: what [`check_request_bytes`] writes (the tests'
/// reference).
#[cfg(test)]
fn check_request(authorizer: &AuthorizerPlan, input: &CallInput<'_>) -> CheckRequest {
    let req = input.req;
    let mut headers: std::collections::BTreeMap<_, _> =
        crate::cel_rule::joined_headers(sent_headers(authorizer, req))
            .into_iter()
            .collect();
    let (body, partial) = forwarded_body(authorizer, input.body);
    if partial {
        headers.insert(PARTIAL_BODY_HEADER.into(), "true".into());
    }
    let (body, raw_body) = match std::str::from_utf8(body) {
        Ok(text) => (text.to_string(), Vec::new()),
        Err(_) => (String::new(), body.to_vec()),
    };
    let http = attribute_context::HttpRequest {
        id: input.request_id.to_string(),
        method: req.method.to_string(),
        headers,
        path: req.path.to_string(),
        host: req.authority.to_string(),
        scheme: input.scheme.to_string(),
        size: if input.body.is_empty() {
            -1
        } else {
            i64::try_from(input.body.len()).unwrap_or(i64::MAX)
        },
        protocol: input.protocol.to_string(),
        body,
        raw_body,
        ..Default::default()
    };
    let mut filter_metadata = std::collections::BTreeMap::new();
    if let Some(m) = input.message {
        filter_metadata.insert(MCP_METADATA_KEY.to_string(), mcp_struct(m));
    }
    if let Some(auth) = req.auth {
        filter_metadata.insert(
            JWT_METADATA_NAMESPACE.to_string(),
            Struct::decode(auth.raw.as_slice()).unwrap_or_default(),
        );
    }
    let metadata_context = (!filter_metadata.is_empty()).then(|| Metadata {
        filter_metadata: filter_metadata.into_iter().collect(),
        ..Default::default()
    });
    CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(attribute_context::Peer {
                principal: req.principal.unwrap_or_default().to_string(),
                ..Default::default()
            }),
            destination: Some(attribute_context::Peer {
                ..Default::default()
            }),
            request: Some(attribute_context::Request {
                time: None,
                http: Some(http),
            }),
            metadata_context,
            ..Default::default()
        }),
    }
}

/// The JSON-RPC message as a Struct: `jsonrpc`, `id` (its JSON type kept), `method`, `params`.
#[cfg(test)]
fn mcp_struct(m: &McpMessage<'_>) -> Struct {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_string())),
    };
    let raw = |text: &str| json::parse_value(text).ok();
    let mut fields = std::collections::BTreeMap::new();
    fields.insert("jsonrpc".to_string(), string("2.0"));
    if let Some(id) = m.id.and_then(raw) {
        fields.insert("id".to_string(), id);
    }
    if let Some(method) = m.method.as_deref() {
        fields.insert("method".to_string(), string(method));
    }
    if let Some(params) = m.params.and_then(raw) {
        fields.insert("params".to_string(), params);
    }
    Struct { fields }
}

fn http_call(
    authorizer: &AuthorizerPlan,
    path_prefix: &str,
    input: &CallInput<'_>,
) -> PreparedCall {
    let req = input.req;
    let (body, partial) = forwarded_body(authorizer, input.body);
    let mut headers: Vec<(String, String)> = vec![
        (":method".into(), req.method.to_string()),
        (":path".into(), format!("{path_prefix}{}", req.path)),
        (":authority".into(), req.authority.to_string()),
        ("content-length".into(), body.len().to_string()),
    ];
    let always = |name: &str| matches!(name, "authorization");
    for (name, value) in req.headers {
        let allowed = always(name) || authorizer.allowed_headers.iter().any(|a| a == name);
        let ours =
            name.starts_with(':') || matches!(*name, "host" | "content-length" | PRINCIPAL_HEADER);
        if allowed && !ours {
            headers.push((name.to_string(), value.to_string()));
        }
    }
    if let Some(principal) = req.principal {
        headers.push((PRINCIPAL_HEADER.into(), principal.to_string()));
    }
    if partial {
        headers.push((PARTIAL_BODY_HEADER.into(), "true".into()));
    }
    PreparedCall::Http {
        headers,
        body: body.to_vec(),
    }
}

/// Reads how a call ended. `timed_out`: the plan's timeout had passed when it ended.
/// `timed_out`: whether the call ran out of time, asked only of a call that failed (an allow does
/// not read the clock).
pub(crate) fn read_answer(
    authorizer: &AuthorizerPlan,
    answer: CallAnswer,
    timed_out: impl FnOnce() -> bool,
) -> Answer {
    let failed = |timed_out: bool| {
        Answer::Fail(if timed_out {
            AuthzFailure::Timeout
        } else {
            AuthzFailure::Unavailable
        })
    };
    match (answer, &authorizer.protocol) {
        (CallAnswer::Failed, _) => failed(timed_out()),
        (CallAnswer::Grpc { status, .. }, AuthorizerProtocol::Grpc) if status != 0 => {
            if status == GRPC_DEADLINE_EXCEEDED || timed_out() {
                Answer::Fail(AuthzFailure::Timeout)
            } else {
                Answer::Fail(AuthzFailure::Unavailable)
            }
        }
        (CallAnswer::Grpc { message, .. }, AuthorizerProtocol::Grpc) => {
            match CheckResponse::decode(message.as_slice()) {
                Ok(response) => read_check_response(response),
                Err(_) => Answer::Fail(AuthzFailure::Malformed),
            }
        }
        (
            CallAnswer::Http { headers, body },
            AuthorizerProtocol::Http {
                allowed_response_headers,
                ..
            },
        ) => match read_http_response(allowed_response_headers, headers, body) {
            Answer::Fail(AuthzFailure::Unavailable) if timed_out() => {
                Answer::Fail(AuthzFailure::Timeout)
            }
            answer => answer,
        },
        // An answer of the other protocol: the host mixed up calls.
        _ => Answer::Fail(AuthzFailure::Malformed),
    }
}

/// A header an authorizer may set on the upstream request or on its denial.
fn settable(name: &str, value: &str) -> bool {
    let hop_by_hop = matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "trailer"
    );
    !name.is_empty()
        && !name.starts_with(':')
        && !hop_by_hop
        && !matches!(name, "host" | "content-length")
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase())
        && value.bytes().all(|b| b != 0 && b != b'\r' && b != b'\n')
}

fn read_check_response(response: CheckResponse) -> Answer {
    let ok = response.status.as_ref().is_none_or(|s| s.code == 0);
    match (ok, response.http_response) {
        (true, Some(HttpResponse::OkResponse(ok))) => {
            let mut edits = Vec::new();
            for option in &ok.headers {
                let Some(h) = &option.header else { continue };
                let name = h.key.to_ascii_lowercase();
                let value = if h.value.is_empty() {
                    String::from_utf8_lossy(&h.raw_value).into_owned()
                } else {
                    h.value.clone()
                };
                if !settable(&name, &value) {
                    continue;
                }
                edits.push(if appends(option) {
                    HeaderEdit::Append(name, value)
                } else {
                    HeaderEdit::Set(name, value)
                });
            }
            for name in &ok.headers_to_remove {
                let name = name.to_ascii_lowercase();
                if settable(&name, "") {
                    edits.push(HeaderEdit::Remove(name));
                }
            }
            Answer::Allow(edits)
        }
        (true, None | Some(HttpResponse::DeniedResponse(_))) => Answer::Allow(Vec::new()),
        (_, Some(HttpResponse::ErrorResponse(_))) => Answer::Fail(AuthzFailure::Unavailable),
        (false, Some(HttpResponse::DeniedResponse(denied))) => {
            let status = denied
                .status
                .map_or(0, |s| u32::try_from(s.code).unwrap_or(0));
            let headers = denied
                .headers
                .iter()
                .filter_map(|o| o.header.as_ref())
                .map(|h| (h.key.to_ascii_lowercase(), h.value.clone()))
                .filter(|(k, v)| settable(k, v))
                .collect();
            Answer::Deny(Denied {
                status: if (200..600).contains(&status) {
                    status
                } else {
                    0
                },
                headers,
                body: denied.body.into_bytes(),
            })
        }
        (false, _) => Answer::Deny(Denied {
            status: 0,
            headers: Vec::new(),
            body: Vec::new(),
        }),
    }
}

/// Whether a header option adds a value rather than replacing (Envoy: the deprecated `append`
/// when set, else `append_action`).
fn appends(option: &HeaderValueOption) -> bool {
    match &option.append {
        Some(append) => append.value,
        None => option.append_action == HeaderAppendAction::AppendIfExistsOrAdd as i32,
    }
}

fn read_http_response(allowed: &[String], headers: Vec<(String, String)>, body: Vec<u8>) -> Answer {
    let Some(status) = headers
        .iter()
        .find(|(k, _)| k == ":status")
        .and_then(|(_, v)| v.parse::<u32>().ok())
    else {
        return Answer::Fail(AuthzFailure::Malformed);
    };
    // A 1xx is never a final answer: passed on as a denial it would be the status of the filter's
    // local reply (found by the lifecycle fuzz target).
    if !(200..600).contains(&status) {
        return Answer::Fail(AuthzFailure::Malformed);
    }
    // A 5xx is an error, not a decision (as in Envoy's ext_authz HTTP client). It is also what Envoy's
    // async client answers itself when the call failed: 503 when the authorizer cannot be reached,
    // 502 "... reset reason: protocol error" when its answer was not HTTP (measured, Envoy 1.40).
    if status >= 500 {
        let protocol_error = status == 502 && body.windows(14).any(|w| w == b"protocol error");
        return Answer::Fail(if protocol_error {
            AuthzFailure::Malformed
        } else {
            AuthzFailure::Unavailable
        });
    }
    let passed = headers.into_iter().filter(|(k, v)| settable(k, v));
    if (200..300).contains(&status) {
        let copied = passed.filter(|(k, _)| {
            if allowed.is_empty() {
                !matches!(
                    k.as_str(),
                    "content-type" | "content-encoding" | "date" | "server"
                )
            } else {
                allowed.iter().any(|a| a == k)
            }
        });
        Answer::Allow(copied.map(|(k, v)| HeaderEdit::Set(k, v)).collect())
    } else {
        Answer::Deny(Denied {
            status,
            headers: passed.collect(),
            body,
        })
    }
}

/// The answer an authorizer that allows (or denies, with a 403) gives to `callout`: what
/// `toolgate explain` assumes, since it cannot ask.
pub fn assumed_answer(callout: &Callout<'_>, allow: bool) -> CallAnswer {
    match callout {
        Callout::Grpc { .. } => {
            let code = if allow { 0 } else { 7 };
            let response = CheckResponse {
                status: Some(toolgate_ext_authz_proto::google::rpc::Status {
                    code,
                    ..Default::default()
                }),
                ..Default::default()
            };
            CallAnswer::Grpc {
                status: 0,
                message: response.encode_to_vec(),
            }
        }
        Callout::Http { .. } => CallAnswer::Http {
            headers: vec![(":status".into(), if allow { "200" } else { "403" }.into())],
            body: Vec::new(),
        },
    }
}

mod wire;

#[cfg(test)]
mod tests;
