#!/usr/bin/env python3
"""Writes the checked-in seed corpora (fuzz/corpus/<target>/): bodies of the kinds the reader's tests
and the bypass corpus use, and plans (fuzz/plans, refused ones). Run after changing the lists; file
names are content hashes, so re-running adds nothing twice. Not plan_structured's: its inputs are
choices, not text; its 32 seeds are the largest inputs of a -set_cover_merge of a 7-minute run
(5,625 of that run's 7,042 coverage edges)."""
import hashlib
import pathlib

HERE = pathlib.Path(__file__).parent
ATTRIBUTE_BYTES = 32  # fuzz/src/lib.rs
CONTROL_BYTES = 64    # fuzz_targets/lifecycle.rs and module_hooks.rs

BODIES = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}',
    b'{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi \\u00e9\\ud83d\\ude00"}}}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///public/readme"}}',
    b'{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"greet","arguments":{}}}',
    b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]',
    b'{"jsonrpc":"2.0","id":5,"result":{}}',
    b'{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///public/readme","file:///x"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}',
    b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get-sum","Name":"get-env"}}',
    b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get-sum","name":"get-env"}}',
    b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"n\\u0061me":"get-sum","arguments":{"deep":[[[[[[1]]]]]]}}}',
    b'{"jsonrpc":"2.0","id":1.5e3,"method":"tools/call","params":{"name":"get-\\u0073um"}}',
    b' \t\r\n{"method":"tools/call","params":{"name":"get-sum","arguments":null},"id":null,"jsonrpc":"2.0"} ',
    b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":["get-sum"]}',
    b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":7}}',
    b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"\\u017fame":"x","name":"get-sum"}}',
    b'[]',
    b'{"jsonrpc":"2.0","id":14,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
]

PLANS = sorted((HERE / "plans").glob("*.json"))  # demo.json: `toolgate compile` of envoy-configs/demo
PLAN_EXTRA = [
    b'{"version":1,"listener":"l","gateway":{}}',
    # A regex RE2 rejects; a body limit out of range (both refused).
    b'{"version":1,"listener":"l","gateway":{"allow":[{"name":"default/p","rules":[{"name":"r","http":{"paths":[{"regex":"a)|(b"}]}}]}]}}',
    b'{"version":1,"listener":"l","settings":{"maxBodyBytes":0},"gateway":{}}',
    # Istio hands integers as doubles.
    (HERE / "plans" / "demo.json").read_bytes().replace(b'"maxBodyBytes": 1048576', b'"maxBodyBytes": 1.048576e+06'),
]


def write(target, data):
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


for body in BODIES:
    write("mcp_reader", body)
    write("request_eval", bytes(ATTRIBUTE_BYTES) + body)
for body in BODIES[:8]:
    write("lifecycle", bytes(CONTROL_BYTES) + bytes(ATTRIBUTE_BYTES) + body)
    # The ExternalAuth plan (first control byte odd), one call answered.
    write("lifecycle", b"\x01" + bytes(CONTROL_BYTES - 1) + bytes(ATTRIBUTE_BYTES) + body)
for plan in PLANS:
    write("plan_load", plan.read_bytes())
for plan in PLAN_EXTRA:
    write("plan_load", plan)


def module_control(mode):
    """module_hooks's control bytes: the configuration (0 realistic, 1 ExternalAuth, 2 the input's
    bytes), one body chunk, no trailers, no debug, callouts started, the response delivered."""
    return bytes([mode, 0, 0, 0, 1, 1]) + bytes(CONTROL_BYTES - 6)


for body in BODIES[:8]:
    write("module_hooks", module_control(0) + bytes(ATTRIBUTE_BYTES) + body)
    write("module_hooks", module_control(1) + bytes(ATTRIBUTE_BYTES) + body)
for plan in PLANS:
    write("module_hooks", module_control(2) + plan.read_bytes())
for plan in PLAN_EXTRA:
    write("module_hooks", module_control(2) + plan)
