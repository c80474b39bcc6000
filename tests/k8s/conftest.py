"""The fixture of tests/k8s (the pieces are in k8s_stack.py): a test API server per test module."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from k8s_stack import KUBECTL, REPO, ApiServer  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} missing: run `bash tests/k8s/apiserver.sh ensure` (make test-k8s does)")
    server = ApiServer(tmp_path_factory.mktemp("kcas"))
    try:
        server.kubectl("apply", "--server-side", "-f", str(REPO / "crds"), "-f",
                       str(REPO / "tests/k8s/thirdparty-crds/gateway-api-v1.6.1"), "-f",
                       str(REPO / "tests/k8s/thirdparty-crds/istio"))
        server.kubectl("wait", "--for=condition=Established", "--timeout=60s", "--all", "crd")
        yield server
    finally:
        server.stop()
