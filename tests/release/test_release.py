"""What `make release` writes (release/release.py): dist/'s files, the images as Istio's agent and a
container runtime read them, the chart, install.yaml, SHA256SUMS.

    .venv/bin/pytest tests/release -q        # after `make release`: checks dist/
    TOOLGATE_RELEASE_DIST=/path/to/dist ...  # another dist/

Without a dist/ (no dist/SHA256SUMS) the tests run release/release.py into a temporary folder first
(it needs `make wasm` done; it builds the static controller and, once, helm and oras).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "toolgate-system"


def run(*cmd, **kw) -> str:
    res = subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)
    assert res.returncode == 0, f"{cmd}: {res.stderr}{res.stdout}"
    return res.stdout


def cargo_version() -> str:
    meta = json.loads(run("cargo", "metadata", "--no-deps", "--format-version", "1", "--offline", cwd=ROOT))
    return next(p["version"] for p in meta["packages"] if p["name"] == "toolgate")


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    given = os.environ.get("TOOLGATE_RELEASE_DIST")
    if given:
        return Path(given).resolve()
    default = ROOT / "dist"
    if (default / "SHA256SUMS").is_file():
        return default
    out = tmp_path_factory.mktemp("release") / "dist"
    subprocess.run(["python3", ROOT / "release/release.py"], cwd=ROOT, check=True, env=dict(os.environ, DIST=str(out)))
    return out


@pytest.fixture(scope="session")
def version() -> str:
    return cargo_version()


@pytest.fixture(scope="session")
def helm() -> Path:
    run("bash", ROOT / "release/tools.sh", "ensure")
    return Path(run("bash", ROOT / "release/tools.sh", "bindir").strip()) / "helm"


def blob(layout: Path, digest: str) -> bytes:
    algo, hexd = digest.split(":")
    data = (layout / "blobs" / algo / hexd).read_bytes()
    assert hashlib.sha256(data).hexdigest() == hexd, f"{layout}: {digest} does not match its content"
    return data


def image(dist: Path, name: str, version: str) -> dict:
    """The manifest the layout tags with the version, its config and layers (each checked against its
    descriptor's digest and size, as a registry would on push)."""
    layout = dist / "oci" / name
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((layout / "index.json").read_text())
    assert len(index["manifests"]) == 1
    desc = index["manifests"][0]
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == version
    assert desc["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    raw = blob(layout, desc["digest"])
    assert len(raw) == desc["size"]
    manifest = json.loads(raw)
    config = blob(layout, manifest["config"]["digest"])
    layers = [blob(layout, layer["digest"]) for layer in manifest["layers"]]
    for d, data in zip([manifest["config"], *manifest["layers"]], [config, *layers]):
        assert d["size"] == len(data)
    return {"digest": desc["digest"], "manifest": manifest, "config_bytes": config, "layers": layers}


def tar_members(layer: bytes) -> dict[str, tarfile.TarInfo | bytes]:
    out = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        for m in tar.getmembers():
            out[m.name] = (m, tar.extractfile(m).read() if m.isfile() else None)
    return out


def test_files(dist, version):
    names = {p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()}
    for want in [f"toolgate-{version}.tgz", "install.yaml", "RELEASE-NOTES.md", "SHA256SUMS",
                 f"toolgate-filter-{version}.wasm", f"toolgate-{version}-linux-amd64"]:
        assert want in names
    for layout in ("toolgate-filter", "toolgate-controller", "toolgate-chart"):
        assert f"oci/{layout}/index.json" in names and f"oci/{layout}/oci-layout" in names
    # Nothing but the three layouts' blobs under oci/ (no stray ingest folders).
    assert {n.split("/")[2] for n in names if n.startswith("oci/")} == {"index.json", "oci-layout", "blobs"}


def test_sha256sums_cover_and_verify(dist):
    listed = {line.split("  ", 1)[1] for line in (dist / "SHA256SUMS").read_text().splitlines()}
    files = {p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert listed == files
    run("sha256sum", "--quiet", "-c", "SHA256SUMS", cwd=dist)


def test_filter_image_is_what_istio_reads(dist, version):
    img = image(dist, "toolgate-filter", version)
    m = img["manifest"]
    assert m["schemaVersion"] == 2 and m["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert "artifactType" not in m
    assert m["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    # istio.io/istio pkg/wasm extractOCIStandardImage: the last layer, tar+gzip, a file named plugin.wasm.
    assert [layer["mediaType"] for layer in m["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"]
    members = tar_members(img["layers"][0])
    assert list(members) == ["plugin.wasm"]
    info, wasm = members["plugin.wasm"]
    assert wasm[:4] == b"\0asm"  # Istio's isValidWasmBinary
    assert wasm == (dist / f"toolgate-filter-{version}.wasm").read_bytes()
    assert (info.uid, info.gid, info.mode) == (0, 0, 0o644)
    config = json.loads(img["config_bytes"])
    tar_digest = "sha256:" + hashlib.sha256(gzip.decompress(img["layers"][0])).hexdigest()
    assert config["rootfs"] == {"type": "layers", "diff_ids": [tar_digest]}
    assert m["annotations"]["org.opencontainers.image.version"] == version


def test_controller_image(dist, version, tmp_path):
    img = image(dist, "toolgate-controller", version)
    m = img["manifest"]
    assert [layer["mediaType"] for layer in m["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"]
    config = json.loads(img["config_bytes"])
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/toolgate"]
    members = tar_members(img["layers"][0])
    assert list(members) == ["usr", "usr/local", "usr/local/bin", "usr/local/bin/toolgate"]
    info, binary = members["usr/local/bin/toolgate"]
    assert info.mode == 0o755 and (info.uid, info.gid) == (0, 0)
    assert binary == (dist / f"toolgate-{version}-linux-amd64").read_bytes()
    exe = tmp_path / "toolgate"
    exe.write_bytes(binary)
    exe.chmod(0o755)
    headers = run("readelf", "-l", "-d", exe)
    assert "INTERP" not in headers and "(NEEDED)" not in headers, "not statically linked"
    out = run(exe, "--version").strip()
    assert re.fullmatch(rf"toolgate {re.escape(version)} \(commit [0-9a-f]{{40}}\)", out), out
    # It runs with an empty environment and no files around it (nothing it needs from the image but itself).
    assert "controller" in run(exe, "--help", env={})


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/sbin/chroot").exists(), reason="needs root and chroot")
def test_controller_runs_in_an_empty_root(dist, version, tmp_path):
    """The controller image holds the binary and nothing else: `toolgate controller` starts in a root with
    only the binary and a kubeconfig (no /dev, /etc, /proc), as user 65532, and keeps trying an API
    server that is not there, without panicking (no file it reads at start, e.g. /dev/urandom)."""
    root = tmp_path / "root"
    (root / "usr/local/bin").mkdir(parents=True)
    (root / "cfg").mkdir()
    for _, (info, data) in tar_members(image(dist, "toolgate-controller", version)["layers"][0]).items():
        if data is not None:
            (root / info.name).write_bytes(data)
            (root / info.name).chmod(info.mode)
    # A kubeconfig with its CA, as in a cluster (the service account's ca.crt): the image has no CA bundle.
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
        "-subj", "/CN=test-ca", "-keyout", tmp_path / "ca.key", "-out", tmp_path / "ca.pem")
    ca = base64.b64encode((tmp_path / "ca.pem").read_bytes()).decode()
    (root / "cfg/kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', "
        f"certificate-authority-data: {ca}}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n")
    root.chmod(0o755)
    proc = subprocess.Popen(["/usr/sbin/chroot", "--userspec=65532:65532", root, "/usr/local/bin/toolgate",
                             "controller", "--wasm-url", "oci://registry.example/f@sha256:" + "0" * 64,
                             "--metrics-addr", "127.0.0.1:0"],
                            env={"KUBECONFIG": "/cfg/kubeconfig"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        out, _ = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    assert proc.returncode == -9, f"exited by itself ({proc.returncode}):\n{out}"
    assert "panicked" not in out and "metrics and probes" in out, out
    assert "127.0.0.1:9" in out or "Connect" in out, out


def test_chart_package(dist, version, helm):
    tgz = dist / f"toolgate-{version}.tgz"
    run(helm, "lint", "--strict", tgz)
    chart = run(helm, "show", "chart", tgz)
    assert re.search(rf"^version: {re.escape(version)}$", chart, re.M)
    assert re.search(rf"^appVersion: \"?{re.escape(version)}\"?$", chart, re.M)
    values = run(helm, "show", "values", tgz)
    for name in ("toolgate-controller", "toolgate-filter"):
        digest = image(dist, name, version)["digest"]
        assert f'digest: "{digest}"' in values
    # The CRDs are crds/, byte for byte after their header comment.
    with tarfile.open(tgz) as tar:
        packaged = {Path(n).name: tar.extractfile(n).read().decode() for n in tar.getnames() if "/files/crds/" in n}
    repo = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    assert set(packaged) == set(repo)
    for name, text in repo.items():
        assert text.endswith(packaged[name]) and packaged[name].startswith("apiVersion:")


def test_chart_oci_artifact_is_what_helm_pulls(dist, version):
    img = image(dist, "toolgate-chart", version)
    m = img["manifest"]
    # helm.sh/helm/v4 pkg/registry: config and layer media types, the annotations helm push writes.
    assert m["config"]["mediaType"] == "application/vnd.cncf.helm.config.v1+json"
    assert [layer["mediaType"] for layer in m["layers"]] == ["application/vnd.cncf.helm.chart.content.v1.tar+gzip"]
    assert img["layers"][0] == (dist / f"toolgate-{version}.tgz").read_bytes()
    meta = json.loads(img["config_bytes"])
    assert (meta["name"], meta["version"], meta["appVersion"], meta["apiVersion"]) == ("toolgate", version, version, "v2")
    assert m["annotations"]["org.opencontainers.image.title"] == "toolgate"
    assert m["annotations"]["org.opencontainers.image.version"] == version


def documents(text: str) -> list[dict]:
    """kind, name, namespace and text of each YAML document (no YAML library in .venv: the documents
    are helm's output and deploy/, whose shapes are known)."""
    docs = []
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        kind = re.search(r"^kind: (\S+)", doc, re.M)
        if not kind:
            continue
        meta = re.search(r"^metadata:\s*(\{[^}]*\}|\n(?:[ ].*\n?)*)", doc, re.M).group(1)
        name = re.search(r"\bname: ([^,}\s]+)", meta).group(1)
        ns = re.search(r"\bnamespace: ([^,}\s]+)", meta)
        docs.append({"kind": kind.group(1), "name": name, "namespace": ns.group(1) if ns else None, "text": doc})
    return docs


def test_install_yaml(dist, version):
    text = (dist / "install.yaml").read_text()
    docs = documents(text)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "ServiceAccount",
                            "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for d in docs:
        assert d["namespace"] == (None if d["kind"] in cluster_scoped else NAMESPACE), d["kind"]
    # The Namespace first, the Deployment after everything it needs (helm's install order).
    order = [d["kind"] for d in docs]
    assert order[0] == "Namespace"
    assert max(i for i, k in enumerate(order) if k != "Deployment" and not k.startswith("Validating")) \
        < order.index("Deployment")
    deployment = next(d["text"] for d in docs if d["kind"] == "Deployment")
    controller = image(dist, "toolgate-controller", version)["digest"]
    filter_digest = image(dist, "toolgate-filter", version)["digest"]
    assert re.search(rf'image: "[^"]+/toolgate-controller@{controller}"', deployment)
    assert re.search(rf"- --wasm-url=oci://\S+/toolgate-filter@{filter_digest}$", deployment, re.M)
    assert "- --leader-elect" in deployment and "--default-deny" not in deployment
    assert "- --log-format=json" in deployment
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert all("helm.sh/resource-policy: keep" in d["text"] for d in crds)


def rules(doc: str) -> list[str]:
    block = re.search(r"^rules:\n((?:[-# ].*\n?)*)", doc, re.M).group(1)
    return [line.rstrip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def spec(doc: str) -> list[str]:
    """A ValidatingAdmissionPolicy's spec without its message (which names the file it comes from)."""
    block = re.search(r"^spec:\n((?:[-# ].*\n?)*)", doc, re.M).group(1)
    return [line.rstrip() for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#") and not line.lstrip().startswith("message:")]


def test_chart_rbac_is_deploy_rbac(dist, version, helm):
    """The chart's RBAC (templates/rbac.yaml) is a copy of deploy/rbac.yaml and
    deploy/rbac-plan-configmaps.yaml: the same objects, rule for rule, for the release `toolgate` with
    every optional part on."""
    rendered = run(helm, "template", "toolgate", dist / f"toolgate-{version}.tgz", "--namespace", NAMESPACE,
                   "--set", "controller.planConfigMaps=true", "--set", "controller.leaderElect=true")
    chart = {(d["kind"], d["name"]): d for d in documents(rendered)}
    deploy_text = "\n---\n".join(p.read_text() for p in sorted((ROOT / "deploy").glob("rbac*.yaml")))
    deploy = {(d["kind"], d["name"]): d for d in documents(deploy_text)}
    rbac_kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert {k for k in chart if k[0] in rbac_kinds} == set(deploy)
    for key, d in deploy.items():
        if key[0] in ("ClusterRole", "Role"):
            assert rules(chart[key]["text"]) == rules(d["text"]), key
        if key[0].startswith("ValidatingAdmissionPolicy"):
            assert spec(chart[key]["text"]) == spec(d["text"]), key
        if key[0].endswith("Binding") and key[0] != "ValidatingAdmissionPolicyBinding":
            for field in ("roleRef", "subjects"):
                flat = lambda t: re.sub(r"\s+", " ", re.search(rf"^{field}:.*$", t, re.M).group(0))
                assert flat(chart[key]["text"]) == flat(d["text"]), (key, field)


def test_chart_options_render(dist, version, helm):
    tgz = dist / f"toolgate-{version}.tgz"
    out = run(helm, "template", "t", tgz, "--namespace", "x", "--set", "metrics.serviceMonitor.enabled=true",
              "--set", "controller.defaultDeny=true", "--set", "controller.logFormat=text",
              "--set", "imagePullSecrets[0].name=regcred", "--set", "image.pullPolicy=Always",
              "--set", "filter.url=oci://example.test/f:1", "--set", "crds.install=false")
    kinds = [d["kind"] for d in documents(out)]
    assert "ServiceMonitor" in kinds and "CustomResourceDefinition" not in kinds
    for want in ("- --default-deny", "- --log-format=text", "- name: regcred", "imagePullPolicy: Always",
                 "- --wasm-url=oci://example.test/f:1", "name: t-controller"):
        assert want in out
    bad = subprocess.run([helm, "template", "t", tgz, "--set", "controller.leaderElect=false"],
                         text=True, capture_output=True)
    assert bad.returncode != 0 and "leaderElect" in bad.stderr
