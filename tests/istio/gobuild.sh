#!/usr/bin/env bash
# tests/istio/gobuild.sh: builds the real control plane for tests/istio from Go modules (Go module proxy
# only), pinned, into a cache outside the clone, and reuses it:
#
#   kube-apiserver, kubectl  k8s.io/kubernetes v1.36.3 (cmd/kube-apiserver, cmd/kubectl) with every staging
#                            module it replaces pinned to v0.36.3: the wrapper module tests/istio/kube
#                            (go.mod + go.sum checked in; `go install ...@v1.36.3` refuses kubernetes'
#                            own go.mod because of its replace directives)
#   etcd                     go.etcd.io/etcd/server/v3 at the version kubernetes v1.36.3 requires (v3.6.8),
#                            from the same wrapper module
#   pilot-discovery (istiod) istio.io/istio at $ISTIO_VERSION (master after the 1.30 branch: VERSION says
#                            1.31; TrafficExtension is there), `go install ...@version` (checked against
#                            the checksum DB)
#   xds-shim                 tests/istio/xds-shim (our own code, its own go.mod + go.sum)
#
#   tests/istio/gobuild.sh ensure    # build what is missing or out of date (no-op when all are cached)
#   tests/istio/gobuild.sh build     # rebuild everything
#   tests/istio/gobuild.sh bindir    # prints the directory with the binaries
#
# Cold build (measured, see tests/istio/README.md): about 19 CPU minutes, 10 minutes on an idle 2-core
# machine (25-45 while other builds ran); afterwards `ensure` takes milliseconds. Settings (environment): TOOLGATE_ISTIO_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio): binaries in bin/, GOMODCACHE in gomod/, GOCACHE in
# gocache/. GO: the go command (default /usr/local/go/bin/go when present, else go on PATH).
# TOOLGATE_ISTIO_CLEAN_GOCACHE=1 empties the Go build cache (a few GB) after building.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${TOOLGATE_ISTIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio}
BIN=$PREFIX/bin
KUBE_VERSION=v1.36.3
ISTIO_VERSION=v0.0.0-20260827124520-eed52ebb66ad
if [ -z "${GO:-}" ]; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO=$(command -v go || true); fi
fi

log() { echo "gobuild: $*" >&2; }

goenv() {
  # Go 1.26 is needed (the modules say `go 1.26.0`); an older go command fetches that toolchain from the
  # Go module proxy (module golang.org/toolchain) into GOMODCACHE.
  local tc=local
  if ! go_at_least "$GO" go1.26; then tc=go1.26.8; log "$("$GO" version) is older than go1.26: using GOTOOLCHAIN=$tc"; fi
  export GOMODCACHE=$PREFIX/gomod GOCACHE=$PREFIX/gocache GOTOOLCHAIN=$tc GOFLAGS=-mod=readonly \
         CGO_ENABLED=0 GOPROXY=${GOPROXY:-https://proxy.golang.org,direct} GOWORK=off
}

go_at_least() {  # go_at_least GO goX.Y: the go command's version is at least X.Y
  local v; v=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null || echo go0)
  [ "$(printf '%s\n%s\n' "$v" "$2" | sort -V | head -1)" = "$2" ]
}

# A binary is up to date when it exists and its stamp (what it was built from) matches.
stamp_of() {
  case "$1" in
    kube-apiserver|kubectl|etcd) echo "$1 kubernetes $KUBE_VERSION $(sha256sum "$HERE/kube/go.sum" | cut -c1-16)" ;;
    pilot-discovery) echo "pilot-discovery istio.io/istio $ISTIO_VERSION (version from VERSION)" ;;
    xds-shim) echo "xds-shim $(cat "$HERE"/xds-shim/go.mod "$HERE"/xds-shim/go.sum "$HERE"/xds-shim/*.go | sha256sum | cut -c1-16)" ;;
  esac
}
fresh() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$1")" ]; }
ALL=(etcd kube-apiserver kubectl pilot-discovery)
[ -f "$HERE/xds-shim/go.mod" ] && ALL+=(xds-shim)
all_fresh() { local b; for b in "${ALL[@]}"; do fresh "$b" || return 1; done; }

timed() {  # timed NAME command...: runs it niced, prints the seconds it took
  local name=$1 t0; shift; t0=$(date +%s)
  log "building $name"
  nice -n 10 "$@"
  log "built $name in $(( $(date +%s) - t0 )) s"
  stamp_of "$name" > "$BIN/.$name.stamp"
}

# The version istiod reports: the module's VERSION file (the release its code leads to) + -dev-<commit>.
istio_version() {
  local dir
  dir=$(GOFLAGS= "$GO" mod download -json "istio.io/istio@$ISTIO_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  echo "$(cat "$dir/VERSION" 2>/dev/null || echo unknown)-dev-${ISTIO_VERSION##*-}"
}

build_one() {
  local b=$1
  local kldflags="-s -w"
  local v
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kldflags+=" -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=36 -X $v.gitTreeState=clean"
    kldflags+=" -X $v.buildDate=1970-01-01T00:00:00Z"
  done
  case "$b" in
    etcd) (cd "$HERE/kube" && timed etcd "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3) ;;
    kube-apiserver) (cd "$HERE/kube" && timed kube-apiserver "$GO" build -trimpath -ldflags "$kldflags" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) ;;
    kubectl) (cd "$HERE/kube" && timed kubectl "$GO" build -trimpath -ldflags "$kldflags" -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl) ;;
    pilot-discovery) (cd "$PREFIX" && export GOFLAGS= && GOBIN=$BIN timed pilot-discovery "$GO" install -trimpath \
        -ldflags "-s -w -X istio.io/istio/pkg/version.buildVersion=$(istio_version) -X istio.io/istio/pkg/version.buildStatus=Clean" \
        "istio.io/istio/pilot/cmd/pilot-discovery@$ISTIO_VERSION") ;;
    xds-shim) (cd "$HERE/xds-shim" && timed xds-shim "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/xds-shim" .) ;;
  esac
}

do_build() {  # do_build force|missing
  if [ -z "$GO" ] || ! go_at_least "$GO" go1.21; then
    # No go command that can fetch a toolchain (Debian bookworm's is 1.19): Debian trixie's Go, which
    # tests/go-mcp-server/build.sh unpacks into the cache; it then fetches Go 1.26 (see goenv).
    local cache=${TOOLGATE_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/go}/trixie
    [ -n "$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null)" ] || bash "$HERE/../go-mcp-server/build.sh" >&2
    GO=$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -n 1)
    [ -n "$GO" ] || { log "needs Go (1.21 or later; set GO=/path/to/go)"; exit 1; }
  fi
  goenv
  mkdir -p "$BIN"
  local t0 b built=0; t0=$(date +%s)
  log "$("$GO" version); cache $PREFIX"
  for b in "${ALL[@]}"; do
    if [ "$1" = force ] || ! fresh "$b"; then build_one "$b"; built=1; fi
  done
  if [ "$built" = 1 ]; then
    {
      echo "kubernetes $KUBE_VERSION (kube-apiserver, kubectl; staging modules v0.36.3)"
      echo "etcd $(cd "$HERE/kube" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
      echo "istio.io/istio $ISTIO_VERSION (pilot-discovery)"
      echo "go $("$GO" env GOVERSION)"
    } > "$PREFIX/VERSIONS"
    [ "${TOOLGATE_ISTIO_CLEAN_GOCACHE:-0}" != 1 ] || "$GO" clean -cache
    log "done in $(( $(date +%s) - t0 )) s: $(tr '\n' ';' < "$PREFIX/VERSIONS") $(du -sh "$PREFIX" | cut -f1) in $PREFIX"
  fi
}

# Concurrent callers wait for one build (flock on $PREFIX.lock).
locked() {
  mkdir -p "$(dirname "$PREFIX")"
  exec 9>"$PREFIX.lock"
  flock 9
  "$@"
  flock -u 9
}

case "${1:-}" in
  ensure)
    t0=$(date +%s%N)
    if all_fresh; then log "all cached in $BIN ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"; exit 0; fi
    locked do_build missing ;;
  build) locked do_build force ;;
  bindir) echo "$BIN" ;;
  *) echo "usage: $0 ensure|build|bindir" >&2; exit 2 ;;
esac
