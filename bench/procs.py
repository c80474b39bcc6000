"""The processes `make bench` runs and measures: their CPU time and memory, a server, an Envoy."""

import glob
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse
from pathlib import Path

from common import ENVOY_CPU, LOAD_CPU, WORK
import harness  # tests/e2e (on the path common sets): Envoy binary lookup, free ports, an HTTPS client

def cpu_ns(pid: int) -> int:
    """CPU time (ns) of all live threads of `pid` (schedstat: exact; falls back to /proc stat ticks)."""
    total = 0
    try:
        for stat in glob.glob(f"/proc/{pid}/task/*/schedstat"):
            try:
                total += int(open(stat).read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        if total:
            return total
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0


def process_cpu_ns(pid: int) -> int:
    """CPU time of a whole process including its exited threads (/proc/PID/stat, clock ticks): for the
    thread-per-connection servers, whose threads come and go."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0


def rss_kib(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Server:
    """bench-upstream / bench-authz, pinned to the load generator's CPU."""

    def __init__(self, name: str, argv: list[str], listen: list[str] | None = None, json_key: str | None = None):
        """`listen`: the arguments that make it listen on a free port (default `--listen 127.0.0.1:0`);
        `json_key`: the first stdout line is a JSON object of addresses (toolgate-test-authz), not
        `listening on ADDR`."""
        self.name = name
        err = open(WORK / f"{name}.stderr.log", "wb")
        self.proc = subprocess.Popen(["taskset", "-c", LOAD_CPU, *argv, *(listen or ["--listen", "127.0.0.1:0"])],
                                     stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        err.close()
        line = self.proc.stdout.readline().decode()
        try:
            self.address = json.loads(line)[json_key] if json_key else None
        except (ValueError, KeyError, TypeError):
            self.address = None
        if not json_key and line.startswith("listening on "):
            self.address = line.split()[-1]
        if not self.address:
            self.stop()
            raise RuntimeError(f"{name}: unexpected first line {line!r}")
        self.port = int(self.address.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Envoy:
    """One Envoy, `--concurrency 1`, pinned to ENVOY_CPU."""

    def __init__(self, key: str, config: Path, port: int):
        self.key = key
        self.port = port
        self.log_path = WORK / "logs" / f"envoy-{key}.log"
        self.admin_path = WORK / "logs" / f"envoy-{key}.admin"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.admin_path.unlink(missing_ok=True)
        self.log_path.unlink(missing_ok=True)
        out = open(WORK / "logs" / f"envoy-{key}.stdout.log", "wb")
        self.proc = subprocess.Popen(
            ["taskset", "-c", ENVOY_CPU, str(harness.envoy_binary()), "--config-path", str(config),
             "--config-yaml", "{admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}}",
             "--admin-address-path", str(self.admin_path), "--concurrency", "1", "--disable-hot-restart",
             "--log-level", "info", "--log-path", str(self.log_path), "--file-flush-interval-msec", "100"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"envoy {self.key} exited ({self.proc.returncode}):\n{harness.tail(self.log_path)}")
            if self.admin_path.exists() and self.admin_path.read_text().strip():
                admin = self.admin_path.read_text().strip()
                try:
                    r = harness.request("GET", f"http://{admin}/ready", timeout=1)
                    if r.status == 200 and r.body.strip() == b"LIVE" and harness.tcp_open("127.0.0.1", self.port):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"envoy {self.key} not ready after {timeout}s:\n{harness.tail(self.log_path)}")

    def counter(self, name: str) -> int:
        """A counter from the admin interface (0 when Envoy has none of that name)."""
        admin = self.admin_path.read_text().strip()
        r = harness.request("GET", f"http://{admin}/stats?format=json&filter={urllib.parse.quote('^' + re.escape(name) + '$', safe='')}",
                             timeout=5)
        stats = json.loads(r.body).get("stats", [])
        return int(next((x.get("value", 0) for x in stats if x.get("name") == name), 0))

    def plan_loads(self) -> list[tuple[int, float]]:
        """(plan bytes, milliseconds) of each plan load the filter logged."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [(int(b), float(ms)) for b, ms in re.findall(r"loaded plan .*?; (\d+) bytes in ([\d.]+) ms", text)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
