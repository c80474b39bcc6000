"""The bypass corpus: hostile requests, each naming the rule it tries to get past (see test_bypass.py).

A case is a dict:
  id        unique name (the pytest id)
  rule      the rule attacked
  listener  "sum" (tools/call get-sum only, limit 4096), "path" (PathPrefix /mcp/public), "host" (hosts api.example.com)
  via       "http" (harness.request: HTTP/1.1, http.client), "raw" (HTTP/1.1 bytes on a socket), "h2" (nghttp, h2c)
  method, path, headers (list of pairs), body (bytes), ct (content-type; None = none sent)   for http/h2
  raw       the request bytes for via=raw; "@TAG@" is replaced by the case's tag query (tg=...)
  expect    "rpc" (HTTP 200 + the JSON-RPC denial with the request's id `jid`), "deny" (HTTP 403, id null),
            "notfound" (JSON-RPC -32601 with `jid`: a method MCP does not define),
            "mismatch" (HTTP 400, -32020), "413", or an int / tuple of ints (refused by Envoy itself)
  exec_ok   executions that are legitimate (a pipelined allowed request); default 0
  xfail     reason, when the case is NOT refused (a real bypass: reported, never hidden)
"""

from __future__ import annotations

import gzip

MAX_BODY = 4096
ARGS = '{"a":2,"b":3}'


def call(name_json: str, id_json: str = "1", method: str = '"tools/call"', extra: str = "", args: str = ARGS,
         top: str = "") -> str:
    """A tools/call body with the given raw JSON for params.name, id and method."""
    return ('{"jsonrpc":"2.0","id":' + id_json + ',"method":' + method + ',"params":{"name":' + name_json
            + ',"arguments":' + args + extra + '}' + top + '}')


def env_call(id_json: str = "1", **kw) -> str:
    return call('"get-env"', id_json, args='{"name":"HOME"}', **kw)


GET_SUM = call('"get-sum"')
GET_ENV = env_call()


def b(s: str) -> bytes:
    return s.encode()


def chunk(*pieces: bytes, ext: str = "") -> bytes:
    out = b""
    for p in pieces:
        out += f"{len(p):x}{ext}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n\r\n"


def raw_post(body: bytes, *, path: str = "/mcp", host: str = "gw", headers: list[str] = (), te: bool = False,
             cl: int | None = None, version: str = "HTTP/1.1") -> bytes:
    # Accept as MCP clients send it (Envoy's MCP filter reads a POST without it as not MCP).
    lines = [f"POST {path}{'&' if '?' in path else '?'}@TAG@ {version}", f"Host: {host}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", "Connection: close", *headers]
    if te:
        lines.append("Transfer-Encoding: chunked")
    elif cl is not None or body:
        lines.append(f"Content-Length: {len(body) if cl is None else cl}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


CASES: list[dict] = []


def case(id: str, rule: str, expect, *, listener: str = "sum", via: str = "http", **kw) -> None:
    assert id not in {c["id"] for c in CASES}, id
    CASES.append(dict(id=id, rule=rule, expect=expect, listener=listener, via=via, **kw))


TOOL = "tools/call get-sum only"
KEYS = "tools/call get-sum only (case-folded / look-alike keys are not MCP)"
BATCH = "tools/call get-sum only (a batch is allowed only if every element is)"
HDR = "Mcp-Method/Mcp-Name must agree with the body"
LIMIT = f"body limit {MAX_BODY} (--max-body-bytes)"
PATH = "PathPrefix /mcp/public"
HOST = "host matcher api.example.com"


def rpc_case(id, rule, body: str, jid=1, **kw):
    case(id, rule, "rpc", body=b(body), jid=jid, **kw)


def deny_case(id, rule, body, **kw):
    case(id, rule, "deny", body=body if isinstance(body, bytes) else b(body), **kw)


# ---- tool-name case and Unicode tricks (each names a tool other than get-sum: a server folding or
# normalising names would run it as get-sum's neighbour; the rule must compare exactly)
for i, name in enumerate(['"Get-Sum"', '"GET-SUM"', '"get-Sum"', '"get\\u2010sum"', '"get\u2010sum"',
                          '"\\uff47\\uff45\\uff54-\\uff53\\uff55\\uff4d"', '"get\\uff0dsum"', '"get-sum "',
                          '" get-sum"', '"get-sum\\u0000"', '"get-sum\\u200b"', '"get_sum"', '"get-\\u017fum"',
                          '"get-sum\\n"', '"ge\\u0074-sum\\u0301"', '"get-sum/../get-env"', '"get-env"',
                          '"get-sum\\u0000get-env"']):
    rpc_case(f"tool-name-{i:02d}", TOOL, call(name, str(100 + i)), jid=100 + i)

# ---- key tricks: keys that read as a read field under case folding ("nam\u0065" is legit: not here)
deny_case("key-Name", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","Name":"get-env","arguments":{"name":"HOME"}}}')
deny_case("key-NAME-only", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"get-env","arguments":{"name":"HOME"}}}')
deny_case("key-escaped-N", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","\\u004eame":"get-env"}}')
deny_case("key-Params", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},"Params":{"name":"get-env","arguments":{"name":"HOME"}}}')
deny_case("key-long-s-escaped", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},"param\\u017f":{"name":"get-env"}}')
deny_case("key-long-s-raw", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},"param\u017f":{"name":"get-env"}}')
deny_case("key-Method", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":{"name":"get-sum"}}')
deny_case("key-dotless-i-id", KEYS, '{"jsonrpc":"2.0","\\u0131d":1,"method":"tools/call","params":{"name":"get-env"}}')
deny_case("key-dotless-i-uri", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","ur\\u0131":"file:///etc/passwd"}}')
# A key that differs by a NUL: another key to JSON, `name` to a decoder that ends strings at NUL (C
# libraries), which then reads a repeated name and takes get-env.
deny_case("key-nul-name", KEYS, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","name\\u0000":"get-env","arguments":{"name":"HOME"}}}')
deny_case("key-JSONRPC", KEYS, '{"JSONRPC":"2.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"}}')
# Kelvin sign (U+212A folds to k): no read field has a k, so it must not turn a key into one; the call is echo.
rpc_case("key-kelvin", TOOL, '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"\\u212a":"get-sum","name":"echo","arguments":{"message":"x"}}}', jid=7)

# ---- method variants
for i, m in enumerate(['"Tools/Call"', '"TOOLS/CALL"', '"tools/call "', '" tools/call"', '"tools//call"',
                       '"tools/call/"', '"tools/call\\u0000"', '"tools\\u2215call"', '"tools/calls"', '"tools/Call"']):
    # Not a method MCP defines: denied as "Method not found" (docs/semantics.md §5).
    case(f"method-{i:02d}", TOOL, "notfound", body=b(env_call(str(200 + i), method=m)), jid=200 + i)
deny_case("method-number", TOOL, env_call(method="7"))
deny_case("method-array", TOOL, env_call(method='["tools/call"]'))
deny_case("duplicate-method", TOOL, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"},"method":"tools/call","params":{"name":"get-env"}}')
deny_case("duplicate-name", TOOL, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","name":"get-env"}}')

# ---- batch smuggling
deny_case("batch-allowed-then-denied", BATCH, "[" + GET_SUM + "," + env_call("2") + "]")
deny_case("batch-denied-then-allowed", BATCH, "[" + env_call("2") + "," + GET_SUM + "]")
deny_case("batch-ping-and-denied", BATCH, '[{"jsonrpc":"2.0","id":1,"method":"ping"},' + env_call("2") + "]")
deny_case("batch-nested-array", BATCH, "[[" + env_call("2") + "]]")
deny_case("batch-allowed-plus-nested", BATCH, "[" + GET_SUM + ",[" + env_call("2") + "]]")
deny_case("batch-allowed-plus-string", BATCH, "[" + GET_SUM + ',"' + "x" + '"]')
deny_case("batch-denied-notification", BATCH, "[" + GET_SUM + ',{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get-env"}}]')
deny_case("batch-element-case-folded", BATCH, "[" + GET_SUM + ',{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get-sum","Name":"get-env"}}]')

# ---- params and name of the wrong type
rpc_case("params-array", TOOL, '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":["get-env",{"name":"HOME"}]}', jid=11)
rpc_case("params-string", TOOL, '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":"get-env"}', jid=12)
rpc_case("params-null", TOOL, '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":null}', jid=13)
for i, name in enumerate(["1", "null", '{"name":"get-sum"}', '["get-sum"]', "true"]):
    rpc_case(f"name-type-{i}", TOOL, call(name, str(20 + i)), jid=20 + i)

# ---- id tricks (the call is get-env)
for i, idj in enumerate(['{"a":1}', "[1]", "true"]):
    deny_case(f"id-type-{i}", TOOL, env_call(idj))
rpc_case("id-huge-int", TOOL, env_call("123456789012345678901234567890"), jid=123456789012345678901234567890)
case("id-huge-float", TOOL, "rpc", body=b(env_call("1e400")), jid_raw="1e400")
rpc_case("id-long-string", TOOL, env_call('"' + "i" * 3000 + '"'), jid="i" * 3000)

# ---- responses sent as requests, and not-quite JSON-RPC
deny_case("response-result-and-Method", TOOL, '{"jsonrpc":"2.0","id":1,"result":{},"Method":"tools/call","params":{"name":"get-env"}}')
case("response-result-and-method", TOOL, ("rpc", "deny"), body=b('{"jsonrpc":"2.0","id":1,"result":{},"method":"tools/call","params":{"name":"get-env","arguments":{"name":"HOME"}}}'), jid=1)
case("response-method-then-result", TOOL, ("rpc", "deny"), body=b('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-env","arguments":{"name":"HOME"}},"result":{}}'), jid=1)
case("response-error-and-method", TOOL, ("rpc", "deny"), body=b('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"method":"tools/call","params":{"name":"get-env"}}'), jid=1)
case("jsonrpc-1.0", TOOL, ("rpc", "deny"), body=b(env_call(top="").replace('"2.0"', '"1.0"')), jid=1)
case("jsonrpc-missing", TOOL, ("rpc", "deny"), body=b(env_call().replace('"jsonrpc":"2.0",', "")), jid=1)
deny_case("two-objects", TOOL, GET_SUM + GET_ENV)
deny_case("ndjson", TOOL, GET_SUM + "\n" + GET_ENV)
deny_case("trailing-garbage", TOOL, GET_SUM + " x")
deny_case("bom", TOOL, b"\xef\xbb\xbf" + b(GET_ENV))
deny_case("comment", TOOL, GET_SUM[:-1] + '/*,"params":{"name":"get-env"}*/}')
deny_case("single-quotes", TOOL, GET_ENV.replace('"', "'"))
deny_case("trailing-comma", TOOL, GET_ENV[:-1] + ",}")

# ---- giant keys and deep arguments (within the 4096 limit)
rpc_case("giant-key", TOOL, call('"echo"', "31", extra=',"' + "k" * 3500 + '":1'), jid=31)
rpc_case("giant-key-before-name", TOOL, '{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"' + "n" * 3500 + '":1,"name":"echo"}}', jid=32)
rpc_case("deep-arguments-64", TOOL, call('"echo"', "33", args="[" * 62 + "]" * 62), jid=33)
deny_case("deep-arguments-65-then-name", TOOL, '{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"arguments":' + "[" * 63 + "]" * 63 + ',"name":"get-sum"}}')
rpc_case("deep-arguments-then-name", TOOL, '{"jsonrpc":"2.0","id":35,"method":"tools/call","params":{"arguments":' + "[" * 62 + "]" * 62 + ',"name":"echo"}}', jid=35)


# ---- body limit (4096 bytes): at the limit the body is read and decided; one byte over is 413
def sized(name: str, size: int, id: int) -> bytes:
    head = '{"jsonrpc":"2.0","id":' + str(id) + ',"method":"tools/call","params":{"name":"' + name + '","arguments":{"a":1,"b":2},"pad":"'
    tail = '"}}'
    body = head + "x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    return b(body)


case("limit-at-denied-tool", LIMIT, "rpc", body=sized("get-env", MAX_BODY, 41), jid=41)
case("limit-plus-one-allowed-tool", LIMIT, "413", body=sized("get-sum", MAX_BODY + 1, 42))
case("limit-plus-one-chunked", LIMIT, "413", via="raw",
     raw=raw_post(chunk(*[sized("get-sum", MAX_BODY + 1, 43)[i:i + 1000] for i in range(0, MAX_BODY + 1, 1000)]), te=True))

# ---- content type and content encoding
for i, ct in enumerate(["application/json-rpc", "text/json", "application/jsonx", "text/plain", "application/x-www-form-urlencoded", None]):
    deny_case(f"content-type-{i}", TOOL, GET_ENV, ct=ct)
deny_case("content-type-utf16", TOOL, GET_ENV.encode("utf-16"), ct="application/json;charset=utf-16")
deny_case("content-type-utf16le-no-bom", TOOL, GET_ENV.encode("utf-16-le"), ct="application/json; charset=utf-16le")
deny_case("content-encoding-gzip", TOOL, gzip.compress(b(GET_ENV)), headers=[("content-encoding", "gzip")])
deny_case("content-encoding-identity-gzip", TOOL, gzip.compress(b(GET_ENV)), headers=[("content-encoding", "identity, gzip")])
deny_case("content-encoding-IDENTITY-space-gzip-body", TOOL, gzip.compress(b(GET_ENV)), headers=[("content-encoding", "IDENTITY ")])
rpc_case("content-encoding-IDENTITY-space", TOOL, env_call("51"), jid=51, headers=[("content-encoding", "IDENTITY ")])
deny_case("content-encoding-two-headers", TOOL, gzip.compress(b(GET_ENV)),
          headers=[("content-encoding", "identity"), ("content-encoding", "gzip")])
deny_case("content-encoding-deflate-get-sum", TOOL, b(GET_SUM), headers=[("content-encoding", "deflate")])

# ---- header/body disagreement (servers that dispatch on Mcp-Method/Mcp-Name)
case("mcp-name-header-differs", HDR, "mismatch", body=b(GET_SUM), headers=[("mcp-method", "tools/call"), ("mcp-name", "get-env")])
case("mcp-method-header-differs", HDR, "mismatch", body=b(GET_SUM), headers=[("mcp-method", "tools/list")])
case("mcp-name-header-case", HDR, "mismatch", body=b(GET_SUM), headers=[("mcp-name", "GET-ENV")])
case("mcp-name-header-base64", HDR, "mismatch", body=b(GET_SUM), headers=[("mcp-name", "=?base64?Z2V0LWVudg==?=")])
# Two Mcp-Name (Mcp-Method) fields: only the first is compared with the body; the upstream receives both
# ("get-sum, get-env"), so a server that dispatches on the header's last value runs get-env.
case("mcp-name-header-twice", HDR, ("mismatch", 400), body=b(GET_SUM), headers=[("mcp-name", "get-sum"), ("mcp-name", "get-env")])
case("mcp-method-header-twice", HDR, ("mismatch", 400), body=b(GET_SUM),
     headers=[("mcp-method", "tools/call"), ("mcp-method", "tools/list")])
case("mcp-name-header-twice-same", HDR, ("mismatch", 400), body=b(GET_SUM), headers=[("mcp-name", "get-sum"), ("mcp-name", "get-sum")])
case("mcp-name-header-one-joined-field", HDR, "mismatch", body=b(GET_SUM), headers=[("mcp-name", "get-sum, get-env")])
case("mcp-name-header-twice-denied-first", HDR, ("mismatch", 400), body=b(GET_SUM),
     headers=[("mcp-name", "get-env"), ("mcp-name", "get-sum")])
case("mcp-name-header-on-batch", HDR, ("mismatch", "deny"), body=b("[" + GET_SUM + "," + call('"get-sum"', "2") + "]"),
     headers=[("mcp-name", "get-env")])

# ---- chunked HTTP/1.1 bodies split inside keys and escapes (raw socket)
env_b = b(GET_ENV)
case("chunked-split-in-key", TOOL, "rpc", jid=1, via="raw",
     raw=raw_post(chunk(*[env_b[:env_b.index(b'"name"') + 3], env_b[env_b.index(b'"name"') + 3:]]), te=True))
esc = b('{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{"name":"get-\\u0065nv","arguments":{"name":"HOME"}}}')
case("chunked-split-in-escape", TOOL, "rpc", jid=61, via="raw",
     raw=raw_post(chunk(esc[:esc.index(b"\\u00") + 4], esc[esc.index(b"\\u00") + 4:]), te=True))
case("chunked-split-after-backslash", TOOL, "rpc", jid=61, via="raw",
     raw=raw_post(chunk(esc[:esc.index(b"\\u00") + 1], esc[esc.index(b"\\u00") + 1:]), te=True))
case("chunked-one-byte-chunks", TOOL, "rpc", jid=61, via="raw", raw=raw_post(chunk(*[esc[i:i + 1] for i in range(len(esc))]), te=True))
case("chunked-extensions", TOOL, "rpc", jid=1, via="raw", raw=raw_post(chunk(env_b[:20], env_b[20:], ext=";a=b"), te=True))
case("chunked-trailer-mcp-name", HDR, ("rpc", 400), jid=1, via="raw",
     raw=raw_post(chunk(env_b)[:-2] + b"Mcp-Name: get-sum\r\n\r\n", te=True))
case("chunked-and-content-length", TOOL, (400,), via="raw",
     raw=raw_post(chunk(b(GET_SUM)) + b(GET_ENV), te=True, headers=[f"Content-Length: {len(chunk(b(GET_SUM)))}"]))
case("te-chunked-identity", TOOL, (400, 501), via="raw",
     raw=raw_post(b"", headers=["Transfer-Encoding: chunked, identity"]) + chunk(env_b))
case("pipelined-allowed-then-denied", TOOL, "rpc", jid=1, via="raw", exec_ok=1, responses=2,
     raw=raw_post(b(call('"get-sum"', '"ctl"')), headers=["X-Probe: ctl"]).replace(b"Connection: close\r\n", b"")
     + raw_post(env_b))
case("http10-no-length", TOOL, (400, 411, 426, "rpc", "deny"), via="raw", jid=1,
     raw=raw_post(b"", version="HTTP/1.0") + env_b)
case("obs-fold-mcp-name", HDR, ("mismatch", 400), via="raw",
     raw=raw_post(b(GET_SUM), headers=["Mcp-Name: get-sum", " get-env"]))

# ---- HTTP/2 (h2c, nghttp)
case("h2-denied-tool", TOOL, "rpc", via="h2", body=b(env_call("71")), jid=71)
case("h2-batch-smuggle", BATCH, "deny", via="h2", body=b("[" + GET_SUM + "," + env_call("2") + "]"))
case("h2-mcp-name-mismatch", HDR, "mismatch", via="h2", body=b(GET_SUM), headers=[("mcp-name", "get-env")])
case("h2-case-folded-key", KEYS, "deny", via="h2", body=b('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","Name":"get-env"}}'))
case("h2-trailer-denied-tool", TOOL, "rpc", via="h2", body=b(env_call("72")), jid=72, trailer="x-end: 1")
case("h2-over-limit", LIMIT, "413", via="h2", body=sized("get-sum", MAX_BODY + 1, 73))
case("h2-gzip", TOOL, "deny", via="h2", body=gzip.compress(b(GET_ENV)), headers=[("content-encoding", "gzip")])

# ---- path tricks against PathPrefix /mcp/public (the route is PathPrefix /mcp; the body is get-sum)
for i, p in enumerate(["/mcp/private", "/mcp/public/../private", "/mcp/public/%2e%2e/private", "/mcp/public/..%2Fprivate",
                       "/mcp/public%2F..%2Fprivate", "/mcp/public/..%5Cprivate", "/mcp/public/..\\private",
                       "/mcp/publicx", "/mcp/public;/../private", "/MCP/PUBLIC/x", "/mcp/../admin", "//mcp/private",
                       "/mcp/public/../../mcp/private", "/mcp/./private", "/mcp/%70ublic/x%2F..%2F..%2Fprivate"]):
    # 307: Envoy redirects to the unescaped path (escaped slashes / backslashes), nothing goes upstream.
    case(f"path-{i:02d}", PATH, ("rpc", 307, 400, 404), listener="path", via="raw", jid=1, target=p,
         raw=raw_post(b(GET_SUM), path=p))
case("path-absolute-form", PATH, ("rpc", 400, 404), listener="path", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), path="http://gw/mcp/private").replace(b"POST http://gw/mcp/private?", b"POST http://gw/mcp/private?"))
case("path-h2-dot-segments", PATH, ("rpc", 400, 404), listener="path", via="h2", body=b(GET_SUM), jid=1,
     path="/mcp/public/%2e%2e/private")
case("path-tomcat-dotdot-semicolon", PATH, ("rpc", 307, 400, 404), listener="path", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), path="/mcp/public/..;/private"))
case("path-nul", PATH, ("rpc", 400, 404), listener="path", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), path="/mcp/public/%00/../../private"))
case("path-fragment", PATH, ("rpc", 400, 404), listener="path", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), path="/mcp/private#/mcp/public/"))

# ---- host tricks against hosts [api.example.com] (the body is get-sum)
for i, h in enumerate(["evil.example.com", "api.example.com.evil.com", "api.example.co", "api-example.com",
                       "api.example.com.", "api.example.com..", ".api.example.com", "API.EXAMPLE.COM.evil",
                       "evil.com:80@api.example.com", "api.example.com@evil.com", "xn--pi-7ka.example.com",
                       "\u0430pi.example.com", "api.example.com:80:80", "api.example.com\tevil",
                       "api.example.com%2eevil.com"]):
    case(f"host-{i:02d}", HOST, ("rpc", 400), listener="host", via="raw", jid=1, target=h,
         raw=raw_post(b(GET_SUM), host=h))
case("host-two-headers", HOST, ("rpc", 400), listener="host", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), host="evil.com", headers=["Host: api.example.com"]))
case("host-absolute-form-wins", HOST, ("rpc", 400), listener="host", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), path="http://evil.com/mcp", host="api.example.com"))
case("host-h2-authority-vs-host", HOST, ("rpc", 400), listener="host", via="h2", jid=1, body=b(GET_SUM),
     authority="evil.com", headers=[("host", "api.example.com")])
case("host-x-forwarded-host", HOST, "rpc", listener="host", via="raw", jid=1,
     raw=raw_post(b(GET_SUM), host="evil.com", headers=["X-Forwarded-Host: api.example.com"]))

# ---- the base protocol's GET (stream) and DELETE (session end) carrying a tools/call body: a server that
# read the body whatever the HTTP method would run it. Not read, so not the base protocol: denied.
deny_case("get-with-body", TOOL, GET_ENV, method="GET")
deny_case("delete-with-body", TOOL, GET_ENV, method="DELETE", headers=[("mcp-session-id", "s1")])
deny_case("get-with-body-h2", TOOL, GET_ENV, method="GET", via="h2")

# Positive controls (not hostile): the rules do allow what they name, so every refusal above means something.
CONTROLS: list[dict] = [
    dict(id="ctl-sum", listener="sum", via="http", body=b(GET_SUM)),
    dict(id="ctl-sum-at-limit", listener="sum", via="http", body=sized("get-sum", MAX_BODY, 81)),
    dict(id="ctl-sum-chunked-split", listener="sum", via="raw", raw=raw_post(chunk(b(GET_SUM)[:30], b(GET_SUM)[30:]), te=True)),
    dict(id="ctl-sum-h2", listener="sum", via="h2", body=b(GET_SUM)),
    dict(id="ctl-path", listener="path", via="raw", raw=raw_post(b(GET_ENV), path="/mcp/public/x")),
    dict(id="ctl-host", listener="host", via="raw", raw=raw_post(b(GET_ENV), host="api.example.com")),
    dict(id="ctl-host-port", listener="host", via="raw", raw=raw_post(b(GET_ENV), host="api.example.com:8080")),
]
