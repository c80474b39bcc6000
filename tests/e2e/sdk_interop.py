"""Helpers of test_sdk_interop.py: an MCP server built with the official MCP Python SDK (`mcp`, pinned
in requirements.txt), served by uvicorn in a thread of the test process, and a Toolgate gateway (real
Envoy, real filter, mTLS) in front of it; the SDK's own client connects through that gateway."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings

import harness

# Names the policy allows / denies. Non-ASCII ones travel base64-encoded in Mcp-Name (2026-07-28).
ALLOWED_TOOLS = ["add", "ünïcødé-sum", "slow", "touch"]
DENIED_TOOLS = ["secret", "geheimnis-ß"]
ALLOWED_PROMPT = "grüße"
DENIED_PROMPT = "private-prompt"
WATCHED = "memo://watched"
FORBIDDEN = "memo://forbidden"


@dataclass
class SdkServer:
    """The SDK server: what its tools executed (tool names, in order) and its uvicorn thread."""
    executed: list[str] = field(default_factory=list)
    port: int = 0
    _uvicorn: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def build(self) -> MCPServer:
        mcp = MCPServer("toolgate-interop", instructions="SDK server behind Toolgate")
        ran = self.executed.append

        @mcp.tool(name="add")
        async def add(a: int, b: int) -> int:
            ran("add")
            return a + b

        @mcp.tool(name="ünïcødé-sum")
        async def unicode_sum(a: int, b: int) -> int:
            ran("ünïcødé-sum")
            return a + b

        @mcp.tool(name="secret")
        async def secret() -> str:
            ran("secret")
            return "the secret"

        @mcp.tool(name="geheimnis-ß")
        async def geheimnis() -> str:
            ran("geheimnis-ß")
            return "das Geheimnis"

        @mcp.tool(name="slow")
        async def slow(seconds: float) -> str:
            ran("slow")
            await anyio.sleep(seconds)  # the tool's own work (a long call is what is tested), not a wait
            return f"slept {seconds}"

        @mcp.tool(name="touch")
        async def touch(ctx: Context) -> str:
            """Publishes a tools list change and an update of memo://watched to listen streams."""
            ran("touch")
            await ctx.notify_tools_changed()
            await ctx.notify_resource_updated(WATCHED)
            return "touched"

        @mcp.resource(WATCHED)
        def watched() -> str:
            return "watched memo"

        @mcp.resource(FORBIDDEN)
        def forbidden() -> str:
            return "forbidden memo"

        @mcp.prompt(name=ALLOWED_PROMPT)
        def gruesse(who: str) -> str:
            ran(ALLOWED_PROMPT)
            return f"Grüße, {who}!"

        @mcp.prompt(name=DENIED_PROMPT)
        def private_prompt() -> str:
            ran(DENIED_PROMPT)
            return "private"

        return mcp

    def start(self) -> "SdkServer":
        app = self.build().streamable_http_app(
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=120)
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        harness.wait_for(lambda: self._uvicorn.started, timeout=20, what="the SDK server")
        return self

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    # The harness's McpServer interface (ToolgateGateway reads the execution log of tagged requests).
    def executed_log(self) -> list[dict]:
        return []

    def log_tail(self, lines: int = 30) -> str:
        return ""


class _ServerShim:
    """What harness.ToolgateGateway needs of its upstream: the address, and no execution log."""

    def __init__(self, server: SdkServer):
        self._server = server

    @property
    def address(self) -> str:
        return self._server.address

    def executed(self) -> list[dict]:
        return []


def start_gateway(workdir: Path, certs: Path, wasm: Path, server: SdkServer, *policies: dict,
                  render_args: tuple[str, ...] = ()) -> harness.ToolgateGateway:
    gw = harness.ToolgateGateway(workdir, certs, wasm, _ServerShim(server), listeners={"https": "HTTPS"},
                                 render_args=render_args)
    gw.policies = list(policies)
    gw.start()
    return gw


def client(gw: harness.ToolgateGateway, mode: str, agent: str = "agent-a", **kw) -> Client:
    """An SDK client of the gateway's HTTPS listener, presenting `agent`'s certificate (mTLS)."""
    ctx = harness.tls_context(ca=gw.certs / "ca.crt", cert=harness.client_cert(gw.certs, agent))
    http = httpx2.AsyncClient(verify=ctx, timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(gw.url, http_client=http), mode=mode, **kw)


def access_lines(gw: harness.ToolgateGateway) -> list[str]:
    return harness.read_access_log(gw.access_log)


def wait_access_line(gw: harness.ToolgateGateway, pred, timeout: float = 10) -> str:
    def find():
        for line in access_lines(gw):
            if pred(line):
                return line
        return None
    return harness.wait_for(find, timeout=timeout, what="an access-log line")


def now() -> float:
    return time.monotonic()
