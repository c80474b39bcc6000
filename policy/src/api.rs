//! The `agentic.networking.x-k8s.io` API as plain Rust data: `XAccessPolicy` (v1alpha1, and the older
//! v0alpha0 in [`v0alpha0`]) and `XBackend` (v0alpha0) specs and statuses, in the JSON shape the upstream
//! CRDs use.
//!
//! These types carry no behaviour. With the `schema` feature they also describe the CRDs: doc comments
//! become the OpenAPI descriptions, and the `schemars` attributes carry every OpenAPI limit and
//! `x-kubernetes-validations` rule (the controller crate generates `crds/` from them and evaluates the same
//! schema offline in `toolgate validate`). Validation itself lives in the controller crate, which works on
//! the raw objects so that its messages match the API server's; [`crate::compile`] turns a valid spec
//! into plan data.

pub mod v0alpha0;

mod access_policy;
mod authorization;
mod backend;
mod external_auth;
mod status;

pub use access_policy::{
    AccessPolicySpec, AccessRule, AccessRuleSource, PolicyAction, PolicyTargetRef,
    ServiceAccountRef, SourceType,
};
pub use authorization::{
    AuthorizationRule, AuthorizationRuleType, BaseProtocolMethodsOption, CelRule, HeaderMatchType,
    HttpHeaderMatch, HttpPathMatch, McpAttributes, McpMethod, PathMatchType,
};
pub use backend::{BackendSpec, BackendStatus, McpBackend};
pub use external_auth::{
    BackendObjectReference, ExternalAuthProtocol, ForwardBodyConfig, GrpcAuthConfig,
    HttpAuthConfig, HttpExternalAuthFilter,
};
pub use status::{AccessPolicyStatus, Condition, ParentReference, PolicyAncestorStatus};

pub const GROUP: &str = "agentic.networking.x-k8s.io";
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Pattern of a DNS subdomain (RFC 1123), as in Gateway API.
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of a DNS label (RFC 1123).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Pattern of an API group: empty (the core group) or a DNS subdomain.
pub const GROUP_PATTERN: &str =
    r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of a Kind.
pub const KIND_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
/// Pattern of a SPIFFE ID accepted by `source.spiffe`.
pub const SPIFFE_PATTERN: &str = r"^spiffe://[a-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$";
/// Pattern of a Gateway API `Hostname` (optionally with a leading `*.` wildcard label).
pub const HOSTNAME_PATTERN: &str =
    r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Pattern of an HTTP header name (RFC 7230 token).
pub const HEADER_NAME_PATTERN: &str = r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$";
/// Pattern of an absolute path made of valid URI characters.
pub const HTTP_PATH_PATTERN: &str = r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$";
/// Maximum length of one `mcp.methods[].params` item (upstream allows 20; docs/semantics.md §9.6).
pub const MCP_PARAM_MAX_LENGTH: usize = 128;
