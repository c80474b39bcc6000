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
