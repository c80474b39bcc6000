#!/usr/bin/env bash
# tests/k8s/kube-apiserver.sh: a real kube-apiserver (v1.36, RBAC and the default admission plugins,
# the core API) with etcd on loopback, for tests/k8s's controller tests: the controller runs there with
# its ServiceAccount's token, so deploy/rbac.yaml (its RBAC and its ValidatingAdmissionPolicy) is what
# it may do, as in a cluster. Binaries: kube-apiserver, etcd and kubectl from tests/istio/gobuild.sh's
# cache (`bash tests/istio/gobuild.sh ensure`; tests/k8s/run.sh runs it). The CRD-only server of
# tests/k8s/apiserver.sh cannot serve this: no Namespaces, no RBAC, no ConfigMaps.
#
#   tests/k8s/kube-apiserver.sh start   # etcd + kube-apiserver; on a new store also the CRDs, namespace
#                                       # istio-system, deploy/namespace.yaml + deploy/rbac.yaml and the
#                                       # controller's kubeconfig
#   tests/k8s/kube-apiserver.sh stop
#
# Files in $KUBE_TEST_RUN: admin.kubeconfig (client certificate in system:masters), controller.kubeconfig
# (a token of ServiceAccount toolgate-system/toolgate-controller), pki/, logs/{etcd,apiserver}.log.
# Settings (environment): TOOLGATE_ISTIO_CACHE (tests/istio/gobuild.sh's), KUBE_TEST_RUN (this
# instance's files), KUBE_TEST_PORT and KUBE_TEST_ETCD_PORT (127.0.0.1; the port after etcd's is its
# peer port), KUBE_TEST_KEEP_DATA=1: 'stop' keeps etcd's data and 'start' reuses it (an API server
# stopped and started again with the same store, as in an outage).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${TOOLGATE_ISTIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio}/bin
RUN=${KUBE_TEST_RUN:?set KUBE_TEST_RUN}
PORT=${KUBE_TEST_PORT:-18443}
EPORT=${KUBE_TEST_ETCD_PORT:-14379}
KEEP=${KUBE_TEST_KEEP_DATA:-0}

log() { echo "kube-apiserver.sh: $*" >&2; }
kc() { "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }
# make_pki, write_admin_kubeconfig, start_etcd, start_kube_apiserver, write_controller_kubeconfig,
# stop_pid, wait_crds_established.
# shellcheck source=tests/k8s/control-plane.sh
source "$HERE/control-plane.sh"

# The key that signs ServiceAccount tokens (TokenRequest: `kubectl create token`); kept across
# restarts, so tokens issued before stay valid.
make_sa_key() {
  [ -f "$RUN/pki/sa.key" ] && return 0
  openssl genrsa -out "$RUN/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$RUN/pki/sa.key" -pubout -out "$RUN/pki/sa.pub" 2>/dev/null
}

do_start() {
  local b
  for b in etcd kube-apiserver kubectl; do
    [ -x "$BIN/$b" ] || { log "$BIN/$b missing: run 'bash tests/istio/gobuild.sh ensure'"; exit 1; }
  done
  mkdir -p "$RUN/logs"
  make_pki "$RUN/pki" toolgate-k8s-test-ca kube-apiserver IP:127.0.0.1,DNS:localhost
  make_sa_key
  local fresh=1
  if [ "$KEEP" = 1 ] && [ -d "$RUN/etcd" ]; then fresh=0; else rm -rf "$RUN/etcd"; fi
  write_admin_kubeconfig "$RUN" kube "$PORT"
  local t0 i ready=0; t0=$(date +%s%N)
  start_etcd "$BIN/etcd" "$RUN" toolgate-k8s-test "$EPORT"
  start_kube_apiserver "$BIN" "$RUN" "$PORT" "$EPORT"
  for i in $(seq 1 1200); do
    if curl -sf --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" \
         "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$(cat "$RUN/apiserver.pid")" 2>/dev/null || break
    sleep 0.05
  done
  [ "$ready" = 1 ] || { log "not ready; see $RUN/logs"; tail -20 "$RUN/logs/apiserver.log" >&2; do_stop; exit 1; }
  log "ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms (https://127.0.0.1:$PORT)"
  [ "$fresh" = 1 ] || return 0
  kc apply --server-side -f "$REPO/crds" -f "$REPO/tests/k8s/thirdparty-crds/gateway-api-v1.6.1" \
    -f "$REPO/tests/k8s/thirdparty-crds/istio" >/dev/null
  wait_crds_established kc 60
  kc create namespace istio-system >/dev/null
  kc apply --server-side -f "$REPO/deploy/namespace.yaml" -f "$REPO/deploy/rbac.yaml" >/dev/null
  write_controller_kubeconfig kc "$RUN" "$PORT"
}

do_stop() {
  stop_pid "$RUN" apiserver "$BIN"; stop_pid "$RUN" etcd "$BIN"
  [ "$KEEP" = 1 ] || rm -rf "$RUN/etcd"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
