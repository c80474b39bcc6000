"""Fixtures for Toolgate's end-to-end tests (helpers live in harness.py).

  certs               session-wide test PKI from scripts/gen-certs.sh (Path of the directory)
  start_envoy         start_envoy(config, name="envoy", listeners=[ports], **kw) -> harness.Envoy
  start_mcp_server    start_mcp_server(name) -> harness.McpServer
  wasm_path           Path of the release filter build (skips the test when it was not built)

Processes are stopped after each test; when a test fails, the tail of every process log it started
is added to the failure report.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

_PROCS = pytest.StashKey[list]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for proc in item.stash.get(_PROCS, []):
            try:
                text = proc.log_tail()
            except Exception as exc:  # noqa: BLE001
                text = f"(could not read log: {exc!r})"
            report.sections.append((f"{type(proc).__name__} {proc.name} log tail ({report.when})", text or "(empty)"))
    return report


def _register(request, proc) -> None:
    request.node.stash.setdefault(_PROCS, []).append(proc)


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Path:
    return harness.gen_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def start_envoy(request, tmp_path):
    started: list[harness.Envoy] = []

    def start(config, name: str = "envoy", listeners=(), workdir=None,
              timeout: float = harness.ENVOY_START_TIMEOUT, **kw) -> harness.Envoy:
        """kw: log_level, extra_args, concurrency (see harness.Envoy)."""
        env = harness.Envoy(Path(config), Path(workdir or tmp_path), name, **kw)
        _register(request, env)
        started.append(env)
        env._spawn()
        env._wait_ready(list(listeners), timeout)
        return env

    yield start
    for env in reversed(started):
        env.stop()


@pytest.fixture
def start_mcp_server(request, tmp_path):
    started: list[harness.McpServer] = []

    def start(name: str = "mcp", workdir=None) -> harness.McpServer:
        try:
            harness.mcp_server_binary()
        except harness.HarnessError as exc:
            pytest.fail(str(exc))
        srv = harness.McpServer.start(name, workdir or tmp_path)
        started.append(srv)
        _register(request, srv)
        return srv

    yield start
    for srv in reversed(started):
        srv.stop()


@pytest.fixture(scope="session")
def wasm_path() -> Path:
    p = harness.REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
    if not p.exists():
        msg = f"{p} not built (make wasm)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return p
