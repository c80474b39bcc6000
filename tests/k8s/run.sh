#!/usr/bin/env bash
# CRDs and the controller against a real Kubernetes API server: installs the CRD-only server into the cache when it is
# missing (tests/k8s/apiserver.sh ensure; 3-5 minutes once), then runs the controller's CRD tests, which start
# their own server instance on free ports, apply crds/, and check every case of tests/k8s/cases/ with
# both the server and `toolgate validate`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/k8s/apiserver.sh ensure
# Under make -j (make test) MAKEFLAGS names a jobserver this non-recursive recipe was not given: cargo
# and rustdoc would warn that they cannot connect to it.
unset MAKEFLAGS MFLAGS
# The same target selection as `make test-unit` (`cargo test --workspace`), filtered to the one test: it
# reuses that build. Any narrower selection (-p toolgate, --test crd_apiserver) resolves dependency
# features differently and compiles about 2 minutes of crates again.
${CARGO:-cargo} test --locked --workspace -- --include-ignored --nocapture crds_and_cases_against_a_real_api_server
# `toolgate controller` against kube-apiserver (tests/k8s/kube-apiserver.sh: the CRD-only server has no
# Namespaces, RBAC or ConfigMaps), built by tests/istio/gobuild.sh into its cache (once; then nothing),
# and its WasmPlugin's pluginConfig in a real Envoy.
bash tests/istio/gobuild.sh ensure
exec .venv/bin/pytest tests/k8s -q -ra
