#!/usr/bin/env bash
# tests/istio/cluster.sh: a real Kubernetes control plane (etcd + kube-apiserver v1.36.3, RBAC enforced) and
# a real istiod (pilot-discovery, out of cluster) on loopback, for tests/istio. Binaries from
# tests/istio/gobuild.sh (built from Go modules into the cache on first use). ISTIO=<release> selects the
# Istio release (tests/istio/releases.txt; default: its first line): its istiod and its CRDs.
#
#   tests/istio/cluster.sh start          # etcd + kube-apiserver, CRDs, deploy/namespace.yaml + deploy/rbac.yaml,
#                                         # kubeconfigs; prints the export line for the admin kubeconfig
#   tests/istio/cluster.sh istiod-start   # istiod against it (plaintext xDS on 127.0.0.1:$ISTIO_TEST_XDS_PORT)
#   tests/istio/cluster.sh stop           # stops istiod, the API server and etcd (etcd's data is removed)
#   tests/istio/cluster.sh env            # prints the export line again
#
# Files in $ISTIO_TEST_RUN: admin.kubeconfig (client certificate in system:masters),
# controller.kubeconfig (a token of ServiceAccount toolgate-system/toolgate-controller, so RBAC from
# deploy/rbac.yaml is what the controller gets), gateway.token (a token of default/gw-istio, audience
# istio-ca: what the gateway's Envoy sends istiod), pki/, logs/{etcd,apiserver,istiod}.log.
#
# Settings (environment): ISTIO (above); TOOLGATE_ISTIO_CACHE (see gobuild.sh); ISTIO_TEST_RUN (default
# $TOOLGATE_ISTIO_CACHE/run): this instance's files; ports on 127.0.0.1: ISTIO_TEST_APISERVER_PORT
# (default 17443), ISTIO_TEST_ETCD_PORT (default 13379; the next port is etcd's peer port),
# ISTIO_TEST_XDS_PORT (default 15010), ISTIO_TEST_ISTIOD_HTTP_PORT (default 15080: istiod's debug and
# readiness endpoints), ISTIO_TEST_ISTIOD_MONITORING_PORT (default 15014), ISTIO_TEST_CTRLZ_PORT
# (default 19876). ISTIO_TEST_APISERVER_ARGS: extra kube-apiserver flags.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PREFIX=${TOOLGATE_ISTIO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/istio}
export TOOLGATE_ISTIO_CACHE=$PREFIX
BIN=$PREFIX/bin
# The Istio release, and the directory of its pilot-discovery (gobuild.sh fails on a release it has no pin for).
read -r ISTIO _ < <(bash "$HERE/gobuild.sh" release) || exit 2
export ISTIO
IBIN=$BIN/istio-$ISTIO
RUN=${ISTIO_TEST_RUN:-$PREFIX/run}
PORT=${ISTIO_TEST_APISERVER_PORT:-17443}
EPORT=${ISTIO_TEST_ETCD_PORT:-13379}
XDS_PORT=${ISTIO_TEST_XDS_PORT:-15010}
IHTTP_PORT=${ISTIO_TEST_ISTIOD_HTTP_PORT:-15080}
IMON_PORT=${ISTIO_TEST_ISTIOD_MONITORING_PORT:-15014}
CTRLZ_PORT=${ISTIO_TEST_CTRLZ_PORT:-19876}

log() { echo "cluster: $*" >&2; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
kc() { "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }

# make_pki, write_admin_kubeconfig, start_etcd, stop_pid (shared with tests/k8s/apiserver.sh).
# shellcheck source=tests/k8s/control-plane.sh
source "$REPO/tests/k8s/control-plane.sh"

make_certs() {
  make_pki "$RUN/pki" toolgate-test-ca kube-apiserver IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc
  # ServiceAccount token signing (TokenRequest: `kubectl create token`).
  [ -f "$RUN/pki/sa.key" ] && return 0
  openssl genrsa -out "$RUN/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$RUN/pki/sa.key" -pubout -out "$RUN/pki/sa.pub" 2>/dev/null
}

running() { [ -f "$RUN/$1.pid" ] && grep -qa "$BIN/" "/proc/$(cat "$RUN/$1.pid")/cmdline" 2>/dev/null; }

wait_http() {  # wait_http URL PIDNAME WHAT [curl args...]: polls until 200 (60 s)
  local url=$1 pidname=$2 what=$3 t0 i; shift 3; t0=$(date +%s%N)
  for i in $(seq 1 1200); do
    if curl -sf "$@" "$url" >/dev/null 2>&1; then log "$what ready in $(ms_since "$t0") ms"; return 0; fi
    kill -0 "$(cat "$RUN/$pidname.pid")" 2>/dev/null || break
    sleep 0.05
  done
  log "$what did not become ready; see $RUN/logs"; tail -30 "$RUN/logs/$pidname.log" >&2; return 1
}

have() { local b; for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

do_start() {
  have etcd kube-apiserver kubectl || bash "$HERE/gobuild.sh" ensure
  if running apiserver; then log "already running (pid $(cat "$RUN/apiserver.pid")); '$0 stop' first"; exit 1; fi
  mkdir -p "$RUN/logs"; make_certs
  rm -rf "$RUN/etcd"
  write_admin_kubeconfig "$RUN" test "$PORT"
  local t0; t0=$(date +%s%N)
  start_etcd "$BIN/etcd" "$RUN" toolgate-test "$EPORT"
  # shellcheck disable=SC2086
  start_kube_apiserver "$BIN" "$RUN" "$PORT" "$EPORT" ${ISTIO_TEST_APISERVER_ARGS:-}
  wait_http "https://127.0.0.1:$PORT/readyz" apiserver "kube-apiserver (https://127.0.0.1:$PORT)" \
    --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" || { do_stop; exit 1; }

  t0=$(date +%s%N)
  kc apply --server-side -f "$REPO/crds" -f "$REPO/tests/k8s/thirdparty-crds/gateway-api-v1.6.1" \
    -f "$REPO/tests/k8s/thirdparty-crds/istio" -f "$HERE/crds/$ISTIO" >/dev/null
  wait_crds_established kc 60
  kc create namespace istio-system >/dev/null
  kc apply --server-side -f "$REPO/deploy/namespace.yaml" -f "$REPO/deploy/rbac.yaml" >/dev/null
  write_controller_kubeconfig kc "$RUN" "$PORT"
  # The gateway's identity towards istiod: a token of ServiceAccount default/gw-istio (audience istio-ca),
  # sent by its Envoy as gRPC metadata. istiod serves a proxy Secrets (the Gateway's TLS credentials,
  # over SDS on the ADS stream) only when it has verified the proxy's identity (XDS_AUTH, istiod-start).
  kc create serviceaccount gw-istio -n default >/dev/null
  kc create token gw-istio -n default --audience istio-ca --duration 24h > "$RUN/gateway.token"
  log "CRDs, namespaces, RBAC and the controller's and the gateway's tokens in $(ms_since "$t0") ms"
  echo "export KUBECONFIG=$RUN/admin.kubeconfig"
}

do_istiod_start() {
  [ -x "$IBIN/pilot-discovery" ] || bash "$HERE/gobuild.sh" ensure
  if running istiod; then log "istiod already running (pid $(cat "$RUN/istiod.pid"))"; exit 1; fi
  mkdir -p "$RUN/istiod" "$RUN/logs"
  cat > "$RUN/istiod/mesh.yaml" <<EOF
rootNamespace: istio-system
trustDomain: cluster.local
# No istio-agent serves certificates (SDS) to the gateway's Envoy: no automatic mutual TLS to upstreams.
enableAutoMtls: false
defaultConfig:
  discoveryAddress: 127.0.0.1:$XDS_PORT
EOF
  : > "$RUN/istiod/meshNetworks.yaml"
  local t0; t0=$(date +%s%N)
  # Out of cluster: no CA (ENABLE_CA_SERVER=false: no certificates at all, no secure gRPC), no webhooks
  # (no injector, no validation webhook controller, webhooks multiplexed on the plain HTTP port), no
  # gateway Deployments/Services (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false), Gateway API on,
  # one istiod (no leader election). xDS clients are authenticated on the plaintext port too
  # (XDS_AUTH=true XDS_AUTH_PLAINTEXT=true: a ServiceAccount token in the stream's `authorization`
  # metadata, checked with a TokenReview): istiod's SDS generator serves no Secret to a proxy without a
  # verified identity ("is not authorized to receive" in its log), so a Gateway's TLS listener would
  # never get its certificate (tests/istio/README.md).
  (cd "$RUN/istiod" && exec env POD_NAMESPACE=istio-system POD_NAME=istiod-test CLUSTER_ID=Kubernetes \
    ENABLE_CA_SERVER=false PILOT_CERT_PROVIDER=none XDS_AUTH=true XDS_AUTH_PLAINTEXT=true INJECT_ENABLED=false \
    VALIDATION_WEBHOOK_CONFIG_NAME= PILOT_ENABLE_GATEWAY_API=true PILOT_ENABLE_GATEWAY_API_STATUS=true \
    PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER=true \
    ENABLE_LEADER_ELECTION=false KUBECONFIG="$RUN/admin.kubeconfig" \
    nohup "$IBIN/pilot-discovery" discovery --kubeconfig "$RUN/admin.kubeconfig" \
      --meshConfig "$RUN/istiod/mesh.yaml" --networksConfig "$RUN/istiod/meshNetworks.yaml" \
      --httpAddr "127.0.0.1:$IHTTP_PORT" --httpsAddr "" --grpcAddr "127.0.0.1:$XDS_PORT" --secureGRPCAddr "" \
      --monitoringAddr "127.0.0.1:$IMON_PORT" --ctrlz_address 127.0.0.1 --ctrlz_port "$CTRLZ_PORT" \
      --domain cluster.local ${ISTIO_TEST_ISTIOD_ARGS:-} > "$RUN/logs/istiod.log" 2>&1) &
  echo $! > "$RUN/istiod.pid"   # the subshell execs env, which execs pilot-discovery: the same pid
  wait_http "http://127.0.0.1:$IHTTP_PORT/ready" istiod "istiod $ISTIO (xDS 127.0.0.1:$XDS_PORT)" || { do_istiod_stop; exit 1; }
}

do_istiod_stop() { stop_pid "$RUN" istiod "$BIN"; }

do_stop() {
  stop_pid "$RUN" istiod "$BIN"; stop_pid "$RUN" apiserver "$BIN"; stop_pid "$RUN" etcd "$BIN"
  rm -rf "$RUN/etcd"
}

case "${1:-}" in
  start) do_start ;;
  istiod-start) do_istiod_start ;;
  istiod-stop) do_istiod_stop ;;
  stop) do_stop ;;
  env) echo "export KUBECONFIG=$RUN/admin.kubeconfig" ;;
  *) echo "usage: $0 start|istiod-start|istiod-stop|stop|env" >&2; exit 2 ;;
esac
