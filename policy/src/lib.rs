//! Toolgate's policy engine. Pure: no I/O, no proxy-wasm, no Kubernetes client. The CLI and the
//! controller use it natively; the Envoy filter is thin host glue around it.
//!
//! - [`api`]: the XAccessPolicy / XBackend API as data.
//! - [`compile`]: one policy spec to plan data.
//! - [`plan`]: the compiled plan, versioned serde data delivered as the Wasm plugin configuration.
//! - [`mcp`]: the MCP (JSON-RPC 2.0) body reader.
//! - [`eval`]: the evaluator: a loaded, indexed plan that decides requests.
//! - [`http_request`]: a request's HTTP attributes, as the evaluator and CEL rules read them.
//! - [`lifecycle`]: the per-request state machine over a `Host` trait (the filter implements it).
//! - [`cel_rule`]: CEL authorization rules (checked at compile time, evaluated per tools/call).
//! - [`authz`]: calls to external authorizers (Envoy's ext_authz API) and their answers.
//! - [`call`]: a call to an external authorizer as the engine and its host exchange it.
//! - [`jwt`]: token callers: the payload Envoy's `jwt_authn` verified, read from dynamic metadata.
//! - [`re2`]: policy regular expressions with RE2's syntax and semantics.
//! - [`response`]: the denial replies.
//! - [`str_map`]: the string-keyed hash map the evaluator and the filter index names with.
//! - [`log_safe`]: request-derived text shown in summaries and logs, escaped.
//! - `testing` (feature `test-host`): a fake proxy host for driving the lifecycle natively.

#![forbid(unsafe_code)]
pub mod api;
pub mod authz;
pub mod call;
pub mod cel_rule;
pub mod compile;
pub mod eval;
pub mod http_request;
pub mod jwt;
pub mod lifecycle;
pub mod list_filter;
pub mod log_safe;
pub mod mcp;
pub mod plan;
pub mod re2;
pub mod response;
pub mod str_map;
#[cfg(any(test, feature = "test-host"))]
pub mod testing;
