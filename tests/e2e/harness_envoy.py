"""One Envoy process for the end-to-end tests: start it, wait until it is ready, read its admin
interface, stop it (harness.py re-exports it)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from harness_http import request
from harness_procs import HarnessError, _stop_process, envoy_binary, tail, tcp_open, wait_for

# Envoy's /ready answers LIVE once the server is initialised (static listeners bound).
ENVOY_START_TIMEOUT = 30.0


class EnvoyStartError(HarnessError):
    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message + ("\n--- envoy log tail ---\n" + log_tail if log_tail else ""))
        self.log_tail = log_tail

    @property
    def address_in_use(self) -> bool:
        return "Address already in use" in self.log_tail or "address already in use" in str(self)


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

    def wait_for_log(self, text: str, timeout: float = 10.0) -> str:
        """Waits until Envoy's log contains `text` (a line written by a filter reaches the file a moment
        after the request that caused it has been answered) and returns the log."""
        return wait_for(lambda: log if text in (log := self.log_path.read_text(errors="replace")) else None,
                        timeout=timeout, what=f"{text!r} in {self.log_path}")

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
                        # A port another process took meanwhile: Envoy logs the failed bind and runs
                        # without that listener, and tcp_open would reach the other process.
                        missing = sorted(set(ports) - {p for _, p in bound})
                        if missing:
                            raise EnvoyStartError(f"envoy did not bind port(s) {missing} (in use by another process?) "
                                                  f"({self.config})", self.log_tail())
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
