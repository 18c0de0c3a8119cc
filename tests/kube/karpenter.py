"""Karpenter itself (its kwok provider, v1.15, as hack/kube/build.sh builds it) run against the session's real
cluster for the length of a test: the anchor karpui's observe mode watches and gates.

The session's cluster runs without Karpenter (karpui provisions it in the kwok-mode tests); a test that observes
Karpenter starts it with `karpenter(real, folder, FEATURE_GATES=...)`, and it is stopped (SIGTERM, then SIGKILL)
when the test ends, before the cluster is reset for the next one. Its JSON log lines go to `folder/karpenter.log`,
where observe mode reads them as an operator's karpui reads a log file."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kube.realcluster import paths

START_TIMEOUT = 120.0
PR_SET_PDEATHSIG = 1


@dataclass
class Karpenter:
    process: subprocess.Popen[bytes]
    log: Path
    health_port: int

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []


def binary(env: Mapping[str, str]) -> str:
    """The kwok provider to run with these options: with IGNORE_DRA_REQUESTS=false the one built with
    hack/kube/karpenter/kwok-dynamicresources.patch (`hack/kube/build.sh karpenter-dra`), whose instance types declare
    the devices the cluster's DRAConfigs publish, as seed 000's experiment 3 patches it; upstream's declares none, so
    Karpenter would launch nothing for a pod with a ResourceClaim. The same build with an instance-types file
    (INSTANCE_TYPES_FILE_PATH): hack/kube/karpenter/kwok-reservations.patch names its reserved offerings'
    reservations, which upstream's never does. Otherwise upstream's: Karpenter then ignores DRA and the declarations
    would change nothing."""
    from provisioner.options import parse_bool

    if parse_bool("IGNORE_DRA_REQUESTS", env.get("IGNORE_DRA_REQUESTS", "true")) and not env.get(
        "INSTANCE_TYPES_FILE_PATH"
    ):
        return paths()["KARPUI_KARPENTER_BIN"]
    patched = paths()["KARPUI_KARPENTER_DRA_BIN"]
    if not os.access(patched, os.X_OK):
        raise RuntimeError(f"{patched} is not built: run hack/kube/build.sh karpenter-dra (a few minutes, warm)")
    return patched


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:  # noqa: S310 - loopback
            return bool(answer.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def karpenter(real: Any, folder: Path, **env: str) -> Iterator[Karpenter]:
    """Karpenter's kwok provider against `real` until the block ends; `env` are its options (FEATURE_GATES,
    BATCH_IDLE_DURATION, LOG_LEVEL, IGNORE_DRA_REQUESTS, ...; `binary` says which build runs)."""
    health, metrics = _free_port(), _free_port()
    log = folder / "karpenter.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [binary(env)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "KUBECONFIG": str(real.kubeconfig),
                "DISABLE_LEADER_ELECTION": "true",
                "SYSTEM_NAMESPACE": "kube-system",
                "METRICS_PORT": str(metrics),
                "HEALTH_PROBE_PORT": str(health),
                **env,
            },
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    started = Karpenter(process, log, health)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _ready(health):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Karpenter did not start:\n" + "\n".join(started.lines()[-20:]))
            time.sleep(0.2)
        yield started
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
