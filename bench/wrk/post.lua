-- wrk script for `make bench`: POSTs one fixed MCP body (file BENCH_BODY) with the MCP headers,
-- and prints a machine-readable summary line (BENCH_JSON {...}) at the end of the run.
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
local body = f:read("*a")
f:close()

wrk.method = "POST"
wrk.body = body
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-method"] = "tools/call"
wrk.headers["mcp-name"] = os.getenv("BENCH_TOOL")

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
