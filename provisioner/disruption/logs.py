"""The "disrupting node(s)" record with Karpenter's fields."""

from __future__ import annotations

from provisioner.disruption.types import Command
from provisioner.scheduling.logs import LogRecord, first_and_others

DISRUPTION = "controller.disruption"


def command_text(command: Command, command_id: str) -> str:
    nodes = ", ".join(c.name for c in command.candidates)
    text = f"{command.reason}/{command_id}: {command.decision}: nodepools=[{', '.join(command.nodepools)}]: [{nodes}]"
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
