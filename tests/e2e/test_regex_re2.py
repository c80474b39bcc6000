"""Policy regular expressions are RE2, exactly (docs/semantics.md §3): differential test against RE2 as Envoy
embeds it, and the ASCII meaning of \\d through the filter in a real Envoy.

The differential test runs `envoy --mode validate` once per expression of tests/regex/expressions.txt
(a route with `safe_regex`: Envoy compiles it with RE2 and refuses the configuration when RE2 does)
and `toolgate validate` once over one policy per expression, and asserts both accept exactly the same
expressions, except the entries the file marks `stricter:` (Toolgate rejects, RE2 accepts)."""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import harness
from harness import assert_allowed, assert_denied, policy, rule, tools_call_rule

EXPRESSIONS = harness.REPO / "tests/regex/expressions.txt"


def load_expressions() -> list[tuple[str, str]]:
    """(expression, annotation: "", "stricter" or "latin1"), in file order."""
    out = []
    for line in EXPRESSIONS.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        expr, _, note = line.partition("\t")
        kind = note.split(":", 1)[0]
        assert kind in ("", "stricter", "latin1") and (not kind or note[len(kind) + 1:].strip()), \
            f"bad annotation on {line!r}"
        out.append((expr, kind))
    return out


def envoy_config(expr: str) -> dict:
    return {
        # Envoy refuses RE2 programs above re2.max_program_size.error_level (100 by default): raise it
        # so that only RE2's syntax decides, which is what the comparison is about.
        "layered_runtime": {"layers": [{"name": "static", "static_layer": {
            "re2.max_program_size.error_level": 100_000_000}}]},
        "static_resources": {"listeners": [{
            "name": "l",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "s",
                    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                    "route_config": {"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{
                        "match": {"safe_regex": {"regex": expr}}, "direct_response": {"status": 200}}]}]},
                }}]}],
        }]},
    }


def re2_verdict(envoy: Path, workdir: Path, i: int, expr: str) -> tuple[bool, str]:
    """(RE2 accepts, Envoy's error line)."""
    config = workdir / f"envoy-{i}.json"
    config.write_text(json.dumps(envoy_config(expr), ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run([str(envoy), "--mode", "validate", "-c", str(config), "-l", "critical"],
                          capture_output=True, text=True, timeout=60)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "error initializing configuration" in ln]
    if proc.returncode != 0:
        assert lines, f"Envoy failed on {expr!r} without a configuration error:\n{proc.stdout}{proc.stderr}"
    return proc.returncode == 0, lines[-1].split(".json': ", 1)[-1] if lines else ""


def toolgate_verdicts(workdir: Path, exprs: list[str]) -> dict[int, str]:
    """Index -> Toolgate's error for every expression `toolgate validate` rejects."""
    policies = [policy(f"re-{i}", rule("r", headers=[{"name": "x-re", "type": "RegularExpression", "value": e}]))
                for i, e in enumerate(exprs)]
    path = workdir / "policies.yaml"
    path.write_text(harness.to_yaml(*[json.dumps(p, ensure_ascii=False) for p in policies]), encoding="utf-8")
    proc = harness.run_toolgate("validate", "-f", path)
    assert proc.returncode in (0, 1), proc.stderr
    rejected = {}
    for line in proc.stdout.splitlines():
        m = re.search(r" XAccessPolicy default/re-(\d+): (.*)$", line)
        if m and not line.startswith("warning: "):
            rejected[int(m.group(1))] = m.group(2)
    return rejected


def test_validator_accepts_exactly_what_re2_accepts(tmp_path):
    entries = load_expressions()
    assert len(entries) >= 80
    exprs = [e for e, _ in entries]
    envoy = harness.envoy_binary()
    with ThreadPoolExecutor(2) as pool:
        re2 = list(pool.map(lambda a: re2_verdict(envoy, tmp_path, *a), enumerate(exprs)))
    ours = toolgate_verdicts(tmp_path, exprs)
    wrong = []
    for i, (expr, kind) in enumerate(entries):
        re2_ok, re2_err = re2[i]
        our_ok = i not in ours
        if kind:
            if (kind == "stricter" and not (re2_ok and not our_ok)) or (kind == "latin1" and re2_ok == our_ok):
                wrong.append(f"{expr!r} is marked {kind} but RE2 {'accepts' if re2_ok else 'rejects: ' + re2_err}"
                             f" and Toolgate {'accepts' if our_ok else 'rejects'}")
        elif re2_ok != our_ok:
            wrong.append(f"{expr!r}: RE2 {'accepts' if re2_ok else 'rejects: ' + re2_err}, Toolgate "
                         f"{'accepts' if our_ok else 'rejects: ' + ours[i]}")
        if not our_ok:
            assert "invalid regular expression " in ours[i], ours[i]
    assert not wrong, "RE2 and Toolgate disagree:\n" + "\n".join(wrong)


HTTP = {"http": "HTTP"}


def test_perl_classes_are_ascii_through_the_filter(gateway):
    gw = gateway(policy("m", rule("team", headers=[{"name": "x-team", "type": "RegularExpression", "value": r"\d+"}]),
                        rule("name", headers=[{"name": "x-name", "type": "RegularExpression", "value": r"[\w]+"}])),
                 listeners=HTTP)
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("echo", headers={"x-team": "42"}, **ok))
    # Arabic-Indic and fullwidth digits are \d in Unicode, not in RE2. http.client sends header values
    # as latin-1: hand it the UTF-8 bytes that way (Envoy forwards obs-text, the filter reads UTF-8).
    for digits in ("٣٣", "１２"):
        assert_denied(gw.call("echo", headers={"x-team": utf8(digits)}, **ok))
    assert_allowed(gw.call("echo", headers={"x-name": "t_42"}, **ok))
    assert_denied(gw.call("echo", headers={"x-name": utf8("été")}, **ok))  # é is \w in Unicode, not in RE2
    assert_allowed(gw.call("echo", headers={"x-team": "7"}, **ok))  # the VM is still there


def utf8(text: str) -> str:
    return text.encode("utf-8").decode("latin-1")


def test_unbalanced_regex_is_refused_by_render(gateway):
    bad = policy("bad", rule("team", headers=[{"name": "x-team", "type": "RegularExpression", "value": "a)|(b"}]))
    gw = gateway(bad, policy("good", tools_call_rule("sum", ["get-sum"])), listeners=HTTP, strict=False)
    err = gw.last_render.stderr
    assert 'invalid regular expression "a)|(b": unopened group' in err, err
    # The invalid policy opens nothing (before, ^(?:a)|(b)$ allowed any value starting with a).
    ok = dict(listener="http", agent=None)
    assert_allowed(gw.call("get-sum", **ok))
    assert_denied(gw.call("echo", headers={"x-team": "a-anything"}, **ok))
    assert_denied(gw.call("echo", headers={"x-team": "a"}, **ok))
    r = gw.render(check=False, extra_args=["--strict"])
    assert r.returncode == 1, r
    assert 'invalid regular expression "a)|(b": unopened group' in r.stdout + r.stderr, r
