"""Istio's gateway listener, replayed in the pinned upstream Envoy, and an upstream that logs what
reaches it the moment it arrives.

The HTTP filter chain Istio (1.30 and later) builds for a Gateway API gateway listener with
AUTHZ-phase WasmPlugins, read from Istio's source: `istio.metadata_exchange`, the Wasm filters
(delivered by ECDS, named `extensions.istio.io/trafficextension/<ns>.<name>~istio-translated-wasmplugin`,
FAIL_CLOSED, no `allow_on_headers_stop_iteration`: Istio has no setting for it),
`envoy.filters.http.grpc_stats`, `istio.alpn`, `envoy.filters.http.fault`, `envoy.filters.http.cors`,
`istio.stats`, the router. No buffer filter. Upstream Envoy has no `istio.*` extensions, so the replay
leaves out exactly those three (ISTIO_ONLY); everything else is as Istio writes it, and the
EnvoyFilters the controller wrote are applied the way istiod applies their HTTP_FILTER patches.
tests/istio runs the same against the real istiod."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import harness  # tests/e2e, on the path of the tests that use this

# Filters of Istio's chain that the upstream Envoy build does not have (left out of the replay).
ISTIO_ONLY = ("istio.metadata_exchange", "istio.alpn", "istio.stats")


def wasm_filter_name(namespace: str, name: str) -> str:
    return f"extensions.istio.io/trafficextension/{namespace}.{name}~istio-translated-wasmplugin"


def istio_http_filters(plugins: list[tuple[str, str]], wasm: Path, namespace: str = "default") -> list[dict]:
    """Istio's chain for WasmPlugins `(name, pluginConfig as JSON text)`, without ISTIO_ONLY."""
    wasm_filters = [{"name": wasm_filter_name(namespace, name), "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
        "config": {"name": f"{namespace}.{name}", "root_id": "toolgate", "fail_open": False,
                   "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": text},
                   "vm_config": {"vm_id": f"{namespace}.{name}", "runtime": "envoy.wasm.runtime.v8",
                                 "code": {"local": {"filename": str(wasm)}}}}}} for name, text in plugins]
    return [
        *wasm_filters,
        {"name": "envoy.filters.http.grpc_stats", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig",
            "emit_filter_state": True, "stats_for_all_methods": False}},
        {"name": "envoy.filters.http.fault", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}},
        {"name": "envoy.filters.http.cors", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
        {"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
    ]


def apply_envoy_filters(filters: list[dict], envoy_filters: list[dict], port: int) -> list[dict]:
    """The HTTP_FILTER patches of `envoy_filters` (EnvoyFilter objects) that match a GATEWAY listener
    on `port`, applied as istiod applies them (INSERT_BEFORE / INSERT_AFTER a named filter,
    INSERT_FIRST); any other patch fails the test, so nothing the controller writes goes unreplayed."""
    out = list(filters)
    for ef in envoy_filters:
        for p in ef["spec"]["configPatches"]:
            assert p["applyTo"] == "HTTP_FILTER", p
            m = p["match"]
            assert m.get("context") == "GATEWAY", p
            listener = m.get("listener", {})
            if listener.get("portNumber", port) != port:
                continue
            assert listener["filterChain"]["filter"]["name"] == "envoy.filters.network.http_connection_manager", p
            op, value = p["patch"]["operation"], p["patch"]["value"]
            sub = listener["filterChain"]["filter"].get("subFilter", {}).get("name")
            names = [f["name"] for f in out]
            if op == "INSERT_FIRST":
                out.insert(0, value)
            elif op in ("INSERT_BEFORE", "INSERT_AFTER"):
                assert sub in names, f"{sub} is not in the chain {names}"
                i = names.index(sub)
                out.insert(i if op == "INSERT_BEFORE" else i + 1, value)
            else:
                raise AssertionError(f"patch operation {op} is not replayed")
    return out


def gateway_config(http_filters: list[dict], port: int, cluster: str, upstream: tuple[str, int],
                   prefix: str = "/mcp") -> dict:
    """A gateway listener on `port` (HTTP/1.1 and HTTP/2 prior knowledge, as Istio's codec AUTO)
    routing `prefix` to `cluster`, named as Istio names it."""
    return {
        "static_resources": {
            "listeners": [{
                "name": f"0.0.0.0_{port}", "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "outbound_0.0.0.0_%d" % port, "codec_type": "AUTO",
                    "route_config": {"name": f"http.{port}", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                        {"match": {"prefix": prefix}, "route": {"cluster": cluster}}]}]},
                    "http_filters": http_filters}}]}]}],
            "clusters": [{"name": cluster, "type": "STATIC", "connect_timeout": "5s",
                          "load_assignment": {"cluster_name": cluster, "endpoints": [{"lb_endpoints": [{"endpoint": {
                              "address": {"socket_address": {"address": upstream[0], "port_value": upstream[1]}}}}]}]}}],
        },
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
    }


class ArrivalLog:
    """An HTTP/1.1 upstream that records, the moment they arrive, every connection and every request
    head (before any body), then reads the body and answers a JSON-RPC result. `records()` is what
    reached it: ("connection", peer) and ("headers", request line) in order."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = self.sock.getsockname()
        self._records: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def records(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._records)

    def arrivals_within(self, window: float) -> list[tuple[str, str]]:
        """What reached the upstream within `window` seconds. Returns as soon as a request head has
        (its connection is recorded a moment before it: a connection alone does not end the wait),
        else what arrived in the window, possibly nothing."""
        try:
            harness.wait_for(lambda: any(kind == "headers" for kind, _ in self.records()), timeout=window,
                             interval=0.01, what="a request head at the upstream")
        except harness.HarnessError:
            pass
        return self.records()

    def clear(self):
        with self._lock:
            self._records.clear()

    def _record(self, kind: str, what: str):
        with self._lock:
            self._records.append((kind, what))

    def _accept(self):
        while not self._closed:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self._record("connection", f"{peer[0]}:{peer[1]}")
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                self._record("headers", lines[0])
                fields = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
                if "content-length" in fields:
                    n = int(fields["content-length"])
                    while len(buf) < n:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    buf = buf[n:]
                elif fields.get("transfer-encoding", "").lower() == "chunked":
                    while b"\r\n0\r\n\r\n" not in b"\r\n" + buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    buf = (b"\r\n" + buf).split(b"\r\n0\r\n\r\n", 1)[1]
                body = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"5"}]}}'
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(body), body))
        except OSError:
            return
        finally:
            conn.close()

    def stop(self):
        self._closed = True
        self.sock.close()


def send_in_two_parts(port: int, head: bytes, body: bytes, log: ArrivalLog, window: float = 1.0) -> tuple[bytes, list]:
    """Sends a request head, watches `log` for `window` seconds for anything reaching the upstream
    (a leak shows within milliseconds: the wait ends as soon as it does), then sends the body and
    reads the answer. Returns (the answer, what reached the upstream before the body was sent). The
    window is the experiment, not synchronisation: it gives a leak the time to happen."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(head)
        early = log.arrivals_within(window)
        try:
            s.sendall(body)
        except OSError:
            pass  # answered (e.g. 413) and closed before the whole body was taken: read the answer
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _content_length(answer):
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        return answer, early
    finally:
        s.close()


def _content_length(answer: bytes) -> int:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n")[1:]:
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 0
