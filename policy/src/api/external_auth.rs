//! The `externalAuth` of an `ExternalAuth` policy: Gateway API `HTTPExternalAuthFilter` and its settings.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use super::{DNS_LABEL_PATTERN, GROUP_PATTERN, HTTP_PATH_PATTERN, KIND_PATTERN};

/// Gateway API `HTTPExternalAuthFilter`: the external authorizer and how to call it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.protocol == 'GRPC' ? has(self.grpc) : true",
         "message": "grpc must be specified when protocol is set to 'GRPC'"},
        {"rule": "has(self.grpc) ? self.protocol == 'GRPC' : true",
         "message": "protocol must be 'GRPC' when grpc is set"},
        {"rule": "self.protocol == 'HTTP' ? has(self.http) : true",
         "message": "http must be specified when protocol is set to 'HTTP'"},
        {"rule": "has(self.http) ? self.protocol == 'HTTP' : true",
         "message": "protocol must be 'HTTP' when http is set"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct HttpExternalAuthFilter {
    /// Protocol of the authorizer: `GRPC` (Envoy `envoy.service.auth.v3.Authorization`) or `HTTP`
    /// (a 2xx answer allows).
    pub protocol: ExternalAuthProtocol,
    /// BackendRef is the authorizer's Service (with its port) or other backend.
    pub backend_ref: BackendObjectReference,
    /// GRPC settings; required with protocol `GRPC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAuthConfig>,
    /// HTTP settings; required with protocol `HTTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpAuthConfig>,
    /// ForwardBody sends up to `maxSize` bytes of the request body to the authorizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_body: Option<ForwardBodyConfig>,
}

/// Protocol of an external authorizer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ExternalAuthProtocol {
    #[serde(rename = "HTTP")]
    Http,
    #[default]
    #[serde(rename = "GRPC")]
    Grpc,
}

/// Gateway API `BackendObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
         "message": "Must have port for Service reference"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    /// Group of the referent; empty (the default) is the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = "")))]
    pub group: Option<String>,
    /// Kind of the referent; defaults to `Service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Service"))
    )]
    pub kind: Option<String>,
    /// Name of the referent.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// Namespace of the referent; defaults to the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(DNS_LABEL_PATTERN))
    )]
    pub namespace: Option<String>,
    /// Port of the referent (the Service port); required for Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<u16>,
}

/// gRPC authorizer settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GrpcAuthConfig {
    /// AllowedHeaders are the request headers sent to the authorizer. Empty = all headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Vec<String>,
}

/// HTTP authorizer settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HttpAuthConfig {
    /// Path is a prefix added to the request path in the call to the authorizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 1024), pattern(HTTP_PATH_PATTERN))
    )]
    pub path: Option<String>,
    /// AllowedHeaders are request headers sent to the authorizer, besides Host, Method, Path,
    /// Content-Length and Authorization.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Vec<String>,
    /// AllowedResponseHeaders are the authorizer's response headers copied to the upstream request.
    /// Empty = all but Authority and Host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_response_headers: Vec<String>,
}

/// Whether the request body is sent to the authorizer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForwardBodyConfig {
    /// MaxSize is the largest body prefix, in bytes, sent to the authorizer; 0 or unset sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u32>,
}
