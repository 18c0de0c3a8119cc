"""CapacityBuffer (autoscaling.x-k8s.io/v1beta1, Karpenter v1.14, gate CapacityBuffer): spare capacity kept as
virtual pods the provisioner schedules like pending pods but that never exist. How a buffer's pod shape and chunk
count are resolved (pkg/utils/apps/resolve.go, pkg/controllers/capacitybuffer/helpers.go) and its virtual pods built
(pkg/state/virtualpods)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.objects import Obj
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.pod import pod_from_manifest, pod_from_spec
from provisioner.pods import Pod

API_VERSION = "autoscaling.x-k8s.io/v1beta1"
KIND = "CapacityBuffer"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"  # the default (and only) provisioningStrategy
READY_FOR_PROVISIONING, PROVISIONING = "ReadyForProvisioning", "Provisioning"
# ReadyForProvisioning's reasons (the buffer controller's) and Provisioning's (the provisioner's).
RESOLVED, SCALABLE_REF_NOT_FOUND, POD_TEMPLATE_NOT_FOUND, RESOLUTION_FAILED = (
    "Resolved",
    "ScalableRefNotFound",
    "PodTemplateNotFound",
    "ResolutionFailed",
)
FITS_EXISTING, REQUIRES_NEW, NOT_READY, BUFFER_EMPTY = (
    "FitsExistingCapacity",
    "RequiresNewCapacity",
    "NotReadyForProvisioning",
    "BufferEmpty",
)
FAKE_POD_ANNOTATION = "karpenter.sh/capacity-buffer-fake-pod"
BUFFER_NAME_ANNOTATION = "karpenter.sh/capacity-buffer-name"
BUFFER_NAMESPACE_ANNOTATION = "karpenter.sh/capacity-buffer-namespace"
VIRTUAL_POD_PRIORITY = -(2**31)  # math.MinInt32: every real pod is scheduled first
INT32_MAX = 2**31 - 1
# What a scalableRef may name, with the plural its "not found" message uses (apps is the default group).
SCALABLE_KINDS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}


class Unresolved(Exception):
    """The buffer's pod shape cannot be resolved: `reason` is ReadyForProvisioning's, `retry` whether Karpenter
    treats it as a failed reconcile (anything but a missing object)."""

    def __init__(self, reason: str, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry = retry


@dataclass(frozen=True)
class Resolution:
    """BufferResolution: the pod template a chunk has, and where it came from."""

    template: Mapping[str, Any]  # a PodTemplateSpec: {metadata: {labels}, spec}
    pod_template: str = ""  # the PodTemplate's name (podTemplateRef)
    pod_template_generation: int = 0
    scalable_replicas: int = 0  # the scalableRef's spec.replicas (1 when unset)


Getter = Callable[[str, str, str], Obj | None]  # (kind, name, namespace) -> the object or None


def resolve(buffer: Obj, get: Getter) -> Resolution:
    """ResolveCapacityBuffer: a PodTemplate (podTemplateRef) or a Deployment/StatefulSet/ReplicaSet (scalableRef)."""
    spec = buffer.get("spec") or {}
    namespace = buffer["metadata"].get("namespace") or "default"
    template_ref, scalable_ref = spec.get("podTemplateRef"), spec.get("scalableRef")
    if template_ref is None and scalable_ref is None:
        raise Unresolved(RESOLUTION_FAILED, "Neither podTemplateRef nor scalableRef is set")
    if template_ref is not None:
        name = template_ref.get("name", "")
        found = get("PodTemplate", name, namespace)
        if found is None:
            raise Unresolved(POD_TEMPLATE_NOT_FOUND, f'podtemplates "{name}" not found')
        return Resolution(found.get("template") or {}, name, int(found["metadata"].get("generation") or 0))
    scalable: dict[str, Any] = scalable_ref or {}
    group, kind, name = scalable.get("apiGroup") or "apps", scalable.get("kind", ""), scalable.get("name", "")
    if group != "apps":
        raise Unresolved(
            RESOLUTION_FAILED, f'unsupported scalableRef API group "{scalable.get("apiGroup")}"', retry=True
        )
    if kind not in SCALABLE_KINDS:
        raise Unresolved(RESOLUTION_FAILED, f'unsupported kind "{kind}"', retry=True)
    found = get(kind, name, namespace)
    if found is None:
        raise Unresolved(SCALABLE_REF_NOT_FOUND, f'{SCALABLE_KINDS[kind]}.apps "{name}" not found')
    workload = found.get("spec") or {}
    replicas = workload.get("replicas")
    return Resolution(workload.get("template") or {}, scalable_replicas=1 if replicas is None else int(replicas))


def template_pod(template: Mapping[str, Any], namespace: str) -> Pod:
    """The scheduling view of one chunk (its requests, selectors, ...); a template no pod could have is refused."""
    labels = (template.get("metadata") or {}).get("labels") or {}
    try:
        return _spec_view(template.get("spec") or {}, "template.spec", namespace, labels)
    except ManifestError as error:
        raise Unresolved(RESOLUTION_FAILED, str(error), retry=True) from None


def _spec_view(spec: Mapping[str, Any], path: str, namespace: str, labels: Mapping[str, str]) -> Pod:
    """A template's pod spec as Karpenter reads it (resources.RequestsForSpec, and the scheduler over virtual pods
    that never pass the API server): requests only. Kubernetes defaults requests to limits on a Pod, never on a
    PodTemplate or a workload's template (SetDefaults_Pod), so a limit without a request requests nothing."""
    requested = copy.deepcopy(dict(spec))
    for section in ("containers", "initContainers"):
        for container in requested.get(section) or []:
            if isinstance(container, dict) and isinstance(container.get("resources"), dict):
                container["resources"].pop("limits", None)
    if isinstance(requested.get("resources"), dict):
        requested["resources"].pop("limits", None)
    return pod_from_spec(requested, path, namespace=namespace, labels=labels)


def limit_replicas(limits: Mapping[str, int], requests: Mapping[str, int]) -> int | None:
    """calculateLimitReplicas: how many chunks fit the limits, floor(limit/request) over the resources both name,
    the least of them; None when no limit names a resource the chunk requests (the limits constrain nothing)."""
    fits = [min(limit // requests[name], INT32_MAX) for name, limit in limits.items() if requests.get(name, 0) > 0]
    return min(fits) if fits else None


def percentage_replicas(scalable_replicas: int, percentage: int) -> int:
    """calculatePercentageReplicas: ceil(replicas × percentage / 100), at least 1 when both are positive."""
    replicas = math.ceil(scalable_replicas * percentage / 100)
    return 1 if replicas < 1 and percentage > 0 and scalable_replicas > 0 else replicas


def desired_replicas(
    spec: Mapping[str, Any],
    requests: Mapping[str, int],
    limits: Mapping[str, int],
    *,
    scalable_replicas: int = 0,
    scalable: bool = False,
) -> int:
    """computeReplicas: the larger of replicas and the percentage (of a scalableRef's replicas), capped by the
    limits; the limits alone when neither is set; 0 when nothing is set."""
    candidates = []
    if scalable and spec.get("percentage") is not None and scalable_replicas > 0:
        candidates.append(percentage_replicas(scalable_replicas, int(spec["percentage"])))
    if spec.get("replicas") is not None:
        candidates.append(int(spec["replicas"]))
    desired = max(candidates) if candidates else 0
    if spec.get("limits") is not None:
        cap = limit_replicas(limits, requests)
        if cap is not None:
            return min(desired, cap) if candidates else cap
    return desired


def ready(buffer: Obj) -> bool:
    """isBufferReadyForProvisioning: resolved, with chunks to keep."""
    status = buffer.get("status") or {}
    resolved = any(
        c.get("type") == READY_FOR_PROVISIONING and c.get("status") == "True" for c in status.get("conditions") or []
    )
    spec = buffer.get("spec") or {}
    has_ref = spec.get("podTemplateRef") is not None or spec.get("scalableRef") is not None
    return resolved and int(status.get("replicas") or 0) > 0 and has_ref


def sanitize(template_spec: Mapping[str, Any]) -> dict[str, Any]:
    """sanitizeVirtualPodSpec: a copy of the pod spec without a node and without persistent or ephemeral volumes
    (and their mounts), whose claims a virtual pod never has."""
    spec = copy.deepcopy(dict(template_spec))
    spec.pop("nodeName", None)
    dropped = {v.get("name") for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v or "ephemeral" in v}
    if dropped:
        spec["volumes"] = [v for v in spec["volumes"] if v.get("name") not in dropped]
        for section in ("containers", "initContainers"):
            for container in spec.get(section) or []:
                if container.get("volumeMounts"):
                    container["volumeMounts"] = [m for m in container["volumeMounts"] if m.get("name") not in dropped]
    return spec


def virtual_pods(buffer: Obj, template: Mapping[str, Any], now: float = 0.0) -> list[Pod]:
    """BuildVirtualPods: status.replicas pods named capacity-buffer-NAME-i, of the template without a node and
    without persistent or ephemeral volumes, at the lowest priority, marked as the buffer's, unschedulable, created
    `now` (so the scheduler's queue, oldest first among equals, takes real pods of the same size before them)."""
    meta = buffer["metadata"]
    count = int((buffer.get("status") or {}).get("replicas") or 0)
    spec = sanitize(template.get("spec") or {})
    spec["priority"] = VIRTUAL_POD_PRIORITY
    labels = (template.get("metadata") or {}).get("labels") or {}
    namespace = meta.get("namespace") or "default"
    annotations = {
        FAKE_POD_ANNOTATION: "true",
        BUFFER_NAME_ANNOTATION: meta["name"],
        BUFFER_NAMESPACE_ANNOTATION: namespace,
    }
    unschedulable = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    shape = _spec_view(spec, "spec", namespace, labels)
    return [
        pod_from_manifest(
            {
                "metadata": {
                    "name": f"capacity-buffer-{meta['name']}-{i}",
                    "namespace": namespace,
                    "uid": f"{meta.get('uid', '')}-{i}",
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": spec,
                "status": unschedulable,
            },
            spec_view=shape,
            created=now,
        )
        for i in range(1, count + 1)
    ]


def is_virtual(pod: Pod) -> bool:
    """IsVirtualPod."""
    return pod.annotations.get(FAKE_POD_ANNOTATION) == "true"


def buffer_key(pod: Pod) -> str:
    """bufferKeyOf: NAMESPACE/NAME of the buffer a virtual pod stands for, "" for a real pod."""
    if not is_virtual(pod):
        return ""
    namespace, name = (
        pod.annotations.get(BUFFER_NAMESPACE_ANNOTATION, ""),
        pod.annotations.get(BUFFER_NAME_ANNOTATION, ""),
    )
    return f"{namespace}/{name}" if namespace and name else ""


@dataclass
class Placement:
    """bufferProvisioningStatus: where a buffer's virtual pods went in the last provisioning simulation."""

    existing: int = 0
    new: int = 0
    failed: int = 0


def provisioning_condition(buffer: Obj, placed: Placement | None) -> tuple[str, str, str] | None:
    """computeProvisioningCondition: (status, reason, message) of the Provisioning condition, or None to leave it."""
    status = buffer.get("status") or {}
    resolved = any(
        c.get("type") == READY_FOR_PROVISIONING and c.get("status") == "True" for c in status.get("conditions") or []
    )
    if not resolved:
        return "False", NOT_READY, "Buffer is not ReadyForProvisioning"
    desired = int(status.get("replicas") or 0)
    if desired == 0:
        return "False", BUFFER_EMPTY, "Buffer has zero desired replicas"
    if placed is None:
        return None
    if placed.new > 0 or placed.failed > 0:
        return (
            "False",
            REQUIRES_NEW,
            f"{placed.new}/{desired} virtual pods required new capacity, {placed.failed} failed",
        )
    if placed.existing == desired:
        return "True", FITS_EXISTING, f"All {desired} virtual pods fit on existing capacity"
    return None
