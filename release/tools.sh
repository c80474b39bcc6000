#!/usr/bin/env bash
# release/tools.sh: the tools `make release` packages with, built from Go modules (Go module proxy only),
# pinned, into a cache outside the clone, and reused (the same scheme as tests/istio/gobuild.sh):
#
#   helm      helm.sh/helm/v4 (cmd/helm)   lint, package and render the chart (charts/toolgate)
#   oras      oras.land/oras (cmd/oras)     write the OCI image layouts in dist/oci/ (no registry, no Docker)
#   registry  github.com/distribution/distribution/v3 (cmd/registry), the CNCF distribution registry:
#             not used by `make release`; tests/istio/test_istio_install.py runs it on loopback and
#             pushes dist/ into it (`tools.sh ensure registry`)
#
# go-containerregistry's crane is not used: `crane append` and `crane mutate` read and write registries
# or tarballs, not OCI layouts (v0.22.1), and building an image from scratch needs no base to pull.
#
#   release/tools.sh ensure [TOOL...]  # build what is missing or out of date (no-op when all are cached);
#                                      # default TOOLs: helm oras (what make release needs)
#   release/tools.sh build [TOOL...]   # rebuild them (default: helm oras)
#   release/tools.sh bindir            # prints the directory with the binaries
#
# Cold build (measured on this project's 2-core machine, niced, beside a cargo build): 179 s, helm 170 s
# and oras 9 s after it (most of its packages are helm's too); 1.9 GB in the cache (1.3 GB of it the Go
# build cache); afterwards `ensure` takes milliseconds. The registry (`ensure registry`, helm and oras
# cached): 185 s (user 87 s + sys 19 s, niced, beside cargo builds; most of it downloading its storage
# drivers' SDKs), 1.7 GB more in the cache. Settings
# (environment): TOOLGATE_RELEASE_TOOLS (default ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/release-tools):
# binaries in bin/, GOMODCACHE in gomod/, GOCACHE in gocache/. GO: the go command (default
# /usr/local/go/bin/go when present, else go on PATH). TOOLGATE_RELEASE_TOOLS_CLEAN_GOCACHE=1 empties the
# Go build cache after building.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${TOOLGATE_RELEASE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/release-tools}
BIN=$PREFIX/bin
HELM_VERSION=v4.3.2
ORAS_VERSION=v1.3.6
REGISTRY_VERSION=v3.1.2  # github.com/distribution/distribution/v3, the newest the Go module proxy lists (2026-11-29)
GO_TOOLCHAIN=go1.26.8   # oras v1.3.6 says `go 1.26.7`, helm v4.3.2 `go 1.26.0`
if [ -z "${GO:-}" ]; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO=$(command -v go || true); fi
fi

log() { echo "release-tools: $*" >&2; }

go_at_least() {  # go_at_least GO goX.Y.Z: the go command's version is at least X.Y.Z
  local v; v=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null || echo go0)
  [ "$(printf '%s\n%s\n' "$v" "$2" | sort -V | head -1)" = "$2" ]
}

goenv() {
  # An older go command fetches the toolchain from the Go module proxy (module golang.org/toolchain).
  local tc=local
  if ! go_at_least "$GO" "$GO_TOOLCHAIN"; then tc=$GO_TOOLCHAIN; log "$("$GO" version) is older than $GO_TOOLCHAIN: using GOTOOLCHAIN=$tc"; fi
  export GOMODCACHE=$PREFIX/gomod GOCACHE=$PREFIX/gocache GOTOOLCHAIN=$tc GOFLAGS= \
         CGO_ENABLED=0 GOPROXY=${GOPROXY:-https://proxy.golang.org,direct} GOWORK=off GOTELEMETRY=off
}

# A binary is up to date when it exists and its stamp (what it was built from) matches.
stamp_of() {
  case "$1" in
    helm) echo "helm helm.sh/helm/v4 $HELM_VERSION" ;;
    oras) echo "oras oras.land/oras $ORAS_VERSION" ;;
    registry) echo "registry github.com/distribution/distribution/v3 $REGISTRY_VERSION" ;;
  esac
}
fresh() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$1")" ]; }
ALL=(helm oras)              # what `make release` needs: `ensure` and `build` without arguments
KNOWN=(helm oras registry)   # every tool this script builds
all_fresh() { local b; for b in "${ALL[@]}"; do fresh "$b" || return 1; done; }

timed() {  # timed NAME command...: runs it niced, prints the seconds it took
  local name=$1 t0; shift; t0=$(date +%s)
  log "building $name"
  nice -n 10 "$@"
  log "built $name in $(( $(date +%s) - t0 )) s"
  stamp_of "$name" > "$BIN/.$name.stamp"
}

build_one() {
  # `go install module/cmd/x@version`: the module's own go.mod and go.sum, checked against the checksum
  # database; run outside any module (the cache folder) so that nothing of this clone takes part.
  case "$1" in
    helm) (cd "$PREFIX" && GOBIN=$BIN timed helm "$GO" install -trimpath -ldflags "-s -w \
        -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
        "helm.sh/helm/v4/cmd/helm@$HELM_VERSION") ;;
    oras) (cd "$PREFIX" && GOBIN=$BIN timed oras "$GO" install -trimpath -ldflags "-s -w \
        -X oras.land/oras/internal/version.GitTreeState=clean" "oras.land/oras/cmd/oras@$ORAS_VERSION") ;;
    registry) (cd "$PREFIX" && GOBIN=$BIN timed registry "$GO" install -trimpath -ldflags "-s -w \
        -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
        "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION") ;;
  esac
}

do_build() {  # do_build force|missing
  if [ -z "$GO" ] || ! go_at_least "$GO" go1.21; then
    # No go command that can fetch a toolchain (Debian bookworm's is 1.19): Debian trixie's Go, which
    # tests/go-mcp-server/build.sh unpacks into its cache; it then fetches $GO_TOOLCHAIN (see goenv).
    local cache=${TOOLGATE_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/go}/trixie
    [ -n "$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null)" ] || bash "$HERE/../tests/go-mcp-server/build.sh" >&2
    GO=$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -n 1)
    [ -n "$GO" ] || { log "needs Go (1.21 or later; set GO=/path/to/go)"; exit 1; }
  fi
  goenv
  mkdir -p "$BIN"
  local t0 b mod ver built=0; t0=$(date +%s)
  log "$("$GO" version); cache $PREFIX"
  for b in "${ALL[@]}"; do
    if [ "$1" = force ] || ! fresh "$b"; then build_one "$b"; built=1; fi
  done
  if [ "$built" = 1 ]; then
    {
      for b in "${KNOWN[@]}"; do
        if [ -x "$BIN/$b" ]; then read -r _ mod ver <<<"$(stamp_of "$b")"; echo "$mod $ver ($b)"; fi
      done
      echo "go $("$GO" env GOVERSION)"
    } > "$PREFIX/VERSIONS"
    [ "${TOOLGATE_RELEASE_TOOLS_CLEAN_GOCACHE:-0}" != 1 ] || "$GO" clean -cache
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

select_tools() {  # select_tools [TOOL...]: ALL becomes the named tools (default: helm oras)
  local b k ok
  [ "$#" -gt 0 ] || return 0
  for b in "$@"; do
    ok=0; for k in "${KNOWN[@]}"; do [ "$b" = "$k" ] && ok=1; done
    [ "$ok" = 1 ] || { echo "$0: unknown tool $b (known: ${KNOWN[*]})" >&2; exit 2; }
  done
  ALL=("$@")
}

cmd=${1:-}; [ "$#" -eq 0 ] || shift
case "$cmd" in
  ensure)
    select_tools "$@"
    t0=$(date +%s%N)
    if all_fresh; then log "all cached in $BIN ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"; exit 0; fi
    locked do_build missing ;;
  build) select_tools "$@"; locked do_build force ;;
  bindir) echo "$BIN" ;;
  versions) for b in "${KNOWN[@]}"; do stamp_of "$b"; done ;;
  *) echo "usage: $0 ensure [TOOL...]|build [TOOL...]|bindir|versions (TOOLs: ${KNOWN[*]})" >&2; exit 2 ;;
esac
