//! The HTTP matchers of a rule (`methods`, `ports`, `paths`, `hosts`, `serverNames`, `headers`), compiled.

use regex::Regex;

use super::{full_match_regex, mcp_header_value, HttpRequest};
use crate::plan::{HeaderMatch, HostMatch, HttpMatch, PathMatch, ValueMatch};

/// [`HttpMatch`] with regular expressions compiled.
#[derive(Debug, Default)]
pub(super) struct CompiledHttp {
    pub(super) methods: Vec<String>,
    pub(super) paths: Vec<CompiledPath>,
    pub(super) headers: Vec<(String, CompiledValue)>,
    pub(super) hosts: Vec<HostMatch>,
    pub(super) server_names: Vec<HostMatch>,
    pub(super) ports: Vec<u16>,
}

#[derive(Debug)]
pub(super) enum CompiledPath {
    Exact(String),
    Prefix(String),
    Regex(Regex),
}

#[derive(Debug)]
pub(super) enum CompiledValue {
    Exact(String),
    Regex(Regex),
}

impl CompiledHttp {
    pub(super) fn compile(m: &HttpMatch) -> Result<Self, String> {
        for method in &m.methods {
            if method.is_empty() || method.bytes().any(|b| !b.is_ascii_uppercase()) {
                return Err(format!("HTTP method {method:?} must be upper-case letters"));
            }
        }
        let paths = m
            .paths
            .iter()
            .map(|p| {
                Ok(match p {
                    PathMatch::Exact(v) => CompiledPath::Exact(v.clone()),
                    PathMatch::Prefix(v) => {
                        if !v.starts_with('/') {
                            return Err(format!("path prefix {v:?} must start with '/'"));
                        }
                        CompiledPath::Prefix(if v.len() > 1 {
                            v.trim_end_matches('/').to_string()
                        } else {
                            v.clone()
                        })
                    }
                    PathMatch::Regex(r) => CompiledPath::Regex(full_match_regex(r)?),
                })
            })
            .collect::<Result<_, String>>()?;
        let headers = m
            .headers
            .iter()
            .map(|HeaderMatch { name, value }| {
                if name.is_empty() || name.bytes().any(|b| b.is_ascii_uppercase()) {
                    return Err(format!("header name {name:?} must be non-empty lower-case"));
                }
                let v = match value {
                    ValueMatch::Exact(v) => CompiledValue::Exact(v.clone()),
                    ValueMatch::Regex(r) => CompiledValue::Regex(full_match_regex(r)?),
                };
                Ok((name.clone(), v))
            })
            .collect::<Result<_, String>>()?;
        for host in m.hosts.iter().chain(&m.server_names) {
            let h = match host {
                HostMatch::Exact(h) => h.as_str(),
                HostMatch::Suffix(s) => s
                    .strip_prefix('.')
                    .ok_or_else(|| format!("host suffix {s:?} must start with '.'"))?,
            };
            if h.is_empty() || h.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(format!("host {host:?} must be non-empty lower-case"));
            }
        }
        Ok(Self {
            methods: m.methods.clone(),
            paths,
            headers,
            hosts: m.hosts.clone(),
            server_names: m.server_names.clone(),
            ports: m.ports.clone(),
        })
    }

    /// The first HTTP matcher that does not hold, by name (`methods`, `ports`, ...).
    pub(super) fn first_failure(&self, req: &HttpRequest<'_>) -> Option<&'static str> {
        if !(self.methods.is_empty() || self.methods.iter().any(|m| m == req.method)) {
            return Some("methods");
        }
        if !(self.ports.is_empty() || self.ports.contains(&req.port)) {
            return Some("ports");
        }
        if !self.paths.is_empty() {
            let path = req.url_path();
            let ok = self.paths.iter().any(|p| match p {
                CompiledPath::Exact(v) => path == v,
                CompiledPath::Prefix(v) => path_prefix_matches(v, path),
                CompiledPath::Regex(r) => r.is_match(path),
            });
            if !ok {
                return Some("paths");
            }
        }
        if !self.hosts.is_empty() {
            let host = req.host();
            let ok = self.hosts.iter().any(|h| match h {
                HostMatch::Exact(v) => host.eq_ignore_ascii_case(v),
                HostMatch::Suffix(s) => host_suffix_covers(s, host),
            });
            if !ok {
                return Some("hosts");
            }
        }
        // No server name (no TLS, or no SNI) matches none.
        if !self.server_names.is_empty()
            && !req
                .server_name
                .is_some_and(|sni| host_matches_any(&self.server_names, sni))
        {
            return Some("serverNames");
        }
        let headers_ok = self.headers.iter().all(|(name, v)| {
            req.header_values(name)
                .filter_map(|value| mcp_header_value(name, value))
                .any(|value| match v {
                    CompiledValue::Exact(e) => *value == **e,
                    CompiledValue::Regex(r) => r.is_match(&value),
                })
        });
        (!headers_ok).then_some("headers")
    }
}

/// Whether `host` is one of `matches` (exact names ASCII case-insensitively, or under a wildcard).
pub fn host_matches_any(matches: &[HostMatch], host: &str) -> bool {
    matches.iter().any(|m| match m {
        HostMatch::Exact(v) => host.eq_ignore_ascii_case(v),
        HostMatch::Suffix(s) => host_suffix_covers(s, host),
    })
}

/// Gateway API's `PathPrefix` (and docs/semantics.md §3's path prefix): element-wise, so `/mcp` (or `/mcp/`)
/// matches `/mcp` and `/mcp/x` but not `/mcpx`; `/` matches every path. The one home of this rule
/// for the engine and the controller's route selection.
pub fn path_prefix_matches(prefix: &str, path: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty()
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A host-name wildcard (`*.example.com`, held as the suffix `.example.com`) covers `host`: a deeper
/// name, compared ASCII case-insensitively; `example.com` itself is not covered. The one home of
/// this rule for the engine and the controller's host names.
pub fn host_suffix_covers(suffix: &str, host: &str) -> bool {
    host.len() > suffix.len()
        && host.is_char_boundary(host.len() - suffix.len())
        && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefixes_match_whole_segments() {
        for (prefix, path, want) in [
            ("/mcp", "/mcp", true),
            ("/mcp", "/mcp/x", true),
            ("/mcp/", "/mcp", true),
            ("/mcp", "/mcpx", false),
            ("/mcp", "/", false),
            ("/", "/anything", true),
            ("", "/anything", true),
        ] {
            assert_eq!(path_prefix_matches(prefix, path), want, "{prefix} {path}");
        }
    }

    #[test]
    fn host_wildcards_cover_deeper_names_only() {
        for (suffix, host, want) in [
            (".example.com", "a.example.com", true),
            (".example.com", "A.Example.COM", true),
            (".example.com", "a.b.example.com", true),
            (".example.com", "example.com", false),
            (".example.com", ".example.com", false),
            (".example.com", "aexample.com", false),
            // A suffix boundary inside a multi-byte character is no match (and no panic).
            (".example.com", "é.example.com", true),
            ("é.com", "xé.com", true),
            ("b.com", "a\u{e9}.com", false),
        ] {
            assert_eq!(host_suffix_covers(suffix, host), want, "{suffix} {host}");
        }
    }
}
