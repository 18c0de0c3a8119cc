"""How fast the production web server answers while slow clients hold connections open: gunicorn with
karpui/gunicorn_conf.py over HTTPS (one worker, KARPUI_WEB_THREADS=8), on a throwaway SQLite database; /healthz,
the login page and an API list, each asked `--requests` times on fresh connections, alone and then beside
`--slow` connections that never finish their headers, body or TLS handshake (a third each, trickling a byte between
requests) and the most watches the app allows. Prints figures; asserts nothing.

Usage: python bench/slow_clients.py [--slow 200] [--requests 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import slowclients as sc  # noqa: E402

PATHS = ("/healthz", "/accounts/login/", "/k8s/clusters/lab/api/v1/namespaces")


def measure(server: sc.ProductionServer, token: str, count: int, held: list | None = None) -> dict[str, str]:
    figures = {}
    for path in PATHS:
        seconds = []
        for _ in range(count):
            if held:
                sc.trickle(held)
            status, took = sc.get(server.url + path, timeout=30, token=token)
            assert status == 200, (path, status)
            seconds.append(took)
        figures[path] = (
            f"median {statistics.median(seconds) * 1000:.1f} ms, max {max(seconds) * 1000:.1f} ms over {count}"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    server = sc.ProductionServer(Path(tempfile.mkdtemp(prefix="karpui-slow-")), sc.free_port()).start()
    try:
        token = server.token()
        print("alone:", sc.dumps(measure(server, token, args.requests)))
        watches = [sc.watch(server.url, token) for _ in range(6)]
        held = sc.slow_clients(server.port, args.slow)
        print(
            f"beside {args.slow} slow connections and 6 watches (the limit at 8 threads):",
            sc.dumps(measure(server, token, args.requests, held)),
        )
        for sock in [*watches, *held]:
            sock.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
