"""The fixture of tests/k8s (the pieces are in k8s_stack.py): a test API server per test module
(tests/k8s/kube-apiserver.sh: the CRDs and deploy/rbac.yaml installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from k8s_stack import KUBECTL, ApiServer  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} missing: run `bash tests/istio/gobuild.sh ensure` (tests/k8s/run.sh does)")
    server = ApiServer(tmp_path_factory.mktemp("kube"))
    try:
        yield server
    finally:
        server.stop()
