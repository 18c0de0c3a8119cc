"""The nodes list: a utilisation filter it cannot take is a 400 naming it (as the catalog's number filters are), and
the count above the table says which of the nodes the page shows."""

from __future__ import annotations

import pytest

from tests.integration import test_capacity
from tests.integration.test_capacity import _node, _pod

viewer, three_nodes = test_capacity.viewer, test_capacity.three_nodes  # its fixtures: a viewer, nodes a, b and c


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        ("min_util=abc", "min_util: must be a whole number of at most nine digits, got 'abc'\n"),
        ("min_util=%C2%B2", "min_util: must be a whole number of at most nine digits, got '²'\n"),
        ("min_util=1e309", "min_util: must be a whole number of at most nine digits, got '1e309'\n"),
        ("max_util=-5", "max_util: must be a whole number of at most nine digits, got '-5'\n"),
        ("max_util=37.5", "max_util: must be a whole number of at most nine digits, got '37.5'\n"),
        (
            "min_util=10&max_util=9999999999",
            "max_util: must be a whole number of at most nine digits, got '9999999999'\n",
        ),
    ],
)
def test_a_utilisation_filter_that_is_not_a_whole_number_is_a_400_naming_it(three_nodes, viewer, query, refusal):
    """These were dropped without a word: the page listed every node as if no filter had been asked for."""
    response = viewer.get(f"/nodes/?{query}")

    assert (response.status_code, response["Content-Type"], response.content.decode()) == (
        400,
        "text/plain; charset=utf-8",
        refusal,
    )


def test_an_empty_utilisation_filter_is_no_filter_and_0_is_a_filter(three_nodes, viewer):
    def shown(query: str) -> list[str]:
        return [row["node"].name for row in viewer.get(f"/nodes/?{query}").context["nodes"]]

    assert shown("min_util=&max_util=") == ["a-big", "b-small", "c-gpu"]  # the form's empty fields
    assert shown("min_util=0&max_util=30") == ["a-big"]
    assert shown("max_util=0") == []


def test_the_count_says_which_nodes_a_page_of_several_shows(lab, viewer):
    """On page 5 of 400 nodes the page said "400 of 400 nodes shown" above its 75 rows."""
    for i in range(400):
        _node(lab, f"node-{i:03d}", "general" if i < 390 else "gpu", "c-2x", "zone-a", "spot", "2", 4, "0.03")
    _pod(lab, "busy", "node-399", "2", "1Gi")  # 100 % cpu: the only node the filter below keeps

    def count_text(query: str) -> str:
        body = viewer.get(f"/nodes/?{query}").content.decode()
        return body.split('<p class="muted" id="nodes-count">')[1].split(". Utilisation")[0]

    assert count_text("page=5") == "Nodes 301–375 of 400"
    assert count_text("page=6") == "Nodes 376–400 of 400"
    assert viewer.get("/nodes/?page=99").content.decode() == "page: 99 is past the last page, 6\n"
    assert count_text("nodepool=general&page=2") == "Nodes 76–150 of 390 matching the filters (400 in all)"
    assert count_text("nodepool=gpu") == "10 of 400 nodes shown"  # one page: all that match
    assert count_text("min_util=100") == "1 of 400 nodes shown"
