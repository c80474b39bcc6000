#!/usr/bin/env python3
"""Regenerate the golden encodings (*.hex) from the text-format messages (*.textproto) with Google's
protobuf runtime and the upstream .proto files in protos/ (see strip_protos.py):

    python3 -m venv /tmp/v && /tmp/v/bin/pip install grpcio-tools googleapis-common-protos
    /tmp/v/bin/python gen_golden.py

Each .textproto names its message type on its first line (`# proto-message: full.Name`). Encoding is
deterministic (map entries sorted by key), fields in field-number order, as protobuf runtimes write
them. tests/golden.rs decodes each .hex with the hand-written prost structs, compares with the same
message built in Rust, and checks that prost's encoding is byte for byte the same.
"""
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc_tools
from google.protobuf import symbol_database, text_format
import google.rpc.status_pb2  # noqa: F401  (google/rpc/status.proto, from googleapis-common-protos)

HERE = Path(__file__).resolve().parent
PROTOS = HERE / "protos"


def main() -> None:
    site = Path(google.rpc.status_pb2.__file__).parents[2]
    wkt = Path(grpc_tools.__file__).parent / "_proto"
    out = Path(tempfile.mkdtemp())
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"-I{wkt}", f"-I{site}",
                    f"--python_out={out}", *files], check=True)
    sys.path.insert(0, str(out))
    for f in files:
        if f.startswith("envoy/"):
            importlib.import_module(f[:-len(".proto")].replace("/", ".") + "_pb2")
    db = symbol_database.Default()
    for src in sorted(HERE.glob("*.textproto")):
        text = src.read_text()
        name = text.splitlines()[0].split("proto-message:")[1].strip()
        msg = db.GetSymbol(name)()
        text_format.Parse(text, msg)
        data = msg.SerializeToString(deterministic=True)
        dst = src.with_suffix(".hex")
        dst.write_text(data.hex() + "\n")
        print(f"{dst.name}: {name}, {len(data)} bytes")


if __name__ == "__main__":
    main()
