"""Page arithmetic every paged table shares: how many pages its rows make, and the asked page held inside them."""

from __future__ import annotations


def page_within(total: int, page: int, size: int) -> tuple[int, int]:
    """(page, pages) for `total` rows of `size` a page: at least one page, even with no rows; `page` moved into
    1..pages, so a page past the last shows the last."""
    pages = max(-(-total // size), 1)
    return min(max(page, 1), pages), pages
