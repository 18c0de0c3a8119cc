"""A planned NodeClaim made final, as Karpenter's FinalizeScheduling and TruncateInstanceTypes do: launched into one
of its reservations only, its instance types cut to the cheapest MaxInstanceTypes (minValues checked again under
Strict), and its labels stamped from what it requires."""

from __future__ import annotations

from provisioner import labels as wk
from provisioner.options import STRICT
from provisioner.quantity import add
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling import results as r
from provisioner.scheduling.nodeclaim import NodeClaimTemplate, PlannedNodeClaim
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan, Reason


def plan(claim: PlannedNodeClaim, *, max_instance_types: int, min_values_policy: str) -> NodeClaimPlan | Reason:
    """The NodeClaim `claim` launches as, or the Reason it cannot (minValues no longer met under Strict)."""
    template = claim.template
    index = template.index
    requirements = Requirements(v for k, v in claim.requirements.items() if k != wk.HOSTNAME)
    if claim.reserved:
        # Karpenter's FinalizeScheduling: the NodeClaim launches into one of the reservations it holds, and only
        # there (a reserved node whose capacity type changes then drifts).
        requirements = Requirements(
            [
                *(v for k, v in requirements.items() if k != wk.CAPACITY_TYPE),
                Requirement.in_values(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_RESERVED),
                Requirement(wk.RESERVATION_ID, frozenset(o.reservation_id for o in claim.reserved)),
            ]
        )
    table = index.priced(requirements)
    bits = index.bits(claim.mask)
    positions = [p for p in table.order if bits[p] == "1"][:max_instance_types]
    kept = [InstanceTypeOption(index.types[p], table.prices[p]) for p in positions]
    kept_mask = 0
    capacity_types: set[str] = set()
    for position in positions:
        kept_mask |= 1 << position
        capacity_types |= table.capacity_types[position]
    # Karpenter's TruncateInstanceTypes: under Strict, a NodeClaim whose cheapest MaxInstanceTypes options no
    # longer meet minValues is dropped with its pods; under BestEffort it launches as it is.
    if min_values_policy == STRICT:
        short = sorted(
            key
            for key, requirement in requirements.items()
            if requirement.min_values and index.distinct_values(kept_mask, requirement) < requirement.min_values
        )
        if short:
            # scheduler.go:458 wraps Truncate's error (types.go:509) with the NodePool as serrors prints it.
            return Reason(
                template.name,
                r.MIN_VALUES,
                "pod didn’t schedule because NodePool couldn’t meet minValues requirements, validating minValues, "
                f"{r.min_values_unmet(short)} (NodePool={template.name})",
                whole=True,
            )
    final = requirements.merged(
        [
            Requirement(
                wk.INSTANCE_TYPE,
                frozenset(o.instance_type.name for o in kept),
                min_values=_min_values(requirements, wk.INSTANCE_TYPE),
            ),
            Requirement(wk.CAPACITY_TYPE, frozenset(capacity_types)),
        ]
    )
    # Karpenter's addDaemonRequests (nodeclaim.go:407): the least DaemonSet overhead among the options, taken in
    # FinalizeScheduling (scheduler.go:523) before the options are truncated (provisioner.go:441).
    requests = add(claim.requests, template.daemon_overhead(claim.mask))
    return NodeClaimPlan(
        nodepool=template.name,
        pods=tuple(claim.pods),
        requests=requests,
        requirements=final,
        options=tuple(kept),
        labels=_labels(template, final),
        taints=template.nodepool.taints,
        startup_taints=template.nodepool.startup_taints,
        min_values_relaxed=claim.min_values_relaxed,
        hostname=claim.hostname,
        excluded=dict(template.excluded),
    )


def _min_values(requirements: Requirements, key: str) -> int | None:
    requirement = requirements.get(key)
    return requirement.min_values if requirement is not None else None


def _labels(template: NodeClaimTemplate, requirements: Requirements) -> dict[str, str]:
    """Template labels plus a value for each single-valued or custom requirement, as Karpenter stamps NodeClaims."""
    labels = dict(template.labels)
    for key, requirement in requirements.items():
        if key in labels or (wk.is_restricted_label(key) and key != wk.NODEPOOL):
            continue
        if key in wk.WELL_KNOWN_LABELS:
            if requirement.operator == "In" and len(requirement.values) == 1:
                labels[key] = next(iter(requirement.values))
        else:
            value = requirement.any_value()
            if value:
                labels[key] = value
    return labels
