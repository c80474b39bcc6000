#!/usr/bin/env bash
# CRDs and the controller against a real Kubernetes API server: installs the server into the cache when it is missing
# (tests/k8s/apiserver.sh ensure; 3-5 minutes once), then runs the controller's CRD tests, which start
# their own server instance on free ports, apply crds/, and check every case of tests/k8s/cases/ with
# both the server and `toolgate validate`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/k8s/apiserver.sh ensure
# --workspace, as `make test-unit`: dependencies get the same features, so this reuses its build (with -p,
# feature unification differs and about 2 minutes of crates are compiled again).
${CARGO:-cargo} test --locked --workspace --test crd_apiserver -- --include-ignored --nocapture
# `toolgate controller` against the same kind of server (its own instance), and its WasmPlugin's
# pluginConfig in a real Envoy.
exec .venv/bin/pytest tests/k8s -q -ra
