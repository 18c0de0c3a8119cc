"""A pause's banner and the queue's Resume button are live: they appear without a reload and go by themselves when
the pause's TTL passes, while the page's clock strip keeps moving."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveKarpui

WAIT_MS = 30_000


def test_a_pause_shows_and_ends_by_itself_on_every_open_page(live_karpui: LiveKarpui, browser_page: Page) -> None:
    page = browser_page
    page.goto(f"{live_karpui.url}/disruption/")
    page.evaluate("window.karpuiTestMarker = 'kept'")  # survives only while the page is never reloaded
    clock = page.locator("#page-clock-now")
    expect(page.locator("#page-clock")).to_contain_text("Times on this page: lab time")
    before = clock.inner_text()
    expect(page.get_by_role("button", name="Pause disruption")).to_be_visible()

    live_karpui.karp("pause", "--as", "admin", "--for", "20s", "--reason", "browser check")
    banner = page.locator("#banners .banner", has_text="browser check")
    expect(banner).to_be_visible(timeout=WAIT_MS)  # the banner strip polls every 5 s
    expect(banner).to_contain_text("is paused for another")
    expect(page.get_by_role("button", name="Resume disruption")).to_be_visible(timeout=WAIT_MS)
    assert clock.inner_text() != before  # the clock moved with the polls

    expect(banner).to_have_count(0, timeout=60_000)  # the TTL passed: gone without a reload
    expect(page.get_by_role("button", name="Resume disruption")).to_have_count(0, timeout=WAIT_MS)
    expect(page.get_by_role("button", name="Pause disruption")).to_be_visible()
    assert page.evaluate("window.karpuiTestMarker === 'kept'")
