"""Karpenter's provisioning log records, as data for the controllers to emit ("found provisionable pod(s)", ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.pods import Pod
from provisioner.scheduling.results import NodeClaimPlan

PROVISIONER = "controller.provisioner"


@dataclass(frozen=True)
class LogRecord:
    """One JSON log line: Karpenter's message text and field names."""

    message: str
    fields: Mapping[str, object] = field(default_factory=dict)
    level: str = "INFO"
    logger: str = PROVISIONER

    def as_dict(self) -> dict[str, object]:
        return {"level": self.level, "logger": self.logger, "message": self.message, **line_fields(self.fields)}


# A JSON log line's own keys, which no field may overwrite (zap would write the key twice).
LINE_KEYS = frozenset({"level", "time", "logger", "message"})


def line_fields(fields: Mapping[str, object]) -> dict[str, object]:
    """A record's fields as a line carries them: all but those named as the line's own keys."""
    return {key: value for key, value in fields.items() if key not in LINE_KEYS}


def first_and_others(items: Sequence[str], shown: int = 5) -> str:
    """Karpenter's list style: "a, b, c, d, e and 7 other(s)"."""
    text = ", ".join(items[:shown])
    return f"{text} and {len(items) - shown} other(s)" if len(items) > shown else text


def go_duration(seconds: float) -> str:
    """Go's time.Duration String for the durations logs carry: 850ms, 1.5s, 2m3.5s."""
    if seconds < 0.001:
        return f"{seconds * 1e6:g}µs"
    if seconds < 1:
        return f"{round(seconds * 1000, 6):g}ms"
    minutes, rest = divmod(seconds, 60)
    if minutes:
        return f"{int(minutes)}m{round(rest, 6):g}s"
    return f"{round(seconds, 6):g}s"


def found_provisionable(pods: Sequence[Pod], duration_seconds: float) -> LogRecord:
    return LogRecord(
        "found provisionable pod(s)",
        {"Pods": first_and_others([p.key for p in pods]), "duration": go_duration(duration_seconds)},
    )


def computed_new_nodeclaims(plans: Sequence[NodeClaimPlan]) -> LogRecord:
    """How many NodeClaims a batch launches for how many pods (Results.Record, logged before they are created)."""
    return LogRecord(
        "computed new nodeclaim(s) to fit pod(s)", {"nodeclaims": len(plans), "pods": sum(len(p.pods) for p in plans)}
    )


def computed_unready_nodes(placements: Mapping[str, Sequence[Pod]]) -> LogRecord:
    """How many of the batch's pods the simulation put on nodes that exist or are launching, and on how many."""
    used = [pods for pods in placements.values() if pods]
    return LogRecord(
        "computed unready node(s) will fit pod(s)", {"nodes": len(used), "pods": sum(len(p) for p in used)}
    )


def created_nodeclaim(plan: NodeClaimPlan, name: str) -> LogRecord:
    return LogRecord(
        "created nodeclaim",
        {
            "NodePool": {"name": plan.nodepool},
            "NodeClaim": {"name": name},
            "requests": plan.requests_text(),
            "instance-types": first_and_others(plan.instance_type_names),
        },
    )


def consolidation_warnings(anti_affinity: Sequence[Pod], spread: Sequence[Pod]) -> list[LogRecord]:
    """Karpenter's consolidationWarnings: pending pods whose preferred anti-affinity or ScheduleAnyway topology spread
    can keep consolidation from moving them, ten named a line."""
    said = [
        ("pod(s) have a preferred Anti-Affinity which can prevent consolidation", anti_affinity),
        ("pod(s) have a preferred TopologySpreadConstraint which can prevent consolidation", spread),
    ]
    return [LogRecord(message, {"pods": first_and_others([p.key for p in pods], 10)}) for message, pods in said if pods]


def skipping_nodepool(name: str, min_values: str | None) -> LogRecord:
    """A NodePool whose requirements (or minValues, `min_values` saying how) leave it no instance type."""
    return LogRecord(
        "skipping, nodepool requirements filtered out all instance types",
        {"NodePool": {"name": name}, **({"minValuesIncompatibleErr": min_values} if min_values else {})},
    )


def could_not_schedule(pod: Pod, message: str) -> LogRecord:
    return LogRecord(
        "could not schedule pod",
        {"Pod": {"name": pod.name, "namespace": pod.namespace}, "error": message},
        level="ERROR",
    )


def ignoring_pod(pod: Pod, error: str) -> LogRecord:
    """A pending pod Karpenter's Validate leaves out of provisioning (logged at V(1), each batch)."""
    return LogRecord(
        "ignoring pod", {"Pod": {"name": pod.name, "namespace": pod.namespace}, "error": error}, level="DEBUG"
    )


def volume_requirements_failed(pod: Pod, error: str) -> LogRecord:
    """A pod whose volumes' PVC, PV or StorageClass could not be read: Karpenter leaves it out of the batch."""
    return LogRecord(
        "failed getting volume topology requirements",
        {"Pod": {"name": pod.name, "namespace": pod.namespace}, "error": error},
        level="ERROR",
    )


def simulation_timed_out(duration_seconds: float) -> LogRecord:
    """Karpenter logs this (at V(1)) when Solve's one-minute context ends; the duration is truncated to seconds."""
    return LogRecord("scheduling simulation timed out", {"duration": go_duration(float(int(duration_seconds)))})


def deferred_for_reservations(pods: Sequence[Pod]) -> LogRecord:
    """Pods that could go to reserved capacity other NodeClaims hold: tried again at the next simulation."""
    return LogRecord(
        "deferring scheduling decision for provisionable pod(s) to future simulation due to limited reserved "
        "offering capacity",
        {"Pods": first_and_others([p.key for p in pods])},
        level="DEBUG",
    )
