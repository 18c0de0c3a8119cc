#!/usr/bin/env python3
"""A local Kubernetes cluster on loopback from the binaries hack/kube/build.sh builds: etcd, kube-apiserver (TLS,
client certificates, RBAC), kube-controller-manager, kube-scheduler and the kwok controller (when asked, Karpenter's
kwok provider, and Karpenter's DRA kwok driver, which publishes ResourceSlices on kwok nodes as DRAConfigs say, each
after its CRDs), supervised by this one process.

    hack/kube/cluster.py up [--dir DIR] [--karpenter] [--dra-driver]
                                          run in the foreground; Ctrl-C stops everything
    hack/kube/cluster.py start [...]      the same in the background; returns once the cluster is ready
    hack/kube/cluster.py stop [--dir DIR]                 stop a background cluster and wait until it is gone
    hack/kube/cluster.py status [--dir DIR]               what runs, on which ports, with which pids
    hack/kube/cluster.py kill|restart|hold|release NAME   faults for tests: SIGKILL a component (held down with
                                                          `hold` until `release`), or restart it

The cluster is ready when kube-apiserver's /readyz, the controller-manager's, the scheduler's and kwok's /healthz
answer 200 and the `default` ServiceAccount exists; then DIR/kubeconfig is the admin's kubeconfig (a client
certificate in `system:masters`) and DIR/cluster.json says what runs where. Every port is chosen free at start, so
clusters never collide. The supervisor restarts a component that exits (as the kubelet restarts static pods), and
on stop, Ctrl-C or SIGTERM stops them all in reverse order; every component dies with the supervisor even when it
is SIGKILLed (PR_SET_PDEATHSIG). Standard library only, plus `openssl` and `kubectl` (for Karpenter's CRDs).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_DIR = Path(os.environ.get("KARPUI_VAR_DIR", ROOT / "var")) / "kube"
SERVICE_RANGE = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
READY_TIMEOUT = 300.0  # a cold start on a loaded 2-core machine: kube-apiserver alone can take a minute
STOP_TIMEOUT = 10.0
PR_SET_PDEATHSIG = 1


def say(message: str) -> None:
    print(f"[kube {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# Binaries ---------------------------------------------------------------------------------------------------------


def binaries() -> dict[str, str]:
    """Where build.sh puts (or has put) each binary, read from `build.sh --paths` without building."""
    done = subprocess.run([str(HERE / "build.sh"), "--paths"], capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def ensure_built(paths: dict[str, str], karpenter: bool) -> None:
    wanted = [Path(paths["KARPUI_KUBE_BIN"]) / b for b in ("etcd", "kube-apiserver", "kube-controller-manager")]
    wanted += [Path(paths["KARPUI_KUBE_BIN"]) / "kube-scheduler", Path(paths["KARPUI_KWOK_BIN"])]
    if karpenter:
        wanted += [Path(paths["KARPUI_KARPENTER_BIN"]), Path(paths["KARPUI_DRA_DRIVER_BIN"])]
    missing = [str(p) for p in wanted if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(
            "hack/kube/cluster.py: not built yet: " + ", ".join(missing) + "\n  build them with hack/kube/build.sh "
            "(a cold build took an hour on 2 busy cores), or pass --build"
        )


# Certificates -----------------------------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(pki: Path) -> None:
    """A CA, the API server's serving certificate, client certificates for the admin and each component, and the
    service-account signing key. Elliptic-curve keys: quick to make, and every component takes them."""
    pki.mkdir(parents=True, exist_ok=True)
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(
        "req",
        "-x509",
        *curve,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=karpui-local-kube-ca",
        cwd=pki,
    )
    leaves = {
        "apiserver": (
            "/CN=kube-apiserver",
            "serverAuth",
            f"IP:127.0.0.1,IP:{SERVICE_IP},DNS:localhost,"
            "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
            "DNS:kubernetes.default.svc.cluster.local",
        ),
        "admin": ("/O=system:masters/CN=kubernetes-admin", "clientAuth", ""),
        "controller-manager": ("/CN=system:kube-controller-manager", "clientAuth", ""),
        "scheduler": ("/CN=system:kube-scheduler", "clientAuth", ""),
        "kwok": ("/O=system:masters/CN=kwok-controller", "clientAuth", ""),
        "karpenter": ("/O=system:masters/CN=karpenter", "clientAuth", ""),
        "apiserver-kubelet-client": ("/O=system:masters/CN=kube-apiserver-kubelet-client", "clientAuth", ""),
    }
    for name, (subject, usage, names) in leaves.items():
        extensions = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if names:
            extensions.append(f"subjectAltName={names}")
        (pki / f"{name}.ext").write_text("\n".join(extensions) + "\n")
        openssl("req", "-new", *curve, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=pki)
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=pki,
        )
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for path in pki.iterdir():
        path.chmod(0o600)


def kubeconfig(pki: Path, server: str, user: str) -> dict[str, Any]:
    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "karpui-local", "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": data(f"{user}.crt"), "client-key-data": data(f"{user}.key")},
            }
        ],
        "contexts": [{"name": "karpui-local", "context": {"cluster": "karpui-local", "user": user}}],
        "current-context": "karpui-local",
    }


# Ports and health -------------------------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each probe stays bound until all are picked, as the kernel may otherwise hand
    out the same port twice (etcd's and kwok's once were, and kwok did not start)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def advertise_address() -> str:
    """A non-loopback address of this machine: kube-apiserver refuses a loopback one. Nothing listens there (the
    server binds 127.0.0.1); it only names the `kubernetes` Service's endpoint, which nothing here reconciles."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only asks the routing table
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    return address if address and not address.startswith("127.") else "192.0.2.10"


def get(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:  # noqa: S310 - our URLs
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode(errors="replace")
    except (OSError, ssl.SSLError):
        return 0, ""


def admin_context(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def insecure_context() -> ssl.SSLContext:
    """For the components' own /healthz, served with a self-signed certificate each makes at start."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


# Components -------------------------------------------------------------------------------------------------------


# A Node with this annotation keeps the conditions it is given: kwok's node-initialize stage, which sets every
# condition of a node that is not Ready back to healthy at once, passes it by. A node made NotReady on purpose (a
# node repair test, as Karpenter's regression suite makes one with ReplaceNodeConditions) then stays NotReady.
HOLD_CONDITIONS = "karpui.dev/kwok-hold-conditions"
_NODE_INITIALIZE_SELECTOR = "  selector:\n    matchExpressions:\n"
_NODE_HEARTBEAT_DELAY = "    durationMilliseconds: 600000\n    jitterDurationMilliseconds: 610000\n"
_NODE_HEARTBEAT_DELAY_HERE = "    durationMilliseconds: 20000\n    jitterDurationMilliseconds: 30000\n"


def kwok_stages(source: Path, folder: Path) -> list[str]:
    """kwok's stages from the build, copied into the cluster's folder with node-initialize passing by nodes that hold
    their conditions, and a node's status heartbeat every 20-30 s; the paths, sorted."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for stage in sorted(source.glob("*.yaml")):
        text = stage.read_text()
        if "\n  name: node-initialize\n" in text:
            assert _NODE_INITIALIZE_SELECTOR in text, f"{stage}: kwok's node-initialize stage has no matchExpressions"
            held = f"    - key: '.metadata.annotations[\"{HOLD_CONDITIONS}\"]'\n      operator: 'DoesNotExist'\n"
            text = text.replace(_NODE_INITIALIZE_SELECTOR, _NODE_INITIALIZE_SELECTOR + held, 1)
        if "\n  name: node-heartbeat-with-lease\n" in text:
            # kube-controller-manager does not requeue a node whose not-ready taint it failed to lift (the TODO in
            # its doNodeProcessingPassWorker): the node's next status update retries it. A kubelet posts one at
            # least every 5 minutes, kwok's stage every 10: an API server down just as a node became Ready left the
            # taint on a Ready node for 10 minutes, and its NodeClaim uninitialized, as Karpenter's would be. Every
            # 20-30 s (two writes a second at a race's 50 nodes), the taint goes within half a minute of the
            # restart, well inside the fault tests' limits.
            assert _NODE_HEARTBEAT_DELAY in text, f"{stage}: kwok's node heartbeat is not every 600-610 s any more"
            text = text.replace(_NODE_HEARTBEAT_DELAY, _NODE_HEARTBEAT_DELAY_HERE, 1)
        (folder / stage.name).write_text(text)
    return sorted(str(path) for path in folder.glob("*.yaml"))


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the supervisor dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    name: str
    argv: list[str]
    health: str  # URL that answers 200 once it serves
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    crds: tuple[str, ...] = ()  # CRD files applied before it first starts
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0
    backoff: float = 1.0
    down_since: float | None = None

    def start(self, folder: Path) -> None:
        log = open(folder / "logs" / f"{self.name}.log", "ab")  # noqa: SIM115 - the child owns it
        log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {' '.join(self.argv)}\n".encode())
        log.flush()
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=folder,
            start_new_session=True,  # Ctrl-C reaches the supervisor alone, which stops everything in order
            preexec_fn=_die_with_parent,  # no threads in the supervisor, so a pre-exec function is safe
        )
        log.close()
        self.started_at, self.down_since = time.monotonic(), None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if not self.running():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Cluster:
    def __init__(
        self, folder: Path, paths: dict[str, str], karpenter: bool, apiserver_port: int = 0, dra_driver: bool = False
    ) -> None:
        self.folder, self.paths, self.karpenter, self.dra_driver = folder, paths, karpenter, dra_driver
        self.pki = folder / "pki"
        names = (
            "etcd",
            "etcd-peer",
            "apiserver",
            "controller-manager",
            "scheduler",
            "kwok",
            "karpenter-metrics",
            "karpenter-health",
            "dra-driver-health",
        )
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        if apiserver_port:
            self.ports["apiserver"] = apiserver_port
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.components: list[Component] = []
        self.stopping = False

    # Set-up ---------------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        for stale in ("etcd", "pki", "logs", "hold"):
            shutil.rmtree(self.folder / stale, ignore_errors=True)
        (self.folder / "logs").mkdir(parents=True)
        (self.folder / "hold").mkdir()
        make_certificates(self.pki)
        for user in ("admin", "controller-manager", "scheduler", "kwok", "karpenter"):
            path = self.folder / ("kubeconfig" if user == "admin" else f"{user}.kubeconfig")
            write_private(path, json.dumps(kubeconfig(self.pki, self.server, user), indent=1))
        self.components = self._components()

    def _components(self) -> list[Component]:
        kube, pki, folder, ports = Path(self.paths["KARPUI_KUBE_BIN"]), self.pki, self.folder, self.ports
        etcd = Component(
            "etcd",
            [
                str(kube / "etcd"),
                "--name=karpui-local",
                f"--data-dir={folder / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{ports['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
                f"--initial-cluster=karpui-local=http://127.0.0.1:{ports['etcd-peer']}",
                "--listen-metrics-urls=",
                "--log-level=warn",
                "--unsafe-no-fsync",  # a throwaway test cluster: nothing here must survive a power cut
                "--quota-backend-bytes=4294967296",
            ],
            f"http://127.0.0.1:{ports['etcd']}/health",
            port=ports["etcd"],
        )
        apiserver = Component(
            "kube-apiserver",
            [
                str(kube / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--advertise-address={advertise_address()}",
                "--endpoint-reconciler-type=none",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--cert-dir={pki}",
            ],
            f"{self.server}/readyz",
            port=ports["apiserver"],
        )
        delegated = [
            f"--kubeconfig={folder / 'controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={folder / 'controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={folder / 'controller-manager.kubeconfig'}",
        ]
        controller_manager = Component(
            "kube-controller-manager",
            [
                str(kube / "kube-controller-manager"),
                *delegated,
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['controller-manager']}",
                f"--cert-dir={folder / 'controller-manager'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                # One instance: without leader election a restarted manager acts at once, not after the old lease.
                "--leader-elect=false",
            ],
            f"https://127.0.0.1:{ports['controller-manager']}/healthz",
            port=ports["controller-manager"],
        )
        scheduler = Component(
            "kube-scheduler",
            [
                str(kube / "kube-scheduler"),
                *[flag.replace("controller-manager.kubeconfig", "scheduler.kubeconfig") for flag in delegated],
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                f"--cert-dir={folder / 'scheduler'}",
                "--leader-elect=false",
            ],
            f"https://127.0.0.1:{ports['scheduler']}/healthz",
            port=ports["scheduler"],
        )
        stages = kwok_stages(Path(self.paths["KARPUI_KWOK_STAGES"]), folder / "kwok-stages")
        kwok = Component(
            "kwok",
            [
                self.paths["KARPUI_KWOK_BIN"],
                f"--kubeconfig={folder / 'kwok.kubeconfig'}",
                f"--config={','.join(stages)}",
                # Nodes are kwok's when annotated as Karpenter's kwok provider and karpui's kwok mode annotate them.
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=10.0.0.1",
                "--cidr=10.0.0.1/16",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{ports['kwok']}",
            ],
            f"http://127.0.0.1:{ports['kwok']}/healthz",
            port=ports["kwok"],
        )
        made = [etcd, apiserver, controller_manager, scheduler, kwok]
        crds = Path(self.paths["KARPUI_KARPENTER_CRDS"])
        if self.dra_driver:
            made.append(
                Component(
                    "dra-kwok-driver",
                    [self.paths["KARPUI_DRA_DRIVER_BIN"]],
                    f"http://127.0.0.1:{ports['dra-driver-health']}/healthz",
                    env={
                        "KUBECONFIG": str(folder / "karpenter.kubeconfig"),
                        "HEALTH_PROBE_ADDRESS": f"127.0.0.1:{ports['dra-driver-health']}",
                        "METRICS_ADDRESS": "0",
                    },
                    port=ports["dra-driver-health"],
                    crds=(str(crds / "test.karpenter.sh_draconfigs.yaml"),),
                )
            )
        if self.karpenter:
            made.append(
                Component(
                    "karpenter",
                    [self.paths["KARPUI_KARPENTER_BIN"]],
                    f"http://127.0.0.1:{ports['karpenter-health']}/readyz",
                    crds=tuple(str(p) for p in sorted(crds.glob("*.yaml"))),
                    env={
                        "KUBECONFIG": str(folder / "karpenter.kubeconfig"),
                        "DISABLE_LEADER_ELECTION": os.environ.get("DISABLE_LEADER_ELECTION", "true"),
                        "METRICS_PORT": str(ports["karpenter-metrics"]),
                        "HEALTH_PROBE_PORT": str(ports["karpenter-health"]),
                        "SYSTEM_NAMESPACE": os.environ.get("SYSTEM_NAMESPACE", "kube-system"),
                    },
                    port=ports["karpenter-health"],
                )
            )
        return made

    # Running --------------------------------------------------------------------------------------------------

    def context_for(self, component: Component) -> ssl.SSLContext | None:
        if component.name == "kube-apiserver":
            return admin_context(self.pki)
        return insecure_context() if component.health.startswith("https") else None

    def healthy(self, component: Component) -> bool:
        return get(component.health, self.context_for(component))[0] == 200

    def wait_healthy(self, component: Component, deadline: float) -> None:
        while not self.healthy(component):
            if not component.running():
                raise SystemExit(f"{component.name} exited at start:\n{self.log_tail(component.name)}")
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"{component.name} not healthy in {READY_TIMEOUT:.0f} s:\n{self.log_tail(component.name)}"
                )
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.folder / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def up(self) -> float:
        """Start every component in order, each once the one it needs is healthy: the seconds it took."""
        started = time.monotonic()
        deadline = started + READY_TIMEOUT
        for component in self.components:
            if component.crds:
                self.apply_crds(component.crds)
            component.start(self.folder)
            self.write_state(ready=False)
            self.wait_healthy(component, deadline)
            say(f"{component.name} healthy after {time.monotonic() - started:.1f} s (port {component.port})")
        context = admin_context(self.pki)
        while get(f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", context)[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("the controller-manager made no `default` ServiceAccount")
            time.sleep(0.2)
        took = time.monotonic() - started
        self.write_state(ready=True, start_seconds=round(took, 1))
        return took

    def apply_crds(self, files: tuple[str, ...]) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.folder / "kubeconfig")}
        named = [flag for path in files for flag in ("-f", path)]
        subprocess.run(
            ["kubectl", "apply", "--server-side", "--force-conflicts", *named], env=env, check=True, capture_output=True
        )
        # A CRD is Established within a second on a quiet machine; under load (a shared CI host) it took over a
        # minute, and every test of the tier errored with it. `kubectl wait` has also failed at once just after the
        # apply (2026-12-07, CI on a busy machine), so a failed wait is tried again until the deadline, and the last
        # one's words are kept for the error.
        deadline = time.monotonic() + 180.0
        while True:
            left = max(int(deadline - time.monotonic()), 1)
            waited = subprocess.run(
                ["kubectl", "wait", "--for=condition=Established", f"--timeout={left}s", *named],
                env=env,
                capture_output=True,
                text=True,
            )
            if waited.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise SystemExit(f"the CRDs were not Established in 180 s: {waited.stderr.strip()}")
            say(f"waiting for the CRDs to be Established again: {waited.stderr.strip()[:200]}")
            time.sleep(1.0)

    def supervise(self) -> None:
        """Restart what exits (after 1 s, doubling to 10 s while it keeps failing), unless held down."""
        while not self.stopping:
            for component in self.components:
                if self.stopping or component.running():
                    continue
                now = time.monotonic()
                if component.down_since is None:
                    code = component.process.returncode if component.process else None
                    component.down_since = now
                    component.backoff = 1.0 if now - component.started_at > 60 else min(component.backoff * 2, 10.0)
                    say(f"{component.name} exited ({code}); restarting in {component.backoff:.0f} s")
                    self.write_state(ready=False)
                if (self.folder / "hold" / component.name).exists():
                    component.down_since = now  # the back-off counts from the release
                    continue
                if now - component.down_since >= component.backoff:
                    component.restarts += 1
                    component.start(self.folder)
                    say(f"{component.name} restarted (restart {component.restarts})")
                    self.write_state(ready=True)
            time.sleep(0.1)

    def stop(self) -> None:
        self.stopping = True
        for component in reversed(self.components):
            component.stop()
        self.write_state(ready=False, stopped=True)

    def write_state(self, **facts: Any) -> None:
        previous = read_state(self.folder)
        state = {
            **{k: v for k, v in previous.items() if k in ("start_seconds",)},
            "pid": os.getpid(),
            "server": self.server,
            "kubeconfig": str(self.folder / "kubeconfig"),
            "ports": self.ports,
            "karpenter": self.karpenter,
            "dra_driver": self.dra_driver,
            "versions": {k: v for k, v in self.paths.items() if k.endswith("_VERSION")},
            "components": {
                c.name: {
                    "pid": c.process.pid if c.running() and c.process else None,
                    "port": c.port,
                    "restarts": c.restarts,
                    "log": str(self.folder / "logs" / f"{c.name}.log"),
                }
                for c in self.components
            },
            **facts,
        }
        write_private(self.folder / "cluster.json", json.dumps(state, indent=1))


def write_private(path: Path, text: str) -> None:
    """Write atomically (readers never see half a file), readable by this user only (keys and certificates)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    os.replace(temporary, path)


def read_state(folder: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((folder / "cluster.json").read_text()))
    except (OSError, ValueError):
        return {}


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ", 1)[-1].startswith("Z"))


# Commands ---------------------------------------------------------------------------------------------------------


def command_up(options: argparse.Namespace) -> int:
    folder = options.dir.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    running = read_state(folder)
    if alive(running.get("pid")) and not running.get("stopped"):
        raise SystemExit(f"a cluster already runs in {folder} (supervisor pid {running['pid']}): stop it first")
    if options.die_with_parent:
        _die_with_parent_term()
    paths = binaries()
    if options.build:
        subprocess.run([str(HERE / "build.sh")], check=True)
    ensure_built(paths, options.karpenter or options.dra_driver)
    cluster = Cluster(folder, paths, options.karpenter, options.apiserver_port, options.dra_driver)

    def stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        cluster.prepare()
        took = cluster.up()
        say(f"cluster ready in {took:.1f} s at {cluster.server}")
        print(f"export KUBECONFIG={folder / 'kubeconfig'}", flush=True)
        cluster.supervise()
    except KeyboardInterrupt:
        say("stopping")
    except SystemExit as failure:
        say(str(failure))
        cluster.stop()
        return 1
    finally:
        if not cluster.stopping:
            cluster.stop()
    say("stopped")
    return 0


def _die_with_parent_term() -> None:
    """The supervisor itself stops in order (SIGTERM) when whoever started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def command_start(options: argparse.Namespace) -> int:
    folder = options.dir.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "up", "--dir", str(folder)]
    argv += ["--karpenter"] * options.karpenter + ["--build"] * options.build + ["--dra-driver"] * options.dra_driver
    if options.apiserver_port:
        argv += ["--apiserver-port", str(options.apiserver_port)]
    with contextlib.suppress(FileNotFoundError):
        (folder / "cluster.json").unlink()
    with open(folder / "supervisor.log", "ab") as log:
        supervisor = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + READY_TIMEOUT + 30
    while not read_state(folder).get("ready"):
        if supervisor.poll() is not None:
            print((folder / "supervisor.log").read_text(errors="replace")[-4000:], file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            supervisor.terminate()
            return 1
        time.sleep(0.2)
    state = read_state(folder)
    say(f"cluster ready in {state.get('start_seconds')} s at {state['server']} (supervisor pid {supervisor.pid})")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0


def command_stop(options: argparse.Namespace) -> int:
    folder = options.dir.resolve()
    state = read_state(folder)
    pid = state.get("pid")
    if not alive(pid):
        say(f"no cluster runs in {folder}")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT * 7
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):  # its components die with it (PR_SET_PDEATHSIG)
        os.kill(pid, signal.SIGKILL)
    say(f"stopped the cluster in {folder}")
    return 0


def command_status(options: argparse.Namespace) -> int:
    state = read_state(options.dir.resolve())
    if not alive(state.get("pid")):
        print("stopped")
        return 3
    print(f"{'ready' if state.get('ready') else 'starting'}: {state['server']}  KUBECONFIG={state['kubeconfig']}")
    for name, facts in state["components"].items():
        print(f"  {name:24} pid {facts['pid'] or '-':>7}  port {facts['port']:>5}  restarts {facts['restarts']}")
    return 0


def command_fault(options: argparse.Namespace) -> int:
    folder = options.dir.resolve()
    state = read_state(folder)
    name = options.component
    if name not in state.get("components", {}):
        raise SystemExit(f"no component {name!r}; the components are {', '.join(state.get('components', {}))}")
    hold = folder / "hold" / name
    if options.command == "hold":
        hold.touch()
    if options.command == "release":
        hold.unlink(missing_ok=True)
        return 0
    pid = state["components"][name]["pid"]
    if options.command in ("kill", "hold") and pid:
        os.kill(pid, signal.SIGKILL)
    if options.command == "restart" and pid:
        os.kill(pid, signal.SIGTERM)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/kube/cluster.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "start", "stop", "status", "kill", "restart", "hold", "release"):
        sub = commands.add_parser(name)
        sub.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the cluster's folder (default {DEFAULT_DIR})")
        if name in ("up", "start"):
            sub.add_argument("--karpenter", action="store_true", help="also run Karpenter's kwok provider")
            sub.add_argument("--dra-driver", action="store_true", help="also run Karpenter's DRA kwok driver")
            sub.add_argument("--build", action="store_true", help="build the binaries first if missing")
            sub.add_argument("--apiserver-port", type=int, default=0, help="default: a free port")
        if name == "up":
            sub.add_argument("--die-with-parent", action="store_true", help=argparse.SUPPRESS)
        if name in ("kill", "restart", "hold", "release"):
            sub.add_argument("component")
    options = parser.parse_args(argv)
    run = {"up": command_up, "start": command_start, "stop": command_stop, "status": command_status}
    return run.get(options.command, command_fault)(options)


if __name__ == "__main__":
    sys.exit(main())
