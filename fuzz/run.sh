#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer on the stable toolchain and runs each for FUZZ_SECONDS.
#
#   fuzz/run.sh [TARGET...]          (default: every target; `make fuzz`, `make fuzz-ci`)
#
# No nightly, no cargo-fuzz: coverage instrumentation comes from stable `-C passes=sancov-module`
# and LLVM's sanitizer-coverage options (what cargo-fuzz passes with `-s none`), libFuzzer from the
# libfuzzer-sys crate (built from source with the machine's C++ compiler). No sanitizer runs, so
# the targets check memory themselves (fuzz/src/lib.rs counts the heap; -rss_limit_mb bounds RSS).
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 300)
#   FUZZ_CORPUS    where new inputs go (default .work/fuzz/corpus/<target>; the checked-in seeds in
#                  fuzz/corpus/<target> are read, never written)
#   FUZZ_ARGS      more libFuzzer options
#   FUZZ_NICE      niceness of the fuzzing processes (default 10)
#   FUZZ_BUILD_ONLY=1  build the targets and stop (make test builds them beside the suites and fuzzes
#                  after them, so a busy machine cannot starve the time-bounded runs)
# A crash, a hang (-timeout, 10 s) or an RSS over 2 GiB fails the run; the input is kept under
# .work/fuzz/artifacts/<target>/ and reproduced by running the target binary on it.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${FUZZ_SECONDS:-300}
ALL=(mcp_reader plan_load plan_structured request_eval lifecycle list_filter module_hooks)
TARGETS=("${@:-${ALL[@]}}")
# libFuzzer is C++ (built by libfuzzer-sys's build script).
command -v c++ >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq g++ >/dev/null; }
HOST=$(rustc -vV | sed -n 's/^host: //p')
TARGET_DIR=${FUZZ_TARGET_DIR:-target/fuzz}
BIN=$TARGET_DIR/$HOST/release

# The flags cargo-fuzz uses for `-s none`, all stable. Passing --target keeps them off build scripts
# and proc macros. Debug assertions and overflow checks stay on (fuzz/Cargo.toml's release profile).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
echo "fuzz: building ${TARGETS[*]} (stable $(rustc --version | cut -d' ' -f2), libFuzzer, no sanitizer)"
bins=()
for t in "${TARGETS[@]}"; do bins+=(--bin "$t"); done
# Not --locked: fuzz/Cargo.lock pins what it lists, and a dependency that toolgate-policy gains
# later is added to it rather than failing the run.
cargo build --release --manifest-path fuzz/Cargo.toml --target "$HOST" --target-dir "$TARGET_DIR" "${bins[@]}"
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

# max_len per target: bodies up to 64 KiB for the reader (the realistic plan's limit), plans up to 64 KiB.
declare -A MAX_LEN=([mcp_reader]=65536 [plan_load]=65536 [plan_structured]=4096 [request_eval]=16384 [lifecycle]=8192 [list_filter]=8192 [module_hooks]=8192)
# One target per core at a time (each is single-threaded; FUZZ_JOBS overrides), results in target order.
run_target() {
    local t=$1
    local corpus=${FUZZ_CORPUS:-.work/fuzz/corpus}/$t
    local artifacts=.work/fuzz/artifacts/$t/
    local log=.work/fuzz/logs/$t.log
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "fuzz/corpus/$t"
    local dict=()
    [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
    local cmd=(nice -n "${FUZZ_NICE:-10}" "$BIN/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048
         -max_len="${MAX_LEN[$t]}" -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}"
         ${FUZZ_ARGS:-} "$corpus" "fuzz/corpus/$t")
    {
        echo "fuzz: $t for ${SECONDS_PER_TARGET}s: ${cmd[*]}"
        if "${cmd[@]}" >"$log" 2>&1; then
            execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
            rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
            cov=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9/]+[a-zA-Z]*' || true)
            echo "fuzz: $t: ok, ${execs:-?} executions, ${rate:-?} execs/s, ${cov}, 0 crashes"
        else
            echo "fuzz: $t: FAILED (log $log, inputs in $artifacts):"
            grep -vE '^#[0-9]+' "$log" | tail -60
            return 1
        fi
    } >".work/fuzz/logs/$t.summary" 2>&1
}
mkdir -p .work/fuzz/logs
jobs_max=${FUZZ_JOBS:-$(nproc)}
declare -A PID
for t in "${TARGETS[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
    run_target "$t" &
    PID[$t]=$!
done
status=0
for t in "${TARGETS[@]}"; do
    wait "${PID[$t]}" || status=1
    cat ".work/fuzz/logs/$t.summary"
done
exit $status
