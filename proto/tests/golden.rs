//! Golden encodings made by Google's protobuf runtime from the upstream .proto files
//! (testdata/gen_golden.py): the hand-written structs must decode them to the expected values and
//! encode the same values to the same bytes. This is what pins the field numbers and wire types.

use prost::Message;
use serde_json::json;
use toolgate_ext_authz_proto::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, socket_address::Protocol, Address, HeaderMap,
    HeaderValue, HeaderValueOption, Metadata, QueryParameter,
};
use toolgate_ext_authz_proto::envoy::r#type::v3::{HttpStatus, StatusCode};
use toolgate_ext_authz_proto::envoy::service::auth::v3::{
    attribute_context::{HttpRequest, Peer, Request, TlsSession},
    check_response::HttpResponse,
    AttributeContext, CheckRequest, CheckResponse, DeniedHttpResponse, OkHttpResponse,
};
use toolgate_ext_authz_proto::google::protobuf::{Any, BoolValue, Struct, Timestamp};
use toolgate_ext_authz_proto::google::rpc::Status;
use toolgate_ext_authz_proto::json::{from_struct, object_to_struct, MCP_PROXY_NAMESPACE};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/{name}.hex", env!("CARGO_MANIFEST_DIR"));
    let hex = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn strukt(v: serde_json::Value) -> Struct {
    object_to_struct(&v).unwrap()
}

fn map<const N: usize>(kv: [(&str, &str); N]) -> std::collections::BTreeMap<String, String> {
    kv.into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `exact`: prost's bytes must equal protobuf's. Not for messages whose maps have entries in an order
/// protobuf-python (upb) chose: its "deterministic" map order is not plain key order (it wrote
/// `none` before `n`), and map entry order is free on the wire anyway. Those are checked by length,
/// and by prost decoding its own encoding back to the same value.
fn check<M: Message + Default + PartialEq + std::fmt::Debug>(name: &str, expected: M, exact: bool) {
    let bytes = fixture(name);
    let decoded = M::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(decoded, expected, "{name}: decoded");
    let ours = expected.encode_to_vec();
    assert_eq!(ours.len(), bytes.len(), "{name}: encoded length");
    assert_eq!(
        M::decode(ours.as_slice()).unwrap(),
        expected,
        "{name}: prost round trip"
    );
    if exact {
        assert_eq!(
            hex(&ours),
            hex(&bytes),
            "{name}: prost encoding differs from protobuf's"
        );
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn hvo(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption::new(key, value)
}

#[test]
fn check_request() {
    let mut source = Peer {
        address: Some(Address::socket("10.0.0.7", 40123)),
        service: "agent-a".into(),
        labels: map([("app", "agent")]),
        principal: "spiffe://cluster.local/ns/default/sa/a".into(),
        certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
    };
    let destination = Peer {
        address: Some(Address::socket("127.0.0.1", 8443)),
        principal: "spiffe://cluster.local/ns/default/sa/gateway".into(),
        ..Default::default()
    };
    let http = HttpRequest {
        id: "8d2f3c1e-1".into(),
        method: "POST".into(),
        headers: map([
            (":authority", "mcp.example.com"),
            ("content-type", "application/json"),
            ("mcp-session-id", "s-1"),
        ]),
        header_map: Some(HeaderMap {
            headers: vec![
                HeaderValue {
                    key: "content-type".into(),
                    raw_value: b"application/json".to_vec(),
                    ..Default::default()
                },
                HeaderValue {
                    key: "x-dup".into(),
                    value: "a".into(),
                    ..Default::default()
                },
            ],
        }),
        path: "/mcp?x=1".into(),
        host: "mcp.example.com".into(),
        scheme: "https".into(),
        query: "x=1".into(),
        fragment: "frag".into(),
        size: 81,
        protocol: "HTTP/1.1".into(),
        body: r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#.into(),
        raw_body: vec![0, 0xff, 1],
    };
    let mcp = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo",
        "arguments": {"text": "hi", "n": -2.5, "ok": true, "none": null, "list": [1, "two", []]}}});
    let expected = CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(source.clone()),
            destination: Some(destination),
            request: Some(Request {
                time: Some(Timestamp {
                    seconds: 1_767_225_600,
                    nanos: 123_000_000,
                }),
                http: Some(http),
            }),
            context_extensions: map([("backend", "tools"), ("policy", "default/ext")]),
            metadata_context: Some(Metadata {
                filter_metadata: [(MCP_PROXY_NAMESPACE.to_string(), strukt(mcp.clone()))].into(),
                ..Default::default()
            }),
            route_metadata_context: Some(Metadata {
                filter_metadata: [(
                    "envoy.filters.http.ext_authz".to_string(),
                    strukt(json!({"route": "r1"})),
                )]
                .into(),
                typed_filter_metadata: [(
                    "typed".to_string(),
                    Any {
                        type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                        value: b"\n\x01x".to_vec(),
                    },
                )]
                .into(),
            }),
            tls_session: Some(TlsSession {
                sni: "mcp.example.com".into(),
            }),
        }),
    };
    check("check_request", expected.clone(), false);

    // The mcp_proxy metadata reads back as the JSON it came from.
    let md = &expected
        .attributes
        .as_ref()
        .unwrap()
        .metadata_context
        .as_ref()
        .unwrap()
        .filter_metadata;
    assert_eq!(
        serde_json::Value::Object(from_struct(&md[MCP_PROXY_NAMESPACE])),
        mcp
    );
    // A changed field changes the bytes (the comparison is not vacuous).
    source.principal.push('x');
    let mut other = expected;
    other.attributes.as_mut().unwrap().source = Some(source);
    assert_ne!(
        CheckRequest::decode(fixture("check_request").as_slice()).unwrap(),
        other
    );
}

#[test]
fn check_response_ok() {
    let raw = HeaderValueOption {
        header: Some(HeaderValue {
            key: "x-raw".into(),
            raw_value: b"r\x80w".to_vec(),
            ..Default::default()
        }),
        append: Some(BoolValue { value: false }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        keep_empty_value: true,
    };
    let expected = CheckResponse {
        status: Some(Status::default()),
        http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
            headers: vec![hvo("x-auth-user", "agent-a"), raw],
            headers_to_remove: vec!["authorization".into(), "cookie".into()],
            dynamic_metadata: Some(strukt(json!({"legacy": false}))),
            response_headers_to_add: vec![HeaderValueOption {
                append_action: HeaderAppendAction::AddIfAbsent as i32,
                ..hvo("x-resp", "1")
            }],
            query_parameters_to_set: vec![QueryParameter {
                key: "q".into(),
                value: "v".into(),
            }],
            query_parameters_to_remove: vec!["secret".into()],
        })),
        dynamic_metadata: Some(strukt(json!({"user": "agent-a"}))),
    };
    check("check_response_ok", expected, true);
}

#[test]
fn check_response_denied() {
    let expected = CheckResponse {
        status: Some(Status {
            code: 7,
            message: "tool not allowed".into(),
            details: vec![Any {
                type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                value: b"\n\x06reason".to_vec(),
            }],
        }),
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: Some(HttpStatus {
                code: StatusCode::Unauthorized as i32,
            }),
            headers: vec![HeaderValueOption {
                append: Some(BoolValue { value: true }),
                ..hvo("www-authenticate", "Bearer realm=\"mcp\"")
            }],
            body: r#"{"error":"denied"}"#.into(),
        })),
        dynamic_metadata: None,
    };
    check("check_response_denied", expected, true);
}

#[test]
fn check_response_error() {
    let expected = CheckResponse {
        status: Some(Status {
            code: 14,
            ..Default::default()
        }),
        http_response: Some(HttpResponse::ErrorResponse(DeniedHttpResponse {
            status: Some(HttpStatus {
                code: StatusCode::ServiceUnavailable as i32,
            }),
            headers: vec![],
            body: "authorizer down".into(),
        })),
        dynamic_metadata: None,
    };
    check("check_response_error", expected, true);
}

#[test]
fn protocol_enum_and_unknown_fields() {
    assert_eq!(Protocol::Tcp as i32, 0);
    assert_eq!(StatusCode::Forbidden as i32, 403);
    assert_eq!(StatusCode::try_from(200), Ok(StatusCode::Ok));
    // A field this crate does not declare (e.g. a future one) is skipped, not an error:
    // CheckRequest { attributes: {} , 99: "x" }
    let bytes = [0x0a, 0x00, 0x9a, 0x06, 0x01, b'x'];
    let req = CheckRequest::decode(&bytes[..]).unwrap();
    assert_eq!(
        req,
        CheckRequest {
            attributes: Some(AttributeContext::default())
        }
    );
}

#[test]
fn round_trip_every_oneof() {
    for http_response in [
        None,
        Some(HttpResponse::OkResponse(OkHttpResponse::default())),
        Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            body: "b".into(),
            ..Default::default()
        })),
        Some(HttpResponse::ErrorResponse(DeniedHttpResponse::default())),
    ] {
        let r = CheckResponse {
            status: Some(Status {
                code: 7,
                ..Default::default()
            }),
            http_response,
            dynamic_metadata: None,
        };
        assert_eq!(
            CheckResponse::decode(r.encode_to_vec().as_slice()).unwrap(),
            r
        );
    }
}
