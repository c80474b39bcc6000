//! The HTTP matchers of a rule (`methods`, `ports`, `paths`, `hosts`, `headers`), compiled.

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
                        CompiledPath::Prefix(if v.len() > 1 { v.trim_end_matches('/').to_string() } else { v.clone() })
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
        for host in &m.hosts {
            let h = match host {
                HostMatch::Exact(h) => h.as_str(),
                HostMatch::Suffix(s) => s.strip_prefix('.').ok_or_else(|| format!("host suffix {s:?} must start with '.'"))?,
            };
            if h.is_empty() || h.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(format!("host {host:?} must be non-empty lower-case"));
            }
        }
        Ok(Self { methods: m.methods.clone(), paths, headers, hosts: m.hosts.clone(), ports: m.ports.clone() })
    }

    pub(super) fn matches(&self, req: &HttpRequest<'_>) -> bool {
        self.first_failure(req).is_none()
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
                CompiledPath::Prefix(v) => {
                    v == "/" || path.strip_prefix(v.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                }
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
                HostMatch::Suffix(s) => {
                    host.len() > s.len()
                        && host.is_char_boundary(host.len() - s.len())
                        && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
                }
            });
            if !ok {
                return Some("hosts");
            }
        }
        let headers_ok = self.headers.iter().all(|(name, v)| {
            req.header_values(name).filter_map(|value| mcp_header_value(name, value)).any(|value| match v {
                CompiledValue::Exact(e) => *value == **e,
                CompiledValue::Regex(r) => r.is_match(&value),
            })
        });
        (!headers_ok).then_some("headers")
    }
}

