"""Fixtures for Toolgate's Envoy tests: tests/e2e, tests/bypass and tests/k8s (helpers live in
tests/e2e/harness.py).

  certs               session-wide test PKI from scripts/gen-certs.sh (Path of the directory)
  start_envoy         start_envoy(config, name="envoy", listeners=[ports], **kw) -> harness.Envoy
  start_mcp_server    start_mcp_server(name) -> harness.McpServer
  start_authorizer    start_authorizer(name, rule={...}) -> harness.Authorizer (toolgate-test-authz, gRPC + HTTP)
  wasm_path           Path of the release filter build (fails the test when it was not built: a missing
                      build output is an error, never a skipped test)
  gateway             gateway(*policies, ...) -> harness.ToolgateGateway: policy YAML -> `toolgate render`
                      -> Envoy in front of a fresh sample MCP server (the policy tests' fixture)

Processes are stopped after each test; when a test fails, the tail of every process log it started
is added to the failure report.

The filter's host is the run's parameter: `pytest --host wasm` (the default) or `--host native` (the
dynamic module of `make module`; TOOLGATE_E2E_HOST=native is the same). Every test runs on the host
of the run, except those marked `@pytest.mark.host("native", reason=...)` (or "wasm"): about one
host only, they run in that host's run and are skipped, with their reason, in the other's. `make
test` runs the whole of tests/e2e and tests/bypass once per host, in parallel (suite-e2e,
suite-e2e-native).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))

import harness  # noqa: E402

_PROCS = pytest.StashKey[list]()

HOSTS = ("wasm", "native")


def pytest_addoption(parser):
    parser.addoption("--host", choices=HOSTS, default=None,
                     help="the filter's host for tests/e2e and tests/bypass: wasm (default; or TOOLGATE_E2E_HOST) or native")


def pytest_configure(config):
    config.addinivalue_line("markers", "host(name, reason): the test is about that filter host only (wasm or native); "
                                       "it runs in that host's run and is skipped in the other's")
    host = config.getoption("--host")
    if host:
        # harness.filter_host() reads it (also at import time, e.g. test_tokens.py): one source.
        os.environ["TOOLGATE_E2E_HOST"] = host
    harness.filter_host()  # a bad TOOLGATE_E2E_HOST fails the run here


def pytest_report_header(config):
    return f"toolgate filter host: {harness.filter_host()}"


def pytest_collection_modifyitems(config, items):
    host = harness.filter_host()
    for item in items:
        marker = item.get_closest_marker("host")
        if marker is None:
            continue
        want = marker.args[0] if marker.args else marker.kwargs.get("name")
        if want not in HOSTS:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.host({want!r}): wasm or native")
        if want != host:
            why = marker.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"{want} host only{': ' + why if why else ''} (this run: --host {host})"))


@pytest.fixture(scope="session")
def host() -> str:
    """The filter's host of this run: "wasm" or "native"."""
    return harness.filter_host()


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


@pytest.fixture
def start_authorizer(request, tmp_path):
    started: list[harness.Authorizer] = []

    def start(name: str = "authz", rule: dict | None = None, workdir=None) -> harness.Authorizer:
        try:
            harness.authz_binary()
        except harness.HarnessError as exc:
            pytest.fail(str(exc))
        az = harness.Authorizer.start(name, workdir or tmp_path, rule)
        started.append(az)
        _register(request, az)
        return az

    yield start
    for az in reversed(started):
        az.stop()


@pytest.fixture(scope="session")
def wasm_path() -> Path:
    p = harness.REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
    if not p.exists():
        pytest.fail(f"{p} not built (make wasm)")
    return p


@pytest.fixture
def gateway(request, tmp_path, certs, wasm_path, start_mcp_server):
    """gateway(*policies, listeners={"https": "HTTPS", "http": "HTTP"}, https_client_ca=True,
    render_args=[...], before_start=fn, strict=True, route_rules=[...], name="gw", wasm=None)
    -> harness.ToolgateGateway, started: Envoy runs the rendered configuration in front of a fresh
    sample MCP server. Policies are dicts (harness.policy/rule) or YAML strings. `strict` renders with
    --strict (a policy that is not accepted fails the test instead of silently not applying).
    `before_start(gw)` runs between render and Envoy's start; `envoy_args` are added to Envoy's command
    line; `wasm` is another module than toolgate_filter.wasm. Envoy is stopped after the test.
    The filter runs on the run's host (--host: wasm, the default, or native: the dynamic module of
    `make module`); a test that passes `wasm` runs on Wasm, one that passes `native_module` (another
    .so) on that module."""
    started: list[harness.ToolgateGateway] = []

    def make(*policies, listeners=None, https_client_ca=True, render_args=(), before_start=None,
             name="gw", strict=True, route_rules=None, envoy_args=(), wasm=None,
             native_module=None) -> harness.ToolgateGateway:
        try:
            harness.toolgate_binary()
        except harness.HarnessError as exc:
            pytest.fail(str(exc))
        workdir = tmp_path / name
        server = start_mcp_server(f"{name}-mcp", workdir=workdir)
        host = "wasm" if wasm else "native" if native_module else harness.filter_host()
        module = native_module or harness.native_module_path()
        if host == "native" and not module.exists():
            pytest.fail(f"{module} not built (make module)")
        gw = harness.ToolgateGateway(workdir, certs, wasm or wasm_path, server, listeners=listeners,
                                     https_client_ca=https_client_ca, render_args=render_args, strict=strict,
                                     route_rules=route_rules, envoy_args=envoy_args, host=host,
                                     native_module=module)
        gw.policies = list(policies)
        started.append(gw)
        gw.start(register=lambda env: _register(request, env), before_start=before_start)
        return gw

    yield make
    for gw in reversed(started):
        gw.stop()
