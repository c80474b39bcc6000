"""The e2e fixtures (tests/e2e/conftest.py) for the API-server tests."""
import importlib.util
import sys
from pathlib import Path

E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E))
_spec = importlib.util.spec_from_file_location("e2e_conftest", E2E / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)

certs = _e2e.certs
start_envoy = _e2e.start_envoy
start_mcp_server = _e2e.start_mcp_server
wasm_path = _e2e.wasm_path
pytest_runtest_makereport = _e2e.pytest_runtest_makereport
