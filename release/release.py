#!/usr/bin/env python3
"""`make release`: dist/ from a clean clone, with no Docker and no registry (release/README.md).

    dist/
      oci/toolgate-filter/      OCI image layout, tag <version>: the filter as the image Istio's WasmPlugin pulls
      oci/toolgate-controller/  OCI image layout, tag <version>: the static `toolgate` binary, nothing else
      oci/toolgate-chart/       OCI image layout, tag <version>: the Helm chart as `helm push` stores it
      toolgate-<version>.tgz    the Helm chart (helm package)
      install.yaml              the chart rendered for `kubectl apply -f` (namespace toolgate-system)
      toolgate-filter-<version>.wasm, toolgate-<version>-linux-<arch>: the module and the binary as files
      RELEASE-NOTES.md          digests, references and image sizes
      SHA256SUMS                every other file of dist/ (`cd dist && sha256sum -c SHA256SUMS`)

The version is the workspace's (Cargo.toml, [workspace.package] version): the chart's version and
appVersion, the images' tags and `toolgate --version` all come from it. Timestamps come from the
commit (SOURCE_DATE_EPOCH), so two runs on the same commit write the same bytes.

Expects the filter built (`make wasm`: the Makefile's `release` target does it first); builds the
static controller (cargo, target/<host>/release/) and the tools (release/tools.sh ensure: helm, oras).
Settings (environment): RELEASE_REGISTRY (default registry.example): the registry and path the images'
names in the chart and install.yaml start with (the images themselves do not depend on it); DIST
(default dist/); SOURCE_DATE_EPOCH, TOOLGATE_COMMIT (default: from git).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".work" / "release"
WASM = ROOT / "target/wasm32-wasip1/release/toolgate_filter.wasm"
CHART_SRC = ROOT / "charts" / "toolgate"
NAMESPACE = "toolgate-system"

# Media types. The filter image is the *compat* variant of the Wasm image format (a standard OCI image
# whose single layer is a tar.gz holding plugin.wasm) rather than the *oci* variant (custom media types,
# application/vnd.module.wasm.content.layer.v1+wasm): Istio's agent (istio.io/istio pkg/wasm,
# imagefetcher.go) tries the compat variant first for an OCI manifest, and its oci-variant reader wants
# exactly two layers (the module and a application/vnd.module.wasm.config.v1+json *layer*), so a
# manifest with that config media type and one layer would be refused. The compat image is also an
# ordinary image to every registry, mirror and scanner (no unknown media types to allow-list), and the
# digest a WasmPlugin pins (oci://host/repo@sha256:..., or its `sha256` field) is that of the manifest.
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

NONROOT = 65532  # the distroless nonroot uid/gid; no /etc/passwd needed (the image config names numbers)


def say(msg: str) -> None:
    print(f"release: {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> None:
    print(f"release: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd: list, *, capture: bool = False, cwd: Path | None = None, env: dict | None = None) -> str:
    shown = " ".join(str(c) for c in cmd)
    say(f"$ {shown}" if len(shown) < 400 else f"$ {shown[:400]}...")
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, text=True,
                         stdout=subprocess.PIPE if capture else None)
    if res.returncode != 0:
        die(f"{cmd[0]} exited {res.returncode}")
    return res.stdout if capture else ""


def git(*args: str) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True)
    except OSError:
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---- facts of the release --------------------------------------------------------------------------

class Release:
    def __init__(self) -> None:
        meta = json.loads(run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                              capture=True, cwd=ROOT))
        self.target_dir = Path(meta["target_directory"])
        versions = {p["name"]: p["version"] for p in meta["packages"]}
        self.version = versions["toolgate"]
        if versions.get("toolgate-filter") != self.version:
            die(f"toolgate-filter {versions.get('toolgate-filter')} and toolgate {self.version} differ")
        self.commit = os.environ.get("TOOLGATE_COMMIT") or git("rev-parse", "HEAD") or "unknown"
        epoch = os.environ.get("SOURCE_DATE_EPOCH") or git("log", "-1", "--format=%ct") or "0"
        self.epoch = int(epoch)
        self.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.epoch))
        status = git("status", "--porcelain", "--untracked-files=no")
        self.dirty = bool(status)
        self.registry = os.environ.get("RELEASE_REGISTRY", "registry.example").rstrip("/")
        self.dist = Path(os.environ.get("DIST", ROOT / "dist")).resolve()
        host = run(["rustc", "-vV"], capture=True)
        self.host = re.search(r"^host: (\S+)$", host, re.M).group(1)
        arch = self.host.split("-")[0]
        self.arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(arch) or die(f"no OCI architecture for {arch}")
        # The controller's cargo profile: `release`; `make test` builds dist/ with `release-test`
        # (Cargo.toml: no LTO; RELEASE-NOTES.md says it is not for publishing).
        self.profile = os.environ.get("TOOLGATE_RELEASE_PROFILE") or "release"
        if self.profile not in ("release", "release-test"):
            die(f"TOOLGATE_RELEASE_PROFILE={self.profile}: release or release-test")
        self.tools: dict[str, str] = {}
        self.images: dict[str, dict] = {}

    def annotations(self, title: str, description: str) -> dict:
        return {
            "org.opencontainers.image.created": self.created,
            "org.opencontainers.image.version": self.version,
            "org.opencontainers.image.revision": self.commit,
            "org.opencontainers.image.title": title,
            "org.opencontainers.image.description": description,
            "org.opencontainers.image.licenses": "Apache-2.0",
        }


# ---- tools ---------------------------------------------------------------------------------------

def ensure_tools(rel: Release) -> dict[str, Path]:
    run(["bash", ROOT / "release/tools.sh", "ensure"])
    bindir = Path(run(["bash", ROOT / "release/tools.sh", "bindir"], capture=True).strip())
    tools = {name: bindir / name for name in ("helm", "oras")}
    rel.tools["helm"] = "helm " + run([tools["helm"], "version", "--template", "{{.Version}}"], capture=True).strip()
    rel.tools["oras"] = "oras " + re.search(r"Version:\s*(\S+)", run([tools["oras"], "version"], capture=True)).group(1)
    rel.tools["rustc"] = run(["rustc", "--version"], capture=True).strip()
    return tools


# ---- the static controller -------------------------------------------------------------------------

def build_controller(rel: Release) -> Path:
    """`toolgate` linked statically (glibc, +crt-static: rustup cannot add the musl target here), for the
    host's target triple given explicitly, so that the flags apply to it and not to build scripts and
    proc macros, and the result lands in target/<triple>/ beside, not over, the usual builds. The TLS
    stack is rustls (kube's rustls-tls feature, ring): nothing of OpenSSL to link. getrandom 0.3 (ahash's
    seeds) would look its libc function up with dlsym, which a static binary cannot, and fall back to
    /dev/random and /dev/urandom: linux_getrandom links the function instead, so the binary needs no
    file at all (checked in an empty root by tests/release). Paths are remapped so that the binary does
    not depend on where the clone or the cargo home are."""
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    flags = ["-C", "target-feature=+crt-static", "-C", "strip=symbols", '--cfg=getrandom_backend="linux_getrandom"',
             f"--remap-path-prefix={ROOT}=/toolgate", f"--remap-path-prefix={cargo_home}=/cargo"]
    env = dict(os.environ, TOOLGATE_COMMIT=rel.commit,
               **{f"CARGO_TARGET_{rel.host.upper().replace('-', '_')}_RUSTFLAGS": " ".join(flags)})
    env.pop("RUSTFLAGS", None)  # it would replace the target's flags
    t0 = time.monotonic()
    run(["nice", "-n", "10", "cargo", "build", "--locked", "--profile", rel.profile, "-p", "toolgate", "--target",
         rel.host], cwd=ROOT, env=env)
    say(f"cargo build (static controller, profile {rel.profile}): {time.monotonic() - t0:.0f} s")
    binary = rel.target_dir / rel.host / rel.profile / "toolgate"
    # Static: no program interpreter and no shared libraries (readelf: binutils, which cargo's linker needs).
    headers = run(["readelf", "-l", "-d", binary], capture=True)
    if "INTERP" in headers or "(NEEDED)" in headers:
        die(f"{binary} is not statically linked:\n{headers}")
    out = run([binary, "--version"], capture=True).strip()
    want = f"toolgate {rel.version} (commit {rel.commit})"
    if out != want:
        die(f"{binary} --version says {out!r}, not {want!r}")
    return binary


# ---- OCI images ----------------------------------------------------------------------------------

def layer_tar_gz(rel: Release, entries: list[tuple[str, bytes | None, int]]) -> tuple[bytes, str]:
    """A reproducible layer: (path, contents or None for a folder, mode), owned by root, the commit's
    time on every entry; gzip without a name and with mtime 0. Returns (tar.gz, diff_id of the tar)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode in entries:
            info = tarfile.TarInfo(path)
            info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = rel.epoch, mode, 0, 0, "", ""
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return gzip.compress(tar_bytes, compresslevel=9, mtime=0), "sha256:" + hashlib.sha256(tar_bytes).hexdigest()


def oras_push_layout(rel: Release, oras: Path, layout: Path, workdir: Path, config: tuple[str, str],
                     layers: list[tuple[str, str]], annotations: dict) -> None:
    """oras writes the OCI image layout (oci-layout, index.json, blobs/) straight to disk, tagged with
    the version; the manifest is image-spec v1.0 style (a config, no artifactType) and its created
    annotation is the commit's time, so the manifest's digest is reproducible."""
    cmd = [oras, "push", "--no-tty", "--oci-layout", f"{layout}:{rel.version}",
           "--config", f"{config[0]}:{config[1]}"]
    for key, value in annotations.items():
        cmd += ["--annotation", f"{key}={value}"]
    cmd += [f"{name}:{media_type}" for name, media_type in layers]
    run(cmd, cwd=workdir)


def read_layout(layout: Path, tag: str) -> dict:
    """The manifest a layout tags, checked: every blob is there with its digest and size."""
    index = json.loads((layout / "index.json").read_text())
    found = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    if len(found) != 1:
        die(f"{layout}: {len(found)} manifests tagged {tag}")
    desc = found[0]

    def blob(d: dict) -> bytes:
        algo, hexd = d["digest"].split(":")
        data = (layout / "blobs" / algo / hexd).read_bytes()
        if hashlib.sha256(data).hexdigest() != hexd or len(data) != d["size"]:
            die(f"{layout}: blob {d['digest']} does not match its descriptor")
        return data

    manifest_bytes = blob(desc)
    manifest = json.loads(manifest_bytes)
    config = blob(manifest["config"])
    layers = [blob(layer) for layer in manifest["layers"]]
    return {"digest": desc["digest"], "media_type": desc["mediaType"], "manifest": manifest,
            "manifest_size": len(manifest_bytes), "config": json.loads(config),
            "compressed": len(manifest_bytes) + len(config) + sum(len(x) for x in layers),
            "layer_sizes": [len(x) for x in layers]}


def image_config(rel: Release, arch: str, os_name: str, diff_id: str, created_by: str, cfg: dict) -> bytes:
    return canonical_json({
        "architecture": arch, "os": os_name, "created": rel.created, "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": rel.created, "created_by": created_by}],
    })


def build_image(rel: Release, oras: Path, name: str, description: str, entries: list, arch: str,
                os_name: str, created_by: str, cfg: dict, annotations: dict | None = None) -> dict:
    work = WORK / "images" / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    layer, diff_id = layer_tar_gz(rel, entries)
    # The file's name is the layer's org.opencontainers.image.title annotation (oras adds it).
    layer_name = f"{name}-{rel.version}.tar.gz"
    (work / layer_name).write_bytes(layer)
    (work / "config.json").write_bytes(image_config(rel, arch, os_name, diff_id, created_by, cfg))
    layout = rel.dist / "oci" / name
    oras_push_layout(rel, oras, layout, work, ("config.json", OCI_CONFIG), [(layer_name, OCI_LAYER_GZIP)],
                     {**rel.annotations(name, description), **(annotations or {})})
    info = read_layout(layout, rel.version)
    info.update(name=name, repository=f"{rel.registry}/{name}", layout=layout,
                uncompressed=sum(len(d) for _, d, _ in entries if d is not None))
    rel.images[name] = info
    say(f"{name}: {info['digest']} ({human(info['compressed'])} in the registry, "
        f"{human(info['uncompressed'])} unpacked)")
    return info


def plan_version() -> int:
    """policy/src/plan.rs's PLAN_VERSION: the one place it is written."""
    m = re.search(r"^pub const PLAN_VERSION: u32 = (\d+);$", (ROOT / "policy/src/plan.rs").read_text(), re.M)
    return int(m.group(1)) if m else die("policy/src/plan.rs: no PLAN_VERSION")


def build_filter_image(rel: Release, oras: Path) -> dict:
    if not WASM.is_file():
        die(f"{WASM} is missing: `make wasm` (make release runs it first)")
    wasm = WASM.read_bytes()
    return build_image(rel, oras, "toolgate-filter", "Toolgate's proxy-wasm filter (plugin.wasm) for Istio WasmPlugins",
                       [("plugin.wasm", wasm, 0o644)], "wasm", "wasip1",
                       "make wasm: target/wasm32-wasip1/release/toolgate_filter.wasm as plugin.wasm", {},
                       # The plan version the filter reads: the controller reports a mismatch on the
                       # Gateways (controller/src/runtime/filter_image.rs).
                       {"dev.toolgate.plan-version": str(plan_version())})


def build_controller_image(rel: Release, oras: Path, binary: Path) -> dict:
    # From scratch: the binary alone (no shell, no libc, no CA bundle: in a cluster it trusts the API
    # server through the service account's ca.crt; a kubeconfig brings its own CA). Non-root by number.
    cfg = {
        "User": f"{NONROOT}:{NONROOT}",
        "Entrypoint": ["/usr/local/bin/toolgate"],
        "Env": ["PATH=/usr/local/bin"],
        "WorkingDir": "/",
        "Labels": {k: v for k, v in rel.annotations("toolgate-controller", "").items() if not k.endswith("description")},
    }
    entries = [("usr", None, 0o755), ("usr/local", None, 0o755), ("usr/local/bin", None, 0o755),
               ("usr/local/bin/toolgate", binary.read_bytes(), 0o755)]
    return build_image(rel, oras, "toolgate-controller", "Toolgate's controller and CLI (toolgate), statically linked",
                       entries, rel.arch, "linux", f"cargo build --release -p toolgate --target {rel.host} (+crt-static)", cfg)


# ---- the chart -----------------------------------------------------------------------------------

def substitute(text: str, pattern: str, repl: str, what: str) -> str:
    new, n = re.subn(pattern, repl, text, count=0, flags=re.M)
    if n != 1:
        die(f"{what}: {n} matches of {pattern!r}, expected 1")
    return new


def stage_chart(rel: Release) -> Path:
    """charts/toolgate with the version, the images' repositories and digests written in, and crds/ in
    files/crds/ (without their header comment); every file's time is the commit's (helm package keeps it)."""
    stage = WORK / "chart" / "toolgate"
    shutil.rmtree(stage.parent, ignore_errors=True)
    shutil.copytree(CHART_SRC, stage)
    chart = (stage / "Chart.yaml").read_text()
    chart = substitute(chart, r"^version: .*$", f"version: {rel.version}", "Chart.yaml")
    chart = substitute(chart, r"^appVersion: .*$", f'appVersion: "{rel.version}"', "Chart.yaml")
    (stage / "Chart.yaml").write_text(chart)
    values = (stage / "values.yaml").read_text()
    for key, name in (("image", "toolgate-controller"), ("filter", "toolgate-filter")):
        block = re.search(rf"^{key}:\n(?:  .*\n|\s*#.*\n)*", values, re.M)
        if not block:
            die(f"values.yaml: no {key}: block")
        body = block.group(0)
        body = substitute(body, r"^  repository: .*$", f"  repository: {rel.registry}/{name}", f"values.yaml {key}")
        body = substitute(body, r'^  digest: ""$', f'  digest: "{rel.images[name]["digest"]}"', f"values.yaml {key}")
        values = values[:block.start()] + body + values[block.end():]
    (stage / "values.yaml").write_text(values)
    crd_dir = stage / "files" / "crds"
    crd_dir.mkdir(parents=True)
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        text = crd.read_text()
        start = re.search(r"^apiVersion:", text, re.M)
        if not start:
            die(f"{crd}: no apiVersion")
        (crd_dir / crd.name).write_text(text[start.start():])
    for path in [stage.parent, *stage.rglob("*")]:
        os.utime(path, (rel.epoch, rel.epoch))
    return stage


def package_chart(rel: Release, helm: Path, oras: Path) -> dict:
    stage = stage_chart(rel)
    env = dict(os.environ, HELM_CACHE_HOME=str(WORK / "helm/cache"), HELM_CONFIG_HOME=str(WORK / "helm/config"),
               HELM_DATA_HOME=str(WORK / "helm/data"))
    run([helm, "lint", "--strict", stage], env=env)
    # The optional parts must render too.
    run([helm, "lint", "--strict", stage, "--set", "metrics.serviceMonitor.enabled=true",
         "--set", "controller.planConfigMaps=true", "--set", "controller.defaultDeny=true",
         "--set", "imagePullSecrets[0].name=regcred", "--set", "namespace.create=true"], env=env)
    run([helm, "package", stage, "--destination", rel.dist], env=env)
    tgz = rel.dist / f"toolgate-{rel.version}.tgz"
    run([helm, "lint", "--strict", tgz], env=env)
    rendered = run([helm, "template", "toolgate", tgz, "--namespace", NAMESPACE, "--set", "namespace.create=true"],
                   capture=True, env=env)
    header = (f"# Toolgate {rel.version} (commit {rel.commit}): the Helm chart toolgate-{rel.version}.tgz rendered\n"
              f"# for namespace {NAMESPACE} with its default values (release/release.py). Apply with\n"
              f"#   kubectl apply --server-side -f install.yaml\n")
    (rel.dist / "install.yaml").write_text(header + rendered)
    # The chart as an OCI artifact, as `helm push` writes it (helm.sh/helm/v4 pkg/registry: the chart's
    # metadata as the config, the .tgz as the one layer, the OCI annotations helm derives from Chart.yaml).
    work = WORK / "chart-oci"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy2(tgz, work / tgz.name)
    meta = chart_metadata(stage / "Chart.yaml")
    (work / "config.json").write_bytes(json.dumps(meta, separators=(",", ":")).encode())
    annotations = {
        "org.opencontainers.image.description": meta["description"],
        "org.opencontainers.image.title": meta["name"],
        "org.opencontainers.image.version": meta["version"],
        "org.opencontainers.image.created": rel.created,
    }
    layout = rel.dist / "oci" / "toolgate-chart"
    oras_push_layout(rel, oras, layout, work, ("config.json", HELM_CONFIG), [(tgz.name, HELM_CHART_LAYER)], annotations)
    info = read_layout(layout, rel.version)
    info.update(name="toolgate (chart)", repository=f"{rel.registry}/charts/toolgate", layout=layout,
                uncompressed=tgz.stat().st_size)
    rel.images["toolgate-chart"] = info
    return info


def chart_metadata(chart_yaml: Path) -> dict:
    """The fields of our Chart.yaml (flat: scalars and one flow list) in the order helm's
    json.Marshal(chart.Metadata) writes them."""
    fields: dict[str, object] = {}
    for line in chart_yaml.read_text().splitlines():
        m = re.match(r"^(\w+):\s*(.*)$", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()
        if value.startswith("["):
            fields[key] = [v.strip() for v in value.strip("[]").split(",") if v.strip()]
        else:
            fields[key] = value.strip('"')
    order = ["name", "home", "sources", "version", "description", "keywords", "maintainers", "icon",
             "apiVersion", "condition", "tags", "appVersion", "deprecated", "annotations", "kubeVersion",
             "dependencies", "type"]
    unknown = set(fields) - set(order)
    if unknown:
        die(f"Chart.yaml: fields {sorted(unknown)} are not mapped into the chart's OCI config")
    return {k: fields[k] for k in order if k in fields}


# ---- notes and sums ------------------------------------------------------------------------------

def write_notes(rel: Release, binary_asset: Path, wasm_asset: Path) -> None:
    f, c, ch = rel.images["toolgate-filter"], rel.images["toolgate-controller"], rel.images["toolgate-chart"]
    v = rel.version
    lines = [
        f"# Toolgate {v}",
        "",
        f"Commit `{rel.commit}`{' (built from a working tree with uncommitted changes)' if rel.dirty else ''}, "
        f"built {rel.created} (SOURCE_DATE_EPOCH={rel.epoch}, the commit's time).",
        "",
        *([f"**A test build (cargo profile `{rel.profile}`, `make test`): not for publishing.** "
           "`make release` builds the controller with `release`.", ""] if rel.profile != "release" else []),
        "## Images and chart",
        "",
        "| artifact | reference | in a registry | unpacked |",
        "| --- | --- | --- | --- |",
    ]
    for info in (f, c):
        lines.append(f"| `{info['name']}` | `{info['repository']}:{v}@{info['digest']}` | "
                     f"{human(info['compressed'])} | {human(info['uncompressed'])} |")
    lines.append(f"| chart `toolgate` | `oci://{ch['repository']}:{v}@{ch['digest']}` | "
                 f"{human(ch['compressed'])} | {human(ch['uncompressed'])} (the .tgz) |")
    lines += [
        "",
        "\"In a registry\": manifest, config and compressed layer, what a pull transfers; \"unpacked\": the",
        "files in the image (the filter: plugin.wasm; the controller: the static `toolgate` binary).",
        "",
        f"- Filter: one layer `{OCI_LAYER_GZIP}` holding `plugin.wasm` ({human(wasm_asset.stat().st_size)}, "
        f"sha256 `{sha256_file(wasm_asset)}`). The WasmPlugin url the chart writes is "
        f"`oci://{f['repository']}@{f['digest']}`: Istio checks the manifest digest in it (a WasmPlugin "
        "`sha256` for an oci:// url is the manifest digest too, not the .wasm's). It reads plan version "
        f"{plan_version()} (the manifest annotation `dev.toolgate.plan-version`, which the controller checks: "
        "the Gateways' `toolgate.dev/FilterCompatible`).",
        f"- Controller: `FROM scratch`, the static binary `/usr/local/bin/toolgate` alone, user {NONROOT}:{NONROOT}, "
        f"linux/{rel.arch}. `toolgate --version`: `toolgate {v} (commit {rel.commit})`.",
        f"- Chart `toolgate` {v} (appVersion {v}): CRDs, RBAC, Deployment, metrics Service, optional ServiceMonitor; "
        "its values name both images by digest.",
        "",
        "## Files",
        "",
        "| file | size |",
        "| --- | --- |",
    ]
    for path in sorted(p for p in rel.dist.rglob("*") if p.is_file() and "oci" not in p.relative_to(rel.dist).parts):
        lines.append(f"| `{path.relative_to(rel.dist)}` | {human(path.stat().st_size)} |")
    for info in (f, c, ch):
        size = sum(p.stat().st_size for p in info["layout"].rglob("*") if p.is_file())
        lines.append(f"| `{info['layout'].relative_to(rel.dist)}/` (OCI image layout, tag `{v}`) | {human(size)} |")
    lines += [
        "",
        "## Publish and install",
        "",
        "```sh",
        f"REG={rel.registry}",
        f"oras cp --from-oci-layout dist/oci/toolgate-filter:{v} $REG/toolgate-filter:{v}",
        f"oras cp --from-oci-layout dist/oci/toolgate-controller:{v} $REG/toolgate-controller:{v}",
        f"oras cp --from-oci-layout dist/oci/toolgate-chart:{v} $REG/charts/toolgate:{v}",
        f"helm install toolgate oci://$REG/charts/toolgate --version {v} -n {NAMESPACE} --create-namespace",
        "# or, without helm:",
        "kubectl apply --server-side -f dist/install.yaml",
        "```",
        "",
        f"Images pushed under another registry keep their digests: install the chart with "
        f"`--set image.repository=<reg>/toolgate-controller --set filter.repository=<reg>/toolgate-filter`, "
        f"or run `make release RELEASE_REGISTRY=<reg>`.",
        "",
        "## Built with",
        "",
        *[f"- {version}" for version in rel.tools.values()],
        "",
    ]
    (rel.dist / "RELEASE-NOTES.md").write_text("\n".join(lines))


def write_sums(rel: Release) -> None:
    files = sorted(p for p in rel.dist.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    text = "".join(f"{sha256_file(p)}  {p.relative_to(rel.dist).as_posix()}\n" for p in files)
    (rel.dist / "SHA256SUMS").write_text(text)
    run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=rel.dist)


def main() -> None:
    t0 = time.monotonic()
    rel = Release()
    say(f"toolgate {rel.version}, commit {rel.commit}{' (dirty)' if rel.dirty else ''}, {rel.created}")
    if rel.dirty:
        say("warning: the working tree has uncommitted changes to tracked files (noted in RELEASE-NOTES.md)")
    tools = ensure_tools(rel)
    binary = build_controller(rel)
    # Everything is written into a new folder, which replaces dist/ only once it is complete.
    final = rel.dist
    rel.dist = final.parent / (final.name + ".tmp")
    shutil.rmtree(rel.dist, ignore_errors=True)
    (rel.dist / "oci").mkdir(parents=True)
    build_filter_image(rel, tools["oras"])
    build_controller_image(rel, tools["oras"], binary)
    package_chart(rel, tools["helm"], tools["oras"])
    wasm_asset = rel.dist / f"toolgate-filter-{rel.version}.wasm"
    shutil.copyfile(WASM, wasm_asset)
    binary_asset = rel.dist / f"toolgate-{rel.version}-linux-{rel.arch}"
    shutil.copyfile(binary, binary_asset)
    binary_asset.chmod(0o755)
    write_notes(rel, binary_asset, wasm_asset)
    for info in rel.images.values():
        info["layout"] = final / info["layout"].relative_to(rel.dist)
    write_sums(rel)
    shutil.rmtree(final, ignore_errors=True)
    rel.dist.rename(final)
    say(f"wrote {final} in {time.monotonic() - t0:.0f} s:")
    for info in rel.images.values():
        say(f"  {info['name']:<20} {info['digest']}  {human(info['compressed'])}")


if __name__ == "__main__":
    main()
