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

#![forbid(unsafe_code)]
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
    attribute_context, check_response, AttributeContext, CheckRequest, CheckResponse,
    DeniedHttpResponse, OkHttpResponse,
};
pub use google::protobuf::{ListValue, NullValue, Struct, Value};

pub mod google {
    pub mod protobuf;
    pub mod rpc;
}

pub mod envoy {
    pub mod r#type {
        pub mod v3;
    }

    pub mod config {
        pub mod core {
            pub mod v3;
        }
    }

    pub mod service {
        pub mod auth {
            pub mod v3;
        }
    }
}
