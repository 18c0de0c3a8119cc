"""Retake the README's screenshots from the real app: a lab scenario in a throwaway database, then Playwright.

Usage: .venv/bin/python docs/screenshots.py   (needs Debian's chromium at /usr/bin/chromium; takes about a minute)
Writes docs/screenshots/*.png. The lab's clock starts at wall time, so times and names differ run to run.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
PORT = 8779
PASSWORD = secrets.token_urlsafe(16)  # a throwaway admin in a throwaway database
PAGES = {
    "overview.png": "/",
    "pending.png": "/pods/pending/",
    "nodes.png": "/nodes/",
    "disruption.png": "/disruption/",
    "savings.png": "/savings/",
    "catalog.png": "/catalog/?family=c&arch=arm64",
    "devices.png": "/devices/",
}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
            "KARPUI_VAR_DIR": str(tmp),
            "ALLOWED_HOSTS": "127.0.0.1",
        }

        def manage(*args: str) -> None:
            subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)

        manage("migrate")
        manage(
            "shell",
            "-c",
            f"from django.contrib.auth.models import User; User.objects.create_superuser('admin', '', '{PASSWORD}')",
        )
        scenario(manage, tmp)
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{PORT}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_server()
            shoot(lambda *args: manage("karp", *args))
        finally:
            server.terminate()
            server.wait(timeout=10)


def scenario(manage: Callable[..., None], tmp: Path) -> None:
    """Cost history with consolidations, pods held by a NodePool limit, devices."""
    karp = lambda *args: manage("karp", *args)  # noqa: E731
    karp("apply", "-f", "examples/provisioning")
    for replicas, wait in (("12", "10m"), ("4", "30m"), ("9", "20m"), ("3", "40m")):
        karp("scale", "deploy/inflate", "--replicas", replicas)
        karp("advance", wait)
    capped = tmp / "capped.yaml"
    deployment = (ROOT / "examples/limits/deployment.yaml").read_text()
    capped.write_text(
        deployment.replace("    spec:\n", "    spec:\n      nodeSelector: {karpenter.sh/nodepool: capped}\n", 1)
    )
    karp("apply", "-f", "examples/limits/nodepool.yaml")
    karp("apply", "-f", str(capped))
    karp("apply", "-f", "examples/dra/gpu.yaml")
    karp("advance", "45s")


def wait_for_server() -> None:
    for _ in range(60):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the server did not start")


def shoot(karp: Callable[..., None]) -> None:
    """Set the default NodePool to manual approval on the queue page, empty a node, then photograph each page."""
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{PORT}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/accounts/login/?next=/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/")
        page.goto(f"{base}/disruption/")
        page.select_option("select[aria-label='approval mode of default']", "manual")
        page.locator("#approval-default").get_by_role("button", name="Set").click()
        page.wait_for_url(f"{base}/disruption/")
        karp("scale", "deploy/inflate", "--replicas", "0")
        karp("advance", "40s")
        for name, path in PAGES.items():
            page.goto(base + path)
            page.wait_for_timeout(800)  # the savings chart draws after load
            page.screenshot(path=str(OUT / name))
        page.goto(f"{base}/nodepools/default/")
        page.fill("#id_cpu_limit", "8")
        page.get_by_role("button", name="Preview what changes").click()
        page.wait_for_selector("#whatif")
        page.screenshot(path=str(OUT / "nodepool-editor.png"), full_page=True)
        browser.close()
    print(f"wrote {len(PAGES) + 1} screenshots to {OUT.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
