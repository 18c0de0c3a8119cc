"""The dashboard in Debian's chromium against a real server and Celery worker: it updates live, without reloads."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import ROOT, LiveKarpui

WAIT_MS = 30_000
EXAMPLE = ROOT / "examples" / "provisioning"


def _nodepool_with_cpu_limit(folder: Path, cpu: str) -> Path:
    """The provisioning example's NodePool, capped at `cpu` (a limit of 0 keeps every pod pending)."""
    text = (EXAMPLE / "nodepool.yaml").read_text()
    path = folder / f"nodepool-{cpu}.yaml"
    path.write_text(text + f"  limits:\n    cpu: {cpu!r}\n")
    return path


def _mark_page(page: Page) -> None:
    """A value that only survives while the browser never reloads the page."""
    page.evaluate("window.karpuiTestMarker = 'kept'")


def _still_same_page(page: Page) -> bool:
    return bool(page.evaluate("window.karpuiTestMarker === 'kept'"))


def test_scaling_shows_pods_pending_then_a_node_without_reloading(
    live_karpui: LiveKarpui, browser_page: Page, tmp_path: Path
) -> None:
    page = browser_page
    live_karpui.karp("apply", "-f", str(EXAMPLE / "deployment.yaml"))
    live_karpui.karp("apply", "-f", str(_nodepool_with_cpu_limit(tmp_path, "0")))
    expect(page.locator("#pending-count")).to_have_text("0", timeout=WAIT_MS)
    _mark_page(page)

    live_karpui.karp("scale", "deploy/inflate", "--replicas", "5")
    expect(page.locator("#pending-count")).to_have_text("5", timeout=WAIT_MS)
    expect(page.locator("#nodeclaim-count")).to_have_text("0")

    # Raising the limit is all the test does: the Celery worker's tick provisions and the page follows.
    live_karpui.karp("apply", "-f", str(_nodepool_with_cpu_limit(tmp_path, "100")))
    expect(page.locator("#pending-count")).to_have_text("0", timeout=WAIT_MS)
    expect(page.locator("#nodeclaim-count")).to_have_text("1", timeout=WAIT_MS)
    assert _still_same_page(page)

    nodeclaim = live_karpui.karp("get", "nodeclaims", "-o", "jsonpath={.items[0].metadata.name}").strip()
    assert nodeclaim.startswith("default-")
    page.goto(f"{live_karpui.url}/nodes/")
    _mark_page(page)
    expect(page.locator("#nodes-table")).to_contain_text(nodeclaim, timeout=WAIT_MS)

    live_karpui.karp("scale", "deploy/inflate", "--replicas", "0")
    expect(page.locator("#nodes-table")).not_to_contain_text(nodeclaim, timeout=60_000)
    assert _still_same_page(page)
