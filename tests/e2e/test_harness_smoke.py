"""Proves the e2e harness itself: Envoy from .venv starts with a trivial static config and answers,
over plain HTTP and over mTLS with the test PKI; the sample MCP server starts and logs executions."""

from __future__ import annotations

import harness
from harness import client_cert, free_port, request

CONFIG = """\
static_resources:
  listeners:
  - name: plain
    address: {{socket_address: {{address: 127.0.0.1, port_value: {http_port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: plain
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {access_log}
              log_format: {{text_format_source: {{inline_string: "%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE%\\n"}}}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "smoke ok"}}}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  - name: mtls
    address: {{socket_address: {{address: 127.0.0.1, port_value: {tls_port}}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{filename: {certs}/server.crt}}
              private_key: {{filename: {certs}/server.key}}
            validation_context:
              trusted_ca: {{filename: {certs}/ca.crt}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: mtls
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "mtls ok"}}}}
                response_headers_to_add:
                - header: {{key: x-peer-uri-san, value: "%DOWNSTREAM_PEER_URI_SAN%"}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"""


def write_config(tmp_path, certs):
    http_port, tls_port = free_port(), free_port()
    path = tmp_path / f"smoke-{http_port}.yaml"
    path.write_text(CONFIG.format(http_port=http_port, tls_port=tls_port, certs=certs,
                                  access_log=tmp_path / "access.log"))
    return path, http_port, tls_port


def test_envoy_answers(start_envoy, certs, tmp_path):
    config, http_port, tls_port = write_config(tmp_path, certs)
    envoy = start_envoy(config, listeners=[http_port, tls_port])

    r = request("GET", f"http://127.0.0.1:{http_port}/hello")
    assert (r.status, r.body) == (200, b"smoke ok")
    status, headers, body = request("POST", f"http://127.0.0.1:{http_port}/x", {"a": 1})
    assert status == 200 and headers["server"] == "envoy"

    # mTLS: agent-a gets through (and Envoy sees its SPIFFE ID); no certificate or another CA's: handshake refused.
    url = f"https://localhost:{tls_port}/"
    r = request("GET", url, ca=certs / "ca.crt", cert=client_cert(certs, "agent-a"))
    assert (r.status, r.text) == (200, "mtls ok")
    assert r.headers["x-peer-uri-san"] == "spiffe://cluster.local/ns/default/sa/a"
    assert harness.handshake_rejected(url, ca=certs / "ca.crt")
    assert harness.handshake_rejected(url, ca=certs / "ca.crt", cert=client_cert(certs, "other-agent-a"))

    # Admin helpers and the quickly flushed access log.
    assert envoy.stat("http.plain.downstream_rq_2xx") == 2
    harness.wait_for(lambda: len(harness.read_access_log(tmp_path / "access.log")) == 2, timeout=5,
                     what="access log lines")
    assert harness.read_access_log(tmp_path / "access.log") == ["GET /hello 200", "POST /x 200"]


def test_two_envoys_at_once(start_envoy, certs, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    c1, p1, t1 = write_config(tmp_path / "a", certs)
    c2, p2, t2 = write_config(tmp_path / "b", certs)
    e1 = start_envoy(c1, name="one", listeners=[p1, t1])
    e2 = start_envoy(c2, name="two", listeners=[p2, t2])
    assert e1.admin != e2.admin
    assert request("GET", f"http://127.0.0.1:{p1}/").status == 200
    assert request("GET", f"http://127.0.0.1:{p2}/").status == 200


def test_mcp_server_starts(start_mcp_server):
    # A missing server binary fails the test (start_mcp_server: pytest.fail), never skips it.
    srv = start_mcp_server("smoke")
    r = harness.call_tool(srv.url + "/mcp", "get-sum", {"a": 1, "b": 2})
    assert r.status == 200, r.text
    harness.wait_for(lambda: srv.executed(), timeout=5, what="execution log entry")
    entry = srv.executed()[-1]
    assert entry["server"] == "smoke" and entry["jsonrpc_method"] == "tools/call"
