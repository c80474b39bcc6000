"""`toolgate controller` staying available against a real Kubernetes API server (tests/k8s/kube-apiserver.sh):
--leader-elect with three replicas, and the API server stopped and started again on the same etcd data."""

from __future__ import annotations

import json
import time

import harness
from gateway_objects import ROUTE_AND_BACKEND, allow_policy, gateway
from k8s_stack import CONTROLLER_SA, ApiServer, Controller, plugin, reset, wait_reasons


LEASE = "leases.coordination.k8s.io"
# The Lease deploy/rbac.yaml lets the controller's ServiceAccount have: toolgate-system/toolgate-controller.
LEADER_ARGS = ("--leader-elect", "--leader-elect-namespace", "toolgate-system", "--leader-elect-lease-duration", "4s",
               "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "300ms")


def lease(server: ApiServer) -> dict | None:
    out = server.kubectl("get", LEASE, "toolgate-controller", "-n", "toolgate-system", "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def holder(server: ApiServer) -> str | None:
    return ((lease(server) or {}).get("spec") or {}).get("holderIdentity")


def test_leader_election(cluster, tmp_path):
    """--leader-elect against the API server, in the Lease deploy/rbac.yaml grants: one writer; a
    follower writes nothing; a killed leader's Lease is taken when it expires; a stopped leader
    releases it."""
    server = cluster
    reset(server)
    server.apply(gateway() + "---" + ROUTE_AND_BACKEND)
    a = Controller(server, tmp_path, *LEADER_ARGS, "--leader-elect-identity", "a")
    b = c = None
    try:
        harness.wait_for(lambda: holder(server) == "a" or None, timeout=20, what="a holds the Lease")
        b = Controller(server, tmp_path, *LEADER_ARGS, "--leader-elect-identity", "b")
        server.apply(allow_policy("le", ["get-sum"]))
        wait_reasons(server, {"le": "Accepted"})
        harness.wait_for(lambda: plugin(server), timeout=20, what="the leader's WasmPlugin")
        # b is synced (ready) and follows: it has seen the policy and runs no pass.
        harness.wait_for(lambda: b.get("/readyz").status == 200, timeout=20, what="b synced")
        assert sum(a.writes()) >= 2, a.writes()        # the WasmPlugin and the status
        assert b.writes() == [], f"the follower ran passes: {b.writes()}"
        assert "toolgate_controller_leader 1" in a.get("/metrics").body.decode()
        assert "toolgate_controller_leader 0" in b.get("/metrics").body.decode()
        assert b.get("/readyz").status == 200, "a synced follower is ready"

        # The leader dies without releasing: b takes the Lease once it has not changed for 4 s.
        a.proc.kill()
        a.proc.wait()
        killed = time.monotonic()
        harness.wait_for(lambda: holder(server) == "b" or None, timeout=20, what="b takes over")
        waited = time.monotonic() - killed
        assert waited >= 3, f"taken over {waited:.1f} s after the kill: before the Lease expired"
        # The new leader converges without rewriting what a wrote, then writes the next change.
        harness.wait_for(lambda: b.writes() or None, timeout=10, what="b's first pass")
        assert set(b.writes()) == {0}, b.writes()
        before = plugin(server)["spec"]["pluginConfig"]["hash"]
        server.apply(allow_policy("le", ["get-sum", "echo"]))
        harness.wait_for(lambda: plugin(server)["spec"]["pluginConfig"]["hash"] != before or None, timeout=20,
                         what="b writes the change")

        # SIGTERM: the leader releases the Lease, and a follower takes it at its next try.
        c = Controller(server, tmp_path, *LEADER_ARGS, "--leader-elect-identity", "c")
        harness.wait_for(lambda: c.get("/readyz").status == 200, timeout=20, what="c synced")
        assert "toolgate_controller_leader 0" in c.get("/metrics").body.decode()
        assert c.writes() == [] and holder(server) == "b"
        b.stop()
        exited = time.monotonic()
        assert b.proc.returncode == 0, b.log.read_text()
        assert "released Lease toolgate-system/toolgate-controller" in b.log.read_text()
        # Unreleased, the Lease would still name b for 4 s after b's last renewal.
        assert holder(server) in (None, "", "c"), "b still holds the Lease after exiting"
        harness.wait_for(lambda: holder(server) == "c" or None, timeout=10, what="c takes over")
        assert time.monotonic() - exited < 3, "taken over only after the Lease expired: it was not released"
        harness.wait_for(lambda: c.writes() or None, timeout=10, what="c's first pass")
        assert set(c.writes()) == {0}, c.writes()
        assert lease(server)["spec"]["leaseTransitions"] == 3   # a, b, c
    finally:
        for x in (a, b, c):
            if x:
                x.stop()


def test_api_server_restart(cluster, tmp_path):
    """The API server (and etcd) stopped for a while and started again on the same data: the
    controller stays up, reconnects, and converges without rewriting what did not change."""
    server = cluster
    reset(server)
    server.apply(gateway() + "---" + ROUTE_AND_BACKEND + "---" + allow_policy("r1", ["get-sum"]) + "---"
                 + gateway(name="gw2") + "---" + allow_policy("r2", ["echo"], "gw2"))
    controller = Controller(server, tmp_path)
    try:
        wait_reasons(server, {"r1": "Accepted", "r2": "Accepted"})
        harness.wait_for(lambda: plugin(server) and plugin(server, "toolgate-gw2-http"), timeout=20, what="WasmPlugins")
        harness.wait_for(lambda: controller.writes() and controller.writes()[-1] == 0, timeout=20, what="a pass with nothing to write")
        versions = {n: plugin(server, n)["metadata"]["resourceVersion"] for n in ("toolgate-gw-http", "toolgate-gw2-http")}
        statuses = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in server.get("xaccesspolicies")["items"]}
        passes = len(controller.writes())

        server.stop(keep_data=True)
        # The outage is seen: the watches fail and retry.
        harness.wait_for(lambda: "watch:" in controller.log.read_text(), timeout=30, what="the controller's watches failing")
        assert controller.proc.poll() is None, "the controller exited while the API server was away"
        server.start(keep_data=True)
        # A restarted API server refuses the ServiceAccount until its RBAC cache has synced; a pass in
        # that window fails and writes its failure and recovery conditions. Count from after it.
        harness.wait_for(lambda: server.kubectl("auth", "can-i", "get", "envoyfilters", "--as", CONTROLLER_SA,
                                                check=False).stdout.strip() == "yes", timeout=30,
                         what="the ServiceAccount's RBAC after the restart")
        harness.wait_for(lambda: controller.writes() and controller.writes()[-1] == 0 and len(controller.writes()) > passes,
                         timeout=30, what="a pass with nothing to write after the restart")
        passes = len(controller.writes())

        # Reconnected: a change made after the restart reaches the WasmPlugin.
        before = plugin(server)["spec"]["pluginConfig"]["hash"]
        server.apply(allow_policy("r1", ["get-sum", "echo"]))
        harness.wait_for(lambda: plugin(server)["spec"]["pluginConfig"]["hash"] != before or None, timeout=30,
                         what="the change after the restart")
        harness.wait_for(lambda: sum(controller.writes()[passes:]) >= 2 and controller.writes()[-1] == 0, timeout=20,
                         what="converged after the change")
        # Converged without rewriting: the writes since the restart settled are the changed WasmPlugin and the
        # changed policy's status (a new observedGeneration), nothing else.
        assert sum(controller.writes()[passes:]) == 2, controller.writes()[passes:]
        assert plugin(server, "toolgate-gw2-http")["metadata"]["resourceVersion"] == versions["toolgate-gw2-http"]
        now = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in server.get("xaccesspolicies")["items"]}
        assert now["r2"] == statuses["r2"], "an unchanged policy's status was rewritten"
        assert controller.get("/readyz").status == 200
    finally:
        controller.stop()
