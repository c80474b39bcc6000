# tests/k8s/control-plane.sh: what the test control planes share, sourced by tests/k8s/apiserver.sh
# (the CRD-only API server), tests/k8s/kube-apiserver.sh (kube-apiserver for the controller's tests)
# and tests/istio/cluster.sh (kube-apiserver and istiod): their certificates, their admin kubeconfig,
# their etcd, their kube-apiserver, the controller's kubeconfig and how a process of theirs is stopped. Every function takes what it works on as
# arguments.

# make_pki DIR CA_CN SERVER_CN SERVER_SANS: in DIR, a CA (ca.crt, ca.key), the API server's certificate
# (server.crt, server.key; subjectAltName SERVER_SANS) and the admin's client certificate (admin.crt,
# admin.key) in group system:masters, which every authorizer allows everything. Nothing when DIR already
# has them: a restarted server keeps its CA, so kubeconfigs written before still work.
make_pki() {
  local P=$1 ca_cn=$2 server_cn=$3 sans=$4
  [ -f "$P/admin.crt" ] && return 0
  mkdir -p "$P"
  local EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${EC[@]}" -keyout "$P/ca.key" -out "$P/ca.crt" -days 3650 -subj "/CN=$ca_cn" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$sans" > "$P/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' > "$P/client.ext"
  local name subject ext
  for name in server admin; do
    if [ "$name" = server ]; then subject="/CN=$server_cn" ext=server.ext; else subject="/O=system:masters/CN=admin" ext=client.ext; fi
    openssl req "${EC[@]}" -keyout "$P/$name.key" -out "$P/$name.csr" -subj "$subject" 2>/dev/null
    openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
      -out "$P/$name.crt" -days 3650 -extfile "$P/$ext" 2>/dev/null
  done
}

# write_admin_kubeconfig RUN CLUSTER PORT: RUN/admin.kubeconfig, the admin of make_pki's RUN/pki for the
# API server on https://127.0.0.1:PORT, as cluster and context CLUSTER, namespace default.
write_admin_kubeconfig() {
  local run=$1 cluster=$2 port=$3
  cat > "$run/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: $cluster, cluster: {server: "https://127.0.0.1:$port", certificate-authority: "$run/pki/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$run/pki/admin.crt", client-key: "$run/pki/admin.key"}}]
contexts: [{name: $cluster, context: {cluster: $cluster, user: admin, namespace: default}}]
current-context: $cluster
EOF
}

# start_etcd ETCD RUN NAME PORT: the etcd binary ETCD in the background on 127.0.0.1:PORT (PORT+1 for
# peers), its data in RUN/etcd, its log in RUN/logs/etcd.log, its pid in RUN/etcd.pid. No fsync: the
# data is thrown away.
start_etcd() {
  local etcd=$1 run=$2 name=$3 port=$4
  nohup "$etcd" --name "$name" --data-dir "$run/etcd" --log-level warn --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$((port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-cluster "$name=http://127.0.0.1:$((port + 1))" > "$run/logs/etcd.log" 2>&1 &
  echo $! > "$run/etcd.pid"
}

# stop_pid RUN NAME BINDIR: stops the process whose pid is in RUN/NAME.pid (TERM, then KILL after 10 s)
# and removes the file. Only a process started from BINDIR is signalled: the pid file may be stale and
# its pid reused.
stop_pid() {
  local run=$1 name=$2 bindir=$3 pid i
  [ -f "$run/$name.pid" ] || return 0
  pid=$(cat "$run/$name.pid")
  if [ -n "$pid" ] && grep -qa "$bindir/" "/proc/$pid/cmdline" 2>/dev/null && kill "$pid" 2>/dev/null; then
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$run/$name.pid"
}

# wait_crds_established KUBECTL SECONDS: until every CRD's Established condition is True. Each CRD is
# asked on its condition: `kubectl wait --all crd` fails at once ("accessor error: <nil>") on a CRD
# whose status has no conditions yet, which is how a fresh machine once lost a whole suite.
wait_crds_established() {
  local kubectl=$1 deadline=$((SECONDS + $2)) out pending="(none listed yet)"
  while [ $SECONDS -lt $deadline ]; do
    # A CRD without conditions yet shows <none>; a failed listing counts as nothing Established.
    if out=$($kubectl get crd --no-headers \
               -o 'custom-columns=NAME:.metadata.name,ESTABLISHED:.status.conditions[?(@.type=="Established")].status' 2>&1); then
      pending=$(awk '$2 != "True"' <<<"$out")
      [ -n "$out" ] && [ -z "$pending" ] && return 0
    else
      pending=$out
    fi
    sleep 0.1
  done
  echo "CRDs not Established after $2 s: $pending" >&2
  return 1
}

# start_kube_apiserver BIN RUN PORT EPORT [ARGS...]: BIN/kube-apiserver in the background on
# 127.0.0.1:PORT over the etcd of start_etcd on EPORT, with make_pki's RUN/pki and the ServiceAccount key
# RUN/pki/sa.{key,pub}: RBAC and the default admission plugins (ValidatingAdmissionPolicy among them).
# Its log in RUN/logs/apiserver.log, its pid in RUN/apiserver.pid. --endpoint-reconciler-type none: the
# `kubernetes` Service gets no endpoints (they would be 127.0.0.1, which Endpoints/EndpointSlice
# validation rejects); nothing here needs them.
start_kube_apiserver() {
  local bin=$1 run=$2 port=$3 eport=$4; shift 4
  nohup "$bin/kube-apiserver" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
    --etcd-servers "http://127.0.0.1:$eport" --cert-dir "$run/pki" \
    --tls-cert-file "$run/pki/server.crt" --tls-private-key-file "$run/pki/server.key" \
    --client-ca-file "$run/pki/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$run/pki/sa.pub" --service-account-signing-key-file "$run/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    --enable-priority-and-fairness=false --profiling=false "$@" > "$run/logs/apiserver.log" 2>&1 &
  echo $! > "$run/apiserver.pid"
}

# write_controller_kubeconfig KUBECTL RUN PORT: RUN/controller.kubeconfig, a token of the ServiceAccount
# toolgate-system/toolgate-controller for https://127.0.0.1:PORT, so the API server applies that
# account's RBAC (deploy/rbac.yaml) to the controller.
write_controller_kubeconfig() {
  local kubectl=$1 run=$2 port=$3 token
  token=$($kubectl create token toolgate-controller -n toolgate-system --duration 24h)
  cat > "$run/controller.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:$port", certificate-authority: "$run/pki/ca.crt"}}]
users: [{name: toolgate-controller, user: {token: "$token"}}]
contexts: [{name: test, context: {cluster: test, user: toolgate-controller, namespace: toolgate-system}}]
current-context: test
EOF
}
