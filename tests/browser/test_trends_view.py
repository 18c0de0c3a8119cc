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


def test_dragging_across_a_chart_zooms_both_pages_to_those_buckets(live_karpui: LiveKarpui, browser_page: Page) -> None:
    page = browser_page
    for path, canvas in (("trends", 'canvas[data-trend="pending"]'), ("savings", "#cost-chart")):
        page.goto(f"{live_karpui.url}/{path}/?window=1h")
        page.wait_for_function(
            f"() => typeof Chart !== 'undefined' && !!Chart.getChart(document.querySelector('{canvas}'))"
        )
        source = "trend-series" if path == "trends" else "cost-series"
        series = page.evaluate(f"JSON.parse(document.getElementById('{source}').textContent)")
        edges = series["edges"]
        assert len(edges) == len(series["labels"]) + 1 >= 61  # an hour of 1-minute buckets, and the last one's end
        assert edges[1:3] == [edges[1][:14] + edges[1][14:16] + ":00Z", edges[2][:17] + "00Z"]  # on whole minutes
        box = page.locator(canvas).bounding_box()
        assert box is not None
        left, right = (
            page.evaluate(f"Chart.getChart(document.querySelector('{canvas}')).scales.x.getPixelForValue({i})")
            for i in (40, 52)
        )
        page.mouse.move(box["x"] + left, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + (left + right) / 2, box["y"] + box["height"] / 2)
        expect(page.locator(".zoom-band")).to_be_visible()
        page.mouse.move(box["x"] + right, box["y"] + box["height"] / 2)
        with page.expect_navigation():
            page.mouse.up()
        query = dict(part.split("=", 1) for part in page.url.split("?", 1)[1].split("&"))
        assert (query["from"], query["to"]) == (edges[40].replace(":", "%3A"), edges[53].replace(":", "%3A"))
        page.wait_for_function(
            f"() => typeof Chart !== 'undefined' && !!Chart.getChart(document.querySelector('{canvas}'))"
        )
        assert page.evaluate(f"Chart.getChart(document.querySelector('{canvas}')).data.labels.length") == 13
        expect(page.locator("form.filters input[name=from]")).to_have_value(edges[40])
        page.locator("#zoom-out").click()
        page.wait_for_url(f"{live_karpui.url}/{path}/?window=1h")
