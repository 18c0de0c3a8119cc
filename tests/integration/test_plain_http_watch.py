"""Issue 22, point 6: the official Python client's watch over the plain-HTTP server `./run.sh` starts.

runserver sent a watch's body unframed until it closed it; urllib3 reads such a body in 64 KiB blocks, so the
client saw every event only when the watch timed out. `serve` now sends it chunked (karpui.devserver). The test is
causal, not timed: a namespace is created only once the watch has delivered its first event, and that namespace's
ADDED event must then come on the same stream, before the watch's timeout ends it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from tests.integration.test_serve_shutdown import _answers, _free_port, serve_env, until
from tests.karp import ROOT


def test_the_python_clients_watch_gets_each_event_as_it_happens(tmp_path: Path) -> None:
    from kubernetes import config, watch
    from kubernetes.client import CoreV1Api

    port = _free_port()
    env = serve_env(tmp_path)
    log = (tmp_path / "serve.log").open("wb")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--no-worker"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), "the web server")

        def karp(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "manage.py", "karp", *args], cwd=ROOT, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(karp("kubeconfig", "--server", f"http://127.0.0.1:{port}"))
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"].startswith("http://")
        api = CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        seen: list[tuple[str, str]] = []
        stream: Any = watch.Watch()
        for event in stream.stream(api.list_namespace, timeout_seconds=120):
            if not seen:  # the first event came while the watch is open: make something for it to tell next
                threading.Thread(target=karp_apply, args=(env,), daemon=True).start()
            seen.append((event["type"], event["object"].metadata.name))
            if ("ADDED", "ping") in seen:
                stream.stop()
        assert ("ADDED", "default") in seen and ("ADDED", "ping") in seen
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
        log.close()


def karp_apply(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "karp", "apply", "-f", "-"],
        cwd=ROOT,
        env=env,
        input="apiVersion: v1\nkind: Namespace\nmetadata: {name: ping}\n",
        text=True,
        capture_output=True,
        check=True,
    )
