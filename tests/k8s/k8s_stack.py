"""The pieces of tests/k8s (its `cluster` fixture is in conftest.py): the test API server
(tests/k8s/kube-apiserver.sh: kube-apiserver v1.36 with etcd, RBAC and admission enforced; Toolgate's,
Gateway API's and Istio's CRDs and deploy/rbac.yaml installed), `toolgate controller` against it with
its ServiceAccount's token, reading policy statuses and outputs, and the Envoy configuration Istio would
build from the controller's WasmPlugins. The objects applied are gateway_objects.py's (shared with
tests/istio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/e2e"))

import harness  # noqa: E402
import istio_chain  # noqa: E402
from gateway_objects import ISTIO_SVC  # noqa: E402

# kube-apiserver, etcd and kubectl: tests/istio/gobuild.sh's cache.
CACHE = Path(os.environ.get("TOOLGATE_ISTIO_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolgate/istio")
KUBECTL = CACHE / "bin/kubectl"
SCRIPT = REPO / "tests/k8s/kube-apiserver.sh"
# The controller's identity (deploy/rbac.yaml), for `kubectl --as`.
CONTROLLER_SA = "system:serviceaccount:toolgate-system:toolgate-controller"


class ApiServer:
    def __init__(self, run: Path):
        self.run = run
        ports = [harness.free_port() for _ in range(2)]
        while abs(ports[1] - ports[0]) <= 1:
            ports[1] = harness.free_port()
        self.env = {**os.environ, "TOOLGATE_ISTIO_CACHE": str(CACHE), "KUBE_TEST_RUN": str(run),
                    "KUBE_TEST_PORT": str(ports[0]), "KUBE_TEST_ETCD_PORT": str(ports[1])}
        self.start()
        self.kubeconfig = run / "admin.kubeconfig"
        # A token of ServiceAccount toolgate-system/toolgate-controller: what the controller runs with.
        self.controller_kubeconfig = run / "controller.kubeconfig"

    def start(self, keep_data: bool = False):
        env = {**self.env, "KUBE_TEST_KEEP_DATA": "1" if keep_data else "0"}
        out = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"the test API server did not start:\n{out.stdout}\n{out.stderr}"

    def stop(self, keep_data: bool = False):
        env = {**self.env, "KUBE_TEST_KEEP_DATA": "1" if keep_data else "0"}
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """kubectl as the admin (system:masters); `--as` CONTROLLER_SA to act as the controller."""
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
            env={**os.environ, "KUBECONFIG": str(server.controller_kubeconfig)}, stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: "watching" in self.log.read_text() or self.proc.poll() is not None, timeout=60,
                         what="controller watching")
        assert self.proc.poll() is None, self.log.read_text()

    def get(self, path: str) -> harness.Response:
        return harness.request("GET", f"http://127.0.0.1:{self.metrics_port}{path}")

    def writes(self) -> list[int]:
        if not self.trace.exists():
            return []
        return [json.loads(line)["writes"] for line in self.trace.read_text().splitlines() if line]

    def stop(self):
        harness._stop_process(self.proc)


def reasons(server: ApiServer, condition: str = "Accepted") -> dict[str, str]:
    """Each policy's reasons for `condition`, one per ancestor, joined with commas."""
    items = (server.get("xaccesspolicies") or {}).get("items", [])
    return {i["metadata"]["name"]: ",".join(c["reason"] for a in i.get("status", {}).get("ancestors", [])
                                            for c in a["conditions"] if c["type"] == condition) for i in items}


def wait_reasons(server: ApiServer, want: dict[str, str]):
    harness.wait_for(lambda: all(reasons(server).get(k) == v for k, v in want.items()) or None, timeout=20,
                     what=f"statuses {want} (have {reasons(server)})")


def plugin(server: ApiServer, name: str = "toolgate-gw-http", kind: str = "wasmplugin") -> dict | None:
    return server.get(kind, name)


def envoy_config(server: ApiServer, plugins: list[dict], wasm: Path, port: int, mcp: harness.McpServer,
                 gateway: str = "gw") -> dict:
    """What Istio builds for a gateway with these WasmPlugins (istio_chain: its own chain, the
    pluginConfig as JSON text in the API server's key order, clusters named outbound|<port>||<host>),
    with the EnvoyFilter the controller wrote for the Gateway applied."""
    hold = server.get("envoyfilter", f"toolgate-{gateway}")
    assert hold is not None, f"no EnvoyFilter for Gateway {gateway}"
    chain = istio_chain.istio_http_filters(
        [(p["metadata"]["name"], json.dumps(p["spec"]["pluginConfig"])) for p in plugins], wasm)
    chain = istio_chain.apply_envoy_filters(chain, [hold], 8080)
    return istio_chain.gateway_config(chain, port, ISTIO_SVC, (mcp.host, mcp.port))


def reset(server: ApiServer):
    """A clean namespace for the next test (the server is shared by the module's tests)."""
    for kind in ("xaccesspolicies", "wasmplugins", "trafficextensions", "envoyfilters", "httproutes", "gateways",
                 "xbackends", "referencegrants"):
        server.kubectl("delete", kind, "--all", "-n", "default", "--wait=false")
