#!/usr/bin/env bash
# Idempotent setup for `make bench` (after scripts/setup.sh): the load generator and its TLS shim.
#   - wrk from Debian (apt-get only when it is missing)
#   - .work/bench/bin/client-cert-shim.so: LD_PRELOAD shim that gives wrk a TLS client certificate
#     (wrk has no option for one; see bench/wrk/client-cert-shim.c)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DEBIAN_FRONTEND=noninteractive
say() { printf 'bench-setup: %s\n' "$*"; }
die() { printf 'bench-setup: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=scripts/debian-packages.sh
source "$ROOT/scripts/debian-packages.sh"
need_pkg wrk              # load generator of the timed runs
need_pkg nghttp2-client   # h2load: fixed request counts for the callgrind runs
need_pkg valgrind         # callgrind: instructions per request
command -v node >/dev/null 2>&1 || need_pkg nodejs   # V8 for bench/vm-profile (make vm-profile)
command -v taskset >/dev/null 2>&1 || need_pkg util-linux
command -v cc >/dev/null 2>&1 || { need_pkg gcc; need_pkg libc6-dev; }
install_missing || say "Debian packages present (wrk $(wrk -v 2>&1 | sed -n 's/^wrk \([^ ]*\).*/\1/p' | head -n1))"

SRC="$ROOT/bench/wrk/client-cert-shim.c"
OUT="$ROOT/.work/bench/bin/client-cert-shim.so"
mkdir -p "$(dirname "$OUT")"
if [ ! -f "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
    say "building $OUT"
    cc -shared -fPIC -O2 -o "$OUT" "$SRC" -ldl
fi
