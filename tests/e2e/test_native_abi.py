"""The dynamic module's ABI against the pinned Envoy binary (module/, `make module`).

module/src/abi.rs declares by hand the Envoy callbacks the module calls (no SDK, no bindgen), and
module/src/exports.rs exports the event hooks. Checked here, from the binaries' symbol tables:

- every callback declared in abi.rs is a function the pinned Envoy exports (a renamed or removed
  callback fails here instead of at dlopen time in Envoy);
- every Envoy symbol the built .so needs is declared in abi.rs and exported by Envoy (nothing calls a
  callback that was not reviewed);
- the .so exports every `envoy_dynamic_module_on_*` hook of the HTTP filter Envoy looks up (their names
  are the strings in Envoy's binary: the ones it resolves with dlsym), and nothing else of that prefix;
- the ABI version the module reports is the one this Envoy was built with.

Only names are checked: the parameter and result types were transcribed from Envoy's abi.h and are
exercised end to end by the e2e tests on the native host (pytest --host native).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import harness

ABI_RS = harness.REPO / "module/src/abi.rs"

pytestmark = pytest.mark.host("native", reason="the dynamic module's symbols")


def _symbols(binary: Path, *flags: str) -> dict[str, str]:
    """name -> nm type letter of a binary's dynamic symbols."""
    out = subprocess.run(["nm", "-D", *flags, str(binary)], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            symbols[parts[-1].split("@")[0]] = parts[-2]
    return symbols


def _strings(binary: Path, pattern: str, min_length: int = 6) -> set[str]:
    out = subprocess.run(["strings", "-n", str(min_length), str(binary)], check=True, capture_output=True, text=True).stdout
    rx = re.compile(pattern)
    return {s for s in out.splitlines() if rx.fullmatch(s)}


@pytest.fixture(scope="module")
def envoy() -> Path:
    return harness.envoy_binary()


@pytest.fixture(scope="module")
def module_so() -> Path:
    p = harness.native_module_path()
    if not p.exists():
        pytest.fail(f"{p} not built (make module)")
    return p


def declared_callbacks() -> set[str]:
    text = ABI_RS.read_text()
    block = text[text.index('extern "C" {'):]
    return set(re.findall(r"\bpub fn (envoy_dynamic_module_callback_\w+)\s*\(", block))


def test_declared_callbacks_are_envoy_exports(envoy):
    declared = declared_callbacks()
    assert len(declared) >= 20, declared
    exported = _symbols(envoy, "--defined-only")
    missing = sorted(name for name in declared if exported.get(name) not in ("T", "t", "W"))
    assert not missing, f"declared in module/src/abi.rs, not exported (as functions) by {envoy}: {missing}"


def test_module_needs_only_declared_envoy_symbols(envoy, module_so):
    needed = {name for name in _symbols(module_so, "--undefined-only") if name.startswith("envoy_")}
    assert needed, "the module calls no Envoy callback?"
    assert needed <= declared_callbacks(), f"undeclared: {sorted(needed - declared_callbacks())}"
    exported = _symbols(envoy, "--defined-only")
    assert not sorted(n for n in needed if n not in exported)


def test_module_exports_every_hook_envoy_resolves(envoy, module_so):
    # The names of the HTTP filter's hooks (and program init), as they appear in Envoy's binary.
    wanted = _strings(envoy, r"envoy_dynamic_module_on_(program_init|http_filter_\w+)")
    assert "envoy_dynamic_module_on_program_init" in wanted
    assert "envoy_dynamic_module_on_http_filter_request_headers" in wanted
    exported = {n for n, t in _symbols(module_so, "--defined-only").items()
                if n.startswith("envoy_dynamic_module_on_") and t == "T"}
    assert not sorted(wanted - exported), f"hooks Envoy looks up that the module lacks: {sorted(wanted - exported)}"
    assert not sorted(exported - wanted), f"hooks exported that this Envoy never looks up: {sorted(exported - wanted)}"


def test_abi_version_matches_envoy(envoy):
    version = re.search(r'ABI_VERSION: &std::ffi::CStr = c"(v[0-9.]+)"', ABI_RS.read_text())
    assert version, "ABI_VERSION not found in module/src/abi.rs"
    versions = _strings(envoy, r"v0\.[0-9]+\.[0-9]+")
    assert version.group(1) in versions, (version.group(1), versions)
