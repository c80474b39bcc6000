"""What `make bench` sends and configures: the request bodies, the upstream's tools/list answer, and the
Gateway, TLS and XAccessPolicy YAML that `toolgate render` turns into each configuration."""

import json
from pathlib import Path


PRINCIPAL = "spiffe://cluster.local/ns/default/sa/a"
TOOLS = [f"tool-{i:05d}" for i in range(20)]
TOOL = "tool-00017"  # the tool every benchmark request calls
DENIED_TOOL = "tool-99999"
BACKENDS = 199  # XBackends (and routes) in every configuration; (d) has 5 policies on each + 5 on the Gateway
BACKENDS_10K = 1999  # for the 10,000-policy compile and plan-load measurements
NS = "default"
GATEWAY = "bench-gateway"
LISTENER_PORT_NAME = "https"

# Rows whose request is the MCP 2026-07-28 form of the call: the body carries params._meta's protocol
# version and the request this header besides (c)'s Mcp-Method and Mcp-Name.
V26 = "2026-07-28"
MODERN_HEADERS = {"mcp-protocol-version": V26}
# Rows whose request is a `tools/list` (LIST_REQUEST, timed in the 300 B body's place: one request
# only), answered by the upstream (`bench-upstream --tools-list`) with LIST_TOOLS, LIST_ENTRY_BYTES
# each (~30 KB); their policy lets agent-a call LIST_ALLOWED, so (l1)'s filter keeps 10 of 100.
LIST_TOOLS = [f"tool-{i:05d}" for i in range(100)]
LIST_ALLOWED = LIST_TOOLS[::10]
LIST_ENTRY_BYTES = 300
LIST_REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
ARG_PATH = "/srv/data/report.txt"  # `arguments.path` of every benchmark body (make_body), read by (f2)
BODIES = {"300B": 300, "64KiB": 64 * 1024, "1MiB": 1024 * 1024}


def make_body(size: int, tool: str, small_first: bool = True, modern: bool = False) -> bytes:
    """A JSON-RPC tools/call of exactly `size` bytes. Small bodies read like a typical call (method
    first); large ones carry big `arguments` with `method` and `params.name` last, so the reader has to
    go through the whole body (escapes included) before it knows what is called. `modern`: the MCP
    2026-07-28 form, with `params._meta` carrying the protocol version (same size: less padding)."""
    meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"' + V26 + '"},' if modern else ""
    if size <= 1024 and small_first:
        head = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + tool + '",' + meta + '"arguments":{"path":"/srv/data/report.txt","mode":"summary","text":"'
        tail = '"}}}'
    else:
        head = '{"jsonrpc":"2.0","id":1,"params":{' + meta + '"arguments":{"path":"/srv/data/report.txt","content":"'
        tail = '"},"name":"' + tool + '"},"method":"tools/call"}'
    n = size - len(head) - len(tail)
    assert n > 0, size
    unit = "The quick brown fox jumps over the lazy dog; \\\"quoted\\\" text, a tab\\t and \\u00e9t\\u00e9.\\n "
    text = unit * (n // len(unit)) + "x" * (n % len(unit))  # whole escapes only
    body = (head + text + tail).encode()
    assert len(body) == size, (len(body), size)
    json.loads(body)
    return body


def tools_list_response() -> bytes:
    """The upstream's answer to the list rows' tools/list: a JSON-RPC result (id 1, as LIST_REQUEST)
    of LIST_TOOLS, each entry exactly LIST_ENTRY_BYTES (name, title, a description padded to size, a
    small inputSchema), about 30 KB in all."""
    words = "Reads a file under /srv/data and returns its text, or a summary of it; paths outside are refused. "
    entries = []
    for i, name in enumerate(LIST_TOOLS):
        head = '{"name":"' + name + '","title":"Tool ' + str(i) + '","description":"'
        tail = ('","inputSchema":{"type":"object","properties":{"path":{"type":"string"},'
                '"mode":{"type":"string","enum":["summary","full"]}},"required":["path"]}}')
        n = LIST_ENTRY_BYTES - len(head) - len(tail)
        assert n > 0, n
        entry = head + (words * (n // len(words) + 1))[:n] + tail
        assert len(entry) == LIST_ENTRY_BYTES and json.loads(entry)["name"] == name
        entries.append(entry)
    body = ('{"jsonrpc":"2.0","id":1,"result":{"tools":[' + ",".join(entries) + "]}}").encode()
    assert [t["name"] for t in json.loads(body)["result"]["tools"]] == LIST_TOOLS
    return body


def tls_objects(certs: Path) -> str:
    import base64

    b64 = lambda p: base64.b64encode((certs / p).read_bytes()).decode()  # noqa: E731
    ca = (certs / "ca.crt").read_text()
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: bench-cert, namespace: {NS}}}\n"
        f"type: kubernetes.io/tls\ndata:\n  tls.crt: {b64('server.crt')}\n  tls.key: {b64('server.key')}\n"
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: agents-ca, namespace: {NS}}}\ndata:\n  ca.crt: |\n"
        + "".join(f"    {line}\n" for line in ca.splitlines())
    )


def backend_names(n: int) -> list[str]:
    """The benchmark's XBackend `tools` (route /mcp, any host) and n - 1 others (each on its own host)."""
    return ["tools"] + [f"b-{i:04d}" for i in range(n - 1)]


def gateway_yaml(port: int, backends: int) -> str:
    """The Gateway (one HTTPS listener requiring client certificates), and `backends` XBackends each
    with an HTTPRoute: `tools` at /mcp on any host, the others at /mcp on host <name>.bench.local. All
    configurations share this topology (so route lookup and clusters cost the same everywhere)."""
    out = [f"""apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {GATEWAY}, namespace: {NS}}}
spec:
  gatewayClassName: toolgate
  listeners:
  - name: {LISTENER_PORT_NAME}
    port: {port}
    protocol: HTTPS
    tls:
      mode: Terminate
      certificateRefs: [{{kind: Secret, name: bench-cert}}]
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{{group: "", kind: ConfigMap, name: agents-ca}}]
"""]
    for b in backend_names(backends):
        hosts = "" if b == "tools" else f"  hostnames: [{b}.bench.local]\n"
        out.append(f"""---
apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {{name: {b}, namespace: {NS}}}
spec:
  mcp: {{serviceName: upstream, port: 8080}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {b}, namespace: {NS}}}
spec:
  parentRefs: [{{name: {GATEWAY}}}]
{hosts}  rules:
  - matches: [{{path: {{type: PathPrefix, value: /mcp}}}}]
    backendRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: {b}}}]
""")
    return "".join(out)


def policy_yaml(name: str, target: str | None, rules: list[tuple[str | None, list[str]]], base: bool = False) -> str:
    """One Allow XAccessPolicy on the Gateway (target None) or an XBackend; each rule: (SPIFFE source or
    None, tools/call params); `base`: the rules also allow the base protocol methods
    (`MATCH_BASE_PROTOCOL_METHODS`: initialize, ping, tools/list, ...)."""
    ref = ("{group: gateway.networking.k8s.io, kind: Gateway, name: " + GATEWAY + "}" if target is None
           else "{group: agentic.networking.x-k8s.io, kind: XBackend, name: " + target + "}")
    out = [f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
           f"metadata: {{name: {name}, namespace: {NS}}}\nspec:\n  targetRefs: [{ref}]\n  action: Allow\n  rules:\n"]
    for i, (source, tools) in enumerate(rules):
        out.append(f"  - name: r{i}\n")
        if source:
            out.append(f"    source: {{type: SPIFFE, spiffe: \"{source}\"}}\n")
        out.append("    authorization:\n      type: Inline\n      mcp:\n        methods:\n"
                   f"        - name: tools/call\n          params: [{', '.join(tools)}]\n")
        if base:
            out.append("        mcpBaseProtocolMethodsOption: MATCH_BASE_PROTOCOL_METHODS\n")
    return "".join(out)


def policies_c() -> str:
    """(c): one gateway-level policy, two rules for agent-a with 10 tools each."""
    return policy_yaml("agents", None, [(PRINCIPAL, TOOLS[:10]), (PRINCIPAL, TOOLS[10:])])


def policies_l() -> str:
    """(l1)/(l0): one gateway-level policy, one rule for agent-a: the base protocol methods (tools/list
    among them) and tools/call of LIST_ALLOWED."""
    return policy_yaml("agents-list", None, [(PRINCIPAL, LIST_ALLOWED)], base=True)


def cel_policy_yaml(name: str, expression: str) -> str:
    """One Allow XAccessPolicy on the Gateway with one rule: agent-a's SPIFFE ID (as (c)) + a CEL rule."""
    return (f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
            f"metadata: {{name: {name}, namespace: {NS}}}\nspec:\n"
            f"  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {GATEWAY}}}]\n  action: Allow\n  rules:\n"
            f"  - name: r0\n    source: {{type: SPIFFE, spiffe: \"{PRINCIPAL}\"}}\n"
            f"    authorization:\n      type: CEL\n      cel: {{expression: {json.dumps(expression)}}}\n")


def policies_f1() -> str:
    return cel_policy_yaml("agents-cel", f"request.mcp.tool_name == '{TOOL}'")


def policies_f2() -> str:
    return cel_policy_yaml("agents-cel", f"request.mcp.tool_name == '{TOOL}' && request.mcp.params.arguments.path == '{ARG_PATH}'")


AUTHZ_SERVICE = "authz"  # the ExternalAuth backendRef of (g1), resolved with `render --resolve`


def policies_g1() -> str:
    """(c)'s policy plus a gateway-level ExternalAuth policy without rules (every request calls it)."""
    return policies_c() + (
        f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
        f"metadata: {{name: tools-authz, namespace: {NS}}}\nspec:\n"
        f"  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: {GATEWAY}}}]\n  action: ExternalAuth\n"
        f"  externalAuth: {{protocol: GRPC, grpc: {{}}, backendRef: {{name: {AUTHZ_SERVICE}, port: 9000}}}}\n")


def policies_many(backends: int) -> str:
    """Policies on two levels, as many as the API allows per target (5): on the Gateway, 5 policies of
    10 sourced rules x 10 tools (rules alternate between agent-a and other callers); on each of the
    `backends` XBackends, 5 policies of one rule x 10 tools. The benchmark's tools are in the last rule
    of the last gateway policy and in the last policy of XBackend `tools`. backends=199 gives 1,000
    policies and 10,450 tool names; backends=1,999 gives 10,000 policies."""
    out = []
    for i in range(5):
        rules = []
        for r in range(10):
            if (i, r) == (4, 9):
                rules.append((PRINCIPAL, TOOLS[10:]))
            else:
                source = PRINCIPAL if r % 2 else f"spiffe://cluster.local/ns/team-{i}-{r}/sa/agent"
                rules.append((source, [f"gw-{i}-{r}-{k}" for k in range(10)]))
        out.append(policy_yaml(f"gw-{i}", None, rules))
    for b in backend_names(backends):
        for p in range(5):
            tools = TOOLS[10:] if (b, p) == ("tools", 4) else [f"{b}-{p}-{k}" for k in range(10)]
            out.append(policy_yaml(f"{b}-p{p}", b, [(None, tools)]))
    return "".join(out)
