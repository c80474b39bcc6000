//! The HTTP attributes of a request as the engine reads them: what the evaluator's matchers, CEL
//! rules and authorizer calls see of a request. Below both [`crate::eval`] and [`crate::cel_rule`],
//! which each use it; `toolgate_policy::eval::HttpRequest` names it too.

/// HTTP attributes of a request, as the filter reads them from Envoy.
#[derive(Clone, Copy, Debug)]
pub struct HttpRequest<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// Path as received, query included; matchers see it without the query.
    pub path: &'a str,
    /// `:authority` as received (may carry a port).
    pub authority: &'a str,
    /// Port of the listener the request arrived on.
    pub port: u16,
    /// Request headers, lower-case names (borrowed: the filter points into the host's header block).
    pub headers: &'a [(&'a str, &'a str)],
    /// The caller's SPIFFE ID from the verified client certificate, if any.
    pub principal: Option<&'a str>,
    /// The TLS server name (SNI) of the connection, read only when the plan matches on it.
    pub server_name: Option<&'a str>,
    /// The JWT Envoy's `jwt_authn` verified, if any (docs/semantics.md §6b; read only when a CEL
    /// rule reads `request.auth` or an authorizer is called).
    pub auth: Option<&'a crate::jwt::Auth>,
    /// Wall-clock time of the request, milliseconds since the Unix epoch (0 when not read: only CEL
    /// rules on `request.time` need it).
    pub time_ms: u64,
}

impl<'a> HttpRequest<'a> {
    pub fn header(&self, lower_name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| *n == lower_name)
            .map(|(_, v)| *v)
    }
    pub(crate) fn header_values(&self, lower_name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| *n == lower_name)
            .map(|(_, v)| *v)
    }
    pub(crate) fn url_path(&self) -> &'a str {
        self.path.split_once('?').map_or(self.path, |(p, _)| p)
    }
    pub(crate) fn host(&self) -> &'a str {
        let a = self.authority;
        if let Some(rest) = a.strip_prefix('[') {
            // IPv6 literal: [::1]:8080
            return rest.split_once(']').map_or(a, |(h, _)| h);
        }
        a.rsplit_once(':')
            .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
            .map_or(a, |(h, _)| h)
    }
}
