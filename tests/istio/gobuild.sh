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
#   pilot-discovery (istiod) an Istio release: istio.io/istio at the pseudo-version of the release tag's
#                            commit that tests/istio/releases.txt pins (istio/istio's tags have no `v`),
#                            `go install ...@version` (checked against the checksum DB), or, where the
#                            Go module proxy lacks some of its requirements, from the wrapper module
#                            tests/istio/istio-<release>/ that replaces only those; into
#                            bin/istio-<release>/ (one directory per release, side by side)
#   xds-shim                 tests/istio/xds-shim (our own code, its own go.mod + go.sum)
#
#   tests/istio/gobuild.sh ensure    # build what is missing or out of date (no-op when all are cached)
#   tests/istio/gobuild.sh build     # rebuild everything (for the selected release)
#   tests/istio/gobuild.sh bindir    # prints the directory with the shared binaries
#   tests/istio/gobuild.sh istiobin  # prints the directory with the selected release's pilot-discovery
#   tests/istio/gobuild.sh release   # prints the selected release and its module version
#   tests/istio/gobuild.sh verify [RELEASE]   # checks a releases.txt line against the Go module proxy
#   tests/istio/gobuild.sh resolve RELEASE    # the releases.txt line for a tag the proxy resolves
#   tests/istio/gobuild.sh crds [RELEASE]     # writes crds/<release>/crd-all.gen.yaml from the module
#
# ISTIO=<release> selects the release (default: the first line of releases.txt); `make test-istio
# ISTIO=1.30.4` passes it. Cold build (measured, see tests/istio/README.md): about 19 CPU minutes, 10 minutes
# on an idle 2-core machine (25-45 while other builds ran); another release's istiod alone about 7 CPU
# minutes (10 minutes beside other builds); afterwards `ensure` takes milliseconds. Settings (environment): TOOLGATE_ISTIO_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio): binaries in bin/, GOMODCACHE in gomod/, GOCACHE in
# gocache/. GO: the go command (default /usr/local/go/bin/go when present, else go on PATH).
# TOOLGATE_ISTIO_CLEAN_GOCACHE=1 empties the Go build cache (a few GB) after building.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=${TOOLGATE_ISTIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio}
BIN=$PREFIX/bin
KUBE_VERSION=v1.36.3
RELEASES=$HERE/releases.txt
releases() { grep -v '^#' "$RELEASES" | awk 'NF >= 2 { print $1, $2 }'; }
module_version_of() { releases | awk -v r="$1" '$1 == r { print $2 }'; }
# The selected release (ISTIO, default: the first in releases.txt), its module version and its istiod's directory.
ISTIO=${ISTIO:-$(releases | head -n 1 | cut -d' ' -f1)}
ISTIO_VERSION=$(module_version_of "$ISTIO")
IBIN=$BIN/istio-$ISTIO
if [ -z "${GO:-}" ]; then
  if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO=$(command -v go || true); fi
fi

log() { echo "gobuild: $*" >&2; }
need_pin() {
  [ -n "$ISTIO_VERSION" ] && return 0
  log "Istio $ISTIO is not in $RELEASES (known: $(releases | cut -d' ' -f1 | tr '\n' ' '))"
  log "'$0 resolve $ISTIO' prints its line when the Go module proxy resolves that tag"
  exit 2
}

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

# A binary is up to date when it exists and its stamp (what it was built from) matches. pilot-discovery
# is in the release's own directory, the rest are shared by all releases.
dir_of() { if [ "$1" = pilot-discovery ]; then echo "$IBIN"; else echo "$BIN"; fi; }
stamp_of() {
  case "$1" in
    kube-apiserver|kubectl|etcd) echo "$1 kubernetes $KUBE_VERSION $(sha256sum "$HERE/kube/go.sum" | cut -c1-16)" ;;
    pilot-discovery) if [ -f "$HERE/istio-$ISTIO/go.mod" ]; then
        echo "pilot-discovery istio.io/istio $ISTIO_VERSION (Istio $ISTIO, wrapper istio-$ISTIO $(cat "$HERE/istio-$ISTIO/go.mod" "$HERE/istio-$ISTIO/go.sum" | sha256sum | cut -c1-16))"
      else echo "pilot-discovery istio.io/istio $ISTIO_VERSION (Istio $ISTIO)"; fi ;;
    xds-shim) echo "xds-shim $(cat "$HERE"/xds-shim/go.mod "$HERE"/xds-shim/go.sum "$HERE"/xds-shim/*.go | sha256sum | cut -c1-16)" ;;
  esac
}
fresh() { local d; d=$(dir_of "$1"); [ -x "$d/$1" ] && [ "$(cat "$d/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$1")" ]; }
ALL=(etcd kube-apiserver kubectl pilot-discovery)
[ -f "$HERE/xds-shim/go.mod" ] && ALL+=(xds-shim)
all_fresh() { local b; for b in "${ALL[@]}"; do fresh "$b" || return 1; done; }

timed() {  # timed NAME command...: runs it niced, prints the seconds it took
  local name=$1 t0; shift; t0=$(date +%s)
  log "building $name"
  nice -n 10 "$@"
  log "built $name in $(( $(date +%s) - t0 )) s"
  stamp_of "$name" > "$(dir_of "$name")/.$name.stamp"
}

module_dir() {  # module_dir PATH@VERSION: downloads the module (checked against go.sum's checksum DB), prints its directory
  GOFLAGS= "$GO" mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'
}

# The version istiod reports: the release. Its module's VERSION file (the branch's minor: 1.31 on
# release-1.31) must be the release's minor.
istio_version() {
  local dir v
  dir=$(module_dir "istio.io/istio@$ISTIO_VERSION")
  v=$(cat "$dir/VERSION" 2>/dev/null || echo unknown)
  if [ "$v" != "${ISTIO%.*}" ]; then log "istio.io/istio@$ISTIO_VERSION: VERSION says $v, not ${ISTIO%.*} (Istio $ISTIO)"; return 1; fi
  echo "$ISTIO"
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
    pilot-discovery) v=$(istio_version); mkdir -p "$IBIN"
      local ildflags="-s -w -X istio.io/istio/pkg/version.buildVersion=$v -X istio.io/istio/pkg/version.buildStatus=Clean"
      if [ -f "$HERE/istio-$ISTIO/go.mod" ]; then
        # A release some of whose requirements the Go module proxy does not serve: its wrapper module
        # (go.mod + go.sum checked in) requires istio.io/istio@$ISTIO_VERSION and replaces only those.
        (cd "$HERE/istio-$ISTIO" && timed pilot-discovery "$GO" build -trimpath -ldflags "$ildflags" \
          -o "$IBIN/pilot-discovery" istio.io/istio/pilot/cmd/pilot-discovery)
      else
        (cd "$PREFIX" && export GOFLAGS= && GOBIN=$IBIN timed pilot-discovery "$GO" install -trimpath \
          -ldflags "$ildflags" "istio.io/istio/pilot/cmd/pilot-discovery@$ISTIO_VERSION")
      fi ;;
    xds-shim) (cd "$HERE/xds-shim" && timed xds-shim "$GO" build -trimpath -ldflags "-s -w" -o "$BIN/xds-shim" .) ;;
  esac
}

find_go() {
  if [ -z "$GO" ] || ! go_at_least "$GO" go1.21; then
    # No go command that can fetch a toolchain (Debian bookworm's is 1.19): Debian trixie's Go, which
    # tests/go-mcp-server/build.sh unpacks into the cache; it then fetches Go 1.26 (see goenv).
    local cache=${TOOLGATE_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/go}/trixie
    [ -n "$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null)" ] || bash "$HERE/../go-mcp-server/build.sh" >&2
    GO=$(ls "$cache"/root/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -n 1)
    [ -n "$GO" ] || { log "needs Go (1.21 or later; set GO=/path/to/go)"; exit 1; }
  fi
  goenv
}

do_build() {  # do_build force|missing
  need_pin
  find_go
  mkdir -p "$BIN"
  local t0 b built=0; t0=$(date +%s)
  log "$("$GO" version); cache $PREFIX"
  for b in "${ALL[@]}"; do
    if [ "$1" = force ] || ! fresh "$b"; then build_one "$b"; built=1; fi
  done
  check_crds
  if [ "$built" = 1 ]; then
    {
      echo "kubernetes $KUBE_VERSION (kube-apiserver, kubectl; staging modules v0.36.3)"
      echo "etcd $(cd "$HERE/kube" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
      cat "$BIN"/istio-*/.pilot-discovery.stamp 2>/dev/null | sed 's/^pilot-discovery //'
      echo "go $("$GO" env GOVERSION)"
    } > "$PREFIX/VERSIONS"
    [ "${TOOLGATE_ISTIO_CLEAN_GOCACHE:-0}" != 1 ] || "$GO" clean -cache
    log "done in $(( $(date +%s) - t0 )) s: $(tr '\n' ';' < "$PREFIX/VERSIONS") $(du -sh "$PREFIX" | cut -f1) in $PREFIX"
  fi
}

# crds/<release>/crd-all.gen.yaml: an unmodified copy of the release's
# manifests/charts/base/files/crd-all.gen.yaml (what cluster.sh applies).
crds_file() { echo "$HERE/crds/$1/crd-all.gen.yaml"; }
write_crds() {
  local dir; dir=$(module_dir "istio.io/istio@$ISTIO_VERSION")
  mkdir -p "$HERE/crds/$ISTIO"
  cp "$dir/manifests/charts/base/files/crd-all.gen.yaml" "$(crds_file "$ISTIO")"
  chmod 644 "$(crds_file "$ISTIO")"
  log "wrote $(crds_file "$ISTIO") from istio.io/istio@$ISTIO_VERSION"
}
check_crds() {
  local dir; dir=$(module_dir "istio.io/istio@$ISTIO_VERSION")
  if ! cmp -s "$dir/manifests/charts/base/files/crd-all.gen.yaml" "$(crds_file "$ISTIO")"; then
    log "$(crds_file "$ISTIO") is missing or not the CRDs of istio.io/istio@$ISTIO_VERSION: '$0 crds $ISTIO' writes it"
    return 1
  fi
}

# verify RELEASE: is releases.txt's module version the release tag's commit? Where the Go module proxy
# resolves the tag (`go list -m istio.io/istio@1.31.0`: a pseudo-version of the tag's commit, with
# Origin.Ref refs/tags/1.31.0), that is the check. Where it does not (a proxy that serves only some
# versions), the release's other fingerprints: the module's VERSION file is the release's minor, and
# istio.io/api and istio.io/client-go, which Istio's release tags (v1.31.0) at the commits the
# release's go.mod requires, have those tags at the commits this go.mod requires (the tag's
# Origin.Hash, or, where the proxy gives no Origin, the same files at the tag and at the required
# pseudo-version).
oneline() { echo "$1" | tr '\n\t' '  ' | sed 's/  */ /g; s/^go: //; s/ $//; s/reading [a-z]*:[^ ]*: //'; }
verify() {
  need_pin; find_go; cd "$PREFIX"
  local out fails=0 dir v m req c tag hash d1 d2
  log "Istio $ISTIO: releases.txt pins istio.io/istio@$ISTIO_VERSION (commit ${ISTIO_VERSION##*-})"
  if out=$(GOFLAGS= "$GO" list -m -f '{{.Version}} {{with .Origin}}{{.Hash}} {{.Ref}}{{end}}' "istio.io/istio@$ISTIO" 2>&1); then
    read -r v hash ref <<<"$out"
    if [ "$v" = "$ISTIO_VERSION" ] && { [ -z "$hash" ] || [ "${hash:0:12}" = "${ISTIO_VERSION##*-}" ]; }; then
      echo "verified: the Go module proxy resolves tag $ISTIO to $v${hash:+ (commit $hash, $ref)}"; return 0
    fi
    echo "MISMATCH: the Go module proxy resolves tag $ISTIO to $v${hash:+ (commit $hash, $ref)}, not $ISTIO_VERSION"; return 1
  fi
  echo "tag query istio.io/istio@$ISTIO not answered by the Go module proxy: $(oneline "$out")"
  dir=$(module_dir "istio.io/istio@$ISTIO_VERSION")
  v=$(cat "$dir/VERSION")
  if [ "$v" = "${ISTIO%.*}" ]; then echo "ok: VERSION is $v"; else echo "MISMATCH: VERSION is $v, not ${ISTIO%.*}"; fails=1; fi
  for m in istio.io/api istio.io/client-go; do
    req=$(awk -v m="$m" '$1 == m { print $2; exit }' "$dir/go.mod"); c=${req##*-}; tag=v$ISTIO
    if ! out=$(GOFLAGS= "$GO" list -m -f '{{.Version}} {{with .Origin}}{{.Hash}}{{end}}' "$m@$tag" 2>&1); then
      echo "skipped: $m@$tag not served ($(oneline "$out"))"; continue
    fi
    read -r v hash <<<"$out"
    if [ -n "$hash" ]; then
      if [ "${hash:0:12}" = "$c" ]; then echo "ok: $m tag $tag is commit $hash, the one go.mod requires ($req)"
      else echo "MISMATCH: $m tag $tag is commit $hash; go.mod requires $req"; fails=1; fi
    else
      d1=$(module_dir "$m@$tag") || d1=; d2=$(module_dir "$m@$req") || d2=
      if [ -n "$d1" ] && [ -n "$d2" ] && diff -r -q "$d1" "$d2" >/dev/null; then
        echo "ok: $m tag $tag has the same files as $req, which go.mod requires (the proxy gives no Origin)"
      else echo "MISMATCH: $m tag $tag differs from $req, which go.mod requires"; fails=1; fi
    fi
  done
  [ "$fails" = 0 ] && echo "consistent: istio.io/istio@$ISTIO_VERSION is Istio $ISTIO's source by every check above"
  return "$fails"
}

# resolve RELEASE: the releases.txt line for a tag the Go module proxy resolves.
resolve() {
  find_go; cd "$PREFIX"
  local out v hash ref
  out=$(GOFLAGS= "$GO" list -m -f '{{.Version}} {{with .Origin}}{{.Hash}} {{.Ref}}{{end}}' "istio.io/istio@$1") || exit 1
  read -r v hash ref <<<"$out"
  log "tag $1: $v${hash:+, commit $hash ($ref)}"
  echo "$1 $v"
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
    need_pin
    t0=$(date +%s%N)
    if all_fresh; then log "all cached in $BIN, istiod $ISTIO in $IBIN ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"; exit 0; fi
    locked do_build missing ;;
  build) locked do_build force ;;
  bindir) echo "$BIN" ;;
  istiobin) need_pin; echo "$IBIN" ;;
  release) need_pin; echo "$ISTIO $ISTIO_VERSION" ;;
  verify) [ -z "${2:-}" ] || { ISTIO=$2; ISTIO_VERSION=$(module_version_of "$2"); }; verify ;;
  resolve) [ -n "${2:-}" ] || { echo "usage: $0 resolve RELEASE" >&2; exit 2; }; resolve "$2" ;;
  crds) [ -z "${2:-}" ] || { ISTIO=$2; ISTIO_VERSION=$(module_version_of "$2"); IBIN=$BIN/istio-$2; }; need_pin; find_go; write_crds ;;
  *) echo "usage: $0 ensure|build|bindir|istiobin|release|verify [RELEASE]|resolve RELEASE|crds [RELEASE]" >&2; exit 2 ;;
esac
