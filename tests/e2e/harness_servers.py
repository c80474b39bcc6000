"""The processes Envoy talks to in the end-to-end tests: the sample MCP server and the ext_authz
authorizer, and the logs they write (harness.py re-exports them)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Mapping

from harness_procs import REPO, HarnessError, _stop_process, built_binary, mcp_server_binary, tail, write_json

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
    return built_binary("TOOLGATE_TEST_AUTHZ", "toolgate-test-authz")


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
