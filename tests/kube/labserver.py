"""The lab's Kubernetes API served by a process of its own, as a stand-in for a real cluster's API server.

`python -m tests.kube.labserver` migrates the database named by DATABASE_URL, makes an admin with an API token,
serves every cluster's API over plain HTTP on 127.0.0.1 (threaded: watches are long requests), and prints one JSON
line `{"url": ..., "token": ...}` when it is ready. It then takes commands as JSON lines on stdin and answers each
with one JSON line on stdout, so a test can set up what a real cluster's operator would (a fresh cluster, objects
written server-side) without a second Django in the test process:

    {"op": "cluster", "name": "c1", "components": "none", "clock": 1800000000.0, "tick": false}
    {"op": "write", "cluster": "c1", "objects": [...]}      create (or apply) objects through lab.writing
    {"op": "delete", "cluster": "c1", "kind": "Pod", "name": "a", "namespace": "default"}
    {"op": "advance", "cluster": "c1", "seconds": 5}
    {"op": "get", "cluster": "c1", "kind": "Pod"}          what the lab holds now, from its rows
    {"op": "compact", "cluster": "c1"}                     watches from before now get 410 Gone
    {"op": "rest", "cluster": "c1"}                        stop following wall time (a test is done with it)

Clusters made with `"tick": true` follow wall time, as a running karpui's beat would move them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

TICK_SECONDS = 0.5


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpui.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def _admin_token() -> str:
    from django.contrib.auth import get_user_model

    from karpui.kubeapi.auth import token_create

    users = get_user_model()
    admin = users.objects.filter(username="admin").first() or users.objects.create_superuser("admin", "", "x")
    return token_create(user=admin, description="labserver")


class Commands:
    def __init__(self) -> None:
        self.ticking: set[str] = set()
        self.lock = threading.Lock()

    def cluster(self, name: str, components: str = "cluster", clock: float | None = None, tick: bool = False) -> Any:
        from karpui import models

        moment = datetime.fromtimestamp(clock if clock is not None else time.time(), UTC)
        models.Cluster.objects.update_or_create(
            name=name, defaults={"mode": models.Cluster.Mode.LAB, "lab_components": components, "clock": moment}
        )
        if tick:
            with self.lock:
                self.ticking.add(name)
        return {"name": name}

    def write(self, cluster: str, objects: list[dict[str, Any]], apply: bool = False) -> Any:
        from karpui.clusters import lab

        with lab.writing(cluster) as api:
            written = [api.apply(obj)[0] if apply else api.create(obj) for obj in objects]  # type: ignore[attr-defined]
            return {"objects": json.loads(json.dumps(written))}

    def delete(self, cluster: str, kind: str, name: str, namespace: str = "") -> Any:
        from karpui.clusters import lab

        with lab.writing(cluster) as api:
            api.delete(kind, name, namespace)
        return {}

    def advance(self, cluster: str, seconds: float) -> Any:
        from karpui.clusters import lab

        lab.advance(cluster, seconds)
        return {}

    def get(self, cluster: str, kind: str) -> Any:
        from karpui import models
        from karpui.clusters import lab

        return {"objects": lab.objects(models.Cluster.objects.get(name=cluster), kind)}

    def compact(self, cluster: str) -> Any:
        """Forget the change log, as etcd compaction does: watches from before now answer 410 Gone."""
        from karpui import models
        from karpui.clusters import changelog

        changelog.compact(models.Cluster.objects.get(name=cluster).pk)
        return {}

    def rest(self, cluster: str) -> Any:
        """Stop ticking a cluster: one server serves the whole session, and the ticks of every cluster the tests
        before made, run one after another, held the database from the writes of the test at hand (a POST once
        timed out after 30 s in CI)."""
        with self.lock:
            self.ticking.discard(cluster)
        return {}

    def tick(self) -> None:
        from django.utils import timezone

        from karpui import models
        from karpui.clusters import lab

        with self.lock:
            names = sorted(self.ticking)
        for name in names:
            cluster = models.Cluster.objects.get(name=name)
            lab.tick(cluster, now=timezone.now())


def _ticker(commands: Commands) -> None:
    from django.db import close_old_connections

    while True:
        time.sleep(TICK_SECONDS)
        try:
            commands.tick()
        except Exception as error:  # a failed tick is retried at the next one, as beat's would be
            print(json.dumps({"tick-error": f"{type(error).__name__}: {error}"}), file=sys.stderr, flush=True)
        finally:
            close_old_connections()


def _serve(port: int) -> tuple[Any, int]:
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    server = ThreadedWSGIServer(("127.0.0.1", port), Quiet, allow_reuse_address=True)
    server.daemon_threads = True
    server.set_app(WSGIHandler())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    _setup()
    token = _admin_token()
    _, port = _serve(port)
    commands = Commands()
    threading.Thread(target=_ticker, args=(commands,), daemon=True).start()
    print(json.dumps({"url": f"http://127.0.0.1:{port}", "token": token}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.pop("op")
        try:
            answer = {"ok": True, **getattr(commands, op)(**request)}
        except Exception as error:
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
