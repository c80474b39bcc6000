//! The rule file (JSON, re-read on every request, so a test changes behaviour without a restart) and
//! the decision it gives.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value as Json;

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Default_ {
    #[default]
    Allow,
    Deny,
}

/// Every field is optional; an empty object (or no `--rule` at all) allows everything.
#[derive(Deserialize, Clone, Debug)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    /// Tools whose `tools/call` is allowed (`params.name`).
    pub allow_tools: Vec<String>,
    /// Tools whose `tools/call` is denied; wins over `allow_tools`.
    pub deny_tools: Vec<String>,
    /// The decision for everything else, non-`tools/call` requests included.
    pub default: Default_,
    /// When set, only these callers pass (any other caller, or none, is denied before the tool rules).
    pub principals: Option<Vec<String>>,
    /// Denial: HTTP status the authorizer asks for (gRPC: `DeniedHttpResponse.status`; HTTP: its own status).
    pub deny_status: u16,
    /// Denial: headers (gRPC: `DeniedHttpResponse.headers`; HTTP: response headers).
    pub deny_headers: BTreeMap<String, String>,
    /// Denial: body (gRPC: `DeniedHttpResponse.body`; HTTP: response body).
    pub deny_body: String,
    /// Allow: headers for the upstream request (gRPC: `OkHttpResponse.headers`; HTTP: headers of the 200).
    pub ok_headers: BTreeMap<String, String>,
    /// Sleep this long before answering.
    pub delay_ms: u64,
    /// Answer bytes that are not a valid reply (gRPC: a well-framed message that is no CheckResponse;
    /// HTTP: a malformed status line).
    pub garbage: bool,
    /// Start the reply, then drop the connection.
    pub close_mid_reply: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            default: Default_::Allow,
            principals: None,
            deny_status: 403,
            deny_headers: BTreeMap::new(),
            deny_body: String::new(),
            ok_headers: BTreeMap::new(),
            delay_ms: 0,
            garbage: false,
            close_mid_reply: false,
        }
    }
}

impl Rule {
    /// The rule in `path`, or the default rule when there is no path.
    pub fn load(path: Option<&Path>) -> Result<Rule, String> {
        let Some(path) = path else {
            return Ok(Rule::default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("rule file {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("rule file {}: {e}", path.display()))
    }

    /// Allow or deny, and why. `mcp` is the JSON-RPC message (`jsonrpc`, `id`, `method`, `params`).
    pub fn decide(&self, principal: Option<&str>, mcp: Option<&Json>) -> Decision {
        if let Some(allowed) = &self.principals {
            match principal {
                Some(p) if allowed.iter().any(|a| a == p) => {}
                Some(p) => return Decision::deny(format!("principal {p} not listed")),
                None => return Decision::deny("no principal".into()),
            }
        }
        let method = mcp.and_then(|m| m.get("method")).and_then(Json::as_str);
        if method == Some("tools/call") {
            match tool_name(mcp) {
                Some(tool) if self.deny_tools.iter().any(|t| t == tool) => {
                    return Decision::deny(format!("tool {tool} in deny_tools"))
                }
                Some(tool) if self.allow_tools.iter().any(|t| t == tool) => {
                    return Decision {
                        allow: true,
                        reason: format!("tool {tool} in allow_tools"),
                    }
                }
                _ => {}
            }
        }
        match self.default {
            Default_::Allow => Decision {
                allow: true,
                reason: "default allow".into(),
            },
            Default_::Deny => Decision::deny("default deny".into()),
        }
    }
}

/// `params.name` of a JSON-RPC message, if a string.
pub fn tool_name(mcp: Option<&Json>) -> Option<&str> {
    mcp?.get("params")?.get("name")?.as_str()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allow: bool,
    pub reason: String,
}

impl Decision {
    fn deny(reason: String) -> Self {
        Decision {
            allow: false,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions() {
        let rule: Rule = serde_json::from_value(json!({
            "allow_tools": ["echo", "both"], "deny_tools": ["both"], "default": "deny",
            "principals": ["spiffe://a"]}))
        .unwrap();
        let call = |name: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}});
        assert!(rule.decide(Some("spiffe://a"), Some(&call("echo"))).allow);
        assert!(!rule.decide(Some("spiffe://a"), Some(&call("both"))).allow);
        assert!(!rule.decide(Some("spiffe://a"), Some(&call("other"))).allow);
        assert!(!rule.decide(Some("spiffe://b"), Some(&call("echo"))).allow);
        assert!(!rule.decide(None, Some(&call("echo"))).allow);
        assert!(
            !rule
                .decide(Some("spiffe://a"), Some(&json!({"method": "tools/list"})))
                .allow
        );
        assert!(Rule::default().decide(None, None).allow);
        assert_eq!(Rule::default().deny_status, 403);
        assert!(serde_json::from_value::<Rule>(json!({"alow_tools": []})).is_err());
    }
}
