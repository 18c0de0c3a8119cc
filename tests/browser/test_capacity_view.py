"""Capacity at a glance in chromium: a NodePool pushed over its limit turns red on the overview, without a reload."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveKarpui
from tests.browser.workloads import pool_and_deployment

WAIT_MS = 60_000
RED = "rgb(179, 38, 30)"  # --full in karpui.css


def test_a_nodepool_over_its_limit_turns_red_on_the_live_overview(
    live_karpui: LiveKarpui, browser_page: Page, tmp_path: Path
) -> None:
    page = browser_page

    def gauge(cpu_limit: str) -> str:
        return str(
            pool_and_deployment(
                tmp_path,
                "gauge",
                "gauged",
                replicas=2,
                requests='{cpu: "3"}',
                instance_type="c-4x-amd64-linux",
                cpu_limit=cpu_limit,
            )
        )

    live_karpui.karp("apply", "-f", gauge("100"))
    row = page.locator("#capacity-gauge")
    # Two 3-CPU pods on two c-4x nodes: the NodeClaims hold 8 of the 100 CPU allowed.
    expect(row.locator(".limit")).to_contain_text("cpu 8 / 100 8%", timeout=WAIT_MS)
    expect(row).to_have_class("level-ok")
    page.evaluate("window.karpuiTestMarker = 'kept'")

    live_karpui.karp("apply", "-f", gauge("4"))  # lowered below what the pool already holds
    expect(row.locator(".limit")).to_contain_text("cpu 8 / 4 200% over limit", timeout=WAIT_MS)
    expect(row).to_have_class("level-full")
    expect(row.locator(".limit")).to_have_css("color", RED)
    expect(row.locator(".badge")).to_have_css("background-color", RED)
    assert page.evaluate("window.karpuiTestMarker") == "kept"  # the poll did it, not a reload

    page.goto(f"{live_karpui.url}/nodes/?nodepool=gauge&sort=-cpu")
    expect(page.locator("#nodes tbody tr")).to_have_count(2)
    expect(page.locator("#capacity-gauge .badge")).to_have_text("over limit")
    # Leave the lab as the other browser tests expect it: no NodePool of this test, no nodes, no workloads.
    live_karpui.karp("delete", "nodepool", "gauge")
    live_karpui.karp("reset")
