"""The pieces of tests/istio (its fixtures are in conftest.py): a real Kubernetes API server
(kube-apiserver + etcd, RBAC enforced), a real istiod (pilot-discovery) out of cluster, and a real Envoy
as the router of the Gateway API Gateway default/gw, fed by istiod over ADS (through tests/istio/xds-shim,
which drops the Istio-only filters upstream Envoy lacks). All of it on 127.0.0.1, on ports picked here;
binaries from tests/istio/gobuild.sh (`make test-istio`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/e2e"))
sys.path.insert(0, str(REPO / "tests/k8s"))  # gateway_objects; istio_chain: the ArrivalLog upstream (test_istio.py)

import harness  # noqa: E402
from gateway_objects import ISTIO_SVC, ROUTE_AND_BACKEND, allow_policy, call, gateway  # noqa: E402,F401 (the tests' names)
from harness import assert_allowed, assert_denied  # noqa: E402

CACHE = Path(os.environ.get("TOOLGATE_ISTIO_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolgate/istio")
BIN = CACHE / "bin"


def istio_releases() -> list[tuple[str, str]]:
    """tests/istio/releases.txt: (release, istio.io/istio module version), the default first."""
    lines = (REPO / "tests/istio/releases.txt").read_text().splitlines()
    return [tuple(line.split()[:2]) for line in lines if line.strip() and not line.startswith("#")]


# The Istio release under test (ISTIO, as `make test-istio ISTIO=1.30.4` sets it; default: the first in
# releases.txt): cluster.sh runs its istiod (ISTIO_BIN) and applies its CRDs; Envoy's node says its version.
ISTIO = os.environ.get("ISTIO") or istio_releases()[0][0]
ISTIO_BIN = BIN / f"istio-{ISTIO}"


def istio_at_least(release: str) -> bool:
    """Whether the release under test is this release or a later one (by number: 1.30.4 < 1.31)."""
    def number(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split("-")[0].split("."))
    return number(ISTIO) >= number(release)


def istio_serves(kind: str) -> bool:
    """Whether the release under test has a CRD of this kind (its crds/<release>/crd-all.gen.yaml, which
    cluster.sh applies): TrafficExtension, for one, is there from Istio 1.30 on."""
    crds = REPO / "tests/istio/crds" / ISTIO / "crd-all.gen.yaml"
    return crds.exists() and f"\n    kind: {kind}\n" in crds.read_text()
CLUSTER_SH = REPO / "tests/istio/cluster.sh"
# TOOLGATE_ISTIO_KEEP=1: leave the control plane, Envoy and the MCP server running after the tests (debugging).
KEEP = os.environ.get("TOOLGATE_ISTIO_KEEP") == "1"

# The gateway's Service (what istiod binds the Gateway's listeners to, `<gateway>-<class>`) and the
# label selecting its "pods": the Envoy's node metadata carries the same labels.
GATEWAY_LABELS = {"gateway.networking.k8s.io/gateway-name": "gw"}
# The IP in the gateway Envoy's node id: a name for istiod only (no traffic goes to it).
GATEWAY_IP = "127.0.0.2"


def free_ports(n: int) -> list[int]:
    """n distinct free ports, none next to another (etcd uses the port after its own for peers)."""
    out: list[int] = []
    while len(out) < n:
        p = harness.free_port()
        if all(abs(p - q) > 1 for q in out) and p < 65535:
            out.append(p)
    return out


class Cluster:
    """kube-apiserver + etcd + istiod, started by tests/istio/cluster.sh with its own run directory and ports."""

    def __init__(self, run: Path):
        self.run = run
        api, etcd, xds, http, mon, ctrlz = free_ports(6)
        self.xds_port = xds
        self.istiod_http_port = http
        self.env = {**os.environ, "TOOLGATE_ISTIO_CACHE": str(CACHE), "ISTIO": ISTIO, "ISTIO_TEST_RUN": str(run),
                    "ISTIO_TEST_APISERVER_PORT": str(api), "ISTIO_TEST_ETCD_PORT": str(etcd),
                    "ISTIO_TEST_XDS_PORT": str(xds), "ISTIO_TEST_ISTIOD_HTTP_PORT": str(http),
                    "ISTIO_TEST_ISTIOD_MONITORING_PORT": str(mon), "ISTIO_TEST_CTRLZ_PORT": str(ctrlz)}
        self.admin_kubeconfig = run / "admin.kubeconfig"
        self.controller_kubeconfig = run / "controller.kubeconfig"

    def sh(self, *args: str, timeout: float = 300):
        t0 = time.monotonic()
        out = subprocess.run(["bash", str(CLUSTER_SH), *args], env=self.env, capture_output=True, text=True,
                             timeout=timeout)
        assert out.returncode == 0, f"cluster.sh {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
        sys.stderr.write(out.stderr)
        return time.monotonic() - t0

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
        out = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig or self.admin_kubeconfig), *args],
                             input=input, capture_output=True, text=True, timeout=60)
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stdout}{out.stderr}"
        return out

    def apply(self, yaml_text: str):
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml_text)

    def get(self, kind: str, name: str | None = None, namespace: str = "default") -> dict | None:
        out = self.kubectl("get", kind, *([name] if name else []), "-n", namespace, "-o", "json", check=False)
        if out.returncode != 0:
            return None
        return json.loads(out.stdout)

    def gateway_token(self) -> str:
        """A token of ServiceAccount default/gw-istio for istiod (cluster.sh start): the gateway's identity."""
        return (self.run / "gateway.token").read_text().strip()

    def istiod_debug(self, path: str) -> dict | list:
        r = harness.request("GET", f"http://127.0.0.1:{self.istiod_http_port}{path}", timeout=10)
        assert r.status == 200, (path, r.status, r.body[:300])
        return json.loads(r.body)


class Controller:
    """`toolgate controller` with the ServiceAccount kubeconfig (RBAC of deploy/rbac.yaml enforced)."""

    def __init__(self, cluster: Cluster, workdir: Path, wasm: Path, *args: str, name: str = "controller"):
        self.log = workdir / f"{name}-{time.monotonic_ns()}.log"
        self.metrics_port = harness.free_port()
        self.proc = subprocess.Popen(
            [str(harness.toolgate_binary()), "controller", "--wasm-url", f"file://{wasm}",
             "--metrics-addr", f"127.0.0.1:{self.metrics_port}", *args],
            env={**os.environ, "KUBECONFIG": str(cluster.controller_kubeconfig)}, stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: "watching" in self.log.read_text() or self.proc.poll() is not None, timeout=60,
                         what="controller watching")
        assert self.proc.poll() is None, self.log.read_text()

    def metrics(self) -> str:
        return harness.request("GET", f"http://127.0.0.1:{self.metrics_port}/metrics").body.decode()

    def stop(self):
        harness._stop_process(self.proc)


class XdsShim:
    """tests/istio/xds-shim between Envoy and istiod: Envoy's ADS stream is relayed to istiod; listeners
    lose exactly the filters upstream Envoy lacks (istio.metadata_exchange, istio.alpn, istio.stats)."""

    def __init__(self, upstream_port: int, workdir: Path):
        self.port = harness.free_port()
        self.log = workdir / "xds-shim.log"
        self.proc = subprocess.Popen(
            [str(BIN / "xds-shim"), "--listen", f"127.0.0.1:{self.port}", "--upstream", f"127.0.0.1:{upstream_port}"],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: harness.tcp_open("127.0.0.1", self.port) or self.proc.poll() is not None,
                         timeout=20, what="xds-shim listening")
        assert self.proc.poll() is None, self.log.read_text()

    def dropped(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if "dropped" in line]

    def stop(self):
        harness._stop_process(self.proc)


def envoy_bootstrap(xds_port: int, token: str, ip: str = GATEWAY_IP) -> dict:
    """What istio-agent would give Envoy, reduced to what istiod reads: a router node of the gateway's
    Service in `default` (id `router~IP~POD.NS~NS.svc.cluster.local`, metadata NAMESPACE, LABELS,
    CLUSTER_ID, ISTIO_VERSION, INSTANCE_IPS...), ADS over plaintext gRPC. The node's IP is only a name
    for istiod (nothing is sent to it), and must not be 127.0.0.1: istiod looks proxies up by IP first,
    and the MCP server's WorkloadEntry has that address. `token` (Cluster.gateway_token()) goes in the
    stream's `authorization` metadata, as istio-agent sends it: istiod authenticates the proxy with it
    and only then serves it the Gateway's TLS credentials over SDS."""
    return {
        "node": {
            "id": f"router~{ip}~gw-istio-0.default~default.svc.cluster.local",
            "cluster": "gw-istio.default",
            "metadata": {
                "NAMESPACE": "default", "NAME": "gw-istio-0", "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": ISTIO,
                "LABELS": {**GATEWAY_LABELS, "service.istio.io/canonical-name": "gw-istio"},
                "INSTANCE_IPS": ip, "WORKLOAD_NAME": "gw-istio", "SERVICE_ACCOUNT": "gw-istio",
                "MESH_ID": "cluster.local", "OWNER": "kubernetes://apis/apps/v1/namespaces/default/deployments/gw-istio",
            },
        },
        "dynamic_resources": {
            "ads_config": {"api_type": "GRPC", "transport_api_version": "V3", "set_node_on_first_message_only": True,
                           "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"},
                                             "initial_metadata": [{"key": "authorization",
                                                                   "value": f"Bearer {token}"}]}]},
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {"clusters": [{
            "name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
            "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}}},
            "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": xds_port}}}}]}]}}]},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
    }


# The test objects and calls shared by the test files (the `stack` fixture in conftest.py applies services();
# the Gateway, route, policies and call are tests/k8s/gateway_objects.py's, shared with tests/k8s).


def services(gateway_port: int, mcp: harness.McpServer) -> str:
    """The gateway's Service (what istiod binds gw's listeners to: `<gateway>-<class>`, selecting the labels of
    the Envoy's node metadata) and
    the MCP server's Service with its one endpoint. No kube-controller-manager runs, and EndpointSlices may
    not hold loopback addresses (API validation), so the endpoint is a WorkloadEntry at 127.0.0.1 that the
    Service selects (Istio's Kubernetes-Services-select-WorkloadEntries). The gateway's Envoy is likewise a
    WorkloadEntry at the IP its node id names (istiod finds a proxy's workload by its IP: this is what a
    gateway pod would be), which gives gw-istio an endpoint, so istiod reports the Gateway Programmed."""
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: gw-istio, namespace: default}}
spec:
  selector: {json.dumps(GATEWAY_LABELS)}
  ports: [{{name: http, port: {gateway_port}, targetPort: {gateway_port}, appProtocol: http}}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: gw-istio-0, namespace: default, labels: {json.dumps(GATEWAY_LABELS)}}}
spec:
  address: {GATEWAY_IP}
  labels: {json.dumps(GATEWAY_LABELS)}
---
apiVersion: v1
kind: Service
metadata: {{name: mcp-server, namespace: default}}
spec:
  selector: {{app: mcp-server}}
  ports: [{{name: http, port: 8080, targetPort: {mcp.port}, appProtocol: http}}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: mcp-server-0, namespace: default, labels: {{app: mcp-server}}}}
spec:
  address: {mcp.host}
  labels: {{app: mcp-server}}
"""


def allowed(s: harness.Sent) -> bool:
    try:
        assert_allowed(s)
        return True
    except AssertionError:
        return False


def denied(s: harness.Sent) -> bool:
    try:
        assert_denied(s)
        return True
    except AssertionError:
        return False


def listener_http_filters(envoy: harness.Envoy) -> list[str]:
    """The names of the HTTP filters of Envoy's active listeners (ECDS-provided ones by their config name)."""
    names = []
    for ls in envoy.config_dump("dynamic_listeners").get("configs", []):
        for chain in ls.get("active_state", {}).get("listener", {}).get("filter_chains", []):
            for f in chain.get("filters", []):
                for hf in f.get("typed_config", {}).get("http_filters", []):
                    names.append(hf["name"])
    return names


def wasm_filters(envoy: harness.Envoy) -> list[dict]:
    """The wasm filter configurations Envoy got over ECDS (the WasmPlugins istiod translated)."""
    dump = envoy.config_dump("ecds_filters")
    out = []
    for c in dump.get("configs", []):
        tc = c.get("ecds_filter", {}).get("typed_config", {})
        if tc.get("@type", "").endswith("envoy.extensions.filters.http.wasm.v3.Wasm"):
            out.append(tc)
    return out
