#!/usr/bin/env python3
"""Measures `toolgate controller` against a real API server (tests/k8s/kube-apiserver.sh) and writes
docs/controller.md (`make measure-controller`):

1. time from a policy change to the updated WasmPlugin, over 100 changes (median, p99);
2. 1,000 policies on 200 targets (5 per XBackend): time to converge from a cold start (every policy
   Accepted and the WasmPlugin written), API writes made, the controller's peak memory;
3. writes while idle for IDLE_SECONDS (default 300; must be 0);
4. tenancy at scale: 50 Gateways, each in its own namespace with its own route, XBackend and
   policies: the writes one namespace's policy change causes (only that Gateway's WasmPlugin and
   the policy's status), and deleting its last policy (that Gateway's outputs go, nothing else);
5. with istiod in the loop (tests/istio: kube-apiserver, istiod, the pinned Envoy as the Gateway's router):
   the time from a policy change (kubectl apply) to the new decision at the gateway Envoy, over
   ISTIO_CHANGES (default 50) changes (median, p99).
"""
from __future__ import annotations

import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/k8s"))
sys.path.insert(0, str(REPO / "tests/e2e"))
import harness  # noqa: E402
from gateway_objects import ROUTE_AND_BACKEND as BACKEND, allow_policy, gateway  # noqa: E402
from k8s_stack import ApiServer, Controller  # noqa: E402

GATEWAY = gateway()

IDLE = int(os.environ.get("IDLE_SECONDS", "300"))
ISTIO_CHANGES = int(os.environ.get("ISTIO_CHANGES", "50"))
CHANGES = int(os.environ.get("CHANGES", "100"))


class Direct:
    """The API server over HTTPS with the admin client certificate (kubectl is too slow to poll with)."""

    def __init__(self, run: Path, port: int):
        self.ctx = ssl.create_default_context(cafile=str(run / "pki/ca.crt"))
        self.ctx.load_cert_chain(str(run / "pki/admin.crt"), str(run / "pki/admin.key"))
        self.port = port
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=self.ctx)

    def call(self, method: str, path: str, body: dict | None = None, content_type: str = "application/json"):
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, data, {"content-type": content_type} if data else {})
        r = self.conn.getresponse()
        payload = r.read()
        return r.status, (json.loads(payload) if payload else None)


POLICY = "/apis/agentic.networking.x-k8s.io/v1alpha1/namespaces/default/xaccesspolicies"
WASMPLUGIN = "/apis/extensions.istio.io/v1alpha1/namespaces/default/wasmplugins/toolgate-gw-http"


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="toolgate-measure-"))
    server = ApiServer(work / "kube")
    results: dict[str, str] = {}
    controller = None
    try:
        api = Direct(work / "kube", int(server.env["KUBE_TEST_PORT"]))

        # 1. Change -> WasmPlugin.
        controller = Controller(server, work)
        server.apply(GATEWAY + "---" + BACKEND + "---" + allow_policy("p", ["tool-start"], "gw"))
        harness.wait_for(lambda: api.call("GET", WASMPLUGIN)[0] == 200, timeout=30, what="WasmPlugin")
        latencies = []
        for i in range(CHANGES):
            patch = {"spec": {"rules": [{"name": "tools", "authorization": {"type": "Inline", "mcp": {
                "methods": [{"name": "tools/call", "params": [f"tool-{i}"]}]}}}]}}
            t0 = time.monotonic()
            status, _ = api.call("PATCH", f"{POLICY}/p", patch, "application/merge-patch+json")
            assert status == 200, status
            while True:
                _, wp = api.call("GET", WASMPLUGIN)
                if f'"tool-{i}"' in json.dumps(wp["spec"]["pluginConfig"]):
                    break
                if time.monotonic() - t0 > 30:
                    raise SystemExit(f"change {i} not applied in 30 s")
                time.sleep(0.002)
            latencies.append(time.monotonic() - t0)
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        results["change to WasmPlugin (median / p99, %d changes)" % CHANGES] = \
            f"{statistics.median(latencies) * 1e3:.0f} ms / {p99 * 1e3:.0f} ms"
        controller.stop()
        server.kubectl("delete", "xaccesspolicies", "--all", "-n", "default")

        # 2. 1,000 policies on 200 targets, cold start.
        docs = [GATEWAY]
        for b in range(199):
            docs.append(f"""apiVersion: agentic.networking.x-k8s.io/v0alpha0
kind: XBackend
metadata: {{name: b{b}, namespace: default}}
spec: {{mcp: {{serviceName: svc{b}, port: 8080}}}}""")
        targets = ["gw"] + [f"b{b}" for b in range(199)]
        for t in targets:
            for k in range(5):
                docs.append(allow_policy(f"{t}-p{k}", [f"tool-{k}"], t if t == "gw" else f"x{t}").replace(
                    "kind: XBackend, name: x", "kind: XBackend, name: "))
        big = work / "big.yaml"
        big.write_text("\n---\n".join(docs))
        server.kubectl("apply", "-f", str(big))
        t0 = time.monotonic()
        controller = Controller(server, work)

        def converged():
            _, lst = api.call("GET", POLICY)
            accepted = sum(1 for i in lst["items"] for a in i.get("status", {}).get("ancestors", [])
                           for c in a["conditions"] if c["reason"] == "Accepted")
            return accepted == 1000 and api.call("GET", WASMPLUGIN)[0] == 200

        harness.wait_for(converged, timeout=300, interval=0.1, what="1,000 policies accepted")
        took = time.monotonic() - t0
        time.sleep(2)
        writes = sum(controller.writes())
        peak = next((l.split()[1] for l in Path(f"/proc/{controller.proc.pid}/status").read_text().splitlines()
                     if l.startswith("VmHWM:")), "?")
        results["cold start, 1,000 policies on 200 targets: converged"] = f"{took:.1f} s (from the controller's start)"
        results["cold start: API writes"] = f"{writes} (1,000 policy statuses, the 200 targets' `XAccessPolicyAffected` conditions, and the outputs that differ from those step 1 left)"
        results["cold start: controller peak memory (VmHWM)"] = f"{int(peak) / 1024:.0f} MiB" if peak != "?" else "?"

        # 3. Idle.
        before = sum(controller.writes())
        time.sleep(IDLE)
        results[f"writes while idle for {IDLE} s"] = str(sum(controller.writes()) - before)

        # 4. 50 Gateways, one per namespace: a change writes only what it changes.
        tenants = [f"t{i}" for i in range(50)]
        docs = []
        for ns in tenants:
            docs += [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n", GATEWAY.replace("namespace: default", f"namespace: {ns}"),
                     BACKEND.replace("namespace: default", f"namespace: {ns}"),
                     allow_policy("p", ["get-sum"], "tools").replace("namespace: default", f"namespace: {ns}")]
        many = work / "tenants.yaml"
        many.write_text("\n---\n".join(docs))
        server.kubectl("apply", "-f", str(many))

        def plugin_of(ns: str):
            status, wp = api.call("GET", WASMPLUGIN.replace("/namespaces/default/", f"/namespaces/{ns}/"))
            return wp if status == 200 else None

        def settled():
            w = controller.writes()
            return w and w[-1] == 0

        harness.wait_for(lambda: all(plugin_of(ns) for ns in tenants) and settled(), timeout=120, interval=0.2,
                         what="50 Gateways' WasmPlugins")
        leaked = [ns for ns in tenants if list(plugin_of(ns)["spec"]["pluginConfig"]["backends"])
                  != [f"outbound|8080||mcp-server.{ns}.svc.cluster.local"]]
        assert not leaked, f"plans carrying other namespaces' backends: {leaked}"
        passes = len(controller.writes())
        before = plugin_of("t7")["spec"]["pluginConfig"]["hash"]
        server.apply(allow_policy("p", ["get-sum", "echo"], "tools").replace("namespace: default", "namespace: t7"))
        # Settled after the pass that wrote (its trace line comes at the end of that pass).
        harness.wait_for(lambda: plugin_of("t7")["spec"]["pluginConfig"]["hash"] != before
                         and sum(controller.writes()[passes:]) > 0 and settled(), timeout=30, what="t7's change written")
        results["50 Gateways in 50 namespaces: API writes for one policy change"] = \
            f"{sum(controller.writes()[passes:])} (that Gateway's WasmPlugin and the policy's status)"
        passes = len(controller.writes())
        server.kubectl("delete", "xaccesspolicy", "p", "-n", "t7")
        harness.wait_for(lambda: plugin_of("t7") is None and sum(controller.writes()[passes:]) > 0 and settled(),
                         timeout=30, what="t7's outputs deleted")
        results["50 Gateways: API writes when one Gateway's last policy is deleted"] = \
            f"{sum(controller.writes()[passes:])} (that Gateway's WasmPlugin and EnvoyFilter deleted, and the XBackend's `XAccessPolicyAffected` condition)"
    finally:
        if controller:
            controller.stop()
        server.stop()

    results.update(measure_istio(work))
    results["the machine's load (1-minute average) at the end, on 2 cores"] = f"{os.getloadavg()[0]:.1f}"
    out = REPO / "docs/controller.md"
    # The sections after the table (written by hand) are kept.
    previous = out.read_text() if out.exists() else ""
    kept = previous[previous.index("\n## "):] if "\n## " in previous else ""
    lines = ["# `toolgate controller` measurements", "",
             "Generated by `make measure-controller` (scripts/measure-controller.py) against the test API server",
             "(tests/k8s/kube-apiserver.sh) on this machine, and the istiod row on the stack of tests/istio (kube-apiserver,",
             "istiod, the pinned Envoy as the gateway). The controller recomputes everything from its watch caches",
             "on each (coalesced, 100 ms) change and writes only what differs.", "",
             f"Measured on {time.strftime('%Y-%m-%d', time.gmtime())} at "
             f"{subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=REPO).stdout.strip()}.",
             "",
             "| measure | result |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in results.items()]
    out.write_text("\n".join(lines) + "\n" + kept)
    print(out.read_text())
    return 0


def measure_istio(work: Path) -> dict[str, str]:
    """Step 5: policy change -> new decision at the gateway Envoy, through the controller, the API server
    and istiod (the stack of tests/istio)."""
    sys.path.insert(0, str(REPO / "tests/istio"))
    from istio_stack import (ROUTE_AND_BACKEND, Cluster, Controller as IstioController, XdsShim,  # noqa: E402
                             allow_policy as istio_policy, allowed, call, denied, envoy_bootstrap, gateway, services)

    wasm = REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
    cluster = Cluster(work / "istio")
    cluster.sh("start")
    cluster.sh("istiod-start")
    mcp = harness.McpServer.start("istio-mcp", work / "istio-mcp")
    shim = XdsShim(cluster.xds_port, work)
    envoy = controller = None
    try:
        port = harness.free_port()
        cluster.apply(services(port, mcp))
        bootstrap = envoy_bootstrap(shim.port, cluster.gateway_token())
        envoy = harness.Envoy.start(harness.write_json(work / "istio-envoy.json", bootstrap), work, "istio-gateway",
                                    timeout=60)
        controller = IstioController(cluster, work, wasm)
        harness.wait_for(lambda: cluster.get("gatewayclass", "istio"), timeout=60, what="GatewayClass istio")
        cluster.apply(gateway(port) + "---" + ROUTE_AND_BACKEND + "---" + istio_policy("m", ["get-sum"]))
        harness.wait_for(lambda: allowed(call(port, "get-sum", mcp)) and denied(call(port, "echo", mcp)), timeout=120,
                         what="the first plan at the gateway")
        latencies = []
        for i in range(ISTIO_CHANGES):
            tool, other = ("echo", "get-sum") if i % 2 == 0 else ("get-sum", "echo")
            t0 = time.monotonic()
            cluster.apply(istio_policy("m", [tool]))
            harness.wait_for(lambda: allowed(call(port, tool, mcp)) and denied(call(port, other, mcp)), timeout=60,
                             interval=0.01, what=f"change {i} at the gateway")
            latencies.append(time.monotonic() - t0)
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return {f"policy change to enforcement at the gateway Envoy, istiod in the loop (median / p99, {ISTIO_CHANGES} changes; "
                "from kubectl apply, which takes part of it)":
                f"{statistics.median(latencies) * 1e3:.0f} ms / {p99 * 1e3:.0f} ms"}
    finally:
        if controller:
            controller.stop()
        if envoy:
            envoy.stop()
        shim.stop()
        mcp.stop()
        subprocess.run(["bash", str(REPO / "tests/istio/cluster.sh"), "stop"], env=cluster.env, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
