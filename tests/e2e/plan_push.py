"""Plans pushed into a running gateway's configuration, shared by test_plan_updates.py (both hosts) and
test_native_module.py (the dynamic module): plans the filter must refuse, the decisions that must hold
meanwhile, and the good render that must apply afterwards (docs/semantics.md §6)."""

from __future__ import annotations

import json

from harness import assert_allowed, assert_denied, policy, sa, toolgate_plans, tools_call_rule, wait_for, write_json

BOTH = {"https": "HTTPS", "http": "HTTP"}


def push_plan(gw, make_plan, base: str | None = None) -> None:
    """Replace the plan of every listener in the running configuration (lds.json, atomically) with
    `make_plan(plan)`, `plan` being the one in `base` (an lds.json text; default the current file)."""
    path = gw.dir / "lds.json"
    lds = json.loads(base if base is not None else path.read_text())
    for conf in toolgate_plans(lds):
        conf["value"] = make_plan(json.loads(conf["value"]))
    lds["version_info"] = f"pushed-{id(make_plan)}"
    write_json(path, lds)


def unknown_version(plan):
    return json.dumps({"version": 99})


def bad_regex(plan):
    """A plan that would open everything but carries an invalid regular expression (no hash: content
    changed)."""
    plan["hash"] = ""
    plan["gateway"]["allow"].insert(0, {"name": "default/evil", "rules": [
        {"name": "open", "http": {"headers": [{"name": "x-any", "regex": "("}]}},
        {"name": "open2"}]})
    return json.dumps(plan)


def tampered(plan):
    """Content that does not match the plan's hash."""
    plan["gateway"]["allow"] = []
    return json.dumps(plan)


def old_decisions_hold(gw):
    """The decisions of the plan `p` allowing agent a get-sum, on BOTH listeners."""
    assert_allowed(gw.call("get-sum"))
    assert_denied(gw.call("echo"))
    assert_denied(gw.call("get-sum", agent="agent-b"))
    assert_denied(gw.call("get-sum", listener="http", agent=None))
    assert_denied(gw.send("GET"), id=None)


def a_good_render_applies(gw, pid: int):
    """A good render after refused plans applies normally, in the same Envoy (process `pid`)."""
    gw.rerender([policy("p", tools_call_rule("a-sum", ["get-sum", "echo"], source=sa("a")))])
    wait_for(lambda: gw.call("echo").executed, timeout=10, interval=0.1, what="the new good plan")
    assert_allowed(gw.call("echo"))
    assert_denied(gw.call("echo", agent="agent-b"))
    assert gw.envoy.proc.pid == pid
