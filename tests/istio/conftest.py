"""Fixtures for tests/istio (the pieces are in istio_stack.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from istio_stack import BIN, CLUSTER_SH, ISTIO, ISTIO_BIN, KEEP, Cluster, XdsShim, envoy_bootstrap, services
import harness


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    if not (BIN / "kube-apiserver").exists() or not (ISTIO_BIN / "pilot-discovery").exists():
        pytest.fail(f"{BIN}: no control plane binaries for Istio {ISTIO}; run `ISTIO={ISTIO} bash tests/istio/gobuild.sh "
                    "ensure` (make test-istio does)")
    c = Cluster(tmp_path_factory.mktemp("istio-run"))
    try:
        c.start_seconds = c.sh("start")
        c.istiod_seconds = c.sh("istiod-start")
        yield c
    finally:
        if KEEP:
            sys.stderr.write(f"TOOLGATE_ISTIO_KEEP=1: still running; export KUBECONFIG={c.admin_kubeconfig}; "
                             f"ISTIO_TEST_RUN={c.run} tests/istio/cluster.sh stop\n")
            return
        subprocess.run(["bash", str(CLUSTER_SH), "stop"], env=c.env, capture_output=True)
        logs = c.run / "logs"
        if request.session.testsfailed and logs.exists():
            for f in sorted(logs.iterdir()):
                sys.stderr.write(f"--- {f} (tail)\n{harness.tail(f, 15)}\n")


@pytest.fixture(scope="module")
def stack(cluster: Cluster, tmp_path_factory, wasm_path):
    """cluster + the sample MCP server + the shim + the gateway's Envoy + the Services, as the router of default/gw."""
    work = tmp_path_factory.mktemp("istio-gw")
    mcp = harness.McpServer.start("mcp", work / "mcp")
    shim = XdsShim(cluster.xds_port, work)
    envoy = None
    try:
        port = harness.free_port()
        cluster.apply(services(port, mcp))
        config = harness.write_json(work / "envoy-bootstrap.json", envoy_bootstrap(shim.port, cluster.gateway_token()))
        envoy = harness.Envoy.start(config, work, "gateway", timeout=60)
        yield {"cluster": cluster, "mcp": mcp, "shim": shim, "envoy": envoy, "port": port, "work": work,
               "wasm": wasm_path}
    finally:
        if KEEP:
            return
        if envoy:
            envoy.stop()
        shim.stop()
        mcp.stop()
