"""Serving a stored object at the version a client asked for: NodePools and NodeClaims are stored as karpenter.sh/v1
and served as v1beta1 too, converted both ways as Karpenter's conversion webhook does; other kinds differ between
versions only in name."""

from __future__ import annotations

import copy
import json
from typing import Any

from provisioner.cluster.objects import Obj
from provisioner.manifests.nodeclass import DEFAULT_NODE_CLASS_KIND, default_group, kind_of_group
from provisioner.manifests.nodepool import KUBELET_ANNOTATION, NODECLASS_ANNOTATION

# The version a v1 nodeClassRef's group is served at, for a v1beta1 nodeClassRef's apiVersion.
_NODECLASS_VERSIONS = {"karpenter.kwok.sh": "v1alpha1", "karpenter.k8s.aws": "v1beta1"}
# Karpenter's v1 NodeClaim CRD default, for a NodeClaim created at v1beta1 whose NodePool is gone.
_DEFAULT_EXPIRE_AFTER = "720h"
# Karpenter drops it on conversion, so that its storage migration marks the object again.
_MIGRATED_ANNOTATION = "karpenter.sh/stored-version-migrated"


def _v1beta1_template(spec: dict[str, Any], annotations: dict[str, str]) -> None:
    """A v1 NodePool template's or NodeClaim's spec as v1beta1, in place: the nodeClassRef and kubelet the v1beta1
    manifest had (kept in Karpenter's compatibility annotations, which go), else the ref's group at its v1beta1
    version."""
    ref = spec.get("nodeClassRef") or {}
    kept_ref = annotations.pop(NODECLASS_ANNOTATION, None)
    if kept_ref:
        spec["nodeClassRef"] = json.loads(kept_ref)
    else:
        group = ref.get("group", "")
        spec["nodeClassRef"] = {
            "apiVersion": f"{group}/{_NODECLASS_VERSIONS.get(group, 'v1')}",
            "kind": ref.get("kind", ""),
            "name": ref.get("name", ""),
        }
    kubelet = annotations.pop(KUBELET_ANNOTATION, None)
    if kubelet:
        spec["kubelet"] = json.loads(kubelet)


def nodepool_v1beta1(nodepool: Obj) -> Obj:
    """A karpenter.sh/v1 NodePool as karpenter.sh/v1beta1: the nodeClassRef and kubelet the v1beta1 manifest had,
    expireAfter back under disruption, WhenEmptyOrUnderutilized as WhenUnderutilized, and no
    terminationGracePeriod or budget reasons (v1beta1 has neither)."""
    converted = copy.deepcopy(nodepool)
    converted["apiVersion"] = "karpenter.sh/v1beta1"
    annotations = converted["metadata"].get("annotations") or {}
    spec = converted.setdefault("spec", {})
    template_spec = spec.setdefault("template", {}).setdefault("spec", {})
    _v1beta1_template(template_spec, annotations)
    if not annotations:
        converted["metadata"].pop("annotations", None)
    disruption = spec.setdefault("disruption", {})
    if "expireAfter" in template_spec:
        disruption["expireAfter"] = template_spec.pop("expireAfter")
    template_spec.pop("terminationGracePeriod", None)
    if disruption.get("consolidationPolicy") == "WhenEmptyOrUnderutilized":
        disruption["consolidationPolicy"] = "WhenUnderutilized"
        disruption.pop("consolidateAfter", None)
    for budget in disruption.get("budgets") or []:
        budget.pop("reasons", None)
    return converted


def nodeclaim_v1beta1(nodeclaim: Obj) -> Obj:
    """A karpenter.sh/v1 NodeClaim as karpenter.sh/v1beta1 (Karpenter's NodeClaim.ConvertTo): the nodeClassRef and
    kubelet as for a NodePool, and no expireAfter, terminationGracePeriod or status.lastPodEventTime, which v1beta1
    does not have."""
    converted = copy.deepcopy(nodeclaim)
    converted["apiVersion"] = "karpenter.sh/v1beta1"
    annotations = converted["metadata"].get("annotations") or {}
    annotations.pop(_MIGRATED_ANNOTATION, None)
    spec = converted.setdefault("spec", {})
    _v1beta1_template(spec, annotations)
    if not annotations:
        converted["metadata"].pop("annotations", None)
    spec.pop("expireAfter", None)
    spec.pop("terminationGracePeriod", None)
    (converted.get("status") or {}).pop("lastPodEventTime", None)
    return converted


def nodeclaim_v1(
    nodeclaim: Obj, *, stored: Obj | None, nodepool_expire_after: str | None, nodepool_ref: Obj | None = None
) -> Obj:
    """A karpenter.sh/v1beta1 NodeClaim (a write at v1beta1) as the v1 one to store (Karpenter's
    NodeClaim.ConvertFrom): the nodeClassRef's group from its apiVersion, the ref and kubelet kept in the
    compatibility annotations so they are served back as written. What v1beta1 cannot say is kept as stored
    (expireAfter, terminationGracePeriod, lastPodEventTime); a new NodeClaim expires after its NodePool's
    expireAfter, as Karpenter looks it up. A reference that names no kind (nor apiVersion) is its NodePool's node
    class where the names agree, as the NodePool's own kind-less reference was resolved (provisioner.nodeclasses)."""
    converted = copy.deepcopy(nodeclaim)
    converted["apiVersion"] = "karpenter.sh/v1"
    meta = converted.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    spec = converted.setdefault("spec", {})
    ref = spec.get("nodeClassRef")
    if isinstance(ref, dict):
        annotations[NODECLASS_ANNOTATION] = json.dumps(ref, sort_keys=True)
        api_version = str(ref.get("apiVersion") or "")
        group = api_version.split("/", 1)[0] if api_version else ""
        kind = str(ref.get("kind") or kind_of_group(group) or DEFAULT_NODE_CLASS_KIND)
        if not ref.get("kind") and not group and nodepool_ref and nodepool_ref.get("name") == ref.get("name"):
            kind, group = str(nodepool_ref.get("kind", kind)), str(nodepool_ref.get("group", ""))
        spec["nodeClassRef"] = {"group": group or default_group(kind), "kind": kind, "name": ref.get("name", "")}
    kubelet = spec.pop("kubelet", None)
    if kubelet is not None:
        annotations[KUBELET_ANNOTATION] = json.dumps(kubelet, sort_keys=True)
    else:
        annotations.pop(KUBELET_ANNOTATION, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    stored_spec = (stored or {}).get("spec") or {}
    spec["expireAfter"] = stored_spec.get("expireAfter") or nodepool_expire_after or _DEFAULT_EXPIRE_AFTER
    if "terminationGracePeriod" in stored_spec:
        spec["terminationGracePeriod"] = stored_spec["terminationGracePeriod"]
    last_event = ((stored or {}).get("status") or {}).get("lastPodEventTime")
    if last_event is not None and isinstance(converted.get("status"), dict):
        converted["status"]["lastPodEventTime"] = last_event
    return converted


def at_version(body: Obj, group: str, version: str, *, namespaced: bool) -> Obj:
    """`body` as served at group/version: its apiVersion says so, and cluster-scoped kinds carry no namespace."""
    if body.get("kind") == "NodePool" and version == "v1beta1":
        return nodepool_v1beta1(body)
    if body.get("kind") == "NodeClaim" and version == "v1beta1":
        return nodeclaim_v1beta1(body)
    api_version = f"{group}/{version}" if group else version
    if body.get("apiVersion") == api_version and (namespaced or "namespace" not in body.get("metadata", {})):
        return body
    body = {**body, "apiVersion": api_version}
    if not namespaced and "namespace" in body.get("metadata", {}):
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "namespace"}
    return body
