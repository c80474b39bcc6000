#!/usr/bin/env bash
# How long the release `toolgate validate` takes on 5 MB of policies (docs/semantics.md §8), in two
# shapes: many ordinary policies, and a few near the API server's 3 MiB limit whose set lists run far
# past maxItems (the shape whose duplicate check used to take minutes). Prints one line per input:
# its size, the exit status (1 for the long lists: they are invalid), the wall and the CPU time, three runs each.
#
#   bash scripts/measure-validate.sh            # builds target/release/toolgate first
#   TOOLGATE=path/to/toolgate bash scripts/measure-validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TOOLGATE:-}" ]; then
  cargo build --locked --release -p toolgate
  TOOLGATE=target/release/toolgate
fi
WORK=.work/measure-validate
mkdir -p "$WORK"

python3 - "$WORK" <<'EOF'
import sys
from pathlib import Path

work = Path(sys.argv[1])
MB = 5 * 1000 * 1000

# Many ordinary policies: a Gateway, and XBackends with a route each and five policies of ten tools.
out = ["apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n"
       "  gatewayClassName: toolgate\n  listeners: [{name: http, port: 8080, protocol: HTTP}]\n"]
size, b = len(out[0]), 0
while size < MB:
    docs = [f"---\napiVersion: agentic.networking.x-k8s.io/v0alpha0\nkind: XBackend\nmetadata: {{name: b{b}}}\n"
            f"spec: {{mcp: {{serviceName: s{b}, port: 80}}}}\n",
            f"---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{b}}}\n"
            f"spec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [b{b}.example]\n  rules:\n"
            f"  - backendRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: b{b}}}]\n"]
    for p in range(5):
        tools = ", ".join(f"tool-{b}-{p}-{k}" for k in range(10))
        docs.append(f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\n"
                    f"metadata: {{name: b{b}-p{p}}}\nspec:\n"
                    f"  targetRefs: [{{group: agentic.networking.x-k8s.io, kind: XBackend, name: b{b}}}]\n"
                    f"  action: Allow\n  rules:\n  - name: r\n"
                    f"    source: {{type: ServiceAccount, serviceAccount: {{name: agent-{p}}}}}\n"
                    f"    authorization: {{type: Inline, mcp: {{methods: [{{name: tools/call, params: [{tools}]}}]}}}}\n")
    out += docs
    size += sum(map(len, docs))
    b += 1
(work / "ordinary.yaml").write_text("".join(out))

# Two policies of about 2.5 MB each: a set list of about 75,000 headers (maxItems 64).
out = []
for p in range(2):
    head = (f"---\napiVersion: agentic.networking.x-k8s.io/v1alpha1\nkind: XAccessPolicy\nmetadata: {{name: long-{p}}}\n"
            "spec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  action: ExternalAuth\n"
            "  externalAuth:\n    protocol: GRPC\n    backendRef: {name: authz, port: 9000}\n    grpc:\n      allowedHeaders:\n")
    out.append(head + "".join(f"      - x-header-{p}-{i:08d}\n" for i in range(75_000)))
(work / "long-lists.yaml").write_text("".join(out))
EOF

# Wall time and CPU time (user + system: on a busy machine the wall time grows, the CPU time not).
TIMEFORMAT='%R %U %S'
for input in ordinary long-lists; do
  file="$WORK/$input.yaml"
  for run in 1 2 3; do
    set +e
    { time "$TOOLGATE" validate -f "$file" >"$WORK/$input.out" 2>&1; } 2>"$WORK/time"
    status=$?
    set -e
    read -r real user sys <"$WORK/time"
    printf '%-11s %5.2f MB  run %d  exit %s  %5.2f s wall  %5.2f s CPU\n' "$input" \
      "$(stat -c %s "$file" | awk '{ print $1 / 1e6 }')" "$run" "$status" "$real" "$(awk "BEGIN { print $user + $sys }")"
  done
done
