"""Drift and expiration of NodeClaims: when a node no longer matches its NodePool, or has lived too long."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.objects import NodePool
from provisioner.requirements import Requirements

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"
HASH_ANNOTATION = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION = "karpenter.sh/nodepool-hash-version"


def drift_reason(
    nodepool: NodePool,
    nodepool_hash: str,
    claim_annotations: Mapping[str, str],
    claim_labels: Mapping[str, str],
    instance_types: Sequence[InstanceType],
    hash_version: str,
    *,
    check_types: bool = True,
) -> str | None:
    """Karpenter's first matching drift reason, or None; without `check_types`, the NodePool's (hash and
    requirements) only, as Karpenter's drift looks no further for a NodeClaim less than an hour old."""
    if claim_annotations.get(HASH_VERSION_ANNOTATION) == hash_version and claim_annotations.get(
        HASH_ANNOTATION
    ) not in (None, nodepool_hash):
        return NODEPOOL_DRIFTED
    requirements = Requirements(r.to_requirement() for r in nodepool.requirements)
    if not Requirements.from_labels(claim_labels).compatible(requirements, allow_undefined=frozenset()):
        return REQUIREMENTS_DRIFTED
    return instance_type_not_found(claim_labels, instance_types) if check_types else None


def instance_type_not_found(claim_labels: Mapping[str, str], instance_types: Sequence[InstanceType]) -> str | None:
    """InstanceTypeNotFound when the NodeClaim's instance type is gone or has no offering its labels allow."""
    name = claim_labels.get(wk.INSTANCE_TYPE)
    by_name = {it.name: it for it in instance_types}
    it = by_name.get(name or "")
    if it is None:
        return INSTANCE_TYPE_NOT_FOUND
    zone, capacity = claim_labels.get(wk.ZONE), claim_labels.get(wk.CAPACITY_TYPE)
    # A reserved node may be demoted to on-demand when its reservation ends, so either kind of offering keeps it
    # (Karpenter's instanceTypeNotFound leaves the reservation id to the provider).
    capacities = {capacity, wk.CAPACITY_TYPE_ON_DEMAND} if capacity == wk.CAPACITY_TYPE_RESERVED else {capacity}
    # The offerings are matched against the labels with well-known labels allowed undefined (HasCompatible), so a
    # NodeClaim without a zone or capacity-type label matches an offering in any (drift.go:298).
    if not any(
        (zone is None or o.zone == zone) and (capacity is None or o.capacity_type in capacities) for o in it.offerings
    ):
        return INSTANCE_TYPE_NOT_FOUND
    return None


def expired(nodepool_expire_after: int | None, created: float, now: float) -> bool:
    """expireAfter from the NodeClaim's creation; None means Never."""
    return nodepool_expire_after is not None and now >= created + nodepool_expire_after
