"""`manage.py serve`: migrate, make sure an admin exists, then run web + Celery worker + beat together.

One Ctrl-C stops all three. The worker uses the configured broker (the filesystem broker when no Redis).
"""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run karpui: migrations, web server on ADDRPORT (default 127.0.0.1:8000), Celery worker and beat."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="serve the web app only")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self._ensure_admin()
        python = sys.executable
        processes = []
        if not options["no_worker"]:
            schedule = settings.VAR_DIR / "celerybeat-schedule"
            processes.append(
                subprocess.Popen(
                    [
                        python,
                        "-m",
                        "celery",
                        "-A",
                        "karpui",
                        "worker",
                        "--beat",
                        "--schedule",
                        str(schedule),
                        "--concurrency",
                        "1",
                        "--loglevel",
                        "WARNING",
                        "--without-mingle",
                        "--without-gossip",
                    ]
                )
            )
        processes.append(subprocess.Popen([python, "manage.py", "runserver", "--noreload", options["addrport"]]))
        self.stdout.write(f"karpui is serving http://{options['addrport']}/ (Ctrl-C stops web and worker)")

        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        try:
            while all(p.poll() is None for p in processes):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        failed = [p for p in processes if p.returncode not in (0, -signal.SIGTERM, None)]
        if failed:
            sys.exit(1)

    def _ensure_admin(self) -> None:
        """On first run, create user `admin` with a random password and say how to log in."""
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "", password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created the first admin user. Log in at http://127.0.0.1:8000/ as admin / {password}\n"
                "(change it with: python manage.py changepassword admin)"
            )
        )
