"""The Envoy configurations `make bench` compares: `toolgate render`'s output and the edits that derive the
other rows from it (bare Envoy, RBAC, the no-op, naive and callout filters, ext_authz, a baseline .wasm).
The rows whose key ends in `m` (other than (m)) run on the native host: `toolgate render --native-module`,
the dynamic module libtoolgate_module.so, or bench/noop-module."""

import json
import os
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

from common import MODULE_NOOP, REPO, TOOLGATE, WASM_CALLOUT, WASM_NAIVE, WASM_NOOP, WASM_TOOLGATE, WORK, sh
from workload import GATEWAY, NS, PRINCIPAL, TOOL, TOOLS, gateway_yaml, tls_objects
from procs import Server
import mcp_rbac


CONFIGS = {
    "a": ("bare Envoy", "router only"),
    "b": ("Envoy RBAC", "envoy.filters.http.rbac: caller's URI SAN + `mcp-method`/`mcp-name` headers in a 20-name allow-list"),
    "m": ("Envoy MCP filter + RBAC", "envoy.filters.http.mcp (its defaults, max_request_body_size 1 MiB as (c)'s limit) + envoy.filters.http.rbac: caller's URI SAN + the MCP filter's `method` tools/call and `params.name` in the 20-name allow-list, from the body (bench/mcp_rbac.py; the upstream reference data plane, its bypass corpus results in docs/security.md)"),
    "n": ("no-op proxy-wasm", "a proxy-wasm filter whose callbacks all continue (bench/noop-filter), same V8 runtime"),
    "nm": ("no-op dynamic module", "an Envoy dynamic module (ABI v0.2.0) whose hooks all continue (bench/noop-module), in (n)'s place: the floor of the native host"),
    "s": ("naive proxy-wasm", "reference point: holds the body, parses it with serde_json into a Value, checks params.name against the 20 names (bench/naive-filter); no identity, levels, metrics or access-log record"),
    "c": ("Toolgate, 20 tools", "`toolgate render` output: 1 gateway-level XAccessPolicy, 2 rules (SPIFFE source, tools/call with 10 tools each)"),
    "cm": ("Toolgate native, 20 tools", "(c)'s policies rendered with `toolgate render --native-module` (libtoolgate_module.so, `make module`): the same plan, run by the dynamic module"),
    "cn": ("Toolgate, 20 tools, list filtering off", "(c)'s policies rendered with `--list-filtering off` and run by toolgate_filter_no_list_filtering.wasm (the module without response callbacks): what a tools/call pays when list filtering is off"),
    "c26": ("Toolgate, 20 tools, MCP 2026-07-28", "(c)'s configuration and plan; the same call in its 2026-07-28 form: `MCP-Protocol-Version: 2026-07-28` beside (c)'s `Mcp-Method` and `Mcp-Name`, and `params._meta` with the protocol version (the filter compares all three with the body; same 300 B)"),
    "d": ("Toolgate, 1,000 policies", "`toolgate render` output: 1,000 policies, 10,450 tools on two levels (the API allows 5 policies per target): on the Gateway 5 policies x 10 sourced rules x 10 tools, on each of the 199 XBackends 5 policies x 10 tools; the called tool is in the last rule of the last policy of each level"),
    "dm": ("Toolgate native, 1,000 policies", "(d)'s policies rendered with `--native-module`"),
    "e": ("ext_authz (HTTP)", "envoy.filters.http.ext_authz to bench-authz (Rust, thread per connection) with the body and the caller (x-forwarded-client-cert URI); same rule"),
    "f1": ("Toolgate, CEL tool_name", "`toolgate render` output: 1 gateway-level XAccessPolicy, 1 rule: SPIFFE source (as (c)) + CEL `request.mcp.tool_name == 'tool-00017'`"),
    "f2": ("Toolgate, CEL argument", "as (f1), the CEL expression `request.mcp.tool_name == 'tool-00017' && request.mcp.params.arguments.path == '/srv/data/report.txt'` (the body carries `arguments.path`; `params` is captured for it)"),
    "g1": ("Toolgate + ExternalAuth gRPC", "(c)'s plan plus a gateway-level `action: ExternalAuth` policy (`protocol: GRPC, grpc: {}`, no rules: every request) calling toolgate-test-authz (tests/authz-servers) over gRPC, then (c)'s Allow policy"),
    "gm": ("Toolgate native + ExternalAuth gRPC", "(g1)'s policies rendered with `--native-module`: the gRPC authorizer called through the module's HTTP/2 stream callout, then (c)'s Allow policy"),
    "g0": ("proxy-wasm gRPC callout alone", "(g1)'s Envoy configuration with bench/callout-filter in Toolgate's place: holds the request, sends a fixed CheckRequest (the one Toolgate sends for the benchmark's call: principal, the request's headers, `mcp_proxy`) to the same authorizer through proxy-wasm's gRPC call, resumes on its answer; reads nothing, counts nothing: the floor of a callout through the proxy-wasm ABI, against (n)"),
    "g2": ("ext_authz (gRPC)", "envoy.filters.http.ext_authz, `grpc_service.envoy_grpc` (HTTP/2 cluster), `with_request_body`, router only: the same authorizer and rule file as (g1)"),
    "l1": ("Toolgate, tools/list filtered", "`toolgate render --list-filtering on` output: 1 gateway-level XAccessPolicy, 1 rule: SPIFFE source (as (c)), `MATCH_BASE_PROTOCOL_METHODS` (tools/list is one) and tools/call of 10 of the upstream's 100 tools (every tenth); the request is a `tools/list` POST (`Mcp-Method: tools/list`, no `Mcp-Name`), the upstream answers a JSON result of 100 tools of 300 B each (~30 KB, content-length set), the filter keeps the 10"),
    "lm": ("Toolgate native, tools/list filtered", "(l1)'s policy rendered with `--native-module --list-filtering on`: the same request and answer, the 10 tools kept by the module"),
    "l0": ("Toolgate, tools/list unfiltered", "(l1)'s policy rendered with `--list-filtering off`: the same request, authorized the same way; the 100-tool answer passes unchanged (the filter does no work on responses)"),
}
# Opt-in (`--baseline REV`): (c)'s configuration with the filter .wasm built at another commit.
BASELINE_KEY = "c0"
# Rows timed with the 300 B body only (their targets are about 300 B calls; keeps `make bench` short).
SMALL_ONLY = {"cn", "f1", "f2", "g0", "g1", "g2", "c26", "l1", "l0", "dm", "gm", "lm", BASELINE_KEY}
MODERN = {"c26"}
LIST_KEYS = {"l1", "l0", "lm"}
# The rows on the native host rendered by `toolgate render --native-module` ((nm) is derived from (cm)).
NATIVE = {"cm", "dm", "gm", "lm"}


def render(name: str, policies: str, certs: Path, upstream: Server, port: int, backends: int,
           resolve: list[str] = (), extra: list[str] = (), wasm: Path = WASM_TOOLGATE,
           native: Path | None = None) -> tuple[Path, float]:
    """`toolgate render` of the bench Gateway with `policies` (`extra`: more render options, `wasm`:
    the module; `native`: a dynamic module instead, `--native-module`); returns the Gateway's folder and
    the wall time of the render."""
    src = WORK / "inputs" / name
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    (src / "gateway.yaml").write_text(gateway_yaml(port, backends))
    (src / "tls.yaml").write_text(tls_objects(certs))
    (src / "policies.yaml").write_text(policies)
    out = WORK / "render" / name
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    code = ["--native-module", str(native)] if native else ["--wasm", str(wasm)]
    sh([str(TOOLGATE), "render", "-f", str(src), *code, "-o", str(out), "--bind", "127.0.0.1",
        "--resolve", f"upstream.{NS}={upstream.address}", *(a for r in resolve for a in ("--resolve", r)),
        "--access-log", "/dev/null", "--strict", *extra],
       stdout=subprocess.DEVNULL)
    took = time.perf_counter() - t
    return out / f"{NS}.{GATEWAY}", took


def derive(base: Path, key: str, edit) -> Path:
    """A copy of a rendered Gateway folder whose listener (and clusters) `edit(lds, cds)` changes."""
    dst = WORK / "render" / key / base.name
    shutil.rmtree(dst.parent, ignore_errors=True)
    shutil.copytree(base, dst)
    lds = json.loads((dst / "lds.json").read_text())
    cds = json.loads((dst / "cds.json").read_text())
    edit(lds, cds)
    static_clusters(cds)
    (dst / "lds.json").write_text(json.dumps(lds, indent=1))
    (dst / "cds.json").write_text(json.dumps(cds, indent=1))
    boot = json.loads((dst / "envoy.json").read_text())
    for k in ("lds_config", "cds_config"):
        src = boot["dynamic_resources"][k]["path_config_source"]
        src["path"] = str(dst / Path(src["path"]).name)
        src["watched_directory"]["path"] = str(dst)
    (dst / "envoy.json").write_text(json.dumps(boot, indent=1))
    return dst


def static_clusters(cds: dict) -> None:
    """The rendered clusters are STRICT_DNS (Service names); here every one points at 127.0.0.1. Made
    STATIC in every configuration alike, so that 200 DNS refresh timers per Envoy (every 5 s) add no
    noise to the measurements; nothing on the request path changes."""
    for c in cds["resources"]:
        if c.get("type") == "STRICT_DNS":
            eps = [lb["endpoint"]["address"]["socket_address"]["address"]
                   for e in c["load_assignment"]["endpoints"] for lb in e["lb_endpoints"]]
            if all(re.fullmatch(r"[0-9.]+", a) for a in eps):
                c["type"] = "STATIC"
                c.pop("dns_lookup_family", None)


def hcm_of(lds: dict) -> dict:
    (listener,) = lds["resources"]
    (chain,) = listener["filter_chains"]
    (hcm,) = chain["filters"]
    return hcm["typed_config"]


ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def edit_bare(lds, cds):
    hcm_of(lds)["http_filters"] = [ROUTER]


def edit_rbac(lds, cds):
    names = {"or_rules": {"rules": [{"header": {"name": "mcp-name", "string_match": {"exact": t}}} for t in TOOLS]}}
    method = {"header": {"name": "mcp-method", "string_match": {"exact": "tools/call"}}}
    hcm_of(lds)["http_filters"] = [{
        "name": "envoy.filters.http.rbac",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
            "rules": {"action": "ALLOW", "policies": {"agent-a-tools": {
                "permissions": [{"and_rules": {"rules": [method, names]}}],
                "principals": [{"authenticated": {"principal_name": {"exact": PRINCIPAL}}}],
            }}},
        },
    }, ROUTER]


def edit_mcp_rbac(lds, cds):
    """(m): (c)'s rule with Envoy's own filters: the MCP filter parses the body into dynamic metadata,
    RBAC allows agent-a's tools/call of one of the 20 tools (bench/mcp_rbac.py)."""
    hcm_of(lds)["http_filters"] = mcp_rbac.http_filters(mcp_rbac.tools_call(TOOLS), PRINCIPAL, max_body=1024 * 1024)


def edit_noop(lds, cds):
    hcm = hcm_of(lds)
    wasm = json.loads(json.dumps(hcm["http_filters"][0]))
    cfg = wasm["typed_config"]["config"]
    cfg["name"] = "noop"
    cfg["root_id"] = "noop"
    cfg.pop("configuration", None)
    cfg["vm_config"]["vm_id"] = "noop"
    cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_NOOP)
    hcm["http_filters"] = [wasm, ROUTER]


def edit_noop_module(lds, cds):
    """(nm): (cm)'s dynamic-module filter with bench/noop-module in Toolgate's place (no plan), then the
    router, as (n) is for Wasm."""
    hcm = hcm_of(lds)
    dm = json.loads(json.dumps(hcm["http_filters"][0]))
    cfg = dm["typed_config"]
    cfg["dynamic_module_config"]["name"] = "toolgate_bench_noop_module"
    cfg["dynamic_module_config"]["module"]["local"]["filename"] = str(MODULE_NOOP)
    cfg["filter_name"] = "noop"
    cfg.pop("filter_config", None)
    hcm["http_filters"] = [dm, ROUTER]


def edit_naive(lds, cds):
    edit_noop(lds, cds)
    cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
    cfg["name"] = cfg["root_id"] = cfg["vm_config"]["vm_id"] = "naive"
    cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_NAIVE)


def edit_none(lds, cds):
    pass


def _pb_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _pb_len(field: int, payload: bytes) -> bytes:
    return _pb_varint(field << 3 | 2) + _pb_varint(len(payload)) + payload


def _pb_str(field: int, text: str) -> bytes:
    return _pb_len(field, text.encode()) if text else b""


def _pb_value(v) -> bytes:
    """The fields of a google.protobuf.Value of the JSON value `v`."""
    if v is None:
        return _pb_varint(1 << 3) + b"\0"
    if isinstance(v, bool):
        return _pb_varint(4 << 3) + _pb_varint(int(v))
    if isinstance(v, (int, float)):
        return _pb_varint(2 << 3 | 1) + struct.pack("<d", float(v))
    if isinstance(v, str):
        return _pb_len(3, v.encode())
    if isinstance(v, dict):
        return _pb_len(5, _pb_struct(v))
    return _pb_len(6, b"".join(_pb_len(1, _pb_value(x)) for x in v))


def _pb_struct(d: dict) -> bytes:
    return b"".join(_pb_len(1, _pb_str(1, k) + _pb_len(2, _pb_value(v))) for k, v in d.items())


def check_request(body: bytes, authority: str) -> bytes:
    """The CheckRequest Toolgate sends for the benchmark's call (policy/src/authz.rs: the caller's
    principal, the request's HTTP attributes and every header as the filter sees wrk's POST behind
    Envoy's HCM, `mcp_proxy` with the parsed message), encoded here for (g0)."""
    msg = json.loads(body)
    headers = [(":authority", authority), (":path", "/mcp"), (":method", "POST"), (":scheme", "https"),
               ("content-length", str(len(body))), ("content-type", "application/json"),
               ("accept", "application/json, text/event-stream"), ("mcp-method", "tools/call"), ("mcp-name", TOOL),
               ("x-forwarded-proto", "https"), ("x-request-id", "6f1c2a4e-8d3b-4f5a-9c7e-2b1d0e9f8a7c")]
    http = (_pb_str(1, headers[-1][1]) + _pb_str(2, "POST")
            + b"".join(_pb_len(3, _pb_str(1, k) + _pb_str(2, v)) for k, v in headers)
            + _pb_str(4, "/mcp") + _pb_str(5, authority) + _pb_str(6, "https")
            + _pb_varint(9 << 3) + _pb_varint(len(body)) + _pb_str(10, "HTTP/1.1"))
    mcp = {"id": msg["id"], "jsonrpc": "2.0", "method": msg["method"], "params": msg["params"]}
    attributes = (_pb_len(1, _pb_str(4, PRINCIPAL)) + _pb_len(2, b"") + _pb_len(4, _pb_len(2, http))
                  + _pb_len(11, _pb_len(1, _pb_str(1, "mcp_proxy") + _pb_len(2, _pb_struct(mcp)))))
    return _pb_len(1, attributes)


def edit_callout(body: bytes, port: int):
    """(g0): (g1)'s configuration (its authorizer cluster included) with bench/callout-filter in place of
    Toolgate's filter, configured with (g1)'s authorizer and the CheckRequest of `body`."""
    def edit(lds, cds):
        cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
        authorizer = json.loads(cfg["configuration"]["value"])["gateway"]["externalAuth"]["authorizer"]
        upstream = _pb_len(1, _pb_str(1, authorizer["cluster"]) + _pb_str(2, authorizer["authority"]))
        cfg["name"] = cfg["root_id"] = cfg["vm_config"]["vm_id"] = "callout"
        cfg["vm_config"]["code"]["local"]["filename"] = str(WASM_CALLOUT)
        cfg["configuration"]["value"] = f"{upstream.hex()} {check_request(body, f'127.0.0.1:{port}').hex()}"
        # BENCH_G0_ARGS: host calls the callout filter adds when the answer comes, to measure what each
        # costs Envoy (bench/callout-filter: `read_answer=4`, `read_protocol=4`, `clock=4`, `count=4`;
        # `http`: the call through proxy-wasm's HTTP call), e.g. BENCH_G0_ARGS="read_protocol=4".
        for word in os.environ.get("BENCH_G0_ARGS", "").split():
            if word == "http":
                word = f"http={authorizer['cluster'].encode().hex()},{authorizer['authority'].encode().hex()}"
            cfg["configuration"]["value"] += f" {word}"
    return edit


def edit_ext_authz(authz: Server):
    def edit(lds, cds):
        hcm = hcm_of(lds)
        # The caller's identity reaches an HTTP authorizer as a header: x-forwarded-client-cert with the
        # URI SAN of the verified client certificate (set by the connection manager, any inbound value
        # dropped).
        hcm["forward_client_cert_details"] = "SANITIZE_SET"
        hcm["set_current_client_cert_details"] = {"uri": True}
        hcm["http_filters"] = [{
            "name": "envoy.filters.http.ext_authz",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                "http_service": {
                    "server_uri": {"uri": f"http://{authz.address}", "cluster": "bench_ext_authz", "timeout": "60s"},
                    "authorization_request": {"allowed_headers": {"patterns": [
                        {"exact": "x-forwarded-client-cert"}, {"exact": "mcp-method"}, {"exact": "mcp-name"},
                        {"exact": "content-type"}]}},
                },
                "with_request_body": {"max_request_bytes": 2 * 1024 * 1024, "allow_partial_message": False},
                "failure_mode_allow": False,
            },
        }, ROUTER]
        cds["resources"].append(local_cluster("bench_ext_authz", authz.port))
    return edit


def edit_ext_authz_grpc(authz: Server):
    """(g2): Envoy's own ext_authz filter calling toolgate-test-authz over gRPC (HTTP/2 cluster), with
    the body (the rule needs `params.name`); the caller's SPIFFE ID reaches a gRPC authorizer as
    `attributes.source.principal` without any setting."""
    def edit(lds, cds):
        hcm_of(lds)["http_filters"] = [{
            "name": "envoy.filters.http.ext_authz",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                "grpc_service": {"envoy_grpc": {"cluster_name": "bench_ext_authz_grpc"}, "timeout": "5s"},
                "transport_api_version": "V3",
                "with_request_body": {"max_request_bytes": 2 * 1024 * 1024, "allow_partial_message": False},
                "failure_mode_allow": False,
            },
        }, ROUTER]
        cds["resources"].append(local_cluster("bench_ext_authz_grpc", authz.port, http2=True))
    return edit


def local_cluster(name: str, port: int, http2: bool = False) -> dict:
    """A STATIC cluster of one endpoint on 127.0.0.1 (the ext_authz rows' authorizer), HTTP/2 for gRPC."""
    cluster = {
        "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        "name": name, "type": "STATIC", "connect_timeout": "5s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]},
    }
    if http2:
        cluster["typed_extension_protocol_options"] = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}}}}
    return cluster


def baseline_knows(rev: str, path: str, text: str) -> bool:
    """Whether file `path` at commit `rev` contains `text`."""
    out = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return out.returncode == 0 and text in out.stdout


def edit_baseline(wasm: Path, rev: str):
    """(c0): (c)'s configuration with the filter .wasm of an earlier commit. What that version predates
    is removed: plan settings its parser does not know (it refuses unknown fields: `authzTimeoutMs`,
    `pauseHeaders`, `listFiltering`, each kept when policy/src/plan.rs at `rev` has the field) and the
    Wasm option `allow_on_headers_stop_iteration` (kept when its render set it); the plan's hash is
    recomputed (SHA-256 of the compact plan with `hash` empty, as policy/src/plan.rs). With a baseline
    from before the lifecycle moved into the engine, all of them go."""
    import hashlib

    drop = [k for k, field in (("authzTimeoutMs", "pub authz_timeout_ms"), ("pauseHeaders", "pub pause_headers"),
                               ("listFiltering", "pub list_filtering"))
            if not baseline_knows(rev, "policy/src/plan.rs", field)]
    keep_stop = baseline_knows(rev, "controller/src/render.rs", "allow_on_headers_stop_iteration")

    def edit(lds, cds):
        cfg = hcm_of(lds)["http_filters"][0]["typed_config"]["config"]
        cfg["vm_config"]["code"]["local"]["filename"] = str(wasm)
        if not keep_stop:
            cfg.pop("allow_on_headers_stop_iteration", None)
        plan = json.loads(cfg["configuration"]["value"])
        for k in drop:
            plan.get("settings", {}).pop(k, None)
        plan["hash"] = ""
        plan["hash"] = hashlib.sha256(json.dumps(plan, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
        cfg["configuration"]["value"] = json.dumps(plan, separators=(",", ":"), ensure_ascii=False)
    return edit


def _plan_text(gateway_dir: Path) -> str | None:
    """The Toolgate plan in a Gateway folder's listener: the Wasm filter's configuration, or the dynamic
    module's filter_config."""
    for f in hcm_of(json.loads((gateway_dir / "lds.json").read_text()))["http_filters"]:
        conf = f["typed_config"].get("config", {}).get("configuration") or f["typed_config"].get("filter_config")
        if conf:
            return conf["value"]
    return None


def plan_of(gateway_dir: Path) -> dict:
    text = _plan_text(gateway_dir)
    if text is None:
        raise RuntimeError(f"no plan in {gateway_dir}")
    return json.loads(text)


def plan_bytes(gateway_dir: Path) -> int:
    text = _plan_text(gateway_dir)
    return len(text.encode()) if text else 0
