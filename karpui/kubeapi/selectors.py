"""Field selectors as the API server takes them: `spec.nodeName=n1,status.phase!=Failed`, on the fields each kind
allows (others are refused, as kube-apiserver refuses them: `field label not supported: spec.foo`)."""

from __future__ import annotations

from dataclasses import dataclass

from karpui.kubeapi.errors import bad_request
from provisioner.cluster.memory import field_value
from provisioner.cluster.objects import Obj

_ALWAYS = ("metadata.name", "metadata.namespace")
# The selectable fields of the built-in kinds (their registries' field label conversions) and of the lab's.
SELECTABLE: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "ReplicaSet": ("status.replicas",),
    "ResourceSlice": ("spec.nodeName", "spec.driver"),
    # Selectable as `name` too: a bug kube-apiserver keeps for the clients that came to rely on it.
    "PersistentVolumeClaim": ("name",),
    "PersistentVolume": ("name",),
}
_BUILT_IN = frozenset(
    {
        "Deployment",
        "DaemonSet",
        "PodDisruptionBudget",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "StorageClass",
    }
)
# Paths where the selectable field's name differs from the object's field.
_PATHS = {"source": "source.component", "name": "metadata.name"}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    equal: bool

    def matches(self, obj: Obj) -> bool:
        value = _value(obj, self.field)
        return (value == self.value) == self.equal


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Obj) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    def equal(self, field: str) -> str | None:
        """The value this selector requires `field` to equal, if it does (e.g. to narrow a query)."""
        return next((r.value for r in self.requirements if r.field == field and r.equal), None)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(r.field for r in self.requirements)


def _value(obj: Obj, field: str) -> str:
    value = field_value(obj, _PATHS.get(field, field))
    # Booleans select as Go prints them (`spec.unschedulable=true`).
    return value.lower() if value in ("True", "False") else value


def parse_field_selector(text: str, kind: str) -> FieldSelector:
    """Parse `a=b,c==d,e!=f`; an unsupported field or a malformed term is a 400 Bad Request."""
    requirements = []
    allowed = (*_ALWAYS, *SELECTABLE.get(kind, ()))
    for term in filter(None, (part.strip() for part in text.split(","))):
        if "!=" in term:
            field, value, equal = *term.split("!=", 1), False
        elif "==" in term:
            field, value, equal = *term.split("==", 1), True
        elif "=" in term:
            field, value, equal = *term.split("=", 1), True
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field = field.strip()
        if field not in allowed and (kind in SELECTABLE or kind in _BUILT_IN):
            raise bad_request(f"field label not supported: {field}")
        if field not in allowed:  # a custom resource's words
            known = '", "'.join(allowed)
            raise bad_request(f'"{field}" is not a known field selector: only "{known}"')
        requirements.append(FieldRequirement(field, value.strip(), equal))
    return FieldSelector(tuple(requirements))
