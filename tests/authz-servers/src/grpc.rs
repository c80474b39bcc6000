//! The gRPC authorizer: `envoy.service.auth.v3.Authorization/Check` over HTTP/2 (prior knowledge,
//! h2c, as an Envoy cluster with `http2_protocol_options` speaks it), on hyper, with the gRPC framing
//! written out by hand (5-byte prefix: compressed flag, big-endian length) and the prost messages of
//! `toolgate-ext-authz-proto`. Any gRPC client works (the tests use tonic's).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use serde_json::{json, Map, Value as Json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use toolgate_ext_authz_proto::envoy::config::core::v3::{
    address, socket_address::PortSpecifier, Address,
};
use toolgate_ext_authz_proto::google::rpc::{code, Status};
use toolgate_ext_authz_proto::json::{from_struct, MCP_PROXY_NAMESPACE};
use toolgate_ext_authz_proto::{
    check_response::HttpResponse, CheckRequest, CheckResponse, DeniedHttpResponse,
    HeaderValueOption, HttpStatus, OkHttpResponse, CHECK_PATH,
};

use crate::rule::{tool_name, Rule};
use crate::State;

/// Bytes that decode as no CheckResponse: field 1 with wire type 7, which does not exist.
pub const GARBAGE: &[u8] = b"\x0f\xff\xff\xff\xffnot a CheckResponse";

pub async fn serve(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let abort = Arc::new(Notify::new());
            let abort2 = abort.clone();
            let svc = hyper::service::service_fn(move |req| {
                let (state, abort) = (state.clone(), abort2.clone());
                async move { Ok::<_, Infallible>(handle(req, state, abort).await) }
            });
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                // close_mid_reply: drop the connection (TCP close, no GOAWAY) with the reply half sent.
                _ = abort.notified() => {}
            }
        });
    }
}

/// A unary gRPC response body: one data chunk, then trailers, or (`hang`) nothing more after the
/// data until the connection is dropped.
pub struct GrpcBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
    hang: bool,
}

impl Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if self.hang {
            return Poll::Pending;
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none() && !self.hang
    }
}

fn frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

fn grpc_response(
    data: Option<Bytes>,
    status: i32,
    message: &str,
    hang: bool,
) -> Response<GrpcBody> {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(status));
    if !message.is_empty() {
        // grpc-message is percent-encoded; keep it to safe ASCII.
        let safe: String = message
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != '%' || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        trailers.insert("grpc-message", HeaderValue::from_str(&safe).unwrap());
    }
    if data.is_none() {
        // Trailers-only response: the status travels in the headers.
        let mut resp = Response::new(GrpcBody {
            data: None,
            trailers: None,
            hang: false,
        });
        resp.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/grpc"));
        resp.headers_mut().extend(trailers);
        return resp;
    }
    let mut resp = Response::new(GrpcBody {
        data,
        trailers: Some(trailers),
        hang,
    });
    resp.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    resp
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    abort: Arc<Notify>,
) -> Response<GrpcBody> {
    if req.uri().path() != CHECK_PATH {
        return grpc_response(
            None,
            12,
            &format!("unimplemented: {}", req.uri().path()),
            false,
        );
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return grpc_response(None, code::UNKNOWN, &format!("reading request: {e}"), false)
        }
    };
    if body.len() < 5
        || body[0] != 0
        || body.len() - 5 != u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize
    {
        return grpc_response(None, 13, "expected one uncompressed gRPC message", false);
    }
    let check = match CheckRequest::decode(&body[5..]) {
        Ok(c) => c,
        Err(e) => return grpc_response(None, 13, &format!("not a CheckRequest: {e}"), false),
    };
    let mut entry = describe(&check);
    let rule = match Rule::load(state.rule.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            entry["error"] = json!(e);
            state.log.write(&entry);
            return grpc_response(None, 13, &e, false);
        }
    };
    let principal = entry["principal"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    let mcp = if entry["mcp_proxy"].is_object() {
        Some(entry["mcp_proxy"].clone())
    } else {
        None
    };
    // Native Envoy ext_authz sends no mcp_proxy metadata: fall back to the request body.
    let mcp = mcp.or_else(|| {
        entry["body"]
            .as_str()
            .and_then(|b| serde_json::from_str::<Json>(b).ok())
    });
    let decision = rule.decide(principal.as_deref(), mcp.as_ref());
    entry["tool"] = json!(tool_name(mcp.as_ref()));
    entry["decision"] = json!(if decision.allow { "allow" } else { "deny" });
    entry["reason"] = json!(decision.reason);
    entry["mode"] = json!(crate::mode(&rule));
    state.log.write(&entry);

    if rule.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(rule.delay_ms)).await;
    }
    if rule.garbage {
        return grpc_response(Some(frame(GARBAGE)), 0, "", false);
    }
    let reply = check_response(&rule, decision.allow, &decision.reason).encode_to_vec();
    if rule.close_mid_reply {
        // The frame announces the whole message; only half of it is sent, then the connection drops.
        let whole = frame(&reply);
        let half = whole.slice(..5 + reply.len() / 2);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            abort.notify_one();
        });
        return grpc_response(Some(half), 0, "", true);
    }
    grpc_response(Some(frame(&reply)), 0, "", false)
}

/// The CheckResponse for a decision under `rule`.
pub fn check_response(rule: &Rule, allow: bool, reason: &str) -> CheckResponse {
    let headers = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| HeaderValueOption::new(k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    if allow {
        CheckResponse {
            status: Some(Status {
                code: code::OK,
                ..Default::default()
            }),
            http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
                headers: headers(&rule.ok_headers),
                ..Default::default()
            })),
            dynamic_metadata: None,
        }
    } else {
        CheckResponse {
            status: Some(Status {
                code: code::PERMISSION_DENIED,
                message: reason.to_string(),
                details: vec![],
            }),
            http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
                status: Some(HttpStatus {
                    code: rule.deny_status as i32,
                }),
                headers: headers(&rule.deny_headers),
                body: rule.deny_body.clone(),
            })),
            dynamic_metadata: None,
        }
    }
}

fn address(a: &Option<Address>) -> Json {
    match a.as_ref().and_then(|a| a.address.as_ref()) {
        Some(address::Address::SocketAddress(s)) => match &s.port_specifier {
            Some(PortSpecifier::PortValue(p)) => json!(format!("{}:{p}", s.address)),
            Some(PortSpecifier::NamedPort(p)) => json!(format!("{}:{p}", s.address)),
            None => json!(s.address),
        },
        Some(address::Address::Pipe(p)) => json!(format!("unix:{}", p.path)),
        Some(address::Address::EnvoyInternalAddress(_)) => json!("envoy-internal"),
        None => Json::Null,
    }
}

/// The log entry for a CheckRequest: the fields a test asserts on, metadata as plain JSON.
pub fn describe(check: &CheckRequest) -> Json {
    let attrs = check.attributes.clone().unwrap_or_default();
    let source = attrs.source.unwrap_or_default();
    let destination = attrs.destination.unwrap_or_default();
    let request = attrs.request.unwrap_or_default();
    let http = request.http.unwrap_or_default();
    let metadata: Map<String, Json> = attrs
        .metadata_context
        .map(|m| {
            m.filter_metadata
                .iter()
                .map(|(k, v)| (k.clone(), Json::Object(from_struct(v))))
                .collect()
        })
        .unwrap_or_default();
    let route_metadata: Map<String, Json> = attrs
        .route_metadata_context
        .map(|m| {
            m.filter_metadata
                .iter()
                .map(|(k, v)| (k.clone(), Json::Object(from_struct(v))))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "kind": "grpc",
        "principal": source.principal,
        "source_address": address(&source.address),
        "destination_principal": destination.principal,
        "destination_address": address(&destination.address),
        "method": http.method,
        "path": http.path,
        "host": http.host,
        "scheme": http.scheme,
        "protocol": http.protocol,
        "id": http.id,
        "size": http.size,
        "headers": http.headers,
        "header_map": http.header_map.map(|m| m.headers.iter().map(|h| json!([h.key,
            if h.raw_value.is_empty() { h.value.clone() } else { String::from_utf8_lossy(&h.raw_value).into_owned() }])).collect::<Vec<_>>()),
        "body": http.body,
        "raw_body": String::from_utf8_lossy(&http.raw_body),
        "context_extensions": attrs.context_extensions,
        "mcp_proxy": metadata.get(MCP_PROXY_NAMESPACE).cloned().unwrap_or(Json::Null),
        "metadata": metadata,
        "route_metadata": route_metadata,
        "tls_sni": attrs.tls_session.map(|t| t.sni),
        "time": request.time.map(|t| t.seconds),
    })
}
