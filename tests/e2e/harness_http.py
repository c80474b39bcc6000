"""The end-to-end tests' HTTP(S) client and the MCP messages they send (harness.py re-exports it)."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness_procs import ClientCert

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
