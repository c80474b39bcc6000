//! A call to an external authorizer as it crosses between the engine and its host: what the engine
//! asks the host to call ([`Callout`], [`crate::lifecycle::Host::call`]) and how the host says the
//! call ended ([`CallAnswer`], [`crate::lifecycle::Request::on_call_answer`]).
//!
//! One floor below both modules that use them: [`crate::authz`] builds the calls and reads the
//! answers, [`crate::lifecycle`] hands them to the host and takes them back. Neither imports the
//! other for them.

/// A call to an external authorizer.
#[derive(Clone, Copy, Debug)]
pub enum Callout<'a> {
    /// A unary gRPC call of `service`/`method` with the serialised request `message`. `upstream`
    /// names the upstream as a serialised `envoy.config.core.v3.GrpcService` (cluster `cluster` and
    /// the `:authority` to send): what proxy-wasm's `grpc_call` takes as it is; a host that makes the
    /// call otherwise reads the authority from it.
    Grpc {
        cluster: &'a str,
        upstream: &'a [u8],
        service: &'a str,
        method: &'a str,
        message: &'a [u8],
        timeout_ms: u32,
    },
    /// An HTTP call to `cluster` (`headers` include `:method`, `:path`, `:authority`).
    Http {
        cluster: &'a str,
        headers: &'a [(&'a str, &'a str)],
        body: &'a [u8],
        timeout_ms: u32,
    },
}

/// How a call ended, as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallAnswer {
    /// gRPC: the status code (0 = OK) and, when OK, the response message.
    Grpc { status: u32, message: Vec<u8> },
    /// HTTP: the response headers (`:status` included) and body.
    Http {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// The call could not be made or did not complete (connection refused or reset, timeout).
    Failed,
}
