"""The node page is live where the node changes (after `karp cordon` it offers Uncordon without a reload), and its
"why (not) consolidated" says what the last disruption pass said and when, not events up to 15 minutes old."""

from __future__ import annotations

from tests.integration.test_dashboard import logged_in, user
from tests.karp import ok


def test_the_facts_and_actions_refresh_after_a_cordon(node):
    client = logged_in(user("olga", "request_disruption"))
    page = client.get(f"/nodes/{node}/").content.decode()
    assert f'hx-get="/nodes/{node}/?part=live" hx-trigger="every 3s"' in page
    assert ">Cordon</button>" in page
    ok("cordon", node)
    live = client.get(f"/nodes/{node}/", {"part": "live"}, HTTP_HX_REQUEST="true").content.decode()
    assert live.lstrip().startswith('<div id="node-live"') and "<html" not in live
    assert ">Uncordon</button>" in live and ">Cordon</button>" not in live
    assert '<span class="tag" id="node-state">cordoned</span>' in live


def test_why_not_consolidated_is_the_last_passes_word_with_its_time(node, lab):
    ok("advance", "30s")  # a few disruption passes over the node
    lab.refresh_from_db()
    client = logged_in(user())
    card = client.get(f"/nodes/{node}/", {"part": "why"}, HTTP_HX_REQUEST="true").content.decode()
    explained = lab.lab_state["disruption"]["explained"]
    said = explained["nodes"][node]
    assert said == ["Can't replace with a cheaper node"]
    assert '<div class="why-said">Can&#x27;t replace with a cheaper node</div>' in card
    age = lab.clock.timestamp() - explained["at"]
    assert 0 <= age < 10  # passes run every 10 s
    assert 'id="why-pass">the last disruption pass, at <time datetime=' in card
    assert 'hx-trigger="every 5s"' in card
