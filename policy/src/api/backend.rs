//! `XBackend` (v0alpha0): the MCP server spec and the status.

use serde::{Deserialize, Serialize};

use super::Condition;

/// `XBackend.spec` (v0alpha0): an MCP server behind a Kubernetes Service or an external hostname.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendSpec {
    /// MCP describes the MCP server.
    pub mcp: McpBackend,
}

/// An MCP server: exactly one of `serviceName` (a Service in the XBackend's namespace) and `hostname`
/// (an external server, reached with TLS).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [
        {"rule": "[has(self.serviceName),has(self.hostname)].filter(x,x==true).size() == 1",
         "message": "exactly one of the fields in [serviceName hostname] must be set"},
    ]))
)]
#[serde(rename_all = "camelCase")]
pub struct McpBackend {
    /// ServiceName is the name of the Kubernetes Service of the MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Hostname is the DNS name of an external MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Port of the MCP server.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: u16,
    /// Path of the MCP endpoint. Defaults to `/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "/mcp")))]
    pub path: Option<String>,
}

impl McpBackend {
    pub fn path_or_default(&self) -> &str {
        self.path.as_deref().unwrap_or("/mcp")
    }
}

/// `XBackend.status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    /// Conditions of the XBackend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))
    )]
    pub conditions: Vec<Condition>,
}
