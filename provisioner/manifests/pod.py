"""Pod specs (in Pods and workload templates) to the scheduler's Pod, with field-named validation errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from provisioner import labels as wk
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.pods import (
    DO_NOT_SCHEDULE,
    HONOR,
    IGNORE,
    SCHEDULE_ANYWAY,
    HostPort,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    effective_requests,
    pod_level_requests,
)
from provisioner.quantity import MAX_MILLI, Resources
from provisioner.requirements import Requirement, RequirementError, Requirements
from provisioner.selectors import LabelSelector, SelectorError
from provisioner.taints import EFFECTS, Toleration

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
PROTOCOLS = ("TCP", "UDP", "SCTP")


def pod_from_manifest(doc: Mapping[str, Any], *, created: float = 0.0, spec_view: Pod | None = None) -> Pod:
    """A stored Pod object as the scheduler sees it. `spec_view` is an earlier parse of the same spec, namespace
    and labels (a cache's), whose scheduling fields are reused."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    pod = spec_view or pod_from_spec(
        spec, "spec", namespace=meta.get("namespace") or "default", labels=meta.get("labels") or {}
    )
    owners = meta.get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    conditions = status.get("conditions") or []
    unschedulable = any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )
    # The scheduling fields come from the spec; the object's identity and status are layered on top.
    return replace(
        pod,
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        annotations=dict(meta.get("annotations") or {}),
        created=created,
        owner=(
            OwnerReference(
                controller["kind"],
                controller["name"],
                controller.get("uid", ""),
                api_version=controller.get("apiVersion", ""),
            )
            if controller
            else None
        ),
        node_name=spec.get("nodeName") or "",
        nominated_node_name=status.get("nominatedNodeName") or "",
        unschedulable=unschedulable,
        phase=status.get("phase") or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        unready=any(c.get("type") == "Ready" and c.get("status") == "False" for c in conditions),
        priority=int(spec.get("priority") or 0),
        resource_claims=tuple(c.get("name", "") for c in spec.get("resourceClaims") or []),
        started=_epoch(status.get("startTime")),
    )


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pod_from_spec(spec: Mapping[str, Any], path: str, *, namespace: str, labels: Mapping[str, str]) -> Pod:
    """Validate a PodSpec and return its scheduling view (name and identity left empty)."""
    f.mapping(spec, path)
    containers = f.sequence(spec.get("containers"), f"{path}.containers")
    if not containers:
        raise ManifestError("a pod needs at least one container", field=f"{path}.containers")
    app = [_container_requests(c, f"{path}.containers[{i}]") for i, c in enumerate(containers)]
    init = [
        (_container_requests(c, f"{path}.initContainers[{i}]"), (c or {}).get("restartPolicy") == "Always")
        for i, c in enumerate(f.sequence(spec.get("initContainers"), f"{path}.initContainers"))
    ]
    overhead = f.resources(spec.get("overhead"), f"{path}.overhead")
    pod_resources = f.mapping(spec.get("resources"), f"{path}.resources")
    pod_requests = f.resources(pod_resources.get("requests"), f"{path}.resources.requests")
    pod_limits = f.resources(pod_resources.get("limits"), f"{path}.resources.limits")
    # The API server fills pod-level requests in only where pod-level limits are set (defaultPodRequests).
    pod_level = (
        pod_level_requests(pod_requests, pod_limits, effective_requests(app, init)) if pod_limits else pod_requests
    )
    host_ports = tuple(
        port
        for section in ("containers", "initContainers")
        for index, container in enumerate(spec.get(section) or [])
        for port in _host_ports(container, f"{path}.{section}[{index}]")
    )
    f.integer(spec.get("priority"), f"{path}.priority", minimum=f.INT32[0], maximum=f.INT32[1])
    requests = effective_requests(app, init, overhead, pod_level)
    for resource, amount in requests.items():
        if amount > MAX_MILLI:
            raise ManifestError(
                f"the pod's containers together request more {resource} than a quantity can hold", field=path
            )
    affinity = f.mapping(spec.get("affinity"), f"{path}.affinity")
    node_affinity = f.mapping(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    required, preferred = _node_affinity(node_affinity, f"{path}.affinity.nodeAffinity")
    pod_affinity = f.mapping(affinity.get("podAffinity"), f"{path}.affinity.podAffinity")
    anti = f.mapping(affinity.get("podAntiAffinity"), f"{path}.affinity.podAntiAffinity")
    return Pod(
        name="",
        namespace=namespace,
        labels=dict(labels),
        requests=requests,
        node_selector=f.label_map(spec.get("nodeSelector"), f"{path}.nodeSelector"),
        required_terms=required,
        preferred_terms=preferred,
        tolerations=_tolerations(spec.get("tolerations"), f"{path}.tolerations"),
        affinity=_affinity_terms(
            pod_affinity, "requiredDuringSchedulingIgnoredDuringExecution", f"{path}.affinity.podAffinity"
        ),
        preferred_affinity=_affinity_terms(
            pod_affinity, "preferredDuringSchedulingIgnoredDuringExecution", f"{path}.affinity.podAffinity"
        ),
        anti_affinity=_affinity_terms(
            anti, "requiredDuringSchedulingIgnoredDuringExecution", f"{path}.affinity.podAntiAffinity"
        ),
        preferred_anti_affinity=_affinity_terms(
            anti, "preferredDuringSchedulingIgnoredDuringExecution", f"{path}.affinity.podAntiAffinity"
        ),
        spread=_spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints"),
        host_ports=host_ports,
    )


def _container_requests(container: Any, path: str) -> Resources:
    container = f.mapping(container, path)
    resources = f.mapping(container.get("resources"), f"{path}.resources")
    requests = f.resources(resources.get("requests"), f"{path}.resources.requests")
    limits = f.resources(resources.get("limits"), f"{path}.resources.limits")
    # Kubernetes defaults requests to limits for resources that only set a limit.
    return {**limits, **requests}


def _host_ports(container: Any, path: str) -> list[HostPort]:
    """A container's ports as the API server checks them; those with a hostPort occupy it on the node."""
    result = []
    for index, item in enumerate(f.sequence(f.mapping(container, path).get("ports"), f"{path}.ports")):
        port_path = f"{path}.ports[{index}]"
        port = f.mapping(item, port_path, required=True)
        f.integer(port.get("containerPort"), f"{port_path}.containerPort", minimum=1, maximum=65535)
        host_port = f.integer(port.get("hostPort"), f"{port_path}.hostPort", minimum=0, maximum=65535)
        protocol = port.get("protocol") or "TCP"
        if protocol not in PROTOCOLS:
            raise ManifestError(
                f"Unsupported value: {json.dumps(protocol)[:100]}: supported values: {', '.join(PROTOCOLS)}",
                field=f"{port_path}.protocol",
            )
        if host_port:
            result.append(HostPort(host_port, protocol, str(port.get("hostIP") or "0.0.0.0")))  # noqa: S104
    return result


def _node_selector_requirements(items: Any, path: str) -> Requirements:
    requirements = []
    for index, item in enumerate(f.sequence(items, path)):
        item_path = f"{path}[{index}]"
        spec = f.mapping(item, item_path, allowed=("key", "operator", "values"), required=True)
        operator = spec.get("operator")
        if operator not in SELECTOR_OPERATORS:
            raise ManifestError(
                f'Unsupported value: "{operator}": supported values: {", ".join(SELECTOR_OPERATORS)}',
                field=f"{item_path}.operator",
            )
        values = [str(v) for v in f.sequence(spec.get("values"), f"{item_path}.values")]
        if operator in ("In", "NotIn") and not values:
            raise ManifestError(f"values must be non-empty when operator is {operator}", field=f"{item_path}.values")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ManifestError(f"values must be empty when operator is {operator}", field=f"{item_path}.values")
        try:
            requirements.append(Requirement.from_operator(str(operator), str(spec.get("key")), values))
        except RequirementError as error:
            raise ManifestError(str(error), field=f"{item_path}.values") from None
    return Requirements(requirements)


def _node_field_requirements(items: Any, path: str) -> Requirements:
    """matchFields, which kube-apiserver allows only on metadata.name with In or NotIn and one value (how the
    DaemonSet controller pins a pod to its node)."""
    for index, item in enumerate(f.sequence(items, path)):
        item_path = f"{path}[{index}]"
        spec = f.mapping(item, item_path, allowed=("key", "operator", "values"), required=True)
        if spec.get("key") != wk.NODE_NAME_FIELD:
            raise ManifestError(
                f"Unsupported value: {json.dumps(spec.get('key'))[:100]}: supported values: {wk.NODE_NAME_FIELD}",
                field=f"{item_path}.key",
            )
        if spec.get("operator") not in ("In", "NotIn"):
            raise ManifestError(
                f"Unsupported value: {json.dumps(spec.get('operator'))[:100]}: supported values: In, NotIn",
                field=f"{item_path}.operator",
            )
        if len(f.sequence(spec.get("values"), f"{item_path}.values")) != 1:
            raise ManifestError(
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                field=f"{item_path}.values",
            )
    return _node_selector_requirements(items, path)


def _node_affinity(
    node_affinity: dict[str, Any], path: str
) -> tuple[tuple[NodeSelectorTerm, ...], tuple[PreferredSchedulingTerm, ...]]:
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    required = f.mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path)
    terms = []
    for index, term in enumerate(f.sequence(required.get("nodeSelectorTerms"), f"{required_path}.nodeSelectorTerms")):
        term_path = f"{required_path}.nodeSelectorTerms[{index}]"
        term = f.mapping(term, term_path, allowed=("matchExpressions", "matchFields"))
        expressions = _node_selector_requirements(term.get("matchExpressions"), f"{term_path}.matchExpressions")
        fields = _node_field_requirements(term.get("matchFields"), f"{term_path}.matchFields")
        terms.append(NodeSelectorTerm(expressions.merged(fields) if fields else expressions))
    preferred = []
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for index, item in enumerate(
        f.sequence(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        item_path = f"{preferred_path}[{index}]"
        item = f.mapping(item, item_path, allowed=("weight", "preference"))
        weight = f.integer(item.get("weight"), f"{item_path}.weight", minimum=1, maximum=100) or 1
        preference = f.mapping(item.get("preference"), f"{item_path}.preference")
        preferred.append(
            PreferredSchedulingTerm(
                weight,
                _node_selector_requirements(
                    preference.get("matchExpressions"), f"{item_path}.preference.matchExpressions"
                ),
            )
        )
    return tuple(terms), tuple(preferred)


def _selector(value: Any, path: str) -> LabelSelector | None:
    try:
        return LabelSelector.from_spec(f.mapping(value, path) if value is not None else None)
    except SelectorError as error:
        raise ManifestError(str(error), field=path) from None


def _affinity_term(item: Any, path: str, weight: int = 0) -> PodAffinityTerm:
    spec = f.mapping(item, path, required=True)
    key = f.string(spec.get("topologyKey"), f"{path}.topologyKey", required=True)
    assert key is not None
    namespace_selector = _selector(spec.get("namespaceSelector"), f"{path}.namespaceSelector")
    return PodAffinityTerm(
        topology_key=key,
        selector=_selector(spec.get("labelSelector"), f"{path}.labelSelector"),
        namespaces=frozenset(str(n) for n in spec.get("namespaces") or []),
        namespace_selector=namespace_selector,
        weight=weight,
        match_label_keys=tuple(spec.get("matchLabelKeys") or ()),
    )


def _affinity_terms(section: dict[str, Any], kind: str, path: str) -> tuple[PodAffinityTerm, ...]:
    terms = []
    for index, item in enumerate(f.sequence(section.get(kind), f"{path}.{kind}")):
        item_path = f"{path}.{kind}[{index}]"
        if kind.startswith("preferred"):
            item = f.mapping(item, item_path, allowed=("weight", "podAffinityTerm"))
            weight = f.integer(item.get("weight"), f"{item_path}.weight", minimum=1, maximum=100) or 1
            terms.append(_affinity_term(item.get("podAffinityTerm"), f"{item_path}.podAffinityTerm", weight))
        else:
            terms.append(_affinity_term(item, item_path))
    return tuple(terms)


def _tolerations(value: Any, path: str) -> tuple[Toleration, ...]:
    result = []
    for index, item in enumerate(f.sequence(value, path)):
        item_path = f"{path}[{index}]"
        spec = f.mapping(item, item_path, allowed=("key", "operator", "value", "effect", "tolerationSeconds"))
        operator = spec.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise ManifestError(
                f'Unsupported value: "{operator}": supported values: Equal, Exists', field=f"{item_path}.operator"
            )
        effect = spec.get("effect") or ""
        if effect and effect not in EFFECTS:
            raise ManifestError(
                f'Unsupported value: "{effect}": supported values: {", ".join(EFFECTS)}', field=f"{item_path}.effect"
            )
        result.append(Toleration.from_spec(spec))
    return tuple(result)


def _spread(value: Any, path: str) -> tuple[TopologySpreadConstraint, ...]:
    result = []
    for index, item in enumerate(f.sequence(value, path)):
        item_path = f"{path}[{index}]"
        spec = f.mapping(item, item_path, required=True)
        when = spec.get("whenUnsatisfiable") or DO_NOT_SCHEDULE
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ManifestError(f'Unsupported value: "{when}"', field=f"{item_path}.whenUnsatisfiable")
        key = f.string(spec.get("topologyKey"), f"{item_path}.topologyKey", required=True)
        assert key is not None
        result.append(
            TopologySpreadConstraint(
                max_skew=f.integer(spec.get("maxSkew"), f"{item_path}.maxSkew", minimum=1) or 1,
                topology_key=key,
                when_unsatisfiable=when,
                selector=_selector(spec.get("labelSelector"), f"{item_path}.labelSelector"),
                min_domains=f.integer(spec.get("minDomains"), f"{item_path}.minDomains", minimum=1),
                node_affinity_policy=spec.get("nodeAffinityPolicy") or HONOR,
                node_taints_policy=spec.get("nodeTaintsPolicy") or IGNORE,
                match_label_keys=tuple(spec.get("matchLabelKeys") or ()),
            )
        )
    return tuple(result)
