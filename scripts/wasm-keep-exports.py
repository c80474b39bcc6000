#!/usr/bin/env python3
"""Rewrites a .wasm module's export section, in place, keeping only the exports listed in a file,
and drops its `name` custom section.

Usage: wasm-keep-exports.py MODULE.wasm EXPORTS.txt [--without FEATURE]

An export listed as `NAME [FEATURE]` belongs to a cargo feature of the filter. With `--without FEATURE`
the module must have been built without it: such an export is then required to be ABSENT (a module
built with the feature would claim, at run time, callbacks Envoy never calls: list filtering that
silently does nothing). `make wasm` uses it for toolgate_filter_no_list_filtering.wasm.

Why: Envoy calls every proxy_on_* callback a module exports, on every request; the proxy-wasm SDK
exports all of them. Dropping the ones the filter does not implement saves those calls into the VM
(docs/design/proxy-wasm-abi.md). Only the export section changes: exports refer to functions by index,
so nothing else in the module moves. The `name` section (function names for backtraces; its size is in
docs/wasm-size.md) is dropped: Envoy loads it into every VM, and a build for debugging keeps it with
WASM_KEEP_NAMES=1 in the environment. Fails (exit 1) if a listed export is missing, so a renamed
callback cannot silently disappear. Idempotent.
"""
import os
import sys
from pathlib import Path


def leb128(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def uleb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def keep_exports(module: bytes, keep: set[str], keep_names: bool = False) -> tuple[bytes, list[str], list[str]]:
    if module[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a wasm module (version 1)")
    out, at, dropped, kept = bytearray(module[:8]), 8, [], []
    while at < len(module):
        section_id = module[at]
        size, body_at = leb128(module, at + 1)
        end = body_at + size
        if section_id == 0 and not keep_names:
            name_len, name_at = leb128(module, body_at)
            if module[name_at:name_at + name_len] == b"name":
                at = end
                continue
        if section_id != 7:  # not the export section: copied as is
            out += module[at:end]
            at = end
            continue
        count, p = leb128(module, body_at)
        entries = []
        for _ in range(count):
            name_len, q = leb128(module, p)
            name = module[q:q + name_len].decode()
            _index, entry_end = leb128(module, q + name_len + 1)  # kind byte, then the index
            (kept if name in keep else dropped).append(name)
            if name in keep:
                entries.append(module[p:entry_end])
            p = entry_end
        body = uleb128(len(entries)) + b"".join(entries)
        out += bytes([7]) + uleb128(len(body)) + body
        at = end
    return bytes(out), kept, dropped


def listed(listing: Path) -> dict[str, str]:
    """The listed exports, each with its feature ("" for none)."""
    out = {}
    for line in listing.read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if parts:
            out[parts[0]] = parts[1].strip("[]") if len(parts) > 1 else ""
    return out


def main() -> int:
    args = sys.argv[1:]
    without = ""
    if len(args) == 4 and args[2] == "--without":
        without = args[3]
        args = args[:2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    wasm, listing = Path(args[0]), Path(args[1])
    exports = listed(listing)
    if without and without not in exports.values():
        print(f"{listing}: no export belongs to feature {without!r}", file=sys.stderr)
        return 1
    keep = {name for name, feature in exports.items() if feature != without or not without}
    absent = {name for name, feature in exports.items() if without and feature == without}
    keep_names = os.environ.get("WASM_KEEP_NAMES") == "1"
    trimmed, kept, dropped = keep_exports(wasm.read_bytes(), keep, keep_names)
    missing = sorted(keep - set(kept))
    if missing:
        print(f"{wasm}: exports listed in {listing} but not in the module: {', '.join(missing)}", file=sys.stderr)
        return 1
    present = sorted(absent & set(dropped))
    if present:
        print(f"{wasm}: built with feature {without!r} (exports {', '.join(present)}), expected without it", file=sys.stderr)
        return 1
    wasm.write_bytes(trimmed)
    print(f"{wasm}: kept {len(kept)} exports" + (f", dropped {len(dropped)}: {' '.join(dropped)}" if dropped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
