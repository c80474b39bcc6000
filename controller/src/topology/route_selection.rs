//! Which route rule a request takes, as Envoy chooses it from the configuration `render` writes:
//! Gateway API precedence between matches, and the host, path, method, header and query parameter
//! matches themselves. `explain` and the tests use it; `render` orders routes by [`Precedence`].

use gateway_api::apis::standard::httproutes::{
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};

use super::{ListenerOut, RouteRuleOut};
use crate::model::{self, RouteMatch};

/// Gateway API route precedence: exact path, longest prefix, method, most headers, most query
/// params, then declaration order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Precedence {
    exact: std::cmp::Reverse<bool>,
    path_len: std::cmp::Reverse<usize>,
    method: std::cmp::Reverse<bool>,
    headers: std::cmp::Reverse<usize>,
    queries: std::cmp::Reverse<usize>,
    order: usize,
}

impl Precedence {
    pub fn of(m: &RouteMatch, order: usize) -> Self {
        use std::cmp::Reverse;
        let (kind, value) = path_of(m);
        Precedence {
            exact: Reverse(*kind == HttpRouteRulesMatchesPathType::Exact),
            path_len: Reverse(value.len()),
            method: Reverse(m.method.is_some()),
            headers: Reverse(m.headers.as_ref().map_or(0, Vec::len)),
            queries: Reverse(m.query_params.as_ref().map_or(0, Vec::len)),
            order,
        }
    }
}

/// A match's path: its type (default `PathPrefix`) and value (default `/`).
pub fn path_of(m: &RouteMatch) -> (&HttpRouteRulesMatchesPathType, &str) {
    static PATH_PREFIX: HttpRouteRulesMatchesPathType = HttpRouteRulesMatchesPathType::PathPrefix;
    let p = m.path.as_ref();
    (
        p.and_then(|p| p.r#type.as_ref()).unwrap_or(&PATH_PREFIX),
        p.and_then(|p| p.value.as_deref()).unwrap_or("/"),
    )
}

impl ListenerOut {
    /// The route rule a request takes, as Envoy would choose it from the rendered configuration
    /// (host, path, method, header and query parameter matches).
    pub fn select_route(
        &self,
        host: &str,
        path: &str,
        method: &str,
        headers: &[(String, String)],
    ) -> Option<&RouteRuleOut> {
        let host = host
            .rsplit_once(':')
            .map_or(host, |(h, _)| h)
            .to_ascii_lowercase();
        let (url_path, query) = path.split_once('?').unwrap_or((path, ""));
        let query = query_params(query);
        let mut candidates: Vec<(Precedence, &RouteRuleOut)> = Vec::new();
        for route in &self.routes {
            let hosts: Vec<&str> = if route.hostnames.is_empty() {
                self.listener.hostname.as_deref().into_iter().collect()
            } else {
                route.hostnames.iter().map(String::as_str).collect()
            };
            if !hosts.is_empty() && !hosts.iter().any(|h| host_matches(h, &host)) {
                continue;
            }
            for rule in &route.rules {
                let matches = if rule.matches.is_empty() {
                    vec![RouteMatch::default()]
                } else {
                    rule.matches.clone()
                };
                for m in &matches {
                    if route_match_holds(m, url_path, method, headers, &query) {
                        candidates.push((Precedence::of(m, candidates.len()), rule));
                    }
                }
            }
        }
        candidates.sort_by(|a, b| a.0.cmp(&b.0));
        candidates.into_iter().next().map(|(_, r)| r)
    }
}

fn host_matches(pattern: &str, host: &str) -> bool {
    crate::hostname::Hostname::of(Some(pattern)).matches(host)
}

/// A query string's parameters in order, as Envoy's route matcher reads them (split on `&` and the
/// first `=`, not percent-decoded).
fn query_params(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn route_match_holds(
    m: &RouteMatch,
    path: &str,
    method: &str,
    headers: &[(String, String)],
    query: &[(String, String)],
) -> bool {
    let (kind, value) = path_of(m);
    let path_ok = match kind {
        HttpRouteRulesMatchesPathType::Exact => path == value,
        HttpRouteRulesMatchesPathType::RegularExpression => {
            toolgate_policy::eval::full_match_regex(value).is_ok_and(|r| r.is_match(path))
        }
        HttpRouteRulesMatchesPathType::PathPrefix => {
            toolgate_policy::eval::path_prefix_matches(value, path)
        }
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    path_ok
        && m.method
            .as_ref()
            .is_none_or(|x| model::method_name(x) == method)
        && m.headers.iter().flatten().all(|h| {
            header(&h.name).is_some_and(|v| match h.r#type {
                Some(HttpRouteRulesMatchesHeadersType::RegularExpression) => {
                    toolgate_policy::eval::full_match_regex(&h.value).is_ok_and(|r| r.is_match(v))
                }
                _ => v == h.value,
            })
        })
        && m.query_params.iter().flatten().all(|q| {
            // Envoy matches the parameter's first value.
            query
                .iter()
                .find(|(n, _)| n == &q.name)
                .is_some_and(|(_, v)| match q.r#type {
                    Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) => {
                        toolgate_policy::eval::full_match_regex(&q.value)
                            .is_ok_and(|r| r.is_match(v))
                    }
                    _ => v == &q.value,
                })
        })
}
