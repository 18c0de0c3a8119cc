"""Shared fixtures. Integration tests use the database named by DATABASE_URL (PostgreSQL in CI)."""

import pytest


@pytest.fixture
def lab(db):
    from karpui.models import Cluster

    return Cluster.objects.get(name="lab")
