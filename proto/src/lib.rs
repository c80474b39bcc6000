//! Envoy's external authorization API (`envoy.service.auth.v3`, the one Envoy's `ext_authz` filter and
//! Kuadrant Authorino speak) as hand-written [prost] messages: no protoc, no build script.
//!
//! Every message mirrors one upstream `.proto` message field for field (same tags, same wire types),
//! in modules named after the protobuf packages, with the names prost-build would generate, so that a
//! switch to generated code later is a drop-in:
//!
//! | module | upstream file |
//! |---|---|
//! | [`envoy::service::auth::v3`] | `envoy/service/auth/v3/external_auth.proto`, `envoy/service/auth/v3/attribute_context.proto` (github.com/envoyproxy/data-plane-api, `api/` in envoyproxy/envoy) |
//! | [`envoy::config::core::v3`] | `envoy/config/core/v3/base.proto` (`HeaderValue`, `HeaderValueOption`, `HeaderMap`, `Metadata`, `QueryParameter`), `envoy/config/core/v3/address.proto` (`Address`, `SocketAddress`, `Pipe`, `EnvoyInternalAddress`) |
//! | [`envoy::r#type::v3`] | `envoy/type/v3/http_status.proto` |
//! | [`google::rpc`] | `google/rpc/status.proto` (github.com/googleapis/googleapis) |
//! | [`google::protobuf`] | `google/protobuf/{struct,timestamp,any,wrappers}.proto` (github.com/protocolbuffers/protobuf, `src/`) |
//!
//! Struct fields are declared in field-number order (prost encodes in declaration order), so prost
//! writes the same bytes as protobuf runtimes do (checked by `tests/golden.rs`).
//!
//! Fields Toolgate has no use for are left out only where a whole message would otherwise be dragged in
//! (`Metadata.typed_filter_metadata` is kept as `Any`); prost skips unknown fields when decoding, so a
//! message from a newer Envoy still decodes. Maps are `BTreeMap`s: deterministic encoding order, and
//! no `std` needed (the crate builds for `wasm32-wasip1` with prost's default features off).
//!
//! The field numbers are checked against encodings made by Google's own protobuf runtime from the
//! upstream `.proto` files: `tests/golden.rs`, fixtures and generator in `testdata/`.
//!
//! With the `json` feature (default), [`json`] converts `serde_json::Value` <-> `google.protobuf.Struct`
//! / `Value` (how the filter puts the parsed JSON-RPC message into `metadata_context.filter_metadata`).

#![cfg_attr(not(test), no_std)]
#![allow(clippy::derive_partial_eq_without_eq)]

extern crate alloc;

#[cfg(feature = "json")]
pub mod json;

/// The full name of the one RPC: `/envoy.service.auth.v3.Authorization/Check` (the gRPC `:path`).
pub const CHECK_PATH: &str = "/envoy.service.auth.v3.Authorization/Check";
/// The gRPC service name, `envoy.service.auth.v3.Authorization`.
pub const AUTHORIZATION_SERVICE: &str = "envoy.service.auth.v3.Authorization";
/// The method name, `Check`.
pub const CHECK_METHOD: &str = "Check";

pub use envoy::config::core::v3::{HeaderValue, HeaderValueOption, Metadata};
pub use envoy::r#type::v3::{HttpStatus, StatusCode};
pub use envoy::service::auth::v3::{
    attribute_context, check_response, AttributeContext, CheckRequest, CheckResponse, DeniedHttpResponse,
    OkHttpResponse,
};
pub use google::protobuf::{ListValue, NullValue, Struct, Value};

pub mod google {
    pub mod protobuf {
        //! Well-known types: `google/protobuf/struct.proto`, `timestamp.proto`, `any.proto`,
        //! `wrappers.proto` (github.com/protocolbuffers/protobuf, `src/google/protobuf/`).
        use alloc::collections::BTreeMap;
        use alloc::string::String;
        use alloc::vec::Vec;

        /// `google.protobuf.Struct` (struct.proto): `map<string, Value> fields = 1;`
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct Struct {
            #[prost(btree_map = "string, message", tag = "1")]
            pub fields: BTreeMap<String, Value>,
        }

        /// `google.protobuf.Value` (struct.proto): `oneof kind { NullValue null_value = 1;
        /// double number_value = 2; string string_value = 3; bool bool_value = 4;
        /// Struct struct_value = 5; ListValue list_value = 6; }`
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct Value {
            #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
            pub kind: Option<value::Kind>,
        }

        pub mod value {
            /// `Value.kind`.
            #[derive(Clone, PartialEq, ::prost::Oneof)]
            pub enum Kind {
                #[prost(enumeration = "super::NullValue", tag = "1")]
                NullValue(i32),
                #[prost(double, tag = "2")]
                NumberValue(f64),
                #[prost(string, tag = "3")]
                StringValue(::alloc::string::String),
                #[prost(bool, tag = "4")]
                BoolValue(bool),
                #[prost(message, tag = "5")]
                StructValue(super::Struct),
                #[prost(message, tag = "6")]
                ListValue(super::ListValue),
            }
        }

        /// `google.protobuf.ListValue` (struct.proto): `repeated Value values = 1;`
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct ListValue {
            #[prost(message, repeated, tag = "1")]
            pub values: Vec<Value>,
        }

        /// `google.protobuf.NullValue` (struct.proto): `NULL_VALUE = 0;`
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
        #[repr(i32)]
        pub enum NullValue {
            NullValue = 0,
        }

        /// `google.protobuf.Timestamp` (timestamp.proto): `int64 seconds = 1; int32 nanos = 2;`
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Timestamp {
            #[prost(int64, tag = "1")]
            pub seconds: i64,
            #[prost(int32, tag = "2")]
            pub nanos: i32,
        }

        /// `google.protobuf.Any` (any.proto): `string type_url = 1; bytes value = 2;`
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Any {
            #[prost(string, tag = "1")]
            pub type_url: String,
            #[prost(bytes = "vec", tag = "2")]
            pub value: Vec<u8>,
        }

        /// `google.protobuf.BoolValue` (wrappers.proto): `bool value = 1;`. A field of this type is an
        /// `Option<BoolValue>`: `None` = unset, distinct from `Some(false)`.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct BoolValue {
            #[prost(bool, tag = "1")]
            pub value: bool,
        }
    }

    pub mod rpc {
        //! `google/rpc/status.proto` (github.com/googleapis/googleapis).
        use alloc::string::String;
        use alloc::vec::Vec;

        /// `google.rpc.Status`: `int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3;`
        /// In a `CheckResponse`, `code` 0 (OK) allows and anything else (usually 7, PERMISSION_DENIED)
        /// denies.
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct Status {
            #[prost(int32, tag = "1")]
            pub code: i32,
            #[prost(string, tag = "2")]
            pub message: String,
            #[prost(message, repeated, tag = "3")]
            pub details: Vec<super::protobuf::Any>,
        }

        /// `google.rpc.Code` values used with ext_authz (google/rpc/code.proto).
        pub mod code {
            pub const OK: i32 = 0;
            pub const UNKNOWN: i32 = 2;
            pub const PERMISSION_DENIED: i32 = 7;
            pub const UNAVAILABLE: i32 = 14;
            pub const UNAUTHENTICATED: i32 = 16;
        }
    }
}

pub mod envoy {
    pub mod r#type {
        pub mod v3 {
            //! `envoy/type/v3/http_status.proto`.

            /// `envoy.type.v3.HttpStatus`: `StatusCode code = 1;`
            #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
            pub struct HttpStatus {
                #[prost(enumeration = "StatusCode", tag = "1")]
                pub code: i32,
            }

            /// `envoy.type.v3.StatusCode` (HTTP status codes; prost-build naming: `OK` is `Ok`,
            /// `IMUsed` is `ImUsed`, ...). `HttpStatus.code` holds the raw `i32`, so codes outside the
            /// list still travel.
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
            #[repr(i32)]
            pub enum StatusCode {
                Empty = 0,
                Continue = 100,
                Ok = 200,
                Created = 201,
                Accepted = 202,
                NonAuthoritativeInformation = 203,
                NoContent = 204,
                ResetContent = 205,
                PartialContent = 206,
                MultiStatus = 207,
                AlreadyReported = 208,
                ImUsed = 226,
                MultipleChoices = 300,
                MovedPermanently = 301,
                Found = 302,
                SeeOther = 303,
                NotModified = 304,
                UseProxy = 305,
                TemporaryRedirect = 307,
                PermanentRedirect = 308,
                BadRequest = 400,
                Unauthorized = 401,
                PaymentRequired = 402,
                Forbidden = 403,
                NotFound = 404,
                MethodNotAllowed = 405,
                NotAcceptable = 406,
                ProxyAuthenticationRequired = 407,
                RequestTimeout = 408,
                Conflict = 409,
                Gone = 410,
                LengthRequired = 411,
                PreconditionFailed = 412,
                PayloadTooLarge = 413,
                UriTooLong = 414,
                UnsupportedMediaType = 415,
                RangeNotSatisfiable = 416,
                ExpectationFailed = 417,
                MisdirectedRequest = 421,
                UnprocessableEntity = 422,
                Locked = 423,
                FailedDependency = 424,
                UpgradeRequired = 426,
                PreconditionRequired = 428,
                TooManyRequests = 429,
                RequestHeaderFieldsTooLarge = 431,
                InternalServerError = 500,
                NotImplemented = 501,
                BadGateway = 502,
                ServiceUnavailable = 503,
                GatewayTimeout = 504,
                HttpVersionNotSupported = 505,
                VariantAlsoNegotiates = 506,
                InsufficientStorage = 507,
                LoopDetected = 508,
                NotExtended = 510,
                NetworkAuthenticationRequired = 511,
            }
        }
    }

    pub mod config {
        pub mod core {
            pub mod v3 {
                //! `envoy/config/core/v3/base.proto` (`HeaderValue`, `HeaderValueOption`, `HeaderMap`,
                //! `Metadata`, `QueryParameter`) and `envoy/config/core/v3/address.proto` (`Address`
                //! and what it holds).
                use alloc::collections::BTreeMap;
                use alloc::string::String;
                use alloc::vec::Vec;

                use crate::google::protobuf::{Any, BoolValue, Struct};

                /// `envoy.config.core.v3.HeaderValue` (base.proto): `string key = 1; string value = 2;
                /// bytes raw_value = 3;` (Envoy sets `raw_value` instead of `value` in
                /// `HttpRequest.header_map` when `encode_raw_headers` is on.)
                #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
                pub struct HeaderValue {
                    #[prost(string, tag = "1")]
                    pub key: String,
                    #[prost(string, tag = "2")]
                    pub value: String,
                    #[prost(bytes = "vec", tag = "3")]
                    pub raw_value: Vec<u8>,
                }

                /// `envoy.config.core.v3.HeaderValueOption` (base.proto): `HeaderValue header = 1;
                /// google.protobuf.BoolValue append = 2 [deprecated]; HeaderAppendAction append_action = 3;
                /// bool keep_empty_value = 4;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct HeaderValueOption {
                    #[prost(message, optional, tag = "1")]
                    pub header: Option<HeaderValue>,
                    #[prost(message, optional, tag = "2")]
                    pub append: Option<BoolValue>,
                    #[prost(enumeration = "header_value_option::HeaderAppendAction", tag = "3")]
                    pub append_action: i32,
                    #[prost(bool, tag = "4")]
                    pub keep_empty_value: bool,
                }

                pub mod header_value_option {
                    /// `HeaderValueOption.HeaderAppendAction`.
                    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
                    #[repr(i32)]
                    pub enum HeaderAppendAction {
                        AppendIfExistsOrAdd = 0,
                        AddIfAbsent = 1,
                        OverwriteIfExistsOrAdd = 2,
                        OverwriteIfExists = 3,
                    }
                }

                impl HeaderValueOption {
                    /// A header with `value`, default append action (`APPEND_IF_EXISTS_OR_ADD`), `append` unset.
                    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
                        HeaderValueOption {
                            header: Some(HeaderValue {
                                key: key.into(),
                                value: value.into(),
                                raw_value: Vec::new(),
                            }),
                            ..Default::default()
                        }
                    }
                }

                /// `envoy.config.core.v3.HeaderMap` (base.proto): `repeated HeaderValue headers = 1;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct HeaderMap {
                    #[prost(message, repeated, tag = "1")]
                    pub headers: Vec<HeaderValue>,
                }

                /// `envoy.config.core.v3.Metadata` (base.proto): `map<string, google.protobuf.Struct>
                /// filter_metadata = 1; map<string, google.protobuf.Any> typed_filter_metadata = 2;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct Metadata {
                    #[prost(btree_map = "string, message", tag = "1")]
                    pub filter_metadata: BTreeMap<String, Struct>,
                    #[prost(btree_map = "string, message", tag = "2")]
                    pub typed_filter_metadata: BTreeMap<String, Any>,
                }

                /// `envoy.config.core.v3.GrpcService` (grpc_service.proto), the part a proxy-wasm gRPC
                /// call needs: `oneof target_specifier { EnvoyGrpc envoy_grpc = 1; ... }` (the rest
                /// is not declared; prost leaves unknown fields alone). proxy-wasm's `grpc_call` takes
                /// it serialised in place of a bare cluster name, which Envoy would also use as the
                /// `:authority` (a cluster name like `outbound|9000||host` is not a valid authority).
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct GrpcService {
                    #[prost(message, optional, tag = "1")]
                    pub envoy_grpc: Option<grpc_service::EnvoyGrpc>,
                }

                pub mod grpc_service {
                    use alloc::string::String;

                    /// `GrpcService.EnvoyGrpc`: `string cluster_name = 1; string authority = 2;`
                    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
                    pub struct EnvoyGrpc {
                        #[prost(string, tag = "1")]
                        pub cluster_name: String,
                        #[prost(string, tag = "2")]
                        pub authority: String,
                    }
                }

                /// `envoy.config.core.v3.QueryParameter` (base.proto): `string key = 1; string value = 2;`
                #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
                pub struct QueryParameter {
                    #[prost(string, tag = "1")]
                    pub key: String,
                    #[prost(string, tag = "2")]
                    pub value: String,
                }

                /// `envoy.config.core.v3.Address` (address.proto): `oneof address { SocketAddress
                /// socket_address = 1; Pipe pipe = 2; EnvoyInternalAddress envoy_internal_address = 3; }`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct Address {
                    #[prost(oneof = "address::Address", tags = "1, 2, 3")]
                    pub address: Option<address::Address>,
                }

                pub mod address {
                    /// `Address.address`.
                    #[derive(Clone, PartialEq, ::prost::Oneof)]
                    pub enum Address {
                        #[prost(message, tag = "1")]
                        SocketAddress(super::SocketAddress),
                        #[prost(message, tag = "2")]
                        Pipe(super::Pipe),
                        #[prost(message, tag = "3")]
                        EnvoyInternalAddress(super::EnvoyInternalAddress),
                    }
                }

                /// `envoy.config.core.v3.SocketAddress` (address.proto): `Protocol protocol = 1;
                /// string address = 2; oneof port_specifier { uint32 port_value = 3; string named_port = 4; }
                /// string resolver_name = 5; bool ipv4_compat = 6; string network_namespace_filepath = 7;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct SocketAddress {
                    #[prost(enumeration = "socket_address::Protocol", tag = "1")]
                    pub protocol: i32,
                    #[prost(string, tag = "2")]
                    pub address: String,
                    #[prost(oneof = "socket_address::PortSpecifier", tags = "3, 4")]
                    pub port_specifier: Option<socket_address::PortSpecifier>,
                    #[prost(string, tag = "5")]
                    pub resolver_name: String,
                    #[prost(bool, tag = "6")]
                    pub ipv4_compat: bool,
                    #[prost(string, tag = "7")]
                    pub network_namespace_filepath: String,
                }

                pub mod socket_address {
                    /// `SocketAddress.Protocol`.
                    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
                    #[repr(i32)]
                    pub enum Protocol {
                        Tcp = 0,
                        Udp = 1,
                    }

                    /// `SocketAddress.port_specifier`.
                    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Oneof)]
                    pub enum PortSpecifier {
                        #[prost(uint32, tag = "3")]
                        PortValue(u32),
                        #[prost(string, tag = "4")]
                        NamedPort(::alloc::string::String),
                    }
                }

                /// `envoy.config.core.v3.Pipe` (address.proto): `string path = 1; uint32 mode = 2;`
                #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
                pub struct Pipe {
                    #[prost(string, tag = "1")]
                    pub path: String,
                    #[prost(uint32, tag = "2")]
                    pub mode: u32,
                }

                /// `envoy.config.core.v3.EnvoyInternalAddress` (address.proto): `oneof
                /// address_name_specifier { string server_listener_name = 1; } string endpoint_id = 2;`
                #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
                pub struct EnvoyInternalAddress {
                    #[prost(oneof = "envoy_internal_address::AddressNameSpecifier", tags = "1")]
                    pub address_name_specifier: Option<envoy_internal_address::AddressNameSpecifier>,
                    #[prost(string, tag = "2")]
                    pub endpoint_id: String,
                }

                pub mod envoy_internal_address {
                    /// `EnvoyInternalAddress.address_name_specifier`.
                    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Oneof)]
                    pub enum AddressNameSpecifier {
                        #[prost(string, tag = "1")]
                        ServerListenerName(::alloc::string::String),
                    }
                }

                impl Address {
                    /// A TCP socket address `ip:port`.
                    pub fn socket(ip: impl Into<String>, port: u32) -> Self {
                        Address {
                            address: Some(address::Address::SocketAddress(SocketAddress {
                                address: ip.into(),
                                port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
                                ..Default::default()
                            })),
                        }
                    }
                }
            }
        }
    }

    pub mod service {
        pub mod auth {
            pub mod v3 {
                //! `envoy/service/auth/v3/external_auth.proto` (`service Authorization { rpc
                //! Check(CheckRequest) returns (CheckResponse); }`) and
                //! `envoy/service/auth/v3/attribute_context.proto`.
                use alloc::collections::BTreeMap;
                use alloc::string::String;
                use alloc::vec::Vec;

                use crate::envoy::config::core::v3::{HeaderValueOption, Metadata, QueryParameter};
                use crate::envoy::r#type::v3::HttpStatus;
                use crate::google::protobuf::Struct;
                use crate::google::rpc::Status;

                /// `envoy.service.auth.v3.CheckRequest` (external_auth.proto): `AttributeContext attributes = 1;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct CheckRequest {
                    #[prost(message, optional, tag = "1")]
                    pub attributes: Option<AttributeContext>,
                }

                /// `envoy.service.auth.v3.DeniedHttpResponse` (external_auth.proto):
                /// `type.v3.HttpStatus status = 1; repeated config.core.v3.HeaderValueOption headers = 2;
                /// string body = 3;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct DeniedHttpResponse {
                    #[prost(message, optional, tag = "1")]
                    pub status: Option<HttpStatus>,
                    #[prost(message, repeated, tag = "2")]
                    pub headers: Vec<HeaderValueOption>,
                    #[prost(string, tag = "3")]
                    pub body: String,
                }

                /// `envoy.service.auth.v3.OkHttpResponse` (external_auth.proto):
                /// `repeated HeaderValueOption headers = 2; repeated string headers_to_remove = 5;
                /// google.protobuf.Struct dynamic_metadata = 3 [deprecated];
                /// repeated HeaderValueOption response_headers_to_add = 6;
                /// repeated QueryParameter query_parameters_to_set = 7;
                /// repeated string query_parameters_to_remove = 8;` (no field 1, 4 upstream).
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct OkHttpResponse {
                    #[prost(message, repeated, tag = "2")]
                    pub headers: Vec<HeaderValueOption>,
                    #[prost(message, optional, tag = "3")]
                    pub dynamic_metadata: Option<Struct>,
                    #[prost(string, repeated, tag = "5")]
                    pub headers_to_remove: Vec<String>,
                    #[prost(message, repeated, tag = "6")]
                    pub response_headers_to_add: Vec<HeaderValueOption>,
                    #[prost(message, repeated, tag = "7")]
                    pub query_parameters_to_set: Vec<QueryParameter>,
                    #[prost(string, repeated, tag = "8")]
                    pub query_parameters_to_remove: Vec<String>,
                }

                /// `envoy.service.auth.v3.CheckResponse` (external_auth.proto): `google.rpc.Status status = 1;
                /// oneof http_response { DeniedHttpResponse denied_response = 2; OkHttpResponse ok_response = 3;
                /// DeniedHttpResponse error_response = 5; } google.protobuf.Struct dynamic_metadata = 4;`
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct CheckResponse {
                    #[prost(message, optional, tag = "1")]
                    pub status: Option<Status>,
                    #[prost(oneof = "check_response::HttpResponse", tags = "2, 3, 5")]
                    pub http_response: Option<check_response::HttpResponse>,
                    #[prost(message, optional, tag = "4")]
                    pub dynamic_metadata: Option<Struct>,
                }

                pub mod check_response {
                    /// `CheckResponse.http_response`.
                    #[derive(Clone, PartialEq, ::prost::Oneof)]
                    pub enum HttpResponse {
                        #[prost(message, tag = "2")]
                        DeniedResponse(super::DeniedHttpResponse),
                        #[prost(message, tag = "3")]
                        OkResponse(super::OkHttpResponse),
                        /// Set by the authorizer when it failed (Envoy treats it as an error, not a denial).
                        #[prost(message, tag = "5")]
                        ErrorResponse(super::DeniedHttpResponse),
                    }
                }

                /// `envoy.service.auth.v3.AttributeContext` (attribute_context.proto): `Peer source = 1;
                /// Peer destination = 2; Request request = 4; map<string, string> context_extensions = 10;
                /// config.core.v3.Metadata metadata_context = 11; config.core.v3.Metadata
                /// route_metadata_context = 13; TLSSession tls_session = 12;` (no field 3 upstream).
                #[derive(Clone, PartialEq, ::prost::Message)]
                pub struct AttributeContext {
                    #[prost(message, optional, tag = "1")]
                    pub source: Option<attribute_context::Peer>,
                    #[prost(message, optional, tag = "2")]
                    pub destination: Option<attribute_context::Peer>,
                    #[prost(message, optional, tag = "4")]
                    pub request: Option<attribute_context::Request>,
                    #[prost(btree_map = "string, string", tag = "10")]
                    pub context_extensions: BTreeMap<String, String>,
                    #[prost(message, optional, tag = "11")]
                    pub metadata_context: Option<Metadata>,
                    #[prost(message, optional, tag = "12")]
                    pub tls_session: Option<attribute_context::TlsSession>,
                    #[prost(message, optional, tag = "13")]
                    pub route_metadata_context: Option<Metadata>,
                }

                pub mod attribute_context {
                    use alloc::collections::BTreeMap;
                    use alloc::string::String;
                    use alloc::vec::Vec;

                    use crate::envoy::config::core::v3::{Address, HeaderMap};
                    use crate::google::protobuf::Timestamp;

                    /// `AttributeContext.Peer`: `config.core.v3.Address address = 1; string service = 2;
                    /// map<string, string> labels = 3; string principal = 4; string certificate = 5;`
                    /// (`principal`: the URI SAN, e.g. a SPIFFE ID, of the peer's certificate.)
                    #[derive(Clone, PartialEq, ::prost::Message)]
                    pub struct Peer {
                        #[prost(message, optional, tag = "1")]
                        pub address: Option<Address>,
                        #[prost(string, tag = "2")]
                        pub service: String,
                        #[prost(btree_map = "string, string", tag = "3")]
                        pub labels: BTreeMap<String, String>,
                        #[prost(string, tag = "4")]
                        pub principal: String,
                        #[prost(string, tag = "5")]
                        pub certificate: String,
                    }

                    /// `AttributeContext.Request`: `google.protobuf.Timestamp time = 1; HttpRequest http = 2;`
                    #[derive(Clone, PartialEq, ::prost::Message)]
                    pub struct Request {
                        #[prost(message, optional, tag = "1")]
                        pub time: Option<Timestamp>,
                        #[prost(message, optional, tag = "2")]
                        pub http: Option<HttpRequest>,
                    }

                    /// `AttributeContext.HttpRequest`: `string id = 1; string method = 2;
                    /// map<string, string> headers = 3; config.core.v3.HeaderMap header_map = 13;
                    /// string path = 4; string host = 5; string scheme = 6; string query = 7;
                    /// string fragment = 8; int64 size = 9; string protocol = 10; string body = 11;
                    /// bytes raw_body = 12;` (`headers` keys lower-case; `path` includes the query.)
                    #[derive(Clone, PartialEq, ::prost::Message)]
                    pub struct HttpRequest {
                        #[prost(string, tag = "1")]
                        pub id: String,
                        #[prost(string, tag = "2")]
                        pub method: String,
                        #[prost(btree_map = "string, string", tag = "3")]
                        pub headers: BTreeMap<String, String>,
                        #[prost(string, tag = "4")]
                        pub path: String,
                        #[prost(string, tag = "5")]
                        pub host: String,
                        #[prost(string, tag = "6")]
                        pub scheme: String,
                        #[prost(string, tag = "7")]
                        pub query: String,
                        #[prost(string, tag = "8")]
                        pub fragment: String,
                        #[prost(int64, tag = "9")]
                        pub size: i64,
                        #[prost(string, tag = "10")]
                        pub protocol: String,
                        #[prost(string, tag = "11")]
                        pub body: String,
                        #[prost(bytes = "vec", tag = "12")]
                        pub raw_body: Vec<u8>,
                        #[prost(message, optional, tag = "13")]
                        pub header_map: Option<HeaderMap>,
                    }

                    /// `AttributeContext.TLSSession`: `string sni = 1;`
                    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
                    pub struct TlsSession {
                        #[prost(string, tag = "1")]
                        pub sni: String,
                    }
                }
            }
        }
    }
}
