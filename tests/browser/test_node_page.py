"""A node's page in chromium: its facts and its pods with their requests, cordoning it, and asking for it to go."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveKarpui
from tests.browser.workloads import pool_and_deployment

WAIT_MS = 60_000


def test_a_node_page_shows_its_pods_and_a_person_cordons_it_and_asks_for_it_to_go(
    live_karpui: LiveKarpui, browser_page: Page, tmp_path: Path
) -> None:
    page = browser_page
    workload = pool_and_deployment(
        tmp_path,
        "drill",
        "drilled",
        replicas=2,
        requests="{cpu: 1500m, memory: 512Mi}",
        instance_type="c-4x-amd64-linux",
    )
    live_karpui.karp("apply", "-f", str(workload))
    page.goto(f"{live_karpui.url}/nodes/?nodepool=drill")
    link = page.locator("#nodes tbody tr a").first
    expect(link).to_be_visible(timeout=WAIT_MS)
    node = link.inner_text()
    page.goto(f"{live_karpui.url}/nodes/{node}/")
    expect(page.locator("#node-facts")).to_contain_text("c-4x-amd64-linux")
    expect(page.locator("#node-facts")).to_contain_text("$0.1086")
    pods = page.locator("#node-pods tbody tr")
    expect(pods).to_have_count(2, timeout=WAIT_MS)
    expect(pods.first).to_contain_text("Deployment/drilled")
    expect(pods.first.locator("td").nth(3)).to_have_text("1.50")
    expect(pods.first.locator("td").nth(4)).to_have_text("512")
    expect(page.locator("#node-pods tfoot")).to_contain_text("3.00")

    page.get_by_role("button", name="Cordon").click()
    expect(page.locator(".message")).to_have_text(f"node {node} cordoned")
    expect(page.locator("#node-state")).to_have_text("cordoned")
    expect(page.get_by_role("button", name="Uncordon")).to_be_visible()

    page.get_by_role("button", name="Disrupt this node").click()  # no reason: the browser will not send it
    expect(page.locator(".message")).to_have_text(f"node {node} cordoned")
    page.get_by_placeholder("why it should go").fill("retiring this type")
    page.get_by_role("button", name="Disrupt this node").click()
    expect(page.locator(".message")).to_contain_text("another person approves it on the Disruption page")
    expect(page.locator("table", has_text="Decided by")).to_contain_text("Manual/manual-")

    page.get_by_role("button", name="Uncordon").click()
    expect(page.locator(".message")).to_have_text(f"node {node} uncordoned")
    live_karpui.karp("delete", "-f", str(workload))
    live_karpui.karp("reset")
