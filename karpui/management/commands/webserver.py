"""`manage.py webserver [ADDRPORT]`: runserver, sending responses of unknown length chunked (karpui.devserver), which
`serve` (and so `./run.sh`) runs for plain HTTP."""

from __future__ import annotations

from whitenoise.runserver_nostatic.management.commands.runserver import Command as RunserverCommand

from karpui.devserver import ChunkedWSGIServer


class Command(RunserverCommand):
    help = "Django's runserver, with responses of unknown length (watches, followed logs) sent chunked."
    server_cls = ChunkedWSGIServer
