"""A real Kubernetes control plane for the tests: hack/kube/cluster.py's etcd, kube-apiserver, controller-manager,
scheduler and kwok controller on loopback, started once for the session (or the cluster KARPUI_REAL_KUBECONFIG
names), with Karpenter's CRDs installed as a Karpenter user has them.

`unavailable()` says in one line why the tier cannot run here (no Go, binaries not built), or None. Between tests
`reset()` puts the cluster back as it started: what a test made (workloads, NodePools, NodeClaims, Nodes, DRA
objects, namespaces, leases) is deleted, so each test meets an empty cluster, as the lab's fresh one."""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "hack" / "kube" / "cluster.py"
BUILD = ROOT / "hack" / "kube" / "build.sh"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
START_TIMEOUT = 360.0
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The session's cluster runs Karpenter's DRA kwok driver (seed 000's experiment 3), not Karpenter itself: karpui is
# the provisioner here, and a test that observes Karpenter starts it (`karpenter()`).
# What tests make, deleted between them (namespaced kinds in every namespace).
RESET_KINDS = (
    "deployments.apps",
    "daemonsets.apps",
    "replicasets.apps",
    "poddisruptionbudgets.policy",
    "resourceclaimtemplates.resource.k8s.io",
    "resourceclaims.resource.k8s.io",
    "events",
)
NO_GRACE = '{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}'
CLUSTER_KINDS = (
    "nodepools.karpenter.sh",
    "kwoknodeclasses.karpenter.kwok.sh",
    "ec2nodeclasses.karpenter.k8s.aws",
    "deviceclasses.resource.k8s.io",
    "resourceslices.resource.k8s.io",
    "draconfigs.test.karpenter.sh",
)


def paths() -> dict[str, str]:
    done = subprocess.run([str(BUILD), "--paths"], capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def unavailable() -> str | None:
    """Why the real-cluster tier cannot run here, in one line; None when it can."""
    if os.environ.get("KARPUI_REAL_KUBECONFIG"):
        return None
    if not Path(KUBECTL).exists():
        return "no kubectl on PATH (the tier drives the cluster with it)"
    if subprocess.run([str(BUILD), "--check"], capture_output=True).returncode == 0:
        return None
    if shutil.which("go") is None:
        return "no Go toolchain here to build kube-apiserver & co. (hack/kube/build.sh needs Go >= 1.26)"
    return "the binaries are not built: run hack/kube/build.sh (a cold build took an hour on 2 busy cores)"


class RealCluster:
    """The session's cluster: its kubeconfig, clients, kubectl, and faults through its supervisor."""

    def __init__(self, kubeconfig: Path, folder: Path | None, process: subprocess.Popen[bytes] | None) -> None:
        self.kubeconfig = kubeconfig
        self.folder = folder
        self.process = process
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c for c in config["contexts"] if c["name"] == config["current-context"])["context"]
        self.server = next(c for c in config["clusters"] if c["name"] == context["cluster"])["cluster"]["server"]
        self._config = config
        self._user = next(u for u in config["users"] if u["name"] == context["user"])["user"]

    # Lifecycle ------------------------------------------------------------------------------------------------

    @classmethod
    def start(cls, folder: Path) -> RealCluster:
        """hack/kube/cluster.py up, as a child that dies with this process (however it dies)."""
        log = open(folder / "supervisor.log", "ab")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen(
            [sys.executable, str(CLUSTER), "up", "--dir", str(folder), "--die-with-parent", "--dra-driver"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not _state(folder).get("ready"):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                tail = (folder / "supervisor.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the real cluster did not start:\n{tail}")
            time.sleep(0.2)
        made = cls(folder / "kubeconfig", folder, process)
        made.install_crds()
        return made

    @classmethod
    def given(cls, kubeconfig: str) -> RealCluster:
        made = cls(Path(kubeconfig), None, None)
        made.install_crds()
        return made

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def state(self) -> dict[str, Any]:
        return _state(self.folder) if self.folder else {}

    def install_crds(self) -> None:
        """Karpenter's own CRDs from the module (NodePool, NodeClaim, KWOKNodeClass, its DRA kwok driver's DRAConfig,
        ...), as a Karpenter user has them; the EC2NodeClass CRD, which Karpenter's core module does not ship, is
        karpui's."""
        crds = paths()["KARPUI_KARPENTER_CRDS"]
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
        from karpui.kubeapi.openapi import crd_manifests

        own = yaml.safe_dump_all(crd_manifests(("EC2NodeClass",)))
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=own)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

    # Clients --------------------------------------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """kubectl 1.32 against the cluster, as its admin (or as whoever `kubeconfig` names)."""
        argv = [KUBECTL, "--kubeconfig", str(kubeconfig or self.kubeconfig), *args]
        done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}{done.stdout}")
        return done

    def client(self) -> Any:
        """A client without a cache, as kubectl is."""
        from provisioner.adapters.direct import UncachedCluster
        from provisioner.adapters.transport import Transport

        return UncachedCluster(Transport.from_kubeconfig(str(self.kubeconfig)))

    def ca_file(self) -> str:
        data = self._config["clusters"][0]["cluster"]["certificate-authority-data"]
        return _temporary(base64.b64decode(data), ".crt")

    def ssl_context(self, client_certificate: bool = True) -> ssl.SSLContext:
        """TLS to the API server (its CA), as the admin (a client certificate in system:masters) or as nobody."""
        context = ssl.create_default_context(cafile=self.ca_file())
        if client_certificate:
            certificate = _temporary(base64.b64decode(self._user["client-certificate-data"]), ".crt")
            key = _temporary(base64.b64decode(self._user["client-key-data"]), ".key")
            context.load_cert_chain(certificate, key)
        return context

    def token_kubeconfig(self, token: str | None, server: str | None = None) -> Path:
        """A kubeconfig that authenticates with a bearer token only (a ServiceAccount's), or with nothing (for a
        fault proxy on loopback, which authenticates upstream itself)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "real", "cluster": {"server": server or self.server}}],
            "users": [{"name": "token", "user": {"token": token} if token else {}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "token"}}],
            "current-context": "real",
        }
        if server is None or server.startswith("https"):
            config["clusters"][0]["cluster"]["certificate-authority"] = self.ca_file()
        return Path(_temporary(yaml.safe_dump(config).encode(), ".kubeconfig"))

    # Faults -----------------------------------------------------------------------------------------------------

    def fault(self, command: str, component: str) -> None:
        """kill | restart | hold | release a component (kube-apiserver, etcd, ...) through the supervisor."""
        assert self.folder is not None, "faults need the cluster this session started"
        subprocess.run([sys.executable, str(CLUSTER), command, component, "--dir", str(self.folder)], check=True)

    def log_tail(self, component: str, lines: int = 30) -> str:
        """The last lines a component (kube-scheduler, kwok, ...) wrote to its log in the cluster's folder."""
        assert self.folder is not None, "logs are in the folder of the cluster this session started"
        path = self.folder / "logs" / f"{component}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def pid(self, component: str) -> int | None:
        return self.state().get("components", {}).get(component, {}).get("pid")

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Until kube-apiserver answers /readyz again: the seconds it took."""
        import urllib.request

        started = time.monotonic()
        context = self.ssl_context()
        while True:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.server}/readyz", context=context, timeout=2) as answer,
            ):
                if answer.status == 200:
                    return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError(f"kube-apiserver not ready within {timeout} s")
            time.sleep(0.2)

    def etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's v3 JSON gateway (e.g. /v3/kv/compaction)."""
        import urllib.request

        port = self.state()["ports"]["etcd"]
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return dict(json.loads(answer.read()))

    # Between tests ----------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Delete what tests made: workloads, pods, NodeClaims (finalizers dropped), Nodes, NodePools, node classes,
        DRA objects, namespaces and leases other than the system's."""
        # kubectl deletes one object per request: after a 20,000-pod race the Events alone took over 2 minutes, so
        # each namespace's Events and pods go first in one request each (the collection's DELETE; the server may
        # answer a large one with a timeout while it goes on deleting, and the sweeps below take what is left).
        for namespace in self.kubectl("get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}").stdout.split():
            self.kubectl("delete", "--raw", f"/api/v1/namespaces/{namespace}/events", check=False)
            self.kubectl(
                "delete", "--raw", f"/api/v1/namespaces/{namespace}/pods", "-f", "-", input=NO_GRACE, check=False
            )
        self.kubectl("delete", ",".join(RESET_KINDS), "--all", "-A", "--wait=false", "--ignore-not-found", timeout=900)
        self.kubectl("delete", "pods", "--all", "-A", "--grace-period=0", "--force", "--ignore-not-found", timeout=900)
        self._drop_finalizers("nodeclaims.karpenter.sh")
        self.kubectl("delete", "nodeclaims.karpenter.sh", "--all", "--ignore-not-found", "--wait=false")
        self._drop_finalizers("nodes")
        self.kubectl("delete", "nodes", "--all", "--ignore-not-found", "--wait=false")
        self.kubectl("delete", ",".join(CLUSTER_KINDS), "--all", "--ignore-not-found", "--wait=false")
        self.kubectl("delete", "leases.coordination.k8s.io", "--all", "-n", "default", "--ignore-not-found")
        # deploy/'s cluster-wide RBAC (its namespaced objects go with the namespace karpui).
        for name in ("karpui-kwok", "karpui-observe"):
            self.kubectl("delete", f"clusterrole/{name}", f"clusterrolebinding/{name}", "--ignore-not-found")
        namespaces = self.kubectl("get", "namespaces", "-o", "name").stdout.split()
        extra = [n for n in namespaces if n.split("/", 1)[1] not in SYSTEM_NAMESPACES]
        if extra:
            self.kubectl("delete", *extra, "--wait=false")
        self.kubectl("delete", "pods", "--all", "-A", "--grace-period=0", "--force", "--ignore-not-found")
        self._wait_gone(("pods", "nodes", "nodeclaims.karpenter.sh", "nodepools.karpenter.sh"))
        # A namespace goes once the namespace controller has emptied it; a test making it again must not find it
        # still Terminating.
        deadline = time.monotonic() + 60
        while extra and set(extra) & set(self.kubectl("get", "namespaces", "-o", "name").stdout.split()):
            assert time.monotonic() < deadline, f"namespaces still there after the reset: {extra}"
            time.sleep(0.5)

    def _drop_finalizers(self, resource: str) -> None:
        for name in self.kubectl("get", resource, "-o", "name").stdout.split():
            self.kubectl("patch", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)

    def _wait_gone(self, resources: Sequence[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = self.kubectl("get", ",".join(resources), "-A", "-o", "name").stdout.split()
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"left after the reset: {left}")
            self.kubectl("delete", *left, "--grace-period=0", "--force", "--ignore-not-found", check=False)
            time.sleep(0.5)


def _state(folder: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((folder / "cluster.json").read_text()))
    except (OSError, ValueError):
        return {}


_files: dict[bytes, str] = {}


def _temporary(data: bytes, suffix: str) -> str:
    """A private file holding `data` for this process's life (one per content)."""
    if data not in _files:
        handle, path = tempfile.mkstemp(suffix=suffix, prefix="karpui-real-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        _files[data] = path
    return _files[data]


@atexit.register
def _remove_temporaries() -> None:
    for path in _files.values():
        with contextlib.suppress(OSError):
            os.unlink(path)
