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
