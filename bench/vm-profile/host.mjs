// A development tool, not a test: runs toolgate_filter.wasm in Node's V8 (TurboFan only, as Envoy's
// proxy-wasm host runs it) against a stub host that answers the filter's host calls like Envoy does
// for the benchmark's (c) request, and drives N requests through it. bench/vm-profile/profile.py
// runs it under callgrind to count the instructions spent in the filter's own code per request,
// function by function, which callgrind on Envoy cannot name (JIT code).
//
// A plan with a gateway-level gRPC ExternalAuth policy ((g1) of make bench) makes each request a
// callout: the call is answered OK at once (what toolgate-test-authz answers), the request resumed.
//
// usage: node --no-liftoff --single-threaded host.mjs FILTER.wasm PLAN.json BODY.json N
import fs from 'node:fs';

const [wasmPath, planPath, bodyPath, count] = process.argv.slice(2);
const plan = fs.readFileSync(planPath);
const body = fs.readFileSync(bodyPath);
const requests = Number(count);
const enc = new TextEncoder();
const dec = new TextDecoder();

// The request headers Envoy hands the filter for the benchmark's request (wrk's, plus Envoy's own).
const headers = [
  [':authority', '127.0.0.1:20443'], [':path', '/mcp'], [':method', 'POST'], [':scheme', 'https'],
  ['content-length', String(body.length)], ['content-type', 'application/json'],
  ['accept', 'application/json, text/event-stream'], ['mcp-method', 'tools/call'], ['mcp-name', 'tool-00017'],
  ['x-forwarded-proto', 'https'], ['x-request-id', '6c1b2f9e-2a55-4c1e-9a83-0d1f3c1e2b7a'],
];
const principal = enc.encode('spiffe://cluster.local/ns/default/sa/a');
const callout = JSON.parse(plan.toString()).gateway?.externalAuth?.authorizer?.protocol === 'grpc';
// CheckResponse { status: {} (OK), ok_response: {} }.
const checkOk = new Uint8Array([0x0a, 0x00, 0x1a, 0x00]);

/** proxy-wasm's serialised header map: count, (name length, value length)*, (name NUL value NUL)*. */
function serializeMap(pairs) {
  const parts = pairs.map(([k, v]) => [enc.encode(k), enc.encode(v)]);
  const size = parts.reduce((n, [k, v]) => n + k.length + v.length + 2, 4 + parts.length * 8);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, parts.length, true);
  let at = 4 + parts.length * 8;
  parts.forEach(([k, v], i) => {
    view.setUint32(4 + i * 8, k.length, true);
    view.setUint32(8 + i * 8, v.length, true);
    out.set(k, at); at += k.length + 1;
    out.set(v, at); at += v.length + 1;
  });
  return out;
}
const headerBlock = serializeMap(headers);

let exports;
const bytes = () => new Uint8Array(exports.memory.buffer);
const view = () => new DataView(exports.memory.buffer);
/** Hands `data` to the VM the way Envoy does: allocate in the VM, copy, write pointer and size. */
function give(data, retPtr, retSize) {
  const p = exports.proxy_on_memory_allocate(data.length);
  bytes().set(data, p);
  view().setUint32(retPtr, p, true);
  view().setUint32(retSize, data.length, true);
  return 0;
}
const OK = 0, NOT_FOUND = 1;
let decision = '';
let calls = 0, resumed = 0;
const env = {
  proxy_get_header_map_pairs: (type, retPtr, retSize) => give(headerBlock, retPtr, retSize),
  proxy_get_property: (pathPtr, pathSize, retPtr, retSize) => {
    const path = dec.decode(bytes().slice(pathPtr, pathPtr + pathSize));
    if (path === 'connection\0uri_san_peer_certificate') return give(principal, retPtr, retSize);
    if (path === 'plugin_name') return give(enc.encode('toolgate'), retPtr, retSize);
    if (path === 'request\0protocol') return give(enc.encode('HTTP/1.1'), retPtr, retSize);
    return NOT_FOUND;
  },
  proxy_get_buffer_bytes: (type, start, max, retPtr, retSize) => {
    if (type === 7) return give(plan, retPtr, retSize); // plugin configuration
    if (type === 0) return give(body.subarray(start, start + max), retPtr, retSize); // request body
    if (type === 5) return give(checkOk, retPtr, retSize); // gRPC call answer
    return NOT_FOUND;
  },
  proxy_set_property: (pathPtr, pathSize, valuePtr, valueSize) => {
    decision = dec.decode(bytes().slice(valuePtr, valuePtr + valueSize));
    return OK;
  },
  proxy_send_local_response: () => { decision = 'local response'; return OK; },
  proxy_define_metric: (type, namePtr, nameSize, retId) => { view().setUint32(retId, 1, true); return OK; },
  proxy_increment_metric: () => OK,
  proxy_get_current_time_nanoseconds: (retPtr) => { view().setBigUint64(retPtr, process.hrtime.bigint(), true); return OK; },
  proxy_log: (level, msgPtr, msgSize) => {
    if (level >= 3) console.error(dec.decode(bytes().slice(msgPtr, msgPtr + msgSize)));
    return OK;
  },
  proxy_get_log_level: (retPtr) => { view().setUint32(retPtr, 2, true); return OK; }, // info
  proxy_set_tick_period_milliseconds: () => OK,
  proxy_grpc_call: (...args) => { calls += 1; view().setUint32(args[11], calls, true); return OK; },
  proxy_set_effective_context: () => OK,
  proxy_continue_stream: () => { resumed += 1; return OK; },
  proxy_get_shared_data: () => NOT_FOUND,
  proxy_set_shared_data: () => OK,
};
const wasi = {
  random_get: (p, n) => { bytes().fill(4, p, p + n); return 0; },
  environ_sizes_get: (c, s) => { view().setUint32(c, 0, true); view().setUint32(s, 0, true); return 0; },
  environ_get: () => 0,
  clock_time_get: (id, precision, retPtr) => { view().setBigUint64(retPtr, process.hrtime.bigint(), true); return 0; },
  fd_write: () => 0,
  proc_exit: (code) => { throw new Error(`proc_exit(${code})`); },
};

const module = new WebAssembly.Module(fs.readFileSync(wasmPath));
const imports = { env: {}, wasi_snapshot_preview1: {} };
for (const imp of WebAssembly.Module.imports(module)) {
  const table = imp.module === 'env' ? env : wasi;
  imports[imp.module][imp.name] = table[imp.name] ?? (() => { throw new Error(`host call not stubbed: ${imp.name}`); });
}
exports = new WebAssembly.Instance(module, imports).exports;
exports._initialize?.();
exports.proxy_on_context_create(1, 0);
if (!exports.proxy_on_vm_start(1, 0) || !exports.proxy_on_configure(1, plan.length)) throw new Error('the plan did not load');

const CONTINUE = 0, PAUSE = 1;
// The upstream's answer as Envoy hands it to a module that has response callbacks (the list-filtering
// one; toolgate_filter_no_list_filtering.wasm has none): its headers, then its body in one piece.
function response(id) {
  if (!exports.proxy_on_response_headers) return true;
  return exports.proxy_on_response_headers(id, 3, 0) === CONTINUE && exports.proxy_on_response_body(id, 120, 1) === CONTINUE;
}
function request(id) {
  exports.proxy_on_context_create(id, 1);
  const onHeaders = exports.proxy_on_request_headers(id, headers.length, 0);
  const onBody = exports.proxy_on_request_body(id, body.length, 1);
  if (callout) {
    const [made, before] = [calls, resumed];
    exports.proxy_on_grpc_receive(1, calls, checkOk.length);
    const ok = onHeaders === PAUSE && onBody === PAUSE && calls === made && resumed === before + 1 && response(id);
    exports.proxy_on_delete(id);
    return ok;
  }
  const ok = onHeaders === CONTINUE && onBody === CONTINUE && response(id);
  exports.proxy_on_delete(id);
  return ok;
}
// Warm-up, so that the counted requests run compiled code; and a check that the request is allowed.
for (let i = 0; i < 200; i++) request(2 + i);
if (!request(300) || !decision.startsWith('allow')) throw new Error(`the request was not allowed: ${decision}`);
for (let i = 0; i < requests; i++) request(1000 + i);
console.log(JSON.stringify({ requests, decision }));
