"""A Toolgate gateway for the end-to-end tests: YAML resources -> `toolgate render` -> Envoy in front of
the sample MCP server, the requests sent through it, and the allowed/denied assertions (harness.py
re-exports it)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness_envoy import ENVOY_START_TIMEOUT, Envoy, EnvoyStartError
from harness_http import DENIAL_MESSAGE, Response, denial_body, jsonrpc, request
from harness_policy import BACKEND_NAME, BACKEND_REF, GATEWAY_NAME
from harness_procs import REPO, HarnessError, built_binary, client_cert, free_port, wait_for
from harness_servers import McpServer, read_access_log

# --------------------------------------------------------------------------------------------------
# Toolgate gateways: YAML resources -> `toolgate render` -> Envoy, for the policy tests


def toolgate_binary() -> Path:
    return built_binary("TOOLGATE_BIN", "toolgate")


def run_toolgate(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the `toolgate` CLI; returns the CompletedProcess (text), never raises on exit status."""
    return subprocess.run([str(toolgate_binary()), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def to_yaml(*objects: dict | str) -> str:
    """Multi-document YAML: dicts are written as JSON (a YAML subset), strings as given."""
    return "\n---\n".join(o if isinstance(o, str) else json.dumps(o, indent=1) for o in objects) + "\n"



def toolgate_plans(lds: dict):
    """The Toolgate wasm filter configurations (whose "value" is the plan) in an lds.json document
    (the dynamic module's filter_config, rendered with --native-module)."""
    for listener in lds["resources"]:
        for chain in listener["filter_chains"]:
            for f in chain["filters"]:
                for hf in f["typed_config"].get("http_filters", []):
                    if hf["name"] == "envoy.filters.http.wasm":
                        yield hf["typed_config"]["config"]["configuration"]
                    elif hf["name"] == "envoy.filters.http.dynamic_modules":
                        yield hf["typed_config"]["filter_config"]



@dataclass
class Sent:
    """A request sent through a ToolgateGateway and what it caused."""
    response: Response | None
    tag: str
    id: Any
    executed: list[dict]          # the MCP server's execution-log entries for this request
    upstream_requests: int        # requests Envoy sent to the MCP server's cluster meanwhile
    error: Exception | None = None

    @property
    def status(self) -> int:
        assert self.response is not None, f"no HTTP response: {self.error!r}"
        return self.response.status

    def json(self) -> Any:
        assert self.response is not None, f"no HTTP response: {self.error!r}"
        return self.response.json()

    def __repr__(self) -> str:
        r = self.response
        body = r.body[:300] if r is not None else None
        return (f"Sent(tag={self.tag}, status={r.status if r else None}, body={body!r}, "
                f"executed={len(self.executed)}, upstream_requests={self.upstream_requests}, error={self.error!r})")


@contextlib.contextmanager
def serving(gw: "ToolgateGateway"):
    """Starts `gw`; stops it and its MCP server on the way out (module-wide fixtures)."""
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()
        gw.server.stop()


class ToolgateGateway:
    """A Gateway rendered by `toolgate render` from YAML written into `workdir`, served by Envoy in front
    of a sample MCP server. See conftest.py `gateway` fixture.

    Listeners (names -> protocol, default {"https": "HTTPS"}): HTTPS ones use the server cert from a
    Secret and, with `https_client_ca=True`, require client certificates signed by certs/ca.crt (a
    ConfigMap in spec.tls.frontend.default); a list of listener names puts the CA in `perPort` for
    those only; False configures no frontend CA.
    Policy objects may mention `$PORT_<listener>` (e.g. `$PORT_http`); it is replaced by that port."""

    def __init__(self, workdir: Path, certs: Path, wasm: Path, server: McpServer, *,
                 listeners: Mapping[str, str] | None = None, https_client_ca: bool | Sequence[str] = True,
                 render_args: Sequence[str] = (), strict: bool = True, route_rules: list[dict] | None = None,
                 envoy_args: Sequence[str] = (), host: str | None = None, native_module: Path | None = None):
        self.workdir = Path(workdir)
        # Which host of the engine runs the filter: "wasm" (toolgate_filter.wasm, the default) or
        # "native" (the dynamic module libtoolgate_module.so, `make module`; pytest --host native).
        self.host = host or filter_host()
        self.native_module = Path(native_module) if native_module else native_module_path()
        self.envoy_args = list(envoy_args)  # extra Envoy command-line arguments (e.g. --drain-time-s)
        self.certs = Path(certs)
        self.wasm = Path(wasm)
        self.server = server
        self.listener_protocols = dict(listeners or {"https": "HTTPS"})
        self.https_client_ca = https_client_ca
        self.route_rules = route_rules  # HTTPRoute rules (default: PathPrefix /mcp -> XBackend tools)
        # --strict: a policy that is not accepted fails the render (instead of silently not applying).
        self.render_args = list(render_args) + (["--strict"] if strict else [])
        self.out = self.workdir / "rendered"
        self.dir = self.out / f"default.{GATEWAY_NAME}"
        self.policy_dir = self.workdir / "policies"
        self.access_log = self.workdir / "access.log"
        self.ports: dict[str, int] = {}
        self.policies: list[dict | str] = []
        self.envoy: Envoy | None = None
        self.last_render: subprocess.CompletedProcess | None = None
        self._seq = 0
        # The Gateway's metadata.annotations (e.g. {"toolgate.dev/default": "deny"}), written by render().
        self.gateway_annotations: dict[str, str] = {}

    # -- resources ------------------------------------------------------------------------------
    def _gateway_objects(self) -> str:
        b64 = lambda p: base64.b64encode((self.certs / p).read_bytes()).decode()  # noqa: E731
        listeners = []
        for name, proto in self.listener_protocols.items():
            item: dict[str, Any] = {"name": name, "port": self.ports[name], "protocol": proto}
            if proto == "HTTPS":
                item["tls"] = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "gw-cert"}]}
            listeners.append(item)
        spec: dict[str, Any] = {"gatewayClassName": "toolgate", "listeners": listeners}
        validation = {"validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "agents-ca"}]}}
        if self.https_client_ca is True:
            spec["tls"] = {"frontend": {"default": validation}}
        elif self.https_client_ca:  # listener names: spec.tls.frontend.perPort for their ports only
            spec["tls"] = {"frontend": {"perPort": [{"port": self.ports[name], "tls": validation}
                                                    for name in self.https_client_ca]}}
        return to_yaml(
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
             "metadata": {"name": GATEWAY_NAME, "namespace": "default",
                          **({"annotations": dict(self.gateway_annotations)} if self.gateway_annotations else {})},
             "spec": spec},
            {"apiVersion": "agentic.networking.x-k8s.io/v0alpha0", "kind": "XBackend",
             "metadata": {"name": BACKEND_NAME, "namespace": "default"},
             "spec": {"mcp": {"serviceName": "mcp-server", "port": 8080}}},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "tools", "namespace": "default"},
             "spec": {"parentRefs": [{"name": GATEWAY_NAME}],
                      "rules": self.route_rules or [{"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}}],
                                                     "backendRefs": [BACKEND_REF]}]}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gw-cert", "namespace": "default"},
             "type": "kubernetes.io/tls", "data": {"tls.crt": b64("server.crt"), "tls.key": b64("server.key")}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "agents-ca", "namespace": "default"},
             "data": {"ca.crt": (self.certs / "ca.crt").read_text()}},
        )

    def _write_policies(self, policies: Sequence[dict | str]) -> None:
        self.policy_dir.mkdir(parents=True, exist_ok=True)
        for old in self.policy_dir.glob("*.yaml"):
            old.unlink()
        for i, p in enumerate(policies):
            text = to_yaml(p)
            for name, port in sorted(self.ports.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(f'"$PORT_{name}"', str(port)).replace(f"$PORT_{name}", str(port))
            (self.policy_dir / f"p{i:02d}.yaml").write_text(text)

    def render(self, policies: Sequence[dict | str] | None = None, *, check: bool = True,
               extra_args: Sequence[str] = ()) -> subprocess.CompletedProcess:
        """(Re-)write the policies (None keeps the current ones) and run `toolgate render` into the same
        output folder (a running Envoy picks the new lds.json up)."""
        if policies is not None:
            self.policies = list(policies)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "gateway.yaml").write_text(self._gateway_objects())
        self._write_policies(self.policies)
        code = ["--native-module", self.native_module] if self.host == "native" else ["--wasm", self.wasm]
        args = ["render", "-f", self.workdir / "gateway.yaml", "-f", self.policy_dir, *code,
                "-o", self.out, "--bind", "127.0.0.1", "--resolve", f"mcp-server.default={self.server.address}",
                "--access-log", self.access_log, *self.render_args, *extra_args]
        proc = run_toolgate(*args)
        self.last_render = proc
        if check and proc.returncode != 0:
            raise HarnessError(f"toolgate render exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    rerender = render

    def start(self, register: Callable[[Envoy], None] | None = None, attempts: int = 3,
              before_start: Callable[["ToolgateGateway"], None] | None = None) -> "ToolgateGateway":
        """Pick ports, render, start Envoy (new ports and a new render if one was taken meanwhile)."""
        last: Exception | None = None
        for attempt in range(attempts):
            self.ports = {name: free_port() for name in self.listener_protocols}
            self.render()
            if before_start:
                before_start(self)
            env = Envoy(self.dir / "envoy.json", self.workdir, f"envoy-{attempt}" if attempt else "envoy",
                        extra_args=self.envoy_args)
            if register:
                register(env)
            env._spawn()
            try:
                env._wait_ready(list(self.ports.values()), ENVOY_START_TIMEOUT)
            except EnvoyStartError as exc:
                env.stop()
                if "ddress already in use" not in exc.log_tail:
                    raise
                last = exc
                continue
            self.envoy = env
            return self
        raise HarnessError(f"could not start Envoy on free ports: {last}")

    def stop(self) -> None:
        if self.envoy:
            self.envoy.stop()

    # -- addresses ------------------------------------------------------------------------------
    def url_for(self, listener: str, path: str = "/mcp") -> str:
        proto = self.listener_protocols[listener]
        host = "localhost" if proto == "HTTPS" else "127.0.0.1"
        return f"{'https' if proto == 'HTTPS' else 'http'}://{host}:{self.ports[listener]}{path}"

    @property
    def url(self) -> str:
        return self.url_for("https")

    @property
    def http_url(self) -> str:
        return self.url_for("http")

    @property
    def cluster(self) -> str:
        return f"xbackend/default/{BACKEND_NAME}"

    def upstream_requests(self) -> int:
        assert self.envoy is not None
        return int(self.envoy.stat(f"cluster.{self.cluster}.upstream_rq_total"))

    # -- requests -------------------------------------------------------------------------------
    def send(self, http_method: str = "POST", body: Any = None, *, agent: str | None = "agent-a",
             listener: str = "https", path: str = "/mcp", headers: Mapping[str, str] | None = None,
             content_type: str | None = "application/json", tag: bool = True, timeout: float = 10,
             sni: str | None = None) -> Sent:
        """One request through Envoy. `agent` names a client certificate of the test PKI (None = no
        certificate). The path gets a `?tg=N` query (matchers ignore the query) that identifies the
        request in the server's execution log and Envoy's access log. Transport errors (e.g. a refused
        TLS handshake) are returned in `.error`. `sni`: the TLS server name to ask for (the server's
        certificate, made for localhost, is then not checked against it)."""
        self._seq += 1
        t = f"tg={self._seq}"
        full_path = path + (("&" if "?" in path else "?") + t if tag else "")
        h: dict[str, str] = {}
        if http_method == "POST" and content_type:
            h["content-type"] = content_type
            h["accept"] = "application/json, text/event-stream"
        h.update(headers or {})
        cert = client_cert(self.certs, agent) if agent else None
        before = self.upstream_requests()
        resp, err = None, None
        try:
            resp = request(http_method, self.url_for(listener, full_path), body, h, cert=cert,
                           ca=None if sni else self.certs / "ca.crt", server_hostname=sni, timeout=timeout)
        except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine) as exc:
            err = exc
        executed = [e for e in self.server.executed() if _tagged(str(e.get("path", "")), t)] if tag else []
        msg_id = body.get("id") if isinstance(body, dict) else None
        return Sent(resp, t, msg_id, executed, self.upstream_requests() - before, err)

    def post(self, message: Any, **kw) -> Sent:
        return self.send("POST", message, **kw)

    def rpc(self, method: str, params: dict | None = None, id: Any = "auto", **kw) -> Sent:
        return self.send("POST", jsonrpc(method, params, id), **kw)

    def call(self, tool: str, arguments: dict | None = None, **kw) -> Sent:
        if arguments is None:
            arguments = {"a": 2, "b": 3} if tool == "get-sum" else {"message": "hi"} if tool == "echo" else {}
        return self.rpc("tools/call", {"name": tool, "arguments": arguments}, **kw)

    # -- observations ---------------------------------------------------------------------------
    def access_line(self, sent: Sent, timeout: float = 10) -> str:
        """The access-log line of a request sent with a tag."""
        def find():
            for line in read_access_log(self.access_log):
                if f"?{sent.tag}\"" in line or f"&{sent.tag}\"" in line:
                    return line
            return None
        return wait_for(find, timeout=timeout, what=f"access log line for {sent.tag}")

    def decision(self, sent: Sent, timeout: float = 10) -> str:
        """The filter's decision recorded in the access log (`toolgate="..."`)."""
        line = self.access_line(sent, timeout)
        marker = 'toolgate="'
        return line[line.index(marker) + len(marker):].rstrip().rstrip('"')

    def counters(self) -> dict[str, int]:
        assert self.envoy is not None
        # The Wasm filter's counters are wasmcustom.*, the dynamic module's dynamicmodulescustom.*.
        prefix = "dynamicmodulescustom." if self.host == "native" else "wasmcustom."
        return {k.removeprefix(prefix): int(v)
                for k, v in self.envoy.stats("^" + re.escape(prefix) + r"toolgate\.").items()}


def filter_host() -> str:
    """The host the e2e gateways run the filter on: TOOLGATE_E2E_HOST=wasm (default) or native, which
    pytest's `--host` sets (tests/conftest.py)."""
    host = os.environ.get("TOOLGATE_E2E_HOST", "wasm")
    if host not in ("wasm", "native"):
        raise HarnessError(f"TOOLGATE_E2E_HOST={host!r}: wasm or native")
    return host


def native_module_path() -> Path:
    """The dynamic module `make module` builds."""
    return REPO / "target/release/libtoolgate_module.so"


def _tagged(path: str, tag: str) -> bool:
    return path.endswith("?" + tag) or path.endswith("&" + tag)


def assert_allowed(sent: Sent, executed: int = 1) -> None:
    """Not denied by Toolgate, and the MCP server executed it (`executed` log entries)."""
    assert sent.response is not None, sent
    r = sent.response
    assert r.status in (200, 202), sent
    if r.headers.get("content-type", "").startswith("application/json") and r.body:
        body = r.json()
        if isinstance(body, dict):
            assert body.get("error", {}).get("message") != DENIAL_MESSAGE, sent
    assert len(sent.executed) == executed, sent
    assert sent.upstream_requests == 1, sent


def assert_denied(sent: Sent, id: Any = "same", status: int | None = None) -> None:
    """Denied as docs/semantics.md §5 says, never executed, never sent upstream. `id="same"`: the request's id
    (HTTP 200 + JSON-RPC error); `id=None`: HTTP 403 with "id": null."""
    assert sent.response is not None, sent
    r = sent.response
    want_id = sent.id if id == "same" else id
    want_status = status if status is not None else (403 if want_id is None else 200)
    assert r.status == want_status, sent
    assert r.headers.get("content-type") == "application/json", sent
    assert r.json() == denial_body(want_id), sent
    assert sent.executed == [], sent
    assert sent.upstream_requests == 0, sent
