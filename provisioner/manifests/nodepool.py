"""NodePool manifests (karpenter.sh/v1 and v1beta1) to and from the NodePool domain type, with Karpenter's rules."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from provisioner import labels as wk
from provisioner.durations import DurationError, parse_duration
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.nodeclass import DEFAULT_NODE_CLASS_KIND, NODE_CLASS_KINDS, default_group, kind_of_group
from provisioner.objects import (
    CONSOLIDATION_POLICIES,
    DEFAULT_BUDGETS,
    DISRUPTION_REASONS,
    WHEN_EMPTY,
    WHEN_EMPTY_OR_UNDERUTILIZED,
    Budget,
    NodeClassRef,
    NodePool,
    NodeSelectorRequirement,
)
from provisioner.quantity import format_resources
from provisioner.requirements import DOES_NOT_EXIST, EXISTS, GT, GTE, IN, LT, LTE, OPERATORS
from provisioner.taints import EFFECTS, Taint

API_V1 = "karpenter.sh/v1"
API_V1BETA1 = "karpenter.sh/v1beta1"
KIND = "NodePool"
# The values karpui's gate annotations (labels.APPROVAL_MODE) may take: how a command of this NodePool is decided.
APPROVAL_MODES = ("auto", "manual", "auto-below", "dry-run")
# The values of labels.PLAN_IMPROVEMENT: Karpenter's exact plans (the default) or karpui's cheaper re-pack.
PLAN_IMPROVEMENTS = (wk.PLAN_IMPROVEMENT_ENABLED, wk.PLAN_IMPROVEMENT_DISABLED)
KUBELET_ANNOTATION = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
NODECLASS_ANNOTATION = "compatibility.karpenter.sh/v1beta1-nodeclass-reference"

_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
# The CRD's pattern, searched as Go's regexp does: a schedule it lets through that cron cannot read is stored, and
# its budget then allows no disruption (provisioner.disruption.budgets.budget_allowed), as in Karpenter.
_BUDGET_SCHEDULE = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))"
    r"|((.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+))\Z"  # RE2's \s and $
)
_BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_NON_NEGATIVE_INT = re.compile(r"^[0-9]+$")
_INT64_MAX = 2**63 - 1
_DOLLARS = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,12})?$")
# A NodePool's name is the karpenter.sh/nodepool label on its nodes, so it must fit a label value.
_MAX_NAME = 63
_WHEN_UNDERUTILIZED = "WhenUnderutilized"

_SPEC_FIELDS = ("template", "disruption", "limits", "weight", "replicas")
_V1BETA1_SPEC_FIELDS = ("template", "disruption", "limits", "weight")
# The CRD's rules on a static NodePool (spec.replicas set, Karpenter v1.8+).
STATIC_TRANSITION = (
    "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
)
_NODE_CLASS_REF = "spec.template.spec.nodeClassRef"
_TEMPLATE_FIELDS = ("metadata", "spec")
_TEMPLATE_METADATA_FIELDS = ("labels", "annotations")
_V1_TEMPLATE_SPEC_FIELDS = (
    "requirements",
    "taints",
    "startupTaints",
    "nodeClassRef",
    "expireAfter",
    "terminationGracePeriod",
)
_V1BETA1_TEMPLATE_SPEC_FIELDS = ("requirements", "taints", "startupTaints", "nodeClassRef", "kubelet")
_V1_DISRUPTION_FIELDS = ("consolidationPolicy", "consolidateAfter", "budgets")
_V1BETA1_DISRUPTION_FIELDS = ("consolidationPolicy", "consolidateAfter", "expireAfter", "budgets")


def parse_nodepool(doc: dict[str, Any]) -> NodePool:
    """Validate a NodePool manifest of either API version and return the defaulted v1 NodePool."""
    api_version = doc.get("apiVersion")
    if api_version not in (API_V1, API_V1BETA1):
        raise ManifestError(
            f'no matches for kind "NodePool" in version "{api_version}" (use {API_V1} or {API_V1BETA1})',
            field="apiVersion",
        )
    if doc.get("kind") != KIND:
        raise ManifestError(f"expected kind {KIND}, got {json.dumps(doc.get('kind'))[:100]}", field="kind")
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    meta = f.metadata(doc, max_name=_MAX_NAME)
    v1beta1 = api_version == API_V1BETA1
    spec = f.mapping(doc.get("spec"), "spec", allowed=_V1BETA1_SPEC_FIELDS if v1beta1 else _SPEC_FIELDS, required=True)
    template = f.mapping(spec.get("template"), "spec.template", allowed=_TEMPLATE_FIELDS, required=True)
    template_meta = f.mapping(template.get("metadata"), "spec.template.metadata", allowed=_TEMPLATE_METADATA_FIELDS)
    template_spec = f.mapping(
        template.get("spec"),
        "spec.template.spec",
        allowed=_V1BETA1_TEMPLATE_SPEC_FIELDS if v1beta1 else _V1_TEMPLATE_SPEC_FIELDS,
        required=True,
    )
    annotations = f.string_map(meta.get("annotations"), "metadata.annotations")
    _approval(annotations)
    _plan_improvement(annotations)
    template_labels = _template_labels(template_meta.get("labels"))
    requirements = _requirements(template_spec.get("requirements"), "spec.template.spec.requirements")
    taints = _taints(template_spec.get("taints"), "spec.template.spec.taints")
    startup_taints = _taints(template_spec.get("startupTaints"), "spec.template.spec.startupTaints")
    _no_duplicate_taints(taints, startup_taints)
    disruption_fields = _V1BETA1_DISRUPTION_FIELDS if v1beta1 else _V1_DISRUPTION_FIELDS
    disruption = f.mapping(spec.get("disruption"), "spec.disruption", allowed=disruption_fields)
    if v1beta1:
        node_class_ref = _v1beta1_node_class_ref(template_spec.get("nodeClassRef"), annotations)
        if "kubelet" in template_spec:
            kubelet = f.mapping(template_spec["kubelet"], "spec.template.spec.kubelet")
            annotations[KUBELET_ANNOTATION] = json.dumps(kubelet, sort_keys=True)
        policy, consolidate_after = _v1beta1_consolidation(disruption)
        expire_after = _duration(disruption.get("expireAfter", "720h"), "spec.disruption.expireAfter", never=True)
        termination_grace_period = None
    else:
        node_class_ref = _node_class_ref(template_spec.get("nodeClassRef"))
        policy = _enum(
            disruption.get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED),
            "spec.disruption.consolidationPolicy",
            CONSOLIDATION_POLICIES,
        )
        consolidate_after = _duration(
            disruption.get("consolidateAfter", "0s"), "spec.disruption.consolidateAfter", never=True
        )
        expire_after = _duration(template_spec.get("expireAfter", "720h"), "spec.template.spec.expireAfter", never=True)
        termination_grace_period = None
        if template_spec.get("terminationGracePeriod") is not None:
            termination_grace_period = _duration(
                template_spec["terminationGracePeriod"], "spec.template.spec.terminationGracePeriod", never=False
            )
    budgets = _budgets(disruption.get("budgets"), allow_reasons=not v1beta1)
    limits = f.resources(spec.get("limits"), "spec.limits", numbers=False)  # the CRD's int-or-string
    weight = f.integer(spec.get("weight"), "spec.weight", minimum=1, maximum=100)
    replicas = f.integer(spec.get("replicas"), "spec.replicas", minimum=0, maximum=2**63 - 1)
    if replicas is not None:
        if any(name != "nodes" for name in limits):
            raise ManifestError("only 'limits.nodes' is supported on static NodePools", field="spec")
        if weight is not None:
            raise ManifestError("'weight' is not supported on static NodePools", field="spec")
    return NodePool(
        name=meta["name"],
        node_class_ref=node_class_ref,
        requirements=requirements,
        template_labels=template_labels,
        template_annotations=f.annotation_map(template_meta.get("annotations"), "spec.template.metadata.annotations"),
        taints=taints,
        startup_taints=startup_taints,
        expire_after=expire_after,
        termination_grace_period=termination_grace_period,
        consolidation_policy=policy,
        consolidate_after=consolidate_after,
        budgets=budgets,
        limits=limits,
        weight=weight,
        replicas=replicas,
        labels=f.label_map(meta.get("labels"), "metadata.labels"),
        annotations=annotations,
        generation=meta["generation"] if isinstance(meta.get("generation"), int) else 1,
    )


def update_problem(
    stored_spec: Mapping[str, Any], nodepool: NodePool, *, keep_ref: bool = True
) -> ManifestError | None:
    """The CRD's transition rules (oldSelf, karpenter.sh_nodepools.yaml) on an update from the stored v1 spec: a
    NodePool stays static or dynamic, and its nodeClassRef keeps its group and kind (`keep_ref`: False where karpui,
    not the writer, chose the kind, as for a kind-less v1beta1 reference)."""
    if (stored_spec.get("replicas") is not None) != nodepool.static:
        return ManifestError(STATIC_TRANSITION, field="spec")
    ref = ((stored_spec.get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
    if keep_ref and ref.get("group") != nodepool.node_class_ref.group:
        return ManifestError("nodeClassRef.group is immutable", field=_NODE_CLASS_REF)
    if keep_ref and ref.get("kind") != nodepool.node_class_ref.kind:
        return ManifestError("nodeClassRef.kind is immutable", field=_NODE_CLASS_REF)
    return None


def nodepool_to_manifest(nodepool: NodePool) -> dict[str, Any]:
    """The karpenter.sh/v1 manifest of a NodePool, defaults written out as the API server would."""
    metadata: dict[str, Any] = {"name": nodepool.name}
    if nodepool.labels:
        metadata["labels"] = dict(nodepool.labels)
    if nodepool.annotations:
        metadata["annotations"] = dict(nodepool.annotations)
    template_meta: dict[str, Any] = {}
    if nodepool.template_labels:
        template_meta["labels"] = dict(nodepool.template_labels)
    if nodepool.template_annotations:
        template_meta["annotations"] = dict(nodepool.template_annotations)
    ref = nodepool.node_class_ref
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name},
        "requirements": [r.to_spec() for r in nodepool.requirements],
    }
    if nodepool.taints:
        template_spec["taints"] = [t.to_spec() for t in nodepool.taints]
    if nodepool.startup_taints:
        template_spec["startupTaints"] = [t.to_spec() for t in nodepool.startup_taints]
    template_spec["expireAfter"] = nodepool.expire_after
    if nodepool.termination_grace_period is not None:
        template_spec["terminationGracePeriod"] = nodepool.termination_grace_period
    template: dict[str, Any] = {"spec": template_spec}
    if template_meta:
        template = {"metadata": template_meta, **template}
    spec: dict[str, Any] = {
        "template": template,
        "disruption": {
            "consolidationPolicy": nodepool.consolidation_policy,
            "consolidateAfter": nodepool.consolidate_after,
            "budgets": [_budget_to_spec(b) for b in nodepool.budgets],
        },
    }
    if nodepool.limits:
        spec["limits"] = format_resources(nodepool.limits)
    if nodepool.weight is not None:
        spec["weight"] = nodepool.weight
    if nodepool.replicas is not None:
        spec["replicas"] = nodepool.replicas
    return {"apiVersion": API_V1, "kind": KIND, "metadata": metadata, "spec": spec}


def _template_labels(value: Any) -> dict[str, str]:
    path = "spec.template.metadata.labels"
    labels = f.string_map(value, path)
    if len(labels) > 100:
        raise ManifestError("must have at most 100 labels", field=path)
    for key, label in labels.items():
        _label_key(key, f.join(path, key))
        f.label_value(label, f.join(path, key))
    return labels


def _label_key(key: str, path: str) -> None:
    f.qualified_name(key, path)
    # The CRD's rule (karpenter.sh_nodepools.yaml, requirements[].key and template labels): the text before the
    # first slash must not end with "karpenter.sh", so "notkarpenter.sh/x" and a bare "karpenter.sh" are refused too.
    if key not in (wk.CAPACITY_TYPE, wk.NODEPOOL) and key.split("/", 1)[0].endswith("karpenter.sh"):
        raise ManifestError('label domain "karpenter.sh" is restricted', field=path)
    if key in (wk.NODEPOOL, wk.HOSTNAME):
        raise ManifestError(f'label "{key}" is restricted; Karpenter sets it', field=path)
    if wk.is_restricted_label(key):
        raise ManifestError(
            f'label domain "{wk.label_domain(key)}" is restricted (only {wk.CAPACITY_TYPE} may be used)', field=path
        )


def _requirements(value: Any, path: str) -> tuple[NodeSelectorRequirement, ...]:
    if value is None:
        raise ManifestError("Required value", field=path)
    items = f.sequence(value, path, max_items=100)
    result = []
    for index, item in enumerate(items):
        item_path = f.join(path, index)
        spec = f.mapping(item, item_path, allowed=("key", "operator", "values", "minValues"), required=True)
        key = f.string(spec.get("key"), f.join(item_path, "key"), required=True)
        assert key is not None
        key = wk.normalize_key(key)
        _label_key(key, f.join(item_path, "key"))
        operator = f.string(spec.get("operator"), f.join(item_path, "operator"), required=True)
        if operator not in OPERATORS:
            raise ManifestError(
                f'Unsupported value: "{operator}": supported values: {", ".join(OPERATORS)}',
                field=f.join(item_path, "operator"),
            )
        raw_values = f.sequence(spec.get("values"), f.join(item_path, "values"))
        values = []
        for value_index, raw in enumerate(raw_values):
            value_path = f.join(f.join(item_path, "values"), value_index)
            text = f.string(raw, value_path, required=True)
            assert text is not None
            f.label_value(text, value_path)
            values.append(text)
        min_values = f.integer(spec.get("minValues"), f.join(item_path, "minValues"), minimum=1, maximum=50)
        _check_operator_values(operator, key, values, min_values, item_path)
        result.append(NodeSelectorRequirement(key, operator, tuple(values), min_values))
    return tuple(result)


def _check_operator_values(operator: str, key: str, values: list[str], min_values: int | None, path: str) -> None:
    values_path = f.join(path, "values")
    if operator == IN and not values:
        raise ManifestError("requirements with operator 'In' must have a value defined", field=values_path)
    # CEL's int() and Go's strconv.Atoi fail past int64, so a larger number is no integer to Karpenter either.
    if operator in (GT, LT, GTE, LTE) and (
        len(values) != 1 or not _NON_NEGATIVE_INT.match(values[0]) or int(values[0]) > _INT64_MAX
    ):
        raise ManifestError(
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            field=values_path,
        )
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        raise ManifestError(f"requirements with operator '{operator}' must not have values", field=values_path)
    if min_values is not None and operator == IN and min_values > len(values):
        raise ManifestError(
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            field=f.join(path, "minValues"),
        )
    if key == wk.CAPACITY_TYPE and operator == IN and not set(values) & wk.KNOWN_CAPACITY_TYPES:
        raise ManifestError(
            f"no value is a known capacity type ({', '.join(sorted(wk.KNOWN_CAPACITY_TYPES))})", field=values_path
        )


def _taints(value: Any, path: str) -> tuple[Taint, ...]:
    result = []
    for index, item in enumerate(f.sequence(value, path)):
        item_path = f.join(path, index)
        spec = f.mapping(item, item_path, allowed=("key", "value", "effect", "timeAdded"), required=True)
        key = f.string(spec.get("key"), f.join(item_path, "key"), required=True)
        assert key is not None
        f.qualified_name(key, f.join(item_path, "key"))
        taint_value = f.string(spec.get("value"), f.join(item_path, "value")) or ""
        if taint_value:
            # Karpenter checks a taint's value as a qualified name (the CRD's pattern, nodeclaim_validation.go:109),
            # not as a label value: "example.com/on" is a value it accepts.
            f.qualified_name(taint_value, f.join(item_path, "value"), what="taint value")
        effect = _enum(spec.get("effect"), f.join(item_path, "effect"), EFFECTS)
        result.append(Taint(key=key, effect=effect, value=taint_value))
    return tuple(result)


def _no_duplicate_taints(taints: tuple[Taint, ...], startup_taints: tuple[Taint, ...]) -> None:
    seen: set[tuple[str, str]] = set()
    for group, items in (("taints", taints), ("startupTaints", startup_taints)):
        for index, taint in enumerate(items):
            if (taint.key, taint.effect) in seen:
                raise ManifestError(
                    f"duplicate taint key {taint.key!r} with effect {taint.effect!r} across taints and startupTaints",
                    field=f"spec.template.spec.{group}[{index}]",
                )
            seen.add((taint.key, taint.effect))


def _node_class_ref(value: Any) -> NodeClassRef:
    path = "spec.template.spec.nodeClassRef"
    ref = f.mapping(value, path, allowed=("group", "kind", "name"), required=True)
    for part in ("group", "kind", "name"):
        if ref.get(part) == "":  # given but empty: the CRD's `self != ''` rule, where an absent one is required
            raise ManifestError(f"{part} may not be empty", field=f.join(path, part))
    group = f.string(ref.get("group"), f.join(path, "group"), required=True)
    kind = f.string(ref.get("kind"), f.join(path, "kind"), required=True)
    name = f.string(ref.get("name"), f.join(path, "name"), required=True)
    assert group is not None and kind is not None and name is not None
    if "/" in group:
        raise ManifestError(f"group {group!r} must not contain '/'", field=f.join(path, "group"))
    return _known_node_class(NodeClassRef(group=group, kind=kind, name=name))


def _v1beta1_node_class_ref(value: Any, annotations: dict[str, str]) -> NodeClassRef:
    path = "spec.template.spec.nodeClassRef"
    ref = f.mapping(value, path, allowed=("apiVersion", "kind", "name"), required=True)
    name = f.string(ref.get("name"), f.join(path, "name"), required=True)
    api_version = f.string(ref.get("apiVersion"), f.join(path, "apiVersion"))
    group = api_version.split("/", 1)[0] if api_version else ""
    # Without a kind, an apiVersion names its group's node class; with neither, the NodePool's writer resolves it
    # by the node classes that exist (provisioner.nodeclasses), from this default.
    kind = f.string(ref.get("kind"), f.join(path, "kind")) or kind_of_group(group) or DEFAULT_NODE_CLASS_KIND
    assert name is not None
    annotations[NODECLASS_ANNOTATION] = json.dumps(ref, sort_keys=True)
    return _known_node_class(NodeClassRef(group=group or default_group(kind), kind=kind, name=name))


def _known_node_class(ref: NodeClassRef) -> NodeClassRef:
    """The node class must be one karpui serves: a NodePool of another kind could never launch a node."""
    path = "spec.template.spec.nodeClassRef"
    if ref.kind not in NODE_CLASS_KINDS:
        raise ManifestError(
            f"Unsupported value: {json.dumps(ref.kind)[:100]}: supported values: {', '.join(sorted(NODE_CLASS_KINDS))}",
            field=f.join(path, "kind"),
        )
    groups = sorted({version.split("/")[0] for version in NODE_CLASS_KINDS[ref.kind]})
    if ref.group not in groups:
        raise ManifestError(
            f"Unsupported value: {json.dumps(ref.group)[:100]}: {ref.kind} is served by {' or '.join(groups)}",
            field=f.join(path, "group"),
        )
    return ref


def _approval(annotations: dict[str, str]) -> None:
    """karpui's gate annotations mean something, so they are checked here rather than failing in the gate."""
    path = "metadata.annotations"
    mode = annotations.get(wk.APPROVAL_MODE)
    if mode is not None and mode not in APPROVAL_MODES:
        raise ManifestError(
            f"Unsupported value: {json.dumps(mode)[:100]}: supported values: {', '.join(APPROVAL_MODES)}",
            field=f.join(path, wk.APPROVAL_MODE),
        )
    threshold = annotations.get(wk.APPROVAL_THRESHOLD)
    if threshold is not None and not _DOLLARS.match(threshold):
        raise ManifestError(
            f"invalid value {json.dumps(threshold)[:100]}: a non-negative number of dollars per hour, like 0.25",
            field=f.join(path, wk.APPROVAL_THRESHOLD),
        )
    if mode == "auto-below" and threshold is None:
        raise ManifestError(
            "Required value: auto-below approves commands saving up to this many $/h",
            field=f.join(path, wk.APPROVAL_THRESHOLD),
        )


def _plan_improvement(annotations: dict[str, str]) -> None:
    """A misspelt value would silently mean Karpenter's plans, so only the two values are accepted."""
    value = annotations.get(wk.PLAN_IMPROVEMENT)
    if value is not None and value not in PLAN_IMPROVEMENTS:
        raise ManifestError(
            f"Unsupported value: {json.dumps(value)[:100]}: supported values: {', '.join(PLAN_IMPROVEMENTS)}",
            field=f.join("metadata.annotations", wk.PLAN_IMPROVEMENT),
        )


def _v1beta1_consolidation(disruption: dict[str, Any]) -> tuple[str, str]:
    path = "spec.disruption.consolidationPolicy"
    policy = _enum(disruption.get("consolidationPolicy", _WHEN_UNDERUTILIZED), path, (WHEN_EMPTY, _WHEN_UNDERUTILIZED))
    after = disruption.get("consolidateAfter")
    after_path = "spec.disruption.consolidateAfter"
    if policy == _WHEN_UNDERUTILIZED:
        if after is not None and after != "Never":
            raise ManifestError(
                "consolidateAfter cannot be combined with consolidationPolicy=WhenUnderutilized", field=after_path
            )
        return WHEN_EMPTY_OR_UNDERUTILIZED, "Never" if after == "Never" else "0s"
    if after is None:
        raise ManifestError("consolidateAfter must be specified with consolidationPolicy=WhenEmpty", field=after_path)
    return WHEN_EMPTY, _duration(after, after_path, never=True)


def _budgets(value: Any, *, allow_reasons: bool) -> tuple[Budget, ...]:
    path = "spec.disruption.budgets"
    if value is None:
        return DEFAULT_BUDGETS
    allowed = ("nodes", "schedule", "duration", "reasons") if allow_reasons else ("nodes", "schedule", "duration")
    budgets = []
    for index, item in enumerate(f.sequence(value, path, max_items=50)):
        item_path = f.join(path, index)
        spec = f.mapping(item, item_path, allowed=allowed, required=True)
        # The CRD types nodes as a string: kube-apiserver refuses `nodes: 5` unquoted.
        nodes = f.string(spec.get("nodes", "10%"), f.join(item_path, "nodes"), required=True, pattern=_BUDGET_NODES)
        schedule = f.string(spec.get("schedule"), f.join(item_path, "schedule"))
        duration = f.string(spec.get("duration"), f.join(item_path, "duration"), pattern=_BUDGET_DURATION)
        if duration is not None:
            # The CRD's pattern lets any number of hours through; Karpenter reads it as a Go time.Duration, so a
            # longer one could never be evaluated (it stopped every disruption pass of the cluster).
            _duration(duration, f.join(item_path, "duration"), never=False)
        if (schedule is None) != (duration is None):
            missing = "duration" if duration is None else "schedule"
            raise ManifestError("'schedule' must be set with 'duration'", field=f.join(item_path, missing))
        if schedule is not None and not _BUDGET_SCHEDULE.search(schedule):
            raise ManifestError(f"invalid cron schedule {schedule!r}", field=f.join(item_path, "schedule"))
        reasons = None
        if "reasons" in spec:
            reasons_path = f.join(item_path, "reasons")
            reasons = tuple(
                _enum(reason, f.join(reasons_path, i), DISRUPTION_REASONS)
                for i, reason in enumerate(f.sequence(spec["reasons"], reasons_path, max_items=50))
            )
            for i, reason in enumerate(reasons):
                if reason in reasons[:i]:  # x-kubernetes-list-type: set
                    raise ManifestError(f"Duplicate value: {json.dumps(reason)}", field=f.join(reasons_path, i))
        assert nodes is not None
        budgets.append(Budget(nodes=nodes, schedule=schedule, duration=duration, reasons=reasons))
    return tuple(budgets)


def _budget_to_spec(budget: Budget) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodes": budget.nodes}
    if budget.schedule is not None:
        spec["schedule"] = budget.schedule
        spec["duration"] = budget.duration
    if budget.reasons is not None:
        spec["reasons"] = list(budget.reasons)
    return spec


def _duration(value: Any, path: str, *, never: bool) -> str:
    text = f.string(value, path, required=True)
    assert text is not None
    try:
        parse_duration(text, allow_never=never)
    except DurationError as error:
        raise ManifestError(str(error), field=path) from None
    return text


def _enum(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ManifestError(
            f"Unsupported value: {json.dumps(value)}: supported values: {', '.join(allowed)}", field=path
        )
    return str(value)
