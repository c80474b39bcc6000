// Runs a wasm32-wasip1 program under Node's WASI (node:wasi, preview1): the cargo runner for the
// engine's tests compiled to Wasm (`make test-wasm`):
//   CARGO_TARGET_WASM32_WASIP1_RUNNER="node --no-warnings scripts/wasi-run.mjs" cargo test --target wasm32-wasip1
// The program gets its arguments (the test harness's filters and flags), the environment, and no
// file system. Its exit code is this process's exit code.
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import { argv, env, exit } from "node:process";

const [program, ...args] = argv.slice(2);
if (!program) {
  console.error("usage: wasi-run.mjs PROGRAM.wasm [ARGS...]");
  exit(2);
}
const wasi = new WASI({ version: "preview1", args: [program, ...args], env, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(program));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
exit(wasi.start(instance) ?? 0);
