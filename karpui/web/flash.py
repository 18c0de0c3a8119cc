"""Flash messages per cluster: a message said after an action on one cluster waits for a page of that cluster,
so an approval on cluster b is not reported on the lab's page another tab loads next."""

from __future__ import annotations

from typing import Any

from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.fallback import FallbackStorage

from karpui.clusters.registry import DEFAULT_CLUSTER

PREFIX = "cluster-"


def _cluster_of(message: Message) -> str:
    return next((tag[len(PREFIX) :] for tag in (message.extra_tags or "").split() if tag.startswith(PREFIX)), "")


class ClusterMessageStorage(FallbackStorage):
    """Django's cookie-then-session storage, each message tagged with the cluster of the request that said it."""

    def add(self, level: int, message: Any, extra_tags: str = "") -> None:
        if PREFIX not in (extra_tags or ""):
            cluster = self.request.GET.get("cluster") or DEFAULT_CLUSTER
            extra_tags = f"{extra_tags} {PREFIX}{cluster}".strip()
        super().add(level, message, extra_tags)

    def for_page(self, cluster: str) -> list[Message]:
        """The messages for a page of `cluster` (and those of no cluster); the others are kept for their own. The
        cluster tag is routing, not a style: the messages shown carry their level's tag and their own tags only."""
        mine, others = [], []
        for message in self:
            (mine if _cluster_of(message) in ("", cluster) else others).append(message)
        for message in others:
            self.add(message.level, message.message, message.extra_tags)
        return [Message(m.level, m.message, _without_cluster(m.extra_tags)) for m in mine]


def _without_cluster(tags: str | None) -> str:
    return " ".join(tag for tag in (tags or "").split() if not tag.startswith(PREFIX))
