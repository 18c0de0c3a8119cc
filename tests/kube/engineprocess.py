"""`manage.py engine` as an operator runs it: a process of its own, with a database of its own (SQLite, migrated once
per session and copied), driving the cluster a kubeconfig names. Its output is read as an operator reads
`kubectl logs deploy/karpui-engine`: who leads, and the controllers' JSON log lines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.kube.harness import ROOT

_TEMPLATE: dict[str, Path] = {}


def migrated(folder: Path) -> Path:
    """A migrated SQLite database file, made once per session and copied for each engine's database."""
    if "db" not in _TEMPLATE:
        template = folder / "template.sqlite3"
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=_env(template, folder),
            check=True,
            capture_output=True,
            timeout=600,
        )
        _TEMPLATE["db"] = template
    return _TEMPLATE["db"]


def _env(database: Path, folder: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY_"))}
    env.update(
        DATABASE_URL=f"sqlite:///{database}",
        KARPUI_VAR_DIR=str(folder / "var"),
        DJANGO_SETTINGS_MODULE="karpui.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


class Database:
    """karpui's database for one or more engine processes (as two replicas share theirs), and `manage.py` on it."""

    def __init__(self, folder: Path, template_folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "karpui.sqlite3"
        shutil.copyfile(migrated(template_folder), self.path)

    def env(self, **extra: str) -> dict[str, str]:
        return _env(self.path, self.folder, **extra)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=300
        )
        if check and done.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stderr}{done.stdout}")
        return done

    def cluster(self, name: str, mode: str, kubeconfig: Path) -> None:
        self.manage("karp", "cluster", "create", name, "--mode", mode, "--kubeconfig", str(kubeconfig))


class EngineProcess:
    """One `manage.py engine --cluster NAME --lease-namespace karpui` process; its output goes to a file."""

    def __init__(self, database: Database, cluster: str, name: str = "engine", **env: str) -> None:
        self.database = database
        self.cluster = cluster
        self.name = name
        self.output = database.folder / f"{name}.out"
        self.errors = database.folder / f"{name}.err"
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> EngineProcess:
        out, err = open(self.output, "ab"), open(self.errors, "ab")  # noqa: SIM115 - the child owns them
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "engine", "--cluster", self.cluster, "--lease-namespace", "karpui"],
            cwd=ROOT,
            env=self.database.env(KARPUI_TICK_SECONDS="0.5", **self.env),
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        out.close()
        err.close()
        return self

    def lines(self) -> list[str]:
        return self.output.read_text(errors="replace").splitlines() if self.output.exists() else []

    def logs(self, message: str | None = None) -> list[dict[str, Any]]:
        """The controllers' JSON log lines it printed (those with `message`, when given)."""
        found = []
        for line in self.lines():
            if line.startswith("{"):
                entry = json.loads(line)
                if message is None or entry.get("message") == message:
                    found.append(entry)
        return found

    def leads(self) -> bool:
        """Its last word on leadership was that it leads."""
        said = [line for line in self.lines() if line.startswith(f"cluster {self.cluster}:")]
        return bool(said) and said[-1].endswith(" leads") and "this engine" in said[-1]

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signum)

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.signal(signal.SIGKILL)
            self.process.wait()

    def tail(self) -> str:
        errors = self.errors.read_text(errors="replace")[-3000:] if self.errors.exists() else ""
        return "\n".join(self.lines()[-30:]) + "\n" + errors


def wait_for(check: Any, timeout: float, what: str, engines: tuple[EngineProcess, ...] = (), every: float = 0.5) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what`, with the engines' last words."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        for engine in engines:
            if engine.process is not None and engine.process.poll() is not None and engine.process.returncode != -9:
                raise AssertionError(f"{engine.name} exited ({engine.process.returncode}):\n{engine.tail()}")
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {e.name}\n{e.tail()}" for e in engines)
            raise AssertionError(f"not within {timeout} s: {what}\n{tails}")
        time.sleep(every)
