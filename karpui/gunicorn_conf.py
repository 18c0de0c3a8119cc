"""gunicorn's settings for karpui's web process (`manage.py serve` with TLS passes this file with `-c`): gthread
workers with KARPUI_WEB_THREADS threads each, and the number each worker really has told to the app, which serves
fewer watches than that at once (karpui.kubeapi.watch.max_watches), so that watches never take every thread.

A thread is a Python thread, and with it the database connection it keeps open (one per thread, PostgreSQL's
max_connections counts them across every worker and replica); its memory is small beside the process's.
"""

import os
from typing import Any

# gthread, with every request read whole (TLS handshake, headers, body) by the worker's event loop under time limits
# before a thread serves it: slow clients cannot take the threads (karpui/webworker.py).
worker_class = "karpui.webworker.SlowClientSafeWorker"
# Connections a worker holds at once, open ones included; past it, the slowest-arriving make way (webworker).
worker_connections = 2000
# gunicorn 25's control socket is one path per user ($HOME/.gunicorn/gunicorn.ctl), so two karpui servers on a
# machine (a developer's and the tests') took it from each other; karpui does not use gunicornc.
control_socket_disable = True
threads = int(os.environ.get("KARPUI_WEB_THREADS", "").strip() or 32)


def post_worker_init(worker: Any) -> None:
    # A --threads on the command line wins over this file: the app is told the worker's own count.
    os.environ["KARPUI_WEB_THREADS"] = str(worker.cfg.threads)
