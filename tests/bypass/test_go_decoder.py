"""Toolgate in front of a server that reads JSON as Go does (tests/go-mcp-server: encoding/json into tagged
structs, Go 1.24 from Debian): whatever Toolgate lets through, this server reads as Toolgate read it.

encoding/json matches object keys to fields case-insensitively with Unicode simple folding ("Name",
"NAME", "param\\u017f") and keeps the last of repeated keys. Each message below is first sent to the
Go server directly, which shows what it would run; then through Envoy, where a tool other than get-sum
must never run. The random part builds messages from folded, escaped and repeated spellings of the keys
Toolgate reads, and checks both directions: nothing but get-sum runs through Envoy, and every message
without such a spelling that names get-sum is let through and runs as get-sum."""

from __future__ import annotations

import json
import random
import re
import subprocess
from typing import NamedTuple

import pytest

import harness
from corpus import CASES
from test_bypass import send

ALLOWED = "get-sum"
MEMO = "memo://ok"
TOOLS = ("get-sum", "get-env", "echo")
ARGS = '{"a":2,"b":3,"name":"HOME","message":"m"}'


@pytest.fixture(scope="module")
def go_gw(tmp_path_factory, certs, wasm_path):
    """One Envoy + Go server for the module: listener "sum" lets agents call get-sum only; "args" lets them
    call get-sum with `a` under 10 (a CEL rule over the arguments); "res" lets them read memo://ok only."""
    try:
        harness.toolgate_binary()
        binary = harness.go_mcp_server_binary()
    except harness.HarnessError as exc:
        pytest.fail(str(exc))
    workdir = tmp_path_factory.mktemp("go-decoder")
    server = harness.McpServer.start("go-mcp", workdir, binary=binary)
    gw = harness.ToolgateGateway(workdir, certs, wasm_path, server, listeners={"sum": "HTTP", "args": "HTTP", "res": "HTTP"},
                                 https_client_ca=False, render_args=["--max-body-bytes", "4096"])
    small = {"name": "small-a", "authorization": {"type": "CEL", "cel": {
        "expression": "request.mcp.tool_name == 'get-sum' && request.mcp.params.arguments.a < 10"}}}
    gw.policies = [harness.policy("sum", harness.tools_call_rule("get-sum-only", [ALLOWED], base=True), section="sum"),
                   harness.policy("args", small, section="args"),
                   harness.policy("res", harness.rule("memo-only", mcp=harness.mcp_match(("resources/read", [MEMO]))),
                                  section="res")]
    with harness.serving(gw):
        yield gw


_seq = iter(range(1, 1 << 30))


def post(url: str, body: bytes, headers=()) -> tuple[int, bytes, str]:
    tag = f"tg=go{next(_seq)}"
    r = harness.request("POST", f"{url}?{tag}", body, [("content-type", "application/json"),
                                                         ("accept", "application/json, text/event-stream"), *headers])
    return r.status, r.body, tag


def calls(server: harness.McpServer, tag: str) -> list[dict]:
    """The server's log of the calls it ran for the request tagged `tag` (it logs a call before running
    it: the tool, and the arguments as the tool decoded them)."""
    return [e for e in server.executed() if str(e.get("path", "")).endswith("?" + tag)]


def ran(server: harness.McpServer, tag: str) -> list[str]:
    return [e["tool"] for e in calls(server, tag)]


def direct(gw, body: bytes, headers=()) -> list[str]:
    """What the Go server runs for `body` without Toolgate in front."""
    _, _, tag = post(gw.server.url + "/mcp", body, headers)
    return ran(gw.server, tag)


def through(gw, body: bytes, headers=(), listener: str = "sum") -> tuple[int, bytes, list[str]]:
    status, resp, tag = post(gw.url_for(listener), body, headers)
    return status, resp, ran(gw.server, tag)


def test_controls(go_gw):
    """The server runs what it is sent, and Toolgate lets get-sum through and refuses get-env."""
    ok = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":2,"b":3}}}'
    denied = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-env","arguments":{"name":"HOME"}}}'
    assert direct(go_gw, denied) == ["get-env"]
    status, resp, runs = through(go_gw, ok)
    assert (status, runs) == (200, ["get-sum"]) and json.loads(resp)["result"]["content"][0]["text"] == "5", resp
    status, resp, runs = through(go_gw, denied)
    assert (status, json.loads(resp), runs) == (200, harness.denial_body(2), [])


# The corpus's hostile messages for the get-sum listener that are plain HTTP/1.1 JSON-RPC POSTs.
CORPUS = [c for c in CASES if c["listener"] == "sum" and c["via"] == "http" and c.get("method", "POST") == "POST"
          and not c.get("exec_ok") and not c.get("xfail") and "path" not in c]
# Messages Go reads as a call of another tool (key folding, a repeated key): live bypasses of a reader that
# differed from Go's. The test checks the Go server does run another tool for each.
LIVE_ON_GO = {"key-Name", "key-NAME-only", "key-escaped-N", "key-Params", "key-long-s-escaped", "key-long-s-raw",
              "duplicate-name", "duplicate-method"}


def test_corpus_runs_nothing_on_go(go_gw, tmp_path):
    """Every hostile message of the bypass corpus is refused in front of the Go server, including those the Go
    server, reached directly, runs as a tool other than get-sum."""
    assert LIVE_ON_GO <= {c["id"] for c in CORPUS}
    live, leaked = set(), []
    for c in CORPUS:
        headers = [h for h in c.get("headers", []) if h[0].lower() not in ("content-type", "accept")]
        if c.get("ct", "application/json") == "application/json":
            runs = direct(go_gw, c["body"], headers)
            if any(t != ALLOWED and t in TOOLS for t in runs):
                live.add(c["id"])
        responses, tag = send(go_gw, c, tmp_path)
        runs = ran(go_gw.server, tag)
        if runs:
            leaked.append((c["id"], runs, responses))
    assert leaked == []
    assert LIVE_ON_GO <= live, sorted(LIVE_ON_GO - live)


# ---- random messages ----------------------------------------------------------------------------------

# Non-ASCII characters that fold onto an ASCII letter of a key Toolgate reads: U+017F long s and U+212A
# Kelvin sign in Go (encoding/json compares keys by Unicode simple folding); U+0131 dotless i only in
# decoders that upper-case (.NET's case-insensitive names), not in Go. Toolgate refuses all three.
FOLDS = {"i": "\u0131", "s": "\u017f", "k": "\u212a"}


def key_text(rng: random.Random, key: str, twin: bool) -> str:
    """A JSON string for `key`: as is, or (`twin`) a spelling Go reads as `key` and that is not it; either
    with some characters written as \\u escapes."""
    chars = list(key)
    if twin:
        while "".join(chars) == key:
            chars = [FOLDS[c] if c in FOLDS and rng.random() < 0.3 else c.upper() if rng.random() < 0.4 else c
                     for c in key]
    out = []
    for c in chars:
        if rng.random() < 0.15 or ord(c) > 0x7F and rng.random() < 0.5:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


class Kind(NamedTuple):
    """A method whose one read field a rule names: the values a message may carry, the one the rule allows,
    the listener whose rule that is, the rest of `params`, and what the Go server logs of it."""
    method: str
    field: str
    values: tuple[str, ...]
    allowed: str
    listener: str
    rest: str
    logged: str


CALL = Kind("tools/call", "name", TOOLS, ALLOWED, "sum", ',"arguments":' + ARGS, "tool")
READ = Kind("resources/read", "uri", (MEMO, "file:///etc/passwd"), MEMO, "res", "", "uri")


def message(rng: random.Random, kind: Kind, id: int = 1) -> tuple[str, bool]:
    """A message of `kind` with randomly spelled, repeated and folded keys; and whether it is plain (no
    twin of a key, no repeated key) and carries the allowed value, so must be let through."""
    clean = rng.random() < 0.4
    twin = lambda: not clean and rng.random() < 0.5  # noqa: E731
    fields = [(key_text(rng, kind.field, False), rng.choice(kind.values))]
    if not clean:
        for _ in range(rng.randint(0, 2)):
            t = twin()
            fields.append((key_text(rng, kind.field, t), rng.choice(kind.values)))
    if clean and rng.random() < 0.5:
        fields[0] = (fields[0][0], kind.allowed)
    rng.shuffle(fields)
    params = "{" + ",".join(f'{k}:"{v}"' for k, v in fields) + kind.rest + "}"
    members = [(key_text(rng, "jsonrpc", twin()), '"2.0"'), (key_text(rng, "id", twin()), str(id)),
               (key_text(rng, "method", twin()), f'"{kind.method}"'), (key_text(rng, "params", twin()), params)]
    if not clean and rng.random() < 0.3:  # a second params (or a twin of it) with some value
        members.append((key_text(rng, "params", twin()), '{"%s":"%s"%s}' % (kind.field, rng.choice(kind.values), kind.rest)))
    rng.shuffle(members)
    text = "{" + ",".join(f"{k}:{v}" for k, v in members) + "}"
    repeated = len(fields) > 1 or len(members) > 4
    return text, clean and not repeated and fields[0][1] == kind.allowed


def used(server: harness.McpServer, tag: str, kind: Kind) -> list[str]:
    """The values of `kind`'s field the server acted on for the request tagged `tag`."""
    return [e[kind.logged] for e in calls(server, tag) if e["jsonrpc_method"] == kind.method]


def differential(gw, kind: Kind, bodies: list[tuple[bytes, int]], headers=lambda body: ()) -> tuple[int, int]:
    """Sends each body (with `headers(body)`) directly to the Go server, then through Envoy; `must` is how many values it must act
    on through Envoy (all the plain allowed ones; 0: any number, possibly none). Asserts nothing but the
    allowed value is acted on through Envoy and every plain allowed body is; returns how many bodies the
    Go server alone acted on with another value, and how many passed Envoy."""
    leaked, refused, live, passed = [], [], 0, 0
    for body, must in bodies:
        _, _, tag = post(gw.server.url + "/mcp", body, headers(body))
        live += any(v != kind.allowed for v in used(gw.server, tag, kind))
        status, resp, tag = post(gw.url_for(kind.listener), body, headers(body))
        acted = used(gw.server, tag, kind)
        if any(v != kind.allowed for v in acted):
            leaked.append((body, acted))
        passed += bool(acted)
        if must and len(acted) != must:
            refused.append((body, status, resp[:200]))
    assert leaked == []
    assert refused == []
    return live, passed


@pytest.mark.parametrize("kind,seed,count,live_at_least,passed_at_least",
                         [(CALL, 20261126, 400, 100, 40), (READ, 20261127, 200, 50, 20)], ids=["tools-call", "resources-read"])
def test_random_messages_read_as_go_reads_them(go_gw, kind, seed, count, live_at_least, passed_at_least):
    """400 random tools/call messages (200 resources/read): through Envoy the Go server acts on nothing but
    the allowed value (get-sum, memo://ok), and every plain message carrying it (keys possibly
    \\u-escaped) is acted on; sent directly, many make it act on another value."""
    rng = random.Random(seed)
    bodies = []
    for _ in range(count):
        text, must_pass = message(rng, kind)
        bodies.append((text.encode(), int(must_pass)))
    live, passed = differential(go_gw, kind, bodies)
    # The generator is not vacuous: a good share would act on another value on Go, and some do pass.
    assert live >= live_at_least and passed >= passed_at_least, (live, passed)


def test_random_calls_with_the_2026_07_28_headers(go_gw):
    """200 random tools/call messages sent as MCP 2026-07-28 clients send them, with `Mcp-Method` and an
    `Mcp-Name` naming the tool in the message's first `name`-like key: the headers change nothing of the
    above (a Go server routing on the body, not the headers)."""
    rng = random.Random(20261129)
    bodies = []
    for _ in range(200):
        text, must_pass = message(rng, CALL)
        bodies.append((text.encode(), int(must_pass)))

    def headers(body: bytes) -> list[tuple[str, str]]:
        # The value after the first key that reads as "name" to Go, as a client would have written both.
        found = re.search(r'"(?:[nN]|\\u00[46]e)(?:[aA]|\\u00[46]1)(?:[mM]|\\u00[46]d)(?:[eE]|\\u00[46]5)":"([^"]*)"', body.decode())
        return [("mcp-method", "tools/call"), ("mcp-protocol-version", "2026-07-28")] + (
            [("mcp-name", found.group(1))] if found else [])

    live, passed = differential(go_gw, CALL, bodies, headers)
    assert live >= 50 and passed >= 20, (live, passed)


def test_random_batches_read_as_go_reads_them(go_gw):
    """150 random batches of one to three tools/call messages: a batch passes only whole, so through Envoy
    the Go server runs nothing but get-sum, and a batch of plain get-sum calls runs every one of them."""
    rng = random.Random(20261128)
    bodies = []
    for _ in range(150):
        elements = [message(rng, CALL, id=i + 1) for i in range(rng.randint(1, 3))]
        plain = all(must_pass for _, must_pass in elements)
        bodies.append((("[" + ",".join(text for text, _ in elements) + "]").encode(), len(elements) if plain else 0))
    live, passed = differential(go_gw, CALL, bodies)
    assert live >= 50 and passed >= 10, (live, passed)


def test_argument_keys_that_fold_together(go_gw):
    """A CEL rule over `arguments.a`: the Go tool decodes its arguments into a struct, so of `a` and `A` it
    takes the last. Toolgate refuses arguments holding keys that fold together; sent directly, the Go tool
    uses the value the rule never judged."""
    def sum_call(args: str) -> bytes:
        return ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get-sum","arguments":%s}}' % args).encode()

    status, resp, tag = post(go_gw.url_for("args"), sum_call('{"a":2,"b":3}'))
    assert (status, [e["args"] for e in calls(go_gw.server, tag)]) == (200, [{"a": 2, "b": 3}]), resp
    assert through(go_gw, sum_call('{"a":20,"b":3}'), listener="args")[2] == []
    for args in ('{"a":2,"A":20,"b":3}', '{"a":2,"b":3,"\\u0041":20}', '{"b":3,"a":2,"a":20}'):
        _, _, tag = post(go_gw.server.url + "/mcp", sum_call(args))
        assert [e["args"]["a"] for e in calls(go_gw.server, tag)] == [20], args
        status, resp, runs = through(go_gw, sum_call(args), listener="args")
        assert (status, json.loads(resp), runs) == (403, harness.denial_body(None), []), args
    # Go folds the capital sharp s onto the small one: a Go tool reads "straẞe" into a field tagged straße.
    echo = '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m","stra\u1e9ee":"y"}}}'
    _, _, tag = post(go_gw.server.url + "/mcp", echo.encode())
    assert [e["args"] for e in calls(go_gw.server, tag)] == [{"message": "m", "straße": "y"}]
    status, resp, runs = through(go_gw, sum_call('{"a":2,"b":3,"straße":"x","stra\u1e9ee":"y"}'), listener="args")
    assert (status, json.loads(resp), runs) == (403, harness.denial_body(None), [])


def test_numbers_are_read_as_go_reads_them(go_gw):
    """The CEL rule `arguments.a < 10` judges the double Go reads: 9.99999999999999915 is 10 to both."""
    def sum_call(a: str) -> bytes:
        return ('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":%s,"b":3}}}' % a).encode()

    for a, go_reads, passes in (("9.99999999999999915", 10, False), ("0.999999999999999915e1", 10, False),
                                ("9.9999999999999991", 9.999999999999998, True)):
        _, _, tag = post(go_gw.server.url + "/mcp", sum_call(a))
        assert [e["args"]["a"] for e in calls(go_gw.server, tag)] == [go_reads], a
        status, resp, runs = through(go_gw, sum_call(a), listener="args")
        assert runs == (["get-sum"] if passes else []), (a, status, resp)


def test_the_fold_orbits_the_reader_is_checked_against_are_this_gos():
    """policy/src/mcp/go_fold_orbits.txt (every orbit of Go's key folding, which a unit test checks the
    params twin check against) is what this Go prints: a Go whose folding changed fails here."""
    printed = subprocess.run([str(harness.REPO / "target/go/toolgate-go-fold-orbits")], capture_output=True, check=True,
                             timeout=60).stdout
    assert printed == (harness.REPO / "policy/src/mcp/go_fold_orbits.txt").read_bytes()
