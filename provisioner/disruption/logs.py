"""The "disrupting node(s)" record with Karpenter's fields, and the line Karpenter v0.3x logged instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from provisioner import labels as wk
from provisioner.disruption.types import Command
from provisioner.labels import CAPACITY_TYPE
from provisioner.requirements import Requirements
from provisioner.scheduling.logs import LogRecord, first_and_others

DISRUPTION = "controller.disruption"


def command_text(command: Command, command_id: str) -> str:
    """Command.String (types.go:350-379): the NodePools in the order the candidates name them (lo.Uniq)."""
    nodes = ", ".join(c.name for c in command.candidates)
    pools = ",".join(dict.fromkeys(c.claimed.nodepool for c in command.candidates))
    text = f"{command.reason}/{command_id}: {command.decision}: nodepools=[{pools}]: [{nodes}]"
    if command.replacements:
        text += f" -> [{len(command.replacements)} replacement{'s' if len(command.replacements) > 1 else ''}]"
    return f"{text} (savings: ${command.savings:.2f})"


def disrupting(command: Command, command_id: str) -> LogRecord:
    return LogRecord(
        "disrupting node(s)",
        {
            "command": command_text(command, command_id),
            "decision": command.decision,
            "disrupted-node-count": len(command.candidates),
            "replacement-node-count": len(command.replacements),
            "pod-count": command.pod_count,
            "disrupted-nodes": [
                {
                    "Node": {"name": c.name},
                    "NodeClaim": {"name": c.claimed.nodeclaim},
                    "instance-type": c.claimed.instance_type,
                    "capacity-type": c.claimed.capacity_type,
                }
                for c in command.candidates
            ],
            "replacement-nodes": replacement_nodes(
                [(r.requirements, [o.instance_type.name for o in r.options]) for r in command.replacements]
            ),
        },
        logger=DISRUPTION,
    )


def replacement_nodes(replacements: Sequence[tuple[Requirements, Sequence[str]]]) -> list[dict[str, str]]:
    """LogValues' replacement-nodes (types.go:466-479), of each replacement's requirements and instance types (in
    its options' order, cheapest first): one capacity type, the first its requirements allow of reserved, spot and
    on-demand; the types (InstanceTypeList: five and a count) only when there is a single replacement."""
    values = []
    for requirements, instance_types in replacements:
        allowed = requirements.get(wk.CAPACITY_TYPE)  # a key left out allows every value, as Requirements.Get does
        capacity = next(
            (t for t in (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT) if allowed is None or allowed.has(t)),
            wk.CAPACITY_TYPE_ON_DEMAND,
        )
        entry = {"capacity-type": capacity}
        if len(replacements) == 1:
            entry["instance-types"] = first_and_others(instance_types)
        values.append(entry)
    return values


def disrupting_v1beta1(command: Any, method: str) -> LogRecord:
    """Karpenter v0.37's record of the same decision (`disrupting via consolidation delete, terminating 1 nodes
    (1 pods) ip-…/m5.large/spot`, Command.String()), for a NodePool written at karpenter.sh/v1beta1: the documents
    of that API (seed 004 among them) grep for it. `command` is a stored DisruptionCommand."""
    spec = command["spec"]
    pods = sum(len(c["pods"]) for c in spec["candidates"])
    nodes = ", ".join(f"{c['node']}/{c['instanceType']}/{c['capacityType']}" for c in spec["candidates"])
    text = f"disrupting via {method} {spec['decision']}, terminating {len(spec['candidates'])} nodes ({pods} pods) "
    text += nodes
    replacements = spec["replacements"]
    if len(replacements) == 1:
        capacity = _capacity_types(replacements[0])
        described = f"{capacity[0]} node" if len(capacity) == 1 else "node"
        text += f" and replacing with {described} from types {first_and_others(replacements[0]['instanceTypes'])}"
    elif replacements:
        spot = sum(1 for r in replacements if "spot" in _capacity_types(r))
        on_demand = sum(1 for r in replacements if "on-demand" in _capacity_types(r))
        text += (
            f" and replacing with {spot} spot and {on_demand} on-demand, from types "
            f"{first_and_others(replacements[0]['instanceTypes'])}"
        )
    meta = command["metadata"]
    return LogRecord(text, {"command-id": meta.get("uid") or meta["name"]}, logger=DISRUPTION)


def _capacity_types(replacement: dict[str, Any]) -> list[str]:
    for requirement in replacement.get("requirements") or []:
        if requirement.get("key") == CAPACITY_TYPE and requirement.get("operator") == "In":
            return sorted(requirement.get("values") or [])
    return []
