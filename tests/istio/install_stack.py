"""The install path's pieces for tests/istio/test_istio_install.py: dist/ (`make release`), a CNCF
distribution registry on loopback that dist/'s images and chart are pushed to, the real helm installing
the chart into the test's kube-apiserver, the chart's Deployment run out of cluster (its container's
arguments, its ServiceAccount's token), and the gateway's xDS path with istio-agent's Wasm pull
(tests/istio/xds-shim -wasm-cache-dir: istio.io/istio/pkg/wasm). Tools come from release/tools.sh
(helm, oras, registry: built from Go modules into ~/.cache/toolgate/release-tools on first use)."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

from istio_stack import BIN, REPO, Cluster
import harness

RELEASE_TOOLS = REPO / "release/tools.sh"
DIST = Path(os.environ.get("DIST") or REPO / "dist").resolve()
WASM = REPO / "target/wasm32-wasip1/release/toolgate_filter.wasm"
# Where the release's images and chart go in the test registry: <registry>/toolgate/...
REPO_PREFIX = "toolgate"
NAMESPACE = "toolgate-system"
RELEASE = "toolgate"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
# The plan version the filter reads, as release.py annotates the filter image (policy/src/plan.rs).
PLAN_VERSION_ANNOTATION = "dev.toolgate.plan-version"
PLAN_VERSION = re.search(r"^pub const PLAN_VERSION: u32 = (\d+);$", (REPO / "policy/src/plan.rs").read_text(),
                         re.M).group(1)


def log(msg: str) -> None:
    sys.stderr.write(f"[install] {msg}\n")


# ---- tools and dist/ -----------------------------------------------------------------------------

def tools() -> dict[str, Path]:
    """helm, oras and registry from release/tools.sh (built once; afterwards `ensure` takes milliseconds)."""
    t0 = time.monotonic()
    out = subprocess.run(["bash", str(RELEASE_TOOLS), "ensure", "helm", "oras", "registry"], capture_output=True,
                         text=True, timeout=3600)
    assert out.returncode == 0, f"release/tools.sh ensure helm oras registry:\n{out.stdout}\n{out.stderr}"
    if time.monotonic() - t0 > 5:
        log(f"release/tools.sh built tools in {time.monotonic() - t0:.0f} s:\n{out.stderr[-2000:]}")
    bindir = Path(subprocess.run(["bash", str(RELEASE_TOOLS), "bindir"], capture_output=True, text=True,
                                 check=True).stdout.strip())
    return {name: bindir / name for name in ("helm", "oras", "registry")}


def workspace_version() -> str:
    return tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def _normalized(name: str, text: str) -> str:
    """A chart file with what release.py writes into its staged copy (the images' repositories and
    digests in values.yaml) replaced by placeholders."""
    if name == "values.yaml":
        text = re.sub(r"^  (repository|digest): .*$", r"  \1: X", text, flags=re.M)
    return text


def _without_header(text: str) -> str:
    m = re.search(r"^apiVersion:", text, re.M)
    return text[m.start():] if m else text


def dist_staleness(dist: Path = DIST) -> str | None:
    """Why dist/ is not the release of this tree (None: it is): a file missing, another version, another
    filter build than target/'s, or a chart or CRD file that differs from charts/toolgate and crds/."""
    v = workspace_version()
    need = [dist / "SHA256SUMS", dist / f"toolgate-{v}.tgz", dist / f"toolgate-filter-{v}.wasm",
            dist / "oci/toolgate-filter/index.json", dist / "oci/toolgate-chart/index.json",
            dist / "oci/toolgate-controller/index.json"]
    missing = [str(p.relative_to(dist)) for p in need if not p.exists()]
    if missing:
        return f"{dist}: no {', '.join(missing)} (version {v})"
    if WASM.exists() and WASM.read_bytes() != (dist / f"toolgate-filter-{v}.wasm").read_bytes():
        return f"{dist}/toolgate-filter-{v}.wasm is not {WASM.relative_to(REPO)}"
    with tarfile.open(dist / f"toolgate-{v}.tgz") as tgz:
        packaged = {m.name.split("/", 1)[1]: tgz.extractfile(m).read().decode()
                    for m in tgz.getmembers() if m.isfile() and "/" in m.name}
    src = REPO / "charts/toolgate"
    # Chart.yaml is rewritten by helm package (its fields re-marshalled): the version, in the file names, is checked.
    for path in sorted(p for p in src.rglob("*") if p.is_file() and p.name not in (".helmignore", "Chart.yaml")):
        rel = path.relative_to(src).as_posix()
        if rel not in packaged:
            return f"toolgate-{v}.tgz has no {rel}"
        if _normalized(rel, packaged[rel]) != _normalized(rel, path.read_text()):
            return f"toolgate-{v}.tgz: {rel} differs from charts/toolgate/{rel}"
    for crd in sorted((REPO / "crds").glob("*.yaml")):
        if packaged.get(f"files/crds/{crd.name}") != _without_header(crd.read_text()):
            return f"toolgate-{v}.tgz: files/crds/{crd.name} differs from crds/{crd.name}"
    return None


def ensure_dist() -> Path:
    """dist/ for this tree: `make release` when it is missing or stale (its reason is printed). One at a
    time (a lock in .work/), and as a make of its own: the jobserver of a `make test` that started pytest
    is not passed on."""
    if dist_staleness() is None:
        return DIST
    lock = REPO / ".work/istio-install-release.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        why = dist_staleness()
        if why is None:
            return DIST
        log(f"dist/ is stale ({why}): make release")
        t0 = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        out = subprocess.run(["make", "--no-print-directory", "release"], cwd=REPO, capture_output=True, text=True,
                             timeout=3600, env={**env, "DIST": str(DIST)})
        assert out.returncode == 0, f"make release failed:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        log(f"make release: {time.monotonic() - t0:.0f} s")
        why = dist_staleness()
        assert why is None, f"dist/ still stale after make release: {why}"
    return DIST


def layout_digest(layout: Path, tag: str) -> str:
    index = json.loads((layout / "index.json").read_text())
    found = [m["digest"] for m in index["manifests"]
             if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    assert len(found) == 1, (layout, tag, index)
    return found[0]


def layout_plugin_wasm(layout: Path, tag: str) -> bytes:
    """plugin.wasm of the filter image a layout tags (its one tar+gzip layer)."""
    blob = lambda d: (layout / "blobs" / d.replace(":", "/")).read_bytes()  # noqa: E731
    manifest = json.loads(blob(layout_digest(layout, tag)))
    (layer,) = manifest["layers"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(layer["digest"])))) as tar:
        return tar.extractfile("plugin.wasm").read()


# ---- Wasm modules and filter images ----------------------------------------------------------------

def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def with_custom_section(wasm: bytes, name: str, payload: bytes) -> bytes:
    """The module with a custom section appended (id 0: ignored by every runtime): the same code, other
    bytes, so another image digest."""
    assert wasm[:4] == b"\0asm", "not a Wasm module"
    body = _leb128(len(name)) + name.encode() + payload
    return wasm + b"\x00" + _leb128(len(body)) + body


def filter_layer(wasm: bytes, level: int = 9) -> tuple[bytes, str]:
    """A compat-variant layer (tar+gzip with plugin.wasm, as release.py writes it) and the tar's diff_id."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("plugin.wasm")
        info.size, info.mode, info.mtime = len(wasm), 0o644, 0
        tar.addfile(info, io.BytesIO(wasm))
    data = raw.getvalue()
    return gzip.compress(data, compresslevel=level, mtime=0), "sha256:" + hashlib.sha256(data).hexdigest()


# ---- the registry ----------------------------------------------------------------------------------

class Registry:
    """The CNCF distribution registry (github.com/distribution/distribution/v3 cmd/registry, pinned in
    release/tools.sh) on 127.0.0.1, plain HTTP, filesystem storage in the test's folder. No blob
    descriptor cache: what is in the storage is what it serves (the tampering test replaces a blob)."""

    def __init__(self, binary: Path, oras: Path, workdir: Path):
        self.oras = oras
        self.workdir = workdir
        self.root = workdir / "registry-data"
        self.port = harness.free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.log = workdir / "registry.log"
        config = workdir / "registry.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.root)}, "delete": {"enabled": True},
                        "maintenance": {"uploadpurging": {"enabled": False}}},
            "http": {"addr": self.host, "secret": "toolgate-test"},
            "health": {"storagedriver": {"enabled": False}},
        }, indent=1))
        # No OpenTelemetry exporters (the registry would send traces to localhost:4318).
        env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
               "OTEL_LOGS_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}
        self.proc = subprocess.Popen([str(binary), "serve", str(config)], stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"registry exited:\n{harness.tail(self.log)}")
            try:
                return harness.request("GET", f"http://{self.host}/v2/", timeout=1).status == 200
            except OSError:
                return False
        harness.wait_for(up, timeout=20, what=f"registry on {self.host}")

    def ref(self, name: str) -> str:
        """<host>/toolgate/<name>"""
        return f"{self.host}/{REPO_PREFIX}/{name}"

    @property
    def reg(self) -> str:
        """The README's $REG: <host>/toolgate."""
        return f"{self.host}/{REPO_PREFIX}"

    def oras_run(self, *args: str) -> str:
        out = subprocess.run([str(self.oras), *args], capture_output=True, text=True, timeout=120, cwd=self.workdir,
                             env={**os.environ, "DOCKER_CONFIG": str(self.workdir / "docker-config")})
        assert out.returncode == 0, f"oras {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def push_filter(self, wasm: bytes, tag: str, level: int = 9, plan_version: str | None = PLAN_VERSION) -> dict:
        """A filter image (compat variant, like release.py's) holding `wasm`, pushed as toolgate-filter:<tag>,
        with release.py's plan-version annotation (None: without it). Returns digest, layer digest and size,
        and the module's sha256."""
        work = self.workdir / f"image-{tag}"
        work.mkdir()
        layer, diff_id = filter_layer(wasm, level)
        (work / "layer.tar.gz").write_bytes(layer)
        (work / "config.json").write_text(json.dumps(
            {"architecture": "wasm", "os": "wasip1", "config": {}, "rootfs": {"type": "layers", "diff_ids": [diff_id]}},
            separators=(",", ":")))
        out = subprocess.run([str(self.oras), "push", "--no-tty", "--plain-http", f"{self.ref('toolgate-filter')}:{tag}",
                              "--config", f"config.json:{OCI_CONFIG}", f"layer.tar.gz:{OCI_LAYER_GZIP}",
                              *(["--annotation", f"{PLAN_VERSION_ANNOTATION}={plan_version}"] if plan_version else [])],
                             capture_output=True, text=True, timeout=120, cwd=work,
                             env={**os.environ, "DOCKER_CONFIG": str(self.workdir / "docker-config")})
        assert out.returncode == 0, f"oras push:\n{out.stdout}\n{out.stderr}"
        digest = re.search(r"^Digest: (sha256:[0-9a-f]{64})$", out.stdout, re.M).group(1)
        return {"digest": digest, "layer": "sha256:" + hashlib.sha256(layer).hexdigest(), "layer_size": len(layer),
                "wasm_sha256": hashlib.sha256(wasm).hexdigest(), "tag": tag}

    def blob_path(self, digest: str) -> Path:
        """The file the registry serves a blob from (filesystem driver layout)."""
        hexd = digest.split(":", 1)[1]
        return self.root / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"

    def stop(self):
        harness._stop_process(self.proc)


# ---- the README's install steps ------------------------------------------------------------------

def readme_install_commands() -> list[list[str]]:
    """The `oras` and `helm` commands of the README's "Install in a cluster" block, continuation lines
    joined, as argv lists ($REG and $V as written)."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Install in a cluster\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```sh\n(.*?)^```$", section, re.M | re.S).group(1).replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in block.splitlines()]
    commands = [c for c in commands if c and c[0] in ("oras", "helm")]
    assert [c[:2] for c in commands] == [["oras", "cp"]] * 3 + [["helm", "install"]], commands
    return commands


def readme_argv(argv: list[str], reg: str, version: str, dist: Path) -> list[str]:
    """A README command with the test's registry and version, dist/ where the test's is."""
    argv = [a.replace("$REG", reg).replace("$V", version) for a in argv]
    return [str(dist) + a[len("dist"):] if a.startswith("dist/") else a for a in argv]


# ---- helm and the chart's controller ---------------------------------------------------------------

class Helm:
    """The real helm (release/tools.sh) against the test cluster (the admin kubeconfig), with its own
    cache and config folders."""

    def __init__(self, binary: Path, cluster: Cluster, workdir: Path):
        self.binary = binary
        self.env = {**os.environ, "KUBECONFIG": str(cluster.admin_kubeconfig),
                    "HELM_CACHE_HOME": str(workdir / "helm/cache"), "HELM_CONFIG_HOME": str(workdir / "helm/config"),
                    "HELM_DATA_HOME": str(workdir / "helm/data")}

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        out = subprocess.run([str(self.binary), *args], capture_output=True, text=True, timeout=300, env=self.env)
        if check:
            assert out.returncode == 0, f"helm {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
        log(f"helm {args[0]}: {time.monotonic() - t0:.1f} s")
        return out


class ChartController:
    """The chart's Deployment `toolgate-controller`, run out of cluster as its pod would run: the container's
    arguments and environment as the API server holds them (so the test follows the chart), the
    ServiceAccount the pod template names (a token from `kubectl create token`, so the API server enforces
    the chart's RBAC), the release's namespace as the client's. Only `--metrics-addr` is moved to a free
    port on 127.0.0.1. `sync()` plays the Deployment controller and kubelet: when `helm upgrade` changed
    the pod template it stops the process (SIGTERM: the Lease is released) and starts the new one."""

    def __init__(self, cluster: Cluster, workdir: Path, namespace: str = NAMESPACE, name: str = "toolgate-controller"):
        self.cluster, self.workdir, self.namespace, self.name = cluster, workdir, namespace, name
        self.proc: subprocess.Popen | None = None
        self.template: dict | None = None
        self.starts = 0

    def deployment(self) -> dict | None:
        return self.cluster.get("deployment", self.name, namespace=self.namespace)

    def pod_spec(self) -> dict:
        d = self.deployment()
        assert d, f"no Deployment {self.namespace}/{self.name}"
        return d["spec"]["template"]["spec"]

    def kubeconfig(self, service_account: str) -> Path:
        token = self.cluster.kubectl("create", "token", service_account, "-n", self.namespace,
                                     "--duration", "2h").stdout.strip()
        admin = json.loads(self.cluster.kubectl("config", "view", "--raw", "-o", "json").stdout)
        server = admin["clusters"][0]["cluster"]["server"]
        path = self.workdir / f"controller-{service_account}.kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": server,
                                                      "certificate-authority": str(self.cluster.run / "pki/ca.crt")}}],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": service_account,
                                                      "namespace": self.namespace}}],
            "current-context": "test"}))
        return path

    def command(self, spec: dict) -> tuple[list[str], dict[str, str]]:
        (container,) = spec["containers"]
        args = list(container["args"])
        assert args[0] == "controller", args
        self.metrics_port = harness.free_port()
        args = [f"--metrics-addr=127.0.0.1:{self.metrics_port}" if a.startswith("--metrics-addr=") else a for a in args]
        env = {}
        for e in container.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[e["name"]] = f"{self.name}-test-{self.starts}"
            else:
                raise AssertionError(f"the chart's container env {e} has no out-of-cluster equivalent here")
        return [str(harness.toolgate_binary()), *args], env

    def start(self):
        spec = self.pod_spec()
        self.template = spec
        self.service_account = spec["serviceAccountName"]
        self.kubeconfig_path = self.kubeconfig(self.service_account)
        cmd, env = self.command(spec)
        self.args = cmd[1:]
        self.log = self.workdir / f"controller-{self.starts}.log"
        self.starts += 1
        # A container's environment: what the pod template sets, nothing of the test runner's but PATH.
        self.proc = subprocess.Popen(cmd, env={"PATH": os.environ.get("PATH", ""), **env,
                                               "KUBECONFIG": str(self.kubeconfig_path)},
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)

        def ready():
            assert self.proc.poll() is None, f"controller exited:\n{self.log.read_text()[-3000:]}"
            try:  # the chart's readinessProbe: /readyz on the metrics port
                return harness.request("GET", f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2).status == 200
            except OSError:
                return False
        harness.wait_for(ready, timeout=60, what=f"the chart's controller ready\n{self.log}")

    def sync(self) -> bool:
        """Restart when the Deployment's pod template changed (True), or when it is gone stop (False)."""
        d = self.deployment()
        if d is None:
            self.stop()
            return False
        if d["spec"]["template"]["spec"] != self.template or self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
            return True
        return False

    def stop(self):
        if self.proc is not None:
            harness._stop_process(self.proc)
            self.proc = None


# ---- the gateway's xDS path with istio-agent's Wasm pull ----------------------------------------------

class AgentShim:
    """tests/istio/xds-shim with -wasm-cache-dir: as XdsShim (istio_stack.py), and ECDS responses go through
    istio.io/istio/pkg/wasm (remote modules pulled, checked and handed to Envoy as local files; a module that
    fails becomes Istio's deny-all RBAC filter for FAIL_CLOSE)."""

    def __init__(self, upstream_port: int, workdir: Path):
        self.port = harness.free_port()
        self.cache_dir = workdir / "wasm-cache"
        self.cache_dir.mkdir()
        self.log = workdir / "xds-shim.log"
        self.proc = subprocess.Popen(
            [str(BIN / "xds-shim"), "--listen", f"127.0.0.1:{self.port}", "--upstream", f"127.0.0.1:{upstream_port}",
             "--wasm-cache-dir", str(self.cache_dir)],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: harness.tcp_open("127.0.0.1", self.port) or self.proc.poll() is not None,
                         timeout=20, what="xds-shim listening")
        assert self.proc.poll() is None, self.log.read_text()
        assert "wasm: remote Wasm modules are pulled into" in self.log.read_text(), (
            f"{BIN / 'xds-shim'} has no -wasm-cache-dir: `bash tests/istio/gobuild.sh ensure` rebuilds it")

    def module_path(self, url: str, manifest_digest: str) -> Path:
        """Where istio's LocalFileCache keeps a module: <dir>/<sha256 of the url without tag or digest>/<digest hex>.wasm."""
        name = re.sub(r"(@sha256:[0-9a-f]{64}|:[^/:@]+)$", "", url)
        return self.cache_dir / hashlib.sha256(name.encode()).hexdigest() / f"{manifest_digest.split(':')[1]}.wasm"

    def stop(self):
        harness._stop_process(self.proc)


def ecds(envoy: harness.Envoy) -> dict[str, dict]:
    """Envoy's ECDS filters by name: their typed_config (a Wasm filter, or Istio's RBAC default filter)."""
    out = {}
    for c in envoy.config_dump("ecds_filters").get("configs", []):
        f = c.get("ecds_filter", {})
        out[f.get("name", "")] = f.get("typed_config", {})
    return out


def loaded_module(envoy: harness.Envoy, name: str = "toolgate-gw-http") -> str | None:
    """What Envoy runs as the ECDS filter whose name contains `name` (istiod's name for the WasmPlugin): the
    Wasm module's local file, 'deny' / 'allow' for Istio's default RBAC filter, None when there is none."""
    found = [tc for n, tc in ecds(envoy).items() if name in n]
    if not found:
        return None
    assert len(found) == 1, found
    tc = found[0]
    if tc.get("@type", "").endswith("filters.http.rbac.v3.RBAC"):
        # istio.io/istio pkg/wasm: DefaultDenyStatPrefix, DefaultAllowStatPrefix
        return {"wasm-default-deny": "deny", "wasm-default-allow": "allow"}.get(tc.get("rules_stat_prefix"), json.dumps(tc))
    code = tc.get("config", {}).get("vm_config", {}).get("code", {})
    if "local" in code:
        return code["local"]["filename"]
    return f"remote {code.get('remote', {}).get('http_uri', {}).get('uri')}"
