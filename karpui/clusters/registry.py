"""Which clusters there are: the default lab's name, names refused before any query, and the default lab's row."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from karpui import models

DEFAULT_CLUSTER = "lab"


def cluster_get_or_create(name: str = DEFAULT_CLUSTER) -> models.Cluster:
    """First-run state only (the default lab cluster); everything else reads clusters and never makes one."""
    cluster, _ = models.Cluster.objects.get_or_create(name=name)
    return cluster


def cluster_name_check(name: str) -> None:
    """Refuse a name no cluster can have (the model's slug and length rules), naming the field."""
    if not name:
        raise ValidationError("cluster: a name is required")
    try:
        models.Cluster._meta.get_field("name").run_validators(name)
    except ValidationError as error:
        raise ValidationError(f"cluster: {'; '.join(error.messages)}") from None
