#!/usr/bin/env bash
# CRDs against a real Kubernetes API server: installs the server into the cache when it is missing
# (tests/k8s/apiserver.sh ensure; 3-5 minutes once), then runs the controller's CRD tests, which start
# their own server instance on free ports, apply crds/, and check every case of tests/k8s/cases/ with
# both the server and `toolgate validate`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tests/k8s/apiserver.sh ensure
exec ${CARGO:-cargo} test --locked -p toolgate --test crd_apiserver -- --include-ignored --nocapture
