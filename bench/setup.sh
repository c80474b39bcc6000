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

missing=()
need_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' || missing+=("$1"); }
need_pkg wrk              # load generator of the timed runs
need_pkg nghttp2-client   # h2load: fixed request counts for the callgrind runs
need_pkg valgrind         # callgrind: instructions per request
command -v taskset >/dev/null 2>&1 || need_pkg util-linux
command -v cc >/dev/null 2>&1 || { need_pkg gcc; need_pkg libc6-dev; }
if ((${#missing[@]})); then
    command -v apt-get >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no apt-get"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "missing packages (${missing[*]}); run as root or install sudo"
        SUDO="sudo -n"
    fi
    say "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "Debian packages present (wrk $(wrk -v 2>&1 | sed -n 's/^wrk \([^ ]*\).*/\1/p' | head -n1))"
fi

SRC="$ROOT/bench/wrk/client-cert-shim.c"
OUT="$ROOT/.work/bench/bin/client-cert-shim.so"
mkdir -p "$(dirname "$OUT")"
if [ ! -f "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
    say "building $OUT"
    cc -shared -fPIC -O2 -o "$OUT" "$SRC" -ldl
fi
