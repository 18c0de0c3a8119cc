"""The documents' kubectl lines, verbatim, in bash with kubectl 1.32 against the lab's Kubernetes API over TLS, as
the seeds README sets it up: a kubeconfig whose contexts are the documents' (`kind-karpenter-lab`, `kind-taint-lab`)
and the documents' files in the working directory.

Time is the lab's: the documents wait with `sleep 5` and measure with `date +%s`, and here both are the lab's clock
(`sleep` moves it on, as the worker's tick would over those seconds; `date +%s` reads it), so the lines run as written
and print the seconds the lab took, in milliseconds of real time. Every other command is the machine's own.

Each experiment runs once (a module-scoped transcript on a database of its own, emptied before and after) and its
tests assert on what each block printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.kubeapi.conftest import KUBECTL, certificate, tls_server  # noqa: F401 - fixtures used here
from tests.seeds import SEEDS

# The documents' two kind clusters (`kind create cluster --name karpenter-lab`, and taint-lab), as labs of those names.
CLUSTERS = ("karpenter-lab", "taint-lab")
DOCUMENTS = {"000": SEEDS / "000_c3bc01b30d885d21.txt", "004": SEEDS / "004_13834d22c2fc2418.txt"}


@dataclass(frozen=True)
class Document:
    """A seed document's text; its command lines are taken from it, never retyped."""

    text: str

    def line(self, start: str, nth: int = 0) -> str:
        """The document's `nth` line beginning with `start`, whole."""
        return [line for line in self.text.splitlines() if line.startswith(start)][nth]

    def block(self, start: str, nth: int = 0) -> str:
        """The document's lines from the `nth` one beginning with `start` to the next blank line (a here-document:
        to its end marker)."""
        lines = self.text.splitlines()
        first = [i for i, line in enumerate(lines) if line.startswith(start)][nth]
        if "<<EoF" in lines[first]:
            end = lines.index("EoF", first) + 1
        else:
            end = next((i for i in range(first, len(lines)) if not lines[i].strip()), len(lines))
        return "\n".join(lines[first:end])

    def manifest(self, name: str) -> str:
        """The YAML the document shows under its `# name` line, as a file of that name holds it."""
        return self.block(f"# {name}").split("\n", 1)[1] + "\n"


def document(name: str) -> Document:
    return Document(DOCUMENTS[name].read_text())


class _Clock(BaseHTTPRequestHandler):
    """`sleep N` moves the labs' clocks N seconds on (every controller runs over them); `date +%s` reads
    karpenter-lab's."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        from django.db import connection

        from karpui import models
        from karpui.clusters import lab

        url = urlsplit(self.path)
        query = parse_qs(url.query)
        try:
            if url.path == "/sleep":
                for cluster in CLUSTERS:  # time passes for both kind clusters alike
                    lab.advance(cluster, float(query["seconds"][0]))
                body = ""
            else:
                body = str(int(models.Cluster.objects.get(name=CLUSTERS[0]).clock.timestamp()))
        finally:
            connection.close()  # each request is a thread of its own
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def lab_clock() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Clock)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="session")
def shims(tmp_path_factory: pytest.TempPathFactory, lab_clock: int) -> Path:
    """`sleep` and `date` on the lab's clock, first on PATH."""
    folder = tmp_path_factory.mktemp("shims")
    url = f"http://127.0.0.1:{lab_clock}"
    (folder / "sleep").write_text(f'#!/bin/sh\nexec curl -fsS "{url}/sleep?seconds=${{1%s}}"\n')
    (folder / "date").write_text(
        f'#!/bin/sh\nif [ "$*" = "+%s" ]; then exec curl -fsS "{url}/now"; fi\nexec /bin/date "$@"\n'
    )
    for shim in folder.iterdir():
        shim.chmod(0o755)
    return folder


@dataclass
class Shell:
    """bash in the documents' working directory, with their kubeconfig and the lab's clock."""

    home: Path
    cwd: Path
    kubeconfig: Path
    shims: Path

    def run(self, script: str, *, prelude: str = "", timeout: float = 300) -> str:
        """What the script printed, stdout and stderr in the order written."""
        env = {
            "PATH": f"{self.shims}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
            "LANG": "C.UTF-8",
            "CLUSTER_NAME": "lab",  # seed 004's variable, as its manifests have it in the seeds folder
        }
        done = subprocess.run(
            ["bash", "-c", f"{prelude}\n{script}" if prelude else script],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=self.cwd,
            timeout=timeout,
        )
        return done.stdout


@pytest.fixture(scope="module", autouse=True)
def installed() -> Iterator[None]:
    """Labs made as a fresh install makes them, kind's control plane and Karpenter installed (KARPUI_LAB_INSTALL, off
    in the rest of the suite), as the documents' `kind create cluster` and `helm install karpenter` leave them."""
    from django.test import override_settings

    with override_settings(KARPUI_LAB_INSTALL=True):
        yield


@pytest.fixture(scope="module")
def fresh_database(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The module's own database: emptied (and its defaults made again: the lab cluster, the catalogs) before and
    after, as a transactional test's is."""
    from django.core.management import call_command
    from django.db import connection
    from django.test import override_settings

    from karpui.clusters import lab

    with django_db_blocker.unblock():
        # pytest-django makes the test database only for a session with tests marked django_db (the modules using
        # this mark theirs): never empty another.
        # SQLite's is named by TEST's NAME (settings.py); PostgreSQL's is test_<NAME> (with xdist, _gw<n> after it),
        # and NAME already holds it, so _get_test_db_name() prefixes it again there.
        name = str(connection.settings_dict["NAME"])
        is_test = name == connection.creation._get_test_db_name() or name.startswith("test_")
        assert is_test, f"{name} is not the test database"
        call_command("flush", interactive=False, verbosity=0)
        lab.forget()
        yield
        # The defaults made again as the rest of the suite has them (tests/parallel.py: labs bare), not under this
        # module's `installed`, which is still in force here: its control-plane node and Karpenter Deployment would
        # otherwise stay in the database every later test on this worker starts from.
        with override_settings(KARPUI_LAB_INSTALL=False):
            call_command("flush", interactive=False, verbosity=0)
        lab.forget()


@pytest.fixture(scope="module")
def shell(  # noqa: F811 - the kubeapi suite's certificate and TLS server fixtures, imported above
    fresh_database: None,
    tls_server: str,  # noqa: F811
    certificate: Any,  # noqa: F811
    shims: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Shell:
    """The documents' set-up as the lab replaces it, as the README's kind section does it: their two clusters made
    as `kind create cluster` and `helm install karpenter` leave them (`karp cluster create`: the control-plane node,
    Karpenter in kube-system), a superuser's kubeconfig naming them as kind does (`karp kubeconfig ... --kind`:
    contexts kind-karpenter-lab and kind-taint-lab), and the seed files in the working directory."""
    if not Path(KUBECTL).exists() or shutil.which("curl") is None:
        pytest.skip(f"kubectl at {KUBECTL} and curl are needed")
    from django.contrib.auth.models import User

    from tests.karp import ok

    User.objects.create_superuser("admin", "", "admin-pass-1")
    for cluster in CLUSTERS:
        ok("cluster", "create", cluster)
    merged = ok(
        "kubeconfig",
        *CLUSTERS,
        "--kind",
        "--as",
        "admin",
        "--server",
        tls_server,
        "--certificate-authority",
        str(certificate.cert),
    )
    root = tmp_path_factory.mktemp("seed")
    (root / "home").mkdir()
    (root / "work").mkdir()
    kubeconfig_path = root / "home" / "kubeconfig"
    kubeconfig_path.write_text(merged)
    for manifest in SEEDS.glob("*.yaml"):
        shutil.copy(manifest, root / "work" / manifest.name)
    return Shell(home=root / "home", cwd=root / "work", kubeconfig=kubeconfig_path, shims=shims)
