//! A listener's route configuration: virtual hosts, route matches and route actions.

use std::collections::BTreeMap;

use gateway_api::apis::standard::httproutes::{
    HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatchesHeadersType,
    HttpRouteRulesMatchesPathType, HttpRouteRulesMatchesQueryParamsType,
};
use serde_json::{json, Value};

use super::Ctx;
use crate::model::{self, Listener, RouteMatch, UrlRewrite};
use crate::topology::{path_of, Precedence, RouteOut, Upstream};

impl Ctx<'_> {
    pub(super) fn route_config(
        &self,
        id: &str,
        listener: &Listener,
        routes: &[RouteOut],
        removed: &[String],
    ) -> Value {
        // One virtual host per distinct hostname set; routes without hostnames take the listener's.
        let mut vhosts: BTreeMap<Vec<String>, Vec<(Precedence, Value)>> = BTreeMap::new();
        for route in routes {
            let mut domains: Vec<String> = if route.hostnames.is_empty() {
                vec![listener.hostname.clone().unwrap_or_else(|| "*".to_string())]
            } else {
                route.hostnames.clone()
            };
            domains.sort();
            let entries = vhosts.entry(domains).or_default();
            for (r, rule) in route.rules.iter().enumerate() {
                let matches = if rule.matches.is_empty() {
                    vec![RouteMatch::default()]
                } else {
                    rule.matches.clone()
                };
                for m in &matches {
                    entries.push((
                        Precedence::of(m, entries.len()),
                        json!({
                            "name": format!("{}/rule{r}", route.name),
                            "match": route_match(m),
                            "route": route_action(rule.rewrite.as_ref(), m, &rule.backends, rule.timeout.as_deref()),
                        }),
                    ));
                }
                if rule.backends.is_empty() {
                    if let Some((_, last)) = entries.last_mut() {
                        last.as_object_mut().map(|o| o.remove("route"));
                        last["direct_response"] = json!({ "status": 500 });
                    }
                }
            }
        }
        let virtual_hosts: Vec<Value> = vhosts
            .into_iter()
            .enumerate()
            .map(|(i, (domains, mut entries))| {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                // Envoy matches the port too unless told otherwise; accept both forms.
                let domains: Vec<String> = domains.iter().flat_map(|d| [d.clone(), format!("{d}:*")]).filter(|d| d != "*:*").collect();
                json!({ "name": format!("vh{i}"), "domains": domains, "routes": entries.into_iter().map(|e| e.1).collect::<Vec<_>>() })
            })
            .collect();
        // Envoy reads lds.json and cds.json as two subscriptions, in no set order: a render that adds a
        // cluster and a route to it could have its listener update rejected ("unknown cluster") when the
        // listeners arrive first, and never applied. Without the check the listener is taken at once; a
        // request routed to a cluster not there yet gets Envoy's 503 until it is.
        let mut config =
            json!({ "name": id, "virtual_hosts": virtual_hosts, "validate_clusters": false });
        if !removed.is_empty() {
            // Token headers jwt_authn kept for the filter (docs/semantics.md §6b), not forwarded.
            config["request_headers_to_remove"] = json!(removed);
        }
        config
    }
}

fn string_match(regex: bool, value: &str) -> Value {
    if regex {
        json!({ "safe_regex": { "regex": value } })
    } else {
        json!({ "exact": value })
    }
}

fn route_match(m: &RouteMatch) -> Value {
    let (kind, value) = path_of(m);
    let mut out = match kind {
        HttpRouteRulesMatchesPathType::Exact => json!({ "path": value }),
        HttpRouteRulesMatchesPathType::RegularExpression => {
            json!({ "safe_regex": { "regex": value } })
        }
        HttpRouteRulesMatchesPathType::PathPrefix if value == "/" => json!({ "prefix": "/" }),
        HttpRouteRulesMatchesPathType::PathPrefix => {
            json!({ "path_separated_prefix": value.trim_end_matches('/') })
        }
    };
    let mut headers: Vec<Value> = m
        .headers
        .iter()
        .flatten()
        .map(|h| {
            let regex = h.r#type == Some(HttpRouteRulesMatchesHeadersType::RegularExpression);
            json!({ "name": h.name, "string_match": string_match(regex, &h.value) })
        })
        .collect();
    if let Some(method) = &m.method {
        headers.push(
            json!({ "name": ":method", "string_match": { "exact": model::method_name(method) } }),
        );
    }
    if !headers.is_empty() {
        out["headers"] = json!(headers);
    }
    if let Some(query_params) = m.query_params.as_ref().filter(|q| !q.is_empty()) {
        out["query_parameters"] = json!(query_params
            .iter()
            .map(|q| {
                let regex =
                    q.r#type == Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression);
                json!({ "name": q.name, "string_match": string_match(regex, &q.value) })
            })
            .collect::<Vec<_>>());
    }
    out
}

/// A Gateway API duration (`1h`, `1m30s`, `500ms`, `0s`) as Envoy's (`5400s`, `0.500s`).
pub fn envoy_duration(gateway_api: &str) -> Option<String> {
    let mut ms: u64 = 0;
    let mut rest = gateway_api;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let (n, tail) = rest.split_at(digits);
        let n: u64 = n.parse().ok()?;
        let (scale, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (1, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3_600_000, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60_000, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1000, t)
        } else {
            return None;
        };
        ms = ms.checked_add(n.checked_mul(scale)?)?;
        rest = tail;
    }
    Some(format!("{}.{:03}s", ms / 1000, ms % 1000))
}

fn route_action(
    rewrite: Option<&UrlRewrite>,
    m: &RouteMatch,
    backends: &[(Upstream, u32)],
    timeout: Option<&str>,
) -> Value {
    let mut action = match backends {
        [(u, _)] => json!({ "cluster": u.cluster_name() }),
        many => {
            json!({ "weighted_clusters": { "clusters": many.iter().map(|(u, w)| json!({ "name": u.cluster_name(), "weight": w })).collect::<Vec<_>>() } })
        }
    };
    // No request timeout unless the HTTPRoute gives one (docs/semantics.md §9.14): Envoy's default 15 s would cut
    // long tool calls and SSE streams; the connection manager's stream idle timeout applies instead.
    action["timeout"] = json!(timeout
        .and_then(envoy_duration)
        .unwrap_or_else(|| "0s".to_string()));
    if let Some(rw) = rewrite {
        if let Some(host) = &rw.hostname {
            action["host_rewrite_literal"] = json!(host);
        }
        if let Some(path) = &rw.path {
            match (
                &path.r#type,
                &path.replace_full_path,
                &path.replace_prefix_match,
            ) {
                (HttpRouteRulesFiltersUrlRewritePathType::ReplaceFullPath, Some(full), _) => {
                    action["regex_rewrite"] =
                        json!({ "pattern": { "regex": "^/.*$" }, "substitution": full });
                }
                (HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch, _, Some(prefix)) => {
                    let (_, matched) = path_of(m);
                    if matched == "/" || matched.trim_end_matches('/').is_empty() {
                        // Every path matches "/": put the new prefix in front of the whole path.
                        let prefix = prefix.trim_end_matches('/');
                        action["regex_rewrite"] = json!({ "pattern": { "regex": "^/(.*)$" }, "substitution": format!("{prefix}/\\1") });
                    } else {
                        action["prefix_rewrite"] = json!(prefix);
                    }
                }
                _ => {}
            }
        }
    }
    action
}
