"""The "disrupting node(s)" record with Karpenter's fields, and the line Karpenter v0.3x logged instead."""

from __future__ import annotations

from typing import Any

from provisioner.disruption.types import Command
from provisioner.labels import CAPACITY_TYPE
from provisioner.scheduling.logs import LogRecord, first_and_others

DISRUPTION = "controller.disruption"


def command_text(command: Command, command_id: str) -> str:
    nodes = ", ".join(c.name for c in command.candidates)
    text = f"{command.reason}/{command_id}: {command.decision}: nodepools=[{','.join(command.nodepools)}]: [{nodes}]"
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
            "replacement-nodes": [
                {"capacity-type": sorted(r.capacity_types), "instance-types": first_and_others(r.instance_type_names)}
                for r in command.replacements
            ],
        },
        logger=DISRUPTION,
    )


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
