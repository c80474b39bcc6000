#!/usr/bin/env python3
"""Copy the upstream Envoy .proto files that envoy/service/auth/v3/external_auth.proto needs into
protos/, without their validation/versioning annotations (udpa, validate, envoy.annotations, xds
status), which change nothing on the wire and would need four more repositories to compile.

    python3 strip_protos.py DATA_PLANE_API_CHECKOUT   # github.com/envoyproxy/data-plane-api (or envoy/api)

Field names, numbers, types, oneofs and nested messages are kept as they are. base.proto's import of
xds/core/v3/context_params.proto (used only by Node, not by ext_authz) is served by a one-message
stub, protos/xds/core/v3/context_params.proto.
"""
import re
import sys
from pathlib import Path

ROOT = "envoy/service/auth/v3/external_auth.proto"
OUT = Path(__file__).resolve().parent / "protos"


def strip(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)  # comments (none of these files has // inside a string)
    text = re.sub(r'^import "(udpa|validate|envoy/annotations|xds/annotations)/[^"]*";\n', "", text, flags=re.M)
    # option (custom.option)... = value;   (values may span lines and hold {...})
    text = re.sub(r"option\s*\([^)]*\)[^;{]*(\{[^;]*?\}\s*)?;", "", text, flags=re.S)
    # field options: `= 3 [ ... ];` -> `= 3;`
    text = re.sub(r"(=\s*\d+)\s*\[[^\]]*\]\s*;", r"\1;", text, flags=re.S)
    text = re.sub(r"\n\s*\n+", "\n", text)
    return text


def main() -> None:
    src = Path(sys.argv[1])
    seen, todo = set(), [ROOT]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        text = (src / rel).read_text()
        for imp in re.findall(r'^import (?:public )?"([^"]+)";', text, re.M):
            if imp.startswith("envoy/") and not imp.startswith("envoy/annotations/"):
                todo.append(imp)
        out = OUT / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(strip(text))
        print(out.relative_to(OUT))


if __name__ == "__main__":
    main()
