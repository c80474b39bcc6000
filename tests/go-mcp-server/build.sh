#!/usr/bin/env bash
# Builds tests/go-mcp-server (standard library only) into target/go/toolgate-go-mcp-server, and its
# cmd/fold-orbits (Go's key folding, listed) into target/go/toolgate-go-fold-orbits, with a Go
# toolchain from Debian's own packages: golang-1.NN-go and golang-1.NN-src of the suite TOOLGATE_GO_SUITE
# (default trixie, Go 1.24), downloaded with a private apt configuration (nothing is installed on the
# machine) and unpacked once into a cache outside the clone, ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/go
# (about 400 MB; TOOLGATE_GO_CACHE overrides). The build is offline (GOPROXY=off, GOTOOLCHAIN=local).
# A current Go rather than the machine's release's (bookworm: 1.19), as Go MCP servers are built with.
# Needs apt-get, apt-cache, dpkg-deb and debian-archive-keyring (scripts/setup.sh installs the keyring).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/tests/go-mcp-server"
OUT="$ROOT/target/go/toolgate-go-mcp-server"
SUITE=${TOOLGATE_GO_SUITE:-trixie}
CACHE=${TOOLGATE_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/go}/$SUITE

say() { printf 'go-mcp-server: %s\n' "$*" >&2; }
die() { printf 'go-mcp-server: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/debian-packages.sh
source "$ROOT/scripts/debian-packages.sh"

ORBITS="$ROOT/target/go/toolgate-go-fold-orbits"
want="$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/cmd/fold-orbits/main.go" | sha256sum | cut -d' ' -f1)"
if [ -x "$OUT" ] && [ -x "$ORBITS" ] && [ "$(cat "$OUT.sha256" 2>/dev/null)" = "$want" ]; then
    say "$OUT up to date"
    exit 0
fi

goroot() { ls -d "$CACHE"/root/usr/lib/go-1.* 2>/dev/null | sort -V | tail -n 1; }

if [ -z "$(goroot)" ] || [ ! -x "$(goroot)/bin/go" ]; then
    for t in apt-get apt-cache dpkg-deb; do command -v $t >/dev/null || die "needs $t"; done
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || die "needs debian-archive-keyring (make setup)"
    A="$CACHE/apt"
    rm -rf "$CACHE"
    mkdir -p "$A/debs" "$CACHE/root"
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no Debian mirror in the apt configuration"
    private_apt "$A" "$SUITE" "$mirror"
    apt-get "${APT_OPTS[@]}" update -qq >&2 || die "apt-get update ($SUITE) failed"
    # golang-go depends on the versioned toolchain (golang-1.NN-go), which depends on its sources.
    gopkg=$(apt-cache "${APT_OPTS[@]}" depends golang-go | grep -oE 'golang-1\.[0-9]+-go' | head -n 1)
    [ -n "$gopkg" ] || die "no golang-1.NN-go behind golang-go in $SUITE"
    say "downloading ${gopkg} and ${gopkg%-go}-src from Debian $SUITE"
    (cd "$A/debs" && apt-get "${APT_OPTS[@]}" download "$gopkg" "${gopkg%-go}-src" >&2) || die "apt-get download failed"
    for f in "$A"/debs/*.deb; do dpkg-deb -x "$f" "$CACHE/root"; done
    rm -rf "$A/debs"
fi
GOROOT="$(goroot)"
[ -x "$GOROOT/bin/go" ] || die "no go binary under $CACHE/root"

export GOROOT PATH="$GOROOT/bin:$PATH" GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
       GOCACHE="$CACHE/gocache" GOPATH="$CACHE/gopath" GOTELEMETRY=off
mkdir -p "$(dirname "$OUT")"
say "building with $(go version)"
(cd "$SRC" && go build -trimpath -o "$OUT" . && go build -trimpath -o "$ORBITS" ./cmd/fold-orbits)
echo "$want" > "$OUT.sha256"
say "built $OUT"
