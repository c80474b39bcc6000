"""docs/security.md's "Envoy's MCP filter + RBAC against the bypass corpus" table is the one
scripts/bypass-reference.py renders from docs/bypass-reference.json (its run takes about two minutes:
rerun the script after changing the corpus, bench/mcp_rbac.py or Envoy), and that JSON covers the
corpus as it is now."""

import importlib.util
import json

import harness
from corpus import CASES, CONTROLS


def _script():
    spec = importlib.util.spec_from_file_location("bypass_reference", harness.REPO / "scripts" / "bypass-reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_security_doc_table_is_generated_from_the_json():
    assert _script().doc_is_current(), "run: .venv/bin/python scripts/bypass-reference.py --doc-only"


def test_the_json_covers_the_current_corpus():
    data = json.loads((harness.REPO / "docs" / "bypass-reference.json").read_text())
    for key, run in data["runs"].items():
        assert [c["id"] for c in run["cases"]] == [c["id"] for c in CASES], f"{key}: rerun scripts/bypass-reference.py"
        assert [c["id"] for c in run["controls"]] == [c["id"] for c in CONTROLS], key
