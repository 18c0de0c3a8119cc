"""The Trends page in chromium: four charts drawn by the vendored Chart.js from the page's series, redrawn when the
live section swaps in fresh data."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import ROOT, LiveKarpui

WAIT_MS = 30_000
EXAMPLE = ROOT / "examples" / "provisioning"


def _datasets(trend: str) -> str:
    """A chart's datasets, or none while the live section's swap has put in a canvas not drawn yet."""
    return f"(Chart.getChart(document.querySelector('canvas[data-trend=\"{trend}\"]'))?.data.datasets ?? [])"


def _labels(page: Page, trend: str, count: int) -> list[str]:
    """The labels of a chart once it has `count` datasets, read in the same evaluation as the wait (a poll may swap
    the section in between two evaluations)."""
    labels = page.wait_for_function(
        f"() => typeof Chart !== 'undefined' && {_datasets(trend)}.length === {count} && {_datasets(trend)}"
        ".map(d => d.label)",
        timeout=WAIT_MS,
    )
    return list(labels.json_value())


def test_the_trends_page_draws_its_four_charts_and_follows_the_cluster(
    live_karpui: LiveKarpui, browser_page: Page
) -> None:
    page = browser_page
    live_karpui.karp("apply", "-f", str(EXAMPLE))
    page.goto(f"{live_karpui.url}/trends/?window=1h")
    page.evaluate("window.karpuiTestMarker = 'kept'")
    assert _labels(page, "latency", 2) == ["p50", "p95"]
    assert _labels(page, "pending", 1) == ["pods pending"]

    live_karpui.karp("scale", "deploy/inflate", "--replicas", "3")
    expect(page.locator("#nodes-now")).to_have_text("1", timeout=60_000)  # the section polls every 10 s
    page.wait_for_function(f"() => {_datasets('nodes')}.map(d => d.label).includes('default')", timeout=WAIT_MS)
    page.wait_for_function(f"() => {_datasets('latency')}[0]?.data.some(v => v !== null)", timeout=WAIT_MS)
    assert page.evaluate("window.karpuiTestMarker === 'kept'")
    live_karpui.karp("scale", "deploy/inflate", "--replicas", "0")
