"""The pending page in chromium at 500 waiting pods: one folded row for the Deployment, a refresh under 50 KB, and a
fold a person opens stays open across the live refreshes."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveKarpui
from tests.browser.workloads import pool_and_deployment

WAIT_MS = 60_000


def test_five_hundred_pending_pods_of_one_deployment_are_one_folded_row(
    live_karpui: LiveKarpui, browser_page: Page, tmp_path: Path
) -> None:
    page = browser_page
    workload = pool_and_deployment(tmp_path, "shut", "crowd", replicas=500, requests='{cpu: "1"}', cpu_limit="0")
    live_karpui.karp("apply", "-f", str(workload))
    page.goto(f"{live_karpui.url}/pods/pending/")
    expect(page.locator("#pending-total")).to_have_text("500", timeout=WAIT_MS)
    row = page.locator("tr.group")
    expect(row).to_have_count(1)
    expect(row.locator("td.count")).to_have_text("500")
    expect(row).to_contain_text("Deployment default/crowd")
    fold = row.locator("details")
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator("summary")).to_have_text("500 pods")
    expect(fold.get_by_text("and 490 more: list them all")).to_be_hidden()

    refresh = page.evaluate(
        "fetch('/pods/pending/', {headers: {'HX-Request': 'true'}}).then(r => r.text()).then(t => t.length)"
    )
    assert refresh < 50 * 1024, refresh

    fold.locator("summary").click()
    expect(fold.get_by_text("and 490 more: list them all")).to_be_visible()
    page.wait_for_timeout(4500)  # two polls swap the section in between
    expect(page.locator("tr.group details")).to_have_attribute("open", "")
    page.locator("tr.group").get_by_text("and 490 more: list them all").click()
    expect(page.locator("#pending-pods tbody tr")).to_have_count(50)  # the first page of the group's pods
    expect(page.locator(".pager")).to_contain_text("page 1 of 10")

    live_karpui.karp("delete", "-f", str(workload))
    live_karpui.karp("reset")
