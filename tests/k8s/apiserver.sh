#!/usr/bin/env bash
# tests/k8s/apiserver.sh: a real Kubernetes API server for Toolgate's CRD tests (`make test`), with no
# Docker and no downloads outside Debian's own package mirror (the one apt is set up with).
#
# Toolgate's copy of kube-crd-apiserver.sh. What it runs: k8s.io/apiextensions-apiserver (the upstream
# code that serves CustomResourceDefinitions and custom resources inside kube-apiserver), compiled here
# from Debian unstable's Go source packages with Debian's Go toolchain (GOPATH mode, fully offline),
# plus etcd and kubectl from Debian. It serves CRDs, CEL x-kubernetes-validations, /status and /scale,
# watch, SSA, OpenAPI and discovery; it does NOT serve the core API (namespaces, configmaps, RBAC, ...).
#
#   tests/k8s/apiserver.sh ensure           # install unless already installed (3-5 min on 2 cores, once)
#   tests/k8s/apiserver.sh install          # (re)install
#   tests/k8s/apiserver.sh start            # about 1 s (installs first when needed); prints: export KUBECONFIG=...
#   tests/k8s/apiserver.sh stop
#   tests/k8s/apiserver.sh env              # prints the export line again
#
# Needs (Debian): apt-get, apt-cache, dpkg-deb, openssl, curl, flock (util-linux) and
# debian-archive-keyring; about 4.5 GB free while installing, 300 MB after.
#
# Settings (environment): KCAS_PREFIX (default ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/kcas): where the
# install is cached, outside the clone, and reused when present.
# KCAS_RUN (default $KCAS_PREFIX/run): certs, etcd data, logs and pid files for one instance.
# KCAS_PORT (default 16443) and KCAS_ETCD_PORT (default 12379; the next port is used for
# etcd peers): TCP ports on 127.0.0.1. KCAS_APISERVER_ARGS: extra server flags (e.g. -v=3,
# --feature-gates=...). Set KCAS_KEEP_SOURCES=1 to keep the 2.5 GB of Go
# sources and the Go build cache after install. KCAS_SUITE (default sid) is the Debian suite.
# KCAS_KEEP_DATA=1: 'stop' keeps etcd's data and 'start' reuses it (an API server stopped and started
# again with the same store, as in an outage; the certificates are kept either way).
set -euo pipefail

PREFIX=${KCAS_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/kcas}
RUN=${KCAS_RUN:-$PREFIX/run}
PORT=${KCAS_PORT:-16443}
EPORT=${KCAS_ETCD_PORT:-12379}
SUITE=${KCAS_SUITE:-sid}

log() { echo "kcas: $*" >&2; }
# debian_mirror, private_apt (and the setup scripts' package helpers).
# shellcheck source=scripts/debian-packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/debian-packages.sh"
# make_pki, write_admin_kubeconfig, start_etcd, stop_pid (shared with tests/istio/cluster.sh).
# shellcheck source=tests/k8s/control-plane.sh
source "$(dirname "${BASH_SOURCE[0]}")/control-plane.sh"

do_install() {
  local t
  for t in apt-get apt-cache dpkg-deb openssl curl; do command -v $t >/dev/null || { log "needs $t"; exit 1; }; done
  local A=$PREFIX/apt ROOT=$PREFIX/root
  rm -rf "$A/debs" "$ROOT" "$PREFIX/gopath"
  mkdir -p "$A/debs" "$ROOT" "$PREFIX/bin" "$PREFIX/gopath/src/kcas"
  local MIRROR=${KCAS_MIRROR:-}
  [ -n "$MIRROR" ] || MIRROR=$(debian_mirror)
  [ -n "$MIRROR" ] || { log "no Debian mirror found in the apt configuration; set KCAS_MIRROR"; exit 1; }
  private_apt "$A" "$SUITE" "$MIRROR"
  apt-get "${APT_OPTS[@]}" update >&2

  log "resolving Go build dependencies of golang-k8s-apiextensions-apiserver-dev in $SUITE"
  local pkgs
  pkgs=$(apt-cache "${APT_OPTS[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
           --no-breaks --no-replaces --no-enhances golang-k8s-apiextensions-apiserver-dev golang-go \
         | grep -E '^golang-' | sort -u)
  log "downloading $(echo "$pkgs" | wc -l) source packages + etcd-server + kubectl"
  # shellcheck disable=SC2086
  (cd "$A/debs" && apt-get "${APT_OPTS[@]}" download $pkgs etcd-server kubectl >&2)
  for f in "$A"/debs/*.deb; do dpkg-deb -x "$f" "$ROOT"; done
  command install -m 0755 "$ROOT/usr/bin/etcd" "$ROOT/usr/bin/kubectl" "$PREFIX/bin/"

  local KVER GOROOT
  KVER=$(dpkg-deb -f "$A"/debs/golang-k8s-apiextensions-apiserver-dev_*.deb Version)  # e.g. 0.36.4-1
  GOROOT=$(ls -d "$ROOT"/usr/lib/go-1.* | sort -V | tail -1)
  # GOPATH mode over Debian's /usr/share/gocode tree: no module downloads at all.
  export GOROOT PATH="$GOROOT/bin:$PATH" GOPATH="$PREFIX/gopath:$ROOT/usr/share/gocode" GO111MODULE=off \
         GOPROXY=off GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 GOCACHE="$PREFIX/gocache"
  local KV=${KVER%-*}                      # 0.36.4-1 -> 0.36.4 (k8s.io libraries) = Kubernetes v1.36.4
  local LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=v1.${KV#0.} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.gitCommit=debian-golang-k8s-apiextensions-apiserver-$KVER"

  write_launcher "$PREFIX/gopath/src/kcas/main.go"
  # A go.mod next to it lets GOPATH mode resolve ".../v3" imports (minimal module compatibility).
  printf 'module kcas\n\ngo 1.24\n' > "$PREFIX/gopath/src/kcas/go.mod"
  log "building with $(go version) (k8s.io/apiextensions-apiserver $KVER); takes a few minutes"
  # Upstream main.go as is (needs the fake kubeconfig flags used by 'start'; no /apis root discovery).
  go build -trimpath -ldflags "$LDFLAGS" -o "$PREFIX/bin/apiextensions-apiserver" k8s.io/apiextensions-apiserver
  # Same server plus /apis + /api discovery and /openapi/v2 (kubectl apply/get/explain work).
  if ! go build -trimpath -ldflags "$LDFLAGS" -o "$PREFIX/bin/kube-crd-apiserver" kcas; then
    log "WARNING: launcher did not build against this Debian snapshot; 'start' will use the plain upstream binary"
  fi
  {
    echo "kubernetes (apiextensions-apiserver) $KVER"
    echo "go $(go env GOVERSION)"
    echo "etcd $(dpkg-deb -f "$A"/debs/etcd-server_*.deb Version)"
    echo "kubectl $(dpkg-deb -f "$A"/debs/kubectl_*.deb Version)"
  } > "$PREFIX/VERSIONS"
  if [ "${KCAS_KEEP_SOURCES:-0}" != 1 ]; then rm -rf "$ROOT" "$A/debs" "$PREFIX/gocache"; fi
  log "installed: $(tr '\n' ';' < "$PREFIX/VERSIONS") in $PREFIX/bin ($(du -sh "$PREFIX" | cut -f1))"
}

write_launcher() {
  cat > "$1" <<'EOF'
// kube-crd-apiserver: upstream k8s.io/apiextensions-apiserver main.go plus the root
// discovery (/apis, /api) that kube-apiserver normally gets from kube-aggregator, and
// /openapi/v2 (which also switches on per-CRD OpenAPI v2/v3 publishing).
package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/spf13/cobra"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	extapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/cli"
)

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

func main() {
	ctx := genericapiserver.SetupSignalContext()
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	cmd := &cobra.Command{
		Use:   "kube-crd-apiserver",
		Short: "Standalone k8s.io/apiextensions-apiserver with root discovery",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ServerRunOptions.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			config, err := o.Config()
			if err != nil {
				return err
			}
			config.GenericConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(
				openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions),
				openapinamer.NewDefinitionNamer(extapiserver.Scheme, scheme.Scheme))
			server, err := config.Complete().New(genericapiserver.NewEmptyDelegate())
			if err != nil {
				return err
			}
			installRootDiscovery(server.GenericAPIServer)
			return server.GenericAPIServer.PrepareRun().RunWithContext(c.Context())
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.Flags())
	os.Exit(cli.Run(cmd))
}

func writeJSON(w http.ResponseWriter, obj interface{}) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

func installRootDiscovery(s *genericapiserver.GenericAPIServer) {
	agg := s.AggregatedDiscoveryGroupManager // apiextensions.k8s.io and every established CRD group
	legacyAPIs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.Header.Set("Accept", aggregatedAccept)
		r2.Header.Del("If-None-Match")
		rec := httptest.NewRecorder()
		agg.ServeHTTP(rec, r2)
		var doc apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
		for _, g := range doc.Items {
			ag := metav1.APIGroup{Name: g.Name}
			for _, v := range g.Versions {
				ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.Name + "/" + v.Version, Version: v.Version})
			}
			if len(ag.Versions) > 0 {
				ag.PreferredVersion = ag.Versions[0]
			}
			list.Groups = append(list.Groups, ag)
		}
		writeJSON(w, list)
	})
	apis := aggregated.WrapAggregatedDiscoveryToHandler(legacyAPIs, agg, nil)
	s.Handler.GoRestfulContainer.Add(apis.GenerateWebService("/apis", metav1.APIGroupList{}))

	// The core group is not served here. Advertise "v1" with no resources (rather than a 404
	// or an empty list): client-go and kube-rs discovery then work and simply find nothing.
	legacyCore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	})
	coreAgg := aggregated.NewResourceManager("api")
	coreAgg.AddGroupVersion("", apidiscoveryv2.APIVersionDiscovery{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{}})
	core := aggregated.WrapAggregatedDiscoveryToHandler(legacyCore, coreAgg, nil)
	s.Handler.GoRestfulContainer.Add(core.GenerateWebService("/api", metav1.APIVersions{}))
	coreV1 := new(restful.WebService).Path("/api/v1").Produces(restful.MIME_JSON)
	coreV1.Route(coreV1.GET("/").To(func(_ *restful.Request, resp *restful.Response) {
		writeJSON(resp.ResponseWriter, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1", APIResources: []metav1.APIResource{}})
	}).Doc("get available resources").Operation("getCoreAPIResources").Writes(metav1.APIResourceList{}))
	s.Handler.GoRestfulContainer.Add(coreV1)
}
EOF
}

installed() {
  [ -x "$PREFIX/bin/etcd" ] && [ -x "$PREFIX/bin/kubectl" ] && [ -f "$PREFIX/VERSIONS" ] &&
    { [ -x "$PREFIX/bin/kube-crd-apiserver" ] || [ -x "$PREFIX/bin/apiextensions-apiserver" ]; }
}

# Installs unless installed; concurrent callers wait for one install (flock on $PREFIX.lock).
do_ensure() {
  installed && return 0
  command -v flock >/dev/null || { log "needs flock (util-linux)"; exit 1; }
  mkdir -p "$(dirname "$PREFIX")"
  exec 9>"$PREFIX.lock"
  flock 9
  if ! installed; then
    log "no install in $PREFIX: installing (3-5 minutes, once)"
    do_install
  fi
  flock -u 9
}

do_start() {
  local BIN=$PREFIX/bin SERVER
  do_ensure
  SERVER=$BIN/kube-crd-apiserver; [ -x "$SERVER" ] || SERVER=$BIN/apiextensions-apiserver
  if [ -f "$RUN/apiserver.pid" ] && kill -0 "$(cat "$RUN/apiserver.pid")" 2>/dev/null; then
    log "already running (pid $(cat "$RUN/apiserver.pid")); '$0 stop' first"; exit 1
  fi
  mkdir -p "$RUN/logs"; make_pki "$RUN/pki" kcas-ca localhost IP:127.0.0.1,DNS:localhost
  [ "${KCAS_KEEP_DATA:-0}" = 1 ] || rm -rf "$RUN/etcd"
  # Unreachable kubeconfig for the 'core API' the server would normally delegate to (the
  # same trick as upstream's apiextensions integration-test fixture).
  cat > "$RUN/none.kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
EOF
  write_admin_kubeconfig "$RUN" kcas "$PORT"
  local t0; t0=$(date +%s%N)
  start_etcd "$BIN/etcd" "$RUN" kcas "$EPORT"
  nohup "$SERVER" --bind-address 127.0.0.1 --secure-port "$PORT" \
    --etcd-servers "http://127.0.0.1:$EPORT" \
    --tls-cert-file "$RUN/pki/server.crt" --tls-private-key-file "$RUN/pki/server.key" \
    --client-ca-file "$RUN/pki/ca.crt" \
    --authentication-skip-lookup --authentication-kubeconfig "$RUN/none.kubeconfig" \
    --authorization-kubeconfig "$RUN/none.kubeconfig" --kubeconfig "$RUN/none.kubeconfig" \
    --disable-admission-plugins NamespaceLifecycle,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook \
    --enable-priority-and-fairness=false ${KCAS_APISERVER_ARGS:-} > "$RUN/logs/apiserver.log" 2>&1 &
  echo $! > "$RUN/apiserver.pid"
  # 'informer-sync' never passes (its informers point at the unreachable core API); ignore it.
  local i
  for i in $(seq 1 600); do
    if curl -sf --cacert "$RUN/pki/ca.crt" "https://127.0.0.1:$PORT/readyz?exclude=informer-sync" >/dev/null 2>&1; then
      log "ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms ($(basename "$SERVER"), https://127.0.0.1:$PORT)"
      echo "export KUBECONFIG=$RUN/admin.kubeconfig"
      return 0
    fi
    kill -0 "$(cat "$RUN/apiserver.pid")" 2>/dev/null || break
    sleep 0.05
  done
  log "did not become ready; see $RUN/logs"; tail -20 "$RUN/logs/apiserver.log" >&2; do_stop; exit 1
}

do_stop() {
  stop_pid "$RUN" apiserver "$PREFIX/bin"; stop_pid "$RUN" etcd "$PREFIX/bin"
  [ "${KCAS_KEEP_DATA:-0}" = 1 ] || rm -rf "$RUN/etcd"   # fresh store on the next start
}

case "${1:-}" in
  install) do_install ;;
  ensure) do_ensure ;;
  start) do_start ;;
  stop) do_stop ;;
  env) echo "export KUBECONFIG=$RUN/admin.kubeconfig" ;;
  *) echo "usage: $0 ensure|install|start|stop|env" >&2; exit 2 ;;
esac
