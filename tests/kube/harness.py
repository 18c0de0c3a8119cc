"""Driving tests.kube.labserver from a test: start it (its own SQLite database in a temporary folder), send it
commands, make kubeconfigs for its clusters, and stop or restart it (the same port and database: an API server
restart, as far as a client can tell)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LabServer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = ""
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._clusters = 0
        self._ticking: set[str] = set()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY_"))}
        env.update(
            DATABASE_URL=f"sqlite:///{self.folder / 'labapi.sqlite3'}",
            KARPUI_VAR_DIR=str(self.folder / "var"),
            PYTHONPATH=str(ROOT),
            DJANGO_SETTINGS_MODULE="karpui.settings",
        )
        return env

    def start(self) -> LabServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.kube.labserver", str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.folder / "labserver.log", "a"),  # noqa: SIM115 - the child owns it
            text=True,
            env=self.env(),
            cwd=ROOT,
            process_group=0,
        )
        hello = self._readline(START_TIMEOUT)
        self.url, self.token = hello["url"], hello["token"]
        return self

    def _readline(self, timeout: float) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            log = (self.folder / "labserver.log").read_text()[-3000:]
            raise RuntimeError(f"the lab API server did not answer within {timeout} s:\n{log}")
        return dict(json.loads(result[0]))

    def command(self, op: str, timeout: float = 60.0, **arguments: Any) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin is not None
        with self._lock:
            self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
            self.process.stdin.flush()
            answer = self._readline(timeout)
        if not answer.get("ok"):
            raise RuntimeError(f"labserver {op}: {answer.get('error')}")
        return answer

    def new_cluster(self, prefix: str, components: str = "none", clock: float | None = None, tick: bool = False) -> str:
        with self._lock:
            self._clusters += 1
            name = f"{prefix}-{self._clusters}"
        self.command("cluster", name=name, components=components, clock=clock, tick=tick)
        if tick:
            self._ticking.add(name)
        return name

    def ticking(self, cluster: str) -> bool:
        return cluster in self._ticking

    def rest(self, cluster: str) -> None:
        """Stop a cluster made with `tick=True` following wall time, once its test is done with it."""
        self.command("rest", cluster=cluster)
        self._ticking.discard(cluster)

    def kubeconfig(self, cluster: str, path: Path, server: str | None = None) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": f"{server or self.url}/k8s/clusters/{cluster}"}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "admin"}}],
            "current-context": cluster,
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def kill(self) -> None:
        """SIGKILL, as a crashed API server: no connection is closed politely."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> None:
        self.kill()
        self.start()


def eventually(check: Callable[[], Any], timeout: float = 10.0, sync: Callable[[], Any] | None = None) -> Any:
    """Poll `check` (calling `sync` first) until it returns something truthy; that value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        if sync is not None:
            sync()
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(0.02)


def run_contract_suites(kubeconfig: Path) -> list[str]:
    """tests/contract's "real" parametrisation against the cluster `kubeconfig` names, as a user runs it with
    KUBECONFIG set, in a pytest of its own: asserts that nothing was skipped or failed; the tests that passed."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KARPUI_TEST_WORKERS": "0"}
    done = subprocess.run(  # noqa: S603 - this interpreter, this repository's tests
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-n",
            "0",
            "tests/contract",
            "-k",
            "real",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("SKIPPED", "FAILED", "ERROR"))], done.stdout[-4000:]
    return [line.split("::")[0] for line in lines if line.startswith("PASSED") and line.endswith("[real]")]
