"""Envoy's own MCP filter + RBAC filter as the authorization of a listener: the upstream reference data
plane that `make bench`'s row (m) measures and scripts/bypass-reference.py runs the bypass corpus against.

`envoy.filters.http.mcp` (Envoy 1.40, api/envoy/extensions/filters/http/mcp/v3/mcp.proto; the field
names below are the pinned binary's own descriptor) buffers a JSON POST body, parses it and writes
`jsonrpc`, `id`, `method`, `params.name` (and `is_mcp_request`, `status`) into the dynamic metadata
namespace `envoy.filters.http.mcp`; `envoy.filters.http.rbac` (ALLOW action) then matches that
metadata and the caller's principal (`authenticated.principal_name`: the verified client
certificate's URI SAN, the SPIFFE ID). Nothing here is Toolgate's: it is how a user would write
Toolgate's rule with the upstream filters.

Used by bench/configs.py (`edit_mcp_rbac`) and tests/bypass/reference.py; no imports from either.
"""

from __future__ import annotations

MCP_FILTER = "envoy.filters.http.mcp"
MCP_NAMESPACE = "envoy.filters.http.mcp"  # dynamic metadata namespace the MCP filter writes (measured)
ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}

# Toolgate's MATCH_BASE_PROTOCOL_METHODS (docs/semantics.md §3, policy/src/eval/mod.rs is_base_method),
# as RBAC can say it on the MCP filter's `method`: exact names and prefixes.
BASE_METHODS = ("initialize", "ping", "tools/list", "server/discover", "subscriptions/listen")
BASE_PREFIXES = ("completion/", "logging/", "notifications/")


def mcp_filter(max_body: int | None = None, hardened: bool = False) -> dict:
    """The MCP filter. Defaults are the reference's (traffic_mode PASS_THROUGH: a request that is not MCP
    goes on without metadata, which RBAC then does not match; attributes from the body). `max_body`:
    max_request_body_size (Toolgate's --max-body-bytes equivalent). `hardened`: every option of the
    filter that refuses more (REJECT_NO_MCP, reject_duplicate_keys, attribute_source VERIFY: the
    Mcp-Method/Mcp-Name headers must agree with the body)."""
    cfg: dict = {"@type": "type.googleapis.com/envoy.extensions.filters.http.mcp.v3.Mcp"}
    if max_body is not None:
        cfg["max_request_body_size"] = max_body
    if hardened:
        cfg["traffic_mode"] = "REJECT_NO_MCP"
        cfg["reject_duplicate_keys"] = True
        cfg["attribute_source"] = "VERIFY"
    return {"name": MCP_FILTER, "typed_config": cfg}


def md(path: list[str], string_match: dict) -> dict:
    """An RBAC permission on the MCP filter's metadata at `path` (e.g. ["params", "name"])."""
    return {"metadata": {"filter": MCP_NAMESPACE, "path": [{"key": k} for k in path],
                         "value": {"string_match": string_match}}}


def method_is(name: str) -> dict:
    return md(["method"], {"exact": name})


def any_of(perms: list[dict]) -> dict:
    return perms[0] if len(perms) == 1 else {"or_rules": {"rules": perms}}


def tools_call(tools: list[str]) -> dict:
    """tools/call of one of `tools` (params.name compared exactly)."""
    return {"and_rules": {"rules": [method_is("tools/call"), any_of([md(["params", "name"], {"exact": t}) for t in tools])]}}


def base_protocol() -> dict:
    """Toolgate's base protocol as far as RBAC can see it: the base methods on the MCP filter's metadata,
    a GET (the server-message stream) and a DELETE carrying Mcp-Session-Id (session end). RBAC cannot
    see whether a GET or DELETE has a body (Toolgate refuses one that has), nor a JSON-RPC response sent
    by the client (the MCP filter writes no method for it)."""
    return any_of([method_is(m) for m in BASE_METHODS]
                  + [md(["method"], {"prefix": p}) for p in BASE_PREFIXES]
                  + [{"header": {"name": ":method", "string_match": {"exact": "GET"}}},
                     {"and_rules": {"rules": [{"header": {"name": ":method", "string_match": {"exact": "DELETE"}}},
                                              {"header": {"name": "mcp-session-id", "present_match": True}}]}}])


def path_prefix(prefix: str) -> dict:
    """Gateway API PathPrefix (element-wise: /mcp/public matches /mcp/public and /mcp/public/x, not
    /mcp/publicx) on the path without its query."""
    prefix = prefix.rstrip("/")
    return any_of([{"url_path": {"path": {"exact": prefix}}}, {"url_path": {"path": {"prefix": prefix + "/"}}}])


def host_is(host: str) -> dict:
    """Toolgate's `hosts` matcher (case-insensitive, the port ignored) on the :authority header."""
    return {"header": {"name": ":authority", "string_match": {"safe_regex": {
        "regex": "(?i)" + host.replace(".", r"\.") + r"(:[0-9]+)?"}}}}


def rbac_filter(permission: dict, principal: str | None = None, name: str = "toolgate-equivalent") -> dict:
    """RBAC, action ALLOW, one policy: `permission` for `principal` (the client certificate's URI SAN;
    None: any caller). Everything the policy does not match is denied (403 "RBAC: access denied")."""
    principals = [{"authenticated": {"principal_name": {"exact": principal}}}] if principal else [{"any": True}]
    return {"name": "envoy.filters.http.rbac", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
        "rules": {"action": "ALLOW", "policies": {name: {"permissions": [permission], "principals": principals}}}}}


def http_filters(permission: dict, principal: str | None = None, max_body: int | None = None,
                 hardened: bool = False) -> list[dict]:
    """The HTTP filter chain of a listener: MCP filter, RBAC, router."""
    return [mcp_filter(max_body, hardened), rbac_filter(permission, principal), ROUTER]
