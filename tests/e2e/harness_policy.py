"""Builders for the XAccessPolicy objects (plain dicts) the end-to-end tests render (harness.py
re-exports them)."""

from __future__ import annotations

from typing import Any, Sequence

# Builders for XAccessPolicy objects (plain dicts).

GATEWAY_NAME = "gw"
BACKEND_NAME = "tools"
BACKEND_REF = {"group": "agentic.networking.x-k8s.io", "kind": "XBackend", "name": BACKEND_NAME}


def sa(name: str, namespace: str | None = None) -> dict:
    ref = {"name": name}
    if namespace:
        ref["namespace"] = namespace
    return {"type": "ServiceAccount", "serviceAccount": ref}


def spiffe(id: str) -> dict:
    return {"type": "SPIFFE", "spiffe": id}


def mcp_match(*methods: str | tuple[str, Sequence[str]], base: bool = False) -> dict:
    """`mcp_match(("tools/call", ["get-sum"]), "tools/list", base=True)`."""
    out: dict[str, Any] = {}
    ms = []
    for m in methods:
        if isinstance(m, tuple):
            ms.append({"name": m[0], "params": list(m[1])})
        else:
            ms.append({"name": m})
    if ms:
        out["methods"] = ms
    out["mcpBaseProtocolMethodsOption"] = "MATCH_BASE_PROTOCOL_METHODS" if base else "SKIP_BASE_PROTOCOL_METHODS"
    return out


def rule(name: str, source: dict | None = None, **authz: Any) -> dict:
    """An AccessRule; keyword arguments become an Inline authorization (methods, paths, headers, hosts,
    ports, mcp)."""
    r: dict[str, Any] = {"name": name}
    if source is not None:
        r["source"] = source
    if authz:
        r["authorization"] = {"type": "Inline", **authz}
    return r


def tools_call_rule(name: str, tools: Sequence[str], source: dict | None = None, base: bool = False) -> dict:
    return rule(name, source, mcp=mcp_match(("tools/call", tools), base=base))


def policy(name: str, *rules: dict, target: str = "gateway", section: str | None = None,
           namespace: str = "default", creation: str | None = None) -> dict:
    """An Allow XAccessPolicy targeting the test Gateway (`target="gateway"`) or the XBackend `tools`."""
    if target == "gateway":
        ref = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}
    elif target == "backend":
        ref = {"group": "agentic.networking.x-k8s.io", "kind": "XBackend", "name": BACKEND_NAME}
    else:
        raise ValueError(target)
    if section:
        ref["sectionName"] = section
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if creation:
        meta["creationTimestamp"] = creation
    spec: dict[str, Any] = {"targetRefs": [ref], "action": "Allow"}
    if rules:
        spec["rules"] = list(rules)
    return {"apiVersion": "agentic.networking.x-k8s.io/v1alpha1", "kind": "XAccessPolicy", "metadata": meta,
            "spec": spec}


def external_auth_policy(name: str, *rules: dict, protocol: str = "GRPC", service: str = "authz",
                         port: int = 9000, target: str = "gateway", namespace: str = "default",
                         creation: str | None = None, grpc: dict | None = None, http: dict | None = None,
                         forward_body: int | None = None) -> dict:
    """An `action: ExternalAuth` XAccessPolicy calling the Service `service` (map it to an Authorizer
    with `Authorizer.resolve_arg()`); `grpc`/`http` are spec.externalAuth.grpc/http, `forward_body`
    sets forwardBody.maxSize."""
    p = policy(name, *rules, target=target, namespace=namespace, creation=creation)
    ea: dict[str, Any] = {"protocol": protocol, "backendRef": {"name": service, "port": port}}
    if grpc is not None:
        ea["grpc"] = grpc
    if http is not None:
        ea["http"] = http
    if forward_body is not None:
        ea["forwardBody"] = {"maxSize": forward_body}
    p["spec"]["action"] = "ExternalAuth"
    p["spec"]["externalAuth"] = ea
    return p
