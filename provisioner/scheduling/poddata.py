"""A pod's scheduling view during one simulation: its constraints as currently relaxed, and derived data."""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.options import RESPECT
from provisioner.pods import DO_NOT_SCHEDULE, HostPort, Pod, PodAffinityTerm, TopologySpreadConstraint
from provisioner.quantity import MILLI, Resources
from provisioner.requirements import Requirements
from provisioner.taints import TOLERATE_PREFER_NO_SCHEDULE, Toleration


@dataclass
class PodState:
    """The mutable part of a pod while preferences are relaxed; the Pod itself never changes."""

    pod: Pod
    required_terms: list[Requirements]
    preferred_terms: list[tuple[int, Requirements]]
    preferred_affinity: list[PodAffinityTerm]
    preferred_anti_affinity: list[PodAffinityTerm]
    spread: list[TopologySpreadConstraint]
    tolerations: tuple[Toleration, ...]
    relaxations: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, pod: Pod, policy: str = RESPECT) -> PodState:
        respect = policy == RESPECT
        return cls(
            pod=pod,
            required_terms=[term.requirements for term in pod.required_terms],
            preferred_terms=sorted(((t.weight, t.requirements) for t in pod.preferred_terms), key=lambda t: -t[0])
            if respect
            else [],
            preferred_affinity=sorted(pod.preferred_affinity, key=lambda t: -t.weight) if respect else [],
            preferred_anti_affinity=sorted(pod.preferred_anti_affinity, key=lambda t: -t.weight) if respect else [],
            spread=[c for c in pod.spread if respect or c.when_unsatisfiable == DO_NOT_SCHEDULE],
            tolerations=pod.tolerations,
        )

    def data(self) -> PodData:
        base = Requirements.from_labels(self.pod.node_selector)
        strict = base.merged(self.required_terms[0]) if self.required_terms else base
        requirements = strict.merged(self.preferred_terms[0][1]) if self.preferred_terms else strict
        requests = dict(self.pod.requests)
        requests["pods"] = requests.get("pods", 0) + MILLI
        return PodData(
            requests=requests,
            requirements=requirements,
            strict=strict,
            tolerations=self.tolerations,
            node_filter=tuple(strict.merged(term) for term in self.required_terms) or (strict,),
            # With the claims' names: two pods of one claim share its devices, so a pod's claims decide where it fits.
            devices=tuple((r.claim, r.name, r.shape()) for r in self.pod.device_requests),
            host_ports=self.pod.host_ports,
            volumes=self.pod.volume_requirements,
        )

    def relax(self, tolerate_prefer_no_schedule: bool) -> str | None:
        """Relax one preference in Karpenter's fixed order; the reason, or None when nothing is left to relax."""
        if len(self.required_terms) > 1:
            self.required_terms.pop(0)
            return "removing first required node affinity term (terms are ORed)"
        if self.preferred_affinity:
            self.preferred_affinity.pop(0)
            return "removing heaviest preferred pod affinity term"
        if self.preferred_anti_affinity:
            self.preferred_anti_affinity.pop(0)
            return "removing heaviest preferred pod anti-affinity term"
        if self.preferred_terms:
            self.preferred_terms.pop(0)
            return "removing heaviest preferred node affinity term"
        for index, constraint in enumerate(self.spread):
            if constraint.when_unsatisfiable != DO_NOT_SCHEDULE:
                self.spread.pop(index)
                return f"removing ScheduleAnyway topology spread constraint on {constraint.topology_key}"
        if tolerate_prefer_no_schedule and TOLERATE_PREFER_NO_SCHEDULE not in self.tolerations:
            self.tolerations = (*self.tolerations, TOLERATE_PREFER_NO_SCHEDULE)
            return "adding toleration for PreferNoSchedule taints"
        return None


@dataclass(frozen=True)
class PodData:
    requests: Resources  # effective requests plus `pods: 1`
    requirements: Requirements  # nodeSelector ∩ first required term ∩ heaviest preferred term
    strict: Requirements  # without the preferred term
    tolerations: tuple[Toleration, ...]
    node_filter: tuple[Requirements, ...]  # each ORed required term with the nodeSelector (spread node filter)
    devices: tuple[object, ...] = ()  # what the pod's device requests ask for, and of which claims
    host_ports: tuple[HostPort, ...] = ()
    volumes: tuple[Requirements, ...] = ()  # the pod's volume alternatives, for the node's requirements only

    def class_key(self) -> tuple[object, ...]:
        """Pods with equal keys fit exactly the same nodes, resources, constraints and host ports alike (topology
        aside). Host ports belong in it: a port clash rules a node out for the class, and a pod without the port
        must not inherit that verdict; so do volumes, whose zones rule nodes out alike."""
        return (
            self.requirements,
            self.tolerations,
            tuple(sorted(self.requests.items())),
            self.devices,
            self.host_ports,
            self.volumes,
        )
