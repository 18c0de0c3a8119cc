"""The page arithmetic every paged table shares."""

from karpui.insight.paging import page_within


def test_pages_round_up_and_an_empty_table_is_one_page() -> None:
    assert [page_within(total, 1, 50) for total in (0, 1, 50, 51, 500)] == [(1, 1), (1, 1), (1, 1), (1, 2), (1, 10)]


def test_a_page_outside_the_range_is_held_inside_it() -> None:
    assert [page_within(120, page, 50) for page in (-3, 0, 2, 3, 4, 99)] == [
        (1, 3),
        (1, 3),
        (2, 3),
        (3, 3),
        (3, 3),
        (3, 3),
    ]
