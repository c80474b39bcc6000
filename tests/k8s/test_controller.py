"""`toolgate controller` against a real Kubernetes API server (tests/k8s/apiserver.sh: the
apiextensions-apiserver with etcd; Gateway API and Istio CRDs installed): WasmPlugin output, policy
status, level-triggered re-admission, convergence after a restart, TrafficExtension output; and the
WasmPlugin's pluginConfig, as the API server returns it (JSON text, keys in its own order), loaded into
the real filter in a real Envoy whose clusters are named as Istio names them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/e2e"))

import harness  # noqa: E402
from harness import assert_allowed, assert_denied  # noqa: E402

CACHE = Path(os.environ.get("KCAS_PREFIX", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolgate/kcas"))
KUBECTL = CACHE / "bin/kubectl"
ISTIO_SVC = "outbound|8080||mcp-server.default.svc.cluster.local"


class ApiServer:
    def __init__(self, run: Path):
        self.run = run
        ports = [harness.free_port() for _ in range(2)]
        while ports[1] + 1 == ports[0]:
            ports[1] = harness.free_port()
        self.env = {**os.environ, "KCAS_PREFIX": str(CACHE), "KCAS_RUN": str(run),
                    "KCAS_PORT": str(ports[0]), "KCAS_ETCD_PORT": str(ports[1])}
        out = subprocess.run(["bash", str(REPO / "tests/k8s/apiserver.sh"), "start"], env=self.env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"the test API server did not start:\n{out.stdout}\n{out.stderr}"
        self.kubeconfig = run / "admin.kubeconfig"

    def stop(self):
        subprocess.run(["bash", str(REPO / "tests/k8s/apiserver.sh"), "stop"], env=self.env, capture_output=True)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run([str(KUBECTL), *args], env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
                             input=input, capture_output=True, text=True, timeout=60)
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stdout}{out.stderr}"
        return out

    def apply(self, yaml_text: str):
        self.kubectl("apply", "-f", "-", input=yaml_text)

    def get(self, kind: str, name: str | None = None) -> dict | None:
        out = self.kubectl("get", kind, *([name] if name else []), "-n", "default", "-o", "json", check=False)
        if out.returncode != 0:
            return None
        return json.loads(out.stdout)


class Controller:
    def __init__(self, server: ApiServer, workdir: Path, *args: str):
        self.log = workdir / f"controller-{time.monotonic_ns()}.log"
        self.trace = workdir / f"controller-{time.monotonic_ns()}.trace"
        self.metrics_port = harness.free_port()
        self.proc = subprocess.Popen(
            [str(harness.toolgate_binary()), "controller", "--wasm-url", "oci://registry.example/toolgate:0.1.0",
             "--wasm-sha256", "ab" * 32, "--trace", str(self.trace),
             "--metrics-addr", f"127.0.0.1:{self.metrics_port}", *args],
            env={**os.environ, "KUBECONFIG": str(server.kubeconfig)}, stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: "watching" in self.log.read_text(), timeout=60, what="controller watching")

    def get(self, path: str) -> harness.Response:
        return harness.request("GET", f"http://127.0.0.1:{self.metrics_port}{path}")

    def writes(self) -> list[int]:
        if not self.trace.exists():
            return []
        return [json.loads(line)["writes"] for line in self.trace.read_text().splitlines() if line]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} missing: run `bash tests/k8s/apiserver.sh ensure` (make test-k8s does)")
    server = ApiServer(tmp_path_factory.mktemp("kcas"))
    try:
        server.kubectl("apply", "--server-side", "-f", str(REPO / "crds"), "-f",
                       str(REPO / "tests/k8s/thirdparty-crds/gateway-api-v1.6.1"), "-f",
                       str(REPO / "tests/k8s/thirdparty-crds/istio"))
        server.kubectl("wait", "--for=condition=Established", "--timeout=60s", "--all", "crd")
        yield server
    finally:
        server.stop()


GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 8080, protocol: HTTP}]
"""
BACKEND = """
apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {name: tools, namespace: default}
spec: {mcp: {serviceName: mcp-server, port: 8080}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{matches: [{path: {type: PathPrefix, value: /mcp}}], backendRefs: [{name: mcp-server, port: 8080}]}]
"""


def allow_policy(name: str, target: str, tools: list[str], extra: str = "") -> str:
    ref = ("{group: gateway.networking.k8s.io, kind: Gateway, name: %s}" % target if target.startswith("gw")
           else "{group: agentic.networking.x-k8s.io, kind: XBackend, name: %s}" % target)
    return f"""
apiVersion: agentic.networking.x-k8s.io/v1alpha1
kind: XAccessPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{ref}]
  action: Allow
  rules:
  - name: tools
    authorization: {{type: Inline, mcp: {{methods: [{{name: tools/call, params: {json.dumps(tools)}}}]}}}}
{extra}"""


def ext_auth(name: str) -> str:
    return f"""
apiVersion: agentic.networking.x-k8s.io/v1alpha1
kind: XAccessPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: Gateway, name: gw}}]
  action: ExternalAuth
  externalAuth: {{protocol: GRPC, grpc: {{}}, backendRef: {{name: authz, port: 9000}}}}
"""


def reasons(server: ApiServer) -> dict[str, str]:
    items = (server.get("xaccesspolicies") or {}).get("items", [])
    return {i["metadata"]["name"]: ",".join(c["reason"] for a in i.get("status", {}).get("ancestors", [])
                                            for c in a["conditions"]) for i in items}


def wait_reasons(server: ApiServer, want: dict[str, str]):
    harness.wait_for(lambda: all(reasons(server).get(k) == v for k, v in want.items()) or None, timeout=20,
                     what=f"statuses {want} (have {reasons(server)})")


def plugin(server: ApiServer, name: str = "toolgate-gw-http", kind: str = "wasmplugin") -> dict | None:
    return server.get(kind, name)


def envoy_config(plugin_config: str, wasm: Path, port: int, mcp: harness.McpServer) -> dict:
    """What Istio builds for a gateway with this WasmPlugin: the filter gets pluginConfig as JSON text;
    routes go to Services, clusters are named outbound|<port>||<host>."""
    return {
        "static_resources": {
            "listeners": [{
                "name": "gw", "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "gw",
                    "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                        {"match": {"prefix": "/mcp"}, "route": {"cluster": ISTIO_SVC}}]}]},
                    "http_filters": [
                        {"name": "envoy.filters.http.wasm", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
                            "config": {"name": "toolgate", "root_id": "toolgate", "fail_open": False,
                                       "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                                         "value": plugin_config},
                                       "vm_config": {"vm_id": "toolgate", "runtime": "envoy.wasm.runtime.v8",
                                                     "code": {"local": {"filename": str(wasm)}}}}}},
                        {"name": "envoy.filters.http.buffer", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                            "max_request_bytes": 4194304}},
                        {"name": "envoy.filters.http.router", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}],
            "clusters": [{"name": ISTIO_SVC, "type": "STATIC", "connect_timeout": "5s",
                          "load_assignment": {"cluster_name": ISTIO_SVC, "endpoints": [{"lb_endpoints": [{"endpoint": {
                              "address": {"socket_address": {"address": mcp.host, "port_value": mcp.port}}}}]}]}}],
        },
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
    }


def call(port: int, tool: str, mcp: harness.McpServer) -> harness.Sent:
    tag = f"tg={time.monotonic_ns()}"
    body = harness.jsonrpc("tools/call", {"name": tool, "arguments": {"a": 2, "b": 3, "message": "m"}}, id=7)
    r = harness.request("POST", f"http://127.0.0.1:{port}/mcp?{tag}", body,
                        {"content-type": "application/json", "accept": "application/json, text/event-stream"})
    executed = [e for e in mcp.executed() if str(e.get("path", "")).endswith(tag)]
    return harness.Sent(r, tag, 7, executed, len(executed))


def test_controller(cluster, tmp_path, wasm_path, start_mcp_server):
    server = cluster
    controller = Controller(server, tmp_path)
    try:
        server.apply(GATEWAY + "---" + BACKEND + "---" + allow_policy("sum-and-echo", "gw", ["get-sum", "echo"])
                     + "---" + allow_policy("no-env", "tools", ["get-sum"]))
        wp = harness.wait_for(lambda: plugin(server), timeout=20, what="WasmPlugin")
        spec = wp["spec"]
        assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]
        assert (spec["phase"], spec["failStrategy"]) == ("AUTHZ", "FAIL_CLOSE")
        assert spec["url"] == "oci://registry.example/toolgate:0.1.0" and spec["sha256"] == "ab" * 32
        assert spec["match"] == [{"ports": [{"number": 8080}]}] and "mode" not in spec["match"][0]
        assert wp["metadata"]["ownerReferences"][0]["kind"] == "Gateway"
        assert list(spec["pluginConfig"]["backends"]) == [ISTIO_SVC]
        wait_reasons(server, {"sum-and-echo": "Accepted", "no-env": "Accepted"})
        assert controller.get("/healthz").status == 200 and controller.get("/readyz").status == 200
        metrics = controller.get("/metrics").body.decode()
        assert "toolgate_controller_plans_written_total 1" in metrics, metrics
        assert 'toolgate_controller_policies{reason="Accepted"} 2' in metrics, metrics
        times = {i["metadata"]["name"]: i["status"]["ancestors"][0]["conditions"][0]["lastTransitionTime"]
                 for i in server.get("xaccesspolicies")["items"]}

        # The pluginConfig as Istio hands it to the filter: JSON text, in the API server's key order.
        text = json.dumps(spec["pluginConfig"])
        assert list(spec["pluginConfig"])[0] != "version", "not the controller's own key order"
        mcp = start_mcp_server("mcp", workdir=tmp_path / "mcp")
        port = harness.free_port()
        config = harness.write_json(tmp_path / "envoy.json", envoy_config(text, wasm_path, port, mcp))
        envoy = harness.Envoy.start(config, tmp_path, "envoy", listeners=[port])
        try:
            assert_allowed(call(port, "get-sum", mcp))      # gateway and backend allow
            assert_denied(call(port, "echo", mcp))          # the backend level (keyed by Istio's cluster) denies
            assert_denied(call(port, "get-env", mcp))       # the gateway level denies
        finally:
            envoy.stop()

        # The policy patched: the plan changes.
        hash_before = spec["pluginConfig"]["hash"]
        server.apply(allow_policy("sum-and-echo", "gw", ["get-sum"]))
        harness.wait_for(lambda: plugin(server)["spec"]["pluginConfig"]["hash"] != hash_before, timeout=20,
                         what="new plan")

        # Two ExternalAuth policies on one target: the junior is not accepted until the senior goes.
        server.apply(ext_auth("ea-a") + "---" + ext_auth("ea-b"))
        wait_reasons(server, {"ea-a": "Accepted", "ea-b": "LimitPerTargetExceeded"})
        assert plugin(server)["spec"]["pluginConfig"]["gateway"]["externalAuth"]["authorizer"]["cluster"] == \
            "outbound|9000||authz.default.svc.cluster.local"
        server.kubectl("delete", "xaccesspolicy", "ea-a", "-n", "default")
        wait_reasons(server, {"ea-b": "Accepted"})
        server.kubectl("delete", "xaccesspolicy", "ea-b", "-n", "default")

        # A bad CEL expression, then fixed.
        bad = allow_policy("cel", "gw", ["x"]).replace(
            "authorization: {type: Inline, mcp: {methods: [{name: tools/call, params: [\"x\"]}]}}",
            "authorization: {type: CEL, cel: {expression: \"request.nope == 1\"}}")
        server.apply(bad)
        wait_reasons(server, {"cel": "InvalidCEL"})
        server.apply(bad.replace("request.nope == 1", "request.mcp.tool_name == 'x'"))
        wait_reasons(server, {"cel": "Accepted"})

        # A missing Gateway, then created.
        server.apply(allow_policy("later", "gw2", ["x"]))
        wait_reasons(server, {"later": "TargetNotFound"})
        server.apply(GATEWAY.replace("name: gw,", "name: gw2,").replace("port: 8080", "port: 9090"))
        wait_reasons(server, {"later": "Accepted"})
        harness.wait_for(lambda: plugin(server, "toolgate-gw2-http"), timeout=20, what="gw2's WasmPlugin")

        # Unchanged statuses keep their transition time.
        time.sleep(1.5)
        now = {i["metadata"]["name"]: i["status"]["ancestors"][0]["conditions"][0]["lastTransitionTime"]
               for i in server.get("xaccesspolicies")["items"]}
        assert now["no-env"] == times["no-env"], (now, times)

        # Restarted: converges to the same objects without writing.
        controller.stop()
        controller = Controller(server, tmp_path)
        time.sleep(3)
        assert controller.writes() in ([], [0]) or set(controller.writes()) == {0}, controller.writes()

        # Every policy deleted: the WasmPlugins go.
        server.kubectl("delete", "xaccesspolicies", "--all", "-n", "default")
        harness.wait_for(lambda: not (server.get("wasmplugins") or {}).get("items"), timeout=20,
                         what="WasmPlugins deleted")
        controller.stop()

        # --output trafficextension: the same content under spec.wasm, and no WasmPlugin.
        controller = Controller(server, tmp_path, "--output", "trafficextension")
        server.apply(allow_policy("sum-and-echo", "gw", ["get-sum"]))
        te = harness.wait_for(lambda: plugin(server, kind="trafficextension"), timeout=20, what="TrafficExtension")
        assert te["spec"]["wasm"]["failStrategy"] == "FAIL_CLOSE"
        assert te["spec"]["wasm"]["pluginConfig"]["gateway"]["allow"][0]["name"] == "default/sum-and-echo"
        assert not (server.get("wasmplugins") or {}).get("items")
    finally:
        controller.stop()
