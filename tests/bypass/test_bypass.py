"""The bypass corpus (corpus.py) in a real Envoy: every hostile request is refused, the sample MCP server's
execution log has nothing for it, and Envoy's upstream request count for the MCP cluster did not grow.
Positive controls first show each rule does let through what it names."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time

import pytest

import harness
from reference import TARGET
from corpus import CASES, CONTROLS

_seq = iter(range(1, 1 << 30))


def _read_http1(sock: socket.socket, want: int = 1, timeout: float = 5.0) -> bytes:
    """Until EOF, or until `want` complete responses arrived (Envoy may keep the socket open a while)."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not got:
            break
        data += got
        if len(parse_http1(data)) >= want:
            break
    return data


def parse_http1(data: bytes, closed: bool = False) -> list[tuple[int, bytes]]:
    """(status, body) of each HTTP/1.1 response in `data` (content-length or chunked bodies)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower()] = v.strip()
        if b"content-length" in hdrs:
            n = int(hdrs[b"content-length"])
            if len(rest) < n:
                break  # incomplete
            body, data = rest[:n], rest[n:]
        elif hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
            if b"0\r\n\r\n" not in rest:
                break  # incomplete
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                n = int(size_line.split(b";")[0] or b"0", 16)
                if n == 0:
                    _, _, rest = rest.partition(b"\r\n")
                    break
                body += rest[:n]
                rest = rest[n + 2:]
            data = rest
        else:  # body until EOF: complete only once the socket is closed
            if not closed:
                break
            body, data = rest, b""
        out.append((status, body))
    return out


def send_raw(port: int, raw: bytes, want: int = 1) -> list[tuple[int, bytes]]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(raw)
        return parse_http1(_read_http1(s, want), closed=True)


def send_h2(url: str, c: dict, tmp_path) -> list[tuple[int, bytes]]:
    """One request over h2c with nghttp (POST when there is a body, unless the case names a method)."""
    args = ["nghttp", "-v", "--no-content-length"]
    if c.get("body") is not None:
        data = tmp_path / f"{c['id']}.body"
        data.write_bytes(c["body"])
        args += ["-d", str(data)]
    ct = c.get("ct", "application/json")
    if ct:
        args += ["-H", f"content-type: {ct}"]
    args += ["-H", "accept: application/json, text/event-stream"]
    if c.get("authority"):
        args += ["-H", f":authority: {c['authority']}"]
    if c.get("method"):
        args += ["-H", f":method: {c['method']}"]
    for k, v in c.get("headers", []):
        args += ["-H", f"{k}: {v}"]
    if c.get("trailer"):
        args += ["--trailer", c["trailer"]]
    out = subprocess.run([*args, url], capture_output=True, timeout=20)
    status = re.search(rb":status: (\d+)", out.stdout)
    if not status:
        return []
    if c.get("trailer"):
        assert c["trailer"].split(":")[0].encode() in out.stdout, "the request must really carry a trailer"
    text = re.sub(rb"\[\s*\d+\.\d+\][^\n]*\n?|\s+; END_STREAM", b"", out.stdout)
    body = b"".join(line for line in text.splitlines(keepends=True) if line.strip() and not line.startswith((b" ", b"\t")))
    return [(int(status.group(1)), body)]


def send(gw: harness.ToolgateGateway, c: dict, tmp_path) -> tuple[list[tuple[int, bytes]], str]:
    tag = f"tg=b{next(_seq)}"
    port = gw.ports[c["listener"]]
    if c["via"] == "raw":
        return send_raw(port, c["raw"].replace(b"@TAG@", tag.encode()), c.get("responses", 1)), tag
    path = c.get("path", "/mcp")
    path += ("&" if "?" in path else "?") + tag
    if c["via"] == "h2":
        return send_h2(f"http://127.0.0.1:{port}{path}", c, tmp_path), tag
    headers = list(c.get("headers", []))
    ct = c.get("ct", "application/json")
    if ct:
        headers.append(("content-type", ct))
    headers.append(("accept", "application/json, text/event-stream"))
    r = harness.request(c.get("method", "POST"), f"http://127.0.0.1:{port}{path}", c.get("body"), headers)
    return [(r.status, r.body)], tag


def outcome(status: int, body: bytes, c: dict) -> str | int:
    """What kind of refusal this is ("rpc", "deny", "notfound", "mismatch", "413"), else the bare status."""
    try:
        j = json.loads(body)
    except ValueError:
        j = None
    if status == 200 and j == harness.denial_body(c.get("jid")):
        return "rpc"
    if status == 200 and "jid_raw" in c and body == (
            '{"jsonrpc":"2.0","id":' + c["jid_raw"] + ',"error":{"code":403,"message":"' + harness.DENIAL_MESSAGE + '"}}').encode():
        return "rpc"  # an id Python cannot compare (1e400), echoed verbatim
    if status == 403 and j == harness.denial_body(None):
        return "deny"
    if status in (200, 404) and j == {"jsonrpc": "2.0", "id": c.get("jid"),
                                      "error": {"code": -32601, "message": "Method not found"}}:
        return "notfound"
    if status == 400 and isinstance(j, dict) and j.get("error", {}).get("code") == -32020:
        return "mismatch"
    if status == 413:
        return "413"
    return status


@pytest.mark.parametrize("c", CONTROLS, ids=[c["id"] for c in CONTROLS])
def test_control_is_allowed(bypass_gw, c, tmp_path):
    gw = bypass_gw
    before_exec, before_up = len(gw.server.executed()), gw.upstream_requests()
    responses, tag = send(gw, c, tmp_path)
    assert responses and responses[-1][0] == 200, responses
    assert "error" not in json.loads(responses[-1][1]), responses
    new = gw.server.executed()[before_exec:]
    assert len(new) == 1 and tag in new[0]["path"], new
    assert gw.upstream_requests() - before_up == 1


def _param(c):
    marks = [pytest.mark.xfail(strict=True, reason="REAL BYPASS: " + c["xfail"])] if c.get("xfail") and TARGET == "toolgate" else []
    return pytest.param(c, id=c["id"], marks=marks)


@pytest.mark.parametrize("c", [_param(c) for c in CASES])
def test_hostile_request_is_refused(bypass_gw, c, tmp_path):
    gw = bypass_gw
    before_exec, before_up = len(gw.server.executed()), gw.upstream_requests()
    responses, tag = send(gw, c, tmp_path)
    exec_ok = c.get("exec_ok", 0)
    new = gw.server.executed()[before_exec:]
    grown = gw.upstream_requests() - before_up
    # Nothing hostile executed (a legitimate pipelined request may be, tagged "ctl").
    assert [e for e in new if "ctl" not in json.dumps(e.get("id"))] == [], (c["rule"], new, responses)
    assert len(new) == exec_ok and grown == exec_ok, (c["rule"], new, grown, responses)
    assert responses, f"no HTTP response for {c['id']}"
    status, body = responses[-1]
    got = outcome(status, body, c)
    if os.environ.get("BYPASS_SHOW"):  # BYPASS_SHOW=1 pytest -s: print how each case was refused
        print(f"\n{c['id']}: {got} {body[:120]!r}", end="")
    if TARGET != "toolgate":
        return  # another data plane (BYPASS_TARGET): its refusals are its own; what counts is above
    want = c["expect"] if isinstance(c["expect"], tuple) else (c["expect"],)
    assert got in want, (c["rule"], status, body[:300])
